//! The assignment problem of one computation: the array values it defines,
//! the relations between their layouts, and the candidate layouts of each.
//!
//! A *value* is an array leaf defined by an instruction (forwarding
//! instructions such as `tuple` and `get-tuple-element` define none; their
//! leaves are the values they forward). A *relation* says how a use reads a
//! value: in its user's layout (`Same`), in a layout derived from the user's
//! (`Broadcast`), in a fixed layout (`Need`), or in any layout at a price
//! (`Movement`: a transpose or reshape that is free only as a bitcast).

use std::sync::Arc;

use hlo::{AttrValue, CompId, Computation, InstId, KnownAttr, Opcode, Parallelism, Split, Work};
use rustc_hash::{FxHashMap, FxHashSet};
use shape::{ArrayShape, DimVec, Layout, Shape, SharedLayout};
use smallvec::SmallVec;
use target::TargetSpec;

use crate::algebra;
use crate::context::{BoundaryReason, Context};
use crate::ids::{
    LayoutId, LayoutKey, MatrixId, RelationId, RetileId, TiSlice, TiSmallVec, TiVec, ValueId,
};
use crate::policy::{self, Need, NeedSource};
use crate::tiling::TileUse;

/// The most candidate layouts a value keeps; more buy little and cost time.
const MAX_CANDIDATES: usize = 6;

/// Why a value's layout is fixed. Names are looked up only for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FixReason {
    /// An entry parameter with a given layout.
    EntryParameter,
    /// A parameter whose layout the caller fixed (see the context).
    Boundary,
    /// A layout-constrained custom call's result.
    CustomCall,
    /// Rule number `.0` of the target requires this result layout.
    TargetRule(u16),
    /// The op keeps its operands' layout and the target (or a custom call)
    /// needs its operands in this one, so its result must be in it too.
    OperandNeed(NeedSource),
    /// The result of a call, while or conditional: the callee's signature.
    Callee(CompId),
    /// A `bitcast` already in the input.
    ExistingBitcast,
    /// An infeed's declared layout.
    Infeed,
    /// An AUTO entry parameter aliased (`input_output_alias`) with a result
    /// leaf whose layout is given.
    Alias,
    /// A scalar has one layout.
    Scalar,
}

/// Every distinct layout a computation's problem mentions, stored once, so
/// that values, candidates and needs refer to layouts by a small key
/// instead of cloning them.
#[derive(Default)]
pub struct LayoutTable {
    /// Shared, so that the copies planned from the problem, their reports
    /// and the shapes of the output point at the table's layouts instead
    /// of holding 144 bytes of each. A new entry is shared with an equal
    /// layout the thread made recently (`SharedLayout::recent`), so that
    /// the many small computations of a module share their few layouts.
    list: TiVec<LayoutKey, SharedLayout>,
    index: FxHashMap<Layout, LayoutKey>,
    /// The key the last lookup found or added. Lookups come in runs of one
    /// layout (every operand of a row of elementwise ops needs the same
    /// row-major layout), and comparing with it costs less than hashing.
    last: Option<LayoutKey>,
}

impl LayoutTable {
    /// The key of `layout`, adding it if new.
    pub fn key(&mut self, layout: &Layout) -> LayoutKey {
        if let Some(k) = self.last
            && self.list.get(k).is_some_and(|l| **l == *layout)
        {
            return k;
        }
        let k = match self.index.get(layout) {
            Some(&k) => k,
            None => {
                let k = self
                    .list
                    .push_and_get_key(SharedLayout::recent(layout.clone()));
                self.index.insert(layout.clone(), k);
                k
            }
        };
        self.last = Some(k);
        k
    }

    /// The layout of a key.
    pub fn get(&self, key: LayoutKey) -> &Layout {
        &self.list[key]
    }

    /// The layout of a key, shared.
    pub fn shared(&self, key: LayoutKey) -> SharedLayout {
        self.list[key].clone()
    }
}

/// An array value.
#[derive(Clone, Debug)]
pub struct Value {
    /// The defining instruction.
    pub def: InstId,
    /// The array-leaf index within the definition's shape.
    pub leaf: u32,
    /// The logical shape (no layout), shared by every value of the same
    /// logical shape in the problem (see [`Problem::logical_shape`]).
    pub shape: Arc<ArrayShape>,
    /// Set when the layout is not the pass's to choose.
    pub fixed: Option<FixReason>,
    /// Values locked to share this value's layout decisions (multi-output
    /// ops whose outputs keep one layout). Points to itself when unlocked.
    pub lock: ValueId,
    /// Every layout this value has been considered in, as table keys;
    /// labels index it. Entries are pairwise non-equivalent (never a
    /// bitcast of each other).
    pub layouts: TiSmallVec<LayoutId, [LayoutKey; 4]>,
    /// Keys already resolved to an entry of `layouts` (equal or equivalent).
    aliases: SmallVec<[(LayoutKey, LayoutId); 4]>,
    /// Storage bytes per entry of `layouts`.
    pub bytes: TiSmallVec<LayoutId, [u64; 4]>,
    /// The layouts the solver may choose, best guess first.
    pub candidates: SmallVec<[LayoutId; 4]>,
    /// Where the value's buffer lives: an AUTO entry parameter of a type
    /// the target has storage tilings for is HBM-resident, and every other
    /// value is computed on (see `tiling.rs`).
    pub tile_use: TileUse,
    /// On a tiled target, for a free value of rank 2 or more: the entry of
    /// `layouts` that stores it with the least padding (see
    /// `least_padding_order`), which the solver weighs against needs and
    /// relayouts and the report compares with the choice.
    pub least_padding: Option<LayoutId>,
}

impl Value {
    /// The id of the layout with `key` in this value's table, adding it if
    /// no entry is equivalent to it.
    pub fn intern(&mut self, table: &LayoutTable, key: LayoutKey) -> LayoutId {
        if let Some(&(_, id)) = self.aliases.iter().find(|(k, _)| *k == key) {
            return id;
        }
        let layout = table.get(key);
        for (i, &k) in self.layouts.iter_enumerated() {
            if algebra::layout_change_keeps_bytes_in(&self.shape, layout, table.get(k)) {
                self.aliases.push((key, i));
                return i;
            }
        }
        self.bytes
            .push_and_get_key(algebra::storage_bytes_in(&self.shape, layout));
        let id = self.layouts.push_and_get_key(key);
        self.aliases.push((key, id));
        id
    }

    /// Makes `key` the printed form of its layout entry (the entry of
    /// every layout that holds the bytes alike). A bitcast's operand needs
    /// the layout the bitcast was written with in that very form: a
    /// byte-equal one written otherwise may not be provable as the same
    /// bitcast (`s8[2,128]{0,1:T(2,2)}` viewed as `s8[256]` is the tiled
    /// buffer's physical array; `s8[2,128]{0,1}`, with the same bytes,
    /// reads as a reshape that moves elements). A fixed value keeps the
    /// form it was fixed in.
    fn represent(&mut self, table: &LayoutTable, key: LayoutKey) {
        if self.fixed.is_some() {
            return;
        }
        let id = self.intern(table, key);
        self.layouts[id] = key;
    }

    fn add_candidate(&mut self, table: &LayoutTable, key: LayoutKey) -> bool {
        if self.candidates.len() >= MAX_CANDIDATES || self.fixed.is_some() {
            return false;
        }
        let id = self.intern(table, key);
        if self.candidates.contains(&id) {
            return false;
        }
        self.candidates.push(id);
        true
    }

    /// The key of this value's layout entry `id`.
    pub fn key(&self, id: LayoutId) -> LayoutKey {
        self.layouts[id]
    }

    /// The bytes of tile padding this value stores in layout entry `id`:
    /// its buffer's bytes beyond its elements'.
    pub fn padding_bytes(&self, id: LayoutId) -> u64 {
        let stored = self.bytes[id];
        let logical = self
            .shape
            .element_count()
            .and_then(|n| n.checked_mul(self.shape.element_storage_bits()))
            .map_or(stored, |bits| bits.div_ceil(8));
        stored.saturating_sub(logical)
    }

    /// The weighed cost of the padding this value stores in layout entry
    /// `id`. With [`Value::copy_cost`], the one place the cost model prices
    /// buffers: the search, the exact solver and the report all charge
    /// padding for each value's own buffer and for each copy's, so that
    /// padding and relayouts are weighed together.
    pub fn padding_cost(&self, id: LayoutId, weights: &target::CostWeights) -> f64 {
        if weights.padding_byte == 0.0 {
            return 0.0;
        }
        self.padding_bytes(id) as f64 * weights.padding_byte
    }

    /// The weighed cost of one copy of this value into layout entry `id`:
    /// the bytes it writes, and the padding its buffer stores.
    pub fn copy_cost(&self, id: LayoutId, weights: &target::CostWeights) -> f64 {
        self.bytes[id] as f64 * weights.copy_byte + self.padding_cost(id, weights)
    }
}

/// `a` with `layout`.
pub fn with_layout(a: &ArrayShape, layout: Layout) -> ArrayShape {
    a.in_layout(layout)
}

/// Where a copy would be inserted for a relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Site {
    /// Operand `operand` of instruction `user`, array leaf `leaf` within it.
    Operand {
        user: InstId,
        operand: u32,
        leaf: u32,
    },
    /// Array leaf `leaf` of the computation's result.
    Root { leaf: u32 },
}

/// Why a relation reads a value the way it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelationSource {
    /// A target or custom-call requirement on the operand.
    Need(NeedSource),
    /// The entry computation's result layout.
    EntryResult,
    /// `input_output_alias`: the result shares an entry parameter's layout.
    Alias { parameter: i64 },
    /// A callee's parameter layout (call, fusion, conditional branch).
    CalleeParameter { callee: CompId },
    /// A while loop's state layout.
    LoopState { body: CompId },
    /// The result layout the callers fixed (see the context).
    BoundaryResult,
    /// A user that keeps its operands' layout (elementwise, slice, ...).
    LayoutPreservingUser { opcode: Opcode },
    /// A broadcast reads its operand in its own layout's order.
    Broadcast,
    /// A loop body returns its state in the parameter's layout.
    LoopBackEdge,
    /// A transpose or reshape: it reads any layout, at a price.
    DataMovement,
}

