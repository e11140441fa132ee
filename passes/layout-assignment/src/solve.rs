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

use rustc_hash::{FxHashMap, FxHashSet};
use target::CostWeights;

use crate::algebra;
use crate::problem::{LayoutId, LayoutKey, Problem, RelationKind, ValueId, restrict_layout, with_layout};

/// The most improvement sweeps; convergence usually takes two or three.
const MAX_SWEEPS: usize = 8;

/// A chosen layout per value.
pub struct Solution {
    /// Per value: the id of its chosen layout in its table.
    pub labels: Vec<LayoutId>,
    /// Sweeps run and moves applied, for the report.
    pub sweeps: usize,
    /// Moves that lowered the cost.
    pub moves: usize,
    /// Per relation: the layout id it needs its value copied into, under
    /// the final labels (`None`: the value serves it as it is).
    pub needs: Vec<Option<LayoutId>>,
    /// Bytes of tile padding that dimension combining saved.
    pub padding_saved: u64,
}

struct Solver<'a, 'c> {
    p: &'a mut Problem<'c>,
    target: &'a target::TargetSpec,
    weights: CostWeights,
    labels: Vec<LayoutId>,
    /// Relations reading each value.
    reads: Vec<Vec<u32>>,
    /// Relations whose `out` is each value (their readers' needs depend on it).
    outs: Vec<Vec<u32>>,
    /// Movement relations touching each value.
    moves: Vec<Vec<u32>>,
    /// Per relation: the need id for each `out` label, once computed.
    need_cache: FxHashMap<(u32, LayoutId), LayoutId>,
    /// Per movement relation: whether a label pair makes it a bitcast.
    move_cache: FxHashMap<(u32, LayoutId, LayoutId), bool>,
}

/// Solves the problem under `target`'s cost weights.
pub fn solve(p: &mut Problem<'_>, target: &target::TargetSpec) -> Solution {
    let n = p.values.len();
    let mut reads = vec![Vec::new(); n];
    let mut outs = vec![Vec::new(); n];
    let mut moves = vec![Vec::new(); n];
    for (r, rel) in p.relations.iter().enumerate() {
        let r = r as u32;
        match &rel.kind {
            RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => {
                reads[rel.v as usize].push(r);
                outs[*out as usize].push(r);
            }
            RelationKind::Need { .. } => reads[rel.v as usize].push(r),
            RelationKind::Movement { out, .. } => {
                moves[rel.v as usize].push(r);
                if *out != rel.v {
                    moves[*out as usize].push(r);
                }
            }
        }
    }
    let labels = p.values.iter().map(|v| v.candidates.first().copied().unwrap_or(0)).collect();
    let mut s = Solver {
        p,
        target,
        weights: target.cost.clone(),
        labels,
        reads,
        outs,
        moves,
        need_cache: FxHashMap::default(),
        move_cache: FxHashMap::default(),
    };
    let (sweeps, moves) = s.search();
    let padding_saved = if target.tiling.as_ref().is_some_and(|t| t.combine_dimensions) { s.combine() } else { 0 };
    let needs = (0..s.p.relations.len() as u32).map(|r| s.needed(r)).collect();
    Solution { labels: s.labels, sweeps, moves, needs, padding_saved }
}

impl Solver<'_, '_> {
    /// The layout id that relation `r` needs its value in, or `None` when
    /// the value's current layout serves it.
    fn needed(&mut self, r: u32) -> Option<LayoutId> {
        let p = &mut *self.p;
        let rel = &p.relations[r as usize];
        let v = rel.v as usize;
        let id = match &rel.kind {
            RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => {
                let out = *out as usize;
                let out_label = self.labels[out];
                if let Some(&id) = self.need_cache.get(&(r, out_label)) {
                    id
                } else {
                    let out_key = p.values[out].key(out_label);
                    let key = match &rel.kind {
                        RelationKind::Broadcast { dims, .. } => {
                            let restricted = restrict_layout(self.target, &p.values[v].shape, p.table.get(out_key), dims);
                            p.table.key(&restricted)
                        }
                        _ if p.values[out].shape.element_storage_bits() != p.values[v].shape.element_storage_bits() => {
                            let layout = crate::tiling::same_layout_for(self.target, p.table.get(out_key), &p.values[out].shape, &p.values[v].shape);
                            p.table.key(&layout)
                        }
                        _ => out_key,
                    };
                    let id = p.values[v].intern(&p.table, key);
                    self.need_cache.insert((r, out_label), id);
                    id
                }
            }
            RelationKind::Need { need_id, matrix } => {
                if let Some(m) = matrix {
                    let current = p.table.get(p.values[v].key(self.labels[v]));
                    if p.matrix_needs[*m as usize].accepts_order(current) {
                        return None;
                    }
                }
                *need_id
            }
            RelationKind::Movement { .. } => return None,
        };
        (id != self.labels[v]).then_some(id)
    }

