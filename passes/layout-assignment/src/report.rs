//! What the pass did and why, as plain data. The CLI and the server turn
//! it into JSON; nothing here knows serde.

use std::sync::Arc;

use shape::{Layout, SharedLayout};

/// Why a copy was needed, in the categories compiler engineers ask about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CopyCause {
    /// The entry computation layout (parameters or result).
    Entry,
    /// A custom call's layout constraints, or a `LayoutConstraint`.
    CustomCall,
    /// A target's requirement for the consuming op.
    TargetRequirement,
    /// Users that need different layouts of one value.
    ConflictingUsers,
    /// A while loop's state must keep one layout.
    LoopState,
    /// A called computation's parameter or result layout.
    CallSignature,
    /// `input_output_alias` ties a result to a parameter.
    Alias,
    /// A `bitcast` in the input fixes its operand's layout.
    ExistingBitcast,
    /// A transfer to or from the host fixes the layout: an outfeed sends
    /// its operand in `outfeed_shape`'s layout, an infeed delivers its
    /// buffer in its own declared layout.
    HostTransfer,
    /// A buffer resident in HBM in a storage tiling (an 8- or 4-bit entry
    /// parameter on TPU) is read where the target computes, which needs a
    /// compute tiling.
    ComputeTiling,
}

impl CopyCause {
    /// A short stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            CopyCause::Entry => "entry",
            CopyCause::CustomCall => "custom_call",
            CopyCause::TargetRequirement => "target_requirement",
            CopyCause::ConflictingUsers => "conflicting_users",
            CopyCause::LoopState => "loop_state",
            CopyCause::CallSignature => "call_signature",
            CopyCause::Alias => "alias",
            CopyCause::ExistingBitcast => "existing_bitcast",
            CopyCause::HostTransfer => "host_transfer",
            CopyCause::ComputeTiling => "compute_tiling",
        }
    }
}

/// One inserted copy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CopyRecord {
    /// The computation it is in.
    pub computation: String,
    /// The new instruction's name.
    pub name: String,
    /// The copied value: its defining instruction, with a tuple index path
    /// when it is a tuple leaf.
    pub value: String,
    /// The value's layout (shared: the copies of a computation mostly
    /// move between a few layouts).
    pub from: SharedLayout,
    /// The layout the copy produces.
    pub to: SharedLayout,
    /// Bytes the copy writes, tile padding included.
    pub bytes: u64,
    /// The instructions (or `ROOT`) that read the copy.
    pub users: Vec<String>,
    /// The category of the constraint that forced it.
    pub cause: CopyCause,
    /// A sentence naming the constraint, shared with the plan it comes from.
    pub why: Arc<str>,
}

/// A transpose or reshape that moves data (not a bitcast).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MovementRecord {
    /// The computation.
    pub computation: String,
    /// The instruction.
    pub name: String,
    /// Bytes it writes.
    pub bytes: u64,
}

/// An op that re-tiles: its data crosses tile boundaries under the layouts
/// chosen (tiled targets only; see `retile.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RetileRecord {
    /// The computation.
    pub computation: String,
    /// The instruction.
    pub name: String,
    /// Bytes of the buffer whose elements move: a reduce's input, the
    /// result of the other ops.
    pub bytes: u64,
    /// What crosses the tile boundaries, e.g. `slice [3:..:1] of dimension
    /// 1, tiled by 8`.
    pub why: String,
}

/// A value kept in an order that stores more padding than another order
/// would (tiled targets): where a requirement or a relayout and the
/// padding disagreed, what the cost model weighed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OrientationRecord {
    /// The computation.
    pub computation: String,
    /// The value: its defining instruction, with a leaf number in a tuple.
    pub value: String,
    /// Its layout.
    pub layout: Layout,
    /// The layout that would store it with the least padding.
    pub least_padding: Layout,
    /// Bytes of padding its layout stores beyond that one's.
    pub extra_padding: u64,
    /// How many values share its layout and would move with it.
    pub group: usize,
    /// Why it stays: what moving would cost.
    pub why: String,
}

