//! The layout-assignment pass.
//!
//! For every array value of a module it chooses a layout, then makes every
//! mismatch explicit with a copy. Constraints come from the entry
//! computation layout, custom calls, called computations, loops and the
//! target's rules; the choice among the remaining freedom minimises bytes
//! moved (copies, and transposes or reshapes that are not bitcasts) over
//! each computation as a whole, not in visiting order.
//!
//! The work is per computation ([`assign_computation`]), given a
//! [`Context`] built by [`context_for`] from the signatures of the
//! computations around it. [`run`] drives that over a module; the `db`
//! crate drives the same functions through incremental queries.

mod algebra;
mod calls;
mod check;
mod context;
mod exact;
mod ids;
mod materialize;
mod problem;
mod report;
mod retile;
mod solve;

use std::collections::BTreeMap;
use std::sync::Arc;

use hlo::{
    CallGraph, CallRole, CallSchedule, CompId, Computation, InstId, Module, ModuleFacts, Opcode,
    Parallelism, Split,
};
use rustc_hash::FxHashMap;
use shape::{Layout, Shape};
use target::TargetSpec;
// What a target requires and how it tiles lives with the target; the pass's
// modules reach it as `crate::policy` and `crate::tiling`.
use target::{policy, tiling};

pub use calls::{
    BoundSite, CallQueries, Moved, WEIGH_LEVELS, bound_site, condition_boundary, decide,
    subtree_cost,
};
pub use check::{LayoutProblem, check_computation_layouts, check_layouts};
pub use context::{BoundaryReason, Context, Signature};
pub use materialize::{
    ApplyError, ComputationAssignment, PlannedCopy, PlannedOrientation, apply,
    refresh_forwarded_shapes,
};
pub use problem::{ProblemError, Site};
pub use report::{
    ComputationStats, CopyCause, CopyRecord, FilledLayout, MovementRecord, Optimality,
    OrientationRecord, Report, RetileRecord, TiledEntryLayout,
};

/// Why the pass could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PassError {
    #[error(transparent)]
    Problem(#[from] ProblemError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("the call graph has a cycle through computation {0}")]
    RecursiveCall(String),
    #[error("{0}")]
    Module(String),
}

/// Which solver chooses each computation's layouts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SolverKind {
    /// The local search (`solve.rs`): fast, no proof.
    #[default]
    Heuristic,
    /// The local search, then an integer program over the same cost model
    /// (`exact.rs`) from its answer: the optimum over every value's
    /// candidate layouts, or a lower bound and the best labelling found
    /// within the time limit.
    Exact,
}

impl SolverKind {
    /// The solver's name on command lines and in requests.
    pub fn name(self) -> &'static str {
        match self {
            SolverKind::Heuristic => "heuristic",
            SolverKind::Exact => "exact",
        }
    }

    /// Parses a solver name.
    pub fn from_name(name: &str) -> Option<SolverKind> {
        match name {
            "heuristic" => Some(SolverKind::Heuristic),
            "exact" => Some(SolverKind::Exact),
            _ => None,
        }
    }
}

/// The solver and its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SolverOptions {
    /// Which solver.
    pub kind: SolverKind,
    /// The exact solver's time per computation (see `exact::Limits`): it
    /// sets a deterministic budget of branch-and-bound nodes, and is a
    /// wall-clock backstop.
    pub time_limit: std::time::Duration,
}

impl SolverOptions {
    /// The default time limit of the exact solver, per computation.
    pub const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

    /// The exact solver with the default time limit.
    pub fn exact() -> SolverOptions {
        SolverOptions {
            kind: SolverKind::Exact,
            time_limit: Self::DEFAULT_TIME_LIMIT,
        }
    }
}

impl Default for SolverOptions {
    fn default() -> Self {
        SolverOptions {
            kind: SolverKind::Heuristic,
            time_limit: Self::DEFAULT_TIME_LIMIT,
        }
    }
}

/// Which view of a computation's signature is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Assigned with no requirement on its result from its callers: what a
    /// conditional branch would like to return.
    Free,
    /// Assigned with every requirement: the signature callers see.
    Final,
    /// Assigned without its only caller's choice: what a computation whose
    /// boundary its caller decides (`bound_site`) would choose alone. Its
    /// caller reads this, never the final one, which depends on it.
    Alone,
}

