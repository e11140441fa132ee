//! Interprets a target's rules for one instruction: which layouts its
//! operands and result need, and why.

use crate::{DimOrder, Requirement, Rule, TargetSpec};
use hlo::{AttrValue, Computation, InstId, Instruction, KnownAttr, Opcode};
use shape::{ArrayShape, DimVec, Layout, SharedLayout};

use crate::tiling;

/// What a use or a result needs of a layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Need {
    /// Exactly this layout (up to bitcast equivalence).
    Exact(Layout),
    /// Any layout that keeps the batch dimensions most major and each
    /// group of dimensions contiguous and in order (a GEMM-compatible
    /// matrix layout); a copy goes to its `preferred` layout.
    // Boxed: a matrix need is rare (dot operands) and three times the size
    // of a layout; inline, it made every need, and every instruction's
    // needs, twice as large to move.
    Matrix(Box<MatrixNeed>),
    /// Any layout whose most minor dimensions are these, in this order
    /// (minor first), whatever the order of the others; a copy goes to its
    /// `preferred` layout.
    Minor(Box<MinorNeed>),
}

/// A need on the most minor dimensions only (see [`Need::Minor`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MinorNeed {
    /// The dimensions that must be most minor, most minor first.
    pub minor: DimVec,
    /// The layout a copy produces.
    pub preferred: Layout,
}

/// A GEMM-compatible matrix layout need (see [`Need::Matrix`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MatrixNeed {
    /// Dimensions that must be most major, in this order.
    pub batch: DimVec,
    /// The two groups of dimensions, each contiguous and in order.
    pub groups: [DimVec; 2],
    /// The layout a copy produces.
    pub preferred: Layout,
}

impl Need {
    /// The layout a copy produces to meet this need.
    pub fn preferred(&self) -> &Layout {
        match self {
            Need::Exact(l) => l,
            Need::Matrix(m) => &m.preferred,
            Need::Minor(m) => &m.preferred,
        }
    }

    /// True for a need that many layouts meet (a matrix or minor need),
    /// which the value's own layout serves when it qualifies.
    pub fn accepts_several(&self) -> bool {
        !matches!(self, Need::Exact(_))
    }

    /// True when `layout` meets the need without a copy. Exact needs are
    /// compared by the caller with the bitcast test; this checks the order
    /// only.
    pub fn accepts_order(&self, layout: &Layout) -> bool {
        match self {
            Need::Exact(l) => l.minor_to_major == layout.minor_to_major,
            Need::Matrix(m) => matrix_accepts(layout, &m.batch, &m.groups),
            Need::Minor(m) => layout.minor_to_major.starts_with(&m.minor),
        }
    }
}

/// Checks the GEMM layout rule: batch dimensions most major (in order), then
/// the two groups one after the other in either order, each contiguous and
/// in ascending dimension order.
fn matrix_accepts(layout: &Layout, batch: &[usize], groups: &[DimVec; 2]) -> bool {
    let major_to_minor = layout.major_to_minor();
    if !major_to_minor.starts_with(batch) {
        return false;
    }
    let rest = &major_to_minor[batch.len()..];
    let fits = |first: &[usize], second: &[usize]| {
        rest.len() == first.len() + second.len()
            && rest[..first.len()] == *first
            && rest[first.len()..] == *second
    };
    fits(&groups[0], &groups[1]) || fits(&groups[1], &groups[0])
}

/// Why a need exists, for copy explanations. Names are looked up only when
/// a copy is explained, so that the many needs of a large computation stay
/// small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NeedSource {
    /// Rule number `.0` of the target.
    TargetRule(u16),
    /// The target's requirement on every otherwise unconstrained operand.
    TargetDefault,
    /// A custom call's `operand_layout_constraints` or result layout.
    CustomCall,
    /// A `LayoutConstraint` custom call, or a bitcast in the input.
    LayoutConstraint,
    /// An outfeed's `outfeed_shape`: the layout the host receives.
    Outfeed,
}

