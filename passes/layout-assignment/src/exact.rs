//! The exact solver: the same cost model the search minimises (`solve.rs`),
//! as an integer program per computation, solved by `microlp`'s branch and
//! bound.
//!
//! Each value chooses one layout of its *domain*: its own candidates, the
//! layouts its group's moves would give it (`Solver::group_candidates`,
//! translated as `Solver::member_label` translates them), the search's
//! answer, and on targets that combine dimensions the combined variants of
//! each. A binary `x[v][k]` says that value `v` takes domain entry `k`, and
//! `sum_k x[v][k] = 1`. Every term of the cost is priced by the search's
//! own functions (`need_under`, `move_cost_under`, `retile_cost_under`,
//! `padding_cost_of`), never by a copy of them, so that a change to the
//! cost model reaches both solvers:
//!
//! - a copy of value `v` into layout `L` costs `bytes(L)` when some reader
//!   needs `L` and `v` is not in it: a continuous `y >= 0` with, for each
//!   reader, `y >= [reader needs L] - x[v][L]`, where `[reader needs L]` is
//!   the sum of the reader's result labels that make it need `L` (or 1 for
//!   a fixed need, or `1 - sum` of the labels a matrix need accepts);
//! - a transpose, reshape or re-tiling op between values `a` and `b` with
//!   cost `C[i][j]` for labels `i`, `j`: linear when one side is fixed or
//!   the cost depends on one side only, otherwise a continuous `t >= 0`
//!   with `t >= sum_i C[i][j] x[a][i] - M_j (1 - x[b][j])` for each `j` and
//!   the same for each `i` (for a transpose or reshape, whose cost is the
//!   result's bytes unless it is a bitcast, the `j` rows are exactly
//!   `t >= bytes(j) (x[b][j] - sum of the labels i that make it a bitcast)`);
//! - weighed padding is linear.
//!
//! At integer points each of these is exactly the search's energy, so the
//! integer optimum is the optimum over the domains, and the relaxation's
//! bound is a lower bound on it. Values are split into independent parts
//! (no term joins two parts), each solved on its own, smallest work first.
//!
//! Determinism: microlp is deterministic (no threads, its perturbations are
//! a fixed function of the variable), the model is built in a fixed order,
//! and the search is bounded by a node budget, which is deterministic. The
//! wall-clock limit is only a backstop: a part it cuts short keeps the
//! search's labels, which are deterministic, and only the bound reported
//! for it may then vary (see `Bound::clock_stops`).

use std::time::{Duration, Instant};

use microlp::{ComparisonOp, LinearExpr, OptimizationDirection, SolveOptions, Variable};
use smallvec::SmallVec;

use crate::ids::{LayoutId, RelationId, RetileId, TiVec, ValueId};
use crate::problem::RelationKind;
use crate::solve::{Solver, UnionFind};

/// The most layouts one value's domain holds.
const MAX_DOMAIN: usize = 16;

/// Branch-and-bound nodes per second of time limit, shared by a
/// computation's parts in proportion to their size (see `node_budget`).
const NODES_PER_SECOND: u64 = 4000;

/// Limits of one exact solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// The time one computation may take. It sets the deterministic node
    /// budget, and is also a wall-clock backstop.
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(10),
        }
    }
}

/// What the exact solver proved about a computation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bound {
    /// A lower bound on the cost of every labelling over the domains.
    pub lower: f64,
    /// The labelling returned is optimal over the domains.
    pub proven: bool,
    /// Parts the node budget stopped (their best labelling is kept).
    pub node_stops: usize,
    /// Parts the wall clock stopped (the search's labels are kept).
    pub clock_stops: usize,
    /// Every value's domain, for tests that enumerate them.
    #[cfg(test)]
    pub(crate) domains: TiVec<ValueId, SmallVec<[LayoutId; 8]>>,
}

/// Runs the exact solver from the solver's current labels (the search's
/// answer), and relabels when it finds a cheaper labelling. Returns what
/// it proved, and whether it relabelled.
pub(crate) fn improve(
    s: &mut Solver<'_, '_>,
    components: &[Vec<ValueId>],
    limits: &Limits,
) -> (Bound, bool) {
    let started = Instant::now();
    let domains = domains(s, components);
    let model = Model::build(s, domains);
    let parts = model.parts();
    let budget = node_budget(&model, &parts, limits);
    let mut bound = Bound {
        lower: model.constant,
        proven: true,
        node_stops: 0,
        clock_stops: 0,
        #[cfg(test)]
        domains: model.domains.clone(),
    };
    let mut choice: TiVec<ValueId, usize> = vec![0; model.domains.len()].into();
    let mut improved = false;
    for (part, nodes) in parts.iter().zip(budget) {
        let left = limits.time.saturating_sub(started.elapsed());
        let outcome = model.solve_part(part, nodes, left);
        bound.lower += outcome.lower;
        bound.proven &= outcome.proven;
        bound.node_stops += usize::from(outcome.node_stop);
        bound.clock_stops += usize::from(outcome.clock_stop);
        if let Some(picks) = outcome.better {
            for (&v, k) in part.values.iter().zip(picks) {
                choice[v] = k;
            }
            improved = true;
        }
    }
    if improved {
        for (v, &k) in choice.iter_enumerated() {
            let id = model.domains[v][k];
            s.relabel(v, id);
        }
    }
    (bound, improved)
}

