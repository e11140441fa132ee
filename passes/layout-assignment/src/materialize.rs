//! From a solution to an edited computation: layouts on every array leaf,
//! and one shared copy per (value, layout) that a use needs.

use std::sync::Arc;

use hlo::{
    AttrValue, Attrs, Computation, CycleError, EditError, FreshNames, InstId, Instruction,
    KnownAttr, Opcode, Placement,
};
use rustc_hash::FxHashMap;
use shape::{Layout, Shape, SharedLayout};
use smallvec::SmallVec;

use crate::context::{BoundaryReason, Signature};
use crate::ids::{LayoutId, LayoutKey, RelationId, TiSlice, ValueId};
use crate::policy::NeedSource;
use crate::problem::{Problem, RelationKind, RelationSource, Site, with_layout};
use crate::report::{ComputationStats, CopyCause, FilledLayout};
use crate::solve::Solution;

/// A copy to insert.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlannedCopy {
    /// The instruction defining the copied value.
    pub def: InstId,
    /// The value's array-leaf index in `def`'s shape.
    pub leaf: u32,
    /// The value's own layout, shared with the problem's table.
    pub from: SharedLayout,
    /// The layout the copy produces.
    pub to: SharedLayout,
    /// Bytes written.
    pub bytes: u64,
    /// Where the copy is read, in order.
    pub sites: Vec<Site>,
    /// The category of the constraint behind it.
    pub cause: CopyCause,
    /// A sentence naming that constraint, shared with the copy's report
    /// (`CopyRecord::why`): some 300 bytes, held twice for every copy.
    pub why: Arc<str>,
}

/// A value kept in an order that stores more padding than another would
/// (tiled targets), with the cost model's reason.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlannedOrientation {
    /// The instruction defining the value.
    pub def: InstId,
    /// The value's array-leaf index in `def`'s shape.
    pub leaf: u32,
    /// Its layout.
    pub layout: Layout,
    /// The layout that would store it with the least padding.
    pub least_padding: Layout,
    /// Bytes of padding its layout stores beyond that one's.
    pub extra_padding: u64,
    /// The values that share its layout and would move with it.
    pub group: usize,
    /// What moving would cost instead.
    pub why: String,
}

/// The result of assigning one computation: plain data, comparable, so
/// that an incremental database can tell when it did not change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComputationAssignment {
    /// The distinct layouts `leaf_layouts` refers to.
    pub layouts: Vec<SharedLayout>,
    /// For each defining instruction, an index into `layouts` per array leaf.
    pub leaf_layouts: Vec<(InstId, SmallVec<[u32; 1]>)>,
    /// Copies to insert.
    pub copies: Vec<PlannedCopy>,
    /// Transposes and reshapes that move data, with their bytes.
    pub movements: Vec<(InstId, u64)>,
    /// Ops that re-tile (tiled targets): the instruction, the bytes whose
    /// elements cross tile boundaries, and why.
    pub retilings: Vec<(InstId, u64, String)>,
    /// Values in an order that stores more padding than another would, and
    /// why (tiled targets).
    pub orientations: Vec<PlannedOrientation>,
    /// The computation's parameter and result layouts afterwards.
    pub signature: Signature,
    /// AUTO entry layouts chosen.
    pub filled: Vec<FilledLayout>,
    /// Effort and size.
    pub stats: ComputationStats,
    /// Per callee whose boundary this computation decides and chose to
    /// differ from what the callee chose alone: the signature it chose
    /// (see `calls.rs`). Until the choice is made, every such call's.
    pub callee_boundaries: Vec<(hlo::CompId, Signature)>,
}

impl ComputationAssignment {
    /// Bytes and copies this computation's assignment moves.
    pub fn moved(&self) -> crate::calls::Moved {
        let bytes = self.copies.iter().map(|c| c.bytes).sum::<u64>()
            + self.movements.iter().map(|m| m.1).sum::<u64>()
            + self.retilings.iter().map(|r| r.1).sum::<u64>();
        crate::calls::Moved {
            bytes,
            copies: self.copies.len() as u64,
        }
    }

    /// The boundary this computation chose for `callee`, if it chose one.
    pub fn boundary_for(&self, callee: hlo::CompId) -> Option<&Signature> {
        self.callee_boundaries
            .iter()
            .find(|(c, _)| *c == callee)
            .map(|(_, b)| b)
    }
}

/// Turns a solution into an assignment.
pub fn plan(
    p: &Problem<'_>,
    solution: &Solution,
    target: &target::TargetSpec,
    comp_names: &dyn Fn(hlo::CompId) -> String,
) -> ComputationAssignment {
    let labels = &solution.labels;
    let (layouts, leaf_layouts) = distinct_layouts(p, labels);
    let ex = Explainer {
        p,
        target,
        comp_names,
    };
    let (copies, copy_cost) = ex.planned_copies(solution);
    let (movements, model_movement_bytes) = movements(p, labels, &copies);
    let retilings = retilings(p, labels, target);
    let orientations = solution
        .orientations
        .iter()
        .map(|o| ex.orientation(o, labels))
        .collect();
    let signature = signature(p, labels, &copies);
    let callee_boundaries = callee_boundaries(p, labels);
    let filled = filled_layouts(p, &signature);

    // The cost in the cost model's units, from what is materialised (with
    // movements read as the model reads them, see `movements`).
    let weights = &target.cost;
    let padding: f64 = p
        .values
        .iter()
        .zip(labels)
        .map(|(v, &l)| v.padding_cost(l, weights))
        .sum();
    let moved_bytes: u64 = model_movement_bytes + retilings.iter().map(|r| r.1).sum::<u64>();
    let cost = copy_cost + moved_bytes as f64 * weights.transpose_byte + padding;

    ComputationAssignment {
        layouts,
        leaf_layouts,
        copies,
        movements,
        retilings,
        orientations,
        signature,
        filled,
        stats: ComputationStats {
            name: p.comp.name.clone(),
            values: p.values.len(),
            relations: p.relations.len(),
            sweeps: solution.sweeps,
            moves: solution.moves,
            padding_saved: solution.padding_saved,
            cost: cost.round() as u64,
            lower_bound: None,
            proven_optimal: false,
        },
        callee_boundaries,
    }
}

