//! The call graph of a module: who calls each computation and how, and an
//! order in which to visit computations so that callees come before their
//! callers (or the other way round).
//!
//! It lives with the IR because it is a fact of the module's structure
//! that passes and the incremental database both read; nothing in it
//! depends on layouts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashSet;

use crate::{AttrValue, CompId, Computation, KnownAttr, Module, Opcode};

/// How a computation is used by the instructions that call it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CallRole {
    /// The body of a while loop.
    WhileBody,
    /// The condition of a while loop with this body.
    WhileCondition { body: CompId },
    /// A branch of a conditional; `branches` lists all of them.
    Branch {
        conditional: String,
        branches: Vec<CompId>,
    },
    /// Called by `call` or `fusion`.
    Called,
    /// Applied to elements (reduce, sort, map, scatter, ...).
    Applied,
}

/// Who calls each computation, and how.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallGraph {
    /// Per computation: its roles, first caller first.
    pub roles: Vec<Vec<CallRole>>,
    /// Per computation: the computations it calls, in instruction order,
    /// while bodies before their conditions.
    pub callees: Vec<Vec<CompId>>,
    /// Per computation: the caller of each of its call sites (one entry per
    /// calling instruction; applied computations count once per caller).
    pub sites: Vec<Vec<CompId>>,
}

impl CallGraph {
    /// Builds the call graph of a module.
    pub fn new(module: &Module) -> CallGraph {
        let calls = module
            .computation_ids()
            .map(|c| (c, calls_of(module.computation(c))));
        CallGraph::from_calls(module.computations.len(), calls)
    }

    /// Builds the call graph from each computation's own calls (see
    /// [`calls_of`]), so that an incremental database can recompute one
    /// computation's calls alone.
    pub fn from_calls(
        n: usize,
        calls: impl IntoIterator<Item = (CompId, Vec<(CompId, CallRole)>)>,
    ) -> CallGraph {
        let mut g = CallGraph {
            roles: vec![Vec::new(); n],
            callees: vec![Vec::new(); n],
            sites: vec![Vec::new(); n],
        };
        // The lists keep first occurrences in order; the sets say what they
        // hold. Searching the lists instead was quadratic: an entry that
        // calls 166,667 computations took 10 s to build its list of callees.
        let mut callee_pairs: FxHashSet<(CompId, CompId)> = FxHashSet::default();
        let mut role_pairs: FxHashSet<(CompId, CallRole)> = FxHashSet::default();
        for (caller, list) in calls {
            for (callee, role) in list {
                // Ids out of range name no computation: skipped.
                let (Some(sites), Some(roles), Some(callees)) = (
                    g.sites.get_mut(callee.index()),
                    g.roles.get_mut(callee.index()),
                    g.callees.get_mut(caller.index()),
                ) else {
                    continue;
                };
                crate::count(crate::Work::IrEdges, 1);
                sites.push(caller);
                if callee_pairs.insert((caller, callee)) {
                    callees.push(callee);
                }
                // Cloned only when new: a branch role holds a name and a list.
                let key = (callee, role);
                if !role_pairs.contains(&key) {
                    roles.push(key.1.clone());
                    role_pairs.insert(key);
                }
            }
        }
        // A session keeps the graph: its lists, mostly of one or two
        // entries, without the room growing left.
        for lists in [&mut g.callees, &mut g.sites] {
            lists.iter_mut().for_each(Vec::shrink_to_fit);
        }
        g.roles.iter_mut().for_each(Vec::shrink_to_fit);
        g
    }
}

/// The order in which a module's assignments are computed so that every
/// computation finds what it reads already computed: no chain of queries
/// then follows the depth of the call graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallSchedule {
    /// Callees before callers: alone assignments (and free ones, for
    /// branches) read only their callees' signatures.
    pub bottom_up: Vec<CompId>,
    /// Callers before callees, and a loop body before its condition: a
    /// final assignment reads its only caller's choice, and a loop
    /// condition its body's final parameters.
    pub top_down: Vec<CompId>,
    /// `bottom_up` cut into levels: a computation comes after all those it
    /// calls (and a loop body after its condition) in an earlier level,
    /// so the computations of one level can be assigned side by side.
    pub bottom_up_levels: Vec<Vec<CompId>>,
    /// `top_down` cut into levels the same way: a computation comes after
    /// all its callers (and a loop condition after its body) in an earlier
    /// level.
    pub top_down_levels: Vec<Vec<CompId>>,
}

