//! The solver: chooses one layout per value to minimise bytes moved.
//!
//! The energy of a labelling is exact: for each value, the bytes of one
//! copy per distinct layout its uses need beyond its own (copies of a value
//! into one layout are shared), plus the bytes of every transpose or
//! reshape that the chosen layouts do not make a bitcast. Search starts
//! from each value's best-guess candidate and improves by moves that
//! relabel a whole group of values that want one layout (the operands and
//! results of layout-preserving ops), then single values, until no move
//! helps. Every choice is made in a fixed order with strict improvement,
//! so the result does not depend on hash order or timing.

use smallvec::SmallVec;
use target::CostWeights;

use crate::algebra;
use crate::ids::{
    GroupId, LayoutId, LayoutKey, RelationId, RetileId, TiSlice, TiVec, ValueId, empty_lists,
};
use crate::problem::{Built, Problem, Relation, RelationKind, Value, restrict_layout, with_layout};
use crate::retile::Retiling;

/// The most improvement sweeps; convergence usually takes two or three.
const MAX_SWEEPS: usize = 8;

/// The cost of a labelling no copy can make valid.
pub(crate) const INFEASIBLE: f64 = 1e18;

/// The most layouts a group move tries; more buy little and cost time on
/// large groups.
const MAX_GROUP_CANDIDATES: usize = 8;

/// The most values a move across a broadcast or transpose relabels at once; larger
/// groups are left to the single-group search, to keep the pass linear.
const MAX_JOINT_MOVE: usize = 4096;

/// The fewest values all moves across broadcasts and transposes may
/// relabel in one solve; the budget grows with the problem by
/// `JOINT_MOVES_PER_VALUE`. Many broadcasts can feed one large group (a
/// bias broadcast in every layer of a model), and trying a joint move for
/// each costs the group's size every time: without a budget a module of a
/// few thousand instructions took time quadratic in its size. A budget
/// proportional to the problem keeps the work linear and still reaches
/// every layer of a deep model (a fixed one ran out a third of the way
/// through large_transformer_24_f32's attention transposes on tpu).
const JOINT_MOVE_BUDGET: usize = 1 << 15;

/// Joint-move budget per value of the problem (see `JOINT_MOVE_BUDGET`).
const JOINT_MOVES_PER_VALUE: usize = 16;

/// A movement relation's cache: whether each (value, result) label pair
/// makes it a bitcast.
type MoveCache = SmallVec<[(LayoutId, LayoutId, bool); 2]>;

/// A re-tiling op's cache: its cost for each (operand, result) label pair.
type RetileCache = SmallVec<[(LayoutId, LayoutId, f64); 2]>;

/// A chosen layout per value.
pub struct Solution {
    /// Per value: the id of its chosen layout in its table.
    pub labels: TiVec<ValueId, LayoutId>,
    /// Sweeps run and moves applied, for the report.
    pub sweeps: usize,
    /// Moves that lowered the cost.
    pub moves: usize,
    /// Per relation: the layout id it needs its value copied into, under
    /// the final labels (`None`: the value serves it as it is).
    pub needs: TiVec<RelationId, Option<LayoutId>>,
    /// Bytes of tile padding that dimension combining saved.
    pub padding_saved: u64,
    /// Groups of values kept in an order that stores more padding than
    /// another would, and why (tiled targets only).
    pub orientations: Vec<Orientation>,
}

/// A group of values (joined by layout-preserving ops) whose chosen order
/// stores more padding than the order that would store the least, with
/// what the cost model weighed: moving the group there saves
/// `padding_saved` and adds `cost_added` (copies, with their buffers'
/// padding, data movement and re-tiling).
#[derive(Clone, Debug, PartialEq)]
pub struct Orientation {
    /// The member whose least-padding layout was weighed (the group's
    /// first member that has more padding than it needs).
    pub value: ValueId,
    /// The free members of the group, which would move together.
    pub members: usize,
    /// `value`'s least-padding layout.
    pub least: LayoutId,
    /// Weighed padding the move would save.
    pub padding_saved: f64,
    /// Everything else it would cost.
    pub cost_added: f64,
    /// Relations that would then need a copy, in relation order.
    pub copies: Vec<RelationId>,
    /// Relations (transposes and reshapes) that would stop being bitcasts.
    pub movements: Vec<RelationId>,
}

pub(crate) struct Solver<'a, 'c> {
    pub(crate) p: &'a mut Problem<'c>,
    pub(crate) target: &'a target::TargetSpec,
    pub(crate) weights: CostWeights,
    pub(crate) labels: TiVec<ValueId, LayoutId>,
    /// Relations whose `out` is each value (their readers' needs depend on it).
    outs: Adjacency<RelationId>,
    /// Matrix needs on each value (they depend on the value's own layout).
    matrix_reads: Adjacency<RelationId>,
    /// Per relation: the layout it currently needs its value in (whether or
    /// not the value already has it), kept up to date as labels change.
    raw: TiVec<RelationId, Option<LayoutId>>,
    /// Per value: how many relations currently need each layout. A value's
    /// copy cost is the bytes of the needed layouts other than its own, so
    /// it is computed from these counts in time independent of how many
    /// relations read the value.
    counts: TiVec<ValueId, SmallVec<[(LayoutId, u32); 2]>>,
    /// Movement relations touching each value.
    moves: Adjacency<RelationId>,
    /// Per relation: the need id for each `out` label seen so far. A
    /// relation sees few labels, so a small inline list beats a global map
    /// (which on large modules turns every lookup into a cache miss).
    need_cache: TiVec<RelationId, SmallVec<[(LayoutId, LayoutId); 2]>>,
    /// Per movement relation: whether a label pair makes it a bitcast.
    move_cache: TiVec<RelationId, MoveCache>,
    /// Ops that may re-tile touching each value (indices into
    /// `Problem::retilings`).
    retiles: Adjacency<RetileId>,
    /// Per re-tiling op: its cost for each (operand, result) label pair seen.
    retile_cache: TiVec<RetileId, RetileCache>,
}

/// Solves the problem under `target`'s cost weights.
pub fn solve(built: &mut Built<'_>, target: &target::TargetSpec) -> Solution {
    solve_with(built, target, Looks::SkipStill, None).0
}

/// Solves the problem with the default search, then with the exact solver
/// (`crate::exact`) from the search's answer, within `limits`: the
/// labelling is the search's unless the exact solver found a cheaper one.
/// Also returns what the exact solver proved.
pub(crate) fn solve_exact(
    built: &mut Built<'_>,
    target: &target::TargetSpec,
    limits: &crate::exact::Limits,
) -> (Solution, crate::exact::Bound) {
    let (solution, bound) = solve_with(built, target, Looks::SkipStill, Some(limits));
    (solution, bound.unwrap_or_default())
}

/// The solution with these labels: the needs they leave, as the solver
/// would report them (tests price arbitrary labellings with it).
#[cfg(test)]
pub(crate) fn solution_for(
    p: &mut Problem<'_>,
    target: &target::TargetSpec,
    labels: &TiSlice<ValueId, LayoutId>,
) -> Solution {
    let structure = Structure::of(p);
    let (s, _) = Solver::new(p, target, labels.to_owned(), structure);
    let needs = s.needs();
    Solution {
        labels: s.labels,
        sweeps: 0,
        moves: 0,
        needs,
        padding_saved: 0,
        orientations: Vec::new(),
    }
}

/// Which groups a sweep looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Looks {
    /// Every group, every sweep.
    #[cfg_attr(not(test), allow(dead_code))]
    All,
    /// Not a group that moved nothing last time and whose inputs no move
    /// has touched since (see `Solver::search`): the same answer, sooner.
    SkipStill,
}

