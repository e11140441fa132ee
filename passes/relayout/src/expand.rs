//! Phase 3 (on request): every `copy` between two tilings becomes its
//! relayout plan, made of ordinary HLO instructions. "Between two tilings"
//! means one side is tiled and the layouts differ ([`changes_tiling`]).
//!
//! `shape::relayout_plan(from, to)` gives the steps: `pad` (zeros of the
//! element type: one shared `constant` per element type and computation,
//! named after the first copy that pads with it),
//! `bitcast` (a reshape into or out of a physical view, or the split of a
//! padded array into tiles), `transpose` (the data movement), `slice`
//! (where padding goes away) and a last `bitcast` into the copy's shape.
//! The copy keeps its name, metadata and users: its instruction becomes
//! the last step; the steps before it are new instructions named after it
//! (`%x.copy.pad`, `%x.copy.transpose`, ...).

use std::sync::Arc;

use hlo::{
    AttrValue, Computation, FreshNames, InstId, Instruction, KnownAttr, Opcode, Payload, Placement,
};
use rustc_hash::FxHashMap;
use shape::{ArrayShape, Layout, PrimitiveType, Shape, Step, StepOp};
use target::TargetSpec;

use crate::uses::inherited_attrs;
use crate::{ExpandedStep, RelayoutError, Rewrite, RewriteKind, edit, storage_bytes};

/// True when a copy from `from` to `to` is a tiled relayout: one side is
/// tiled and the layouts differ (other tiles, or the same tiles over
/// another dimension order), in one memory space. These are the copies
/// the expansion spells out; a copy between two untiled layouts is a plain
/// transpose and stays a copy.
pub fn changes_tiling(from: &ArrayShape, to: &ArrayShape) -> bool {
    let (a, b) = (from.layout_or_default(), to.layout_or_default());
    (!a.tiles.is_empty() || !b.tiles.is_empty()) && a != b && a.memory_space == b.memory_space
}

/// The zero literal of an element type, as HLO text writes it.
fn zero_literal(t: PrimitiveType) -> &'static str {
    if t == PrimitiveType::Pred {
        "false"
    } else if t.is_complex() {
        "(0, 0)"
    } else {
        "0"
    }
}

/// The opcode, attributes and operand count of a step.
fn step_instruction(step: &Step, name: String, base: &Instruction) -> Instruction {
    let (opcode, attr) = match &step.op {
        StepOp::Pad(dims) => (
            Opcode::Pad,
            Some((KnownAttr::Padding, AttrValue::Padding(dims.clone()))),
        ),
        StepOp::Bitcast => (Opcode::Bitcast, None),
        StepOp::Copy => (Opcode::Copy, None),
        StepOp::Transpose { dims } => {
            let ints = dims.iter().map(|&d| d as i64).collect();
            (
                Opcode::Transpose,
                Some((KnownAttr::Dimensions, AttrValue::Ints(ints))),
            )
        }
        StepOp::Slice(dims) => (
            Opcode::Slice,
            Some((KnownAttr::Slice, AttrValue::Slice(dims.clone()))),
        ),
    };
    let mut inst = Instruction::new(name, opcode, Shape::Array(step.shape.clone()));
    inst.attrs = inherited_attrs(&base.attrs);
    if let Some((k, v)) = attr {
        inst.attrs.set(k, v);
    }
    inst
}

fn op_name(op: &StepOp) -> &'static str {
    match op {
        StepOp::Pad(_) => "pad",
        StepOp::Bitcast => "bitcast",
        StepOp::Copy => "copy",
        StepOp::Transpose { .. } => "transpose",
        StepOp::Slice(_) => "slice",
    }
}

