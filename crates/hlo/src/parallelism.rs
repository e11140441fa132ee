//! When the pipeline splits work over threads: one policy for every step.
//!
//! Each step that can split its work names it with a [`Split`], which
//! carries the size from which splitting pays and the grain of one task,
//! and asks [`Parallelism::current`] whether to split. Every choice gives
//! the same result; only the speed differs, and the tests check that by
//! forcing the policy either way with [`Parallelism::install`].
//!
//! The policy belongs to the thread pool the work runs on, not to a
//! global: [`Parallelism::install`] runs a closure on a pool whose threads
//! all answer the same policy, so every nested split (and everything
//! rayon runs for it) follows it, while other work in the same process
//! (another test, another request) keeps its own. Threads that are not
//! rayon's, such as the driver's scoped threads, carry the policy over
//! with [`Parallelism::enter`].

use std::cell::Cell;
use std::sync::OnceLock;

/// How work is split over threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Parallelism {
    /// Split work from the size at which it pays (each [`Split`]'s
    /// threshold), when the pool has more than one thread.
    #[default]
    Auto,
    /// Never split: every step runs on the calling thread's pool of one.
    Sequential,
    /// Split everything that can be split, in the smallest pieces, on a
    /// pool of several threads: the parallel code paths on small inputs.
    Always,
}

/// A kind of work that a step may split, with what splitting it costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Split {
    /// Parsing a text (a module or one computation), in bytes.
    ParseText,
    /// Printing a module, in instructions.
    Print,
    /// Verifying a module's structure, in instructions.
    Verify,
    /// Computing the layout needs of a computation's instructions, in
    /// instructions.
    LayoutNeeds,
    /// Building a large layout problem's solver structure beside candidate
    /// propagation, and freeing a large problem off the critical path, in
    /// values.
    LargeProblem,
    /// Deciding which of a computation's layout changes are no-ops, in
    /// instructions.
    RelayoutVerdicts,
    /// Finding the layouts each use of a value wants, in instructions.
    RelayoutWants,
    /// Running per-computation steps of a module side by side, in
    /// (computation, step) items.
    Computations,
    /// Freeing computations a session no longer keeps (its parses and
    /// transformed computations, when a run ends), in instructions.
    Release,
    /// Running a stateless pass's per-computation work side by side, and
    /// the pipeline's last steps (printing, counting, verifying) beside
    /// one another, in the module's instructions.
    Module,
}

impl Split {
    /// The size from which [`Parallelism::Auto`] splits this work: below
    /// it, handing out the work costs more than it saves.
    pub const fn threshold(self) -> usize {
        match self {
            Split::ParseText => 256 * 1024,
            Split::Print | Split::Verify => 4096,
            Split::LayoutNeeds | Split::LargeProblem => 1024,
            Split::RelayoutVerdicts | Split::RelayoutWants => 1024,
            // A re-run after a small edit reads every unchanged
            // computation's parts at a glance; threads would cost more to
            // start than they save.
            Split::Computations => 16,
            // Freeing a few thousand instructions costs less than a task.
            Split::Release => 4096,
            // Corpus modules of a hundred instructions or fewer ran 20% to
            // 45% slower (median) with their computations handed to the
            // pool than on one thread: waking a thread cost more than the
            // work it took. A generated module of 1,000 instructions in
            // 167 computations ran faster split (best of 500: 3.2 ms
            // against 4.5 ms), one of 1,000 in one computation about as
            // fast either way.
            Split::Module => 512,
        }
    }

    /// The fewest items one task takes under [`Parallelism::Auto`].
    pub const fn grain(self) -> usize {
        match self {
            // The parser picks its own cuts from the text and the pool.
            Split::ParseText => 8 * 1024,
            Split::Print | Split::Verify | Split::RelayoutVerdicts => 512,
            Split::RelayoutWants => 256,
            Split::LayoutNeeds => 64,
            Split::LargeProblem => 1,
            Split::Computations => 16,
            Split::Release | Split::Module => 1,
        }
    }
}

/// The threads count of the pool that [`Parallelism::Always`] installs:
/// more than one, so that pieces really run side by side even on a
/// machine of one core.
const ALWAYS_THREADS: usize = 4;

thread_local! {
    /// The policy of the pool this thread belongs to, set when the thread
    /// starts (or entered for a scoped thread); `None` on threads of the
    /// global pool and the caller's, which follow [`Parallelism::Auto`].
    static POLICY: Cell<Option<Parallelism>> = const { Cell::new(None) };
}