fn solve_with(
    built: &mut Built<'_>,
    target: &target::TargetSpec,
    looks: Looks,
    exact: Option<&crate::exact::Limits>,
) -> (Solution, Option<crate::exact::Bound>) {
    let p = &mut built.problem;
    let structure = match built.structure.take() {
        Some(structure) => structure,
        None => Structure::of(p),
    };
    let labels = p
        .values
        .iter()
        .map(|v| v.candidates.first().copied().unwrap_or_default())
        .collect();
    let (mut s, groups) = Solver::new(p, target, labels, structure);
    let Groups {
        atoms,
        components,
        split,
    } = groups;
    let (sweeps, mut moves) = s.search(&atoms, &components, looks);
    moves += s.joint_moves(&components);
    if !split.is_empty() {
        // Parts of components split at fixed values, from the answer so
        // far: strictly improving moves only, so nothing gets dearer.
        moves += s.search(&[], &split, looks).1;
    }
    moves += s.neighbour_moves(&atoms, &components);
    let combines = target.tiling.as_ref().is_some_and(|t| t.combine_dimensions);
    if combines {
        s.combine(&components);
    }
    let bound = exact.map(|limits| crate::exact::improve(&mut s, &components, limits).0);
    // What combined layouts save, read off the final labels (the search's,
    // combining's or the exact solver's).
    let padding_saved = if combines { s.combining_savings() } else { 0 };
    let orientations = if target.tiling.is_some() {
        s.orientations(&components)
    } else {
        Vec::new()
    };
    let needs = s.needs();
    (
        Solution {
            labels: s.labels,
            sweeps,
            moves,
            needs,
            padding_saved,
            orientations,
        },
        bound,
    )
}

/// What the solver derives from a problem's relations, locks and
/// re-tilings alone, never from candidates or labels: its adjacency lists,
/// its groups, and its caches, empty. Candidate propagation changes none
/// of these inputs, so a large problem builds this on another core while
/// its candidates propagate (see `Problem::build_with`); the solver builds
/// it itself otherwise. Either way it is the same value.
pub(crate) struct Structure {
    outs: Adjacency<RelationId>,
    matrix_reads: Adjacency<RelationId>,
    moves: Adjacency<RelationId>,
    retiles: Adjacency<RetileId>,
    /// Values locked together, values that share a layout through `Same`
    /// relations, and parts of those split at their fixed values.
    groups: Groups,
    raw: TiVec<RelationId, Option<LayoutId>>,
    counts: TiVec<ValueId, SmallVec<[(LayoutId, u32); 2]>>,
    need_cache: TiVec<RelationId, SmallVec<[(LayoutId, LayoutId); 2]>>,
    move_cache: TiVec<RelationId, MoveCache>,
    retile_cache: TiVec<RetileId, RetileCache>,
}

impl Structure {
    /// The structure of `p`.
    fn of(p: &Problem<'_>) -> Structure {
        let (locks, fixed) = value_facts(&p.values);
        Structure::build(&p.relations, &locks, &fixed, &p.retilings)
    }

    /// The structure of a problem with these relations, per-value locks
    /// (`Value::lock`, one per value) and re-tilings.
    pub(crate) fn build(
        relations: &TiSlice<RelationId, Relation>,
        locks: &TiSlice<ValueId, ValueId>,
        fixed: &TiSlice<ValueId, bool>,
        retilings: &TiSlice<RetileId, Retiling>,
    ) -> Structure {
        let n = locks.len();
        let outs = Adjacency::build(n, |emit| {
            for (r, rel) in relations.iter_enumerated() {
                match rel.kind {
                    RelationKind::Broadcast { pin: Some(_), .. } => {}
                    RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => {
                        emit(out, r)
                    }
                    _ => {}
                }
            }
        });
        let matrix_reads = Adjacency::build(n, |emit| {
            for (r, rel) in relations.iter_enumerated() {
                if let RelationKind::Need {
                    matrix: Some(_), ..
                } = rel.kind
                {
                    emit(rel.v, r);
                }
            }
        });
        let moves = Adjacency::build(n, |emit| {
            for (r, rel) in relations.iter_enumerated() {
                match rel.kind {
                    RelationKind::Broadcast {
                        out, pin: Some(_), ..
                    } => emit(out, r),
                    RelationKind::Movement { out, .. } => {
                        emit(rel.v, r);
                        if out != rel.v {
                            emit(out, r);
                        }
                    }
                    _ => {}
                }
            }
        });
        let retiles = Adjacency::build(n, |emit| {
            for (i, t) in retilings.iter_enumerated() {
                emit(t.operand, i);
                if t.out != t.operand {
                    emit(t.out, i);
                }
            }
        });
        let relation_count = relations.len();
        Structure {
            outs,
            matrix_reads,
            moves,
            retiles,
            groups: groups(relations, locks, fixed),
            raw: vec![None; relation_count].into(),
            counts: empty_lists(n).into(),
            need_cache: empty_lists(relation_count).into(),
            move_cache: empty_lists(relation_count).into(),
            retile_cache: empty_lists(retilings.len()).into(),
        }
    }
}

/// Each value's lock and whether it is fixed: all that
/// [`Structure::build`] reads of the values.
pub(crate) fn value_facts(
    values: &TiSlice<ValueId, Value>,
) -> (TiVec<ValueId, ValueId>, TiVec<ValueId, bool>) {
    let locks = values.iter().map(|v| v.lock).collect();
    let fixed = values.iter().map(|v| v.fixed.is_some()).collect();
    (locks, fixed)
}

/// Groups of values: those locked together (atoms), those that share a
/// layout through `Same` relations as well (components), and the parts of
/// components that hold a fixed value when that value is taken out
/// (`split`, only where the component falls into several movable parts).
/// Groups depend on the relations only, not on labels: found once.
///
/// A fixed value cannot move, so it ties nothing together: joined through
/// one (an entry parameter read by several softmax chains), the chains can
/// only move all at once, and a chain that would gain alone never does
/// (softmax_axes on tpu: 174325760 bytes with the join, against an optimum
/// of 123469824). The search keeps the joined components, which its
/// answers on every other module were tuned with, and then tries the parts
/// (see `polish`).
fn groups(
    relations: &TiSlice<RelationId, Relation>,
    locks: &TiSlice<ValueId, ValueId>,
    fixed: &TiSlice<ValueId, bool>,
) -> Groups {
    let mut uf = UnionFind::new(locks.len());
    for (i, &lock) in locks.iter_enumerated() {
        uf.union(i, lock);
    }
    let atoms = uf.groups();
    let mut apart = UnionFind::new(locks.len());
    for (i, &lock) in locks.iter_enumerated() {
        apart.union(i, lock);
    }
    for rel in relations {
        if let RelationKind::Same { out } = rel.kind {
            uf.union(rel.v, out);
            if !fixed[rel.v] && !fixed[out] {
                apart.union(rel.v, out);
            }
        }
    }
    let components = uf.groups();
    // A part is worth a look when its component holds a fixed value and
    // more than one part of it can move.
    let mut parts_of: TiVec<ValueId, u32> = vec![0; locks.len()].into();
    let mut parts = apart.groups();
    parts.retain(|g| g.len() > 1 || !fixed[g[0]]);
    for g in &parts {
        parts_of[uf.find(g[0])] += 1;
    }
    let split = parts
        .into_iter()
        .filter(|g| {
            let root = uf.find(g[0]);
            parts_of[root] > 1 && g.iter().all(|&v| !fixed[v])
        })
        .collect();
    Groups {
        atoms,
        components,
        split,
    }
}

/// Two groups joined by a broadcast, a transpose or a reduce (see
/// `Solver::joint_moves`): moving `from` to an order moves `to` to the
/// order `map` induces (`from`'s dimension `d` is `to`'s `map[d]`, or
/// none: a dimension a reduce removes).
struct Joint {
    from: GroupId,
    to: GroupId,
    /// The value of `to` on the joint, whose shape the induced layout is for.
    to_value: ValueId,
    map: SmallVec<[Option<usize>; 6]>,
    /// `to` has dimensions `from` lacks (a broadcast's new ones; a
    /// reduce's reduced ones, seen from its result): they go most major,
    /// where they keep the op moving whole tiles.
    adds_major: bool,
}

/// The groups of `groups`.
struct Groups {
    /// Values locked together.
    atoms: Vec<Vec<ValueId>>,
    /// Values that share a layout through `Same` relations (both from a
    /// union-find).
    components: Vec<Vec<ValueId>>,
    /// Parts of components split at their fixed values.
    split: Vec<Vec<ValueId>>,
}