/// The plan's steps with every transpose that moves no byte (one that only
/// moves size-1 dimensions, say) turned into a bitcast, and each run of
/// bitcasts merged: a bitcast only reinterprets the buffer, so a chain of
/// them is one reinterpretation. Two bitcasts merge only when the layout
/// verifier proves the merged one (`shape::prove_bitcast`);
/// otherwise both stay, each proven on its own (a view of a tiled buffer
/// whose dimensions cut across the physical ones goes through the
/// physical array, see `shape::relayout_plan`).
fn simplify(from: &ArrayShape, steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    let mut prev = from.clone();
    for mut step in steps {
        if let StepOp::Transpose { dims } = &step.op
            && shape::transpose_is_bitcast(&prev, &step.shape, dims).is_ok_and(|v| v.bitcast)
        {
            step.op = StepOp::Bitcast;
        }
        prev = step.shape.clone();
        let n = out.len();
        let merges = n >= 1 && out[n - 1].op == StepOp::Bitcast && step.op == StepOp::Bitcast && {
            let operand = if n >= 2 { &out[n - 2].shape } else { from };
            shape::prove_bitcast(operand, &step.shape).is_ok()
        };
        if merges {
            out[n - 1].shape = step.shape;
        } else {
            out.push(step);
        }
    }
    out
}

/// The element size (0: the type's default) at which `target` reads a
/// plain view of `a`'s element type, when the target constrains every
/// operand: XLA CPU reads sub-byte elements unpacked, so its expansions
/// unpack first and pack last (`shape::relayout_plan_at`). `None` leaves
/// the element size to the plan.
fn working_element_size(target: &TargetSpec, a: &ArrayShape) -> Option<i64> {
    target.operand_default.as_ref()?;
    let descending: Vec<usize> = (0..a.rank()).rev().collect();
    Some(target::tiling::layout_for(target, a, &descending).element_size_in_bits)
}

/// The copies of `comp` between two tilings of the same dimensions, each
/// with its operand and both shapes as laid out.
fn retiling_copies(comp: &Computation) -> Vec<(InstId, InstId, ArrayShape, ArrayShape)> {
    comp.instructions()
        .filter(|(_, i)| i.opcode == Opcode::Copy)
        .filter_map(|(id, i)| {
            let &[o] = i.operands() else { return None };
            let from = comp.inst(o).shape.as_array()?.laid_out();
            let to = i.shape.as_array()?.laid_out();
            (from.dims == to.dims && changes_tiling(&from, &to)).then_some((id, o, from, to))
        })
        .collect()
}

/// Adds, unscheduled, a zero scalar of type `t` for the pads of the
/// expansion of copy `copy_name`.
fn add_zero(
    comp: &mut Computation,
    names: &mut FreshNames,
    t: PrimitiveType,
    copy_name: &str,
) -> Result<InstId, RelayoutError> {
    // Instruction names are unique across the module, and computations
    // are rewritten independently, so the name derives from the copy's
    // (unique) one.
    let name = names.fresh(&format!("{copy_name}.zero"));
    let scalar = ArrayShape::with_layout(t, &[], Layout::new(&[]));
    let mut inst = Instruction::new(name, Opcode::Constant, Shape::Array(scalar));
    inst.payload = Payload::Constant(zero_literal(t).into());
    let cname = comp.name.clone();
    comp.add_unscheduled(inst, &[]).map_err(edit(&cname))
}

