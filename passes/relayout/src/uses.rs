//! Phase 1: every use whose operand is not in the layout its consumer
//! needs gets a `bitcast` (when the algebra proves the bytes line up) or a
//! `copy`, one per (value, layout), shared by all uses needing it.
//!
//! The needs, strongest first when two disagree on one use:
//! 0. a custom call's `operand_layout_constraints` (or a `LayoutConstraint`);
//! 1. a target rule (`target::policy::inst_needs`);
//! 2. the instruction itself: a layout-preserving op reads its same-rank
//!    operands in its result layout, a broadcast reads its operand in the
//!    result's order restricted to the broadcast dimensions;
//! 3. the target's default for otherwise unconstrained operands.
//!
//! The entry root must match the result of `entry_computation_layout`.
//!
//! Needs are collected on the unedited computation first (a rule may look
//! at its operands, e.g. "operand 1 is a constant"), then applied.

use std::borrow::Cow;
use std::sync::Arc;

use hlo::{
    Attrs, Computation, FreshNames, InstId, Instruction, KnownAttr, Opcode, Parallelism, Placement,
    Split,
};
use rustc_hash::FxHashMap;
use shape::{DimVec, Layout, Shape};
use target::TargetSpec;
use target::policy::{Need, NeedSource};

use crate::{
    ComputationFacts, RelayoutError, Rewrite, RewriteKind, edit, order, same_memory_space,
    storage_bytes,
};

/// Where a needed layout is read.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Site {
    /// Operand `operand` of `user`.
    Operand { user: InstId, operand: usize },
}

/// A use that needs another layout than its operand has.
#[derive(Clone, Debug)]
struct Want {
    site: Site,
    value: InstId,
    layout: Layout,
    consumer: String,
    because: String,
}

/// How strongly a need binds; lower wins.
type Priority = u8;

fn source_priority(source: NeedSource) -> Priority {
    match source {
        NeedSource::CustomCall | NeedSource::LayoutConstraint | NeedSource::Outfeed => 0,
        NeedSource::TargetRule(_) => 1,
        NeedSource::TargetDefault => 3,
    }
}

fn source_because(
    target: &TargetSpec,
    comp: &Computation,
    user: InstId,
    source: NeedSource,
) -> String {
    match source {
        NeedSource::TargetRule(i) => match target.rules.get(i as usize) {
            Some(rule) => format!(
                "target {} rule '{}' requires it: {}",
                target.name,
                rule.name,
                rule.reason.trim()
            ),
            None => format!("target {} requires it", target.name),
        },
        NeedSource::TargetDefault => {
            format!(
                "target {} requires this layout for every operand it does not otherwise constrain",
                target.name
            )
        }
        NeedSource::CustomCall => {
            let name = comp
                .inst(user)
                .attrs
                .string(KnownAttr::CustomCallTarget)
                .unwrap_or("");
            format!("custom call \"{name}\" constrains its operand layouts")
        }
        NeedSource::LayoutConstraint => {
            "a layout constraint in the input fixes this layout".to_string()
        }
        NeedSource::Outfeed => {
            "the outfeed sends it to the host in the layout of its outfeed_shape".to_string()
        }
    }
}

/// Instructions whose operands this phase does not check: forwarding
/// instructions, calls (their boundaries are layout assignment's), existing
/// bitcasts (valid only as written) and copies (they read any layout).
fn unchecked(op: Opcode) -> bool {
    op.forwards_buffers()
        || op.passes_operands_to_callee()
        || matches!(op, Opcode::Parameter | Opcode::Bitcast | Opcode::Copy)
}

/// Why a use needs the layout it needs; turned into a sentence only for a
/// use that is not met, since most uses are.
#[derive(Clone, Copy)]
enum Because {
    /// A target rule, custom call, layout constraint or outfeed.
    Source(NeedSource),
    /// A broadcast reads its operand in its result's order.
    Broadcast,
    /// A layout-preserving op reads its operands in its result's layout.
    Keeps(Opcode),
}