/// `order` cut into levels by `level` (per computation), each level in
/// `order`'s order.
fn by_level(order: &[CompId], level: &[usize]) -> Vec<Vec<CompId>> {
    let count = order
        .iter()
        .map(|c| level[c.index()] + 1)
        .max()
        .unwrap_or(0);
    let mut levels = vec![Vec::new(); count];
    for &c in order {
        levels[level[c.index()]].push(c);
    }
    levels
}

impl CallGraph {
    /// Whether `id` is a conditional branch.
    pub fn is_branch(&self, id: CompId) -> bool {
        self.roles
            .get(id.index())
            .is_some_and(|r| r.iter().any(|r| matches!(r, CallRole::Branch { .. })))
    }

    /// Whether `id` is a loop condition.
    pub fn is_condition(&self, id: CompId) -> bool {
        self.roles.get(id.index()).is_some_and(|r| {
            r.iter()
                .any(|r| matches!(r, CallRole::WhileCondition { .. }))
        })
    }

    /// The schedule of the whole module: Kahn's algorithm over the call
    /// edges and the body-before-condition edges, lowest index first among
    /// the ready ones. Computations on a cycle of calls (which the input
    /// check refuses) come last, in index order.
    pub fn schedule(&self) -> CallSchedule {
        let n = self.callees.len();
        let mut after: Vec<Vec<CompId>> = self.callees.clone();
        for (id, roles) in self.roles.iter().enumerate() {
            for r in roles {
                if let CallRole::WhileCondition { body } = r
                    && body.index() < n
                    && !after[body.index()].contains(&CompId(id as u32))
                {
                    after[body.index()].push(CompId(id as u32));
                }
            }
        }
        let mut waiting = vec![0usize; n];
        for list in &after {
            for c in list {
                waiting[c.index()] += 1;
            }
        }
        let mut ready: BinaryHeap<Reverse<u32>> = (0..n)
            .filter(|&i| waiting[i] == 0)
            .map(|i| Reverse(i as u32))
            .collect();
        let mut top_down = Vec::with_capacity(n);
        let mut placed = vec![false; n];
        while let Some(Reverse(i)) = ready.pop() {
            top_down.push(CompId(i));
            placed[i as usize] = true;
            for c in &after[i as usize] {
                waiting[c.index()] -= 1;
                if waiting[c.index()] == 0 {
                    ready.push(Reverse(c.0));
                }
            }
        }
        let cyclic = top_down.len() < n;
        top_down.extend((0..n).filter(|&i| !placed[i]).map(|i| CompId(i as u32)));
        let bottom_up: Vec<CompId> = top_down.iter().rev().copied().collect();
        // A level is one past the deepest computation that must come
        // before: callers (top down) or callees (bottom up). Computations
        // on a cycle (refused by the input check) are ordered one per
        // level, as a single list.
        let (mut down, mut up) = (vec![0usize; n], vec![0usize; n]);
        if cyclic {
            for (level, c) in top_down.iter().enumerate() {
                down[c.index()] = level;
            }
            for (level, c) in bottom_up.iter().enumerate() {
                up[c.index()] = level;
            }
        } else {
            for &c in &top_down {
                for d in &after[c.index()] {
                    down[d.index()] = down[d.index()].max(down[c.index()] + 1);
                }
            }
            for &c in &bottom_up {
                up[c.index()] = after[c.index()]
                    .iter()
                    .map(|d| up[d.index()] + 1)
                    .max()
                    .unwrap_or(0);
            }
        }
        CallSchedule {
            bottom_up_levels: by_level(&bottom_up, &up),
            top_down_levels: by_level(&top_down, &down),
            bottom_up,
            top_down,
        }
    }
}