/// The needs of one instruction under a target.
///
/// A layout assignment holds one for every instruction of a computation at
/// once, so the needs most instructions have (on operands) are inline and
/// the rest boxed: inline, a result need and the custom calls' lists made
/// every instruction's needs six times as large.
#[derive(Clone, Debug, Default)]
pub struct InstNeeds {
    /// Needs on array operands, as (operand index, need, source), at most
    /// one per operand, in operand order. Sparse rather than one slot per
    /// operand: a need holds a whole layout, and filling a slot for every
    /// operand cost more than the needs themselves.
    operands: Vec<(usize, Need, NeedSource)>,
    /// A need on every array leaf of the result.
    result: Option<Box<(Need, NeedSource)>>,
    /// The needs of custom calls and outfeeds (see [`RareNeeds`]).
    rare: Option<Box<RareNeeds>>,
}

/// The needs only custom calls and outfeeds have.
#[derive(Clone, Debug, Default)]
struct RareNeeds {
    /// Per result leaf, for custom calls whose shape gives each leaf's layout.
    result_leaves: Vec<Option<SharedLayout>>,
    /// Exact needs on array leaves of tuple operands, as (operand, leaf,
    /// layout): a constrained custom call's tuple operand, a tuple outfeed.
    tuple_operand_leaves: Vec<(usize, usize, Layout, NeedSource)>,
}

impl InstNeeds {
    /// The need on operand `i`, if any.
    pub fn operand(&self, i: usize) -> Option<(&Need, NeedSource)> {
        self.operands
            .iter()
            .find(|(k, _, _)| *k == i)
            .map(|(_, need, source)| (need, *source))
    }

    /// The needs on operands, as (operand index, need, source), in operand
    /// order.
    pub fn operand_needs(&self) -> impl Iterator<Item = (usize, &Need, NeedSource)> {
        self.operands
            .iter()
            .map(|(i, need, source)| (*i, need, *source))
    }

    /// The need on every array leaf of the result, if any.
    pub fn result(&self) -> Option<(&Need, NeedSource)> {
        self.result.as_deref().map(|(need, source)| (need, *source))
    }

    /// Per result leaf, the layout a custom call's shape gives it (empty
    /// for any other instruction).
    pub fn result_leaves(&self) -> &[Option<SharedLayout>] {
        self.rare.as_deref().map_or(&[], |r| &r.result_leaves)
    }

    /// Exact needs on array leaves of tuple operands, as (operand, leaf,
    /// layout, source): a constrained custom call's tuple operand, a tuple
    /// outfeed.
    pub fn tuple_operand_leaves(&self) -> &[(usize, usize, Layout, NeedSource)] {
        self.rare
            .as_deref()
            .map_or(&[], |r| &r.tuple_operand_leaves)
    }

    fn rare_mut(&mut self) -> &mut RareNeeds {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Sets the need on operand `i`, replacing any earlier one.
    fn set_operand(&mut self, i: usize, need: Need, source: NeedSource) {
        match self.operands.binary_search_by_key(&i, |(k, _, _)| *k) {
            Ok(at) => self.operands[at] = (i, need, source),
            Err(at) => self.operands.insert(at, (i, need, source)),
        }
    }

    /// Records exact needs for the leaves of tuple operand `operand` of
    /// shape `given` that carry a layout.
    fn tuple_operand(
        &mut self,
        target: &TargetSpec,
        operand: usize,
        given: &shape::Shape,
        source: NeedSource,
    ) {
        let mut leaf = 0;
        given.for_each_array(&mut |_, a| {
            if let Some(l) = &a.layout {
                self.rare_mut().tuple_operand_leaves.push((
                    operand,
                    leaf,
                    tiling::device_layout(target, a, l),
                    source,
                ));
            }
            leaf += 1;
        });
    }
}

/// Finds the first rule of `target` that applies to `id`, with its index.
pub fn matching_rule<'t>(
    target: &'t TargetSpec,
    comp: &Computation,
    id: InstId,
) -> Option<(usize, &'t Rule)> {
    let inst = comp.inst(id);
    target
        .rules
        .iter()
        .enumerate()
        .find(|(_, rule)| rule_applies(rule, comp, inst, true))
}