/// The layout value `v` is labelled with.
fn layout_of(p: &Problem<'_>, labels: &TiSlice<ValueId, LayoutId>, v: ValueId) -> Layout {
    p.table.get(p.values[v].key(labels[v])).clone()
}

/// The layout value `v` is labelled with, shared with the problem's table.
fn shared_layout_of(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
    v: ValueId,
) -> SharedLayout {
    p.table.shared(p.values[v].key(labels[v]))
}

/// Each defining instruction's leaves, as indices into a list of layouts.
type LeafLayouts = Vec<(InstId, SmallVec<[u32; 1]>)>;

/// The distinct layouts the labels use, and each defining instruction's
/// leaves as indices into them, by instruction.
fn distinct_layouts(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
) -> (Vec<SharedLayout>, LeafLayouts) {
    // Values are created per instruction, leaves in order, so consecutive
    // values of one definition form its leaf list.
    let mut layouts: Vec<SharedLayout> = Vec::new();
    let mut local: FxHashMap<LayoutKey, u32> = FxHashMap::default();
    let mut leaf_layouts: LeafLayouts = Vec::new();
    for (i, v) in p.values.iter_enumerated() {
        let key = v.key(labels[i]);
        let index = *local.entry(key).or_insert_with(|| {
            layouts.push(p.table.shared(key));
            (layouts.len() - 1) as u32
        });
        match leaf_layouts.last_mut() {
            Some((def, leaves)) if *def == v.def => leaves.push(index),
            _ => leaf_layouts.push((v.def, smallvec::smallvec![index])),
        }
    }
    leaf_layouts.sort_unstable_by_key(|(id, _)| *id);
    // An incremental session keeps every computation's assignment: no
    // spare room from growing (a computation of a few instructions used
    // one or two layouts of room for four).
    layouts.shrink_to_fit();
    leaf_layouts.shrink_to_fit();
    (layouts, leaf_layouts)
}

/// What explaining a copy or a kept orientation reads besides the
/// solution: the problem, the target and the computations' names.
struct Explainer<'a, 'p> {
    p: &'a Problem<'p>,
    target: &'a target::TargetSpec,
    comp_names: &'a dyn Fn(hlo::CompId) -> String,
}

impl Explainer<'_, '_> {
    /// One copy per (value, needed layout), shared by every site needing it,
    /// and their cost in the cost model's units (`Value::copy_cost`).
    fn planned_copies(&self, solution: &Solution) -> (Vec<PlannedCopy>, f64) {
        let (p, target) = (self.p, self.target);
        let labels = &solution.labels;
        let mut copies: Vec<PlannedCopy> = Vec::new();
        let mut copy_cost = 0.0;
        let mut index: FxHashMap<(ValueId, LayoutId), usize> = FxHashMap::default();
        for (r, rel) in p.relations.iter_enumerated() {
            let Some(needed) = solution.needs[r] else {
                continue;
            };
            let v = rel.v;
            let key = (v, needed);
            let value = &p.values[v];
            let slot = *index.entry(key).or_insert_with(|| {
                let (cause, why) = self.explain(r, labels);
                copy_cost += value.copy_cost(needed, &target.cost);
                copies.push(PlannedCopy {
                    def: value.def,
                    leaf: value.leaf,
                    from: p.table.shared(value.key(labels[v])),
                    to: p.table.shared(value.key(needed)),
                    bytes: value.bytes[needed],
                    sites: Vec::new(),
                    cause,
                    why: why.into(),
                });
                copies.len() - 1
            });
            copies[slot].sites.push(rel.site);
        }
        (copies, copy_cost)
    }

    /// The report of a group kept in an order that stores more padding than
    /// another: what moving it would have saved and cost, and the first
    /// constraint it would have broken.
    fn orientation(
        &self,
        o: &crate::solve::Orientation,
        labels: &TiSlice<ValueId, LayoutId>,
    ) -> PlannedOrientation {
        let p = self.p;
        let value = &p.values[o.value];
        let own = labels[o.value];
        let layout = p.table.get(value.key(own)).clone();
        let least_padding = p.table.get(value.key(o.least)).clone();
        let name = &p.comp.inst(value.def).name;
        let group = match o.members {
            0 | 1 => format!("%{name}"),
            2 => format!("%{name} and the value sharing its layout"),
            n => format!("%{name} and the {} values sharing its layout", n - 1),
        };
        let saved = o.padding_saved.max(0.0) as u64;
        let mut why = if o.cost_added >= crate::solve::INFEASIBLE / 2.0 {
            format!(
                "{group} cannot move to {least_padding}: a broadcast whose operand layout is fixed reads it in this order"
            )
        } else {
            format!(
                "moving {group} to {least_padding} would save {saved} bytes of padding but cost {} bytes of copies (their buffers' padding included), data movement and re-tiling",
                o.cost_added.max(0.0) as u64
            )
        };
        if let Some(&r) = o.copies.first() {
            let (_, because) = self.constraint(r);
            why.push_str(&format!(
                "; {} needs this layout: {because}",
                reader_of(p, r)
            ));
            if o.copies.len() > 1 {
                why.push_str(&format!(
                    " (and {} more reads would need copies)",
                    o.copies.len() - 1
                ));
            }
        } else if let Some(&r) = o.movements.first() {
            let rel = &p.relations[r];
            if let Site::Operand { user, .. } = rel.site {
                why.push_str(&format!(
                    "; %{} would stop being a bitcast",
                    p.comp.inst(user).name
                ));
            }
        }
        PlannedOrientation {
            def: value.def,
            leaf: value.leaf,
            layout,
            least_padding,
            extra_padding: value.bytes[own].saturating_sub(value.bytes[o.least]),
            group: o.members,
            why,
        }
    }

