//! Counts of the pipeline's basic operations, so that tests can bound how
//! work grows with the input without timing anything.
//!
//! The loops whose trip counts decide the pipeline's complexity count
//! their steps with [`count`]: walks over a value's uses and unlinked
//! edges in the IR, the relations a layout problem is built of and the
//! offers candidate propagation makes, what the solver touches per move,
//! and the uses relayout looks at. A module twice as large must cost
//! about twice the steps; a loop that turns quadratic shows up as a ratio
//! that grows with the size, deterministically, where a timing would be
//! noise.
//!
//! The counts live in the counting thread's own cells (an increment is a
//! load and a store), and [`counted`] runs its closure under
//! [`Parallelism::Sequential`], on one thread, so that every step is seen.

use std::cell::Cell;
use std::fmt;

use crate::parallelism::Parallelism;

/// What a counted step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Work {
    /// An IR edge looked at through a value's uses or by a topological
    /// sort, or unlinked and relinked by an operand edit.
    IrEdges,
    /// A value or relation of a layout problem, as it is built.
    ProblemItems,
    /// A candidate layout offered along a relation during propagation.
    Offers,
    /// A value, relation or re-tiling whose cost a solver move re-reads,
    /// or an input of a group the solver gathers.
    SolverSteps,
    /// An instruction's operand that relayout compares with what it wants.
    RelayoutUses,
    /// A tuple element or leaf looked at while copies are put into a
    /// tuple: a rebuilt operand, or the computation's result.
    TupleLeaves,
}

impl Work {
    /// Every kind, in the order [`WorkCounts`] prints them.
    pub const ALL: [Work; 6] = [
        Work::IrEdges,
        Work::ProblemItems,
        Work::Offers,
        Work::SolverSteps,
        Work::RelayoutUses,
        Work::TupleLeaves,
    ];

    /// The kind's name in reports and test messages.
    pub fn name(self) -> &'static str {
        match self {
            Work::IrEdges => "ir-edges",
            Work::ProblemItems => "problem-items",
            Work::Offers => "offers",
            Work::SolverSteps => "solver-steps",
            Work::RelayoutUses => "relayout-uses",
            Work::TupleLeaves => "tuple-leaves",
        }
    }

    fn slot(self) -> usize {
        self as usize
    }
}

thread_local! {
    static COUNTS: [Cell<u64>; Work::ALL.len()] = const {
        [const { Cell::new(0) }; Work::ALL.len()]
    };
}

/// Counts `steps` steps of `kind` on this thread.
#[inline]
pub fn count(kind: Work, steps: usize) {
    COUNTS.with(|c| {
        if let Some(cell) = c.get(kind.slot()) {
            cell.set(cell.get().wrapping_add(steps as u64));
        }
    });
}

/// The steps counted of each kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkCounts([u64; Work::ALL.len()]);

impl WorkCounts {
    /// The steps of `kind`.
    pub fn get(&self, kind: Work) -> u64 {
        self.0.get(kind.slot()).copied().unwrap_or(0)
    }
}

impl fmt::Display for WorkCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, kind) in Work::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", kind.name(), self.get(*kind))?;
        }
        Ok(())
    }
}

/// Runs `f` on one thread, under [`Parallelism::Sequential`], and returns
/// its result with the steps it counted.
pub fn counted<T: Send>(f: impl FnOnce() -> T + Send) -> (T, WorkCounts) {
    Parallelism::Sequential.install(|| {
        let before = snapshot();
        let value = f();
        let after = snapshot();
        let mut counts = WorkCounts::default();
        for ((d, a), b) in counts.0.iter_mut().zip(after.0).zip(before.0) {
            *d = a.wrapping_sub(b);
        }
        (value, counts)
    })
}

fn snapshot() -> WorkCounts {
    let mut counts = WorkCounts::default();
    COUNTS.with(|c| {
        for (d, cell) in counts.0.iter_mut().zip(c) {
            *d = cell.get();
        }
    });
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_sees_the_steps_of_its_closure_only() {
        count(Work::Offers, 5);
        let ((), counts) = counted(|| {
            count(Work::Offers, 3);
            let ((), ()) = rayon::join(|| count(Work::IrEdges, 2), || count(Work::IrEdges, 4));
        });
        assert_eq!(counts.get(Work::Offers), 3);
        assert_eq!(
            counts.get(Work::IrEdges),
            6,
            "both halves of a join run here"
        );
        assert_eq!(counts.get(Work::SolverSteps), 0);
        assert_eq!(
            counts.to_string(),
            "ir-edges 6, problem-items 0, offers 3, solver-steps 0, relayout-uses 0, tuple-leaves 0"
        );
    }
}