/// Whether `rule` applies to `inst`. With `shared_constants`, a
/// `constant_operand` rule also requires every user of that constant to
/// match the rule and read it at the same operand: a constant is laid out
/// once, at compile time, so a layout only some of its users like would
/// cost a copy (XLA CPU asks the same of all users).
fn rule_applies(
    rule: &Rule,
    comp: &Computation,
    inst: &Instruction,
    shared_constants: bool,
) -> bool {
    if !rule.ops.contains(&inst.opcode) {
        return false;
    }
    if inst.opcode == Opcode::CustomCall && !rule.custom_call_targets.is_empty() {
        let Some(name) = inst.attrs.string(KnownAttr::CustomCallTarget) else {
            return false;
        };
        if !rule.custom_call_targets.iter().any(|t| t == name) {
            return false;
        }
    }
    let when = &rule.when;
    let result = first_array(&inst.shape);
    if let Some(want) = when.batch_dims {
        let has = inst
            .attrs
            .ints(KnownAttr::LhsBatchDims)
            .is_some_and(|d| !d.is_empty());
        if has != want {
            return false;
        }
    }
    if let Some(want) = when.gemv {
        let lhs_rank = inst
            .operands()
            .first()
            .and_then(|&o| comp.inst(o).shape.as_array())
            .map(ArrayShape::rank);
        let is_gemv = inst.opcode == Opcode::Dot
            && result.is_some_and(|r| r.rank() <= 1)
            && lhs_rank == Some(1);
        if is_gemv != want {
            return false;
        }
    }
    if let Some(n) = when.constant_operand {
        let Some(&o) = inst
            .operands()
            .get(n)
            .filter(|&&o| comp.inst(o).opcode == Opcode::Constant)
        else {
            return false;
        };
        if shared_constants
            && !comp.users(o).iter().all(|&u| {
                let user = comp.inst(u);
                user.operands()
                    .iter()
                    .enumerate()
                    .all(|(i, &x)| x != o || i == n)
                    && rule_applies(rule, comp, user, false)
            })
        {
            return false;
        }
    }
    if !when.operand_types.is_empty() {
        let all = inst.operands().iter().all(|&o| {
            comp.inst(o)
                .shape
                .as_array()
                .is_none_or(|a| when.operand_types.contains(&a.element_type))
        });
        if !all || inst.operands().is_empty() {
            return false;
        }
    }
    if !when.result_types.is_empty()
        && !result.is_some_and(|r| when.result_types.contains(&r.element_type))
    {
        return false;
    }
    let rank = result.map_or(0, ArrayShape::rank);
    if when.min_rank.is_some_and(|m| rank < m) || when.max_rank.is_some_and(|m| rank > m) {
        return false;
    }
    if let Some(labels) = &when.dim_labels {
        match inst.attrs.get(KnownAttr::DimLabels) {
            Some(AttrValue::DimLabels(l)) if &*l.text == labels.as_str() => {}
            _ => return false,
        }
    }
    true
}

/// The first array leaf of a shape.
pub fn first_array(shape: &shape::Shape) -> Option<&ArrayShape> {
    match shape {
        shape::Shape::Array(a) => Some(a),
        shape::Shape::Tuple(e) => e.iter().find_map(first_array),
        _ => None,
    }
}