/// Phase 3 on one computation.
pub fn expand_copies(
    comp: &mut Computation,
    target: &TargetSpec,
) -> Result<Vec<Arc<Rewrite>>, RelayoutError> {
    let cname = comp.name.clone();
    let copies = retiling_copies(comp);
    if copies.is_empty() {
        return Ok(Vec::new());
    }
    let mut names = FreshNames::of(comp);
    let mut zeros: FxHashMap<PrimitiveType, InstId> = FxHashMap::default();
    let mut placement = Placement::default();
    let mut rewrites = Vec::new();
    for (c, o, from, to) in copies {
        let copy_name = comp.inst(c).name.clone();
        let plan_error = |message: String| RelayoutError::Plan {
            computation: cname.clone(),
            instruction: copy_name.clone(),
            from: from.to_string(),
            to: to.to_string(),
            message,
        };
        let plan = match working_element_size(target, &from) {
            Some(bits) => shape::relayout_plan_at(&from, &to, bits),
            None => shape::relayout_plan(&from, &to),
        }
        .map_err(|e| plan_error(e.to_string()))?;
        let steps_planned = simplify(&from, plan.steps);
        let Some(last) = steps_planned.last() else {
            continue;
        };
        if from.dynamic != 0 {
            return Err(plan_error("dynamic dimensions have no fixed buffer".into()));
        }
        // The copy's own instruction becomes the last step when that step
        // already yields its shape; otherwise a last bitcast does.
        let reuse_last = last.shape == to;
        let base = comp.inst(c).clone();
        let mut prev = o;
        let mut steps = Vec::with_capacity(steps_planned.len() + 1);
        let count = steps_planned.len();
        for (k, step) in steps_planned.iter().enumerate() {
            let op = op_name(&step.op);
            let is_pad = matches!(step.op, StepOp::Pad(_));
            let mut operands = vec![prev];
            if is_pad {
                let t = step.shape.element_type;
                let zero = match zeros.get(&t) {
                    Some(&z) => z,
                    None => {
                        let z = add_zero(comp, &mut names, t, &copy_name)?;
                        placement.before.entry(c).or_default().push(z);
                        zeros.insert(t, z);
                        z
                    }
                };
                operands.push(zero);
            }
            let bytes = if step.op == StepOp::Bitcast {
                0
            } else {
                storage_bytes(&step.shape)
            };
            if k + 1 == count && reuse_last {
                let made = step_instruction(step, copy_name.clone(), &base);
                let inst = comp.inst_mut(c);
                inst.opcode = made.opcode;
                for a in made.attrs.0 {
                    if let hlo::AttrKey::Known(key) = a.key {
                        inst.attrs.set(key, a.value);
                    }
                }
                comp.set_operands(c, &operands).map_err(edit(&cname))?;
                steps.push(ExpandedStep {
                    name: copy_name.clone(),
                    op,
                    shape: step.shape.clone(),
                    bytes,
                });
            } else {
                let name = names.fresh(&format!("{copy_name}.{op}"));
                let inst = step_instruction(step, name.clone(), &base);
                let id = comp
                    .add_unscheduled(inst, &operands)
                    .map_err(edit(&cname))?;
                placement.before.entry(c).or_default().push(id);
                steps.push(ExpandedStep {
                    name,
                    op,
                    shape: step.shape.clone(),
                    bytes,
                });
                prev = id;
            }
        }
        if !reuse_last {
            let have = storage_bytes(&last.shape);
            let want = storage_bytes(&to);
            if have != want {
                return Err(plan_error(format!(
                    "the plan ends in {} ({have} bytes), not {want} bytes",
                    last.shape
                )));
            }
            comp.inst_mut(c).opcode = Opcode::Bitcast;
            comp.set_operands(c, &[prev]).map_err(edit(&cname))?;
            steps.push(ExpandedStep {
                name: copy_name.clone(),
                op: "bitcast",
                shape: to.clone(),
                bytes: 0,
            });
        }
        let moves = steps.iter().filter(|s| s.op != "bitcast").count();
        let bytes = steps.iter().map(|s| s.bytes).sum();
        rewrites.push(Rewrite {
            kind: RewriteKind::ExpandedRelayout,
            computation: cname.clone(),
            instruction: copy_name,
            operand: comp.inst(o).name.clone(),
            why: format!(
                "{from} and {to} are tiled differently; the copy is spelled out as its relayout plan: {} instructions, {moves} of them moving data",
                steps.len()
            )
            .into(),
            bytes,
            from: Arc::new(from),
            to: Arc::new(to),
            transpose_dims: None,
            users: Vec::new(),
            steps,
        });
    }
    comp.reschedule(&placement).map_err(edit(&cname))?;
    Ok(rewrites.into_iter().map(Arc::new).collect())
}