/// How a use constrains a value's layout.
#[derive(Clone, Debug)]
pub enum RelationKind {
    /// Read in `out`'s layout.
    Same { out: ValueId },
    /// Read in `out`'s layout restricted to the broadcast dimensions. With
    /// `pin`, a target or custom call fixes the operand's layout at this use
    /// (the `Need` relation there makes any copy); the broadcast then only
    /// constrains its own result to orders that agree with the pin.
    // The dimensions are boxed, here and in `Movement`: a relation is
    // held for every use of every value, and inline lists made every one
    // 48 bytes larger.
    Broadcast {
        out: ValueId,
        dims: Box<[usize]>,
        pin: Option<LayoutId>,
    },
    /// Read in a fixed layout; `need_id` is its id in the value's table
    /// (for a matrix need, `matrix` indexes [`Problem::matrix_needs`] and
    /// `need_id` is the preferred layout's id).
    Need {
        need_id: LayoutId,
        matrix: Option<MatrixId>,
    },
    /// A transpose (with `dims`) or reshape (`dims` empty and `reshape`)
    /// from `v` to `out`; it costs `out`'s bytes unless it is a bitcast.
    Movement {
        out: ValueId,
        transpose: Option<Box<[usize]>>,
    },
}

/// One relation.
#[derive(Clone, Debug)]
pub struct Relation {
    /// The value read.
    pub v: ValueId,
    /// How.
    pub kind: RelationKind,
    /// Where a copy goes when the value's layout does not fit.
    pub site: Site,
    /// Why.
    pub source: RelationSource,
}

/// The problem of one computation.
pub struct Problem<'c> {
    /// The computation.
    pub comp: &'c Computation,
    /// Every layout the problem mentions.
    pub table: LayoutTable,
    /// Its values.
    pub values: TiVec<ValueId, Value>,
    /// Its relations.
    pub relations: TiVec<RelationId, Relation>,
    /// The matrix needs relations refer to.
    pub matrix_needs: TiVec<MatrixId, Need>,
    /// For each instruction (by node index), the value of each array leaf
    /// of its shape.
    pub leaf_values: Vec<SmallVec<[ValueId; 1]>>,
    /// Why the parameters and the result are fixed, when the context fixes them.
    pub boundary: (Option<BoundaryReason>, Option<BoundaryReason>),
    /// Instructions in a topological order (operands first).
    pub order: Vec<InstId>,
    /// Entry parameters whose layout was AUTO and is chosen here.
    pub auto_params: Vec<(u32, u32)>,
    /// The entry result's array leaves whose layout was AUTO.
    pub auto_result: Vec<u32>,
    /// Ops that may re-tile (tiled targets only): slices, pads,
    /// concatenates, broadcasts and reduces (see `retile.rs`).
    pub retilings: TiVec<RetileId, crate::retile::Retiling>,
    /// Calls whose callee's signature is only a preference, with the
    /// callee (the body, for a loop).
    pub preferred_calls: Vec<(InstId, CompId)>,
    /// The values' logical shapes, once each, while the problem is built.
    logical_shapes: FxHashSet<Arc<ArrayShape>>,
}

/// A built problem, and the solver's structure when a large problem built
/// it beside candidate propagation (see [`Problem::build`]): the solver
/// takes it, or builds it itself.
pub struct Built<'c> {
    pub problem: Problem<'c>,
    pub(crate) structure: Option<crate::solve::Structure>,
}

/// Errors that make a computation impossible to assign.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    #[error("computation {computation} has a cycle through instruction %{instruction}")]
    Cycle {
        computation: String,
        instruction: String,
    },
    #[error("computation {computation} has no root instruction")]
    NoRoot { computation: String },
    #[error(
        "%{instruction} in {computation} calls computation #{callee}, whose signature is unknown"
    )]
    MissingCallee {
        computation: String,
        instruction: String,
        callee: u32,
    },
    #[error("%{instruction} in {computation}: {message}")]
    Mismatch {
        computation: String,
        instruction: String,
        message: String,
    },
}

impl From<hlo::CycleError> for ProblemError {
    fn from(e: hlo::CycleError) -> ProblemError {
        ProblemError::Cycle {
            computation: e.computation,
            instruction: e.instruction,
        }
    }
}