/// Builds the context of computation `id`. `signature(c, phase)` must give
/// another computation's signature; it is only asked for computations this
/// one calls (final, or alone for those whose boundary it decides) or, for
/// a branch, its sibling branches (free), or for a loop condition, its
/// body (final). With `boundary`, the parameters and result are fixed to
/// it (only the parameters, for a loop condition): the layouts the only
/// caller chose.
pub fn context_for(
    module: &dyn ModuleFacts,
    graph: &CallGraph,
    id: CompId,
    phase: Phase,
    boundary: Option<&Signature>,
    signature: &mut dyn FnMut(CompId, Phase) -> Result<Signature, PassError>,
) -> Result<Context, PassError> {
    let mut ctx = Context::default();
    let entry = module.entry();
    if id == entry {
        ctx.is_entry = true;
        let layout = module.entry_layout();
        ctx.params = Some((layout.parameters, BoundaryReason::Entry));
        ctx.result = Some((layout.result, BoundaryReason::Entry));
        ctx.io_alias = module.io_alias();
    } else if let Some(b) = boundary {
        match bound_site(graph, entry, id) {
            Some(BoundSite::WhileCondition { body, .. }) => {
                ctx.params = Some((
                    Arc::new(b.params.clone()),
                    BoundaryReason::LoopState {
                        body: module.name(body),
                    },
                ));
            }
            Some(BoundSite::Called { caller } | BoundSite::WhileBody { caller, .. }) => {
                let reason = BoundaryReason::Caller {
                    caller: module.name(caller),
                };
                ctx.params = Some((Arc::new(b.params.clone()), reason.clone()));
                ctx.result = Some((Arc::new(b.result.clone()), reason));
            }
            None => {}
        }
    }
    for role in &graph.roles[id.index()] {
        match role {
            CallRole::WhileBody => ctx.loop_body = true,
            CallRole::WhileCondition { body } if ctx.params.is_none() => {
                let sig = signature(*body, Phase::Final)?;
                ctx.params = Some((
                    Arc::new(sig.into_parts().params),
                    BoundaryReason::LoopState {
                        body: module.name(*body),
                    },
                ));
            }
            CallRole::Branch {
                conditional,
                branches,
            } if phase == Phase::Final && ctx.result.is_none() => {
                ctx.result = branch_result(conditional, branches, signature)?;
            }
            _ => {}
        }
    }
    for &c in &graph.callees[id.index()] {
        // Applied computations are scalar; a loop condition's signature is
        // not read by its caller (the while reads its body's).
        if graph.roles[c.index()]
            .iter()
            .all(|r| matches!(r, CallRole::Applied | CallRole::WhileCondition { .. }))
        {
            continue;
        }
        let phase = match bound_site(graph, entry, c) {
            Some(BoundSite::Called { caller } | BoundSite::WhileBody { caller, .. })
                if caller == id =>
            {
                Phase::Alone
            }
            _ => Phase::Final,
        };
        ctx.callees.insert(c, signature(c, phase)?);
    }
    Ok(ctx)
}

/// The result layout all branches of a conditional must return: per array
/// leaf, the branch layout that the fewest bytes of copies bring the other
/// branches to (ties go to the earlier branch).
fn branch_result(
    conditional: &str,
    branches: &[CompId],
    signature: &mut dyn FnMut(CompId, Phase) -> Result<Signature, PassError>,
) -> Result<Option<(Arc<Shape>, BoundaryReason)>, PassError> {
    let mut results = Vec::with_capacity(branches.len());
    for &b in branches {
        results.push(signature(b, Phase::Free)?.into_parts().result);
    }
    let Some(first) = results.first() else {
        return Ok(None);
    };
    let mut chosen = first.clone();
    let leaves: Vec<Vec<shape::ArrayShape>> = results
        .iter()
        .map(|r| r.array_leaves().into_iter().cloned().collect())
        .collect();
    let mut i = 0;
    chosen.for_each_array_mut(&mut |a| {
        let mut best: Option<(u64, shape::SharedLayout)> = None;
        for candidate in leaves.iter().filter_map(|l| l.get(i)) {
            let Some(layout) = &candidate.layout else {
                continue;
            };
            let cost: u64 = leaves
                .iter()
                .filter_map(|l| l.get(i))
                .filter(|other| !other.layout.as_ref().is_some_and(|o| o == layout))
                .map(|_| algebra::storage_bytes(candidate))
                .sum();
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, layout.clone()));
            }
        }
        a.layout = best.map(|(_, l)| l);
        i += 1;
    });
    Ok(Some((
        Arc::new(chosen),
        BoundaryReason::ConditionalResult {
            conditional: conditional.to_string(),
        },
    )))
}