    /// The cost of the copies value `v` needs.
    fn copy_cost(&mut self, v: ValueId) -> f64 {
        let mut needed: smallvec::SmallVec<[LayoutId; 4]> = smallvec::SmallVec::new();
        for i in 0..self.reads[v as usize].len() {
            let r = self.reads[v as usize][i];
            if let Some(id) = self.needed(r) {
                if !needed.contains(&id) {
                    needed.push(id);
                }
            }
        }
        let value = &self.p.values[v as usize];
        needed.iter().map(|&id| value.bytes[id as usize] as f64 * self.weights.copy_byte).sum()
    }

    /// The cost of the tile padding stored with value `v` in its layout,
    /// when the target weighs padding.
    fn padding_cost(&self, v: ValueId) -> f64 {
        let value = &self.p.values[v as usize];
        let stored = value.bytes[self.labels[v as usize] as usize];
        let logical = value
            .shape
            .element_count()
            .and_then(|n| n.checked_mul(value.shape.element_storage_bits()))
            .map_or(stored, |bits| bits.div_ceil(8));
        stored.saturating_sub(logical) as f64 * self.weights.padding_byte
    }

    /// The cost of movement relation `r`: zero when it is a bitcast.
    fn move_cost(&mut self, r: u32) -> f64 {
        let rel = &self.p.relations[r as usize];
        let RelationKind::Movement { out, transpose } = &rel.kind else { return 0.0 };
        let (v, out) = (rel.v as usize, *out as usize);
        let (lv, lo) = (self.labels[v], self.labels[out]);
        let key = (r, lv, lo);
        let bitcast = match self.move_cache.get(&key) {
            Some(&b) => b,
            None => {
                let p = &*self.p;
                let a = with_layout(&p.values[v].shape, p.table.get(p.values[v].key(lv)).clone());
                let b = with_layout(&p.values[out].shape, p.table.get(p.values[out].key(lo)).clone());
                let bitcast = match transpose {
                    Some(dims) => algebra::transpose_is_bitcast(&a, &b, dims),
                    None => algebra::reshape_is_bitcast(&a, &b),
                };
                self.move_cache.insert(key, bitcast);
                bitcast
            }
        };
        if bitcast { 0.0 } else { self.p.values[out].bytes[lo as usize] as f64 * self.weights.transpose_byte }
    }

    /// The cost of every term that a relabelling of `members` can change.
    fn local_cost(&mut self, members: &[ValueId], scratch: &mut Scratch) -> f64 {
        scratch.values.clear();
        scratch.moves.clear();
        for &m in members {
            scratch.values.insert(m);
            for &r in &self.outs[m as usize] {
                scratch.values.insert(self.p.relations[r as usize].v);
            }
            for &r in &self.moves[m as usize] {
                scratch.moves.insert(r);
            }
        }
        let mut values: Vec<ValueId> = scratch.values.iter().copied().collect();
        values.sort_unstable();
        let mut moves: Vec<u32> = scratch.moves.iter().copied().collect();
        moves.sort_unstable();
        let mut cost = 0.0;
        for v in values {
            cost += self.copy_cost(v);
            if self.weights.padding_byte > 0.0 {
                cost += self.padding_cost(v);
            }
        }
        for r in moves {
            cost += self.move_cost(r);
        }
        cost
    }