/// Everything `target` and the instruction itself require of `id`'s
/// operands and result. Forwarding instructions (tuple, get-tuple-element)
/// and calls are not covered here: the pass handles them structurally.
pub fn inst_needs(target: &TargetSpec, comp: &Computation, id: InstId) -> InstNeeds {
    let inst = comp.inst(id);
    let operand_count = inst.operands().len();
    // Sized up front: growing a vector of needs (each holds a layout) one
    // element at a time showed up in profiles of large modules.
    let mut needs = InstNeeds {
        operands: Vec::with_capacity(operand_count),
        ..InstNeeds::default()
    };

    // A custom call that lists operand layouts is layout-constrained: its
    // operands and its own shape are exact requirements.
    if inst.opcode == Opcode::CustomCall {
        let target_name = inst.attrs.string(KnownAttr::CustomCallTarget).unwrap_or("");
        if target_name == "LayoutConstraint" {
            if let Some((a, layout)) = inst
                .shape
                .as_array()
                .and_then(|a| Some((a, a.layout.as_ref()?)))
            {
                let layout = tiling::device_layout(target, a, layout);
                if operand_count > 0 {
                    needs.set_operand(0, Need::Exact(layout.clone()), NeedSource::LayoutConstraint);
                }
                needs.result = Some(Box::new((
                    Need::Exact(layout),
                    NeedSource::LayoutConstraint,
                )));
            }
            return needs;
        }
        if let Some(AttrValue::Shapes(shapes)) = inst.attrs.get(KnownAttr::OperandLayoutConstraints)
        {
            for (i, s) in shapes.iter().enumerate().take(operand_count) {
                if let Some((a, layout)) = s.as_array().and_then(|a| Some((a, a.layout.as_ref()?)))
                {
                    needs.set_operand(
                        i,
                        Need::Exact(tiling::device_layout(target, a, layout)),
                        NeedSource::CustomCall,
                    );
                } else if s.is_tuple() {
                    needs.tuple_operand(target, i, s, NeedSource::CustomCall);
                }
            }
            let mut leaves = Vec::new();
            inst.shape
                .for_each_array(&mut |_, a| leaves.push(a.layout.clone()));
            needs.rare_mut().result_leaves = leaves;
            return needs;
        }
    }

    // An outfeed sends its operand to the host in `outfeed_shape`'s layout
    // (XLA makes this mandatory). Tuple operands get per-leaf needs from
    // the problem builder, through `outfeed_layouts`.
    if inst.opcode == Opcode::Outfeed
        && let Some(given) = outfeed_shape(inst).filter(|s| {
            let mut any = false;
            s.for_each_array(&mut |_, a| any |= a.layout.is_some());
            any
        })
    {
        match given.as_array() {
            Some(a) => {
                if let (Some(l), Some(true)) = (
                    &a.layout,
                    inst.operands()
                        .first()
                        .map(|&o| comp.inst(o).shape.is_array()),
                ) {
                    needs.set_operand(
                        0,
                        Need::Exact(tiling::device_layout(target, a, l)),
                        NeedSource::Outfeed,
                    );
                }
            }
            None => needs.tuple_operand(target, 0, &given, NeedSource::Outfeed),
        }
        return needs;
    }

    let rule = matching_rule(target, comp, id);
    if let Some((index, rule)) = rule {
        let source = NeedSource::TargetRule(index as u16);
        for (i, &op) in inst.operands().iter().enumerate() {
            let (Some(req), Some(a)) = (rule.operands.get(i), comp.inst(op).shape.as_array())
            else {
                continue;
            };
            if let Some(need) = realize(target, req, a, inst, comp, Role::Operand(i)) {
                needs.set_operand(i, need, source);
            }
        }
        if let (Some(req), Some(a)) = (&rule.result, first_array(&inst.shape))
            && let Some(need) = realize(target, req, a, inst, comp, Role::Result)
        {
            needs.result = Some(Box::new((need, source)));
        }
    }
    // The target's default covers the operands no rule constrained, except
    // those an instruction forwards into its result or passes to a callee.
    // A copy exists to change layout, so its operand is never constrained.
    if let Some(req) = &target.operand_default
        && !forwards_operands(inst.opcode)
        && inst.opcode != Opcode::Copy
    {
        for (i, &op) in inst.operands().iter().enumerate() {
            if needs.operand(i).is_some() {
                continue;
            }
            let Some(a) = comp.inst(op).shape.as_array() else {
                continue;
            };
            if let Some(need) = realize(target, req, a, inst, comp, Role::Operand(i)) {
                needs.set_operand(i, need, NeedSource::TargetDefault);
            }
        }
    }
    needs
}