impl<'a, 'c> Solver<'a, 'c> {
    /// A solver of `p` with `labels`, on `structure`, its needs and counts
    /// those of the labels; and the structure's groups.
    fn new(
        p: &'a mut Problem<'c>,
        target: &'a target::TargetSpec,
        labels: TiVec<ValueId, LayoutId>,
        structure: Structure,
    ) -> (Self, Groups) {
        let Structure {
            outs,
            matrix_reads,
            moves,
            retiles,
            groups,
            raw,
            counts,
            need_cache,
            move_cache,
            retile_cache,
        } = structure;
        let relation_count = p.relations.len();
        let mut s = Solver {
            p,
            target,
            weights: target.cost.clone(),
            labels,
            outs,
            matrix_reads,
            raw,
            counts,
            moves,
            need_cache,
            move_cache,
            retiles,
            retile_cache,
        };
        for r in (0..relation_count).map(RelationId::new) {
            s.refresh(r);
        }
        (s, groups)
    }

    /// Per relation, the layout id it needs beyond its value's own.
    fn needs(&self) -> TiVec<RelationId, Option<LayoutId>> {
        self.p.relations.keys().map(|r| self.needed(r)).collect()
    }

    /// The layout id relation `r` needs beyond its value's own, if any.
    fn needed(&self, r: RelationId) -> Option<LayoutId> {
        let v = self.p.relations[r].v;
        self.raw[r].filter(|&id| id != self.labels[v])
    }

    /// Recomputes the layout relation `r` needs and updates its value's
    /// counts.
    fn refresh(&mut self, r: RelationId) {
        let new = self.raw_need(r);
        let old = self.raw[r];
        if new == old {
            return;
        }
        let v = self.p.relations[r].v;
        let counts = &mut self.counts[v];
        if let Some(old) = old
            && let Some(slot) = counts.iter_mut().find(|(id, _)| *id == old)
        {
            slot.1 -= 1;
        }
        if let Some(new) = new {
            match counts.iter_mut().find(|(id, _)| *id == new) {
                Some(slot) => slot.1 += 1,
                None => counts.push((new, 1)),
            }
        }
        self.raw[r] = new;
    }

    /// Gives value `m` layout `id`, and refreshes the needs that depend on it.
    pub(crate) fn relabel(&mut self, m: ValueId, id: LayoutId) {
        if self.labels[m] == id {
            return;
        }
        self.labels[m] = id;
        for i in 0..self.outs[m].len() {
            let r = self.outs[m][i];
            self.refresh(r);
        }
        for i in 0..self.matrix_reads[m].len() {
            let r = self.matrix_reads[m][i];
            self.refresh(r);
        }
    }

    /// The layout id a broadcast relation reads its operand in when its
    /// result has label `out_label`.
    fn broadcast_read_under(&mut self, r: RelationId, out_label: LayoutId) -> LayoutId {
        let p = &mut *self.p;
        let rel = &p.relations[r];
        let RelationKind::Broadcast { out, dims, .. } = &rel.kind else {
            return LayoutId::default();
        };
        let (v, out) = (rel.v, *out);
        if let Some(&(_, id)) = self.need_cache[r].iter().find(|(l, _)| *l == out_label) {
            return id;
        }
        let out_key = p.values[out].key(out_label);
        let restricted =
            restrict_layout(self.target, &p.values[v].shape, p.table.get(out_key), dims);
        let key = p.table.key(&restricted);
        let id = p.values[v].intern(&p.table, key);
        self.need_cache[r].push((out_label, id));
        id
    }

    /// The layout id relation `r` needs its value in (whatever the value's
    /// own), or `None`: no need, or a matrix need the value already meets.
    fn raw_need(&mut self, r: RelationId) -> Option<LayoutId> {
        let rel = &self.p.relations[r];
        let lv = self.labels[rel.v];
        let lo = match rel.kind {
            RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => self.labels[out],
            _ => LayoutId::default(),
        };
        self.need_under(r, lv, lo)
    }

    /// The layout id relation `r` needs its value in when the value has
    /// label `lv` and the relation's `out` (a `Same` or `Broadcast`
    /// relation's result) has label `lo`; `None` as in `raw_need`.
    pub(crate) fn need_under(
        &mut self,
        r: RelationId,
        lv: LayoutId,
        lo: LayoutId,
    ) -> Option<LayoutId> {
        let p = &mut *self.p;
        let rel = &p.relations[r];
        let v = rel.v;
        let id = match &rel.kind {
            RelationKind::Broadcast { pin: Some(_), .. } => return None,
            RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => {
                let out = *out;
                let out_label = lo;
                if let Some(&(_, id)) = self.need_cache[r].iter().find(|(l, _)| *l == out_label) {
                    id
                } else {
                    let out_key = p.values[out].key(out_label);
                    let key = match &rel.kind {
                        RelationKind::Broadcast { dims, .. } => {
                            let restricted = restrict_layout(
                                self.target,
                                &p.values[v].shape,
                                p.table.get(out_key),
                                dims,
                            );
                            p.table.key(&restricted)
                        }
                        // Another element type, or on a tiled target
                        // other dimensions, may need the value's own
                        // tiling of the order.
                        _ if self.target.tiling.is_some()
                            || !crate::tiling::tiled_alike(
                                Some(self.target),
                                &p.values[out].shape,
                                &p.values[v].shape,
                            ) =>
                        {
                            let layout = crate::tiling::same_layout_for(
                                self.target,
                                p.table.get(out_key),
                                &p.values[out].shape,
                                &p.values[v].shape,
                            );
                            p.table.key(&layout)
                        }
                        _ => out_key,
                    };
                    let id = p.values[v].intern(&p.table, key);
                    self.need_cache[r].push((out_label, id));
                    id
                }
            }
            RelationKind::Need { need_id, matrix } => {
                if let Some(m) = matrix {
                    let current = p.table.get(p.values[v].key(lv));
                    if p.matrix_needs[*m].accepts_order(current) {
                        return None;
                    }
                }
                *need_id
            }
            RelationKind::Movement { .. } => return None,
        };
        Some(id)
    }

    /// The cost of the copies value `v` needs: one per distinct layout its
    /// readers need other than its own, each the bytes it writes and the
    /// padding its buffer stores (`Value::padding_cost`).
    fn copy_cost(&self, v: ValueId) -> f64 {
        let value = &self.p.values[v];
        let own = self.labels[v];
        self.counts[v]
            .iter()
            .filter(|&&(id, c)| c > 0 && id != own)
            .map(|&(id, _)| value.copy_cost(id, &self.weights))
            .sum()
    }

    /// The cost of the tile padding stored with value `v` in its layout,
    /// when the target weighs padding.
    fn padding_cost(&self, v: ValueId) -> f64 {
        self.padding_cost_of(v, self.labels[v])
    }

    /// The cost of the tile padding stored with value `v` in layout `l`
    /// (`Value::padding_cost`).
    pub(crate) fn padding_cost_of(&self, v: ValueId, l: LayoutId) -> f64 {
        self.p.values[v].padding_cost(l, &self.weights)
    }

    /// The cost of movement relation `r`: zero when it is a bitcast.
    fn move_cost(&mut self, r: RelationId) -> f64 {
        let rel = &self.p.relations[r];
        let (v, out) = match rel.kind {
            RelationKind::Broadcast { out, .. } | RelationKind::Movement { out, .. } => {
                (rel.v, out)
            }
            _ => return 0.0,
        };
        let (lv, lo) = (self.labels[v], self.labels[out]);
        match self.move_cost_under(r, lv, lo) {
            Some(cost) => cost,
            None => INFEASIBLE,
        }
    }