    /// The cause and a sentence for the copy relation `r` forces.
    fn explain(&self, r: RelationId, labels: &TiSlice<ValueId, LayoutId>) -> (CopyCause, String) {
        let (p, target) = (self.p, self.target);
        let comp = p.comp;
        let rel = &p.relations[r];
        let value = &p.values[rel.v];
        let name = &comp.inst(value.def).name;
        let own = labels[rel.v];
        let have = p.table.get(value.key(own));
        let origin = match &value.fixed {
            Some(f) => format!(" (fixed by {})", self.describe_fix(value, *f)),
            None => String::new(),
        };
        let reader = reader_of(p, r);
        // An HBM-resident buffer in a storage tiling, read where the target
        // computes: the relayout is the storage tiling's price.
        if let Some(needed) = solution_need(p, r, labels, target)
            && storage_only(target, value, have)
            && crate::tiling::allows(
                target,
                &value.shape,
                p.table.get(value.key(needed)),
                crate::tiling::TileUse::Compute,
            )
        {
            let to = p.table.get(value.key(needed));
            return (
                CopyCause::ComputeTiling,
                format!(
                    "%{name}{origin} is in {have}, a storage tiling of target {} for buffers resident in HBM, but {reader} computes on it in {to}, a compute tiling",
                    target.name
                ),
            );
        }
        let (cause, because) = self.constraint(r);
        // A free value that stays in a layout storing less padding than the one
        // its reader needs: the cost model chose the copy over the padding.
        let mut note = String::new();
        if value.fixed.is_none()
            && let Some(needed) = solution_need(p, r, labels, target)
        {
            let (mine, theirs) = (value.bytes[own], value.bytes[needed]);
            if mine < theirs {
                note = format!(
                    " (%{name} itself stays in {have}, which stores {} fewer bytes of padding)",
                    theirs - mine
                );
            }
        }
        (
            cause,
            format!(
                "%{name}{origin} is in {have}, but {reader} needs another layout: {because}{note}"
            ),
        )
    }

    /// The category of the constraint behind relation `r`, and a sentence
    /// naming it.
    fn constraint(&self, r: RelationId) -> (CopyCause, String) {
        let (p, target, comp_names) = (self.p, self.target, self.comp_names);
        let comp = p.comp;
        let rel = &p.relations[r];
        let value = &p.values[rel.v];
        let user_target = || match rel.site {
            Site::Operand { user, .. } => comp
                .inst(user)
                .attrs
                .string(KnownAttr::CustomCallTarget)
                .unwrap_or("")
                .to_string(),
            Site::Root { .. } => String::new(),
        };
        let rule = |i: u16| target.rules.get(i as usize);
        let (cause, because) = match rel.source {
            RelationSource::Need(NeedSource::TargetRule(i)) => (
                CopyCause::TargetRequirement,
                match rule(i) {
                    Some(rule) => format!(
                        "target {} rule '{}' requires it: {}",
                        target.name, rule.name, rule.reason
                    ),
                    None => format!("target {} requires it", target.name),
                },
            ),
            RelationSource::Need(NeedSource::TargetDefault) => (
                CopyCause::TargetRequirement,
                format!(
                    "target {} requires this layout for every operand it does not otherwise constrain",
                    target.name
                ),
            ),
            RelationSource::Need(NeedSource::CustomCall) => (
                CopyCause::CustomCall,
                format!(
                    "custom call \"{}\" constrains its operand layouts",
                    user_target()
                ),
            ),
            RelationSource::Need(NeedSource::LayoutConstraint) => {
                let cause = if let Site::Operand { user, .. } = rel.site {
                    if comp.inst(user).opcode == Opcode::Bitcast {
                        CopyCause::ExistingBitcast
                    } else {
                        CopyCause::CustomCall
                    }
                } else {
                    CopyCause::CustomCall
                };
                (
                    cause,
                    "a layout constraint in the input fixes this layout".to_string(),
                )
            }
            RelationSource::Need(NeedSource::Outfeed) => (
                CopyCause::HostTransfer,
                "the outfeed sends it to the host in the layout of its outfeed_shape".to_string(),
            ),
            RelationSource::EntryResult => (
                CopyCause::Entry,
                "the entry computation layout fixes the result".to_string(),
            ),
            RelationSource::Alias { parameter } => (
                CopyCause::Alias,
                format!("input_output_alias ties the result to parameter {parameter}"),
            ),
            RelationSource::CalleeParameter { callee } => (
                CopyCause::CallSignature,
                format!(
                    "computation {} takes this parameter layout",
                    comp_names(callee)
                ),
            ),
            RelationSource::LoopState { body } => (
                CopyCause::LoopState,
                format!(
                    "the loop state of body {} has this layout",
                    comp_names(body)
                ),
            ),
            RelationSource::BoundaryResult => match &p.boundary.1 {
                Some(BoundaryReason::ConditionalResult { conditional }) => (
                    CopyCause::CallSignature,
                    format!("all branches of %{conditional} return one layout"),
                ),
                Some(BoundaryReason::LoopState { body }) => (
                    CopyCause::LoopState,
                    format!("the loop state of body {body} has this layout"),
                ),
                Some(BoundaryReason::Caller { caller }) => (
                    CopyCause::CallSignature,
                    format!("its only caller {caller} reads the result in this layout"),
                ),
                Some(BoundaryReason::Kept) => (
                    CopyCause::CallSignature,
                    "its callers read the result in this layout".to_string(),
                ),
                _ => (
                    CopyCause::Entry,
                    "the entry computation layout fixes the result".to_string(),
                ),
            },
            RelationSource::LoopBackEdge => (
                CopyCause::LoopState,
                "a loop body returns its state in the layout it received".to_string(),
            ),
            // The value's own layout was forced by a boundary: that constraint,
            // not its users, is why it must be copied.
            RelationSource::LayoutPreservingUser { .. } | RelationSource::Broadcast
                if boundary_cause(value.fixed).is_some() =>
            {
                let cause = boundary_cause(value.fixed).unwrap_or(CopyCause::ConflictingUsers);
                (
                    cause,
                    match rel.source {
                        RelationSource::LayoutPreservingUser { opcode } => format!(
                            "{opcode} keeps its operands' layout, and its result is needed in another layout"
                        ),
                        _ => {
                            "the broadcast reads its operand in its own result's order".to_string()
                        }
                    },
                )
            }
            RelationSource::LayoutPreservingUser { opcode } => (
                CopyCause::ConflictingUsers,
                format!(
                    "{opcode} keeps its operands' layout, and its result is needed in another layout than this value's"
                ),
            ),
            RelationSource::Broadcast => (
                CopyCause::ConflictingUsers,
                "the broadcast reads its operand in its own result's order".to_string(),
            ),
            RelationSource::DataMovement => (CopyCause::ConflictingUsers, String::new()),
        };
        (cause, because)
    }