/// An entry leaf whose given layout named no tiles and that the target
/// tiled (device buffers are always tiled).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TiledEntryLayout {
    /// `parameter N` (with a leaf number inside a tuple) or `result`.
    pub position: String,
    /// The layout the entry computation layout gave.
    pub given: Layout,
    /// The layout with the target's tiles.
    pub layout: Layout,
}

/// An AUTO entry layout the pass chose.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FilledLayout {
    /// `parameter N` (with a tuple path) or `result`.
    pub position: String,
    /// The layout chosen.
    pub layout: Layout,
}

/// The pass's report for a module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Every inserted copy.
    pub copies: Vec<CopyRecord>,
    /// Every data-moving transpose or reshape.
    pub movements: Vec<MovementRecord>,
    /// Every copy of the input that the chosen layouts make move data (its
    /// operand and result laid out differently): the input's own copies
    /// are not the pass's to remove, but they move bytes all the same.
    pub input_copies: Vec<MovementRecord>,
    /// Every op that re-tiles under the chosen layouts.
    pub retilings: Vec<RetileRecord>,
    /// Values in an order that stores more padding than another would.
    pub orientations: Vec<OrientationRecord>,
    /// AUTO entry layouts filled in.
    pub filled: Vec<FilledLayout>,
    /// Entry layouts that named no tiles and got the target's tiling.
    pub tiled_entry: Vec<TiledEntryLayout>,
    /// The entry computation layout after the pass, every leaf's final
    /// layout included (as the printed `entry_computation_layout` shows).
    pub entry_layout: Option<hlo::ComputationLayout>,
    /// Per computation: values, relations, search sweeps and moves.
    pub computations: Vec<ComputationStats>,
}

/// Size and effort of one computation's assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputationStats {
    /// The computation.
    pub name: String,
    /// Array values assigned.
    pub values: usize,
    /// Relations between them.
    pub relations: usize,
    /// Search sweeps.
    pub sweeps: usize,
    /// Improving moves.
    pub moves: usize,
    /// Tile padding bytes that dimension combining saved.
    pub padding_saved: u64,
    /// What the assignment costs in the cost model's units (bytes, under
    /// the target's weights): copies, data movement, weighed padding.
    pub cost: u64,
    /// A lower bound on the cost of every assignment over the values'
    /// candidate layouts (the exact solver's; none from the heuristic).
    pub lower_bound: Option<u64>,
    /// The cost is proven the least over the candidate layouts: by the
    /// exact solver, or because it is zero.
    pub proven_optimal: bool,
}

impl ComputationStats {
    /// Records what the exact solver proved (`None`: the heuristic ran).
    /// The bound is rounded up to whole bytes only where the weights make
    /// every cost whole (a relative tolerance absorbs the solver's round
    /// off), and never exceeds the cost.
    pub(crate) fn set_optimality(&mut self, bound: Option<&crate::exact::Bound>, whole: bool) {
        match bound {
            None => {
                self.lower_bound = None;
                self.proven_optimal = self.cost == 0;
            }
            Some(b) if b.proven => {
                self.lower_bound = Some(self.cost);
                self.proven_optimal = true;
            }
            Some(b) => {
                let slack = 1e-6 * b.lower.abs().max(1.0);
                let lower = if whole {
                    (b.lower - slack).ceil()
                } else {
                    (b.lower - slack).floor()
                };
                self.lower_bound = Some((lower.max(0.0) as u64).min(self.cost));
                self.proven_optimal = self.lower_bound == Some(self.cost);
            }
        }
    }
}

/// The cost of an assignment against the best possible, summed over a
/// module's computations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Optimality {
    /// The cost of the assignment (bytes, under the target's weights).
    pub cost: u64,
    /// The sum of the computations' lower bounds, when every computation
    /// has one.
    pub lower_bound: Option<u64>,
    /// Computations whose assignment is proven optimal.
    pub proven_optimal_computations: usize,
    /// Computations assigned.
    pub computations: usize,
}