/// Every value's domain, the solver's current label first. A fixed value's
/// domain is its one layout.
fn domains(
    s: &mut Solver<'_, '_>,
    components: &[Vec<ValueId>],
) -> TiVec<ValueId, SmallVec<[LayoutId; 8]>> {
    let n = s.p.values.len();
    let mut domains: TiVec<ValueId, SmallVec<[LayoutId; 8]>> = (0..n)
        .map(|v| SmallVec::from_slice(&[s.labels[ValueId::new(v)]]))
        .collect();
    let push = |d: &mut SmallVec<[LayoutId; 8]>, id: LayoutId| {
        if d.len() < MAX_DOMAIN && !d.contains(&id) {
            d.push(id);
        }
    };
    for (value, domain) in s.p.values.iter().zip(domains.iter_mut()) {
        if value.fixed.is_none() {
            for &c in &value.candidates {
                push(domain, c);
            }
        }
    }
    for members in components.iter().filter(|g| g.len() > 1) {
        for (key, origin) in s.group_candidates(members) {
            let rank = s.p.table.get(key).minor_to_major.len();
            for &m in members {
                let value = &s.p.values[m];
                if value.fixed.is_none() && value.shape.rank() == rank {
                    let id = s.member_label(m, key, origin);
                    push(&mut domains[m], id);
                }
            }
        }
    }
    if s.target
        .tiling
        .as_ref()
        .is_some_and(|t| t.combine_dimensions)
    {
        for (v, domain) in domains.iter_mut_enumerated() {
            if s.p.values[v].fixed.is_some() {
                continue;
            }
            let base: SmallVec<[LayoutId; 8]> = domain.clone();
            for id in base {
                let p = &mut *s.p;
                let layout = p.table.get(p.values[v].key(id)).clone();
                let shape = crate::problem::with_layout(&p.values[v].shape, layout.clone());
                for variant in crate::tiling::combined_variants(s.target, &shape, &layout) {
                    let key = p.table.key(&variant);
                    let id = p.values[v].intern(&p.table, key);
                    push(domain, id);
                }
            }
        }
    }
    // A pinned broadcast's result must agree with the pin: labels that do
    // not are left out, unless the search's own answer is one of them (then
    // no labelling of the domain agrees, and the term prices nothing).
    for r in (0..s.p.relations.len()).map(RelationId::new) {
        let RelationKind::Broadcast {
            out, pin: Some(_), ..
        } = s.p.relations[r].kind
        else {
            continue;
        };
        let agrees = |s: &mut Solver<'_, '_>, id: LayoutId| {
            s.move_cost_under(r, LayoutId::default(), id).is_some()
        };
        if domains[out].len() > 1 && agrees(s, domains[out][0]) {
            let kept: SmallVec<[LayoutId; 8]> = domains[out]
                .clone()
                .into_iter()
                .filter(|&id| agrees(s, id))
                .collect();
            domains[out] = kept;
        }
    }
    domains
}

/// One of a copy term's readers: when it needs the layout.
#[derive(Clone, Debug)]
enum Reader {
    /// Always (a fixed need, or a reader whose result is fixed).
    Always,
    /// When value `.0` takes one of domain entries `.1`.
    When(ValueId, SmallVec<[usize; 4]>),
    /// When the copied value itself takes none of domain entries `.0` (a
    /// matrix need it does not meet).
    Unless(SmallVec<[usize; 4]>),
}

/// The copy of value `v` into layout `layout` (an id of its table): it costs
/// `cost` when a reader needs it and `v` is elsewhere.
struct Copy {
    v: ValueId,
    /// `layout`'s entry in `v`'s domain, if it is one.
    own: Option<usize>,
    cost: f64,
    readers: Vec<Reader>,
}

/// A cost between two variable values' labels: `cost[i * |b| + j]` for
/// entries `i` of `a` and `j` of `b`.
struct Pair {
    a: ValueId,
    b: ValueId,
    cost: Vec<f64>,
}

/// The integer program of one computation.
struct Model {
    domains: TiVec<ValueId, SmallVec<[LayoutId; 8]>>,
    /// Per value, the objective coefficient of each domain entry.
    linear: TiVec<ValueId, SmallVec<[f64; 8]>>,
    /// The cost no choice changes.
    constant: f64,
    copies: Vec<Copy>,
    pairs: Vec<Pair>,
}

/// An independent part of the model: its variable values, and its copy
/// and pair terms (indices).
struct Part {
    values: Vec<ValueId>,
    copies: Vec<usize>,
    pairs: Vec<usize>,
}

/// What solving one part gave.
struct PartOutcome {
    /// A lower bound on the part's cost.
    lower: f64,
    proven: bool,
    /// A cheaper labelling than the search's: a domain entry per value of
    /// the part, in order.
    better: Option<Vec<usize>>,
    node_stop: bool,
    clock_stop: bool,
}