    fn describe_fix(&self, value: &crate::problem::Value, f: crate::problem::FixReason) -> String {
        let (p, target, comp_names) = (self.p, self.target, self.comp_names);
        use crate::problem::FixReason::*;
        match f {
            EntryParameter => "the entry computation layout".into(),
            Boundary => match &p.boundary.0 {
                Some(BoundaryReason::LoopState { body }) => format!("the loop state of {body}"),
                Some(BoundaryReason::ConditionalResult { conditional }) => {
                    format!("%{conditional}")
                }
                Some(BoundaryReason::Caller { caller }) => format!("its only caller {caller}"),
                Some(BoundaryReason::Kept) => "the signature its callers see".into(),
                _ => "the entry computation layout".into(),
            },
            CustomCall => {
                let name = p
                    .comp
                    .inst(value.def)
                    .attrs
                    .string(KnownAttr::CustomCallTarget)
                    .unwrap_or("");
                format!("custom call \"{name}\"")
            }
            TargetRule(i) => match target.rules.get(i as usize) {
                Some(rule) => format!("target {} rule '{}'", target.name, rule.name),
                None => format!("target {}", target.name),
            },
            Callee(c) => format!("the signature of {}", comp_names(c)),
            OperandNeed(source) => match source {
                NeedSource::TargetRule(i) => match target.rules.get(i as usize) {
                    Some(rule) => format!(
                        "target {} rule '{}' on its operands (it keeps its layout)",
                        target.name, rule.name
                    ),
                    None => format!("target {}", target.name),
                },
                NeedSource::TargetDefault => format!(
                    "target {} needing its operands in this layout (it keeps its layout)",
                    target.name
                ),
                NeedSource::CustomCall | NeedSource::LayoutConstraint => {
                    "a layout constraint on its operands".into()
                }
                NeedSource::Outfeed => "an outfeed_shape".into(),
            },
            ExistingBitcast => "an existing bitcast".into(),
            Infeed => "the infeed".into(),
            Alias => "input_output_alias with the entry result".into(),
            Scalar => "being a scalar".into(),
        }
    }
}

/// The transposes and reshapes that move data under the labels, with the
/// bytes each moves, and the bytes the cost model priced for them.
///
/// A transpose or reshape whose operand is copied reads the copy: it is a
/// bitcast or not under the copy's layout, not the value's. The cost model
/// reads every movement's operand in the value's own layout. The two
/// differ only where a copy sits in front of a movement; the report keeps
/// the true figure and `stats.cost` the model's, so the optimality bounds
/// stay in one currency.
fn movements(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
    copies: &[PlannedCopy],
) -> (Vec<(InstId, u64)>, u64) {
    let read_through: FxHashMap<Site, usize> = copies
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.sites.iter().map(move |&s| (s, i)))
        .collect();
    let mut movements = Vec::new();
    let mut model_movement_bytes = 0u64;
    for rel in &p.relations {
        let RelationKind::Movement { out, transpose } = &rel.kind else {
            continue;
        };
        let b = with_layout(&p.values[*out].shape, layout_of(p, labels, *out));
        let moves = |operand_layout: Layout| {
            let a = with_layout(&p.values[rel.v].shape, operand_layout);
            !match transpose {
                Some(dims) => crate::algebra::transpose_keeps_bytes(&a, &b, dims),
                None => crate::algebra::reshape_keeps_bytes(&a, &b),
            }
        };
        let own = moves(layout_of(p, labels, rel.v));
        if own {
            model_movement_bytes += crate::algebra::storage_bytes(&b);
        }
        let actual = match read_through.get(&rel.site) {
            Some(&i) => moves(Layout::clone(&copies[i].to)),
            None => own,
        };
        if actual {
            movements.push((p.values[*out].def, crate::algebra::storage_bytes(&b)));
        }
    }
    (movements, model_movement_bytes)
}

/// Ops that re-tile under the final layouts, with the same layouts the
/// cost model priced (see `Solver::retile_cost`): the op, the bytes it
/// moves, and why.
fn retilings(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
    target: &target::TargetSpec,
) -> Vec<(InstId, u64, String)> {
    let mut retilings = Vec::new();
    for t in &p.retilings {
        let (operand, out) = (&p.values[t.operand], &p.values[t.out]);
        let out_layout = layout_of(p, labels, t.out);
        let operand_layout = match &t.op {
            crate::retile::RetileOp::Reduce { .. } => layout_of(p, labels, t.operand),
            crate::retile::RetileOp::Broadcast { dims } => {
                crate::problem::restrict_layout(target, &operand.shape, &out_layout, dims)
            }
            _ => crate::tiling::same_layout_for(target, &out_layout, &out.shape, &operand.shape),
        };
        let a = with_layout(&operand.shape, operand_layout);
        let b = with_layout(&out.shape, out_layout);
        if let Some(why) = crate::retile::reason(&t.op, &a, &b) {
            retilings.push((t.inst, crate::retile::moved_bytes(&t.op, &a, &b), why));
        }
    }
    retilings
}

