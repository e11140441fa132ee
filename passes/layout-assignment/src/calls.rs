//! The call-boundary rule: a computation whose boundary is free (not the
//! entry, not a branch, not applied) and which has exactly one call site
//! (a `call`, `fusion` or `async-start`, or one `while` for a loop body and
//! its condition) takes its parameter and result layouts from its caller
//! when that moves fewer bytes, as XLA sets a fusion's inner boundary from
//! the fusion instruction.
//!
//! Computations are still assigned callees first. For each computation:
//!
//! 1. *alone*: the callee is assigned without its caller (today's
//!    assignment); its signature is what its caller sees first.
//! 2. The caller is assigned as before, with that signature fixed
//!    (*today's choice*). Only when that assignment copies at such a call
//!    (an operand copied in, or the call's result copied) is it assigned a
//!    second time with the signature as a *preference*: the call's operands
//!    and results take any layout, at the price of one copy of their bytes
//!    where they differ from it (the copy the callee would make), and a
//!    loop's init, result and state share one layout. Its own boundary is
//!    kept as in the first assignment, so that its callers see the same
//!    signature either way.
//! 3. The callee is assigned again, *bounded*: parameters and result fixed
//!    to what the second assignment chose (a loop condition takes the
//!    state as parameters), weighing its own bound callees in turn, one
//!    level fewer.
//! 4. The caller keeps the second assignment only when the bytes moved by
//!    it and its bounded callees (each with its own callees, to
//!    [`WEIGH_LEVELS`] levels) are at most those of today's choice, and so
//!    are the copies, one of the two strictly fewer. Ties keep today's
//!    choice.
//! 5. The callee's final assignment is the bounded one when its caller's
//!    final assignment kept the second choice, else the one made alone.
//!
//! A weighing looks at most [`WEIGH_LEVELS`] levels of bound callees deep:
//! below that, a callee keeps what it chose alone. So neither the depth of
//! the queries nor their number follows the depth of the call graph once
//! the computations are assigned in [`CallGraph::schedule`]'s order.
//!
//! The dependencies stay acyclic: a caller's choice reads its callees'
//! alone signatures and the costs of their alone and bounded assignments;
//! a callee's final assignment reads its caller's final choice.

use hlo::{AttrValue, CallGraph, CallRole, CompId, Computation, InstId, KnownAttr, Opcode};
use shape::Shape;
use target::TargetSpec;

use crate::context::{BoundaryReason, Context, Signature};
use crate::materialize::ComputationAssignment;
use crate::problem::Site;
use crate::{PassError, Phase, SolverOptions, assign_computation};

/// Bytes and copies an assignment moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Moved {
    /// Bytes written by copies, non-bitcast transposes and reshapes, and
    /// re-tiling ops.
    pub bytes: u64,
    /// Copies inserted.
    pub copies: u64,
}

impl std::ops::AddAssign for Moved {
    fn add_assign(&mut self, o: Moved) {
        self.bytes += o.bytes;
        self.copies += o.copies;
    }
}

/// How the only caller of a computation decides its boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoundSite {
    /// Called by one `call`, `fusion` or `async-start` in `caller`.
    Called { caller: CompId },
    /// The body of one `while` in `caller`, whose condition is `condition`.
    WhileBody { caller: CompId, condition: CompId },
    /// The condition of one `while` in `caller`, whose body is `body`.
    WhileCondition { caller: CompId, body: CompId },
}