impl Model {
    /// Prices every term with the search's cost functions.
    fn build(s: &mut Solver<'_, '_>, domains: TiVec<ValueId, SmallVec<[LayoutId; 8]>>) -> Model {
        let n = domains.len();
        let mut m = Model {
            linear: domains
                .iter()
                .map(|d| SmallVec::from_elem(0.0, d.len()))
                .collect(),
            domains,
            constant: 0.0,
            copies: Vec::new(),
            pairs: Vec::new(),
        };
        // Padding.
        if s.weights.padding_byte > 0.0 {
            for v in (0..n).map(ValueId::new) {
                for k in 0..m.domains[v].len() {
                    let c = s.padding_cost_of(v, m.domains[v][k]);
                    m.add_linear(v, k, c);
                }
            }
        }
        // Copies: per value, the layouts its readers may need, in the order
        // first met, each with its readers.
        let mut needed: TiVec<ValueId, Vec<(LayoutId, Vec<Reader>)>> = vec![Vec::new(); n].into();
        let add = |needed: &mut TiVec<ValueId, Vec<(LayoutId, Vec<Reader>)>>,
                   v: ValueId,
                   id: LayoutId,
                   reader: Reader| {
            match needed[v].iter_mut().find(|(l, _)| *l == id) {
                Some((_, readers)) => readers.push(reader),
                None => needed[v].push((id, vec![reader])),
            }
        };
        for r in (0..s.p.relations.len()).map(RelationId::new) {
            let rel = &s.p.relations[r];
            let v = rel.v;
            match rel.kind {
                RelationKind::Broadcast { pin: Some(_), .. } | RelationKind::Movement { .. } => {}
                RelationKind::Same { out } | RelationKind::Broadcast { out, .. } => {
                    let mut by_need: SmallVec<[(LayoutId, SmallVec<[usize; 4]>); 4]> =
                        SmallVec::new();
                    for j in 0..m.domains[out].len() {
                        let Some(id) = s.need_under(r, LayoutId::default(), m.domains[out][j])
                        else {
                            continue;
                        };
                        match by_need.iter_mut().find(|(l, _)| *l == id) {
                            Some((_, js)) => js.push(j),
                            None => by_need.push((id, SmallVec::from_slice(&[j]))),
                        }
                    }
                    let fixed = m.domains[out].len() == 1;
                    for (id, js) in by_need {
                        add(
                            &mut needed,
                            v,
                            id,
                            if fixed {
                                Reader::Always
                            } else {
                                Reader::When(out, js)
                            },
                        );
                    }
                }
                RelationKind::Need { need_id, matrix } => {
                    let reader = match matrix {
                        None => Reader::Always,
                        Some(_) => {
                            // The entries the matrix need accepts as they are.
                            let mut accepted: SmallVec<[usize; 4]> = SmallVec::new();
                            for i in 0..m.domains[v].len() {
                                if s.need_under(r, m.domains[v][i], LayoutId::default())
                                    .is_none()
                                {
                                    accepted.push(i);
                                }
                            }
                            if accepted.is_empty() {
                                Reader::Always
                            } else if accepted.len() == m.domains[v].len() {
                                continue;
                            } else {
                                Reader::Unless(accepted)
                            }
                        }
                    };
                    add(&mut needed, v, need_id, reader);
                }
            }
        }
        for (v, list) in needed.into_iter_enumerated() {
            for (id, readers) in list {
                let cost = s.p.values[v].copy_cost(id, &s.weights);
                let own = m.domains[v].iter().position(|&d| d == id);
                m.add_copy(Copy {
                    v,
                    own,
                    cost,
                    readers,
                });
            }
        }
        // Transposes, reshapes and re-tiling ops.
        for r in (0..s.p.relations.len()).map(RelationId::new) {
            let RelationKind::Movement { out, .. } = s.p.relations[r].kind else {
                continue;
            };
            let v = s.p.relations[r].v;
            m.add_pair(
                v,
                out,
                |s, i, j| s.move_cost_under(r, i, j).unwrap_or(0.0),
                s,
            );
        }
        for i in (0..s.p.retilings.len()).map(RetileId::new) {
            let (a, b) = (s.p.retilings[i].operand, s.p.retilings[i].out);
            m.add_pair(a, b, |s, x, y| s.retile_cost_under(i, x, y), s);
        }
        m
    }

    fn is_variable(&self, v: ValueId) -> bool {
        self.domains[v].len() > 1
    }

    fn add_linear(&mut self, v: ValueId, k: usize, c: f64) {
        if self.is_variable(v) {
            self.linear[v][k] += c;
        } else {
            self.constant += c;
        }
    }

    /// Adds a copy term, reduced to a constant or linear term when it is
    /// one.
    fn add_copy(&mut self, mut copy: Copy) {
        if copy.cost <= 0.0 {
            return;
        }
        let v = copy.v;
        if !self.is_variable(v) {
            // The value's layout is known: either it is the one needed (no
            // copy ever), or any reader that needs it makes the copy.
            if copy.own == Some(0) {
                return;
            }
            copy.own = None;
        }
        if copy.readers.iter().any(|r| matches!(r, Reader::Always)) {
            // Needed for sure: a copy unless the value takes the layout.
            self.constant += copy.cost;
            if let Some(k) = copy.own {
                self.linear[v][k] -= copy.cost;
            }
            return;
        }
        self.copies.push(copy);
    }