/// `s` with each array leaf laid out as the value at the same position of
/// `values` is labelled (leaves past `values` keep their layout).
fn with_values(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
    s: &Shape,
    values: &[ValueId],
) -> Shape {
    let mut s = s.clone();
    let mut i = 0;
    s.for_each_array_mut(&mut |a| {
        if let Some(&v) = values.get(i) {
            a.layout = Some(shared_layout_of(p, labels, v));
        }
        i += 1;
    });
    s
}

/// The computation's signature: parameters as assigned, the result after
/// root copies.
fn signature(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
    copies: &[PlannedCopy],
) -> Signature {
    let comp = p.comp;
    let shape_with = |id: InstId| -> Shape {
        let values = p.leaf_values.get(id.index()).cloned().unwrap_or_default();
        with_values(p, labels, &comp.inst(id).shape, &values)
    };
    let params: Vec<Shape> = comp.parameters().into_iter().map(shape_with).collect();
    let mut result = comp
        .root()
        .map(shape_with)
        .unwrap_or(Shape::Tuple(Vec::new()));
    // The result leaves that root copies lay out, the last copy of a leaf
    // winning, then one walk over the result: a walk per copy was
    // quadratic in a wide result whose every leaf is copied.
    let mut at_root: FxHashMap<u32, &SharedLayout> = FxHashMap::default();
    for c in copies {
        for site in &c.sites {
            if let Site::Root { leaf } = *site {
                at_root.insert(leaf, &c.to);
            }
        }
    }
    if !at_root.is_empty() {
        let mut i = 0;
        result.for_each_array_mut(&mut |a| {
            if let Some(&to) = at_root.get(&i) {
                a.layout = Some(to.clone());
            }
            i += 1;
        });
        hlo::count(hlo::Work::TupleLeaves, at_root.len() + i as usize);
    }
    Signature::new(params, result)
}

/// The boundaries chosen for callees whose signature was a preference.
fn callee_boundaries(
    p: &Problem<'_>,
    labels: &TiSlice<ValueId, LayoutId>,
) -> Vec<(hlo::CompId, Signature)> {
    let comp = p.comp;
    let with_values = |s: &Shape, values: &[ValueId]| with_values(p, labels, s, values);
    let mut callee_boundaries = Vec::new();
    for &(id, callee) in &p.preferred_calls {
        let inst = comp.inst(id);
        let own = p.leaf_values.get(id.index()).cloned().unwrap_or_default();
        let sig = match inst.opcode {
            Opcode::While => {
                let state = with_values(&inst.shape, &own);
                Signature::new(vec![state.clone()], state)
            }
            Opcode::AsyncStart => {
                let (Some(elements), Some(r0), Some(r1)) = (
                    inst.shape.tuple_elements(),
                    inst.element_leaves(0),
                    inst.element_leaves(1),
                ) else {
                    continue;
                };
                let operands = with_values(&elements[0], own.get(r0).unwrap_or_default());
                let params = operands
                    .tuple_elements()
                    .map(<[Shape]>::to_vec)
                    .unwrap_or_default();
                Signature::new(
                    params,
                    with_values(&elements[1], own.get(r1).unwrap_or_default()),
                )
            }
            _ => {
                let params = inst
                    .operands()
                    .iter()
                    .map(|&o| {
                        with_values(
                            &comp.inst(o).shape,
                            p.leaf_values
                                .get(o.index())
                                .map_or(&[][..], |v| v.as_slice()),
                        )
                    })
                    .collect();
                Signature::new(params, with_values(&inst.shape, &own))
            }
        };
        callee_boundaries.push((callee, sig));
    }
    callee_boundaries
}

/// The AUTO entry layouts the signature fills in, by position.
fn filled_layouts(p: &Problem<'_>, signature: &Signature) -> Vec<FilledLayout> {
    let (params, result) = (&signature.params, &signature.result);
    let mut filled = Vec::new();
    for &(param, leaf) in &p.auto_params {
        if let Some(s) = params.get(param as usize)
            && let Some(a) = s.array_leaves().get(leaf as usize)
        {
            let position = if s.is_tuple() {
                format!("parameter {param} leaf {leaf}")
            } else {
                format!("parameter {param}")
            };
            filled.push(FilledLayout {
                position,
                layout: a.layout.as_deref().cloned().unwrap_or_default(),
            });
        }
    }
    let result_leaves = result.array_leaves();
    for &leaf in &p.auto_result {
        if let Some(a) = result_leaves.get(leaf as usize) {
            let position = if result.is_tuple() {
                format!("result leaf {leaf}")
            } else {
                "result".to_string()
            };
            filled.push(FilledLayout {
                position,
                layout: a.layout.as_deref().cloned().unwrap_or_default(),
            });
        }
    }
    filled
}

/// Who reads a relation's value, in words.
fn reader_of(p: &Problem<'_>, r: RelationId) -> String {
    match p.relations[r].site {
        Site::Operand { user, operand, .. } => {
            format!("operand {operand} of %{}", p.comp.inst(user).name)
        }
        Site::Root { .. } => "the computation's result".to_string(),
    }
}

/// The layout entry relation `r` needs its value in under `labels` (for
/// explanations: the value's own entry when it serves the relation).
fn solution_need(
    p: &Problem<'_>,
    r: RelationId,
    labels: &TiSlice<ValueId, LayoutId>,
    target: &target::TargetSpec,
) -> Option<LayoutId> {
    let rel = &p.relations[r];
    let value = &p.values[rel.v];
    match &rel.kind {
        RelationKind::Need { need_id, .. } => Some(*need_id),
        RelationKind::Same { out } => {
            let out_layout = p.table.get(p.values[*out].key(labels[*out]));
            let layout = crate::tiling::same_layout_for(
                target,
                out_layout,
                &p.values[*out].shape,
                &value.shape,
            );
            value.layouts.position(|&k| *p.table.get(k) == layout)
        }
        _ => None,
    }
}

