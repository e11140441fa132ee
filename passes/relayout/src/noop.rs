//! Phase 2: a `copy`, `transpose` or `reshape` that moves no byte becomes a
//! `bitcast`.
//!
//! The test is exact and tile-aware (`shape::layout_change_is_bitcast`,
//! `transpose_is_bitcast`, `reshape_is_bitcast`): every element must keep
//! its byte offset and both buffers must have the same size, padding
//! included. XLA's `ReshapeIsBitcast` ignores tiles; here
//! `f32[8,128]{1,0:T(8,128)}` → `{1,0}` is a bitcast while
//! `f32[3,128]{1,0:T(8,128)}` → `{1,0}` is not (4096 vs 1536 bytes).
//!
//! The instruction keeps its name, metadata and every other attribute;
//! only a transpose's `dimensions` go, as a bitcast has none.

use std::sync::Arc;

use hlo::{Computation, InstId, KnownAttr, Opcode, Parallelism, Split};
use rustc_hash::FxHashMap;
use shape::{ArrayShape, DimVec};

use crate::{Rewrite, RewriteKind, laid_out, same_memory_space};

/// A bitcast found for one instruction.
struct Found {
    kind: RewriteKind,
    dims: Option<DimVec>,
    movement: Movement,
}

/// The report's shapes and sentence of one distinct movement: they depend
/// only on the key below, so they are made once and shared by every
/// rewrite of that movement.
#[derive(Clone)]
struct Movement {
    from: Arc<ArrayShape>,
    to: Arc<ArrayShape>,
    why: Arc<str>,
}

/// Verdicts already reached in one computation, by (kind, from, to,
/// transpose dimensions): the report's sentence when the movement is a
/// bitcast, `None` when it is not. Large modules repeat a few movements
/// many times (the 24-layer transformer has 884 reshapes of 11 distinct
/// shape pairs), and the exact test and the sentence cost far more than a
/// lookup.
type Verdicts = FxHashMap<(RewriteKind, ArrayShape, ArrayShape, Option<DimVec>), Option<Movement>>;

fn verdict(comp: &Computation, id: InstId, seen: &mut Verdicts) -> Option<Found> {
    let inst = comp.inst(id);
    let kind = match inst.opcode {
        Opcode::Copy => RewriteKind::CopyToBitcast,
        Opcode::Transpose => RewriteKind::TransposeToBitcast,
        Opcode::Reshape => RewriteKind::ReshapeToBitcast,
        _ => return None,
    };
    let &[o] = inst.operands() else { return None };
    let (a, r) = (comp.inst(o).shape.as_array()?, inst.shape.as_array()?);
    // Dynamic dimensions have no fixed buffer; leave them to the backend.
    if a.dynamic != 0 || r.dynamic != 0 || a.element_type != r.element_type {
        return None;
    }
    let (from, to) = (laid_out(a), laid_out(r));
    if !same_memory_space(&from, &to) {
        return None;
    }
    let dims = match kind {
        RewriteKind::CopyToBitcast if from.dims == to.dims => None,
        RewriteKind::TransposeToBitcast => {
            let dims: DimVec = inst
                .attrs
                .ints(KnownAttr::Dimensions)?
                .iter()
                .map(|&d| usize::try_from(d).ok())
                .collect::<Option<_>>()?;
            if dims.len() != from.rank()
                || to.rank() != from.rank()
                || !shape::facts::is_permutation(&dims)
            {
                return None;
            }
            Some(dims)
        }
        RewriteKind::ReshapeToBitcast => None,
        _ => return None,
    };
    let key = (kind, from, to, dims);
    let movement = match seen.get(&key) {
        Some(movement) => movement.clone(),
        None => {
            let (_, from, to, dims) = &key;
            let verdict = match (kind, dims) {
                (RewriteKind::TransposeToBitcast, Some(dims)) => {
                    shape::transpose_is_bitcast(from, to, dims)
                }
                (RewriteKind::ReshapeToBitcast, _) => shape::reshape_is_bitcast(from, to),
                _ => shape::layout_change_is_bitcast(from, to),
            }
            .ok();
            let movement = verdict.filter(|v| v.bitcast).map(|v| Movement {
                why: format!(
                    "the {} from {from} to {to} moves no byte: {}",
                    inst.opcode, v.reason
                )
                .into(),
                from: Arc::new(from.clone()),
                to: Arc::new(to.clone()),
            });
            seen.insert(key.clone(), movement.clone());
            movement
        }
    }?;
    let (_, _, _, dims) = key;
    Some(Found {
        kind,
        dims,
        movement,
    })
}

/// The bitcasts to make, in schedule order, each with its report.
///
/// A verdict reads only the instruction and its operand's shape, and
/// turning a movement into a bitcast changes neither for any other
/// instruction (nor any name), so all verdicts and reports are made before
/// any rewrite: on all cores for a large computation, in runs of the
/// schedule that each keep their own memo.
///
/// Each report is shared from the start: a report is some 700 bytes, and
/// gathering the runs' lists moved every one twice more.
fn all_found(comp: &Computation) -> Vec<(InstId, Arc<Rewrite>)> {
    use rayon::prelude::*;
    let find = |run: &[InstId]| -> Vec<(InstId, Arc<Rewrite>)> {
        let mut seen = Verdicts::default();
        run.iter()
            .filter_map(|&id| {
                verdict(comp, id, &mut seen).map(|f| (id, Arc::new(rewrite_for(comp, id, f))))
            })
            .collect()
    };
    let schedule = comp.schedule();
    let Some(grain) = Parallelism::splits(Split::RelayoutVerdicts, schedule.len()) else {
        return find(schedule);
    };
    let runs: Vec<Vec<(InstId, Arc<Rewrite>)>> = schedule.par_chunks(grain).map(find).collect();
    runs.into_iter().flatten().collect()
}

/// Phase 2 on one computation.
pub fn movements_to_bitcasts(comp: &mut Computation) -> Vec<Arc<Rewrite>> {
    let found = all_found(comp);
    let mut rewrites = Vec::with_capacity(found.len());
    // The reports were written with the verdicts; only the edits are left.
    for (id, rewrite) in found {
        let inst = comp.inst_mut(id);
        inst.opcode = Opcode::Bitcast;
        inst.attrs.remove(KnownAttr::Dimensions);
        rewrites.push(rewrite);
    }
    rewrites
}

/// The report of turning `id`'s movement into a bitcast, from its verdict.
fn rewrite_for(comp: &Computation, id: InstId, found: Found) -> Rewrite {
    let Found {
        kind,
        dims,
        movement: Movement { from, to, why },
    } = found;
    let operand = comp
        .operands(id)
        .first()
        .map_or_else(String::new, |&o| comp.inst(o).name.clone());
    Rewrite {
        kind,
        computation: comp.name.clone(),
        instruction: comp.inst(id).name.clone(),
        operand,
        why,
        from,
        to,
        transpose_dims: dims,
        bytes: 0,
        users: Vec::new(),
        steps: Vec::new(),
    }
}