    /// The cost of movement relation `r` when its value has label `lv` and
    /// its result label `lo`: zero when it is a bitcast; `None` for a
    /// pinned broadcast whose result order disagrees with the pin (no copy
    /// can serve it).
    pub(crate) fn move_cost_under(
        &mut self,
        r: RelationId,
        lv: LayoutId,
        lo: LayoutId,
    ) -> Option<f64> {
        let rel = &self.p.relations[r];
        if let RelationKind::Broadcast { pin: Some(pin), .. } = rel.kind {
            return (self.broadcast_read_under(r, lo) == pin).then_some(0.0);
        }
        let RelationKind::Movement { out, transpose } = &rel.kind else {
            return Some(0.0);
        };
        let (v, out) = (rel.v, *out);
        let cached = self.move_cache[r]
            .iter()
            .find(|&&(a, b, _)| a == lv && b == lo)
            .map(|&(_, _, x)| x);
        let bitcast = match cached {
            Some(b) => b,
            None => {
                let p = &*self.p;
                let a = with_layout(&p.values[v].shape, p.table.get(p.values[v].key(lv)).clone());
                let b = with_layout(
                    &p.values[out].shape,
                    p.table.get(p.values[out].key(lo)).clone(),
                );
                let bitcast = match transpose {
                    Some(dims) => algebra::transpose_keeps_bytes(&a, &b, dims),
                    None => algebra::reshape_keeps_bytes(&a, &b),
                };
                self.move_cache[r].push((lv, lo, bitcast));
                bitcast
            }
        };
        Some(if bitcast {
            0.0
        } else {
            self.p.values[out].bytes[lo] as f64 * self.weights.transpose_byte
        })
    }

    /// The cost of re-tiling op `i` (an index into `Problem::retilings`)
    /// under the current labels: the bytes of the buffer whose elements
    /// cross tile boundaries, weighed as data movement, or zero when the op
    /// moves whole tiles. A slice, pad or concatenate reads its operand in
    /// its own layout and a broadcast in the result's order restricted to
    /// the operand (any other layout is a copy, counted on its own), so
    /// only a reduce depends on its input's label.
    fn retile_cost(&mut self, i: RetileId) -> f64 {
        let t = &self.p.retilings[i];
        let (lv, lo) = (self.labels[t.operand], self.labels[t.out]);
        self.retile_cost_under(i, lv, lo)
    }

    /// The cost of re-tiling op `i` when its operand has label `lv` and its
    /// result label `lo` (see `retile_cost`).
    pub(crate) fn retile_cost_under(&mut self, i: RetileId, lv: LayoutId, lo: LayoutId) -> f64 {
        use crate::retile::RetileOp;
        let t = &self.p.retilings[i];
        let (v, out) = (t.operand, t.out);
        if let Some(&(_, _, c)) = self.retile_cache[i]
            .iter()
            .find(|&&(a, b, _)| a == lv && b == lo)
        {
            return c;
        }
        let p = &*self.p;
        let out_layout = p.table.get(p.values[out].key(lo));
        let operand_layout = match &t.op {
            RetileOp::Reduce { .. } => p.table.get(p.values[v].key(lv)).clone(),
            RetileOp::Broadcast { dims } => {
                restrict_layout(self.target, &p.values[v].shape, out_layout, dims)
            }
            _ => crate::tiling::same_layout_for(
                self.target,
                out_layout,
                &p.values[out].shape,
                &p.values[v].shape,
            ),
        };
        let a = with_layout(&p.values[v].shape, operand_layout);
        let b = with_layout(&p.values[out].shape, out_layout.clone());
        let cost = match crate::retile::reason(&t.op, &a, &b) {
            Some(_) => {
                crate::retile::moved_bytes(&t.op, &a, &b) as f64 * self.weights.transpose_byte
            }
            None => 0.0,
        };
        self.retile_cache[i].push((lv, lo, cost));
        cost
    }

    /// The cost of every term that a relabelling of `members` can change.
    fn local_cost(&mut self, members: &[ValueId], scratch: &mut Scratch) -> f64 {
        let (copies, movements, padding) = self.local_cost_parts(members, scratch);
        copies + movements + padding
    }

    /// The terms a relabelling of `members` can change, by kind: copies,
    /// data movement (transposes and reshapes that are not bitcasts, and
    /// ops that re-tile), and weighed padding.
    fn local_cost_parts(&mut self, members: &[ValueId], scratch: &mut Scratch) -> (f64, f64, f64) {
        scratch.begin(
            self.p.values.len(),
            self.p.relations.len(),
            self.p.retilings.len(),
        );
        for &m in members {
            scratch.add_value(m);
            for &r in &self.outs[m] {
                scratch.add_value(self.p.relations[r].v);
            }
            for &r in &self.moves[m] {
                scratch.add_move(r);
            }
            for &i in &self.retiles[m] {
                scratch.add_retile(i);
            }
        }
        let touched = scratch.values.len() + scratch.moves.len() + scratch.retiles.len();
        hlo::count(hlo::Work::SolverSteps, touched);
        let (mut copies, mut movements, mut padding) = (0.0, 0.0, 0.0);
        for i in 0..scratch.values.len() {
            let v = scratch.values[i];
            copies += self.copy_cost(v);
            if self.weights.padding_byte > 0.0 {
                padding += self.padding_cost(v);
            }
        }
        for i in 0..scratch.moves.len() {
            movements += self.move_cost(scratch.moves[i]);
        }
        for i in 0..scratch.retiles.len() {
            movements += self.retile_cost(scratch.retiles[i]);
        }
        (copies, movements, padding)
    }

    /// The label member `m` of a group takes when the group moves to
    /// `key`, a layout of member `origin`: `key` itself, or for another
    /// element type (on a tiled target, other dimensions or residence) the
    /// same order with `m`'s own tiling (`tiling::member_layout`).
    pub(crate) fn member_label(&mut self, m: ValueId, key: LayoutKey, origin: ValueId) -> LayoutId {
        let p = &mut *self.p;
        let (value, origin) = (&p.values[m], &p.values[origin]);
        let member_key = if self.target.tiling.is_none()
            && crate::tiling::tiled_alike(Some(self.target), &value.shape, &origin.shape)
        {
            key
        } else {
            let layout = crate::tiling::member_layout(
                self.target,
                p.table.get(key),
                &origin.shape,
                &value.shape,
                value.tile_use,
            );
            p.table.key(&layout)
        };
        p.values[m].intern(&p.table, member_key)
    }

    /// Tries relabelling the free values among `members` to `key` (with
    /// their own tiling where their element width differs from `origin`'s);
    /// keeps the change only when it lowers the cost. `before` is the
    /// group's current local cost, when the caller knows it. Returns the
    /// local cost after the call (new or unchanged) and whether it moved.
    fn try_move(
        &mut self,
        members: &[ValueId],
        key: LayoutKey,
        origin: ValueId,
        before: Option<f64>,
        scratch: &mut Scratch,
    ) -> (Option<f64>, bool) {
        let rank = self.p.table.get(key).minor_to_major.len();
        scratch.free.clear();
        scratch.free.extend(members.iter().copied().filter(|&m| {
            let v = &self.p.values[m];
            v.fixed.is_none() && v.shape.rank() == rank
        }));
        if scratch.free.is_empty() {
            return (before, false);
        }
        let free = std::mem::take(&mut scratch.free);
        scratch.ids.clear();
        for &m in &free {
            scratch.ids.push(self.member_label(m, key, origin));
        }
        let new_ids = std::mem::take(&mut scratch.ids);
        let unchanged = free
            .iter()
            .zip(&new_ids)
            .all(|(&m, &id)| self.labels[m] == id);
        let result = if unchanged {
            (before, false)
        } else {
            let before = match before {
                Some(b) => b,
                None => self.local_cost(&free, scratch),
            };
            let old: Vec<LayoutId> = free.iter().map(|&m| self.labels[m]).collect();
            for (&m, &id) in free.iter().zip(&new_ids) {
                self.relabel(m, id);
            }
            let after = self.local_cost(&free, scratch);
            // Require a real gain so that ties keep the earlier, preferred
            // layout and the search always terminates.
            if after < before - 0.5 {
                (Some(after), true)
            } else {
                for (&m, &id) in free.iter().zip(&old) {
                    self.relabel(m, id);
                }
                (Some(before), false)
            }
        };
        scratch.free = free;
        scratch.ids = new_ids;
        result
    }