/// An outfeed's `outfeed_shape`, when present and well formed.
pub fn outfeed_shape(inst: &Instruction) -> Option<shape::Shape> {
    let Some(AttrValue::Raw(text)) = inst.attrs.get(KnownAttr::OutfeedShape) else {
        return None;
    };
    shape::parse_shape(text).ok()
}

/// Instructions whose operands flow into their result or a callee without
/// being read in a layout of their own; target defaults skip them, as XLA
/// skips "forwarded" operands.
pub fn forwards_operands(op: Opcode) -> bool {
    op.forwards_buffers() || op.passes_operands_to_callee() || op == Opcode::Bitcast
}

/// Which side of an instruction a requirement is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Operand number `.0`.
    Operand(usize),
    /// The result.
    Result,
}

/// The target's default layout of a shape: its default order with the
/// target's tiling.
pub fn default_layout(target: &TargetSpec, a: &ArrayShape) -> Layout {
    let m2m: DimVec = match target.default_order {
        DimOrder::Descending => (0..a.rank()).rev().collect(),
        DimOrder::Ascending => (0..a.rank()).collect(),
    };
    tiling::layout_for(target, a, &m2m)
}

/// Turns a requirement into a concrete need for an array of shape `a`.
pub fn realize(
    target: &TargetSpec,
    req: &Requirement,
    a: &ArrayShape,
    inst: &Instruction,
    comp: &Computation,
    role: Role,
) -> Option<Need> {
    let rank = a.rank();
    let exact = |m2m: DimVec| Some(Need::Exact(tiling::layout_for(target, a, &m2m)));
    match req {
        Requirement::RowMajor => exact((0..rank).rev().collect()),
        Requirement::ColMajor => exact((0..rank).collect()),
        Requirement::Default => Some(Need::Exact(default_layout(target, a))),
        Requirement::Fixed(m2m) => {
            if m2m.len() == rank {
                exact(m2m.clone())
            } else {
                None
            }
        }
        Requirement::Fortran => {
            let mut m2m: DimVec = (0..rank).rev().collect();
            if rank >= 2 {
                m2m.swap(0, 1);
            }
            exact(m2m)
        }
        Requirement::DimMajor(attr) => {
            let dim = KnownAttr::from_name(attr)
                .and_then(|k| match inst.attrs.get(k)? {
                    AttrValue::Ints(v) => v.first().copied(),
                    AttrValue::Int(v) => Some(*v),
                    _ => None,
                })
                .and_then(|d| usize::try_from(d).ok())
                .filter(|&d| d < rank)?;
            let mut m2m: DimVec = (0..rank).rev().filter(|&d| d != dim).collect();
            m2m.push(dim);
            exact(m2m)
        }
        Requirement::ContractingMinor => {
            let groups = dot_groups(inst, comp, role, rank)?;
            // Major to minor: batch, non-contracting, contracting.
            let major_to_minor: DimVec = groups
                .batch
                .iter()
                .chain(&groups.free)
                .chain(&groups.contracting)
                .copied()
                .collect();
            exact(major_to_minor.into_iter().rev().collect())
        }
        Requirement::MatrixLayout => {
            Some(matrix_need(target, a, dot_groups(inst, comp, role, rank)?))
        }
        Requirement::FeatureMostMinor => feature_most_minor(target, a, inst, role),
        Requirement::FeatureMinor | Requirement::SpatialMinor => {
            let order = convolution_order(inst, role, *req == Requirement::FeatureMinor)?;
            (order.len() == rank)
                .then(|| order.into_iter().rev().collect())
                .and_then(exact)
        }
    }
}

