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

use std::sync::{Arc, Weak};

use hlo::{Computation, Downgrade, InstId, KnownAttr, Opcode, Parallelism, Split, WeakCache};
use rustc_hash::FxHashMap;
use shape::{ArrayShape, DimVec};

use crate::{Rewrite, RewriteKind, same_memory_space};

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

/// A movement: its kind, the shapes it moves between, and a transpose's
/// dimensions.
type Key = (RewriteKind, ArrayShape, ArrayShape, Option<DimVec>);

/// Verdicts already reached in one run over a computation, by movement:
/// the report's shapes and sentence when the movement is a bitcast,
/// `None` when it is not. Large modules repeat a few movements many times
/// (the 24-layer transformer has 884 reshapes of 11 distinct shape pairs),
/// and the exact test and the sentence cost far more than a lookup.
type Verdicts = FxHashMap<Key, Option<Movement>>;

/// The movements found to be bitcasts in every computation this process
/// has relayouted, for as long as a report holds them (see
/// [`hlo::WeakCache`]): a module of many small computations repeats the
/// same few movements in each (the generated module of 16,667
/// computations has two per computation, both alike in all of them), and
/// a session keeps every report, so each computation making its own
/// copies made them a sixth of the session.
static SHARED: WeakCache<Key, Movement> = WeakCache::new();

/// A movement as [`SHARED`] holds it.
struct WeakMovement {
    from: Weak<ArrayShape>,
    to: Weak<ArrayShape>,
    why: Weak<str>,
}

impl Downgrade for Movement {
    type Weak = WeakMovement;

    fn downgrade(&self) -> WeakMovement {
        WeakMovement {
            from: Arc::downgrade(&self.from),
            to: Arc::downgrade(&self.to),
            why: Arc::downgrade(&self.why),
        }
    }

    fn upgrade(weak: &WeakMovement) -> Option<Movement> {
        Some(Movement {
            from: weak.from.upgrade()?,
            to: weak.to.upgrade()?,
            why: weak.why.upgrade()?,
        })
    }

    fn is_live(weak: &WeakMovement) -> bool {
        weak.from.strong_count() > 0 && weak.to.strong_count() > 0 && weak.why.strong_count() > 0
    }
}

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
    let (from, to) = (a.laid_out(), r.laid_out());
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
            // Another computation's run may have judged it already; a
            // movement that is no bitcast is judged again, as it has no
            // report to share (the exact test itself remembers the
            // thread's last verdicts, so a repeated one costs a lookup).
            let movement = SHARED
                .find(&key)
                .or_else(|| judge(&key, inst.opcode).map(|m| SHARED.keep(key.clone(), m)));
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

/// What a movement asks of the layout algebra: whether a transpose (by
/// its dimensions), a reshape, or a change of layout alone keeps bytes.
#[derive(Clone, Copy)]
enum Question<'a> {
    Transpose(&'a [usize]),
    Reshape,
    LayoutChange,
}

impl<'a> Question<'a> {
    fn of(kind: RewriteKind, dims: Option<&'a [usize]>) -> Self {
        match (kind, dims) {
            (RewriteKind::TransposeToBitcast, Some(dims)) => Question::Transpose(dims),
            (RewriteKind::ReshapeToBitcast, _) => Question::Reshape,
            _ => Question::LayoutChange,
        }
    }

    /// The short answer (`shape::keeps`).
    fn keeps_bytes(self, from: &ArrayShape, to: &ArrayShape) -> bool {
        match self {
            Question::Transpose(dims) => shape::transpose_keeps_bytes(from, to, dims),
            Question::Reshape => shape::reshape_keeps_bytes(from, to),
            Question::LayoutChange => shape::layout_change_keeps_bytes(from, to),
        }
    }

    /// The exact test's verdict, with its reason.
    fn verdict(self, from: &ArrayShape, to: &ArrayShape) -> Option<shape::BitcastVerdict> {
        match self {
            Question::Transpose(dims) => shape::transpose_is_bitcast(from, to, dims),
            Question::Reshape => shape::reshape_is_bitcast(from, to),
            Question::LayoutChange => shape::layout_change_is_bitcast(from, to),
        }
        .ok()
    }
}

/// The exact test of movement `key` (by an instruction of `opcode`), and
/// its report's shapes and sentence when it is a bitcast.
fn judge(key: &Key, opcode: Opcode) -> Option<Movement> {
    let (kind, from, to, dims) = key;
    let question = Question::of(*kind, dims.as_deref());
    // Most movements that are no bitcast have layouts that only order
    // dimensions, where the short answer needs no general test; only a
    // bitcast needs the verdict's reason, for its report.
    if !question.keeps_bytes(from, to) {
        return None;
    }
    let verdict = question.verdict(from, to)?;
    verdict.bitcast.then(|| Movement {
        why: format!(
            "the {opcode} from {from} to {to} moves no byte: {}",
            verdict.reason
        )
        .into(),
        from: Arc::new(from.clone()),
        to: Arc::new(to.clone()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use shape::PrimitiveType::F32;

    fn key(n: i64) -> Key {
        (
            RewriteKind::ReshapeToBitcast,
            ArrayShape::new(F32, &[n, 2]),
            ArrayShape::new(F32, &[2 * n]),
            None,
        )
    }

    fn movement(k: &Key) -> Movement {
        Movement {
            from: Arc::new(k.1.clone()),
            to: Arc::new(k.2.clone()),
            why: Arc::from("a sentence"),
        }
    }

    #[test]
    fn shared_movements_live_while_a_report_holds_them() {
        // Sizes no other test uses, since the cache is the process's.
        let k = key(1_000_001);
        let held = SHARED.keep(k.clone(), movement(&k));
        let found = SHARED.find(&k).expect("held by a report");
        assert!(Arc::ptr_eq(&found.from, &held.from));
        assert!(Arc::ptr_eq(&found.to, &held.to));
        assert!(Arc::ptr_eq(&found.why, &held.why));
        // A second run's own copy gives way to the live one.
        let again = SHARED.keep(k.clone(), movement(&k));
        assert!(Arc::ptr_eq(&again.why, &held.why));
        // A report that kept only the sentence keeps no movement.
        let why = Arc::clone(&held.why);
        drop((held, found, again));
        assert!(SHARED.find(&k).is_none());
        drop(why);
    }
}