    /// Tries relabelling the free values among `members` to `layout`; keeps
    /// the change only when it lowers the cost. Returns the gain.
    fn try_move(&mut self, members: &[ValueId], key: LayoutKey, origin: ValueId, scratch: &mut Scratch) -> f64 {
        let rank = self.p.table.get(key).minor_to_major.len();
        let free: Vec<ValueId> = members
            .iter()
            .copied()
            .filter(|&m| {
                let v = &self.p.values[m as usize];
                v.fixed.is_none() && v.shape.rank() == rank
            })
            .collect();
        if free.is_empty() {
            return 0.0;
        }
        let p = &mut *self.p;
        let origin_bits = p.values[origin as usize].shape.element_storage_bits();
        let mut new_ids: Vec<LayoutId> = Vec::with_capacity(free.len());
        for &m in &free {
            // Members of another element width take the same order with
            // their own tiling.
            let member_key = if p.values[m as usize].shape.element_storage_bits() == origin_bits {
                key
            } else {
                let layout = crate::tiling::same_layout_for(
                    self.target,
                    p.table.get(key),
                    &p.values[origin as usize].shape,
                    &p.values[m as usize].shape,
                );
                p.table.key(&layout)
            };
            new_ids.push(p.values[m as usize].intern(&p.table, member_key));
        }
        if free.iter().zip(&new_ids).all(|(&m, &id)| self.labels[m as usize] == id) {
            return 0.0;
        }
        let before = self.local_cost(&free, scratch);
        let old: Vec<LayoutId> = free.iter().map(|&m| self.labels[m as usize]).collect();
        for (&m, &id) in free.iter().zip(&new_ids) {
            self.labels[m as usize] = id;
        }
        let after = self.local_cost(&free, scratch);
        // Require a real gain so that ties keep the earlier, preferred
        // layout and the search always terminates.
        if after < before - 0.5 {
            before - after
        } else {
            for (&m, &id) in free.iter().zip(&old) {
                self.labels[m as usize] = id;
            }
            0.0
        }
    }

    /// Groups of values to move together: lock groups, and components
    /// joined by layout-preserving uses.
    fn groups(&self) -> (Vec<Vec<ValueId>>, Vec<Vec<ValueId>>) {
        let n = self.p.values.len();
        let mut uf = UnionFind::new(n);
        for (i, v) in self.p.values.iter().enumerate() {
            uf.union(i, v.lock as usize);
        }
        let atoms = uf.groups();
        for rel in &self.p.relations {
            if let RelationKind::Same { out } = rel.kind {
                uf.union(rel.v as usize, out as usize);
            }
        }
        let components = uf.groups();
        (atoms, components)
    }

    /// Candidate layouts of a group: the union of its members' candidates,
    /// in member order, each with the member it came from.
    fn group_candidates(&self, members: &[ValueId]) -> Vec<(LayoutKey, ValueId)> {
        let mut out: Vec<(LayoutKey, ValueId)> = Vec::new();
        for &m in members {
            let v = &self.p.values[m as usize];
            if v.fixed.is_some() && members.len() > 1 {
                // A fixed member's layout is a strong hint for its group.
                let k = v.key(0);
                if !out.iter().any(|&(x, _)| x == k) {
                    out.push((k, m));
                }
                continue;
            }
            for &c in &v.candidates {
                let k = v.key(c);
                if !out.iter().any(|&(x, _)| x == k) {
                    out.push((k, m));
                }
            }
        }
        out
    }

