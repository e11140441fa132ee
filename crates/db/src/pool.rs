//! The threads the engine hands a phase's computations to: kept for the
//! life of the process, as many as the widest split asked for so far.
//!
//! Not rayon's pool: the queries split large computations on rayon's
//! global pool (parsing, relayout, verifying), and a rayon thread that
//! waits for such a split inside a query runs other queued jobs meanwhile.
//! Were the engine's jobs on that pool, such a thread could start one of
//! them, with another database handle, in the middle of a query, which
//! salsa refuses with a panic ("cannot change database mid-query"). A
//! thread of this pool waits for rayon without taking its jobs, and runs
//! one batch's work at a time.
//!
//! Not threads of a run's own either, as the engine had (scoped threads
//! for each phase and each level): each new thread starts with an empty
//! allocator heap, whose pages the kernel clears as they are first
//! touched, and a run has as many phases and levels as its call graph is
//! deep.
//!
//! A batch owns what its work reads (a handle on the database, the
//! computations, the step), so a helper that starts after the batch's
//! caller finished finds nothing left and does nothing: the caller never
//! waits for a helper that has not started, and takes its results once
//! every helper that started has finished.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use hlo::Parallelism;

use crate::{Database, SourceComputation};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The pool: a queue of jobs, and how many threads take from it.
struct Pool {
    queue: Mutex<VecDeque<Job>>,
    ready: Condvar,
    threads: Mutex<usize>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        queue: Mutex::new(VecDeque::new()),
        ready: Condvar::new(),
        threads: Mutex::new(0),
    })
}

impl Pool {
    /// Queues `jobs`, with at least that many threads to take them (a
    /// thread the OS refuses leaves its jobs to the caller).
    fn submit(&'static self, jobs: Vec<Job>) {
        if let Ok(mut threads) = self.threads.lock() {
            while *threads < jobs.len() {
                let spawned = std::thread::Builder::new()
                    .name("tessera-engine".into())
                    .spawn(move || self.work());
                if spawned.is_err() {
                    break;
                }
                *threads += 1;
            }
        }
        if let Ok(mut queue) = self.queue.lock() {
            queue.extend(jobs);
        }
        self.ready.notify_all();
    }

    /// A thread's life: take a job, run it, again.
    fn work(&self) {
        loop {
            let job = {
                let Ok(mut queue) = self.queue.lock() else {
                    return;
                };
                loop {
                    if let Some(job) = queue.pop_front() {
                        break job;
                    }
                    queue = match self.ready.wait(queue) {
                        Ok(q) => q,
                        Err(_) => return,
                    };
                }
            };
            job();
        }
    }
}

/// One computation of a batch, with what [`each`] orders it by.
pub(crate) struct Work {
    pub(crate) comp: SourceComputation,
    /// Its text's length: the longest go first.
    pub(crate) size: usize,
}

/// The length of text from which a computation's queries run on a handle
/// of their own (see [`each`]).
const WIDE_TEXT: usize = 64 * 1024;

type Step<T> = dyn Fn(&Database, SourceComputation) -> T + Send + Sync;

/// A batch: the computations, the next one to take, their results, and
/// who works on it.
struct Batch<T> {
    todo: Vec<Work>,
    order: Vec<usize>,
    next: AtomicUsize,
    results: Vec<Mutex<Option<T>>>,
    step: Box<Step<T>>,
    policy: Parallelism,
    state: Mutex<State>,
    idle: Condvar,
}

/// Who works on a batch: the handle helpers clone (gone once the caller
/// is done, so that a helper starting later does nothing), how many
/// helpers work, and the first panic one of them met.
struct State {
    db: Option<Database>,
    active: usize,
    panic: Option<Box<dyn Any + Send>>,
}

impl<T> Batch<T> {
    /// Takes computations and runs the step on each, on `handle` (or, for
    /// a computation with a long text, on a handle made for it: salsa
    /// keeps, per handle, one record of reads for each depth of nested
    /// queries, and clears it for every query after, in time proportional
    /// to the most reads it ever held; on one handle, every small query
    /// after the entry of a module of 16,667 computations cleared a table
    /// of 16,667 reads).
    fn work(&self, handle: &Database) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = self.order.get(k) else { break };
            let w = &self.todo[i];
            let out = if w.size > WIDE_TEXT {
                (self.step)(&handle.clone(), w.comp)
            } else {
                (self.step)(handle, w.comp)
            };
            if let Ok(mut slot) = self.results[i].lock() {
                *slot = Some(out);
            }
        }
    }

    /// A helper's part: unless the caller is done, a handle of its own and
    /// the work, then its handle dropped before the caller hears it is
    /// done (the engine writes inputs after a batch, and salsa waits for
    /// every other handle to be dropped first).
    fn help(&self) {
        let handle = {
            let Ok(mut state) = self.state.lock() else {
                return;
            };
            let Some(db) = &state.db else { return };
            let handle = db.clone();
            state.active += 1;
            handle
        };
        let _policy = self.policy.enter();
        let worked = catch_unwind(AssertUnwindSafe(|| self.work(&handle)));
        drop(handle);
        if let Ok(mut state) = self.state.lock() {
            state.active -= 1;
            if let Err(p) = worked {
                state.panic.get_or_insert(p);
            }
        }
        self.idle.notify_all();
    }
}