    /// Adds the cost `cost(s, i, j)` between labels of `a` and `b`, as a
    /// constant, linear or pair term.
    fn add_pair(
        &mut self,
        a: ValueId,
        b: ValueId,
        cost: impl Fn(&mut Solver<'_, '_>, LayoutId, LayoutId) -> f64,
        s: &mut Solver<'_, '_>,
    ) {
        let (da, db) = (self.domains[a].clone(), self.domains[b].clone());
        if a == b {
            for (k, &id) in da.iter().enumerate() {
                let c = cost(s, id, id);
                self.add_linear(a, k, c);
            }
            return;
        }
        let mut table = Vec::with_capacity(da.len() * db.len());
        for &i in &da {
            for &j in &db {
                table.push(cost(s, i, j));
            }
        }
        let w = db.len();
        let only_b = (0..w).all(|j| (0..da.len()).all(|i| table[i * w + j] == table[j]));
        let only_a = (0..da.len()).all(|i| (0..w).all(|j| table[i * w + j] == table[i * w]));
        if only_b {
            for (j, &cost) in table.iter().enumerate().take(w) {
                self.add_linear(b, j, cost);
            }
        } else if only_a {
            for i in 0..da.len() {
                self.add_linear(a, i, table[i * w]);
            }
        } else {
            self.pairs.push(Pair { a, b, cost: table });
        }
    }

    /// The independent parts: variable values joined by a copy or pair
    /// term, in order of their first value; each part's terms in order.
    fn parts(&self) -> Vec<Part> {
        let n = self.domains.len();
        let mut uf = UnionFind::new(n);
        for c in &self.copies {
            let mut first: Option<ValueId> = self.is_variable(c.v).then_some(c.v);
            for r in &c.readers {
                if let Reader::When(o, _) = r {
                    match first {
                        Some(f) => uf.union(f, *o),
                        None => first = Some(*o),
                    }
                }
            }
        }
        for p in &self.pairs {
            uf.union(p.a, p.b);
        }
        let mut index: TiVec<ValueId, usize> = vec![usize::MAX; n].into();
        let mut parts: Vec<Part> = Vec::new();
        for group in uf.groups() {
            let values: Vec<ValueId> = group.into_iter().filter(|&v| self.is_variable(v)).collect();
            if values.is_empty() {
                continue;
            }
            for &v in &values {
                index[v] = parts.len();
            }
            parts.push(Part {
                values,
                copies: Vec::new(),
                pairs: Vec::new(),
            });
        }
        for (i, c) in self.copies.iter().enumerate() {
            let v = if self.is_variable(c.v) {
                c.v
            } else {
                match c.readers.iter().find_map(|r| {
                    if let Reader::When(o, _) = r {
                        Some(*o)
                    } else {
                        None
                    }
                }) {
                    Some(o) => o,
                    None => continue,
                }
            };
            parts[index[v]].copies.push(i);
        }
        for (i, p) in self.pairs.iter().enumerate() {
            parts[index[p.a]].pairs.push(i);
        }
        parts
    }

    /// The part's cost under domain entries `picks` (one per value of the
    /// part, in order): the exact energy of its terms.
    fn part_cost(&self, part: &Part, picks: &[usize]) -> f64 {
        let mut pick = rustc_hash::FxHashMap::default();
        for (&v, &k) in part.values.iter().zip(picks) {
            pick.insert(v, k);
        }
        let at = |v: ValueId| pick.get(&v).copied().unwrap_or(0);
        let mut cost = 0.0;
        for (&v, &k) in part.values.iter().zip(picks) {
            cost += self.linear[v][k];
        }
        for &i in &part.copies {
            let c = &self.copies[i];
            let is_own = self.is_variable(c.v) && c.own == Some(at(c.v));
            let needed = c.readers.iter().any(|r| match r {
                Reader::Always => true,
                Reader::When(o, js) => js.contains(&at(*o)),
                Reader::Unless(ks) => !ks.contains(&at(c.v)),
            });
            if needed && !is_own {
                cost += c.cost;
            }
        }
        for &i in &part.pairs {
            let p = &self.pairs[i];
            let w = self.domains[p.b].len();
            cost += p.cost[at(p.a) * w + at(p.b)];
        }
        cost
    }

