//! Relayout plans: an explicit chain of HLO-like steps (pad, bitcast,
//! transpose, slice) that turns a buffer in one layout into the buffer of
//! another layout of the same array.
//!
//! Construction: undo FROM's expansion down to the stage it shares with TO
//! (same legacy padding and order, same leading tiles), change order and
//! legacy padding there if needed, then redo TO's expansion; every
//! intermediate value is a plain row-major view. A peephole pass then
//! shortens the chain: slices move later and pads earlier across
//! transposes, a slice followed by a pad that restores the same extents
//! cancels (padding slots hold no element, so their contents are free),
//! and every run of transposes and bitcasts is fused into one transpose
//! over a common refinement of the dimensions.

use std::fmt;

use smallvec::SmallVec;

use crate::facts::inverse_permutation;
use crate::physical::{AlgebraError, Expansion, checked_layout};
use crate::text::{write_list, write_separated};
use crate::{
    ArrayShape, DimVec, Dims, Layout, is_bitcast, layout_change_is_bitcast,
    physical_view_is_bitcast,
};

/// The operation of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOp {
    /// Pad with zeros, per dimension.
    Pad(Vec<PadDim>),
    /// Reinterpret the buffer (no data moves).
    Bitcast,
    /// HLO transpose: output dimension `k` is operand dimension `dims[k]`.
    Transpose {
        /// The permutation.
        dims: DimVec,
    },
    /// Copy into the same dimensions with another element size: packing
    /// or unpacking sub-byte elements of a plain view (see
    /// [`relayout_plan_at`]).
    Copy,
    /// Keep `[start, limit)` with `stride` of every dimension.
    Slice(Vec<SliceDim>),
}

/// One slice dimension `[start:limit:stride]`, as a step and as HLO's
/// `slice` attribute keep it. Displayed alone, a stride of 1 prints
/// without it (HLO's printer prints every stride once one is not 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    /// First index taken.
    pub start: i64,
    /// One past the last index taken.
    pub limit: i64,
    /// Step between taken indices.
    pub stride: i64,
}

/// One pad dimension `low_high[_interior]`, as a step and as HLO's
/// `padding` attribute keep it. Displayed alone, interior 0 prints
/// without it (HLO's printer prints every interior once one is not 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    /// Padding before the first element (may be negative).
    pub low: i64,
    /// Padding after the last element (may be negative).
    pub high: i64,
    /// Padding between elements.
    pub interior: i64,
}

impl fmt::Display for SliceDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}:{}", self.start, self.limit)?;
        if self.stride != 1 {
            write!(f, ":{}", self.stride)?;
        }
        f.write_str("]")
    }
}

impl fmt::Display for PadDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.low, self.high)?;
        if self.interior != 0 {
            write!(f, "_{}", self.interior)?;
        }
        Ok(())
    }
}

/// One step: an operation and its result shape (with a full layout).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// What the step does.
    pub op: StepOp,
    /// The result.
    pub shape: ArrayShape,
}

/// A relayout plan from `from` to the last step's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The operand.
    pub from: ArrayShape,
    /// The steps, in order; each consumes the previous result.
    pub steps: Vec<Step>,
}

impl Plan {
    /// True when the plan moves no data (only bitcasts, or nothing).
    pub fn is_bitcast(&self) -> bool {
        self.steps.iter().all(|s| s.op == StepOp::Bitcast)
    }

    /// Bytes written by the steps that move data (padding included).
    pub fn bytes_moved(&self) -> u64 {
        self.steps
            .iter()
            .filter(|s| s.op != StepOp::Bitcast)
            .map(|s| crate::storage_size(&s.shape).map(|z| z.bytes).unwrap_or(0))
            .sum()
    }

    /// The number of data-moving steps.
    pub fn data_movements(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| s.op != StepOp::Bitcast)
            .count()
    }
}