impl Parallelism {
    /// The policy the current thread follows.
    pub fn current() -> Parallelism {
        POLICY.with(Cell::get).unwrap_or_default()
    }

    /// Whether to split `size` items of `work`, and if so the fewest items
    /// a task takes. `None`: do the work on this thread.
    pub fn split(self, work: Split, size: usize) -> Option<usize> {
        match self {
            Parallelism::Sequential => None,
            Parallelism::Always => (size > 1).then_some(1),
            Parallelism::Auto => (size >= work.threshold() && rayon::current_num_threads() > 1)
                .then_some(work.grain()),
        }
    }

    /// [`Parallelism::split`] under the current thread's policy.
    pub fn splits(work: Split, size: usize) -> Option<usize> {
        Parallelism::current().split(work, size)
    }

    /// Drops `value` off the critical path when `size` items of `work`
    /// make it worth a task of its own, here otherwise. Large problems
    /// hold thousands of small allocations that nothing waits for.
    pub fn drop_later<T: Send + 'static>(work: Split, size: usize, value: T) {
        if Parallelism::splits(work, size).is_some() {
            rayon::spawn(move || drop(value));
        } else {
            drop(value);
        }
    }

    /// Runs `a` and `b` side by side when `size` items of `work` make it
    /// pay under the current policy, else `a` then `b` on this thread.
    pub fn join<A, B, RA, RB>(work: Split, size: usize, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        if Parallelism::splits(work, size).is_some() {
            rayon::join(a, b)
        } else {
            (a(), b())
        }
    }

    /// `f` on each item, in order: on all cores when `size` items of `work`
    /// make it pay under the current policy, else on this thread.
    pub fn map<T, R, F>(work: Split, size: usize, items: &[T], f: F) -> Vec<R>
    where
        T: Sync,
        R: Send,
        F: Fn(&T) -> R + Sync + Send,
    {
        use rayon::prelude::*;
        match Parallelism::splits(work, size) {
            Some(grain) => items.par_iter().with_min_len(grain).map(f).collect(),
            None => items.iter().map(f).collect(),
        }
    }

    /// `f` on each item with its index, in order: on all cores when `size`
    /// items of `work` make it pay under the current policy, else on this
    /// thread. The results are in the items' order either way.
    pub fn map_mut<T, R, F>(work: Split, size: usize, items: &mut [T], f: F) -> Vec<R>
    where
        T: Send,
        R: Send,
        F: Fn(usize, &mut T) -> R + Sync + Send,
    {
        use rayon::prelude::*;
        match Parallelism::splits(work, size) {
            Some(grain) => items
                .par_iter_mut()
                .with_min_len(grain)
                .enumerate()
                .map(|(i, item)| f(i, item))
                .collect(),
            None => items
                .iter_mut()
                .enumerate()
                .map(|(i, item)| f(i, item))
                .collect(),
        }
    }

    /// Runs `f` under this policy: on a pool whose every thread follows
    /// it, so that the splits `f` makes, and theirs, all do. `Auto` runs
    /// `f` on rayon's global pool.
    pub fn install<T: Send>(self, f: impl FnOnce() -> T + Send) -> T {
        match self {
            Parallelism::Auto => rayon::scope(|_| {
                let _entered = self.enter();
                f()
            }),
            Parallelism::Sequential => pool(self, &SEQUENTIAL).install(f),
            Parallelism::Always => pool(self, &ALWAYS).install(f),
        }
    }

    /// Makes the current thread follow this policy until the guard drops:
    /// for a thread that is not a pool's, such as a scoped thread that
    /// works for a step that the caller runs under a policy.
    pub fn enter(self) -> Entered {
        let before = POLICY.with(|p| p.replace(Some(self)));
        Entered { before }
    }
}

/// The guard of [`Parallelism::enter`]: restores the thread's policy.
#[must_use = "the policy holds only while the guard lives"]
pub struct Entered {
    before: Option<Parallelism>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        POLICY.with(|p| p.set(self.before));
    }
}

static SEQUENTIAL: OnceLock<rayon::ThreadPool> = OnceLock::new();
static ALWAYS: OnceLock<rayon::ThreadPool> = OnceLock::new();