/// True when `layout` tiles `value` with a tiling the target allows only
/// for buffers resident in HBM.
fn storage_only(
    target: &target::TargetSpec,
    value: &crate::problem::Value,
    layout: &Layout,
) -> bool {
    target.tiling.is_some()
        && !crate::tiling::allows(
            target,
            &value.shape,
            layout,
            crate::tiling::TileUse::Compute,
        )
        && crate::tiling::allows(
            target,
            &value.shape,
            layout,
            crate::tiling::TileUse::Storage,
        )
}

/// The copy cause a value's fixed layout stands for, when a boundary the
/// pass does not control fixed it.
fn boundary_cause(fixed: Option<crate::problem::FixReason>) -> Option<CopyCause> {
    use crate::problem::FixReason::*;
    match fixed? {
        EntryParameter => Some(CopyCause::Entry),
        CustomCall => Some(CopyCause::CustomCall),
        Callee(_) | Boundary => Some(CopyCause::CallSignature),
        ExistingBitcast => Some(CopyCause::ExistingBitcast),
        TargetRule(_) | OperandNeed(_) => Some(CopyCause::TargetRequirement),
        // Like an outfeed's operand, an infeed's buffer crosses to or from
        // the host in the layout the transfer declares.
        Infeed => Some(CopyCause::HostTransfer),
        Alias => Some(CopyCause::Alias),
        Scalar => None,
    }
}

/// Why an assignment could not be applied to its computation. The
/// assignment was made for this very computation, so either is a bug in
/// the pass, reported rather than hidden.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The computation refused a graph edit.
    #[error("computation {computation}: applying the assignment failed: {error}")]
    Edit {
        computation: String,
        error: EditError,
    },
    /// The copies closed a cycle.
    #[error(transparent)]
    Cycle(#[from] CycleError),
}

/// Applies an assignment to its computation: sets every layout and inserts
/// the copies. Returns the names of the inserted copies, in plan order.
pub fn apply(
    comp: &mut Computation,
    assignment: &ComputationAssignment,
    order: &[InstId],
) -> Result<Vec<String>, ApplyError> {
    // 1. Layouts of defined leaves.
    for (id, leaves) in &assignment.leaf_layouts {
        let mut i = 0;
        comp.inst_mut(*id).shape.for_each_array_mut(&mut |a| {
            if let Some(l) = leaves
                .get(i)
                .and_then(|&k| assignment.layouts.get(k as usize))
            {
                a.layout = Some(l.clone());
            }
            i += 1;
        });
    }
    // 2. Forwarded shapes follow their operands.
    refresh_forwarded_shapes(comp, order);
    // Most computations need no copy; then the schedule stands and the
    // forwarded shapes are final.
    if assignment.copies.is_empty() {
        return Ok(Vec::new());
    }
    // 3. Copies, and the uses redirected to them, in one new schedule.
    let copy_names = insert_copies(comp, assignment).map_err(|error| ApplyError::Edit {
        computation: comp.name.clone(),
        error,
    })?;
    // 4. What forwarded instructions forward has changed.
    refresh_forwarded_shapes(comp, &comp.topological_order()?);
    Ok(copy_names)
}

/// Inserts the planned copies and redirects their sites to them. New
/// instructions are placed right after the copied value's definition (or
/// right before the user that needs a rebuilt tuple), in one new schedule.
fn insert_copies(
    comp: &mut Computation,
    assignment: &ComputationAssignment,
) -> Result<Vec<String>, EditError> {
    // Each copy adds an instruction and its operand edge; a redirected use
    // takes the slot of the edge it replaces. The tables below are sized
    // up front too: growing a table of half a million entries rehashes
    // them all several times over.
    let copies = assignment.copies.len();
    comp.reserve(copies, copies);
    let sites = assignment.copies.iter().map(|c| c.sites.len()).sum();
    let mut placement = Placement::default();
    placement.after.reserve(copies);
    let mut names = FreshNames::of(comp);
    let mut copy_names = Vec::with_capacity(copies);
    let position = comp.schedule_positions();
    // Replacements per (user, operand) or root: leaf -> new array
    // instruction. A list sorted at the end rather than a hash map of
    // lists: one small list per site of half a million copies, and a look
    // into a table that size for each, cost more than the sort.
    let mut operand_leaves: Vec<((InstId, u32), (u32, InstId))> = Vec::with_capacity(sites);
    let mut root_leaf_map: Vec<(u32, InstId)> = Vec::new();
    for c in &assignment.copies {
        // When every use reads the leaf through one existing array
        // instruction (a get-tuple-element of a tuple parameter, say), copy
        // that instruction rather than extracting the leaf again.
        let (source, origin) = match shared_array_operand(comp, c) {
            Some(g) => (g, g),
            None => {
                // An existing read of the leaf may serve only if it comes
                // before every instruction that will read the copy.
                let first_user = c
                    .sites
                    .iter()
                    .filter_map(|s| match *s {
                        Site::Operand { user, .. } => position.get(user),
                        Site::Root { .. } => None,
                    })
                    .min()
                    .unwrap_or(usize::MAX);
                let usable = |g: InstId| position.get(g).is_some_and(|p| p < first_user);
                extract_leaf(
                    comp,
                    c.def,
                    c.leaf,
                    &mut names,
                    &mut placement.after,
                    &usable,
                )?
            }
        };
        // The copy is named after the existing instruction it reads from.
        let source_inst = comp.inst(origin);
        let mut shape = comp.inst(source).shape.clone();
        if let Some(a) = shape.as_array_mut() {
            a.layout = Some(c.to.clone());
        }
        let base = format!("{}.copy", source_inst.name);
        let name = names.fresh(&base);
        let mut copy = Instruction::new(name.clone(), Opcode::Copy, shape);
        copy.attrs = inherited_attrs(&source_inst.attrs);
        let copy_id = comp.add_unscheduled(copy, &[source])?;
        placement.after.entry(source).or_default().push(copy_id);
        copy_names.push(name);
        for site in &c.sites {
            match *site {
                Site::Operand {
                    user,
                    operand,
                    leaf,
                } => {
                    operand_leaves.push(((user, operand), (leaf, copy_id)));
                }
                Site::Root { leaf } => root_leaf_map.push((leaf, copy_id)),
            }
        }
    }
    // Stable: each site's leaves stay in the order of the copies.
    operand_leaves.sort_by_key(|&(site, _)| site);
    // An array operand of an instruction that is not a tuple is redirected
    // in one batch at the end: many such sites may read one value (a
    // parameter every block reads), and rebuilding the other sites never
    // looks at these (it reads tuples and their uses only), so the result
    // is the one of editing each site in turn.
    let mut edits = Vec::new();
    let mut leaves = Vec::new();
    for run in operand_leaves.chunk_by(|a, b| a.0 == b.0) {
        let (user, operand) = run[0].0;
        leaves.clear();
        leaves.extend(run.iter().map(|&(_, leaf)| leaf));
        let (index, count) = (operand as usize, comp.operands(user).len());
        let &old = comp
            .operands(user)
            .get(index)
            .ok_or(EditError::OperandIndex { index, count })?;
        let new = rebuild_with_leaves(comp, old, &leaves, &mut names, &mut placement.before, user)?;
        if comp.inst(old).shape.is_tuple() || comp.inst(user).shape.is_tuple() {
            comp.set_operand(user, index, new)?;
        } else {
            edits.push((user, index, new));
        }
    }
    comp.set_operands_at(&edits)?;
    if !root_leaf_map.is_empty()
        && let Some(root) = comp.root()
    {
        let mut sink = FxHashMap::default();
        let new = rebuild_with_leaves(comp, root, &root_leaf_map, &mut names, &mut sink, root)?;
        for (_, ids) in sink {
            placement.at_end.extend(ids);
        }
        if new != root {
            comp.set_root(new)?;
            if !placement.at_end.contains(&new) {
                placement.at_end.push(new);
            }
        }
    }
    comp.reschedule(&placement)?;
    Ok(copy_names)
}