/// A dot operand's or result's need as a matrix (`MatrixLayout`): its
/// dimension groups in either order, preferring the target's default
/// layout when it qualifies, else the canonical (batch, first, second)
/// order; on a tiled target, the other order of the two groups when it
/// stores less padding.
fn matrix_need(target: &TargetSpec, a: &ArrayShape, groups: DotGroups) -> Need {
    let preferred = default_layout(target, a);
    let batch = groups.batch.clone();
    let [first, second] = groups.ordered_groups();
    let need = Need::Matrix(Box::new(MatrixNeed {
        batch,
        groups: [first.clone(), second.clone()],
        preferred: preferred.clone(),
    }));
    let in_order = |major: &DimVec, minor: &DimVec| {
        let major_to_minor: DimVec = groups
            .batch
            .iter()
            .chain(major)
            .chain(minor)
            .copied()
            .collect();
        tiling::layout_for(
            target,
            a,
            &major_to_minor.into_iter().rev().collect::<DimVec>(),
        )
    };
    let mut chosen = if need.accepts_order(&preferred) {
        preferred
    } else {
        in_order(&first, &second)
    };
    if target.tiling.is_some() {
        let swapped = in_order(&second, &first);
        if shape::storage_bytes_in(a, &swapped) < shape::storage_bytes_in(a, &chosen) {
            chosen = swapped;
        }
    }
    Need::Matrix(Box::new(MatrixNeed {
        batch: groups.batch,
        groups: [first, second],
        preferred: chosen,
    }))
}

/// A convolution operand's or result's need to hold its feature
/// dimension most minor (`FeatureMostMinor`), in the order that stores it
/// with the least padding.
fn feature_most_minor(
    target: &TargetSpec,
    a: &ArrayShape,
    inst: &Instruction,
    role: Role,
) -> Option<Need> {
    let Some(AttrValue::DimLabels(labels)) = inst.attrs.get(KnownAttr::DimLabels) else {
        return None;
    };
    let feature = match role {
        Role::Operand(0) => labels.input_feature,
        Role::Operand(1) => labels.kernel_input_feature,
        Role::Result => labels.output_feature,
        Role::Operand(_) => return None,
    };
    let feature = usize::try_from(feature).ok().filter(|&f| f < a.rank())?;
    let preferred = tiling::layout_for(
        target,
        a,
        &tiling::least_padding_order(target, a, tiling::TileUse::Compute, Some(feature)),
    );
    Some(Need::Minor(Box::new(MinorNeed {
        minor: [feature].into_iter().collect(),
        preferred,
    })))
}

/// A convolution operand's or result's dimensions, major to minor: batch
/// (or output feature for the kernel), then the feature and spatial
/// dimensions, feature last when `feature_minor`, first otherwise.
fn convolution_order(inst: &Instruction, role: Role, feature_minor: bool) -> Option<DimVec> {
    let Some(AttrValue::DimLabels(labels)) = inst.attrs.get(KnownAttr::DimLabels) else {
        return None;
    };
    let to_usize = |v: i64| usize::try_from(v).ok();
    let spatial = |dims: &[i64]| {
        dims.iter()
            .map(|&d| to_usize(d))
            .collect::<Option<Vec<_>>>()
    };
    let (major, feature, spatial): (usize, usize, Vec<usize>) = match role {
        Role::Operand(0) => (
            to_usize(labels.input_batch)?,
            to_usize(labels.input_feature)?,
            spatial(&labels.input_spatial)?,
        ),
        Role::Operand(1) => (
            to_usize(labels.kernel_output_feature)?,
            to_usize(labels.kernel_input_feature)?,
            spatial(&labels.kernel_spatial)?,
        ),
        Role::Result => (
            to_usize(labels.output_batch)?,
            to_usize(labels.output_feature)?,
            spatial(&labels.output_spatial)?,
        ),
        Role::Operand(_) => return None,
    };
    let mut major_to_minor: DimVec = DimVec::new();
    major_to_minor.push(major);
    if feature_minor {
        major_to_minor.extend(spatial);
        major_to_minor.push(feature);
    } else {
        major_to_minor.push(feature);
        major_to_minor.extend(spatial);
    }
    Some(major_to_minor)
}