/// The call site that decides `id`'s boundary, if there is exactly one and
/// the boundary is otherwise free.
pub fn bound_site(graph: &CallGraph, entry: CompId, id: CompId) -> Option<BoundSite> {
    if id == entry {
        return None;
    }
    let roles = graph.roles.get(id.index())?;
    let sites = graph.sites.get(id.index())?;
    let ([role], [caller]) = (roles.as_slice(), sites.as_slice()) else {
        return None;
    };
    let caller = *caller;
    match role {
        CallRole::Called => Some(BoundSite::Called { caller }),
        CallRole::WhileBody => {
            let condition = graph
                .callees
                .get(caller.index())?
                .iter()
                .copied()
                .find(|&c| {
                    c != id
                        && c != entry
                        && graph.roles[c.index()] == [CallRole::WhileCondition { body: id }]
                        && graph.sites[c.index()].len() == 1
                })?;
            Some(BoundSite::WhileBody { caller, condition })
        }
        CallRole::WhileCondition { body } => match bound_site(graph, entry, *body) {
            Some(BoundSite::WhileBody { condition, .. }) if condition == id => {
                Some(BoundSite::WhileCondition {
                    caller,
                    body: *body,
                })
            }
            _ => None,
        },
        _ => None,
    }
}

/// The boundary of a loop condition whose loop state is `body`'s signature:
/// the parameters only.
pub fn condition_boundary(body: &Signature) -> Signature {
    Signature::new(body.params.clone(), Shape::Tuple(Vec::new()))
}

/// What the call-boundary rule asks of the computations around one.
pub trait CallQueries {
    /// Another computation's signature (see `context_for`).
    fn signature(&mut self, c: CompId, phase: Phase) -> Result<Signature, PassError>;
    /// What `c`'s alone assignment (`None`) or its bounded one, weighing
    /// `levels` levels of its own callees, moves, with its callees' (see
    /// [`subtree_cost`]).
    fn cost(
        &mut self,
        c: CompId,
        boundary: Option<Signature>,
        levels: u8,
    ) -> Result<Moved, PassError>;
    /// The signature of `c`'s bounded assignment, weighing `levels` levels
    /// of its own callees (leaves of `boundary` without a layout are free).
    fn signature_under(
        &mut self,
        c: CompId,
        boundary: Signature,
        levels: u8,
    ) -> Result<Signature, PassError>;
}

/// The instructions of `comp` (computation `id`) that call a computation
/// whose boundary `id` decides, with that callee (the body, for a loop).
fn bound_calls(
    comp: &Computation,
    graph: &CallGraph,
    entry: CompId,
    id: CompId,
) -> Vec<(InstId, CompId)> {
    let mut out = Vec::new();
    for (inst_id, inst) in comp.instructions() {
        let key = match inst.opcode {
            Opcode::While => KnownAttr::Body,
            Opcode::Call => KnownAttr::ToApply,
            Opcode::Fusion | Opcode::AsyncStart => KnownAttr::Calls,
            _ => continue,
        };
        let callee = match inst
            .attrs
            .get(key)
            .or(inst.attrs.get(KnownAttr::ToApply))
            .or(inst.attrs.get(KnownAttr::Calls))
        {
            Some(AttrValue::Computation(c)) => *c,
            _ => continue,
        };
        match bound_site(graph, entry, callee) {
            Some(BoundSite::Called { caller }) if caller == id && inst.opcode != Opcode::While => {
                out.push((inst_id, callee))
            }
            Some(BoundSite::WhileBody { caller, .. })
                if caller == id && inst.opcode == Opcode::While =>
            {
                out.push((inst_id, callee))
            }
            _ => {}
        }
    }
    out
}

/// What `a` (an assignment of computation `id` that weighed `levels`
/// levels) moves, with what the callees whose boundary it decides move in
/// the assignment its choice gives them.
pub fn subtree_cost(
    graph: &CallGraph,
    entry: CompId,
    id: CompId,
    a: &ComputationAssignment,
    levels: u8,
    q: &mut dyn CallQueries,
) -> Result<Moved, PassError> {
    let below = levels.saturating_sub(1);
    let mut total = a.moved();
    for &callee in graph.callees.get(id.index()).map_or(&[][..], Vec::as_slice) {
        let chosen = a.boundary_for(callee).cloned();
        match bound_site(graph, entry, callee) {
            Some(BoundSite::Called { caller }) if caller == id => {
                total += q.cost(callee, chosen, below)?
            }
            Some(BoundSite::WhileBody { caller, condition }) if caller == id => {
                let state = match &chosen {
                    Some(b) => b.clone(),
                    None => q.signature(callee, Phase::Alone)?,
                };
                total += q.cost(callee, chosen, below)?;
                total += q.cost(condition, Some(condition_boundary(&state)), below)?;
            }
            _ => {}
        }
    }
    Ok(total)
}