/// The one array-shaped operand instruction, other than the value's own
/// definition, through which every site of `copy` reads it; `None` when
/// the sites read it differently or a site is the computation's root.
fn shared_array_operand(comp: &Computation, copy: &PlannedCopy) -> Option<InstId> {
    let mut shared = None;
    for site in &copy.sites {
        let Site::Operand { user, operand, .. } = *site else {
            return None;
        };
        let &o = comp.operands(user).get(operand as usize)?;
        if o == copy.def || !comp.inst(o).shape.is_array() || shared.is_some_and(|s| s != o) {
            return None;
        }
        shared = Some(o);
    }
    shared
}

/// Attributes a copy takes over from the value it copies, as XLA does.
fn inherited_attrs(source: &Attrs) -> Attrs {
    let mut attrs = Attrs::default();
    for key in [KnownAttr::Sharding, KnownAttr::Metadata] {
        if let Some(v) = source.get(key) {
            attrs.set(key, v.clone());
        }
    }
    attrs
}

/// An instruction holding array leaf `leaf` of `def`: `def` itself when it
/// is an array, else a chain of get-tuple-elements placed after it (after
/// the async-done, for an async result), reusing the get-tuple-elements
/// of the input that `usable` allows. Also returns the existing
/// instruction the chain starts from.
fn extract_leaf(
    comp: &mut Computation,
    def: InstId,
    leaf: u32,
    names: &mut FreshNames,
    after: &mut FxHashMap<InstId, Vec<InstId>>,
    usable: &dyn Fn(InstId) -> bool,
) -> Result<(InstId, InstId), EditError> {
    let (mut cur, mut remaining) = match async_result_leaf(comp, def, leaf) {
        Some((done, leaf)) => (done, leaf),
        None => (def, leaf as usize),
    };
    let mut origin = cur;
    loop {
        let shape = comp.inst(cur).shape.clone();
        let Some(elements) = shape.tuple_elements() else {
            return Ok((cur, origin));
        };
        let mut k = 0;
        while k < elements.len() {
            let n = elements[k].array_leaf_count();
            if remaining < n {
                break;
            }
            remaining -= n;
            k += 1;
        }
        let Some(element) = elements.get(k) else {
            return Ok((cur, origin));
        };
        // Read the element through a get-tuple-element the input already
        // has, rather than adding a second one and leaving it unused.
        if let Some(existing) = existing_element_read(comp, cur, k).filter(|&g| usable(g)) {
            cur = existing;
            origin = existing;
            continue;
        }
        let name = names.fresh(&format!("{}.gte.{k}", comp.inst(cur).name));
        let mut gte = Instruction::new(name, Opcode::GetTupleElement, element.clone());
        gte.attrs.set(KnownAttr::Index, AttrValue::Int(k as i64));
        let id = comp.add_unscheduled(gte, &[cur])?;
        after.entry(cur).or_default().push(id);
        cur = id;
    }
}

/// The first (in instruction order) existing `get-tuple-element` reading
/// element `k` of `tuple`.
fn existing_element_read(comp: &Computation, tuple: InstId, k: usize) -> Option<InstId> {
    comp.users(tuple)
        .into_iter()
        .filter(|&u| comp.inst(u).tuple_index() == Some(k))
        .min()
}

/// For a leaf of an async-start's result element, the async-done that
/// delivers it and the leaf's index there: the result may only be read
/// after the operation is done, never through the async-start tuple.
fn async_result_leaf(comp: &Computation, def: InstId, leaf: u32) -> Option<(InstId, usize)> {
    if comp.inst(def).opcode != Opcode::AsyncStart {
        return None;
    }
    let result = comp.inst(def).element_leaves(1)?;
    let leaf = leaf as usize;
    if !result.contains(&leaf) {
        return None;
    }
    // Follow async-update to the async-done.
    let mut cur = def;
    for _ in 0..comp.graph().node_count() {
        let next = comp
            .users(cur)
            .into_iter()
            .find(|&u| matches!(comp.inst(u).opcode, Opcode::AsyncUpdate | Opcode::AsyncDone))?;
        if comp.inst(next).opcode == Opcode::AsyncDone {
            return Some((next, leaf - result.start));
        }
        cur = next;
    }
    None
}