    /// Adds pair `p`'s cost to the program: a variable `t` at least the
    /// cost of the two values' labels, linearised with one row per label
    /// of each side (`xs` gives a value's label variables).
    fn add_pair_rows<'x>(
        &self,
        lp: &mut microlp::Problem,
        p: &Pair,
        xs: &impl Fn(ValueId) -> &'x Vec<Variable>,
    ) {
        let nb = self.domains[p.b].len();
        let t = lp.add_var(1.0, (0.0, f64::INFINITY));
        // For each label j of b: t >= sum_i C[i][j] x[a][i] - M_j (1 - x[b][j]);
        // then the same for each label of a, the roles swapped. `cost(o, k)`
        // is the cost with label `o` of `other` and `k` of `key`.
        let mut rows = |key: ValueId, other: ValueId, cost: &dyn Fn(usize, usize) -> f64| {
            let other_labels = self.domains[other].len();
            for k in 0..self.domains[key].len() {
                let big = (0..other_labels).map(|o| cost(o, k)).fold(0.0, f64::max);
                if big <= 0.0 {
                    continue;
                }
                let mut row = Terms::default();
                row.add(t, 1.0);
                for o in 0..other_labels {
                    row.add(xs(other)[o], -cost(o, k));
                }
                row.add(xs(key)[k], -big);
                lp.add_constraint(row.expr(), ComparisonOp::Ge, -big);
            }
        };
        rows(p.b, p.a, &|i, j| p.cost[i * nb + j]);
        rows(p.a, p.b, &|j, i| p.cost[i * nb + j]);
    }

    /// Solves one part as an integer program, from the search's labels.
    fn solve_part(&self, part: &Part, nodes: u64, time: Duration) -> PartOutcome {
        let search = self.part_cost(part, &vec![0; part.values.len()]);
        let stopped = |clock_stop: bool| PartOutcome {
            lower: 0.0,
            proven: false,
            better: None,
            node_stop: false,
            clock_stop,
        };
        let mut lp = microlp::Problem::new(OptimizationDirection::Minimize);
        let mut x: rustc_hash::FxHashMap<ValueId, Vec<Variable>> = rustc_hash::FxHashMap::default();
        let mut hint = Vec::new();
        for &v in &part.values {
            let vars: Vec<Variable> = self.linear[v]
                .iter()
                .map(|&c| lp.add_binary_var(c))
                .collect();
            let mut one = LinearExpr::empty();
            for (k, &var) in vars.iter().enumerate() {
                one.add(var, 1.0);
                hint.push((var, if k == 0 { 1.0 } else { 0.0 }));
            }
            lp.add_constraint(one, ComparisonOp::Eq, 1.0);
            x.insert(v, vars);
        }
        let xs = |v: ValueId| &x[&v];
        for &i in &part.copies {
            let c = &self.copies[i];
            let y = lp.add_var(c.cost, (0.0, f64::INFINITY));
            // y >= reader - x[v][own]
            for r in &c.readers {
                let mut row = Terms::default();
                row.add(y, 1.0);
                let mut rhs = 0.0;
                if let (true, Some(k)) = (self.is_variable(c.v), c.own) {
                    row.add(xs(c.v)[k], 1.0);
                }
                match r {
                    Reader::Always => rhs = 1.0,
                    Reader::When(o, js) => {
                        for &j in js {
                            row.add(xs(*o)[j], -1.0);
                        }
                    }
                    Reader::Unless(ks) => {
                        rhs = 1.0;
                        for &k in ks.iter().filter(|&&k| Some(k) != c.own) {
                            row.add(xs(c.v)[k], 1.0);
                        }
                    }
                }
                lp.add_constraint(row.expr(), ComparisonOp::Ge, rhs);
            }
        }
        for &i in &part.pairs {
            self.add_pair_rows(&mut lp, &self.pairs[i], &xs);
        }
        let mut options = SolveOptions::default();
        options.node_limit = Some(nodes);
        options.time_limit = Some(time);
        options.warm_start = Some(hint);
        let outcome = match lp.solve_with(options) {
            Ok(o) => o,
            Err(e) => {
                tracing::debug!(error = %e, values = part.values.len(), "exact solver failed on a part");
                return stopped(false);
            }
        };
        let reason = outcome.termination_reason();
        let stats = outcome.stats();
        let clock_stop = reason == microlp::TerminationReason::TimeLimit;
        let node_stop = reason == microlp::TerminationReason::NodeLimit;
        let Some(solution) = outcome.solution() else {
            let lower = if clock_stop {
                0.0
            } else {
                stats.best_bound.unwrap_or(0.0).max(0.0)
            };
            return PartOutcome {
                lower,
                proven: false,
                better: None,
                node_stop,
                clock_stop,
            };
        };
        let picks: Vec<usize> = part
            .values
            .iter()
            .map(|v| {
                let vars = xs(*v);
                (0..vars.len())
                    .max_by(|&a, &b| {
                        solution
                            .var_value(vars[a])
                            .total_cmp(&solution.var_value(vars[b]))
                    })
                    .unwrap_or(0)
            })
            .collect();
        let found = self.part_cost(part, &picks);
        let proven = outcome.is_optimal();
        // The bound: the optimum when proven (the exact cost of what was
        // found, as the model prices it), else the search's best bound.
        let lower = if proven {
            found.min(search)
        } else {
            stats
                .best_bound
                .unwrap_or(0.0)
                .clamp(0.0, search.min(found))
        };
        // A labelling the clock stopped could differ from run to run: only
        // a proof or the node budget's answer replaces the search's.
        let better = (!clock_stop && found < search - 0.5).then_some(picks);
        PartOutcome {
            lower,
            proven,
            better,
            node_stop,
            clock_stop,
        }
    }
}

/// A linear expression in which a variable may be added more than once.
#[derive(Default)]
struct Terms {
    terms: SmallVec<[(Variable, f64); 8]>,
}

impl Terms {
    fn add(&mut self, var: Variable, coeff: f64) {
        match self.terms.iter_mut().find(|(v, _)| *v == var) {
            Some((_, c)) => *c += coeff,
            None => self.terms.push((var, coeff)),
        }
    }