    /// Candidate layouts of a group: its members' candidates in member order,
    /// each with the member it came from, one per dimension order (members
    /// of another element width derive their own tiling from it), at most
    /// `MAX_GROUP_CANDIDATES`.
    pub(crate) fn group_candidates(&self, members: &[ValueId]) -> Vec<(LayoutKey, ValueId)> {
        let mut out: Vec<(LayoutKey, ValueId)> = Vec::new();
        let mut orders: Vec<&shape::DimVec> = Vec::new();
        // On a tiled target members of other dimensions may tile one order
        // differently (a slice's 3-row result in (4,128), its operand in
        // (8,128)): each such layout is a choice of its own.
        let tiled = self.target.tiling.is_some();
        let mut offer = |out: &mut Vec<(LayoutKey, ValueId)>, k: LayoutKey, m: ValueId| {
            let order = &self.p.table.get(k).minor_to_major;
            let seen = if tiled {
                out.iter().any(|&(x, _)| x == k)
            } else {
                orders.contains(&order)
            };
            if out.len() < MAX_GROUP_CANDIDATES && !seen {
                orders.push(order);
                out.push((k, m));
            }
        };
        // Fixed members' layouts are strong hints for their group: first.
        for &m in members {
            let v = &self.p.values[m];
            if v.fixed.is_some() && members.len() > 1 {
                offer(&mut out, v.key(LayoutId::default()), m);
            }
        }
        for &m in members {
            let v = &self.p.values[m];
            if v.fixed.is_none() {
                for &c in &v.candidates {
                    offer(&mut out, v.key(c), m);
                }
            }
        }
        out
    }

    /// Dimension combining: for each group of values that share a layout,
    /// switch to a `*`-combined first tile when that lowers the group's
    /// padding and costs nothing else: no new copy and no data movement
    /// (a transpose or reshape that stops being a bitcast, or an op that
    /// starts re-tiling). Of the variants that qualify, the one that
    /// stores the group in the fewest bytes wins, folding fewer dimensions
    /// on ties. Returns the padding bytes saved.
    fn combine(&mut self, components: &[Vec<ValueId>]) -> u64 {
        let mut scratch = Scratch::default();
        let mut saved = 0u64;
        for members in components {
            let Some(&first) = members.iter().find(|&&m| self.p.values[m].fixed.is_none()) else {
                continue;
            };
            let value = &self.p.values[first];
            let base = self.p.table.get(value.key(self.labels[first])).clone();
            let shape = crate::problem::with_layout(&value.shape, base.clone());
            let variants = crate::tiling::combined_variants(self.target, &shape, &base);
            if variants.is_empty() {
                continue;
            }
            let free: Vec<ValueId> = members
                .iter()
                .copied()
                .filter(|&m| {
                    let v = &self.p.values[m];
                    v.fixed.is_none() && v.shape.rank() == base.minor_to_major.len()
                })
                .collect();
            // One combined tile serves only values tiled alike, and only
            // values computed on (an HBM-resident parameter keeps its
            // storage tiling).
            let first_shape = &self.p.values[first].shape;
            if free.iter().any(|&m| {
                let v = &self.p.values[m];
                !crate::tiling::tiled_alike(Some(self.target), &v.shape, first_shape)
                    || v.tile_use != crate::tiling::TileUse::Compute
            }) {
                continue;
            }
            // The group's storage bytes under a layout, padding included,
            // as the algebra sizes each buffer.
            let storage = |s: &mut Self, key: LayoutKey| -> u64 {
                free.iter()
                    .map(|&m| {
                        let p = &mut *s.p;
                        let id = p.values[m].intern(&p.table, key);
                        p.values[m].bytes[id]
                    })
                    .fold(0u64, u64::saturating_add)
            };
            let base_key = self.p.table.key(&base);
            let base_bytes = storage(self, base_key);
            // Variants that lower the group's storage, fewest bytes first;
            // the sort is stable, so ties keep fewer folded dimensions.
            let mut smaller: Vec<(u64, LayoutKey)> = Vec::new();
            for v in &variants {
                let key = self.p.table.key(v);
                let bytes = storage(self, key);
                if bytes < base_bytes {
                    smaller.push((bytes, key));
                }
            }
            smaller.sort_by_key(|&(bytes, _)| bytes);
            if smaller.is_empty() {
                continue;
            }
            let (copies_before, moves_before, _) = self.local_cost_parts(&free, &mut scratch);
            let old: Vec<LayoutId> = free.iter().map(|&m| self.labels[m]).collect();
            for (bytes, key) in smaller {
                for &m in &free {
                    let p = &mut *self.p;
                    let id = p.values[m].intern(&p.table, key);
                    self.relabel(m, id);
                }
                // No new copy and no new data movement: each part on its
                // own, so that one cannot pay for the other (a copy's
                // buffer would bring its own padding).
                let (copies_after, moves_after, _) = self.local_cost_parts(&free, &mut scratch);
                if copies_after <= copies_before + 0.5 && moves_after <= moves_before + 0.5 {
                    saved += base_bytes - bytes;
                    break;
                }
                for (&m, &id) in free.iter().zip(&old) {
                    self.relabel(m, id);
                }
            }
        }
        saved
    }

    /// The padding bytes `*`-combined layouts save: per value whose layout
    /// combines dimensions (chosen by the search among its candidates, or
    /// by `combine`), the bytes the target's own tiling of the same order
    /// would store beyond it.
    fn combining_savings(&mut self) -> u64 {
        let mut saved = 0u64;
        for (v, value) in self.p.values.iter_enumerated() {
            let layout = self.p.table.get(value.key(self.labels[v]));
            if value.fixed.is_some()
                || !layout
                    .tiles
                    .first()
                    .is_some_and(|t| t.dims.contains(&shape::Tile::COMBINE))
            {
                continue;
            }
            let plain = crate::tiling::layout_for_use(
                self.target,
                &value.shape,
                &layout.minor_to_major,
                value.tile_use,
            );
            let (combined, uncombined) = (
                value.bytes[self.labels[v]],
                crate::algebra::storage_bytes_in(&value.shape, &plain),
            );
            saved = saved.saturating_add(uncombined.saturating_sub(combined));
        }
        saved
    }

    /// Why groups stay in orders that store more padding than they need:
    /// for each group with a free member whose layout stores more bytes
    /// than its least-padding layout (`Value::least_padding`), the cost of
    /// moving the whole group to that order, by part, and the relations
    /// that would then need a copy or move data. The labels are left as
    /// they were.
    fn orientations(&mut self, components: &[Vec<ValueId>]) -> Vec<Orientation> {
        let mut out = Vec::new();
        let mut scratch = Scratch::default();
        // Relations by the value they read, for the copies a move causes.
        let reads = Adjacency::build(self.p.values.len(), |emit| {
            for (r, rel) in self.p.relations.iter_enumerated() {
                emit(rel.v, r);
            }
        });
        for members in components {
            let worse = members.iter().copied().find(|&m| {
                let v = &self.p.values[m];
                v.fixed.is_none()
                    && v.least_padding
                        .is_some_and(|l| v.bytes[l] < v.bytes[self.labels[m]])
            });
            let Some(origin) = worse else { continue };
            let Some(least) = self.p.values[origin].least_padding else {
                continue;
            };
            let key = self.p.values[origin].key(least);
            let rank = self.p.table.get(key).minor_to_major.len();
            let free: Vec<ValueId> = members
                .iter()
                .copied()
                .filter(|&m| {
                    self.p.values[m].fixed.is_none() && self.p.values[m].shape.rank() == rank
                })
                .collect();
            // The relations whose needs or bitcasts the move can change.
            let mut touched: Vec<RelationId> = Vec::new();
            for &m in &free {
                touched.extend_from_slice(&reads[m]);
                touched.extend_from_slice(&self.outs[m]);
                touched.extend_from_slice(&self.moves[m]);
            }
            touched.sort_unstable();
            touched.dedup();
            let before_needs: Vec<Option<LayoutId>> =
                touched.iter().map(|&r| self.needed(r)).collect();
            let before_moves: Vec<f64> = touched.iter().map(|&r| self.move_cost(r)).collect();
            let (c0, m0, p0) = self.local_cost_parts(&free, &mut scratch);
            let old: Vec<LayoutId> = free.iter().map(|&m| self.labels[m]).collect();
            for &m in &free {
                let id = self.member_label(m, key, origin);
                self.relabel(m, id);
            }
            let (c1, m1, p1) = self.local_cost_parts(&free, &mut scratch);
            let mut copies = Vec::new();
            let mut movements = Vec::new();
            for (i, &r) in touched.iter().enumerate() {
                if before_needs[i].is_none() && self.needed(r).is_some() {
                    copies.push(r);
                }
                if before_moves[i] == 0.0 && self.move_cost(r) > 0.0 {
                    movements.push(r);
                }
            }
            for (&m, &id) in free.iter().zip(&old) {
                self.relabel(m, id);
            }
            // Only a group that would store less padding there is kept
            // from it by something else (its member alone may gain what
            // the others lose).
            if p0 - p1 < 0.5 {
                continue;
            }
            out.push(Orientation {
                value: origin,
                members: free.len(),
                least,
                padding_saved: p0 - p1,
                cost_added: (c1 + m1) - (c0 + m0),
                copies,
                movements,
            });
        }
        out
    }