/// An instruction equal to `old` with the given array leaves replaced.
/// For an array, the replacement itself; for a tuple, a rebuilt tuple of
/// get-tuple-elements, except that a `tuple` instruction read only here is
/// edited in place.
fn rebuild_with_leaves(
    comp: &mut Computation,
    old: InstId,
    leaves: &[(u32, InstId)],
    names: &mut FreshNames,
    before: &mut FxHashMap<InstId, Vec<InstId>>,
    anchor: InstId,
) -> Result<InstId, EditError> {
    let shape = comp.inst(old).shape.clone();
    let Some(elements) = shape.tuple_elements() else {
        return Ok(leaves
            .iter()
            .find(|(l, _)| *l == 0)
            .map_or(old, |&(_, new)| new));
    };
    // A tuple nobody else reads is edited in place: for an operand site,
    // its only use is this one; for the root, it has no use at all.
    let uses = comp.uses(old).len();
    let single_use_tuple = comp.inst(old).opcode == Opcode::Tuple
        && if anchor == old {
            uses == 0
        } else {
            uses <= 1 && comp.root() != Some(old)
        };
    // The leaves by index (a stable sort: of two replacements of one leaf
    // the first still wins), so that each element takes the next run of
    // them: filtering all the leaves for each element was quadratic in a
    // wide tuple whose every leaf is replaced.
    let mut sorted = leaves.to_vec();
    sorted.sort_by_key(|&(l, _)| l);
    let mut next = 0;
    let mut offset = 0u32;
    let mut parts = Vec::with_capacity(elements.len());
    let mut changed = false;
    for (k, element) in elements.iter().enumerate() {
        let n = element.array_leaf_count() as u32;
        let rest = &sorted[next..];
        let run = rest.partition_point(|&(l, _)| l < offset + n);
        next += run;
        hlo::count(hlo::Work::TupleLeaves, 1 + run);
        let inner: Vec<(u32, InstId)> = rest[..run]
            .iter()
            .map(|&(l, id)| (l - offset, id))
            .collect();
        offset += n;
        let current = if single_use_tuple {
            comp.operands(old)[k]
        } else if inner.is_empty() {
            parts.push(None);
            continue;
        } else if !element.is_tuple() {
            // An array element replaced whole needs no get-tuple-element.
            changed = true;
            parts.push(inner.iter().find(|(l, _)| *l == 0).map(|&(_, id)| id));
            continue;
        } else {
            let name = names.fresh(&format!("{}.gte.{k}", comp.inst(old).name));
            let mut gte = Instruction::new(name, Opcode::GetTupleElement, element.clone());
            gte.attrs.set(KnownAttr::Index, AttrValue::Int(k as i64));
            let id = comp.add_unscheduled(gte, &[old])?;
            before.entry(anchor).or_default().push(id);
            id
        };
        if inner.is_empty() {
            parts.push(Some(current));
        } else {
            changed = true;
            // Parts of a tuple edited in place must come before it.
            let inner_anchor = if single_use_tuple { old } else { anchor };
            parts.push(Some(rebuild_with_leaves(
                comp,
                current,
                &inner,
                names,
                before,
                inner_anchor,
            )?));
        }
    }
    if !changed {
        return Ok(old);
    }
    if single_use_tuple {
        let edits: Vec<(InstId, usize, InstId)> = parts
            .into_iter()
            .enumerate()
            .filter_map(|(k, part)| part.map(|new| (old, k, new)))
            .collect();
        comp.set_operands_at(&edits)?;
        return Ok(old);
    }
    // Fill the untouched elements with get-tuple-elements too.
    let mut operands = Vec::with_capacity(elements.len());
    for (k, part) in parts.into_iter().enumerate() {
        let id = match part {
            Some(id) => id,
            None => {
                let name = names.fresh(&format!("{}.gte.{k}", comp.inst(old).name));
                let mut gte = Instruction::new(name, Opcode::GetTupleElement, elements[k].clone());
                gte.attrs.set(KnownAttr::Index, AttrValue::Int(k as i64));
                let id = comp.add_unscheduled(gte, &[old])?;
                before.entry(anchor).or_default().push(id);
                id
            }
        };
        operands.push(id);
    }
    let name = names.fresh(&format!("{}.relayout", comp.inst(old).name));
    let tuple = Instruction::new(name, Opcode::Tuple, shape.clone());
    let id = comp.add_unscheduled(tuple, &operands)?;
    before.entry(anchor).or_default().push(id);
    Ok(id)
}

/// Recomputes the shapes of forwarding instructions (tuple, get-tuple-element,
/// copies, barriers) from their operands, in topological order.
pub fn refresh_forwarded_shapes(comp: &mut Computation, order: &[InstId]) {
    for &id in order {
        let inst = comp.inst(id);
        let operands = inst.operands();
        let new_shape = match inst.opcode {
            Opcode::Tuple => Some(Shape::Tuple(
                operands
                    .iter()
                    .map(|&o| comp.inst(o).shape.clone())
                    .collect(),
            )),
            Opcode::GetTupleElement => match (inst.tuple_index(), operands.first()) {
                (Some(k), Some(&o)) => comp
                    .inst(o)
                    .shape
                    .tuple_elements()
                    .and_then(|e| e.get(k))
                    .cloned(),
                _ => None,
            },
            Opcode::AsyncDone => operands
                .first()
                .and_then(|&o| comp.inst(o).shape.tuple_elements()?.get(1).cloned()),
            op if op.forwards_buffers() => operands.first().map(|&o| comp.inst(o).shape.clone()),
            _ => None,
        };
        if let Some(s) = new_shape
            && s.same_logical_shape(&comp.inst(id).shape)
        {
            comp.inst_mut(id).shape = s;
        }
    }
}