impl Report {
    /// Drops the lists' spare room (a report kept for a long time holds a
    /// computation's few records, in lists that grew to four at least).
    pub fn shrink_to_fit(&mut self) {
        self.copies.shrink_to_fit();
        self.movements.shrink_to_fit();
        self.input_copies.shrink_to_fit();
        self.retilings.shrink_to_fit();
        self.orientations.shrink_to_fit();
        self.filled.shrink_to_fit();
        self.tiled_entry.shrink_to_fit();
        self.computations.shrink_to_fit();
    }

    /// [`Report::extend`] with a copy of `other`'s records, made in place:
    /// a session merges every computation's report on each run, and
    /// cloning each whole report first allocated its lists twice.
    pub fn extend_from(&mut self, other: &Report) {
        self.copies.extend_from_slice(&other.copies);
        self.movements.extend_from_slice(&other.movements);
        self.input_copies.extend_from_slice(&other.input_copies);
        self.retilings.extend_from_slice(&other.retilings);
        self.orientations.extend_from_slice(&other.orientations);
        self.filled.extend_from_slice(&other.filled);
        self.tiled_entry.extend_from_slice(&other.tiled_entry);
        if other.entry_layout.is_some() {
            self.entry_layout.clone_from(&other.entry_layout);
        }
        self.computations.extend_from_slice(&other.computations);
    }

    /// Appends another report's records after this one's (the entry
    /// layout, when the other has one, replaces this one's).
    pub fn extend(&mut self, other: Report) {
        append(&mut self.copies, other.copies);
        append(&mut self.movements, other.movements);
        append(&mut self.input_copies, other.input_copies);
        append(&mut self.retilings, other.retilings);
        append(&mut self.orientations, other.orientations);
        append(&mut self.filled, other.filled);
        append(&mut self.tiled_entry, other.tiled_entry);
        if other.entry_layout.is_some() {
            self.entry_layout = other.entry_layout;
        }
        append(&mut self.computations, other.computations);
    }

    /// Total bytes written by copies.
    pub fn copy_bytes(&self) -> u64 {
        self.copies.iter().map(|c| c.bytes).sum()
    }

    /// Total bytes written by data-moving transposes and reshapes.
    pub fn movement_bytes(&self) -> u64 {
        self.movements.iter().map(|m| m.bytes).sum()
    }

    /// Total bytes that the input's own copies move under the chosen
    /// layouts.
    pub fn input_copy_bytes(&self) -> u64 {
        self.input_copies.iter().map(|m| m.bytes).sum()
    }

    /// Total bytes that re-tiling ops move.
    pub fn retile_bytes(&self) -> u64 {
        self.retilings.iter().map(|r| r.bytes).sum()
    }

    /// The cost of the assignment against the best possible.
    pub fn optimality(&self) -> Optimality {
        let lower_bound = self
            .computations
            .iter()
            .map(|c| c.lower_bound)
            .sum::<Option<u64>>();
        Optimality {
            cost: self.computations.iter().map(|c| c.cost).sum(),
            lower_bound,
            proven_optimal_computations: self
                .computations
                .iter()
                .filter(|c| c.proven_optimal)
                .count(),
            computations: self.computations.len(),
        }
    }

    /// Total tile padding saved by dimension combining.
    pub fn padding_saved(&self) -> u64 {
        self.computations.iter().map(|c| c.padding_saved).sum()
    }
}

/// Moves `more` after `list`'s records. Into an empty list it moves the
/// whole vector: a module of one large computation (half a million
/// copies) held its records twice while they were moved one by one.
fn append<T>(list: &mut Vec<T>, mut more: Vec<T>) {
    if list.is_empty() {
        *list = more;
    } else {
        list.append(&mut more);
    }
}