    fn expr(&self) -> LinearExpr {
        let mut e = LinearExpr::empty();
        for &(var, c) in &self.terms {
            if c != 0.0 {
                e.add(var, c);
            }
        }
        e
    }
}

/// The node budget of each part: the time limit's nodes, shared in
/// proportion to each part's size (its variables), at least one node each.
fn node_budget(model: &Model, parts: &[Part], limits: &Limits) -> Vec<u64> {
    let total = (limits.time.as_secs_f64() * NODES_PER_SECOND as f64) as u64;
    let size = |p: &Part| -> u64 {
        p.values
            .iter()
            .map(|&v| model.domains[v].len() as u64)
            .sum::<u64>()
            + (p.copies.len() + p.pairs.len()) as u64
    };
    let all: u64 = parts.iter().map(size).sum::<u64>().max(1);
    parts
        .iter()
        .map(|p| (total.saturating_mul(size(p)) / all).max(1))
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::problem::Problem;
    use crate::{Phase, context_for, materialize, solve};
    use hlo::CallGraph;

    /// The most labellings a test enumerates.
    const MAX_ENUMERATED: usize = 20_000;

    /// What one module's entry computation gave.
    struct Checked {
        heuristic: u64,
        exact: u64,
        lower: f64,
        proven: bool,
        /// The least cost over every labelling of the domains, when there
        /// were few enough to enumerate.
        enumerated: Option<u64>,
    }

    /// Solves the entry computation of `text` on `target_name` with both
    /// solvers, and enumerates every labelling of the exact solver's
    /// domains, each priced by materialising it (`materialize::plan`), not
    /// by the integer program.
    fn check(text: &str, target_name: &str) -> Checked {
        let module = hlo::parse_module(text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let target = target::load_builtin(target_name).unwrap();
        let graph = CallGraph::new(&module);
        let mut none = |_: hlo::CompId, _: Phase| -> Result<crate::Signature, crate::PassError> {
            Err(crate::PassError::Module("no callee".into()))
        };
        let ctx =
            context_for(&module, &graph, module.entry, Phase::Final, None, &mut none).unwrap();
        let comp = module.computation(module.entry);
        let names = |_: hlo::CompId| String::new();
        let mut p = Problem::build(comp, &ctx, &target).unwrap();
        let h = solve::solve(&mut p, &target);
        let heuristic = materialize::plan(&p, &h, &target, &names).stats.cost;
        let mut p = Problem::build(comp, &ctx, &target).unwrap();
        let (e, bound) = solve::solve_exact(&mut p, &target, &Limits::default());
        let exact = materialize::plan(&p, &e, &target, &names).stats.cost;
        let domains = bound.domains.clone();
        let combos = domains
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(d.len()))
            .unwrap_or(usize::MAX);
        let enumerated = (combos <= MAX_ENUMERATED).then(|| {
            let mut at: TiVec<ValueId, usize> = vec![0usize; domains.len()].into();
            let mut best = u64::MAX;
            loop {
                let labels: TiVec<ValueId, LayoutId> =
                    at.iter().zip(&domains).map(|(&k, d)| d[k]).collect();
                let solution = solve::solution_for(&mut p, &target, &labels);
                best = best.min(materialize::plan(&p, &solution, &target, &names).stats.cost);
                // The next labelling, as an odometer.
                let Some(i) = at.keys().find(|&i| at[i] + 1 < domains[i].len()) else {
                    break;
                };
                at[i] += 1;
                at.raw[..i.index()].iter_mut().for_each(|k| *k = 0);
            }
            best
        });
        Checked {
            heuristic,
            exact,
            lower: bound.lower,
            proven: bound.proven,
            enumerated,
        }
    }

    /// The exact solver's answer is the enumerated optimum, its bound
    /// never exceeds it, and it never costs more than the heuristic's.
    fn assert_optimal(c: &Checked, at: &str) {
        let optimum = c
            .enumerated
            .unwrap_or_else(|| panic!("{at}: too many labellings to enumerate"));
        assert_eq!(
            c.exact, optimum,
            "{at}: the exact solver missed the optimum"
        );
        assert!(c.proven, "{at}: not proven");
        assert!(
            c.lower <= optimum as f64 + 1e-6,
            "{at}: bound {} above the optimum {optimum}",
            c.lower
        );
        assert!(c.exact <= c.heuristic, "{at}");
    }

    /// A transpose between a column-major parameter and row-major users:
    /// where the data moves (the transpose, a copy, or the result) is the
    /// whole question.
    const TRANSPOSE: &str = "HloModule transpose
ENTRY %main (p: f32[4,8], q: f32[8,4]) -> f32[8,4] {
  %p = f32[4,8]{0,1} parameter(0)
  %q = f32[8,4]{1,0} parameter(1)
  %t = f32[8,4]{1,0} transpose(%p), dimensions={1,0}
  %a = f32[8,4]{1,0} add(%t, %q)
  %n = f32[8,4]{1,0} negate(%a)
  ROOT %r = f32[8,4]{0,1} multiply(%n, %q)
}
";

    /// One value read in two layouts (the tuple's and the transpose's):
    /// copies of it into one layout are shared.
    const SHARED: &str = "HloModule shared
ENTRY %main (p: f32[4,8], q: f32[4,8]) -> (f32[4,8], f32[8,4], f32[4,8]) {
  %p = f32[4,8]{0,1} parameter(0)
  %q = f32[4,8]{1,0} parameter(1)
  %a = f32[4,8]{1,0} add(%p, %q)
  %e = f32[4,8]{1,0} exponential(%a)
  %t = f32[8,4]{1,0} transpose(%e), dimensions={1,0}
  %m = f32[4,8]{1,0} multiply(%e, %q)
  ROOT %o = (f32[4,8]{0,1}, f32[8,4]{1,0}, f32[4,8]{1,0}) tuple(%e, %t, %m)
}
";

    /// Reshapes around a transpose of a rank-3 value: on TPU, whether the
    /// reshapes are bitcasts depends on the tiling and on combining.
    const RESHAPES: &str = "HloModule reshapes
ENTRY %main (x: f32[6,20]) -> f32[20,6] {
  %x = f32[6,20]{1,0} parameter(0)
  %r = f32[2,3,20]{2,1,0} reshape(%x)
  %t = f32[20,2,3]{2,1,0} transpose(%r), dimensions={2,0,1}
  %n = f32[20,2,3]{2,1,0} negate(%t)
  ROOT %o = f32[20,6]{1,0} reshape(%n)
}
";

    /// A softmax-like reduction: a reduce, a broadcast of its result, and
    /// a result wanted in another order.
    const REDUCE: &str = "HloModule reduce
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[4,16,8]) -> f32[4,16,8] {
  %x = f32[4,16,8]{2,1,0} parameter(0)
  %z = f32[] constant(0)
  %s = f32[16,8]{1,0} reduce(%x, %z), dimensions={0}, to_apply=%add
  %b = f32[4,16,8]{2,1,0} broadcast(%s), dimensions={1,2}
  %d = f32[4,16,8]{2,1,0} subtract(%x, %b)
  ROOT %o = f32[4,16,8]{1,0,2} exponential(%d)
}
";

    #[test]
    fn hand_made_computations_reach_the_enumerated_optimum() {
        let mut costly = 0;
        for (name, text) in [
            ("transpose", TRANSPOSE),
            ("shared", SHARED),
            ("reshapes", RESHAPES),
            ("reduce", REDUCE),
        ] {
            for target in ["cpu", "gpu", "tpu"] {
                let c = check(text, target);
                assert_optimal(&c, &format!("{name} on {target}"));
                costly += usize::from(c.exact > 0);
            }
        }
        // The cases must have something to decide: most cost something.
        assert!(costly >= 8, "only {costly} cases move any byte");
    }

    /// An argmin over the major dimension, as JAX writes it: a variadic
    /// reduce of the data and an iota, the index result wanted row-major.
    /// On tpu the iota stores less padding with 64 most minor
    /// (`{1,2,0}`), but the reduce then re-tiles unless its index result
    /// takes the induced order `{0,1}` too (and is copied into the
    /// result's `{1,0}`): neither side gains alone, only together.
    const ARGMIN: &str = "HloModule argmin