impl Because {
    fn sentence(self, target: &TargetSpec, comp: &Computation, user: InstId) -> String {
        match self {
            Because::Source(source) => source_because(target, comp, user, source),
            Because::Broadcast => {
                "a broadcast reads its operand in its result's order restricted to the broadcast dimensions".to_string()
            }
            Because::Keeps(op) => format!("{op} keeps its operands' layout"),
        }
    }
}

/// The needs of `id`'s operands that its operands do not meet.
fn operand_wants(comp: &Computation, target: &TargetSpec, id: InstId, out: &mut Vec<Want>) {
    let inst = comp.inst(id);
    let op = inst.opcode;
    if unchecked(op) {
        return;
    }
    let needs = target::policy::inst_needs(target, comp, id);
    let results = inst.shape.array_leaves();
    let keeps = target.keeps_layout(op);
    hlo::count(hlo::Work::RelayoutUses, inst.operands().len());
    for (i, &o) in inst.operands().iter().enumerate() {
        let Some(a) = comp.inst(o).shape.as_array() else {
            continue;
        };
        if a.rank() == 0 {
            continue;
        }
        let have: Cow<'_, Layout> = match &a.layout {
            Some(l) => Cow::Borrowed(l),
            None => Cow::Owned(Layout::descending(a.rank())),
        };
        // The strongest need, as (priority, layout, why); a met need holds
        // `have`. Layouts are borrowed where they can be: most needs are met.
        let mut best: Option<(Priority, Cow<'_, Layout>, Because)> = None;
        fn offer<'l>(
            p: Priority,
            layout: Cow<'l, Layout>,
            because: Because,
            best: &mut Option<(Priority, Cow<'l, Layout>, Because)>,
        ) {
            if best.as_ref().is_none_or(|(q, _, _)| p < *q) {
                *best = Some((p, layout, because));
            }
        }
        if let Some((need, source)) = needs.operand(i) {
            let layout = match need {
                Need::Exact(l) => Cow::Borrowed(l),
                Need::Matrix(_) | Need::Minor(_) if need.accepts_order(&have) => have.clone(),
                Need::Matrix(_) | Need::Minor(_) => Cow::Borrowed(need.preferred()),
            };
            offer(
                source_priority(source),
                layout,
                Because::Source(source),
                &mut best,
            );
        }
        if op == Opcode::Broadcast {
            let dims: Option<DimVec> = inst
                .attrs
                .ints(KnownAttr::Dimensions)
                .map(|d| d.iter().filter_map(|&x| usize::try_from(x).ok()).collect());
            if let (Some(dims), Some(r)) = (dims.filter(|d| d.len() == a.rank()), results.first()) {
                let descending;
                let out_order: &[usize] = match &r.layout {
                    Some(l) => &l.minor_to_major,
                    None => {
                        descending = Layout::descending(r.rank());
                        &descending.minor_to_major
                    }
                };
                let m2m: DimVec = out_order
                    .iter()
                    .filter_map(|d| dims.iter().position(|x| x == d))
                    .collect();
                let layout = if have.minor_to_major == m2m {
                    have.clone()
                } else {
                    Cow::Owned(target::tiling::layout_for(target, a, &m2m))
                };
                offer(2, layout, Because::Broadcast, &mut best);
            }
        } else if keeps {
            let partner = if op.is_per_leaf_collective() && results.len() == inst.operands().len() {
                results.get(i)
            } else {
                results.first()
            };
            if let Some(r) = partner.filter(|r| r.rank() == a.rank()) {
                let out_layout: Cow<'_, Layout> = match &r.layout {
                    Some(l) => Cow::Borrowed(l),
                    None => Cow::Owned(Layout::descending(r.rank())),
                };
                let layout = if r.element_storage_bits() == a.element_storage_bits()
                    && (*out_layout == *have || target.tiling.is_none())
                {
                    out_layout
                } else if out_layout.minor_to_major == have.minor_to_major {
                    // Different element widths, or on a tiled target other
                    // dimensions, may tile differently; the order is what
                    // must agree.
                    have.clone()
                } else {
                    Cow::Owned(target::tiling::same_layout_for(target, &out_layout, r, a))
                };
                offer(2, layout, Because::Keeps(op), &mut best);
            }
        }
        if let Some((_, layout, because)) = best
            && *layout != *have
        {
            out.push(Want {
                site: Site::Operand {
                    user: id,
                    operand: i,
                },
                value: o,
                layout: layout.into_owned(),
                consumer: format!("operand {i} of %{}", inst.name),
                because: because.sentence(target, comp, id),
            });
        }
    }
}