impl fmt::Display for Plan {
    /// Prints the plan as HLO instructions, operand `%x`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "%x = {} parameter(0)", self.from)?;
        if self.steps.iter().any(|s| matches!(s.op, StepOp::Pad(_))) {
            writeln!(f, "%zero = {}[] constant(0)", self.from.element_type)?;
        }
        let mut prev = "%x".to_string();
        for (i, s) in self.steps.iter().enumerate() {
            let name = match &s.op {
                StepOp::Pad(_) => format!("%pad.{i}"),
                StepOp::Bitcast => format!("%bitcast.{i}"),
                StepOp::Transpose { .. } => format!("%transpose.{i}"),
                StepOp::Slice(_) => format!("%slice.{i}"),
                StepOp::Copy => format!("%copy.{i}"),
            };
            write!(f, "{name} = {} ", s.shape)?;
            match &s.op {
                StepOp::Pad(dims) => {
                    write!(f, "pad({prev}, %zero), padding=")?;
                    write_separated(f, dims, "x")?;
                }
                StepOp::Bitcast => write!(f, "bitcast({prev})")?,
                StepOp::Copy => write!(f, "copy({prev})")?,
                StepOp::Transpose { dims } => {
                    write!(f, "transpose({prev}), dimensions={{")?;
                    write_list(f, dims)?;
                    f.write_str("}")?;
                }
                StepOp::Slice(dims) => {
                    write!(f, "slice({prev}), slice={{")?;
                    write_separated(f, dims, ", ")?;
                    f.write_str("}")?;
                }
            }
            writeln!(f)?;
            prev = name;
        }
        write!(f, "// bytes moved: {}", self.bytes_moved())
    }
}

/// An operation on plain row-major views, before shapes are attached.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    /// Reinterpret as a view with these dimensions.
    View(Dims),
    Transpose(DimVec),
    /// Keep `[0, limit)` of every dimension.
    Slice(Dims),
    /// Grow every dimension to this size (high padding).
    Pad(Dims),
}

fn apply(dims: &[i64], op: &Op) -> Dims {
    match op {
        Op::View(d) | Op::Slice(d) | Op::Pad(d) => d.clone(),
        Op::Transpose(p) => p.iter().map(|&k| dims[k]).collect(),
    }
}

/// Builds the naive level-by-level op list from FROM's physical view.
fn naive(ef: &Expansion, et: &Expansion, same_front: bool, shared: usize) -> Vec<Op> {
    let mut ops = Vec::new();
    if ef.storage_slots != ef.element_slots {
        ops.push(Op::View(SmallVec::from_slice(&[ef.storage_slots as i64])));
        ops.push(Op::Slice(SmallVec::from_slice(&[ef.element_slots as i64])));
    }
    ops.push(Op::View(ef.physical_dims.clone()));
    for level in ef.levels[shared..].iter().rev() {
        ops.push(Op::Transpose(inverse_permutation(&level.permutation)));
        ops.push(Op::View(level.padded_dims.clone()));
        ops.push(Op::Slice(level.combined_dims.clone()));
        ops.push(Op::View(level.input_dims.clone()));
    }
    if !same_front {
        let logical_f: Dims = ef
            .physical_order
            .iter()
            .map(|&d| ef.logical_dims[d])
            .collect();
        ops.push(Op::Slice(logical_f));
        let perm: DimVec = et
            .physical_order
            .iter()
            .map(|d| ef.physical_order.iter().position(|x| x == d).unwrap_or(0))
            .collect();
        ops.push(Op::Transpose(perm));
        ops.push(Op::Pad(et.untiled_dims.clone()));
    }
    for level in &et.levels[shared..] {
        ops.push(Op::View(level.combined_dims.clone()));
        ops.push(Op::Pad(level.padded_dims.clone()));
        ops.push(Op::View(level.split_dims.clone()));
        ops.push(Op::Transpose(level.permutation.clone()));
    }
    if et.storage_slots != et.element_slots {
        ops.push(Op::View(SmallVec::from_slice(&[et.element_slots as i64])));
        ops.push(Op::Pad(SmallVec::from_slice(&[et.storage_slots as i64])));
    }
    ops
}