/// The dimension groups of a dot operand or result.
struct DotGroups {
    batch: DimVec,
    /// Operand: non-contracting dims; result: lhs non-contracting dims.
    free: DimVec,
    /// Operand: contracting dims; result: rhs non-contracting dims.
    contracting: DimVec,
    role: Role,
}

impl DotGroups {
    /// The two matrix groups in the order a plain row-major GEMM uses:
    /// for the lhs and the result (rows, cols) = (free, contracting)/(lhs, rhs);
    /// for the rhs (contracting, free).
    fn ordered_groups(&self) -> [DimVec; 2] {
        match self.role {
            Role::Operand(1) => [self.contracting.clone(), self.free.clone()],
            _ => [self.free.clone(), self.contracting.clone()],
        }
    }
}

fn dot_groups(
    inst: &Instruction,
    comp: &Computation,
    role: Role,
    rank: usize,
) -> Option<DotGroups> {
    if inst.opcode != Opcode::Dot {
        return None;
    }
    let dims = |k: KnownAttr| -> DimVec {
        inst.attrs
            .ints(k)
            .unwrap_or(&[])
            .iter()
            .filter_map(|&d| usize::try_from(d).ok())
            .collect()
    };
    let complement = |rank: usize, a: &DimVec, b: &DimVec| -> DimVec {
        (0..rank)
            .filter(|d| !a.contains(d) && !b.contains(d))
            .collect()
    };
    match role {
        Role::Operand(i @ (0 | 1)) => {
            let (batch, contracting) = if i == 0 {
                (
                    dims(KnownAttr::LhsBatchDims),
                    dims(KnownAttr::LhsContractingDims),
                )
            } else {
                (
                    dims(KnownAttr::RhsBatchDims),
                    dims(KnownAttr::RhsContractingDims),
                )
            };
            let free = complement(rank, &batch, &contracting);
            Some(DotGroups {
                batch,
                free,
                contracting,
                role,
            })
        }
        Role::Result => {
            // The result is (batch..., lhs free..., rhs free...).
            let lhs_rank = comp
                .inst(*inst.operands().first()?)
                .shape
                .as_array()?
                .rank();
            let nb = dims(KnownAttr::LhsBatchDims).len();
            // A malformed dot must not underflow: it gets no need, and the
            // verifier reports it.
            let lhs_free = lhs_rank
                .checked_sub(nb)?
                .checked_sub(dims(KnownAttr::LhsContractingDims).len())?;
            if nb + lhs_free > rank {
                return None;
            }
            let batch: DimVec = (0..nb).collect();
            let free: DimVec = (nb..nb + lhs_free).collect();
            let contracting: DimVec = (nb + lhs_free..rank).collect();
            Some(DotGroups {
                batch,
                free,
                contracting,
                role,
            })
        }
        Role::Operand(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(m2m: &[usize]) -> Layout {
        Layout::new(m2m)
    }

    #[test]
    fn matrix_layout_rule() {
        let batch: DimVec = [0].into_iter().collect();
        let groups: [DimVec; 2] = [[1].into_iter().collect(), [2].into_iter().collect()];
        // f32[5,2,3]: {1,2,0} keeps batch 0 most major: valid (XLA row 112).
        assert!(matrix_accepts(&layout(&[1, 2, 0]), &batch, &groups));
        assert!(matrix_accepts(&layout(&[2, 1, 0]), &batch, &groups));
        // {0,1,2}: batch most minor: invalid (XLA row 113).
        assert!(!matrix_accepts(&layout(&[0, 1, 2]), &batch, &groups));
    }
}