/// The unmet needs of every instruction of `topo`, in that order.
///
/// Each instruction's wants depend only on it and its operands (the
/// computation is not edited until all are known), so a large computation
/// is split into runs of instructions looked at on all cores, and the runs'
/// wants joined in order: the result is the sequential one.
fn all_wants(comp: &Computation, target: &TargetSpec, topo: &[InstId]) -> Vec<Want> {
    use rayon::prelude::*;
    let Some(grain) = Parallelism::splits(Split::RelayoutWants, topo.len()) else {
        let mut wants = Vec::new();
        for &id in topo {
            operand_wants(comp, target, id, &mut wants);
        }
        return wants;
    };
    let runs: Vec<Vec<Want>> = topo
        .par_chunks(grain)
        .map(|run| {
            let mut wants = Vec::new();
            for &id in run {
                operand_wants(comp, target, id, &mut wants);
            }
            wants
        })
        .collect();
    runs.into_iter().flatten().collect()
}

/// The state of phase 1 on one computation.
struct Inserter {
    computation: String,
    made: FxHashMap<(InstId, Layout), (InstId, usize)>,
    /// Where the new instructions go: after what they read, and the
    /// rebuilt entry result's parts at the end.
    placement: Placement,
    names: FreshNames,
    rewrites: Vec<Rewrite>,
}

impl Inserter {
    /// The instruction holding `value` in `layout`: a new bitcast or copy,
    /// or the one already made for another use.
    fn provide(
        &mut self,
        comp: &mut Computation,
        value: InstId,
        layout: &Layout,
        consumer: &str,
        because: &str,
    ) -> Result<InstId, RelayoutError> {
        if let Some(&(id, r)) = self.made.get(&(value, layout.clone())) {
            self.rewrites[r].users.push(consumer.to_string());
            return Ok(id);
        }
        let source = comp.inst(value);
        let Some(a) = source.shape.as_array() else {
            return Err(RelayoutError::InvalidNeed {
                computation: self.computation.clone(),
                instruction: consumer.to_string(),
                operand: format!("%{}", source.name),
                layout: layout.to_string(),
                message: "the value is not an array".into(),
            });
        };
        let from = a.laid_out();
        let to = from.in_layout(layout.clone());
        if let Err(e) = to.validate() {
            return Err(RelayoutError::InvalidNeed {
                computation: self.computation.clone(),
                instruction: consumer.to_string(),
                operand: format!("%{}", source.name),
                layout: layout.to_string(),
                message: e.to_string(),
            });
        }
        let (bitcast, reason) = match shape::layout_change_is_bitcast(&from, &to) {
            _ if !same_memory_space(&from, &to) => (false, "the memory spaces differ".to_string()),
            Ok(v) => (v.bitcast, v.reason.to_string()),
            Err(e) => (
                false,
                format!("the algebra cannot relate the layouts ({e})"),
            ),
        };
        let (opcode, suffix, kind) = if bitcast {
            (Opcode::Bitcast, "bitcast", RewriteKind::InsertedBitcast)
        } else {
            (Opcode::Copy, "copy", RewriteKind::InsertedCopy)
        };
        let name = self.names.fresh(&format!("{}.{suffix}", source.name));
        let operand_name = source.name.clone();
        let mut inst = Instruction::new(name.clone(), opcode, Shape::Array(to.clone()));
        inst.attrs = inherited_attrs(&source.attrs);
        let id = comp
            .add_unscheduled(inst, &[value])
            .map_err(edit(&self.computation))?;
        self.placement.after.entry(value).or_default().push(id);
        let bytes = if bitcast { 0 } else { storage_bytes(&to) };
        let verb = if bitcast { "bitcast" } else { "copy" };
        self.rewrites.push(Rewrite {
            kind,
            computation: self.computation.clone(),
            instruction: name,
            operand: operand_name.clone(),
            why: format!("{consumer} needs {layout} ({because}), but %{operand_name} is {}; {verb}: {reason}", from.layout_or_default()).into(),
            from: Arc::new(from),
            to: Arc::new(to),
            transpose_dims: None,
            bytes,
            users: vec![consumer.to_string()],
            steps: Vec::new(),
        });
        self.made
            .insert((value, layout.clone()), (id, self.rewrites.len() - 1));
        Ok(id)
    }