/// How many levels of bound callees an alone, free or final assignment
/// weighs: its callees', their callees' and theirs. Below that a callee
/// keeps what it chose alone, so that the work and the depth of the
/// weighing do not follow the depth of the call graph.
pub const WEIGH_LEVELS: u8 = 3;

/// Assigns computation `id` under `ctx`, applying the call-boundary rule
/// to the computations whose boundary it decides (see the module docs),
/// their callees' to `levels` levels (none at 0).
#[allow(clippy::too_many_arguments)]
pub fn decide(
    comp: &Computation,
    comp_names: &dyn Fn(CompId) -> String,
    graph: &CallGraph,
    entry: CompId,
    id: CompId,
    ctx: &Context,
    target: &TargetSpec,
    levels: u8,
    solver: &SolverOptions,
    q: &mut dyn CallQueries,
) -> Result<ComputationAssignment, PassError> {
    let today = assign_computation(comp, comp_names, ctx, target, solver)?;
    if levels == 0 {
        return Ok(today);
    }
    let calls = bound_calls(comp, graph, entry, id);
    let touched = calls.iter().any(|&(inst, _)| {
        today.copies.iter().any(|c| {
            c.def == inst
                || c.sites
                    .iter()
                    .any(|s| matches!(*s, Site::Operand { user, .. } if user == inst))
        })
    });
    if !touched {
        return Ok(today);
    }
    // Any failure on the way (a boundary a callee cannot take) keeps
    // today's choice.
    match preferred(
        comp,
        comp_names,
        graph,
        entry,
        ctx,
        target,
        levels - 1,
        solver,
        q,
        &today,
        &calls,
    ) {
        Ok(Some(a)) => Ok(a),
        Ok(None) | Err(_) => Ok(today),
    }
}