/// The pool of `policy`, built the first time it is asked for. The pools
/// are built once per process and live as long as it does.
fn pool(
    policy: Parallelism,
    cell: &'static OnceLock<rayon::ThreadPool>,
) -> &'static rayon::ThreadPool {
    cell.get_or_init(|| {
        let threads = match policy {
            Parallelism::Sequential => 1,
            _ => ALWAYS_THREADS,
        };
        let name = format!("{policy:?}").to_lowercase();
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("tessera-{name}-{i}"))
            .start_handler(move |_| POLICY.with(|p| p.set(Some(policy))))
            .build()
            // Building a pool fails only when the OS refuses threads; a
            // process that cannot start four threads cannot test anything.
            .unwrap_or_else(|e| panic!("cannot start the {policy:?} thread pool: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_policies_reach_nested_splits() {
        for policy in [
            Parallelism::Sequential,
            Parallelism::Always,
            Parallelism::Auto,
        ] {
            let seen = policy.install(|| {
                let (a, b) = rayon::join(Parallelism::current, Parallelism::current);
                (Parallelism::current(), a, b, rayon::current_num_threads())
            });
            assert_eq!((seen.0, seen.1, seen.2), (policy, policy, policy));
            match policy {
                Parallelism::Sequential => assert_eq!(seen.3, 1),
                Parallelism::Always => assert_eq!(seen.3, ALWAYS_THREADS),
                Parallelism::Auto => assert_eq!(seen.3, rayon::current_num_threads()),
            }
        }
        assert_eq!(Parallelism::current(), Parallelism::Auto);
    }

    #[test]
    fn each_policy_decides_as_documented() {
        let big = Split::Print.threshold();
        assert_eq!(
            Parallelism::Sequential.split(Split::Print, usize::MAX),
            None
        );
        assert_eq!(Parallelism::Always.split(Split::Print, 2), Some(1));
        assert_eq!(Parallelism::Always.split(Split::Print, 1), None);
        assert_eq!(Parallelism::Auto.split(Split::Print, big - 1), None);
        let on_many = Parallelism::Always.install(|| Parallelism::Auto.split(Split::Print, big));
        assert_eq!(on_many, Some(Split::Print.grain()));
        let on_one = Parallelism::Sequential.install(|| Parallelism::Auto.split(Split::Print, big));
        assert_eq!(on_one, None, "a pool of one thread never splits");
    }

    #[test]
    fn entering_restores_the_thread_policy() {
        {
            let _outer = Parallelism::Always.enter();
            {
                let _inner = Parallelism::Sequential.enter();
                assert_eq!(Parallelism::current(), Parallelism::Sequential);
            }
            assert_eq!(Parallelism::current(), Parallelism::Always);
        }
        assert_eq!(Parallelism::current(), Parallelism::Auto);
    }

    /// The threads `map_mut` and `join` ran their work on, and what they
    /// gave, under `policy` for `size` items.
    fn where_work_ran(policy: Parallelism, size: usize) -> (Vec<usize>, (usize, usize), usize) {
        let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
        let note = || {
            let thread = std::thread::current().id();
            seen.lock()
                .map(|mut s| s.insert(format!("{thread:?}")))
                .ok();
        };
        policy.install(|| {
            let mut items: Vec<usize> = (0..64).collect();
            let doubled = Parallelism::map_mut(Split::Module, size, &mut items, |i, item| {
                note();
                std::thread::sleep(std::time::Duration::from_millis(1));
                *item += 1;
                i * 2
            });
            assert_eq!(items, (1..65).collect::<Vec<_>>());
            let pair = Parallelism::join(
                Split::Module,
                size,
                || {
                    note();
                    1
                },
                || {
                    note();
                    2
                },
            );
            let threads = seen.lock().map(|s| s.len()).unwrap_or(0);
            (doubled, pair, threads)
        })
    }

    #[test]
    fn helpers_keep_order_and_split_only_when_the_policy_says() {
        let expected: Vec<usize> = (0..64).map(|i| i * 2).collect();
        let small = Split::Module.threshold() - 1;
        for (policy, size, splits) in [
            (Parallelism::Sequential, usize::MAX, false),
            (Parallelism::Auto, small, false),
            (Parallelism::Always, 2, true),
        ] {
            let (doubled, pair, threads) = where_work_ran(policy, size);
            assert_eq!(doubled, expected, "{policy:?}");
            assert_eq!(pair, (1, 2), "{policy:?}");
            // Split, 64 items that sleep a millisecond each reach more
            // than one of the pool's four threads.
            assert_eq!(
                threads > 1,
                splits,
                "{policy:?} ran its work on {threads} threads"
            );
        }
    }
}