    /// Makes `id` (with shape `required`'s logical shape) hold `required`'s
    /// layouts; returns the replacement of `id` when one is needed.
    fn fix_result(
        &mut self,
        comp: &mut Computation,
        id: InstId,
        required: &Shape,
        consumer: &str,
    ) -> Result<Option<InstId>, RelayoutError> {
        let shape = comp.inst(id).shape.clone();
        match (&shape, required) {
            (Shape::Array(a), Shape::Array(r)) => {
                let Some(l) = &r.layout else { return Ok(None) };
                if a.rank() == 0 || same_but_memory_space(&a.layout_or_default(), l) {
                    return Ok(None);
                }
                let because = "the entry computation layout fixes the result";
                self.provide(comp, id, l, consumer, because).map(Some)
            }
            (Shape::Tuple(es), Shape::Tuple(rs)) if es.len() == rs.len() => {
                if !leaf_differs(&shape, required) {
                    return Ok(None);
                }
                let is_tuple = comp.inst(id).opcode == Opcode::Tuple;
                let mut parts = Vec::with_capacity(es.len());
                for (k, r) in rs.iter().enumerate() {
                    let element = if is_tuple {
                        match comp.operands(id).get(k) {
                            Some(&o) => o,
                            None => {
                                return Err(RelayoutError::RootShape {
                                    computation: self.computation.clone(),
                                    expected: required.to_string(),
                                });
                            }
                        }
                    } else {
                        let name = self.names.fresh(&format!("{}.gte.{k}", comp.inst(id).name));
                        let mut gte =
                            Instruction::new(name, Opcode::GetTupleElement, es[k].clone());
                        gte.attrs
                            .set(KnownAttr::Index, hlo::AttrValue::Int(k as i64));
                        let g = comp
                            .add_unscheduled(gte, &[id])
                            .map_err(edit(&self.computation))?;
                        self.placement.at_end.push(g);
                        g
                    };
                    let consumer = format!("{consumer}, element {k}");
                    let new = self.fix_result(comp, element, r, &consumer)?;
                    parts.push(new.unwrap_or(element));
                }
                let shapes: Vec<Shape> =
                    parts.iter().map(|&p| comp.inst(p).shape.clone()).collect();
                if is_tuple && comp.users(id).is_empty() {
                    // The root tuple itself is edited in place.
                    let edits: Vec<(InstId, usize, InstId)> =
                        parts.iter().enumerate().map(|(k, &p)| (id, k, p)).collect();
                    comp.set_operands_at(&edits)
                        .map_err(edit(&self.computation))?;
                    comp.inst_mut(id).shape = Shape::Tuple(shapes);
                    return Ok(None);
                }
                let name = self
                    .names
                    .fresh(&format!("{}.relayout", comp.inst(id).name));
                let tuple = Instruction::new(name, Opcode::Tuple, Shape::Tuple(shapes));
                let t = comp
                    .add_unscheduled(tuple, &parts)
                    .map_err(edit(&self.computation))?;
                self.placement.at_end.push(t);
                Ok(Some(t))
            }
            _ if shape.same_logical_shape(required) => Ok(None),
            _ => Err(RelayoutError::RootShape {
                computation: self.computation.clone(),
                expected: required.to_string(),
            }),
        }
    }
}