/// Fuses a run of views and transposes starting from `start` into
/// (refined start dims, one permutation, final dims), or `None` when a view
/// cuts a dimension where the digits do not allow it.
fn fuse(start: &[i64], ops: &[Op]) -> Option<(Dims, DimVec)> {
    // Zero-sized arrays have nothing to move; keep their plans as built.
    if start.contains(&0)
        || ops
            .iter()
            .any(|o| matches!(o, Op::View(d) if d.contains(&0)))
    {
        return None;
    }
    // Digits: sizes; `origin` lists the start dims' digits in order;
    // `cur` lists the current dims' digits.
    let mut size: Vec<i64> = start.to_vec();
    let mut origin: Vec<usize> = (0..start.len()).collect();
    let mut cur: Vec<Vec<usize>> = (0..start.len()).map(|i| vec![i]).collect();
    for op in ops {
        match op {
            Op::Transpose(p) => cur = p.iter().map(|&k| cur[k].clone()).collect(),
            Op::View(dims) => {
                let mut flat: Vec<usize> = cur.concat();
                let mut next: Vec<Vec<usize>> = Vec::new();
                let mut at = 0;
                for &want in dims.iter() {
                    let mut group = Vec::new();
                    let mut prod = 1i64;
                    while prod < want
                        || (want == 1 && at < flat.len() && size[flat[at]] == 1 && group.is_empty())
                    {
                        let d = *flat.get(at)?;
                        let s = size[d];
                        if prod * s <= want && want % (prod * s) == 0 {
                            group.push(d);
                            prod *= s;
                            at += 1;
                            continue;
                        }
                        // Split digit d: the major part r joins this group.
                        let r = want / prod;
                        if want % prod != 0 || s % r != 0 {
                            return None;
                        }
                        let lo = size.len();
                        size.push(s / r);
                        size[d] = r;
                        flat.insert(at + 1, lo);
                        let pos = origin.iter().position(|&x| x == d)?;
                        origin.insert(pos + 1, lo);
                        group.push(d);
                        prod *= r;
                        at += 1;
                    }
                    if prod != want {
                        return None;
                    }
                    next.push(group);
                }
                // Trailing size-1 digits join the last dimension.
                while at < flat.len() {
                    if size[flat[at]] != 1 {
                        return None;
                    }
                    next.last_mut()?.push(flat[at]);
                    at += 1;
                }
                cur = next;
            }
            _ => return None,
        }
    }
    let fin: Vec<usize> = cur.concat();
    let perm: DimVec = fin
        .iter()
        .map(|d| origin.iter().position(|x| x == d).unwrap_or(0))
        .collect();
    let refined: Dims = origin.iter().map(|&d| size[d]).collect();
    Some((refined, perm))
}

/// One pass of peephole rewrites; returns true if anything changed.
fn peephole(start: &[i64], ops: &mut Vec<Op>) -> bool {
    // Current dims before each op.
    let dims_before = |ops: &[Op]| {
        let mut v: Vec<Dims> = Vec::with_capacity(ops.len() + 1);
        let mut d: Dims = SmallVec::from_slice(start);
        for op in ops {
            v.push(d.clone());
            d = apply(&d, op);
        }
        v.push(d);
        v
    };
    let before = dims_before(ops);
    // R1: drop no-ops.
    for i in 0..ops.len() {
        let noop = match &ops[i] {
            Op::Transpose(p) => p.iter().enumerate().all(|(k, &v)| k == v),
            Op::View(d) | Op::Slice(d) | Op::Pad(d) => *d == before[i],
        };
        if noop {
            ops.remove(i);
            return true;
        }
    }
    for i in 0..ops.len().saturating_sub(1) {
        match (&ops[i], &ops[i + 1]) {
            // R2: consecutive views.
            (Op::View(_), Op::View(_)) => {
                ops.remove(i);
                return true;
            }
            // R3: slices go after transposes.
            (Op::Slice(lim), Op::Transpose(p)) => {
                let lim2: Dims = p.iter().map(|&k| lim[k]).collect();
                let p = p.clone();
                ops[i] = Op::Transpose(p);
                ops[i + 1] = Op::Slice(lim2);
                return true;
            }
            // R4: pads go before transposes.
            (Op::Transpose(p), Op::Pad(high)) => {
                let mut h: Dims = SmallVec::from_elem(0, p.len());
                for (k, &src) in p.iter().enumerate() {
                    h[src] = high[k];
                }
                let p = p.clone();
                ops[i] = Op::Pad(h);
                ops[i + 1] = Op::Transpose(p);
                return true;
            }
            // R5: a slice then a pad only change extents; keep padding
            // slots as they are wherever the extents come back.
            (Op::Slice(_), Op::Pad(b)) => {
                let a = &before[i];
                let keep: Dims = a.iter().zip(b).map(|(&x, &y)| x.min(y)).collect();
                let b = b.clone();
                if keep == before[i + 1] {
                    continue;
                }
                ops[i] = Op::Slice(keep);
                ops[i + 1] = Op::Pad(b);
                return true;
            }
            _ => {}
        }
    }
    // R6: fuse runs of views and transposes with two or more transposes.
    let mut i = 0;
    while i < ops.len() {
        let is_tv = |op: &Op| matches!(op, Op::View(_) | Op::Transpose(_));
        if !is_tv(&ops[i]) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < ops.len() && is_tv(&ops[j]) {
            j += 1;
        }
        let transposes = ops[i..j]
            .iter()
            .filter(|o| matches!(o, Op::Transpose(_)))
            .count();
        if transposes >= 2
            && let Some((refined, perm)) = fuse(&before[i], &ops[i..j])
        {
            let fin = before[j].clone();
            let new = vec![Op::View(refined), Op::Transpose(perm), Op::View(fin)];
            ops.splice(i..j, new);
            return true;
        }
        i = j;
    }
    false
}