    /// Dimension combining: for each group of values that share a layout,
    /// switch to a `*`-combined first tile when that lowers the group's
    /// padding and costs nothing else: no new copy and no transpose or
    /// reshape that stops being a bitcast. Returns the padding bytes saved.
    fn combine(&mut self) -> u64 {
        let (_, components) = self.groups();
        let mut scratch = Scratch::default();
        let mut saved = 0u64;
        for members in components {
            let Some(&first) = members.iter().find(|&&m| self.p.values[m as usize].fixed.is_none()) else { continue };
            let value = &self.p.values[first as usize];
            let base = self.p.table.get(value.key(self.labels[first as usize])).clone();
            let shape = crate::problem::with_layout(&value.shape, base.clone());
            let variants = crate::tiling::combined_variants(self.target, &shape, &base);
            if variants.is_empty() {
                continue;
            }
            let free: Vec<ValueId> = members
                .iter()
                .copied()
                .filter(|&m| {
                    let v = &self.p.values[m as usize];
                    v.fixed.is_none() && v.shape.rank() == base.minor_to_major.len()
                })
                .collect();
            // One combined tile serves only values of one element width.
            let bits = self.p.values[first as usize].shape.element_storage_bits();
            if free.iter().any(|&m| self.p.values[m as usize].shape.element_storage_bits() != bits) {
                continue;
            }
            let padding = |s: &mut Self, key: LayoutKey| -> u64 {
                free.iter()
                    .map(|&m| {
                        let p = &mut *s.p;
                        let id = p.values[m as usize].intern(&p.table, key);
                        p.values[m as usize].bytes[id as usize]
                    })
                    .fold(0u64, u64::saturating_add)
            };
            let base_key = self.p.table.key(&base);
            let base_bytes = padding(self, base_key);
            // The variant that stores the group in the fewest bytes.
            let mut best: Option<(u64, LayoutKey)> = None;
            for v in &variants {
                let key = self.p.table.key(v);
                let bytes = padding(self, key);
                if bytes < base_bytes && best.is_none_or(|(b, _)| bytes < b) {
                    best = Some((bytes, key));
                }
            }
            let Some((bytes, key)) = best else { continue };
            let before = self.local_cost(&free, &mut scratch);
            let old: Vec<LayoutId> = free.iter().map(|&m| self.labels[m as usize]).collect();
            for &m in &free {
                let p = &mut *self.p;
                self.labels[m as usize] = p.values[m as usize].intern(&p.table, key);
            }
            let after = self.local_cost(&free, &mut scratch);
            if after <= before + 0.5 {
                saved += base_bytes - bytes;
            } else {
                for (&m, &id) in free.iter().zip(&old) {
                    self.labels[m as usize] = id;
                }
            }
        }
        saved
    }

    fn search(&mut self) -> (usize, usize) {
        let (atoms, components) = self.groups();
        let movable = |s: &Self, g: &Vec<ValueId>| g.iter().any(|&m| s.p.values[m as usize].fixed.is_none());
        let components: Vec<(Vec<ValueId>, Vec<(LayoutKey, ValueId)>)> = components
            .into_iter()
            .filter(|g| g.len() > 1 && movable(self, g))
            .map(|g| {
                let c = self.group_candidates(&g);
                (g, c)
            })
            .filter(|(_, c)| c.len() > 1)
            .collect();
        let atoms: Vec<(Vec<ValueId>, Vec<(LayoutKey, ValueId)>)> = atoms
            .into_iter()
            .filter(|g| movable(self, g))
            .map(|g| {
                let c = self.group_candidates(&g);
                (g, c)
            })
            .filter(|(_, c)| c.len() > 1)
            .collect();
        let mut scratch = Scratch::default();
        let mut sweeps = 0;
        let mut applied = 0;
        for _ in 0..MAX_SWEEPS {
            sweeps += 1;
            let mut improved = false;
            for (members, candidates) in components.iter().chain(atoms.iter()) {
                // First improvement: an applied move becomes the baseline the
                // next candidate must beat.
                for &(key, origin) in candidates {
                    if self.try_move(members, key, origin, &mut scratch) > 0.0 {
                        applied += 1;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
        (sweeps, applied)
    }
}

#[derive(Default)]
struct Scratch {
    values: FxHashSet<ValueId>,
    moves: FxHashSet<u32>,
}

/// A plain union-find over value indices.
struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind { parent: (0..n).collect() }
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            // The smaller index is the root, so groups are ordered by their
            // first member.
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[hi] = lo;
        }
    }

    /// The groups, each sorted, ordered by first member.
    fn groups(&mut self) -> Vec<Vec<ValueId>> {
        let n = self.parent.len();
        let mut by_root: FxHashMap<usize, Vec<ValueId>> = FxHashMap::default();
        for i in 0..n {
            let r = self.find(i);
            by_root.entry(r).or_default().push(i as ValueId);
        }
        let mut groups: Vec<Vec<ValueId>> = by_root.into_values().collect();
        groups.sort_unstable_by_key(|g| g[0]);
        groups
    }
}
