//! What passes that rewrite a computation share: a topological order of
//! its instructions, names for new instructions, and one rebuilt schedule
//! for the instructions they added.
//!
//! Passes add instructions with [`Computation::add_unscheduled`] (placing
//! each one in the schedule as it is added would shift the schedule once
//! per instruction) and say in a [`Placement`] where each goes; one
//! [`Computation::reschedule`] then writes the new schedule in a single
//! pass.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use petgraph::Direction;
use petgraph::visit::{EdgeRef, NodeIndexable};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::{Computation, EditError, InstId};

/// A computation whose instructions depend on each other in a cycle, so
/// that no order runs operands first.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("computation {computation} has a cycle through %{instruction}")]
pub struct CycleError {
    /// The computation.
    pub computation: String,
    /// An instruction on the cycle or waiting for one.
    pub instruction: String,
}

impl Computation {
    /// One more than the largest instruction id: the length of a vector
    /// indexed by [`InstId::index`]. Ids are stable, so removed
    /// instructions leave holes below it.
    pub fn node_bound(&self) -> usize {
        self.graph().node_bound()
    }

    /// Each scheduled instruction's position in the schedule.
    pub fn schedule_positions(&self) -> SchedulePositions {
        let mut at = vec![u32::MAX; self.node_bound()];
        for (i, &id) in self.schedule().iter().enumerate() {
            if let Some(slot) = at.get_mut(id.index()) {
                *slot = i as u32;
            }
        }
        SchedulePositions { at }
    }

    /// The instructions in topological order over data and control edges,
    /// taking ready instructions in schedule order, so that the order is
    /// deterministic and a schedule that is already topological comes back
    /// unchanged.
    pub fn topological_order(&self) -> Result<Vec<InstId>, CycleError> {
        let schedule = self.schedule();
        let graph = self.graph();
        // Each edge is looked at a bounded number of times below.
        crate::work::count(crate::Work::IrEdges, graph.edge_count());
        // XLA prints computations in a valid order, and Kahn's algorithm
        // below (smallest schedule position first) returns such a schedule
        // unchanged: check that in one pass and skip the rest.
        let positions = self.schedule_positions();
        // The schedule position of an instruction (`usize::MAX`, after
        // every position, for one not scheduled).
        let position = |id: InstId| positions.get(id).unwrap_or(usize::MAX);
        let ordered = schedule.iter().enumerate().all(|(i, &id)| {
            graph
                .edges_directed(id, Direction::Incoming)
                .all(|e| position(e.source()) < i)
        });
        if ordered && schedule.len() == graph.node_count() {
            return Ok(schedule.to_vec());
        }
        let mut indegree: FxHashMap<InstId, usize> = FxHashMap::default();
        for &id in schedule {
            indegree.insert(id, graph.edges_directed(id, Direction::Incoming).count());
        }
        // A min-heap on schedule position keeps the order stable.
        let mut ready: BinaryHeap<Reverse<usize>> = schedule
            .iter()
            .enumerate()
            .filter(|(_, id)| indegree.get(id) == Some(&0))
            .map(|(i, _)| Reverse(i))
            .collect();
        let mut order = Vec::with_capacity(schedule.len());
        while let Some(Reverse(i)) = ready.pop() {
            let Some(&id) = schedule.get(i) else {
                continue;
            };
            order.push(id);
            for e in graph.edges_directed(id, Direction::Outgoing) {
                let t = e.target();
                if let Some(d) = indegree.get_mut(&t) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(Reverse(position(t)));
                    }
                }
            }
        }
        if order.len() != schedule.len() {
            let placed: FxHashSet<InstId> = order.iter().copied().collect();
            let stuck = schedule.iter().find(|id| !placed.contains(id));
            return Err(CycleError {
                computation: self.name.clone(),
                instruction: stuck
                    .map(|&id| self.inst(id).name.clone())
                    .unwrap_or_default(),
            });
        }
        Ok(order)
    }

    /// Rebuilds the schedule after instructions were added with
    /// [`Computation::add_unscheduled`]: the old schedule in its order,
    /// each instruction preceded by what `placement` puts before it and
    /// followed by what it puts after it (transitively: what goes after a
    /// new instruction follows it at once), then what goes at the end and
    /// is not placed yet. Fails, leaving the schedule as it was, when the
    /// result is not every instruction exactly once.
    pub fn reschedule(&mut self, placement: &Placement) -> Result<(), EditError> {
        let mut tree = Trees {
            after: &placement.after,
            schedule: Vec::with_capacity(self.graph().node_count()),
            placed: vec![false; self.node_bound()],
            stack: Vec::new(),
        };
        for &id in self.schedule() {
            for &n in placement.before.get(&id).into_iter().flatten() {
                tree.push(n);
            }
            tree.push(id);
        }
        for &id in &placement.at_end {
            if !tree.placed.get(id.index()).is_some_and(|&p| p) {
                tree.push(id);
            }
        }
        self.set_schedule(tree.schedule)
    }
}