    /// Moves across broadcasts, transposes and reduces. None joins a
    /// group (a broadcast's operand and a reduce's result have another
    /// rank; a transpose is a bitcast only for matching orders, not equal
    /// ones), so single group moves cannot change both sides at once:
    /// moving one side's group alone makes the op need a copy, move data
    /// or re-tile, and moving the other's alone the same. This tries each
    /// of one side's candidates together with the other side's group in
    /// the order it induces: for a broadcast, the operand's dimensions in
    /// its order with the new dimensions more major; for a transpose, the
    /// permuted order, which keeps it a bitcast (tried from both sides: the
    /// transformer's attention output on tpu leaves a padded `(4,128)`
    /// order only when the dot and the transpose after it move together);
    /// for a reduce that may re-tile (tiled targets only; tried from both
    /// sides), the kept dimensions in the input's order, and from the
    /// result the reduced dimensions more major, which keeps the reduce
    /// moving whole tiles (an argmin's iota leaves its padded order only
    /// together with the index result, reductions_mixed on tpu). Only
    /// joints whose first side costs something now are tried. Returns the
    /// number of moves applied.
    fn joint_moves(&mut self, components: &[Vec<ValueId>]) -> usize {
        // Only free members move, and only their costs can change.
        let components: TiVec<GroupId, Vec<ValueId>> = components
            .iter()
            .map(|g| {
                g.iter()
                    .copied()
                    .filter(|&m| self.p.values[m].fixed.is_none())
                    .collect()
            })
            .collect();
        let mut joints = self.joints(&components);
        // One joint per pair of groups and map (a group joined to another
        // by many equal ops is tried once), the smallest first: the budget
        // then buys the most joints, and a few joints of huge groups (a
        // residual stream read by every layer) cannot starve the rest.
        let size = |j: &Joint| components[j.from].len() + components[j.to].len();
        let mut seen = rustc_hash::FxHashSet::default();
        joints.retain(|j| seen.insert((j.from, j.to, j.map.clone(), j.adds_major)));
        joints.sort_by_key(size);
        let mut scratch = Scratch::default();
        let mut applied = 0;
        let mut budget = JOINT_MOVE_BUDGET.max(JOINT_MOVES_PER_VALUE * self.p.values.len());
        'sweeps: for _ in 0..MAX_SWEEPS {
            let mut improved = false;
            for joint in &joints {
                let (g1, g2) = (&components[joint.from], &components[joint.to]);
                if self.local_cost(g1, &mut scratch) < 0.5 {
                    continue;
                }
                for (key, origin) in self.group_candidates(g1) {
                    let Some(left) = budget.checked_sub(g1.len() + g2.len()) else {
                        break 'sweeps;
                    };
                    budget = left;
                    let from_order = self.p.table.get(key).minor_to_major.clone();
                    let to_shape = &self.p.values[joint.to_value].shape;
                    let mut m2m: shape::DimVec = from_order
                        .iter()
                        .filter_map(|&d| joint.map.get(d).copied().flatten())
                        .collect();
                    if joint.adds_major {
                        m2m.extend(
                            (0..to_shape.rank())
                                .rev()
                                .filter(|&d| !joint.map.contains(&Some(d))),
                        );
                    }
                    if m2m.len() != to_shape.rank() {
                        continue;
                    }
                    let to_layout = crate::tiling::layout_for(self.target, to_shape, &m2m);
                    let to_key = self.p.table.key(&to_layout);
                    if self.try_joint_move(
                        &[(g1, key, origin), (g2, to_key, joint.to_value)],
                        &mut scratch,
                    ) {
                        applied += 1;
                        improved = true;
                        break;
                    }
                }
            }
            if !improved {
                break;
            }
        }
        applied
    }

    /// The joints between groups of free values (`components`) that
    /// [`Solver::joint_moves`] tries: across broadcasts and transposes,
    /// and reduces that may re-tile, between groups of at most
    /// `MAX_JOINT_MOVE` values.
    fn joints(&self, components: &TiSlice<GroupId, Vec<ValueId>>) -> Vec<Joint> {
        let mut group_of: TiVec<ValueId, Option<GroupId>> = vec![None; self.p.values.len()].into();
        for (g, members) in components.iter_enumerated() {
            for &m in members {
                group_of[m] = Some(g);
            }
        }
        let small = |g: Option<GroupId>| {
            g.and_then(|g| components.get(g))
                .is_some_and(|m| !m.is_empty() && m.len() <= MAX_JOINT_MOVE)
        };
        let mut joints: Vec<Joint> = Vec::new();
        for r in &self.p.relations {
            match &r.kind {
                RelationKind::Broadcast {
                    out,
                    dims,
                    pin: None,
                } => {
                    if let (Some(from), Some(to)) = (group_of[r.v], group_of[*out])
                        && small(Some(from))
                        && small(Some(to))
                    {
                        joints.push(Joint {
                            from,
                            to,
                            to_value: *out,
                            map: dims.iter().map(|&d| Some(d)).collect(),
                            adds_major: true,
                        });
                    }
                }
                RelationKind::Movement {
                    out,
                    transpose: Some(dims),
                } => {
                    let (Some(a), Some(b)) = (group_of[r.v], group_of[*out]) else {
                        continue;
                    };
                    if a == b || !small(Some(a)) || !small(Some(b)) {
                        continue;
                    }
                    // Output dimension j is operand dimension dims[j].
                    let mut inverse: SmallVec<[Option<usize>; 6]> =
                        dims.iter().map(|_| Some(0)).collect();
                    for (j, &d) in dims.iter().enumerate() {
                        if let Some(slot) = inverse.get_mut(d) {
                            *slot = Some(j);
                        }
                    }
                    joints.push(Joint {
                        from: a,
                        to: b,
                        to_value: *out,
                        map: inverse,
                        adds_major: false,
                    });
                    joints.push(Joint {
                        from: b,
                        to: a,
                        to_value: r.v,
                        map: dims.iter().map(|&d| Some(d)).collect(),
                        adds_major: false,
                    });
                }
                _ => {}
            }
        }
        // A reduce that may re-tile (each input with its own result, a
        // variadic reduce's leaves apart) moves whole tiles when its input
        // keeps the reduced dimensions out of the tiles and the kept ones
        // in the result's order.
        for t in &self.p.retilings {
            let crate::retile::RetileOp::Reduce { reduced } = &t.op else {
                continue;
            };
            let (Some(a), Some(b)) = (group_of[t.operand], group_of[t.out]) else {
                continue;
            };
            if a == b || !small(Some(a)) || !small(Some(b)) {
                continue;
            }
            let rank = self.p.values[t.operand].shape.rank();
            // Result dimension j is input dimension kept[j].
            let kept: shape::DimVec = (0..rank).filter(|d| !reduced.contains(d)).collect();
            if kept.len() != self.p.values[t.out].shape.rank() {
                continue;
            }
            joints.push(Joint {
                from: a,
                to: b,
                to_value: t.out,
                map: (0..rank)
                    .map(|d| kept.iter().position(|&k| k == d))
                    .collect(),
                adds_major: false,
            });
            joints.push(Joint {
                from: b,
                to: a,
                to_value: t.operand,
                map: kept.iter().map(|&d| Some(d)).collect(),
                adds_major: true,
            });
        }
        joints
    }

    /// Relabels several groups at once, each to its own layout (as
    /// `try_move` does for one), and keeps the change only when the cost of
    /// all of them together drops.
    fn try_joint_move(
        &mut self,
        parts: &[(&Vec<ValueId>, LayoutKey, ValueId)],
        scratch: &mut Scratch,
    ) -> bool {
        let mut moves: Vec<(ValueId, LayoutId)> = Vec::new();
        for &(members, key, origin) in parts {
            let rank = self.p.table.get(key).minor_to_major.len();
            for &m in members {
                let value = &self.p.values[m];
                if value.fixed.is_some() || value.shape.rank() != rank {
                    continue;
                }
                let id = self.member_label(m, key, origin);
                moves.push((m, id));
            }
        }
        if moves.iter().all(|&(m, id)| self.labels[m] == id) {
            return false;
        }
        let members: Vec<ValueId> = moves.iter().map(|&(m, _)| m).collect();
        let before = self.local_cost(&members, scratch);
        let old: Vec<LayoutId> = members.iter().map(|&m| self.labels[m]).collect();
        for &(m, id) in &moves {
            self.relabel(m, id);
        }
        if self.local_cost(&members, scratch) < before - 0.5 {
            return true;
        }
        for (&m, &id) in members.iter().zip(&old) {
            self.relabel(m, id);
        }
        false
    }

    fn search(
        &mut self,
        atoms: &[Vec<ValueId>],
        components: &[Vec<ValueId>],
        looks: Looks,
    ) -> (usize, usize) {
        /// A group of values moved together, and the (layout, origin value)
        /// candidates it may move to.
        type Group = (Vec<ValueId>, Vec<(LayoutKey, ValueId)>);
        let movable = |s: &Self, g: &Vec<ValueId>| g.iter().any(|&m| s.p.values[m].fixed.is_none());
        let components: Vec<Group> = components
            .iter()
            .filter(|g| g.len() > 1 && movable(self, g))
            .map(|g| (g.clone(), self.group_candidates(g)))
            .filter(|(_, c)| c.len() > 1)
            .collect();
        let atoms: Vec<Group> = atoms
            .iter()
            .filter(|g| movable(self, g))
            .map(|g| (g.clone(), self.group_candidates(g)))
            .filter(|(_, c)| c.len() > 1)
            .collect();
        let mut scratch = Scratch::default();
        let mut sweeps = 0;
        let mut applied = 0;
        let mut groups_active = true;
        // A group whose last look moved nothing, and none of whose inputs
        // (`group_inputs`) has been touched since, would move nothing
        // again: the look is skipped. Its result, and every side effect of
        // it, would be exactly the last one's, so skipping changes nothing
        // but time; on large modules the sweep that confirms convergence
        // is otherwise as long as the first.
        //
        // A value is touched when it is relabelled, and when a value that
        // reads it through a layout-preserving op or a broadcast is (that
        // changes the layouts its readers need, so its copy cost). Marking
        // the read value keeps each group's inputs to its own neighbours:
        // listing every reader of each input instead made the inputs of
        // all groups that read one widely shared value (a bias broadcast
        // in every block) quadratic in the module's size.
        let inputs: [Vec<Vec<ValueId>>; 2] = [
            components
                .iter()
                .map(|(m, _)| self.group_inputs(m))
                .collect(),
            atoms.iter().map(|(m, _)| self.group_inputs(m)).collect(),
        ];
        let mut still_since: [Vec<Option<usize>>; 2] =
            [vec![None; components.len()], vec![None; atoms.len()]];
        let mut relabelled_at: TiVec<ValueId, usize> = vec![0; self.p.values.len()].into();
        let mut step = 0;
        for _ in 0..MAX_SWEEPS {
            sweeps += 1;
            let mut improved = false;
            let mut group_improved = false;
            // Group moves first, while they still help; then single values.
            let lists: [&[Group]; 2] = if groups_active {
                [&components, &atoms]
            } else {
                [&[], &atoms]
            };
            for (k, (list, is_group)) in lists.into_iter().zip([true, false]).enumerate() {
                for (g, (members, candidates)) in list.iter().enumerate() {
                    let still = still_since[k][g].is_some_and(|since| {
                        inputs[k][g].iter().all(|&v| relabelled_at[v] <= since)
                    });
                    if still && looks == Looks::SkipStill {
                        continue;
                    }
                    // First improvement: an applied move becomes the baseline
                    // the next candidate must beat.
                    let mut current: Option<f64> = None;
                    let mut moved_any = false;
                    for &(key, origin) in candidates {
                        let (cost, moved) =
                            self.try_move(members, key, origin, current, &mut scratch);
                        current = cost;
                        if moved {
                            applied += 1;
                            improved = true;
                            group_improved |= is_group;
                            moved_any = true;
                            step += 1;
                            for &m in &scratch.free {
                                relabelled_at[m] = step;
                                for &r in &self.outs[m] {
                                    relabelled_at[self.p.relations[r].v] = step;
                                }
                            }
                        }
                    }
                    still_since[k][g] = (!moved_any).then_some(step);
                }
            }
            groups_active &= group_improved;
            if !improved {
                break;
            }
        }
        (sweeps, applied)
    }

    /// Lets each atom of a larger component take a layout another member
    /// of its component offers (its own candidates come from propagation
    /// alone): a slice's result kept in its operand's tiling, so that a
    /// copy of the small result replaces a copy of the large operand
    /// (pad_ops on tpu). The exact solver searches the same layouts (see
    /// `exact::domains`). Strictly improving moves only, after the search,
    /// so nothing gets dearer; each component's candidates are listed once,
    /// and each atom tries at most `MAX_GROUP_CANDIDATES`, so this stays
    /// linear. Returns the moves applied.
    fn neighbour_moves(&mut self, atoms: &[Vec<ValueId>], components: &[Vec<ValueId>]) -> usize {
        let components: &TiSlice<GroupId, Vec<ValueId>> = TiSlice::from_ref(components);
        let mut component_of: TiVec<ValueId, Option<GroupId>> =
            vec![None; self.p.values.len()].into();
        for (i, members) in components.iter_enumerated().filter(|(_, g)| g.len() > 1) {
            for &m in members {
                component_of[m] = Some(i);
            }
        }
        let mut listed: rustc_hash::FxHashMap<GroupId, Vec<(LayoutKey, ValueId)>> =
            rustc_hash::FxHashMap::default();
        let mut scratch = Scratch::default();
        let mut applied = 0;
        for atom in atoms {
            let Some(&first) = atom.first() else { continue };
            let Some(c) = component_of[first] else {
                continue;
            };
            if atom.iter().all(|&m| self.p.values[m].fixed.is_some()) {
                continue;
            }
            let candidates = listed
                .entry(c)
                .or_insert_with(|| self.group_candidates(&components[c]))
                .clone();
            let mut current = None;
            for (key, origin) in candidates {
                let (cost, moved) = self.try_move(atom, key, origin, current, &mut scratch);
                current = cost;
                applied += usize::from(moved);
            }
        }
        applied
    }

    /// Every value whose label or copy counts a look at group `members`
    /// reads (see `try_move` and `local_cost_parts`): the members (their
    /// labels and counts); the values read by relations whose result is a
    /// member (their counts, which the look changes); and both ends of
    /// every movement and re-tiling op touching a member. A change to a
    /// value's counts shows as a touch of the value (see `search`). A
    /// superset is safe: it can only cost a look that was not needed.
    fn group_inputs(&self, members: &[ValueId]) -> Vec<ValueId> {
        let mut inputs: Vec<ValueId> = Vec::new();
        for &m in members {
            inputs.push(m);
            for &r in &self.outs[m] {
                inputs.push(self.p.relations[r].v);
            }
            for &r in &self.moves[m] {
                let rel = &self.p.relations[r];
                inputs.push(rel.v);
                match rel.kind {
                    RelationKind::Movement { out, .. } | RelationKind::Broadcast { out, .. } => {
                        inputs.push(out)
                    }
                    _ => {}
                }
            }
            for &i in &self.retiles[m] {
                let t = &self.p.retilings[i];
                inputs.push(t.operand);
                inputs.push(t.out);
            }
        }
        hlo::count(hlo::Work::SolverSteps, inputs.len());
        inputs.sort_unstable();
        inputs.dedup();
        inputs
    }
}

