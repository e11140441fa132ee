//! The module's call graph as the queries and the engine read it: a salsa
//! input the engine writes from the computations' own calls (see
//! [`crate::InputFacts::roles`]), never a query over every computation.
//!
//! A query that read every computation's calls would be checked, value by
//! value, after every edit anywhere: on a module of 16,667 computations
//! that alone was three checks per computation. As an input it is one
//! lookup, and the engine writes it only when some computation's calls
//! changed.

use hlo::{CallGraph, CallRole, CallSchedule, CompId};

/// The call graph, its schedule, and what the engine asks of it per
/// computation: where it sits in each order, who calls it, and which loop
/// conditions read it as their body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Calls {
    /// The call graph.
    pub graph: CallGraph,
    /// Its schedule (callees first, and callers first, with levels).
    pub schedule: CallSchedule,
    /// Per computation: its bottom-up level and position.
    up_rank: Vec<Rank>,
    /// Per computation: its top-down level and position.
    down_rank: Vec<Rank>,
    /// Per computation: the computations that call it, once each, in the
    /// order of their first call.
    callers: Vec<Vec<CompId>>,
    /// Per computation: the loop conditions whose body it is.
    conditions: Vec<Vec<CompId>>,
}

/// Where a computation sits in one order of the schedule: its level, then
/// its position in the whole order. Ordered, so that visiting ranks in
/// increasing order visits the levels in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank {
    /// The level.
    pub level: u32,
    /// The position in the whole order.
    pub position: u32,
}

impl Calls {
    /// The call graph of `n` computations, from each computation's own
    /// calls, in computation order.
    pub fn new<'a>(
        n: usize,
        calls: impl IntoIterator<Item = (CompId, &'a [(CompId, CallRole)])>,
    ) -> Calls {
        let graph = CallGraph::from_calls(n, calls.into_iter().map(|(c, l)| (c, l.to_vec())));
        let schedule = graph.schedule();
        let ranks = |levels: &[Vec<CompId>]| {
            let mut ranks = vec![Rank::default(); n];
            let mut position = 0u32;
            for (level, members) in levels.iter().enumerate() {
                for c in members {
                    if let Some(r) = ranks.get_mut(c.index()) {
                        *r = Rank {
                            level: level as u32,
                            position,
                        };
                    }
                    position += 1;
                }
            }
            ranks
        };
        let up_rank = ranks(&schedule.bottom_up_levels);
        let down_rank = ranks(&schedule.top_down_levels);
        let mut callers: Vec<Vec<CompId>> = vec![Vec::new(); n];
        for (caller, callees) in graph.callees.iter().enumerate() {
            for c in callees {
                if let Some(list) = callers.get_mut(c.index()) {
                    list.push(CompId(caller as u32));
                }
            }
        }
        let mut conditions: Vec<Vec<CompId>> = vec![Vec::new(); n];
        for (id, roles) in graph.roles.iter().enumerate() {
            for r in roles {
                if let CallRole::WhileCondition { body } = r
                    && let Some(list) = conditions.get_mut(body.index())
                    && !list.contains(&CompId(id as u32))
                {
                    list.push(CompId(id as u32));
                }
            }
        }
        Calls {
            graph,
            schedule,
            up_rank,
            down_rank,
            callers,
            conditions,
        }
    }

    /// How many computations.
    pub fn len(&self) -> usize {
        self.callers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.callers.is_empty()
    }

    /// Where `id` sits bottom up (callees first).
    pub fn up_rank(&self, id: CompId) -> Rank {
        self.up_rank.get(id.index()).copied().unwrap_or_default()
    }

    /// Where `id` sits top down (callers first).
    pub fn down_rank(&self, id: CompId) -> Rank {
        self.down_rank.get(id.index()).copied().unwrap_or_default()
    }

    /// The computations that call `id`, once each.
    pub fn callers(&self, id: CompId) -> &[CompId] {
        self.callers.get(id.index()).map_or(&[], Vec::as_slice)
    }

    /// The loop conditions whose body is `id`.
    pub fn conditions(&self, id: CompId) -> &[CompId] {
        self.conditions.get(id.index()).map_or(&[], Vec::as_slice)
    }

    /// Whether `id`'s assignment is read by no other computation's: it is
    /// only applied (by reductions and the like) or a loop condition,
    /// which callers do not read (see [`layout_assignment::context_for`]).
    pub fn unread(&self, id: CompId) -> bool {
        self.graph.roles.get(id.index()).is_none_or(|roles| {
            roles
                .iter()
                .all(|r| matches!(r, CallRole::Applied | CallRole::WhileCondition { .. }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Callers are listed once each, conditions by their body, and ranks
    /// follow the schedule's levels.
    #[test]
    fn callers_conditions_and_ranks_follow_the_graph() {
        let c = CompId;
        // 0 = entry: calls 1 twice, and loops with body 2 and condition 3.
        let calls: Vec<(CompId, Vec<(CompId, CallRole)>)> = vec![
            (
                c(0),
                vec![
                    (c(1), CallRole::Called),
                    (c(1), CallRole::Called),
                    (c(2), CallRole::WhileBody),
                    (c(3), CallRole::WhileCondition { body: c(2) }),
                ],
            ),
            (c(1), vec![]),
            (c(2), vec![]),
            (c(3), vec![]),
        ];
        let calls = Calls::new(4, calls.iter().map(|(c, l)| (*c, l.as_slice())));
        assert_eq!(calls.callers(c(1)), &[c(0)]);
        assert_eq!(calls.callers(c(0)), &[] as &[CompId]);
        assert_eq!(calls.conditions(c(2)), &[c(3)]);
        assert!(calls.up_rank(c(1)) < calls.up_rank(c(0)));
        assert!(calls.down_rank(c(0)) < calls.down_rank(c(1)));
        // The body before its condition, top down.
        assert!(calls.down_rank(c(2)) < calls.down_rank(c(3)));
        assert!(calls.unread(c(3)));
        assert!(!calls.unread(c(1)));
    }
}