/// A schedule being written by [`Computation::reschedule`].
struct Trees<'p> {
    after: &'p FxHashMap<InstId, Vec<InstId>>,
    schedule: Vec<InstId>,
    placed: Vec<bool>,
    stack: Vec<InstId>,
}

impl Trees<'_> {
    /// Appends `root` and, depth first, what goes after it. The stack is
    /// explicit: chains of new instructions are as long as the input
    /// makes them.
    fn push(&mut self, root: InstId) {
        self.stack.push(root);
        while let Some(id) = self.stack.pop() {
            self.schedule.push(id);
            if let Some(p) = self.placed.get_mut(id.index()) {
                *p = true;
            }
            if let Some(next) = self.after.get(&id) {
                self.stack.extend(next.iter().rev());
            }
        }
    }
}

/// Where [`Computation::reschedule`] puts instructions that are not in the
/// schedule yet.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    /// Per scheduled instruction, new ones to run just before it, in order.
    pub before: FxHashMap<InstId, Vec<InstId>>,
    /// Per instruction (old or new), new ones to run right after it, in
    /// order.
    pub after: FxHashMap<InstId, Vec<InstId>>,
    /// New instructions to run after all the others, unless placed
    /// already.
    pub at_end: Vec<InstId>,
}

/// Where each instruction of a computation was in its schedule when
/// [`Computation::schedule_positions`] looked. A vector indexed by id
/// rather than a hash map: the copies of a large computation look up
/// instructions in program order, which a vector keeps near each other.
#[derive(Clone, Debug)]
pub struct SchedulePositions {
    at: Vec<u32>,
}

impl SchedulePositions {
    /// The position of `id`; `None` for an instruction added since.
    pub fn get(&self, id: InstId) -> Option<usize> {
        match self.at.get(id.index()) {
            Some(&p) if p != u32::MAX => Some(p as usize),
            _ => None,
        }
    }
}

/// The names in use in a computation, to give new instructions names of
/// their own.
///
/// It keeps a 64-bit hash of each name rather than a copy of it: taking a
/// copy of every name of a 1e6-instruction computation allocated a million
/// strings each time a pass added an instruction to it. Two names with one
/// hash only make [`FreshNames::fresh`] skip a free name, never hand out a
/// taken one.
#[derive(Clone, Debug, Default)]
pub struct FreshNames {
    taken: FxHashSet<u64>,
}

impl FreshNames {
    /// The names of `comp`'s instructions.
    pub fn of(comp: &Computation) -> FreshNames {
        FreshNames {
            taken: comp
                .instructions()
                .map(|(_, i)| name_hash(&i.name))
                .collect(),
        }
    }

    /// `base`, or else `base.1`, `base.2`, ...: the first name not taken,
    /// which is taken from now on.
    pub fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while !self.taken.insert(name_hash(&name)) {
            name = format!("{base}.{k}");
            k += 1;
        }
        name
    }
}

/// The hash [`FreshNames`] keeps of a name: the same in every run.
fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

#[cfg(test)]
mod tests {
    use shape::{PrimitiveType, Shape};

    use super::*;
    use crate::{Instruction, Opcode};