/// `s` with every leaf's layout in the default memory space.
fn in_default_memory_space(s: &Shape) -> Shape {
    let mut s = s.clone();
    s.for_each_array_mut(&mut |a| {
        if let Some(l) = &mut a.layout {
            l.memory_space = 0;
        }
    });
    s
}

/// True when some array leaf of `have` lacks the layout `required` gives
/// it, memory space aside.
fn leaf_differs(have: &Shape, required: &Shape) -> bool {
    let h = have.array_leaves();
    let r = required.array_leaves();
    h.len() != r.len()
        || h.iter().zip(&r).any(|(a, b)| {
            a.rank() > 0
                && b.layout
                    .as_ref()
                    .is_some_and(|l| !same_but_memory_space(l, &a.layout_or_default()))
        })
}

/// True when two layouts differ at most in memory space. The root's memory
/// space is the program's own choice (an explicit copy into `S(1)` stays);
/// the entry result's says where the caller keeps the buffer.
fn same_but_memory_space(a: &Layout, b: &Layout) -> bool {
    if a.memory_space == b.memory_space {
        return a == b;
    }
    let mut b = b.clone();
    b.memory_space = a.memory_space;
    *a == b
}

/// Attributes a new instruction takes over from the value it reads.
pub(crate) fn inherited_attrs(source: &Attrs) -> Attrs {
    let mut attrs = Attrs::default();
    for key in [KnownAttr::Sharding, KnownAttr::Metadata] {
        if let Some(v) = source.get(key) {
            attrs.set(key, v.clone());
        }
    }
    attrs
}

/// Phase 1 on one computation.
pub fn fix_uses(
    facts: &ComputationFacts,
    comp: &mut Computation,
    target: &TargetSpec,
) -> Result<Vec<Arc<Rewrite>>, RelayoutError> {
    let topo = order(comp)?;
    let wants = all_wants(comp, target, &topo);
    // As in XLA, a memory space in the entry result (`S(n)`, host memory)
    // says where the caller keeps the buffer; the root itself lives in the
    // default memory space, so only the rest of the layout must match.
    let required_result = facts.result.as_deref().map(in_default_memory_space);
    let root_needs_work = match (&required_result, comp.root()) {
        (Some(r), Some(root)) => {
            leaf_differs(&comp.inst(root).shape, r) || !comp.inst(root).shape.same_logical_shape(r)
        }
        _ => false,
    };
    if wants.is_empty() && !root_needs_work {
        return Ok(Vec::new());
    }
    let mut ins = Inserter {
        computation: comp.name.clone(),
        made: FxHashMap::default(),
        placement: Placement::default(),
        names: FreshNames::of(comp),
        rewrites: Vec::new(),
    };
    // Providing reads no uses, so all sites are redirected in one batch:
    // many may read one value.
    let mut edits = Vec::with_capacity(wants.len());
    for w in &wants {
        let new = ins.provide(comp, w.value, &w.layout, &w.consumer, &w.because)?;
        let Site::Operand { user, operand } = w.site;
        edits.push((user, operand, new));
    }
    comp.set_operands_at(&edits)
        .map_err(edit(&ins.computation))?;
    if let (Some(required), Some(root)) = (&required_result, comp.root())
        && let Some(new) = ins.fix_result(comp, root, required, "the entry result")?
    {
        comp.set_root(new).map_err(edit(&ins.computation))?;
    }
    // One new schedule: each new instruction right after what it reads.
    comp.reschedule(&ins.placement)
        .map_err(edit(&ins.computation))?;
    Ok(ins.rewrites.into_iter().map(Arc::new).collect())
}