/// A plain row-major view of `dims` with element size `e`.
fn view(like: &ArrayShape, dims: &[i64], e: i64) -> ArrayShape {
    let mut l = Layout::descending(dims.len());
    l.element_size_in_bits = e;
    ArrayShape::with_layout(like.element_type, dims, l)
}

/// The dimensions of a buffer's physical array: the expansion's physical
/// dimensions, or one flat dimension when tail padding follows them.
fn physical_view_dims(e: &Expansion) -> Dims {
    if e.storage_slots == e.element_slots {
        e.physical_dims.clone()
    } else {
        SmallVec::from_slice(&[e.storage_slots as i64])
    }
}

/// True when the algebra proves a bitcast from `a` to `b`: a layout
/// change, a reshape, a transpose by the permutation the two layouts imply
/// (an untiled buffer viewed as its physical array), or a physical view.
fn proven(a: &ArrayShape, b: &ArrayShape) -> bool {
    is_bitcast(a, b).is_ok_and(|v| v.bitcast)
        || crate::facts::deduce_transpose_dimensions_for_bitcast(a, b).is_some()
        || physical_view_is_bitcast(a, b).is_ok_and(|v| v.bitcast)
}

/// The plan between two shapes one of which has unit major dimensions
/// in its view (`n` of them; a first tile longer than the rank, a tiled
/// scalar): planned between the views, which hold every element where the
/// shapes do, with the real ends.
fn unit_major_plan(from: ArrayShape, to: ArrayShape, n: usize) -> Result<Plan, AlgebraError> {
    let mut plan = relayout_plan(&from.with_unit_major_dims(n), &to.with_unit_major_dims(n))?;
    // The first step reads the view, a bitcast of the real operand.
    if plan.steps.first().is_none_or(|s| s.op != StepOp::Bitcast) {
        plan.steps.insert(
            0,
            Step {
                op: StepOp::Bitcast,
                shape: plan.from.clone(),
            },
        );
    }
    plan.from = from;
    match plan.steps.last_mut() {
        Some(last) if last.op == StepOp::Bitcast => last.shape = to,
        _ => plan.steps.push(Step {
            op: StepOp::Bitcast,
            shape: to,
        }),
    }
    Ok(plan)
}

/// The steps of `ops`, which act on plain views from `start`, with their
/// shapes: views of `from` with its element size (`ef_bits`) up to the
/// first transpose and the destination's (`et_bits`) after it. When no op
/// moves data (only the element size field differs), one identity
/// transpose is the copy.
fn shaped_steps(
    ops: &[Op],
    start: Dims,
    from: &ArrayShape,
    ef_bits: i64,
    et_bits: i64,
) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut dims: Dims = start;
    let mut moved = false;
    let mut switched = false;
    for op in ops {
        let prev = dims.clone();
        dims = apply(&dims, op);
        moved |= !matches!(op, Op::View(_));
        switched |= matches!(op, Op::Transpose(_));
        let shape = view(from, &dims, if switched { et_bits } else { ef_bits });
        let op = match op {
            Op::View(_) => StepOp::Bitcast,
            Op::Transpose(p) => StepOp::Transpose { dims: p.clone() },
            Op::Slice(lim) => StepOp::Slice(
                lim.iter()
                    .map(|&limit| SliceDim {
                        start: 0,
                        limit,
                        stride: 1,
                    })
                    .collect(),
            ),
            Op::Pad(_) => StepOp::Pad(
                dims.iter()
                    .zip(&prev)
                    .map(|(&a, &b)| PadDim {
                        low: 0,
                        high: a - b,
                        interior: 0,
                    })
                    .collect(),
            ),
        };
        steps.push(Step { op, shape });
    }
    if !moved {
        // Only the element size field differs: one copy is needed.
        let shape = view(from, &dims, et_bits);
        steps.push(Step {
            op: StepOp::Transpose {
                dims: (0..dims.len()).collect(),
            },
            shape,
        });
    }
    steps
}