/// Per value, a list of relation or op ids, stored flat: one allocation
/// for all values instead of one per value that has a list.
struct Adjacency<T> {
    /// `start[v]..start[v + 1]` indexes value `v`'s list in `items`.
    start: Vec<u32>,
    items: Vec<T>,
}

impl<T: Copy + Default> Adjacency<T> {
    /// The lists `each` emits as (value, item) pairs, each list in emission
    /// order. `each` is called twice: to count, then to fill.
    fn build(n: usize, each: impl Fn(&mut dyn FnMut(ValueId, T))) -> Adjacency<T> {
        let mut start = vec![0u32; n + 1];
        each(&mut |v, _| start[v.index() + 1] += 1);
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start[..n].to_vec();
        let mut items = vec![T::default(); start[n] as usize];
        each(&mut |v, x| {
            items[next[v.index()] as usize] = x;
            next[v.index()] += 1;
        });
        Adjacency { start, items }
    }
}

impl<T> std::ops::Index<ValueId> for Adjacency<T> {
    type Output = [T];

    fn index(&self, v: ValueId) -> &[T] {
        let v = v.index();
        &self.items[self.start[v] as usize..self.start[v + 1] as usize]
    }
}

/// Buffers reused across moves. Membership is marked with a generation
/// stamp, so starting a new set costs nothing however large the last one
/// was (clearing a hash set costs its capacity, which made every small move
/// after a large one pay for it).
#[derive(Default)]
struct Scratch {
    generation: u32,
    value_mark: TiVec<ValueId, u32>,
    move_mark: TiVec<RelationId, u32>,
    retile_mark: TiVec<RetileId, u32>,
    values: Vec<ValueId>,
    moves: Vec<RelationId>,
    retiles: Vec<RetileId>,
    free: Vec<ValueId>,
    ids: Vec<LayoutId>,
}