/// Assigns layouts in one computation.
pub fn assign_computation(
    comp: &Computation,
    comp_names: &dyn Fn(CompId) -> String,
    ctx: &Context,
    target: &TargetSpec,
    solver: &SolverOptions,
) -> Result<ComputationAssignment, PassError> {
    let _span = tracing::debug_span!("assign", computation = %comp.name).entered();
    let t = std::time::Instant::now();
    let mut built_problem = problem::Problem::build(comp, ctx, target)?;
    let built = t.elapsed();
    let (solution, bound) = match solver.kind {
        SolverKind::Heuristic => (solve::solve(&mut built_problem, target), None),
        SolverKind::Exact => {
            let (solution, bound) = solve::solve_exact(
                &mut built_problem,
                target,
                &exact::Limits {
                    time: solver.time_limit,
                },
            );
            (solution, Some(bound))
        }
    };
    let solved = t.elapsed();
    let mut p = built_problem.problem;
    let mut plan = materialize::plan(&p, &solution, target, comp_names);
    let weights = &target.cost;
    let whole = [
        weights.copy_byte,
        weights.transpose_byte,
        weights.padding_byte,
    ]
    .iter()
    .all(|w| w.fract() == 0.0);
    plan.stats.set_optimality(bound.as_ref(), whole);
    tracing::debug!(
        values = p.values.len(),
        relations = p.relations.len(),
        build_us = built.as_micros() as u64,
        solve_us = (solved - built).as_micros() as u64,
        plan_us = (t.elapsed() - solved).as_micros() as u64,
        "assigned"
    );
    // A large problem is freed on the pool, not on the way: thousands of
    // values, relations and layouts, which nothing waits for.
    let parts = (
        std::mem::take(&mut p.values),
        std::mem::take(&mut p.relations),
        std::mem::take(&mut p.table),
        std::mem::take(&mut p.leaf_values),
        solution,
    );
    Parallelism::drop_later(Split::LargeProblem, parts.0.len(), parts);
    Ok(plan)
}

/// Assigns layouts in every computation of `module` with the default
/// solver, edits it in place, and reports what it did.
pub fn run(module: &mut Module, target: &TargetSpec) -> Result<Report, PassError> {
    run_with(module, target, &SolverOptions::default())
}

/// [`run`] with a choice of solver.
pub fn run_with(
    module: &mut Module,
    target: &TargetSpec,
    solver: &SolverOptions,
) -> Result<Report, PassError> {
    let graph = CallGraph::new(module);
    let ids: Vec<CompId> = module.computation_ids().collect();
    // Scalar computations applied by reductions, sorts and scatters depend
    // on no other computation, and none depends on them (see
    // `is_independent_leaf`): they are assigned on another core while the
    // driver works through the rest, whose order and recursion stay as
    // they are. A large model has hundreds of them; a small module's few
    // are not worth a thread.
    let size = module.instruction_count();
    let (leaves, others): (Vec<CompId>, Vec<CompId>) = ids
        .iter()
        .partition(|&&id| is_independent_leaf(&graph, module.entry, id));
    let shared: &Module = module;
    let (driven, leaf_results) = Parallelism::join(
        Split::Module,
        size,
        || {
            let mut driver = Driver::new(shared, &graph, target, solver);
            driver.warm(&graph.schedule(), &|id| {
                !is_independent_leaf(&graph, shared.entry, id)
            });
            let mut finals = Vec::with_capacity(others.len());
            for &id in &others {
                let result = driver.assignment(id, View::Final);
                let failed = result.is_err();
                finals.push((id, result));
                if failed {
                    break;
                }
            }
            // Once the memo is gone each final assignment usually has one
            // owner left and moves out without a copy (the entry's is the
            // largest value the pass builds); one shared with another
            // final is copied.
            drop(driver);
            finals
                .into_iter()
                .map(|(id, a)| {
                    let a = a.map(|a| {
                        Arc::try_unwrap(a)
                            .unwrap_or_else(|shared| ComputationAssignment::clone(&shared))
                    });
                    (id, a)
                })
                .collect::<Vec<_>>()
        },
        || {
            Parallelism::map(Split::Module, size, &leaves, |&id| {
                (id, assign_leaf(shared, &graph, id, target, solver))
            })
        },
    );
    // The first failure in computation order is the one a sequential run
    // meets first: leaves are never reached through another computation.
    let mut results: Vec<(CompId, Result<ComputationAssignment, PassError>)> = driven;
    results.extend(leaf_results);
    results.sort_by_key(|(id, _)| *id);
    let mut assignments = BTreeMap::new();
    for (id, result) in results {
        assignments.insert(id, result?);
    }
    Ok(apply_module(module, &assignments)?)
}