/// The shortest plan Tessera finds that relayouts `from` into `to` (same
/// element type and dimensions). A bitcast gives a one-step plan (or an
/// empty one when the shapes are identical).
pub fn relayout_plan(from: &ArrayShape, to: &ArrayShape) -> Result<Plan, AlgebraError> {
    if from.dims != to.dims || from.element_type != to.element_type {
        return Err(AlgebraError::Mismatch(format!(
            "a relayout needs the same element type and dimensions: {} vs {}",
            ArrayShape {
                layout: None,
                ..from.clone()
            },
            ArrayShape {
                layout: None,
                ..to.clone()
            }
        )));
    }
    let lf = checked_layout(from)?.into_owned();
    let lt = checked_layout(to)?.into_owned();
    let from = from.in_layout(lf.clone());
    let to = to.in_layout(lt.clone());
    // A first tile longer than the rank (a tiled scalar) tiles the array
    // seen with unit major dimensions: plan between those views, which
    // hold every element where the shapes do, and keep the real ends.
    let n = from.unit_major_dims().max(to.unit_major_dims());
    if n > 0 && from != to {
        return unit_major_plan(from, to, n);
    }
    if from == to {
        return Ok(Plan {
            from,
            steps: Vec::new(),
        });
    }
    if layout_change_is_bitcast(&from, &to)?.bitcast {
        return Ok(Plan {
            steps: vec![Step {
                op: StepOp::Bitcast,
                shape: to.clone(),
            }],
            from,
        });
    }
    let ef = Expansion::new(&from)?;
    let et = Expansion::new(&to)?;
    let same_front = ef.padded_dims == et.padded_dims && ef.physical_order == et.physical_order;
    let shared = if same_front {
        lf.tiles
            .iter()
            .zip(&lt.tiles)
            .take_while(|(a, b)| a == b)
            .count()
    } else {
        0
    };
    let mut ops = naive(&ef, &et, same_front, shared);
    // The start is FROM's buffer seen as one flat array.
    let start: Dims = SmallVec::from_slice(&[ef.storage_slots as i64]);
    ops.insert(0, Op::View(start.clone()));
    ops.push(Op::View(SmallVec::from_slice(&[et.storage_slots as i64])));
    for _ in 0..1000 {
        if !peephole(&start, &mut ops) {
            break;
        }
    }
    // Attach shapes. The ops act on plain views, starting from FROM's
    // buffer seen flat, so the first step is a bitcast into a view. Views
    // before the first transpose use FROM's element size, later ones TO's:
    // a pad or slice keeps its layout, element size included, so only a
    // transpose may pack or unpack. Without one, a last identity transpose
    // does it.
    if !matches!(ops.first(), Some(Op::View(_))) {
        ops.insert(0, Op::View(start.clone()));
    }
    let (ef_bits, et_bits) = (lf.element_size_in_bits, lt.element_size_in_bits);
    let has_transpose = ops.iter().any(|o| matches!(o, Op::Transpose(_)));
    if !has_transpose && from.element_storage_bits() != to.element_storage_bits() {
        let end = ops
            .iter()
            .fold(SmallVec::from_slice(&start), |d: Dims, op| apply(&d, op));
        ops.push(Op::Transpose((0..end.len()).collect()));
    }
    let mut steps = shaped_steps(&ops, start, &from, ef_bits, et_bits);
    match steps.last_mut() {
        Some(last) if last.op == StepOp::Bitcast => last.shape = to.clone(),
        _ => steps.push(Step {
            op: StepOp::Bitcast,
            shape: to.clone(),
        }),
    }
    // The first and last bitcasts view FROM's and TO's buffer. A view
    // whose dimensions cut across the physical ones (a `*` fold regrouped
    // by the other side's tiles), or of an untiled buffer in another order
    // than its physical one, goes through the physical array itself, so
    // that each bitcast is one the algebra proves: a physical view (for an
    // untiled buffer, a transpose), then a reshape between plain views.
    if let Some(first) = steps.first()
        && !proven(&from, &first.shape)
    {
        steps.insert(
            0,
            Step {
                op: StepOp::Bitcast,
                shape: view(&from, &physical_view_dims(&ef), ef_bits),
            },
        );
    }
    let n = steps.len();
    if n >= 2 && !proven(&steps[n - 2].shape, &to) {
        steps.insert(
            n - 1,
            Step {
                op: StepOp::Bitcast,
                shape: view(&from, &physical_view_dims(&et), et_bits),
            },
        );
    }
    // Bitcasts to an identical shape are no steps.
    let mut prev = from.clone();
    steps.retain(|s| {
        let keep = !(s.op == StepOp::Bitcast && s.shape == prev);
        prev = s.shape.clone();
        keep
    });
    Ok(Plan { from, steps })
}