/// The computations `comp` calls and how, in instruction order, with while
/// bodies before their conditions.
pub fn calls_of(comp: &Computation) -> Vec<(CompId, CallRole)> {
    let mut out: Vec<(CompId, CallRole)> = Vec::new();
    // Scalar computations applied by many reductions appear once.
    let mut applied: FxHashSet<CompId> = FxHashSet::default();
    for (_, inst) in comp.instructions() {
        let single = |k: KnownAttr| match inst.attrs.get(k) {
            Some(AttrValue::Computation(c)) => Some(*c),
            _ => None,
        };
        match inst.opcode {
            Opcode::While => {
                if let Some(body) = single(KnownAttr::Body) {
                    out.push((body, CallRole::WhileBody));
                    if let Some(cond) = single(KnownAttr::Condition) {
                        out.push((cond, CallRole::WhileCondition { body }));
                    }
                }
            }
            Opcode::Conditional => {
                let branches: Vec<CompId> = inst.attrs.called_computations().collect();
                for &b in &branches {
                    out.push((
                        b,
                        CallRole::Branch {
                            conditional: inst.name.clone(),
                            branches: branches.clone(),
                        },
                    ));
                }
            }
            Opcode::Call | Opcode::Fusion | Opcode::AsyncStart => {
                out.extend(
                    inst.attrs
                        .called_computations()
                        .map(|c| (c, CallRole::Called)),
                );
            }
            _ => {
                for c in inst.attrs.called_computations() {
                    if applied.insert(c) {
                        out.push((c, CallRole::Applied));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The levels of a schedule: each holds only computations whose
    /// callees (bottom up) or callers (top down) are in earlier levels,
    /// and a loop condition sits after its body top down, before it
    /// bottom up; the levels list the schedule's order.
    #[test]
    fn levels_cut_the_schedule_where_a_computation_waits_on_another() {
        // 0 = entry: calls 1 and 2, and loops with body 3 and condition 4;
        // 1 calls 5; 2, 3, 4 and 5 call nothing.
        let c = |i: u32| CompId(i);
        let calls = vec![
            (
                c(0),
                vec![
                    (c(1), CallRole::Called),
                    (c(2), CallRole::Called),
                    (c(3), CallRole::WhileBody),
                    (c(4), CallRole::WhileCondition { body: c(3) }),
                ],
            ),
            (c(1), vec![(c(5), CallRole::Called)]),
        ];
        let s = CallGraph::from_calls(6, calls).schedule();
        assert_eq!(s.top_down, [c(0), c(1), c(2), c(3), c(4), c(5)]);
        assert_eq!(
            s.top_down_levels,
            [vec![c(0)], vec![c(1), c(2), c(3)], vec![c(4), c(5)]]
        );
        assert_eq!(
            s.bottom_up_levels,
            [vec![c(5), c(4), c(2)], vec![c(3), c(1)], vec![c(0)]]
        );
        let flat = |levels: &[Vec<CompId>]| levels.concat();
        assert_eq!(flat(&s.top_down_levels).len(), 6);
        assert_eq!(flat(&s.bottom_up_levels).len(), 6);
    }

    /// Computations on a cycle of calls get a level each, in the
    /// schedule's order: nothing runs beside them.
    #[test]
    fn a_cycle_is_scheduled_one_computation_per_level() {
        let c = |i: u32| CompId(i);
        let calls = vec![
            (c(0), vec![(c(1), CallRole::Called)]),
            (c(1), vec![(c(0), CallRole::Called)]),
            (c(2), vec![]),
        ];
        let s = CallGraph::from_calls(3, calls).schedule();
        assert_eq!(s.top_down, [c(2), c(0), c(1)]);
        assert_eq!(s.top_down_levels, [vec![c(2)], vec![c(0)], vec![c(1)]]);
        assert_eq!(s.bottom_up_levels, [vec![c(1)], vec![c(0)], vec![c(2)]]);
    }
}