/// Runs `step` for every computation of `todo` and returns the results in
/// `todo`'s order: side by side, with as many helpers as the
/// [`Parallelism`] policy splits so many computations over, each taking
/// the longest text left (the entry is often most of a module and last in
/// its text; taken last, it ran alone while the other threads had nothing
/// left), else in order on this thread. Every thread works on a handle of
/// its own, never on the engine's, which writes inputs between phases.
pub(crate) fn each<T: Send + 'static>(
    db: &Database,
    todo: Vec<Work>,
    step: impl Fn(&Database, SourceComputation) -> T + Send + Sync + 'static,
) -> Vec<T> {
    if todo.is_empty() {
        return Vec::new();
    }
    let order = by_size_descending(&todo.iter().map(|w| w.size).collect::<Vec<_>>());
    let policy = Parallelism::current();
    let threads = policy
        .split(hlo::Split::Computations, todo.len())
        .map_or(1, |grain| {
            rayon::current_num_threads().min(todo.len().div_ceil(grain))
        });
    let n = todo.len();
    let batch = Arc::new(Batch {
        todo,
        order,
        next: AtomicUsize::new(0),
        results: (0..n).map(|_| Mutex::new(None)).collect(),
        step: Box::new(step),
        policy,
        state: Mutex::new(State {
            db: (threads > 1).then(|| db.clone()),
            active: 0,
            panic: None,
        }),
        idle: Condvar::new(),
    });
    if threads > 1 {
        let jobs: Vec<Job> = (1..threads)
            .map(|_| {
                let batch = Arc::clone(&batch);
                Box::new(move || batch.help()) as Job
            })
            .collect();
        pool().submit(jobs);
    }
    let own = db.clone();
    let worked = catch_unwind(AssertUnwindSafe(|| batch.work(&own)));
    drop(own);
    let panic = finish(&batch);
    if let Err(p) = worked {
        resume_unwind(p);
    }
    if let Some(p) = panic {
        resume_unwind(p);
    }
    let batch = match Arc::try_unwrap(batch) {
        Ok(batch) => batch,
        // A helper that started too late still holds the batch; the
        // results are taken out of their slots instead.
        Err(shared) => {
            return shared
                .results
                .iter()
                .filter_map(|slot| slot.lock().ok().and_then(|mut s| s.take()))
                .collect();
        }
    };
    batch
        .results
        .into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// Ends the caller's part of `batch`: no helper starts from now on, and
/// every one that started has finished (and dropped its handle). The
/// first panic a helper met, if any.
fn finish<T>(batch: &Batch<T>) -> Option<Box<dyn Any + Send>> {
    let Ok(mut state) = batch.state.lock() else {
        return None;
    };
    state.db = None;
    while state.active > 0 {
        state = match batch.idle.wait(state) {
            Ok(s) => s,
            Err(_) => return None,
        };
    }
    state.panic.take()
}

/// The indices of `sizes`, largest first; equal sizes keep their order.
fn by_size_descending(sizes: &[usize]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use salsa::Setter;

    /// A database holding a module of `n` small computations, and them.
    fn computations(n: usize) -> (Database, Vec<SourceComputation>) {
        let mut text = String::from("HloModule m\n\n");
        for i in 0..n {
            text.push_str(&format!(
                "c{i} {{\n  ROOT p{i} = f32[] parameter(0)\n}}\n\n"
            ));
        }
        text.push_str("ENTRY main {\n  ROOT x = f32[] parameter(0)\n}\n");
        let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
        let mut db = Database::default();
        let m = db.load(&text, "m.hlo", target).unwrap();
        let comps = m.computations(&db).clone();
        (db, comps)
    }

    fn todo(db: &Database, comps: &[SourceComputation]) -> Vec<Work> {
        comps
            .iter()
            .map(|&comp| Work {
                comp,
                size: comp.text(db).len(),
            })
            .collect()
    }

    /// Every policy gives every result, in the order of the work, and the
    /// database takes a write right after (no helper holds a handle).
    #[test]
    fn results_come_back_in_order_and_no_handle_is_left() {
        let (mut db, comps) = computations(40);
        for policy in [
            Parallelism::Sequential,
            Parallelism::Auto,
            Parallelism::Always,
        ] {
            let _entered = policy.enter();
            let names = each(&db, todo(&db, &comps), |db, c| c.name(db).clone());
            let want: Vec<String> = comps.iter().map(|c| c.name(&db).clone()).collect();
            assert_eq!(names, want, "{policy:?}");
            comps[0]
                .set_text(&mut db)
                .to("c0 {\n  ROOT q = f32[] parameter(0)\n}".into());
        }
    }

    /// A panic in a step, on a helper or on the caller, reaches the caller.
    #[test]
    fn a_panic_in_a_step_reaches_the_caller() {
        let (db, comps) = computations(40);
        let _always = Parallelism::Always.enter();
        let last = comps[comps.len() - 1];
        let caught = catch_unwind(AssertUnwindSafe(|| {
            each(&db, todo(&db, &comps), move |_, c| {
                assert!(c != last, "the step failed");
            })
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn computations_are_handed_out_largest_first_ties_in_module_order() {
        // An entry of 900 bytes after small regions: it is taken first.
        assert_eq!(by_size_descending(&[10, 30, 10, 900, 30]), [3, 1, 4, 0, 2]);
        assert!(by_size_descending(&[]).is_empty());
    }
}