%argmin (a: f32[], i: s32[], b: f32[], j: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %i = s32[] parameter(1)
  %b = f32[] parameter(2)
  %j = s32[] parameter(3)
  %lt = pred[] compare(%a, %b), direction=LT
  %v = f32[] select(%lt, %a, %b)
  %k = s32[] select(%lt, %i, %j)
  ROOT %t = (f32[], s32[]) tuple(%v, %k)
}

ENTRY %main (x: f32[16,64,48]) -> s32[64,48] {
  %x = f32[16,64,48]{2,1,0} parameter(0)
  %iota = s32[16,64,48]{2,1,0} iota(), iota_dimension=0
  %inf = f32[] constant(inf)
  %zero = s32[] constant(0)
  %r = (f32[64,48]{1,0}, s32[64,48]{1,0}) reduce(%x, %iota, %inf, %zero), dimensions={0}, to_apply=%argmin
  ROOT %index = s32[64,48]{1,0} get-tuple-element(%r), index=1
}
";

    /// The default solver reaches the argmin's proven optimum by moving
    /// the iota and the reduce's index result together (a joint move
    /// across the reduce), and leaves the data's result in the order of
    /// the fixed parameter: the leaves of a variadic reduce move apart.
    #[test]
    fn argmin_iota_moves_with_the_reduce_index_result() {
        let c = check(ARGMIN, "tpu");
        assert_optimal(&c, "argmin on tpu");
        assert_eq!(c.heuristic, c.exact, "the default missed the optimum");
        // Padding: the fixed parameter 327680, the iota 196608 (327680 in
        // {2,1,0}), the data result 20480, the index result 12288 (20480
        // in {1,0}) and the two scalar constants 508 each (one element of
        // a 128-element tile); the copy of the index result into {1,0}
        // writes 32768 bytes into a buffer padded by 20480. The default
        // orders everywhere (the answer before joint moves across
        // reduces) cost 86016 more: 697336.
        assert_eq!(
            c.exact,
            327680 + 196608 + 20480 + 12288 + 2 * 508 + 32768 + 20480
        );
        let mut module = hlo::parse_module(ARGMIN, "t").unwrap();
        let target = target::load_builtin("tpu").unwrap();
        let report = crate::run(&mut module, &target).unwrap();
        let main = report.computations.iter().find(|s| s.name == "main");
        assert_eq!(main.map(|s| s.cost), Some(c.exact));
        let text = hlo::print_module(&module);
        for want in [
            "%iota = s32[16,64,48]{1,2,0:T(8,128)} iota()",
            "%r = (f32[64,48]{1,0:T(8,128)}, s32[64,48]{0,1:T(8,128)}) reduce(",
            "copy(%index)",
        ] {
            assert!(text.contains(want), "no `{want}` in:\n{text}");
        }
    }

    /// A random small module: two parameters of random layouts, a few ops
    /// (elementwise, transpose, reshape, broadcast and reduce) each on an
    /// earlier value, and a result of random layout.
    fn random_module(dims: (i64, i64), layouts: [bool; 3], ops: &[u8]) -> String {
        let (a, b) = dims;
        let order = |col: bool| if col { "{0,1}" } else { "{1,0}" };
        let mut body = vec![
            format!("  %p0 = f32[{a},{b}]{} parameter(0)", order(layouts[0])),
            format!("  %p1 = f32[{a},{b}]{} parameter(1)", order(layouts[1])),
            "  %z = f32[] constant(0)".to_string(),
        ];
        // Values so far, by name and dims.
        let mut values: Vec<(String, Vec<i64>)> =
            vec![("p0".into(), vec![a, b]), ("p1".into(), vec![a, b])];
        let text = |d: &[i64]| {
            format!(
                "f32[{}]",
                d.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        let default = |d: &[i64]| {
            format!(
                "{{{}}}",
                (0..d.len())
                    .rev()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        for (i, &op) in ops.iter().enumerate() {
            let (src, d) =
                values[values.len() - 1 - (op as usize / 6) % values.len().min(2)].clone();
            let name = format!("v{i}");
            let (shape, inst) = match op % 6 {
                0 => (d.clone(), format!("negate(%{src})")),
                1 => match values.iter().find(|(n, e)| *e == d && *n != src) {
                    Some((other, _)) => (d.clone(), format!("add(%{src}, %{other})")),
                    None => (d.clone(), format!("exponential(%{src})")),
                },
                2 if d.len() == 2 => (
                    vec![d[1], d[0]],
                    format!("transpose(%{src}), dimensions={{1,0}}"),
                ),
                2 => (
                    vec![d[2], d[0], d[1]],
                    format!("transpose(%{src}), dimensions={{2,0,1}}"),
                ),
                3 if d.len() == 2 => (vec![2, d[0], d[1] / 2], format!("reshape(%{src})")),
                3 => (vec![d[0] * d[1], d[2]], format!("reshape(%{src})")),
                4 if d.len() == 2 => (
                    vec![3, d[0], d[1]],
                    format!("broadcast(%{src}), dimensions={{1,2}}"),
                ),
                _ if d.len() == 3 => (
                    vec![d[1], d[2]],
                    format!("reduce(%{src}, %z), dimensions={{0}}, to_apply=%add"),
                ),
                _ => (d.clone(), format!("negate(%{src})")),
            };
            body.push(format!(
                "  %{name} = {}{} {inst}",
                text(&shape),
                default(&shape)
            ));
            values.push((name, shape));
        }
        let (last, d) = values.last().cloned().unwrap_or_default();
        let root_order = if layouts[2] && d.len() == 2 {
            "{0,1}".to_string()
        } else {
            default(&d)
        };
        body.push(format!(
            "  ROOT %o = {}{root_order} negate(%{last})",
            text(&d)
        ));
        format!(
            "HloModule random\n%add (a: f32[], b: f32[]) -> f32[] {{\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}}\n\nENTRY %main (p0: f32[{a},{b}], p1: f32[{a},{b}]) -> {} {{\n{}\n}}\n",
            text(&d),
            body.join("\n")
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// On random small problems the exact cost is at most the
        /// heuristic's, both are at least the lower bound, and where the
        /// labellings are few enough to enumerate, the exact cost is the
        /// least of them.
        #[test]
        fn exact_never_costs_more_than_the_heuristic(
            dims in (prop::sample::select(vec![2i64, 4, 6, 8]), prop::sample::select(vec![4i64, 8, 16])),
            layouts in any::<[bool; 3]>(),
            ops in prop::collection::vec(any::<u8>(), 2..6),
            tpu in any::<bool>(),
        ) {
            let text = random_module(dims, layouts, &ops);
            let target = if tpu { "tpu" } else { "cpu" };
            let c = check(&text, target);
            prop_assert!(c.exact <= c.heuristic, "{text}");
            prop_assert!(c.lower <= c.exact as f64 + 1e-6, "{text}");
            prop_assert!(c.lower <= c.heuristic as f64 + 1e-6, "{text}");
            if let Some(optimum) = c.enumerated {
                prop_assert_eq!(c.exact, optimum, "{}", text);
                prop_assert!(c.proven);
            }
        }
    }
}