/// A relayout plan whose pads, transposes and slices all read elements of
/// `element_size_in_bits` (0: the type's default width), for a target that
/// reads sub-byte elements only at that width (XLA CPU reads `s4`
/// unpacked, one byte each). When FROM's storage width differs, FROM's
/// buffer is first viewed as its physical array and copied into that width
/// (unpacked). When TO's differs, the last transpose writes it; if the last
/// data movement is a pad or slice (which keep their layout), TO's
/// physical array is copied into it (packed) last. Each copy is between two
/// plain views of the same dimensions. Otherwise this is
/// [`relayout_plan`].
pub fn relayout_plan_at(
    from: &ArrayShape,
    to: &ArrayShape,
    element_size_in_bits: i64,
) -> Result<Plan, AlgebraError> {
    let lf = checked_layout(from)?.into_owned();
    let lt = checked_layout(to)?.into_owned();
    let at = |s: &ArrayShape, l: &Layout| {
        let mut l = l.clone();
        l.element_size_in_bits = element_size_in_bits;
        s.in_layout(l)
    };
    let (from_w, to_w) = (at(from, &lf), at(to, &lt));
    let unpack = from_w.element_storage_bits() != from.element_storage_bits();
    let pack = to_w.element_storage_bits() != to.element_storage_bits();
    if !unpack && !pack {
        return relayout_plan(from, to);
    }
    let from = from.in_layout(lf.clone());
    let to = to.in_layout(lt.clone());
    let mut core = relayout_plan(
        if unpack { &from_w } else { &from },
        if pack { &to_w } else { &to },
    )?;
    // Only reading is restricted: a last transpose may write TO's element
    // size itself (a pad or slice keeps its layout, so it may not).
    let last_move = core.steps.iter().rposition(|s| s.op != StepOp::Bitcast);
    let mut pack = pack;
    if pack
        && let Some(k) = last_move.filter(|&k| matches!(core.steps[k].op, StepOp::Transpose { .. }))
    {
        for step in &mut core.steps[k..] {
            if let Some(l) = &mut step.shape.layout {
                l.element_size_in_bits = lt.element_size_in_bits;
            }
        }
        if let Some(last) = core.steps.last_mut() {
            last.shape = to.clone();
        }
        pack = false;
    }
    let mut steps: Vec<Step> = Vec::new();
    if unpack {
        let ef = Expansion::new(&from)?;
        let dims = physical_view_dims(&ef);
        steps.push(Step {
            op: StepOp::Bitcast,
            shape: view(&from, &dims, lf.element_size_in_bits),
        });
        steps.push(Step {
            op: StepOp::Copy,
            shape: view(&from, &dims, element_size_in_bits),
        });
        steps.push(Step {
            op: StepOp::Bitcast,
            shape: from_w.clone(),
        });
    }
    steps.extend(core.steps);
    if pack {
        let et = Expansion::new(&to_w)?;
        let dims = physical_view_dims(&et);
        steps.push(Step {
            op: StepOp::Bitcast,
            shape: view(&to, &dims, element_size_in_bits),
        });
        steps.push(Step {
            op: StepOp::Copy,
            shape: view(&to, &dims, lt.element_size_in_bits),
        });
        steps.push(Step {
            op: StepOp::Bitcast,
            shape: to.clone(),
        });
    }
    // Runs of bitcasts become one wherever the algebra proves the merged
    // one, and bitcasts to an identical shape are no steps.
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        let n = out.len();
        let operand = if n >= 1 { &out[n - 1].shape } else { &from };
        if step.op == StepOp::Bitcast && step.shape == *operand {
            continue;
        }
        if n >= 1 && out[n - 1].op == StepOp::Bitcast && step.op == StepOp::Bitcast {
            let before = if n >= 2 { &out[n - 2].shape } else { &from };
            if proven(before, &step.shape) {
                if step.shape == *before {
                    out.pop();
                } else {
                    out[n - 1].shape = step.shape;
                }
                continue;
            }
        }
        out.push(step);
    }
    Ok(Plan { from, steps: out })
}