    fn scalar(name: &str, opcode: Opcode) -> Instruction {
        Instruction::new(name, opcode, Shape::array(PrimitiveType::F32, &[]))
    }

    fn names(comp: &Computation) -> Vec<&str> {
        comp.instructions().map(|(_, i)| i.name.as_str()).collect()
    }

    /// `p`, `n = negate(p)`, `r = add(p, n)`.
    fn small() -> (Computation, [InstId; 3]) {
        let mut c = Computation::new("c");
        let p = c.add(scalar("p", Opcode::Parameter), &[]).unwrap();
        let n = c.add(scalar("n", Opcode::Negate), &[p]).unwrap();
        let r = c.add(scalar("r", Opcode::Add), &[p, n]).unwrap();
        c.set_root(r).unwrap();
        (c, [p, n, r])
    }

    #[test]
    fn topological_order_keeps_a_valid_schedule_and_repairs_another() {
        let (mut c, [p, n, r]) = small();
        assert_eq!(c.topological_order().unwrap(), vec![p, n, r]);
        c.set_schedule(vec![r, n, p]).unwrap();
        assert_eq!(c.topological_order().unwrap(), vec![p, n, r]);
        // A control edge from the add to the negate closes a cycle.
        c.add_control_dependency(r, n).unwrap();
        let e = c.topological_order().unwrap_err();
        assert_eq!((e.computation.as_str(), e.instruction.as_str()), ("c", "r"));
    }

    /// New instructions go before and after their anchors, what follows a
    /// new instruction follows it at once, and an at-end instruction
    /// placed already is not placed twice.
    #[test]
    fn reschedule_places_before_after_and_at_end() {
        let (mut c, [p, n, r]) = small();
        let add = |c: &mut Computation, name: &str, of: InstId| {
            c.add_unscheduled(scalar(name, Opcode::Copy), &[of])
                .unwrap()
        };
        let a = add(&mut c, "a", p);
        let b = add(&mut c, "b", a);
        let d = add(&mut c, "d", p);
        let e = add(&mut c, "e", r);
        let mut placement = Placement::default();
        placement.after.insert(p, vec![a, d]);
        placement.after.insert(a, vec![b]);
        placement.before.insert(r, vec![e]);
        placement.at_end = vec![b, e];
        // `e` reads `r` but was placed before it: the schedule is rebuilt
        // as asked; ordering it is the caller's business.
        c.reschedule(&placement).unwrap();
        assert_eq!(names(&c), ["p", "a", "b", "d", "n", "e", "r"]);
        assert_eq!(c.schedule()[4], n);
        // An instruction left out makes the new schedule invalid: refused,
        // and the old one stays.
        let f = add(&mut c, "f", p);
        let before = c.schedule().to_vec();
        assert_eq!(
            c.reschedule(&Placement::default()),
            Err(EditError::BadSchedule)
        );
        assert_eq!(c.schedule(), before);
        let placement = Placement {
            at_end: vec![f],
            ..Placement::default()
        };
        c.reschedule(&placement).unwrap();
        assert_eq!(names(&c).last(), Some(&"f"));
    }

    /// A chain of new instructions as long as the input is placed without
    /// recursion.
    #[test]
    fn reschedule_handles_long_chains() {
        let (mut c, [p, ..]) = small();
        let mut placement = Placement::default();
        let mut prev = p;
        for k in 0..200_000 {
            let id = c
                .add_unscheduled(scalar(&format!("c{k}"), Opcode::Copy), &[prev])
                .unwrap();
            placement.after.insert(prev, vec![id]);
            prev = id;
        }
        c.reschedule(&placement).unwrap();
        assert_eq!(c.len(), 200_003);
        assert_eq!(c.topological_order().unwrap(), c.schedule());
    }

    #[test]
    fn fresh_names_skip_taken_ones() {
        let (c, _) = small();
        let mut names = FreshNames::of(&c);
        assert_eq!(names.fresh("n"), "n.1");
        assert_eq!(names.fresh("n"), "n.2");
        assert_eq!(names.fresh("q"), "q");
        assert_eq!(names.fresh("q"), "q.1");
    }
}