/// The cheapest other choice, when it and its callees move no more bytes
/// and no more copies than `today` and its callees alone, and fewer of one
/// (see the module docs). Each round assigns the caller with the callees'
/// signatures as preferences and prices the callees bounded as it chose;
/// then each callee answers what it would take given the result chosen
/// (its parameters) and given the parameters chosen (its result), and
/// those answers are the next round's preferences.
#[allow(clippy::too_many_arguments)]
fn preferred(
    comp: &Computation,
    comp_names: &dyn Fn(CompId) -> String,
    graph: &CallGraph,
    entry: CompId,
    ctx: &Context,
    target: &TargetSpec,
    below: u8,
    solver: &SolverOptions,
    q: &mut dyn CallQueries,
    today: &ComputationAssignment,
    calls: &[(InstId, CompId)],
) -> Result<Option<ComputationAssignment>, PassError> {
    let mut callees: Vec<CompId> = calls.iter().map(|&(_, c)| c).collect();
    callees.sort_unstable();
    callees.dedup();
    // Keep the boundary callers see.
    let mut pctx = ctx.clone();
    if pctx.params.is_none() {
        pctx.params = Some((
            std::sync::Arc::new(today.signature.params.clone()),
            BoundaryReason::Kept,
        ));
    }
    if pctx.result.is_none() {
        pctx.result = Some((
            std::sync::Arc::new(today.signature.result.clone()),
            BoundaryReason::Kept,
        ));
    }
    pctx.preferred = callees.clone();
    let mut alone = Vec::with_capacity(callees.len());
    for &c in &callees {
        alone.push(q.signature(c, Phase::Alone)?);
    }
    let Some((before, loops_alone)) = total(
        graph,
        entry,
        q,
        below,
        today.moved(),
        &callees,
        &alone,
        &[],
        &[],
    )?
    else {
        return Ok(None);
    };

    let mut best: Option<(Moved, ComputationAssignment)> = None;
    let mut prefs = alone.clone();
    for _round in 0..ROUNDS {
        for (&c, pref) in callees.iter().zip(&prefs) {
            pctx.callees.insert(c, pref.clone());
        }
        let mut a = assign_computation(comp, comp_names, &pctx, target, solver)?;
        if a.signature != today.signature {
            break;
        }
        let chosen: Vec<Option<Signature>> = callees
            .iter()
            .map(|&c| a.boundary_for(c).cloned())
            .collect();
        let bounds: Vec<(CompId, Signature)> = callees
            .iter()
            .zip(&alone)
            .zip(&chosen)
            .filter_map(|((&c, al), b)| b.as_ref().filter(|b| *b != al).map(|b| (c, b.clone())))
            .collect();
        if let Some((m, _)) = total(
            graph,
            entry,
            q,
            below,
            a.moved(),
            &callees,
            &alone,
            &bounds,
            &loops_alone,
        )? && best
            .as_ref()
            .is_none_or(|(b, _)| (m.bytes, m.copies) < (b.bytes, b.copies))
        {
            a.callee_boundaries = bounds;
            best = Some((m, a));
        }
        // The callees' answers.
        let mut next = prefs.clone();
        for (i, &c) in callees.iter().enumerate() {
            let Some(b) = &chosen[i] else { continue };
            if !matches!(bound_site(graph, entry, c), Some(BoundSite::Called { .. })) {
                continue;
            }
            let mut given_result = b.clone();
            for p in &mut given_result.make_mut().params {
                p.for_each_array_mut(&mut |a| a.layout = None);
            }
            let mut given_params = b.clone();
            given_params
                .make_mut()
                .result
                .for_each_array_mut(&mut |a| a.layout = None);
            let params = q
                .signature_under(c, given_result, below)?
                .into_parts()
                .params;
            let result = q
                .signature_under(c, given_params, below)?
                .into_parts()
                .result;
            next[i] = Signature::new(params, result);
        }
        if next == prefs {
            break;
        }
        prefs = next;
    }
    Ok(best
        .filter(|(after, _)| {
            after.bytes <= before.bytes && after.copies <= before.copies && *after != before
        })
        .map(|(_, a)| a))
}

/// The most rounds of preferences and answers (see [`preferred`]).
const ROUNDS: usize = 3;

/// What a choice moves: `own` plus each callee's cost under `bounds` (alone
/// where it names none), with the loop condition of each loop body. Also
/// the cost of each loop (body and condition). `None` when a loop would
/// move more bytes or copies than `loops_alone` (its cost alone): a copy
/// inside a loop runs on every iteration.
#[allow(clippy::too_many_arguments)]
fn total(
    graph: &CallGraph,
    entry: CompId,
    q: &mut dyn CallQueries,
    below: u8,
    own: Moved,
    callees: &[CompId],
    alone: &[Signature],
    bounds: &[(CompId, Signature)],
    loops_alone: &[Moved],
) -> Result<Option<(Moved, Vec<Moved>)>, PassError> {
    let mut sum = own;
    let mut loops = Vec::new();
    for (&c, a) in callees.iter().zip(alone) {
        let chosen = bounds.iter().find(|(b, _)| *b == c).map(|(_, s)| s.clone());
        let cost = q.cost(c, chosen.clone(), below)?;
        if let Some(BoundSite::WhileBody { condition, .. }) = bound_site(graph, entry, c) {
            let mut looped = cost;
            looped += q.cost(
                condition,
                Some(condition_boundary(chosen.as_ref().unwrap_or(a))),
                below,
            )?;
            if let Some(was) = loops_alone.get(loops.len())
                && (looped.bytes > was.bytes || looped.copies > was.copies)
            {
                return Ok(None);
            }
            loops.push(looped);
            sum += looped;
        } else {
            sum += cost;
        }
    }
    Ok(Some((sum, loops)))
}