impl Scratch {
    fn begin(&mut self, values: usize, relations: usize, retilings: usize) {
        if self.value_mark.len() < values {
            self.value_mark.resize(values, 0);
        }
        if self.move_mark.len() < relations {
            self.move_mark.resize(relations, 0);
        }
        if self.retile_mark.len() < retilings {
            self.retile_mark.resize(retilings, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // The stamp wrapped: reset the marks once.
            self.value_mark.iter_mut().for_each(|m| *m = 0);
            self.move_mark.iter_mut().for_each(|m| *m = 0);
            self.retile_mark.iter_mut().for_each(|m| *m = 0);
            self.generation = 1;
        }
        self.values.clear();
        self.moves.clear();
        self.retiles.clear();
    }

    fn add_value(&mut self, v: ValueId) {
        let mark = &mut self.value_mark[v];
        if *mark != self.generation {
            *mark = self.generation;
            self.values.push(v);
        }
    }

    fn add_move(&mut self, r: RelationId) {
        let mark = &mut self.move_mark[r];
        if *mark != self.generation {
            *mark = self.generation;
            self.moves.push(r);
        }
    }

    fn add_retile(&mut self, i: RetileId) {
        let mark = &mut self.retile_mark[i];
        if *mark != self.generation {
            *mark = self.generation;
            self.retiles.push(i);
        }
    }
}

/// A plain union-find over values.
pub(crate) struct UnionFind {
    parent: TiVec<ValueId, ValueId>,
}

impl UnionFind {
    pub(crate) fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).map(ValueId::new).collect(),
        }
    }

    pub(crate) fn find(&mut self, mut x: ValueId) -> ValueId {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    pub(crate) fn union(&mut self, a: ValueId, b: ValueId) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The smaller index is the root, so groups are ordered by their
            // first member.
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[hi] = lo;
        }
    }

    /// The groups, each sorted, ordered by first member.
    pub(crate) fn groups(&mut self) -> Vec<Vec<ValueId>> {
        let n = self.parent.len();
        // A group's root is its smallest member (see `union`), so a walk in
        // index order meets the root first: it opens the group, and later
        // members join it in order. No map and no sort.
        let mut group_of_root: TiVec<ValueId, usize> = vec![usize::MAX; n].into();
        let mut groups: Vec<Vec<ValueId>> = Vec::new();
        for i in (0..n).map(ValueId::new) {
            let r = self.find(i);
            if r == i {
                group_of_root[i] = groups.len();
                groups.push(vec![i]);
            } else {
                groups[group_of_root[r]].push(i);
            }
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Context;
    use crate::problem::{Offers, Problem};

    /// Skipping stale offers and still groups must never change an
    /// answer: every computation of every module under `testdata/` that
    /// builds without a context (callers' signatures), on each built-in
    /// target, built and solved with and without skipping, gives the same
    /// candidates, labels, needs and counts. The run without skipping also
    /// builds the solver's structure in the solver, so a large problem's
    /// structure built beside propagation is checked against it.
    #[test]
    fn skipping_changes_nothing() {
        let files = test_support::hlo_files();
        let (mut solved, mut moved, mut prebuilt) = (0, 0, 0);
        for name in ["cpu", "gpu", "tpu"] {
            let target = target::load_builtin(name).expect("built-in target");
            for path in &files {
                let Ok(text) = std::fs::read_to_string(path) else {
                    continue;
                };
                let Ok(module) = hlo::parse_module(&text, "t") else {
                    continue;
                };
                for comp in &module.computations {
                    let ctx = Context::default();
                    let (Ok(mut a), Ok(mut b)) = (
                        Problem::build_with(comp, &ctx, &target, Offers::All),
                        Problem::build(comp, &ctx, &target),
                    ) else {
                        continue;
                    };
                    let at = format!("{} in {} on {name}", comp.name, path.display());
                    // `a` is solved on the structure the solver builds
                    // itself, `b` on the one a large problem built beside
                    // candidate propagation.
                    a.structure = None;
                    prebuilt += usize::from(b.structure.is_some());
                    for (x, y) in a.problem.values.iter().zip(&b.problem.values) {
                        let keys = |v: &crate::problem::Value| -> Vec<LayoutKey> {
                            v.candidates.iter().map(|&c| v.key(c)).collect()
                        };
                        assert_eq!(keys(x), keys(y), "candidates of a value of {at}");
                    }
                    let all = solve_with(&mut a, &target, Looks::All, None).0;
                    let skipping = solve_with(&mut b, &target, Looks::SkipStill, None).0;
                    assert_eq!(all.labels, skipping.labels, "{at}");
                    assert_eq!(all.needs, skipping.needs, "{at}");
                    assert_eq!(
                        (all.sweeps, all.moves, all.padding_saved),
                        (skipping.sweeps, skipping.moves, skipping.padding_saved),
                        "{at}"
                    );
                    solved += 1;
                    moved += usize::from(all.moves > 0 && all.sweeps > 1);
                }
            }
        }
        // The comparison must have bitten: many problems, and some where a
        // later sweep had groups to skip.
        assert!(solved > 2000, "only {solved} problems solved");
        assert!(
            moved > 100,
            "only {moved} problems with moves over several sweeps"
        );
        assert!(
            prebuilt >= 3,
            "only {prebuilt} problems had their structure built beside propagation"
        );
    }
}