/// Whether computation `id` is only ever applied (by a reduce, sort,
/// scatter, map and the like) and calls nothing: its context is then
/// empty, no other computation reads its signature, and its assignment is
/// the plain one (`assign_leaf`'s, in [`run`]). An incremental database
/// assigns such computations beside the others.
pub fn is_independent_leaf(graph: &CallGraph, entry: CompId, id: CompId) -> bool {
    let (Some(roles), Some(callees)) = (graph.roles.get(id.index()), graph.callees.get(id.index()))
    else {
        return false;
    };
    id != entry
        && callees.is_empty()
        && !roles.is_empty()
        && roles.iter().all(|r| matches!(r, CallRole::Applied))
}

/// The final assignment of an independent leaf (see
/// [`is_independent_leaf`]): what the driver computes for it, without the
/// driver. Its context asks no other computation for anything, and with no
/// calls `decide` keeps the plain assignment.
fn assign_leaf(
    module: &Module,
    graph: &CallGraph,
    id: CompId,
    target: &TargetSpec,
    solver: &SolverOptions,
) -> Result<ComputationAssignment, PassError> {
    let mut no_signatures = |c: CompId, _: Phase| -> Result<Signature, PassError> {
        Err(PassError::Module(format!(
            "computation #{} calls nothing, but asked for #{}'s signature",
            id.0, c.0
        )))
    };
    let ctx = context_for(module, graph, id, Phase::Final, None, &mut no_signatures)?;
    let names = |c: CompId| {
        module
            .computations
            .get(c.index())
            .map_or_else(String::new, |c| c.name.clone())
    };
    assign_computation(module.computation(id), &names, &ctx, target, solver)
}

/// Applies per-computation assignments to a module and builds the report.
/// The first failure in computation order is the one reported, as a
/// sequential run would meet it.
pub fn apply_module(
    module: &mut Module,
    assignments: &BTreeMap<CompId, ComputationAssignment>,
) -> Result<Report, ApplyError> {
    // Each computation takes its own assignment independently, so those of
    // a large module do so on all cores; the report is then written in
    // computation order.
    let entry = module.entry;
    let size = module.instruction_count();
    let parts: Vec<Option<Result<Report, ApplyError>>> =
        Parallelism::map_mut(Split::Module, size, &mut module.computations, |i, comp| {
            let id = CompId(i as u32);
            Some(apply_computation(comp, assignments.get(&id)?, id == entry))
        });
    let mut report = Report::default();
    for part in parts.into_iter().flatten() {
        report.extend(part?);
    }
    // The entry computation layout now names every layout.
    if let Some(a) = assignments.get(&module.entry) {
        report.tiled_entry = fill_entry_layout(&mut module.entry_computation_layout, &a.signature);
        report.entry_layout = Some(module.entry_computation_layout.clone());
    }
    Ok(report)
}