impl<'c> Problem<'c> {
    /// Builds the problem of `comp` under `target` and `ctx`. A large
    /// problem also builds the solver's structure, which depends only on
    /// the relations, beside its candidate propagation, and returns it
    /// apart from the problem.
    pub fn build(
        comp: &'c Computation,
        ctx: &Context,
        target: &TargetSpec,
    ) -> Result<Built<'c>, ProblemError> {
        Self::build_with(comp, ctx, target, Offers::SkipStale)
    }

    /// [`Problem::build`], choosing how candidates propagate.
    pub(crate) fn build_with(
        comp: &'c Computation,
        ctx: &Context,
        target: &TargetSpec,
        offers: Offers,
    ) -> Result<Built<'c>, ProblemError> {
        let order = comp.topological_order()?;
        let bound = comp.node_bound();
        let mut p = Problem {
            comp,
            table: LayoutTable::default(),
            values: TiVec::with_capacity(order.len()),
            relations: TiVec::with_capacity(order.len() * 3),
            matrix_needs: TiVec::new(),
            leaf_values: crate::ids::empty_lists(bound),
            boundary: (
                ctx.params.as_ref().map(|(_, r)| r.clone()),
                ctx.result.as_ref().map(|(_, r)| r.clone()),
            ),
            order,
            auto_params: Vec::new(),
            auto_result: Vec::new(),
            retilings: TiVec::new(),
            preferred_calls: Vec::new(),
            logical_shapes: FxHashSet::default(),
        };
        let order = std::mem::take(&mut p.order);
        // Each instruction's needs are computed once and used twice.
        let mut needs_cache = needs_of(comp, target, &order, bound);
        for &id in &order {
            p.define(id, ctx, target, &mut needs_cache)?;
        }
        for &id in &order {
            p.relate(id, ctx, target, &mut needs_cache)?;
        }
        // Thousands of needs, each holding layouts: they are freed on the
        // pool while the problem is finished here, not one by one on the
        // way.
        Parallelism::drop_later(Split::LayoutNeeds, needs_cache.len(), needs_cache);
        if target.tiling.is_some() {
            p.retilings = crate::retile::collect(comp, &order, &p.leaf_values);
        }
        p.order = order;
        p.relate_root(ctx, target)?;
        // The relations, locks and re-tilings are final here. On a large
        // problem the solver's structure, which depends on nothing else,
        // is built on another core while candidates propagate.
        // (Both are moved out of the problem meanwhile, to be shared.)
        let relations = std::mem::take(&mut p.relations);
        let retilings = std::mem::take(&mut p.retilings);
        let structure = if Parallelism::splits(Split::LargeProblem, p.values.len()).is_some() {
            let (locks, fixed) = crate::solve::value_facts(&p.values);
            let ((), structure) = rayon::join(
                || {
                    p.seed_candidates(&relations, &retilings, target);
                    p.propagate_candidates(&relations, target, offers);
                },
                || crate::solve::Structure::build(&relations, &locks, &fixed, &retilings),
            );
            Some(structure)
        } else {
            p.seed_candidates(&relations, &retilings, target);
            p.propagate_candidates(&relations, target, offers);
            None
        };
        p.storage_candidates(target);
        p.logical_shapes = FxHashSet::default();
        p.relations = relations;
        p.retilings = retilings;
        hlo::count(Work::ProblemItems, p.values.len() + p.relations.len());
        Ok(Built {
            problem: p,
            structure,
        })
    }

    /// The logical shape of `a` (without its layout), shared with every
    /// value of that shape: a value's own copy was more than half its
    /// size, and a large computation has few distinct shapes.
    fn logical_shape(&mut self, a: &ArrayShape) -> Arc<ArrayShape> {
        let logical = ArrayShape {
            element_type: a.element_type,
            dims: a.dims.clone(),
            dynamic: a.dynamic,
            layout: None,
        };
        if let Some(shared) = self.logical_shapes.get(&logical) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(logical);
        self.logical_shapes.insert(Arc::clone(&shared));
        shared
    }

    fn new_value(
        &mut self,
        def: InstId,
        leaf: u32,
        a: &ArrayShape,
        fixed: Option<(Layout, FixReason)>,
        target: &TargetSpec,
    ) -> ValueId {
        let id = self.values.next_key();
        let mut v = Value {
            def,
            leaf,
            shape: self.logical_shape(a),
            fixed: None,
            lock: id,
            layouts: TiSmallVec::new(),
            aliases: SmallVec::new(),
            bytes: TiSmallVec::new(),
            candidates: SmallVec::new(),
            tile_use: TileUse::Compute,
            least_padding: None,
        };
        if a.rank() == 0 {
            let key = self.table.key(&crate::tiling::scalar_layout(target, a));
            let id = v.intern(&self.table, key);
            v.candidates.push(id);
            v.fixed = Some(FixReason::Scalar);
        } else if let Some((layout, reason)) = fixed {
            let key = self.table.key(&layout);
            let id = v.intern(&self.table, key);
            v.candidates.push(id);
            v.fixed = Some(reason);
        }
        self.values.push(v);
        id
    }

    fn mismatch(&self, id: InstId, message: impl Into<String>) -> ProblemError {
        ProblemError::Mismatch {
            computation: self.comp.name.clone(),
            instruction: self.comp.inst(id).name.clone(),
            message: message.into(),
        }
    }

    /// Gives every array leaf of `id` a value: a new one, or the value it
    /// forwards.
    fn define(
        &mut self,
        id: InstId,
        ctx: &Context,
        target: &TargetSpec,
        needs_cache: &mut [Option<policy::InstNeeds>],
    ) -> Result<(), ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        let leaves = inst.shape.array_leaves();
        if let Some(values) = self.forwarded(id)? {
            if values.len() != leaves.len() {
                return Err(self.mismatch(
                    id,
                    "the forwarded operand's shape does not match the result",
                ));
            }
            self.leaf_values[id.index()] = values;
            return Ok(());
        }

        // Fixed layouts of the new values, per leaf.
        // Inline for the usual single leaf: this runs once per instruction.
        let mut fixed: Fixes = SmallVec::from_elem(None, leaves.len());
        // AUTO entry parameter leaves that live in HBM in a storage tiling.
        let mut storage_leaves: SmallVec<[usize; 1]> = SmallVec::new();
        match inst.opcode {
            Opcode::Parameter => {
                self.parameter_fixes(id, ctx, target, &mut fixed, &mut storage_leaves)?;
            }
            Opcode::While | Opcode::Call | Opcode::Conditional | Opcode::Fusion => {
                self.call_fixes(id, ctx, target, &mut fixed)?;
            }
            Opcode::AsyncStart => self.async_start_fixes(id, ctx, target, &mut fixed)?,
            Opcode::Bitcast => {
                // An input bitcast is a bitcast in the layouts it was
                // written with (see `bitcast_side`).
                let operand = inst
                    .operands()
                    .first()
                    .and_then(|&o| comp.inst(o).shape.as_array());
                for (i, a) in leaves.iter().enumerate() {
                    fixed[i] = Some((bitcast_side(target, a, operand), FixReason::ExistingBitcast));
                }
            }
            Opcode::Infeed => {
                for (i, a) in leaves.iter().enumerate() {
                    fixed[i] = Some((given(target, a), FixReason::Infeed));
                }
            }
            _ => {
                let needs = needs_cache[id.index()]
                    .get_or_insert_with(|| policy::inst_needs(target, comp, id));
                needed_fixes(comp, id, target, needs, &mut fixed);
            }
        }
        let mut values: SmallVec<[ValueId; 1]> = SmallVec::new();
        for (i, a) in leaves.iter().enumerate() {
            let v = self.new_value(id, i as u32, a, fixed[i].take(), target);
            if storage_leaves.contains(&i) && self.values[v].fixed.is_none() {
                self.values[v].tile_use = TileUse::Storage;
            }
            values.push(v);
        }
        // Ops that keep one layout across several outputs (sort, variadic
        // reduce-window and scatter) lock their same-rank outputs together.
        if values.len() > 1
            && target.keeps_layout(inst.opcode)
            && !inst.opcode.is_per_leaf_collective()
        {
            let first = values[0];
            let rank = self.values[first].shape.rank();
            for &v in &values[1..] {
                if self.values[v].shape.rank() == rank {
                    self.values[v].lock = first;
                }
            }
        }
        self.leaf_values[id.index()] = values;
        Ok(())
    }

    /// The values `id` hands on when it forwards its operands' buffers (a
    /// tuple, a get-tuple-element, async-done, ...), or `None` when it
    /// defines values of its own.
    fn forwarded(&self, id: InstId) -> Result<Option<SmallVec<[ValueId; 1]>>, ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        let operand_leaves = |i: usize| -> SmallVec<[ValueId; 1]> {
            inst.operands()
                .get(i)
                .and_then(|o| self.leaf_values.get(o.index()))
                .cloned()
                .unwrap_or_default()
        };
        Ok(match inst.opcode {
            Opcode::Tuple => Some(
                (0..inst.operands().len())
                    .flat_map(operand_leaves)
                    .collect(),
            ),
            Opcode::GetTupleElement => {
                let operand = inst.operands().first().map(|&o| comp.inst(o));
                match (inst.tuple_index(), operand) {
                    (Some(k), Some(tuple)) => {
                        let range = tuple.element_leaves(k).ok_or_else(|| {
                            self.mismatch(id, format!("tuple index {k} is out of range"))
                        })?;
                        let all = operand_leaves(0);
                        Some(all.get(range).map(SmallVec::from_slice).unwrap_or_default())
                    }
                    _ => {
                        return Err(self
                            .mismatch(id, "get-tuple-element needs an index and a tuple operand"));
                    }
                }
            }
            // async-done returns element 1 of the async-start tuple: the
            // wrapped computation's result.
            Opcode::AsyncDone => {
                let operand = inst.operands().first().map(|&o| comp.inst(o));
                let range = operand.and_then(|start| start.element_leaves(1));
                let Some(range) = range else {
                    return Err(self.mismatch(id, "async-done needs an async-start tuple operand"));
                };
                Some(
                    operand_leaves(0)
                        .get(range)
                        .map(SmallVec::from_slice)
                        .unwrap_or_default(),
                )
            }
            // The others return their (first) operand as it is.
            op if op.forwards_buffers() => Some(operand_leaves(0)),
            _ => None,
        })
    }

    /// The fixed layouts of parameter `id`'s leaves: the computation
    /// layout's, where it sets them. AUTO entry leaves are noted (and those
    /// stored in a storage tiling added to `storage_leaves`); one aliased
    /// with a set result leaf takes that leaf's layout.
    fn parameter_fixes(
        &mut self,
        id: InstId,
        ctx: &Context,
        target: &TargetSpec,
        fixed: &mut Fixes,
        storage_leaves: &mut SmallVec<[usize; 1]>,
    ) -> Result<(), ProblemError> {
        let inst = self.comp.inst(id);
        let n = inst.parameter_number().unwrap_or(0) as usize;
        let Some((params, _)) = &ctx.params else {
            return Ok(());
        };
        let Some(param) = params.get(n) else {
            return Err(self.mismatch(
                id,
                format!("parameter {n} is not in the computation layout"),
            ));
        };
        let given_leaves = param.array_leaves();
        if given_leaves.len() != fixed.len() {
            return Err(self.mismatch(
                id,
                "the parameter's shape differs from the computation layout",
            ));
        }
        for (i, g) in given_leaves.iter().enumerate() {
            match &g.layout {
                Some(l) if ctx.is_entry => {
                    fixed[i] = Some((
                        entry_parameter_layout(target, g, l),
                        FixReason::EntryParameter,
                    ));
                }
                Some(l) => {
                    let why = if ctx.is_entry {
                        FixReason::EntryParameter
                    } else {
                        FixReason::Boundary
                    };
                    fixed[i] = Some((Layout::clone(l), why));
                }
                // A scalar has one layout: not AUTO, whatever the text says.
                None if ctx.is_entry && g.rank() > 0 => {
                    self.auto_params.push((n as u32, i as u32));
                    if crate::tiling::has_storage_tiles(target, g) {
                        storage_leaves.push(i);
                    }
                    // An AUTO parameter aliased with a set result
                    // leaf takes that leaf's layout (XLA resets
                    // the side the user did not set).
                    if let Some(l) = aliased_result_layout(ctx, n, param, i) {
                        fixed[i] = Some((entry_device_layout(target, g, &l), FixReason::Alias));
                    }
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The fixed layouts of the results of call-like `id` (while, call,
    /// conditional, fusion): its callee's result layouts, unless the
    /// callee's layouts are the caller's to prefer (then `relate` prices
    /// leaving the callee's choice).
    fn call_fixes(
        &mut self,
        id: InstId,
        ctx: &Context,
        target: &TargetSpec,
        fixed: &mut Fixes,
    ) -> Result<(), ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        // Called only for while, call, fusion and conditional.
        let callees: Vec<CompId> = match (inst.opcode, inst.called_body()) {
            (_, Some(c)) => vec![c],
            (Opcode::Conditional, _) => inst.attrs.called_computations().collect(),
            _ => Vec::new(),
        };
        let Some(&first) = callees.first() else {
            return Ok(());
        };
        let sig = self.callee_signature(ctx, id, first)?;
        let result_leaves = sig.result.array_leaves();
        if result_leaves.len() != fixed.len() {
            return Err(self.mismatch(
                id,
                "the callee's result shape differs from the instruction's",
            ));
        }
        if inst.opcode != Opcode::Conditional && ctx.preferred.binary_search(&first).is_ok() {
            // The result is free; `relate` prices leaving the
            // callee's choice.
            self.preferred_calls.push((id, first));
        } else {
            for (i, r) in result_leaves.iter().enumerate() {
                fixed[i] = Some((given(target, r), FixReason::Callee(first)));
            }
        }
        Ok(())
    }

    /// The signature of `callee`, which instruction `id` calls.
    fn callee_signature<'x>(
        &self,
        ctx: &'x Context,
        id: InstId,
        callee: CompId,
    ) -> Result<&'x crate::context::Signature, ProblemError> {
        ctx.callees.get(&callee).ok_or_else(|| {
            let inst = self.comp.inst(id);
            ProblemError::MissingCallee {
                computation: self.comp.name.clone(),
                instruction: inst.name.clone(),
                callee: callee.0,
            }
        })
    }

    /// The fixed layouts of async-start `id`'s tuple, which holds
    /// (operands, result, context): the operands as the wrapped computation
    /// takes them, and its result as it returns it. The operands themselves
    /// are related to the parameters like a call's.
    fn async_start_fixes(
        &mut self,
        id: InstId,
        ctx: &Context,
        target: &TargetSpec,
        fixed: &mut Fixes,
    ) -> Result<(), ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        let Some(AttrValue::Computation(callee)) = inst.attrs.get(KnownAttr::Calls) else {
            return Err(self.mismatch(id, "async-start needs calls="));
        };
        let sig = self.callee_signature(ctx, id, *callee)?;
        let params: Vec<&ArrayShape> = sig.params.iter().flat_map(Shape::array_leaves).collect();
        let result = sig.result.array_leaves();
        let (Some(r0), Some(r1)) = (inst.element_leaves(0), inst.element_leaves(1)) else {
            return Err(self.mismatch(
                id,
                "async-start's shape is not an (operands, result, ...) tuple",
            ));
        };
        if r0.len() != params.len() || r1.len() != result.len() {
            return Err(self.mismatch(
                id,
                "async-start's shape does not match the wrapped computation",
            ));
        }
        if ctx.preferred.binary_search(callee).is_ok() {
            self.preferred_calls.push((id, *callee));
        } else {
            for (i, a) in r0.zip(&params).chain(r1.zip(&result)) {
                fixed[i] = Some((given(target, a), FixReason::Callee(*callee)));
            }
        }
        Ok(())
    }

    fn push(&mut self, v: ValueId, kind: RelationKind, site: Site, source: RelationSource) {
        self.relations.push(Relation {
            v,
            kind,
            site,
            source,
        });
    }

    /// Adds an exact need of `layout` on value `v` at `site`.
    fn need(&mut self, v: ValueId, need: &Need, site: Site, source: RelationSource) {
        let key = self.table.key(need.preferred());
        let need_id = self.values[v].intern(&self.table, key);
        let matrix = match need {
            Need::Exact(_) => None,
            Need::Matrix(_) | Need::Minor(_) => {
                Some(self.matrix_needs.push_and_get_key(need.clone()))
            }
        };
        self.push(v, RelationKind::Need { need_id, matrix }, site, source);
    }

    /// Adds the relations of `id`'s operands.
    fn relate(
        &mut self,
        id: InstId,
        ctx: &Context,
        target: &TargetSpec,
        needs_cache: &mut [Option<policy::InstNeeds>],
    ) -> Result<(), ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        let op = inst.opcode;
        // Forwarded leaves are the operands' own values, which relate at
        // their real uses; parameters read nothing.
        if op.forwards_buffers() || matches!(op, Opcode::Parameter | Opcode::Bitcast) {
            if op == Opcode::Bitcast {
                self.relate_existing_bitcast(id, target);
            }
            return Ok(());
        }
        let out_values = self.leaf_values[id.index()].clone();
        let out = out_values.first().copied();

        // Calls: operands must arrive in the callee's parameter layouts.
        let call_targets = call_targets(inst);
        if !call_targets.is_empty() {
            if let Some(&(_, callee)) = self.preferred_calls.iter().find(|(i, _)| *i == id) {
                self.relate_preferred(id, callee, ctx, target);
            } else {
                self.relate_call_operands(id, &call_targets, ctx, target);
            }
            return Ok(());
        }

        let needs =
            needs_cache[id.index()].get_or_insert_with(|| policy::inst_needs(target, comp, id));
        // Needs on leaves of tuple operands (a constrained custom call's
        // tuple operand, a tuple outfeed).
        for (operand, leaf, layout, source) in needs.tuple_operand_leaves() {
            let Some(&o) = inst.operands().get(*operand) else {
                continue;
            };
            let Some(&v) = self.leaf_values[o.index()].get(*leaf) else {
                continue;
            };
            let site = Site::Operand {
                user: id,
                operand: *operand as u32,
                leaf: *leaf as u32,
            };
            self.need(
                v,
                &Need::Exact(layout.clone()),
                site,
                RelationSource::Need(*source),
            );
        }
        self.relate_aliasing(id)?;
        let keeps = target.keeps_layout(op);
        for (i, &o) in inst.operands().iter().enumerate() {
            let operand_leaves = self.leaf_values[o.index()].clone();
            if operand_leaves.is_empty() {
                continue;
            }
            let operand_is_array = comp.inst(o).shape.is_array();
            let site = Site::Operand {
                user: id,
                operand: i as u32,
                leaf: 0,
            };
            if let Some((need, source)) = needs.operand(i)
                && operand_is_array
            {
                self.need(operand_leaves[0], need, site, RelationSource::Need(source));
            }
            if !operand_is_array {
                continue;
            }
            let v = operand_leaves[0];
            let v_rank = self.values[v].shape.rank();
            // The output leaf this operand keeps its layout with: per leaf
            // for collectives on tuples, otherwise the first output.
            let partner =
                if op.is_per_leaf_collective() && out_values.len() == inst.operands().len() {
                    out_values.get(i).copied()
                } else {
                    out
                };
            let Some(partner) = partner else { continue };
            let out_rank = self.values[partner].shape.rank();
            match op {
                Opcode::Broadcast => {
                    let pinned = matches!(needs.operand(i), Some((Need::Exact(_), _)));
                    self.relate_broadcast(id, v, partner, site, pinned, target)?;
                }
                Opcode::Transpose => {
                    let dims: Option<DimVec> = inst
                        .attrs
                        .ints(KnownAttr::Dimensions)
                        .map(|d| d.iter().filter_map(|&x| usize::try_from(x).ok()).collect());
                    let Some(dims) = dims.filter(|d| d.len() == v_rank && v_rank == out_rank)
                    else {
                        return Err(
                            self.mismatch(id, "transpose dimensions do not match the ranks")
                        );
                    };
                    self.push(
                        v,
                        RelationKind::Movement {
                            out: partner,
                            transpose: Some(dims.into_iter().collect()),
                        },
                        site,
                        RelationSource::DataMovement,
                    );
                }
                Opcode::Reshape => {
                    self.push(
                        v,
                        RelationKind::Movement {
                            out: partner,
                            transpose: None,
                        },
                        site,
                        RelationSource::DataMovement,
                    );
                }
                _ if keeps && v_rank == out_rank && v_rank > 0 => {
                    self.push(
                        v,
                        RelationKind::Same { out: partner },
                        site,
                        RelationSource::LayoutPreservingUser { opcode: op },
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Relates the operand of an existing bitcast `id`: a bitcast is only
    /// valid in the layouts it was written with, so its operand must stay
    /// as it is.
    fn relate_existing_bitcast(&mut self, id: InstId, target: &TargetSpec) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let Some(&o) = inst.operands().first() else {
            return;
        };
        let leaves = self.leaf_values[o.index()].clone();
        let shapes = comp.inst(o).shape.array_leaves();
        let result = inst.shape.as_array();
        for (leaf, (&v, a)) in leaves.iter().zip(shapes).enumerate() {
            let layout = bitcast_side(target, a, result);
            let key = self.table.key(&layout);
            self.values[v].represent(&self.table, key);
            let site = Site::Operand {
                user: id,
                operand: 0,
                leaf: leaf as u32,
            };
            self.need(
                v,
                &Need::Exact(layout),
                site,
                RelationSource::Need(NeedSource::LayoutConstraint),
            );
        }
    }

    /// Relates the operands of call-like `id` to the parameters of the
    /// computations it calls (`call_targets`: operand number and callee):
    /// each operand must arrive in its parameter's layout.
    fn relate_call_operands(
        &mut self,
        id: InstId,
        call_targets: &[(usize, CompId)],
        ctx: &Context,
        target: &TargetSpec,
    ) {
        let inst = self.comp.inst(id);
        let op = inst.opcode;
        for &(operand, callee) in call_targets {
            let Some(sig) = ctx.callees.get(&callee) else {
                continue;
            };
            let param_index = match op {
                Opcode::Call | Opcode::Fusion | Opcode::AsyncStart => operand,
                _ => 0,
            };
            let Some(param) = sig.params.get(param_index) else {
                continue;
            };
            let Some(&o) = inst.operands().get(operand) else {
                continue;
            };
            let leaves = self.leaf_values[o.index()].clone();
            let params = param.array_leaves();
            let source = if op == Opcode::While {
                RelationSource::LoopState { body: callee }
            } else {
                RelationSource::CalleeParameter { callee }
            };
            for (leaf, (&v, p)) in leaves.iter().zip(params).enumerate() {
                let layout = given(target, p);
                let site = Site::Operand {
                    user: id,
                    operand: operand as u32,
                    leaf: leaf as u32,
                };
                self.need(v, &Need::Exact(layout), site, source);
            }
        }
    }

    /// Relates the operands an output of `id` aliases
    /// (`output_to_operand_aliasing`): an aliased output shares its
    /// operand's buffer, so the operand is read in the output's layout.
    fn relate_aliasing(&mut self, id: InstId) -> Result<(), ProblemError> {
        let comp = self.comp;
        let inst = comp.inst(id);
        for resolved in comp.operand_aliases(id) {
            let (alias, o) = (resolved.alias, resolved.operand);
            let (out_range, in_range) = (resolved.output_leaves, resolved.operand_leaves);
            if out_range.len() != in_range.len() {
                return Err(self.mismatch(
                    id,
                    "output_to_operand_aliasing pairs shapes of different structure",
                ));
            }
            let outs = self.leaf_values[id.index()].clone();
            let ins = self.leaf_values[o.index()].clone();
            for (out_leaf, in_leaf) in out_range.zip(in_range) {
                let (Some(&out), Some(&v)) = (outs.get(out_leaf), ins.get(in_leaf)) else {
                    continue;
                };
                if self.values[out].shape.rank() == self.values[v].shape.rank() && v != out {
                    let site = Site::Operand {
                        user: id,
                        operand: alias.operand as u32,
                        leaf: in_leaf as u32,
                    };
                    self.push(
                        v,
                        RelationKind::Same { out },
                        site,
                        RelationSource::LayoutPreservingUser {
                            opcode: inst.opcode,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// Relates broadcast `id`'s operand value `v` (read at `site`) to its
    /// result value `partner`. `pinned`: the target needs the operand in
    /// one layout at this use, the last relation pushed for it, which then
    /// pins it; the result is offered the order that agrees with the pin.
    fn relate_broadcast(
        &mut self,
        id: InstId,
        v: ValueId,
        partner: ValueId,
        site: Site,
        pinned: bool,
        target: &TargetSpec,
    ) -> Result<(), ProblemError> {
        let inst = self.comp.inst(id);
        let v_rank = self.values[v].shape.rank();
        let out_rank = self.values[partner].shape.rank();
        let dims: Option<DimVec> = inst
            .attrs
            .ints(KnownAttr::Dimensions)
            .map(|d| d.iter().filter_map(|&x| usize::try_from(x).ok()).collect());
        let Some(dims) = dims.filter(|d| d.len() == v_rank) else {
            return Err(self.mismatch(id, "broadcast dimensions do not match the operand rank"));
        };
        if v_rank == 0 {
            return Ok(());
        }
        // A need at this use (the last Need relation pushed for it) pins
        // the operand's layout.
        let pin = match self.relations.last() {
            Some(r) if pinned && r.v == v && r.site == site => match r.kind {
                RelationKind::Need { need_id, .. } => Some(need_id),
                _ => None,
            },
            _ => None,
        };
        if let Some(pin_id) = pin {
            // Offer the result the order that agrees with the pin: the
            // operand's dimensions in its order, the broadcast dimensions
            // more major.
            let pinned = self
                .table
                .get(self.values[v].key(pin_id))
                .minor_to_major
                .clone();
            let mut m2m: DimVec = pinned.iter().map(|&d| dims[d]).collect();
            m2m.extend((0..out_rank).rev().filter(|d| !dims.contains(d)));
            let layout = crate::tiling::layout_for(target, &self.values[partner].shape, &m2m);
            let key = self.table.key(&layout);
            self.values[partner].add_candidate(&self.table, key);
        }
        self.push(
            v,
            RelationKind::Broadcast {
                out: partner,
                dims: dims.into_iter().collect(),
                pin,
            },
            site,
            RelationSource::Broadcast,
        );
        Ok(())
    }

    /// Adds the relations of a call whose callee's signature is only a
    /// preference (see `calls.rs`): each operand and result leaf takes the
    /// callee's choice as its first candidate, at no price (the callee
    /// takes whatever layout is chosen, and the caller compares the real
    /// bytes afterwards); a loop's init is read in the loop's result layout
    /// (its state), and an async-start's operands in the layouts its tuple
    /// holds.
    fn relate_preferred(&mut self, id: InstId, callee: CompId, ctx: &Context, target: &TargetSpec) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let Some(sig) = ctx.callees.get(&callee) else {
            return;
        };
        let own = self.leaf_values[id.index()].clone();
        let layout_of = |a: &ArrayShape| given(target, a);
        // (value, preferred layout) per leaf.
        let mut prefs: Vec<(ValueId, Layout)> = Vec::new();
        match inst.opcode {
            Opcode::While => {
                let Some(&o) = inst.operands().first() else {
                    return;
                };
                let init = self.leaf_values[o.index()].clone();
                for (leaf, (&v, &w)) in init.iter().zip(&own).enumerate() {
                    let site = Site::Operand {
                        user: id,
                        operand: 0,
                        leaf: leaf as u32,
                    };
                    if v != w && self.values[w].shape.rank() > 0 {
                        self.push(
                            v,
                            RelationKind::Same { out: w },
                            site,
                            RelationSource::LoopState { body: callee },
                        );
                    }
                }
                for (&w, r) in own.iter().zip(sig.result.array_leaves()) {
                    prefs.push((w, layout_of(r)));
                }
            }
            Opcode::AsyncStart => {
                let (Some(r0), Some(r1)) = (inst.element_leaves(0), inst.element_leaves(1)) else {
                    return;
                };
                let held: SmallVec<[ValueId; 1]> = own
                    .get(r0.clone())
                    .map(SmallVec::from_slice)
                    .unwrap_or_default();
                let mut k = 0;
                for (i, &o) in inst.operands().iter().enumerate() {
                    for (leaf, &v) in self.leaf_values[o.index()].clone().iter().enumerate() {
                        if let Some(&w) = held.get(k) {
                            let site = Site::Operand {
                                user: id,
                                operand: i as u32,
                                leaf: leaf as u32,
                            };
                            if v != w && self.values[w].shape.rank() > 0 {
                                self.push(
                                    v,
                                    RelationKind::Same { out: w },
                                    site,
                                    RelationSource::CalleeParameter { callee },
                                );
                            }
                        }
                        k += 1;
                    }
                }
                let params: Vec<&ArrayShape> =
                    sig.params.iter().flat_map(Shape::array_leaves).collect();
                let result = sig.result.array_leaves();
                for (leaf, a) in r0.zip(params).chain(r1.zip(result)) {
                    if let Some(&w) = own.get(leaf) {
                        prefs.push((w, layout_of(a)));
                    }
                }
            }
            _ => {
                for (i, &o) in inst.operands().iter().enumerate() {
                    let Some(param) = sig.params.get(i) else {
                        continue;
                    };
                    let leaves = self.leaf_values[o.index()].clone();
                    for (&v, a) in leaves.iter().zip(param.array_leaves()) {
                        prefs.push((v, layout_of(a)));
                    }
                }
                for (&w, r) in own.iter().zip(sig.result.array_leaves()) {
                    prefs.push((w, layout_of(r)));
                }
            }
        }
        for (v, layout) in prefs {
            if self.values[v].shape.rank() > 0 {
                let key = self.table.key(&layout);
                self.values[v].add_candidate(&self.table, key);
            }
        }
    }

    /// Adds the relations of the computation's result.
    fn relate_root(&mut self, ctx: &Context, target: &TargetSpec) -> Result<(), ProblemError> {
        let comp = self.comp;
        let root = comp.root().ok_or_else(|| ProblemError::NoRoot {
            computation: comp.name.clone(),
        })?;
        let root_values = self.leaf_values[root.index()].clone();
        if let Some((result, reason)) = &ctx.result {
            let leaves = result.array_leaves();
            if leaves.len() != root_values.len() {
                return Err(self.mismatch(
                    root,
                    "the root's shape differs from the required result shape",
                ));
            }
            let mut auto = Vec::new();
            for (leaf, (&v, a)) in root_values.iter().zip(leaves).enumerate() {
                match &a.layout {
                    Some(l) => {
                        let (source, layout) = match reason {
                            BoundaryReason::Entry => (
                                RelationSource::EntryResult,
                                entry_device_layout(target, a, l),
                            ),
                            _ => (RelationSource::BoundaryResult, Layout::clone(l)),
                        };
                        self.need(
                            v,
                            &Need::Exact(layout),
                            Site::Root { leaf: leaf as u32 },
                            source,
                        );
                    }
                    None if a.rank() > 0 => auto.push(leaf as u32),
                    None => {}
                }
            }
            if ctx.is_entry {
                self.auto_result = auto;
            }
        }
        // input_output_alias: an AUTO result leaf aliased with a parameter
        // takes the parameter's layout.
        if ctx.is_entry {
            for alias in &ctx.io_alias {
                let Some((params, _)) = &ctx.params else {
                    break;
                };
                let result_auto = match &ctx.result {
                    Some((r, _)) => {
                        alias_leaf(r, &alias.output_index).is_some_and(|(_, a)| a.layout.is_none())
                    }
                    None => true,
                };
                let param = usize::try_from(alias.parameter)
                    .ok()
                    .and_then(|p| params.get(p));
                let Some(param) = param else { continue };
                let (Some((_, pa)), Some((leaf, _))) = (
                    alias_leaf(param, &alias.parameter_index),
                    alias_leaf(&comp.inst(root).shape, &alias.output_index),
                ) else {
                    continue;
                };
                let Some(&v) = root_values.get(leaf) else {
                    continue;
                };
                match (result_auto, &pa.layout) {
                    (true, Some(l)) => {
                        let layout = entry_device_layout(target, pa, l);
                        self.need(
                            v,
                            &Need::Exact(layout),
                            Site::Root { leaf: leaf as u32 },
                            RelationSource::Alias {
                                parameter: alias.parameter,
                            },
                        );
                    }
                    // Both sides AUTO: the result is read in whatever
                    // layout the parameter gets, as a loop body's root is
                    // read in its parameter's.
                    (true, None) => {
                        let param_value = comp
                            .parameters()
                            .into_iter()
                            .find(|&p| {
                                comp.inst(p).parameter_number().map(i64::from)
                                    == Some(alias.parameter)
                            })
                            .and_then(|p| {
                                alias_leaf(&comp.inst(p).shape, &alias.parameter_index)
                                    .map(|(k, _)| (p, k))
                            })
                            .and_then(|(p, k)| self.leaf_values[p.index()].get(k).copied());
                        if let Some(w) = param_value.filter(|&w| w != v) {
                            let source = RelationSource::Alias {
                                parameter: alias.parameter,
                            };
                            self.push(
                                v,
                                RelationKind::Same { out: w },
                                Site::Root { leaf: leaf as u32 },
                                source,
                            );
                        }
                    }
                    // A set result with an AUTO parameter fixed the
                    // parameter when it was defined.
                    _ => {}
                }
            }
        }
        // A loop body returns its state in the parameter's layout.
        if ctx.loop_body {
            let param = comp.parameters().first().copied();
            if let Some(param) = param {
                let param_values = self.leaf_values[param.index()].clone();
                for (leaf, (&v, &w)) in root_values.iter().zip(&param_values).enumerate() {
                    if v != w {
                        self.push(
                            v,
                            RelationKind::Same { out: w },
                            Site::Root { leaf: leaf as u32 },
                            RelationSource::LoopBackEdge,
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Seeds each free value's candidates: layouts its uses need, then the
    /// target default.
    fn seed_candidates(
        &mut self,
        relations: &TiSlice<RelationId, Relation>,
        retilings: &TiSlice<RetileId, crate::retile::Retiling>,
        target: &TargetSpec,
    ) {
        for rel in relations {
            if let RelationKind::Need { need_id, .. } = rel.kind {
                let value = &mut self.values[rel.v];
                let key = value.key(need_id);
                value.add_candidate(&self.table, key);
            }
        }
        if target.reduce.reduced_dims_minor {
            self.seed_row_reductions(target);
        }
        // Without tiling a default layout depends only on the rank: its
        // key is looked up once per rank rather than once per value.
        let mut default_by_rank: SmallVec<[Option<LayoutKey>; 8]> = SmallVec::new();
        for v in &mut self.values {
            let rank = v.shape.rank();
            let memo = if target.tiling.is_none() {
                default_by_rank.get(rank).copied().flatten()
            } else {
                None
            };
            let default = match memo {
                Some(key) => key,
                None => {
                    let key = self.table.key(&policy::default_layout(target, &v.shape));
                    if target.tiling.is_none() {
                        if default_by_rank.len() <= rank {
                            default_by_rank.resize(rank + 1, None);
                        }
                        default_by_rank[rank] = Some(key);
                    }
                    key
                }
            };
            v.add_candidate(&self.table, default);
        }
        if target.tiling.is_some() {
            self.seed_least_padding(target);
            self.seed_tile_aligned(retilings, target);
        }
    }

    /// On tiled targets, offers each free value of rank 2 or more the
    /// order that stores it with the least padding, when that is less
    /// than the default's: the two most minor physical dimensions are the
    /// pair that tiles best, the others stay in descending order (see
    /// `least_padding_order`). The cost model, which weighs padding, then
    /// decides against the needs and relayouts.
    fn seed_least_padding(&mut self, target: &TargetSpec) {
        // The layouts depend only on the element type, dimensions and
        // residence, and a model repeats a few shapes many times.
        type Seeds = (LayoutKey, SmallVec<[LayoutKey; 2]>);
        let mut by_shape: FxHashMap<(shape::PrimitiveType, shape::Dims, TileUse), Seeds> =
            FxHashMap::default();
        for v in &mut self.values {
            if v.fixed.is_some() || v.shape.rank() < 2 {
                continue;
            }
            let table = &mut self.table;
            let (least, combined) = by_shape
                .entry((v.shape.element_type, v.shape.dims.clone(), v.tile_use))
                .or_insert_with(|| {
                    let m2m =
                        crate::tiling::least_padding_order(target, &v.shape, v.tile_use, None);
                    let least = crate::tiling::layout_for_use(target, &v.shape, &m2m, v.tile_use);
                    // Where the target combines dimensions, the combined
                    // form of the default and least-padding layouts, when
                    // it stores no more bytes: the cost model weighs it
                    // with everything else (a combined tile can keep a
                    // reshape a bitcast).
                    let mut combined = SmallVec::new();
                    if v.tile_use == TileUse::Compute {
                        let default = policy::default_layout(target, &v.shape);
                        for base in [&default, &least] {
                            if let Some(c) = fewest_bytes_combined(target, &v.shape, base) {
                                combined.push(table.key(&c));
                            }
                        }
                    }
                    (table.key(&least), combined)
                })
                .clone();
            v.add_candidate(table, least);
            v.least_padding = Some(v.intern(table, least));
            for key in combined {
                v.add_candidate(table, key);
            }
        }
    }

    /// Gives each HBM-resident value (an AUTO entry parameter of a type
    /// the target has storage tilings for) the storage tiling of each of
    /// its candidate orders: such a parameter lives in HBM in a storage
    /// tiling where one is legal, whatever its readers compute in.
    fn storage_candidates(&mut self, target: &TargetSpec) {
        for v in &mut self.values {
            if v.tile_use != TileUse::Storage {
                continue;
            }
            let orders: Vec<DimVec> = v
                .candidates
                .iter()
                .map(|&c| self.table.get(v.key(c)).minor_to_major.clone())
                .collect();
            v.candidates.clear();
            for m2m in orders {
                let key = self.table.key(&crate::tiling::layout_for_use(
                    target,
                    &v.shape,
                    &m2m,
                    TileUse::Storage,
                ));
                v.add_candidate(&self.table, key);
            }
            if let Some(least) = v.least_padding {
                let m2m = self.table.get(v.key(least)).minor_to_major.clone();
                let key = self.table.key(&crate::tiling::layout_for_use(
                    target,
                    &v.shape,
                    &m2m,
                    TileUse::Storage,
                ));
                v.least_padding = Some(v.intern(&self.table, key));
            }
        }
    }

    /// On tiled targets, offers the layouts under which ops that may
    /// re-tile move whole tiles: a reduce input with the reduced
    /// dimensions most major (the kept ones in the result's order), a
    /// broadcast result with the operand's dimensions in the operand's
    /// order and the new ones more major, and
    /// the result of a slice, pad or concatenate with the dimensions it
    /// cuts or joins at an offset moved most major, out of the tiles. They
    /// come after the default: the cost model decides whether they win.
    fn seed_tile_aligned(
        &mut self,
        retilings: &TiSlice<RetileId, crate::retile::Retiling>,
        target: &TargetSpec,
    ) {
        use crate::retile::RetileOp;
        for t in retilings {
            let (operand, out) = (t.operand, t.out);
            let (value, m2m) = match &t.op {
                RetileOp::Reduce { reduced } => {
                    let result = &self.values[out];
                    let result_order = match result.candidates.first() {
                        Some(&c) => self.table.get(result.key(c)).minor_to_major.clone(),
                        None => policy::default_layout(target, &result.shape).minor_to_major,
                    };
                    let rank = self.values[operand].shape.rank();
                    (
                        operand,
                        crate::retile::aligned_reduce_input_order(&result_order, reduced, rank),
                    )
                }
                RetileOp::Broadcast { dims } => {
                    let source = &self.values[operand];
                    let operand_order = match source.candidates.first() {
                        Some(&c) => self.table.get(source.key(c)).minor_to_major.clone(),
                        None => policy::default_layout(target, &source.shape).minor_to_major,
                    };
                    let rank = self.values[out].shape.rank();
                    let mut m2m: DimVec = operand_order
                        .iter()
                        .filter_map(|&d| dims.get(d).copied())
                        .collect();
                    m2m.extend((0..rank).rev().filter(|d| !dims.contains(d)));
                    (out, (m2m.len() == rank).then_some(m2m))
                }
                op => {
                    let rank = self.values[out].shape.rank();
                    let cut: DimVec = (0..rank)
                        .filter(|&d| match op {
                            RetileOp::Slice(dims) => {
                                dims.get(d).is_some_and(|s| s.start != 0 || s.stride != 1)
                            }
                            RetileOp::Pad(dims) => {
                                dims.get(d).is_some_and(|p| p.low != 0 || p.interior != 0)
                            }
                            RetileOp::Concatenate { dim, offset } => *dim == d && *offset != 0,
                            _ => false,
                        })
                        .collect();
                    // Rank 2 is tiled whole: no order takes a dimension out of the tiles.
                    if cut.is_empty() || rank < 3 {
                        continue;
                    }
                    let default =
                        policy::default_layout(target, &self.values[out].shape).minor_to_major;
                    let mut m2m: DimVec = default
                        .iter()
                        .copied()
                        .filter(|d| !cut.contains(d))
                        .collect();
                    m2m.extend(cut.iter().rev().copied());
                    (out, Some(m2m))
                }
            };
            let Some(m2m) = m2m else { continue };
            if !accepts_more(&self.values[value]) {
                continue;
            }
            let layout = crate::tiling::layout_for(target, &self.values[value].shape, &m2m);
            let key = self.table.key(&layout);
            self.values[value].add_candidate(&self.table, key);
        }
    }

    /// On targets whose row-reduction emitter is faster (XLA GPU), offers
    /// each reduce input the layout that makes the reduction a row
    /// reduction: the reduced dimensions most minor, in reverse order of
    /// `dimensions`, then the kept dimensions in the result's order. It is
    /// a candidate ahead of the default, not a need: a value that another
    /// constraint pins keeps its layout rather than paying for a copy.
    fn seed_row_reductions(&mut self, target: &TargetSpec) {
        let comp = self.comp;
        for (id, inst) in comp.instructions() {
            if inst.opcode != Opcode::Reduce {
                continue;
            }
            let Some(reduced) = inst.attrs.ints(KnownAttr::Dimensions) else {
                continue;
            };
            let Ok(reduced) = reduced
                .iter()
                .map(|&d| usize::try_from(d))
                .collect::<Result<DimVec, _>>()
            else {
                continue;
            };
            // A variadic reduce takes N inputs, then N initial values.
            let inputs = inst.operands().len() / 2;
            let outputs = self.leaf_values[id.index()].clone();
            for (i, &o) in inst.operands()[..inputs].iter().enumerate() {
                let Some(&v) = self.leaf_values[o.index()].first() else {
                    continue;
                };
                let Some(&out) = outputs.get(i).or(outputs.first()) else {
                    continue;
                };
                let (operand, result) = (&self.values[v], &self.values[out]);
                let rank = operand.shape.rank();
                if !accepts_more(operand)
                    || reduced.iter().any(|&d| d >= rank)
                    || result.shape.rank() + reduced.len() != rank
                {
                    continue;
                }
                let kept: DimVec = (0..rank).filter(|d| !reduced.contains(d)).collect();
                let result_order = match result.candidates.first() {
                    Some(&c) => self.table.get(result.key(c)).minor_to_major.clone(),
                    None => policy::default_layout(target, &result.shape).minor_to_major,
                };
                let mut m2m: DimVec = reduced.iter().rev().copied().collect();
                m2m.extend(result_order.iter().filter_map(|&j| kept.get(j).copied()));
                if m2m.len() != rank {
                    continue;
                }
                let layout = crate::tiling::layout_for(target, &operand.shape, &m2m);
                let key = self.table.key(&layout);
                self.values[v].add_candidate(&self.table, key);
            }
        }
    }

    /// Spreads candidates along relations, so that a layout one value
    /// wants can be reached by its neighbours (a few rounds suffice: the
    /// solver also moves whole groups at once).
    fn propagate_candidates(
        &mut self,
        relations: &TiSlice<RelationId, Relation>,
        target: &TargetSpec,
        offers: Offers,
    ) {
        let mut induced = Induced::default();
        // Candidate lists only grow, so a list's length is its version.
        // Offering a source's candidates again when its list has not grown
        // since the last offer across the same relation adds nothing (what
        // was refused then is refused again: ranks do not change and a
        // full list stays full), so later rounds skip those offers; their
        // result is the same, sooner. Per relation: the source's length at
        // the last offer from `out` to `v`, and from `v` to `out`.
        let mut offered: TiVec<RelationId, [u32; 2]> = vec![[u32::MAX; 2]; relations.len()].into();
        let fresh = |offered: &mut TiVec<RelationId, [u32; 2]>,
                     r: RelationId,
                     direction: usize,
                     source: &Value|
         -> bool {
            let len = source.candidates.len() as u32;
            let slot = &mut offered[r][direction];
            let grown = *slot != len;
            *slot = len;
            let offer = grown || offers == Offers::All;
            if offer {
                hlo::count(Work::Offers, len as usize);
            }
            offer
        };
        for _round in 0..3 {
            let mut changed = false;
            for (r, rel) in relations.iter_enumerated() {
                let v = rel.v;
                let (values, table) = (&mut self.values, &mut self.table);
                let scratch = &mut induced.scratch;
                match &rel.kind {
                    RelationKind::Same { out } => {
                        let out = *out;
                        if fresh(&mut offered, r, 0, &values[out]) {
                            changed |= share_candidates(values, table, target, out, v, scratch);
                        }
                        if fresh(&mut offered, r, 1, &values[v]) {
                            changed |= share_candidates(values, table, target, v, out, scratch);
                        }
                    }
                    RelationKind::Broadcast { out, dims, .. } => {
                        if !accepts_more(&values[v]) || !fresh(&mut offered, r, 0, &values[*out]) {
                            continue;
                        }
                        candidate_keys_into(&values[*out], scratch);
                        for k in scratch.drain(..) {
                            let restricted =
                                restrict_layout(target, &values[v].shape, table.get(k), dims);
                            let key = table.key(&restricted);
                            changed |= values[v].add_candidate(table, key);
                        }
                    }
                    RelationKind::Movement { out, transpose } => {
                        let (out, transpose) = (*out, transpose.as_deref());
                        if accepts_more(&values[out]) && fresh(&mut offered, r, 1, &values[v]) {
                            changed |= induced.offer(self, target, (r, true), (v, out), transpose);
                        }
                        if accepts_more(&self.values[v])
                            && fresh(&mut offered, r, 0, &self.values[out])
                        {
                            changed |= induced.offer(self, target, (r, false), (out, v), transpose);
                        }
                    }
                    RelationKind::Need { .. } => {}
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// What candidate propagation keeps between offers: the layouts a
/// movement induces, and a buffer of keys.
#[derive(Default)]
struct Induced {
    /// The layouts a movement induces from one candidate, by (relation,
    /// direction, candidate): later rounds ask again for every candidate
    /// they already saw, and the algebra costs more than the lookup.
    by_relation: FxHashMap<(RelationId, bool, LayoutKey), SmallVec<[LayoutKey; 2]>>,
    /// What a reshape induces depends only on its two shapes and the
    /// layout, not on which reshape it is, and a large model repeats a
    /// few reshapes hundreds of times (the transformer: 884 reshapes of
    /// 11 shape pairs): a relation's first ask is answered from here
    /// when another reshape of the same shapes asked before. The table
    /// already holds the keys, so nothing is interned in another order.
    by_shapes: ReshapeKeys,
    scratch: Vec<LayoutKey>,
}

impl Induced {
    /// Offers `to` the layouts movement relation `at.0` induces from each
    /// of `from`'s candidates: from its operand to its result when `at.1`
    /// (forward), from its result to its operand otherwise. Returns
    /// whether `to` took one.
    fn offer(
        &mut self,
        p: &mut Problem<'_>,
        target: &TargetSpec,
        at: (RelationId, bool),
        (from, to): (ValueId, ValueId),
        transpose: Option<&[usize]>,
    ) -> bool {
        let (r, forward) = at;
        let mut changed = false;
        candidate_keys_into(&p.values[from], &mut self.scratch);
        for k in self.scratch.drain(..) {
            let (from_shape, to_shape) = (&p.values[from].shape, &p.values[to].shape);
            let mut compute = || {
                if forward {
                    induced_forward(&mut p.table, target, from_shape, k, to_shape, transpose)
                } else {
                    induced_backward(&mut p.table, target, from_shape, k, to_shape, transpose)
                }
            };
            let keys = self.by_relation.entry((r, forward, k)).or_insert_with(|| {
                if transpose.is_some() {
                    return compute();
                }
                self.by_shapes
                    .entry((from_shape.clone(), to_shape.clone(), forward, k))
                    .or_insert_with(compute)
                    .clone()
            });
            for &key in keys.iter() {
                changed |= p.values[to].add_candidate(&p.table, key);
            }
        }
        changed
    }
}

/// Which offers later propagation rounds make (see `propagate_candidates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offers {
    /// Every relation, every round.
    #[cfg_attr(not(test), allow(dead_code))]
    All,
    /// Not across a relation whose source has gained no candidate since
    /// the last offer: the same candidates, sooner.
    SkipStale,
}

/// The needs of every instruction of `order` that `define` or `relate`
/// reads, by node index (`bound` slots).
///
/// A target's needs of one instruction depend only on the instruction and
/// its operands' shapes, so they are computed up front, on all cores for
/// a large computation: this is the largest share of building a problem.
fn needs_of(
    comp: &Computation,
    target: &TargetSpec,
    order: &[InstId],
    bound: usize,
) -> Vec<Option<policy::InstNeeds>> {
    use rayon::prelude::*;
    let wanted = |id: InstId| !reads_no_needs(comp.inst(id).opcode);
    let mut needs: Vec<Option<policy::InstNeeds>> = Vec::with_capacity(bound);
    needs.resize_with(bound, || None);
    let Some(grain) = Parallelism::splits(Split::LayoutNeeds, order.len()) else {
        for &id in order {
            if wanted(id) {
                needs[id.index()] = Some(policy::inst_needs(target, comp, id));
            }
        }
        return needs;
    };
    needs
        .par_iter_mut()
        .enumerate()
        .with_min_len(grain)
        .for_each(|(i, slot)| {
            let id = InstId::new(i);
            if comp.get(id).is_some() && wanted(id) {
                *slot = Some(policy::inst_needs(target, comp, id));
            }
        });
    needs
}

/// The computations call-like `inst` calls, each with the number of the
/// operand that becomes its parameter (a conditional's branch operands
/// after the index; every operand of a call, fusion or async-start; a
/// loop's init), or none for other ops.
fn call_targets(inst: &hlo::Instruction) -> Vec<(usize, CompId)> {
    match inst.opcode {
        Opcode::While => inst.called_body().map(|c| (0, c)).into_iter().collect(),
        Opcode::Call | Opcode::Fusion | Opcode::AsyncStart => match inst.called_body() {
            Some(c) => (0..inst.operands().len()).map(|i| (i, c)).collect(),
            None => vec![],
        },
        Opcode::Conditional => inst
            .attrs
            .called_computations()
            .enumerate()
            .map(|(j, c)| (j + 1, c))
            .collect(),
        _ => vec![],
    }
}

/// The fixed layout of each leaf of an instruction's result, if any.
type Fixes = SmallVec<[Option<(Layout, FixReason)>; 1]>;

/// The layout `a` is written with, or the target's default for it.
fn given(target: &TargetSpec, a: &ArrayShape) -> Layout {
    a.layout
        .as_deref()
        .cloned()
        .unwrap_or_else(|| policy::default_layout(target, a))
}

/// The fixed layouts of the results of instruction `id` of `comp` that
/// the target's `needs` set: custom-call results, a result produced in the
/// layout its same-rank operands are needed in (ops that keep their
/// layout), and results needed with given most minor dimensions.
fn needed_fixes(
    comp: &Computation,
    id: InstId,
    target: &TargetSpec,
    needs: &policy::InstNeeds,
    fixed: &mut Fixes,
) {
    let inst = comp.inst(id);
    let leaves = inst.shape.array_leaves();
    for (i, l) in needs.result_leaves().iter().enumerate() {
        if let (Some(l), Some(slot), Some(a)) = (l, fixed.get_mut(i), leaves.get(i)) {
            *slot = Some((
                crate::tiling::device_layout(target, a, l),
                FixReason::CustomCall,
            ));
        }
    }
    // An op that keeps its layout, whose same-rank operands the
    // target needs in one layout, produces that layout itself
    // (XLA CPU: every operand row-major makes elementwise
    // results row-major).
    if target.keeps_layout(inst.opcode)
        && let Some(a) = leaves.first()
    {
        let forced = needs.operand_needs().find_map(|(i, n, src)| match n {
            Need::Exact(l)
                if inst
                    .operands()
                    .get(i)
                    .and_then(|&o| comp.inst(o).shape.as_array())
                    .is_some_and(|x| x.rank() == a.rank()) =>
            {
                Some((l.clone(), src))
            }
            _ => None,
        });
        if let (Some((l, src)), Some(slot)) = (forced, fixed.first_mut())
            && slot.is_none()
            && a.rank() > 0
        {
            *slot = Some((l, FixReason::OperandNeed(src)));
        }
    }
    // A result needed with given most minor dimensions (a TPU
    // convolution's feature dimension) takes the layout that
    // stores it with the least padding among those: a result is
    // produced in its layout, no copy can serve it.
    let result_need = match needs.result() {
        Some((Need::Exact(l), source)) => Some((l, source)),
        Some((Need::Minor(m), source)) => Some((&m.preferred, source)),
        _ => None,
    };
    if let Some((l, source)) = result_need {
        let reason = match source {
            NeedSource::TargetRule(rule) => FixReason::TargetRule(rule),
            NeedSource::CustomCall
            | NeedSource::LayoutConstraint
            | NeedSource::TargetDefault
            | NeedSource::Outfeed => FixReason::CustomCall,
        };
        for (i, a) in leaves.iter().enumerate() {
            if fixed[i].is_none() && a.rank() == l.minor_to_major.len() {
                let layout = if i == 0 {
                    l.clone()
                } else {
                    policy::default_layout(target, a)
                };
                fixed[i] = Some((layout, reason));
            }
        }
    }
}

/// Opcodes whose needs `define` and `relate` never read: forwarding
/// instructions, parameters, existing bitcasts and calls are handled
/// structurally.
fn reads_no_needs(op: Opcode) -> bool {
    policy::forwards_operands(op) || op == Opcode::Parameter
}

/// Layouts a reshape induces, by (the shape the layout is on, the other
/// shape, direction, layout key); see `Problem::propagate_candidates`.
/// The shapes are the values' shared logical shapes, compared by value.
type ReshapeKeys =
    FxHashMap<(Arc<ArrayShape>, Arc<ArrayShape>, bool, LayoutKey), SmallVec<[LayoutKey; 2]>>;

/// The keys relation `at` (relation, direction, source key) induces: from
/// its own memo, else (for a reshape) from another reshape of the same
/// The layouts of a movement's result (of shape `out_shape`) that its
/// operand (of shape `operand_shape`) in layout `k` induces: the one the
/// algebra derives, in the policy's tiling, and on a tiled target, for a
/// reshape, the orders whose policy tiling keeps it a bitcast.
fn induced_forward(
    table: &mut LayoutTable,
    target: &TargetSpec,
    operand_shape: &ArrayShape,
    k: LayoutKey,
    out_shape: &ArrayShape,
    transpose: Option<&[usize]>,
) -> SmallVec<[LayoutKey; 2]> {
    let mut keys = SmallVec::new();
    let a = with_layout(operand_shape, table.get(k).clone());
    let induced = match transpose {
        Some(dims) => algebra::transpose_output_layout(&a, dims),
        None => algebra::reshape_output_layout(&a, out_shape),
    };
    if let Some(l) = induced.map(|l| policy_tiled(target, out_shape, l)) {
        keys.push(table.key(&l));
    }
    // Tiled reshapes: search the orders whose policy tiling keeps the
    // reshape a bitcast.
    if transpose.is_none() && target.tiling.is_some() {
        let tiling = |o: &[usize]| crate::tiling::layout_for(target, out_shape, o);
        for l in algebra::tiled_reshape_output_layouts(&a, out_shape, &tiling) {
            keys.push(table.key(&l));
        }
    }
    keys
}

/// The layout of a movement's operand (of shape `operand_shape`) that its
/// result (of shape `out_shape`) in layout `k` induces, in the policy's
/// tiling.
fn induced_backward(
    table: &mut LayoutTable,
    target: &TargetSpec,
    out_shape: &ArrayShape,
    k: LayoutKey,
    operand_shape: &ArrayShape,
    transpose: Option<&[usize]>,
) -> SmallVec<[LayoutKey; 2]> {
    let a = with_layout(out_shape, table.get(k).clone());
    let induced = match transpose {
        Some(dims) => algebra::transpose_operand_layout(&a, dims),
        None => algebra::reshape_operand_layout(operand_shape, &a),
    };
    induced
        .map(|l| table.key(&policy_tiled(target, operand_shape, l)))
        .into_iter()
        .collect()
}

/// On a tiled target, a derived layout keeps its dimension order but takes
/// the policy's tiling: the policy decides tiles, and the cost model decides
/// whether a transpose or reshape stays a bitcast under them.
fn policy_tiled(target: &TargetSpec, a: &ArrayShape, layout: Layout) -> Layout {
    if target.tiling.is_some() {
        crate::tiling::layout_for(target, a, &layout.minor_to_major)
    } else {
        layout
    }
}

/// The `*`-combined variant of `base` that stores `a` in the fewest bytes,
/// when it stores no more than `base` (fewer folds on ties): combining
/// then costs no padding, and may keep a reshape a bitcast.
fn fewest_bytes_combined(target: &TargetSpec, a: &ArrayShape, base: &Layout) -> Option<Layout> {
    let limit = algebra::storage_bytes_in(a, base);
    let mut best: Option<(u64, Layout)> = None;
    for variant in crate::tiling::combined_variants(target, a, base) {
        let bytes = algebra::storage_bytes_in(a, &variant);
        if bytes <= limit && best.as_ref().is_none_or(|(b, _)| bytes < *b) {
            best = Some((bytes, variant));
        }
    }
    best.map(|(_, l)| l)
}

/// True when a value may still gain candidates.
fn accepts_more(v: &Value) -> bool {
    v.fixed.is_none() && v.candidates.len() < MAX_CANDIDATES
}

/// Copies a value's candidate keys into `out` (cleared first).
fn candidate_keys_into(value: &Value, out: &mut Vec<LayoutKey>) {
    out.clear();
    out.extend(value.candidates.iter().map(|&c| value.key(c)));
}

/// Offers `from`'s candidates to `to` (same rank). Skips the work when `to`
/// cannot take more, the common case for fixed values.
fn share_candidates(
    values: &mut TiSlice<ValueId, Value>,
    table: &mut LayoutTable,
    target: &TargetSpec,
    from: ValueId,
    to: ValueId,
    scratch: &mut Vec<LayoutKey>,
) -> bool {
    if !accepts_more(&values[to]) {
        return false;
    }
    candidate_keys_into(&values[from], scratch);
    let rank = values[to].shape.rank();
    // Another element type, or on a tiled target other dimensions, may
    // need the order with the value's own tiling.
    let retile = target.tiling.is_some()
        || !crate::tiling::tiled_alike(Some(target), &values[from].shape, &values[to].shape);
    let mut changed = false;
    for k in scratch.drain(..) {
        if table.get(k).minor_to_major.len() != rank {
            continue;
        }
        let k = if retile {
            let layout = crate::tiling::same_layout_for(
                target,
                table.get(k),
                &values[from].shape,
                &values[to].shape,
            );
            table.key(&layout)
        } else {
            k
        };
        changed |= values[to].add_candidate(table, k);
    }
    changed
}

/// The layout a broadcast's operand is read in: the output's order
/// restricted to the broadcast dimensions, renumbered to operand dimensions,
/// with the target's tiling for the operand.
pub fn restrict_layout(
    target: &TargetSpec,
    operand: &ArrayShape,
    out_layout: &Layout,
    dims: &[usize],
) -> Layout {
    let m2m: DimVec = out_layout
        .minor_to_major
        .iter()
        .filter_map(|d| dims.iter().position(|x| x == d))
        .collect();
    crate::tiling::layout_for(target, operand, &m2m)
}

/// The array leaf at a tuple index path, with its flat leaf index.
fn alias_leaf<'s>(s: &'s Shape, index: &[i64]) -> Option<(usize, &'s ArrayShape)> {
    let mut flat = 0;
    let mut cur = s;
    for &i in index {
        let i = usize::try_from(i).ok()?;
        let elements = cur.tuple_elements()?;
        flat += elements
            .get(..i)?
            .iter()
            .map(Shape::array_leaf_count)
            .sum::<usize>();
        cur = elements.get(i)?;
    }
    cur.as_array().map(|a| (flat, a))
}

/// The layout an entry parameter or result lives in inside the module: the
/// device layout of the given one, in the default memory space. As in XLA,
/// a memory space the entry computation layout names (`S(n)`, host memory)
/// says where the caller keeps the buffer; it stays in the entry layout and
/// is not propagated to instructions.
fn entry_device_layout(target: &TargetSpec, a: &ArrayShape, given: &Layout) -> Layout {
    let mut layout = crate::tiling::device_layout(target, a, given);
    layout.memory_space = 0;
    layout
}

/// [`entry_device_layout`] for an entry parameter: a buffer resident in
/// HBM, which takes the target's storage tiling where one is legal.
fn entry_parameter_layout(target: &TargetSpec, a: &ArrayShape, given: &Layout) -> Layout {
    let mut layout = crate::tiling::device_layout_for_use(target, a, given, TileUse::Storage);
    layout.memory_space = 0;
    layout
}

/// The given layout of the entry result leaf that `input_output_alias`
/// ties to leaf `leaf` of entry parameter `parameter` (of shape `param`).
fn aliased_result_layout(
    ctx: &Context,
    parameter: usize,
    param: &Shape,
    leaf: usize,
) -> Option<Layout> {
    let (result, _) = ctx.result.as_ref()?;
    ctx.io_alias.iter().find_map(|alias| {
        if usize::try_from(alias.parameter).ok()? != parameter
            || alias_leaf(param, &alias.parameter_index)?.0 != leaf
        {
            return None;
        }
        alias_leaf(result, &alias.output_index)?
            .1
            .layout
            .as_deref()
            .cloned()
    })
}

/// The layout an input bitcast's side was written with: its own, or the
/// plain descending one.
fn written(a: &ArrayShape) -> Layout {
    a.layout
        .as_deref()
        .cloned()
        .unwrap_or_else(|| Layout::descending(a.rank()))
}

/// The layout of side `a` of an input bitcast whose other side is `other`.
/// A side written with a layout keeps it. When neither side names one, both
/// take the target's defaults if those make a bitcast (scalars and
/// vectors of one width tile alike on tpu: `f32[]{:T(128)}` to
/// `s32[]{:T(128)}`), and otherwise the plain descending layout, since the
/// defaults may tile one side only (`f32[4,8]` to `f32[32]`); the input
/// check proves the written pair. A scalar is always tiled on a tiled
/// target (`tiling::scalar_layout`), so there an untiled side of a bitcast
/// to or from a scalar counts as unnamed too (`s32[1]{0}` to `s32[]` in an
/// XLA fusion becomes `s32[1]{0:T(128)}` to `s32[]{:T(128)}`).
fn bitcast_side(target: &TargetSpec, a: &ArrayShape, other: Option<&ArrayShape>) -> Layout {
    let scalar_involved =
        target.tiling.is_some() && (a.rank() == 0 || other.is_some_and(|o| o.rank() == 0));
    let unnamed = |x: &ArrayShape| {
        x.layout
            .as_ref()
            .is_none_or(|l| scalar_involved && l.tiles.is_empty())
    };
    let Some(other) = other.filter(|o| unnamed(a) && unnamed(o)) else {
        return written(a);
    };
    let defaulted = |x: &ArrayShape| {
        let mut x = x.clone();
        x.layout = Some(policy::default_layout(target, &x).into());
        x
    };
    let (from, to) = (defaulted(a), defaulted(other));
    // Written without layouts, the bitcast is a row-major reshape: element
    // i of one side is element i of the other in row-major order. The
    // defaults must keep that meaning, not merely make some bitcast. Equal
    // sizes are not enough (`pred[4,5]` and `pred[20]` under their default
    // packed tiles), and neither is a bitcast that reads the bytes another
    // way: `s32[8,1280]{1,0:T(8,128)}` to `s32[10240]{0:T(1024)}` is a
    // bitcast of the tiled buffer, but its element 128 is row 1's first,
    // where the reshape's is row 0's 129th.
    if shape::is_bitcast(&from, &to).is_ok_and(|v| v.bitcast) {
        policy::default_layout(target, a)
    } else {
        written(a)
    }
}