/// Applies one computation's assignment (its copies) and reports what it
/// did: the report's records of this computation alone, in the order
/// [`apply_module`] lists them (`filled` only for the entry, `tiled_entry`
/// and `entry_layout` never: see [`fill_entry_layout`]).
pub fn apply_computation(
    comp: &mut Computation,
    a: &ComputationAssignment,
    is_entry: bool,
) -> Result<Report, ApplyError> {
    // The input verifier refuses cycles; the schedule serves a module
    // built in code that skipped it.
    let order = comp
        .topological_order()
        .unwrap_or_else(|_| comp.schedule().to_vec());
    // The input's own copies, told apart from the ones `apply` inserts by
    // being there first (in id order, as the report lists them).
    let input_copies: Vec<InstId> = comp
        .instructions()
        .filter(|(_, inst)| inst.opcode == Opcode::Copy)
        .map(|(id, _)| id)
        .collect();
    let names = apply(comp, a, &order)?;
    let comp: &Computation = comp;
    let mut report = Report::default();
    report.copies.reserve_exact(a.copies.len());
    for (c, name) in a.copies.iter().zip(names.iter()) {
        let value = comp.inst(c.def);
        let value_name = if value.shape.is_tuple() {
            format!("%{} leaf {}", value.name, c.leaf)
        } else {
            format!("%{}", value.name)
        };
        let users = c
            .sites
            .iter()
            .map(|s| match *s {
                Site::Operand { user, .. } => format!("%{}", comp.inst(user).name),
                Site::Root { .. } => "ROOT".to_string(),
            })
            .collect();
        report.copies.push(CopyRecord {
            computation: comp.name.clone(),
            name: name.clone(),
            value: value_name,
            from: c.from.clone(),
            to: c.to.clone(),
            bytes: c.bytes,
            users,
            cause: c.cause,
            why: c.why.clone(),
        });
    }
    for &(inst, bytes) in &a.movements {
        report.movements.push(MovementRecord {
            computation: comp.name.clone(),
            name: comp.inst(inst).name.clone(),
            bytes,
        });
    }
    for &id in &input_copies {
        let inst = comp.inst(id);
        let operand = inst
            .operands()
            .first()
            .and_then(|&o| comp.inst(o).shape.as_array());
        if let (Some(a), Some(b)) = (operand, inst.shape.as_array())
            && a.layout != b.layout
            && !shape::layout_change_is_bitcast(a, b).is_ok_and(|v| v.bitcast)
        {
            let bytes = algebra::storage_bytes(b);
            report.input_copies.push(MovementRecord {
                computation: comp.name.clone(),
                name: inst.name.clone(),
                bytes,
            });
        }
    }
    for o in &a.orientations {
        let value = comp.inst(o.def);
        let name = if value.shape.is_tuple() {
            format!("%{} leaf {}", value.name, o.leaf)
        } else {
            format!("%{}", value.name)
        };
        report.orientations.push(OrientationRecord {
            computation: comp.name.clone(),
            value: name,
            layout: o.layout.clone(),
            least_padding: o.least_padding.clone(),
            extra_padding: o.extra_padding,
            group: o.group,
            why: o.why.clone(),
        });
    }
    for (inst, bytes, why) in &a.retilings {
        report.retilings.push(RetileRecord {
            computation: comp.name.clone(),
            name: comp.inst(*inst).name.clone(),
            bytes: *bytes,
            why: why.clone(),
        });
    }
    if is_entry {
        report.filled.extend(a.filled.iter().cloned());
    }
    report.computations.push(a.stats.clone());
    // A session keeps every computation's report: no spare room.
    report.shrink_to_fit();
    Ok(report)
}

/// Fills the entry computation layout from the entry's assigned
/// signature, so that it names every layout; returns the leaves that got
/// the target's tiling that way (the report's `tiled_entry`).
///
/// The parameters and the result stay shared with the input's layout
/// when filling changes none of them (an entry layout that named every
/// layout already): each is filled in a copy, kept only if it differs.
pub fn fill_entry_layout(
    layout: &mut hlo::ComputationLayout,
    signature: &Signature,
) -> Vec<TiledEntryLayout> {
    let mut tiled_entry = Vec::new();
    let mut filled: Option<Vec<Shape>> = None;
    for (n, (given, chosen)) in layout.parameters.iter().zip(&signature.params).enumerate() {
        let is_tuple = given.is_tuple();
        let position = |leaf: usize| {
            if is_tuple {
                format!("parameter {n} leaf {leaf}")
            } else {
                format!("parameter {n}")
            }
        };
        let mut shape = given.clone();
        tiled_entry.extend(fill_auto(&mut shape, chosen, position));
        if shape != *given
            && let Some(slot) = filled
                .get_or_insert_with(|| layout.parameters.to_vec())
                .get_mut(n)
        {
            *slot = shape;
        }
    }
    if let Some(parameters) = filled {
        layout.parameters = Arc::new(parameters);
    }
    let is_tuple = layout.result.is_tuple();
    let position = |leaf: usize| {
        if is_tuple {
            format!("result leaf {leaf}")
        } else {
            "result".to_string()
        }
    };
    let mut result = Shape::clone(&layout.result);
    tiled_entry.extend(fill_auto(&mut result, &signature.result, position));
    if result != *layout.result {
        // Shared: the output entry computation's root has this shape too,
        // and a session keeps both.
        layout.result = hlo::shared_shape_owned(result);
    }
    tiled_entry
}

/// Gives every AUTO (layout-less) leaf of `given` the layout in `chosen`,
/// and every leaf that named no tiles the tiles the target added to it.
/// Returns the leaves tiled that way, named by `position(leaf)`.
fn fill_auto(
    given: &mut Shape,
    chosen: &Shape,
    position: impl Fn(usize) -> String,
) -> Vec<TiledEntryLayout> {
    // Each chosen layout is copied only where it fills a leaf: an entry
    // result of half a million arrays, all given, copied them all.
    let chosen = chosen.array_leaves();
    let mut tiled = Vec::new();
    let mut i = 0;
    given.for_each_array_mut(&mut |a| {
        let pick = chosen.get(i).and_then(|c| c.layout.as_ref());
        match (&a.layout, pick) {
            (None, pick) if a.rank() > 0 => a.layout = pick.cloned(),
            // A scalar has one layout; on a target that tiles scalars the
            // printed entry layout names its tile, as XLA's TPU dumps do.
            (None, Some(c)) if !c.tiles.is_empty() => a.layout = Some(c.clone()),
            (Some(l), Some(c))
                if l.tiles.is_empty()
                    && !c.tiles.is_empty()
                    && l.minor_to_major == c.minor_to_major =>
            {
                let mut layout = c.clone();
                layout.memory_space = l.memory_space;
                tiled.push(TiledEntryLayout {
                    position: position(i),
                    given: Layout::clone(l),
                    layout: Layout::clone(&layout),
                });
                a.layout = Some(layout);
            }
            _ => {}
        }
        i += 1;
    });
    tiled
}

/// Which assignment of a computation the stateless driver computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum View {
    /// A branch before the conditional fixes its result.
    Free,
    /// Without its only caller's choice (`Phase::Alone`); for a computation
    /// whose boundary no caller decides, its final assignment.
    Alone,
    /// With its parameters and result fixed to what its only caller chose
    /// or proposes, weighing this many levels of its own callees'
    /// boundaries (`WEIGH_LEVELS` for a final assignment, fewer for one
    /// a caller prices).
    Bounded(Box<Signature>, u8),
    /// What the module gets: one of the above.
    Final,
}

/// How many assignments may wait on each other at once. The schedule
/// computes every computation after what it reads, so a wait is at most a
/// few levels deep; a deeper one would mean a bug, and is reported as an
/// error rather than risking the stack.
const MAX_WAITING: usize = 64;

/// Memoised assignments over the call graph. [`Driver::warm`] computes them
/// in [`CallGraph::schedule`]'s order, so that each finds what it reads in
/// the memo; a computation whose boundary its only caller decides asks
/// that caller's final assignment for it (see `calls.rs`). The database
/// crate runs the same queries in the same order. Failures are memoised
/// too, so a failure deep in a call chain is met once.
struct Driver<'m> {
    module: &'m Module,
    graph: &'m CallGraph,
    target: &'m TargetSpec,
    solver: &'m SolverOptions,
    /// What earlier levels computed, when this driver is one of a level's
    /// workers (see [`Driver::warm`]): read, never written.
    shared: Option<&'m Memos>,
    /// What this driver computed.
    own: Memos,
    active: Vec<(CompId, View)>,
}

/// The stateless driver's memos: assignments by computation and view, and
/// what they move by computation, boundary and levels weighed. Failures
/// are kept too.
#[derive(Default)]
struct Memos {
    assignments: FxHashMap<(CompId, View), Result<Arc<ComputationAssignment>, PassError>>,
    costs: FxHashMap<(CompId, Option<Signature>, u8), Result<Moved, PassError>>,
}

impl Memos {
    /// Takes in what `other` computed. Where both hold a value, they
    /// computed it from the same inputs: the one held is kept.
    fn merge(&mut self, other: Memos) {
        for (k, v) in other.assignments {
            self.assignments.entry(k).or_insert(v);
        }
        for (k, v) in other.costs {
            self.costs.entry(k).or_insert(v);
        }
    }
}

impl<'m> Driver<'m> {
    fn new(
        module: &'m Module,
        graph: &'m CallGraph,
        target: &'m TargetSpec,
        solver: &'m SolverOptions,
    ) -> Driver<'m> {
        Driver {
            module,
            graph,
            target,
            solver,
            shared: None,
            own: Memos::default(),
            active: Vec::new(),
        }
    }

    /// A driver that reads `shared` and keeps what it computes apart.
    fn worker(&self, shared: &'m Memos) -> Driver<'m> {
        Driver {
            shared: Some(shared),
            ..Driver::new(self.module, self.graph, self.target, self.solver)
        }
    }

    /// Computes the assignments of the computations `wanted` selects in
    /// the schedule's order: alone (or free, for a branch) callees first,
    /// then final ones callers first, a level at a time (see
    /// [`CallSchedule::bottom_up_levels`]). A level's computations read
    /// only what earlier levels computed, so a level of many runs on the
    /// pool, each worker with a memo of its own over what the levels
    /// before computed; the workers' memos join the driver's after the
    /// level. On a module whose entry calls 16,666 computations their
    /// alone assignments were most of the pass, on one core. Failures
    /// stay in the memo, to be reported in computation order.
    fn warm(&mut self, schedule: &CallSchedule, wanted: &(dyn Fn(CompId) -> bool + Sync)) {
        let select = |level: &Vec<CompId>| -> Vec<CompId> {
            level.iter().copied().filter(|&id| wanted(id)).collect()
        };
        for level in schedule.bottom_up_levels.iter().map(select) {
            self.level(&level, &|d: &mut Driver<'_>, id| d.warm_up(id, wanted));
        }
        for level in schedule.top_down_levels.iter().map(select) {
            self.level(&level, &|d: &mut Driver<'_>, id| {
                let _ = d.assignment(id, View::Final);
            });
        }
    }

    /// Runs `step` for every computation of one level: in order on this
    /// driver when the policy does not split that many, else on the pool.
    fn level(&mut self, ids: &[CompId], step: &(dyn Fn(&mut Driver<'_>, CompId) + Sync)) {
        use rayon::prelude::*;
        let Some(grain) = Parallelism::splits(Split::Computations, ids.len()) else {
            for &id in ids {
                step(self, id);
            }
            return;
        };
        let shared = std::mem::take(&mut self.own);
        let computed: Vec<Memos> = {
            let this = &*self;
            ids.par_chunks(grain)
                .map(|chunk| {
                    let mut worker = this.worker(&shared);
                    for &id in chunk {
                        step(&mut worker, id);
                    }
                    worker.own
                })
                .collect()
        };
        self.own = shared;
        for memos in computed {
            self.own.merge(memos);
        }
    }

    /// The assignments of `id` that its callers read (see
    /// [`Driver::warm`]): its alone one (and its free one, for a branch;
    /// a branch's alone one comes with the computation that holds it),
    /// and the cost its caller weighs.
    fn warm_up(&mut self, id: CompId, wanted: &dyn Fn(CompId) -> bool) {
        if self.graph.is_branch(id) {
            let _ = self.assignment(id, View::Free);
        }
        if self.graph.is_condition(id) || self.graph.is_branch(id) {
            return;
        }
        // A conditional's branches, once all their free assignments are
        // known, before the computation that holds it.
        for &c in &self.graph.callees[id.index()] {
            if self.graph.is_branch(c) && wanted(c) {
                let _ = self.assignment(c, View::Alone);
            }
        }
        let _ = self.assignment(id, View::Alone);
        if bound_site(self.graph, self.module.entry, id).is_some() {
            let _ = self.cost(id, None, WEIGH_LEVELS);
        }
    }

    /// An assignment computed already, by this driver or an earlier level.
    fn memoized(
        &self,
        key: &(CompId, View),
    ) -> Option<&Result<Arc<ComputationAssignment>, PassError>> {
        self.own
            .assignments
            .get(key)
            .or_else(|| self.shared.and_then(|s| s.assignments.get(key)))
    }

    fn assignment(
        &mut self,
        id: CompId,
        view: View,
    ) -> Result<Arc<ComputationAssignment>, PassError> {
        if id.index() >= self.module.computations.len() {
            return Err(PassError::Module(format!(
                "computation #{} does not exist",
                id.0
            )));
        }
        if let Some(a) = self.memoized(&(id, view.clone())) {
            return a.clone();
        }
        if self.active.contains(&(id, view.clone())) {
            return Err(PassError::RecursiveCall(
                self.module.computation(id).name.clone(),
            ));
        }
        if self.active.len() >= MAX_WAITING {
            return Err(PassError::Module(format!(
                "computation {}: more than {MAX_WAITING} assignments wait on each other",
                self.module.computation(id).name
            )));
        }
        self.active.push((id, view.clone()));
        let a = self.compute(id, &view);
        self.active.pop();
        self.own.assignments.insert((id, view), a.clone());
        a
    }

    fn compute(
        &mut self,
        id: CompId,
        view: &View,
    ) -> Result<Arc<ComputationAssignment>, PassError> {
        let module = self.module;
        let graph = self.graph;
        let is_branch = graph.is_branch(id);
        let (phase, boundary, levels) = match view {
            View::Final => {
                return match bound_site(graph, module.entry, id) {
                    Some(BoundSite::Called { caller } | BoundSite::WhileBody { caller, .. }) => {
                        let chosen = self
                            .assignment(caller, View::Final)?
                            .boundary_for(id)
                            .cloned();
                        match chosen {
                            Some(b) => {
                                self.assignment(id, View::Bounded(Box::new(b), WEIGH_LEVELS))
                            }
                            None => self.assignment(id, View::Alone),
                        }
                    }
                    Some(BoundSite::WhileCondition { body, .. }) => {
                        let sig = self.assignment(body, View::Final)?.signature.clone();
                        self.assignment(
                            id,
                            View::Bounded(Box::new(calls::condition_boundary(&sig)), WEIGH_LEVELS),
                        )
                    }
                    None => self.assignment(id, View::Alone),
                };
            }
            View::Free if !is_branch => return self.assignment(id, View::Final),
            View::Free => (Phase::Free, None, WEIGH_LEVELS),
            View::Alone => (Phase::Final, None, WEIGH_LEVELS),
            View::Bounded(b, levels) => (Phase::Final, Some(&**b), *levels),
        };
        let ctx = context_for(module, graph, id, phase, boundary, &mut |c, p| {
            self.signature(c, p)
        })?;
        let names = |c: CompId| {
            module
                .computations
                .get(c.index())
                .map_or_else(String::new, |c| c.name.clone())
        };
        let a = decide(
            module.computation(id),
            &names,
            graph,
            module.entry,
            id,
            &ctx,
            self.target,
            levels,
            self.solver,
            self,
        )?;
        Ok(Arc::new(a))
    }
}

impl CallQueries for Driver<'_> {
    fn signature(&mut self, c: CompId, phase: Phase) -> Result<Signature, PassError> {
        let view = match phase {
            Phase::Free => View::Free,
            Phase::Final => View::Final,
            Phase::Alone => View::Alone,
        };
        Ok(self.assignment(c, view)?.signature.clone())
    }

    fn cost(
        &mut self,
        c: CompId,
        boundary: Option<Signature>,
        levels: u8,
    ) -> Result<Moved, PassError> {
        // An alone assignment always weighs every level.
        let levels = if boundary.is_none() {
            WEIGH_LEVELS
        } else {
            levels
        };
        let key = (c, boundary, levels);
        let memoized =
            (self.own.costs.get(&key)).or_else(|| self.shared.and_then(|s| s.costs.get(&key)));
        if let Some(m) = memoized {
            return m.clone();
        }
        let view = key
            .1
            .clone()
            .map_or(View::Alone, |b| View::Bounded(Box::new(b), levels));
        let m = self
            .assignment(c, view)
            .and_then(|a| subtree_cost(self.graph, self.module.entry, c, &a, levels, self));
        self.own.costs.insert(key, m.clone());
        m
    }

    fn signature_under(
        &mut self,
        c: CompId,
        boundary: Signature,
        levels: u8,
    ) -> Result<Signature, PassError> {
        Ok(self
            .assignment(c, View::Bounded(Box::new(boundary), levels))?
            .signature
            .clone())
    }
}

/// The instruction ids of a computation that hold copies the pass added,
/// found by opcode and name suffix; used by tests and the relayout pass.
pub fn is_pass_copy(comp: &Computation, id: InstId) -> bool {
    let inst = comp.inst(id);
    inst.opcode == Opcode::Copy && inst.name.contains(".copy")
}
