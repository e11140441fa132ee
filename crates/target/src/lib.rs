//! Target specifications: what a backend requires of layouts, as data.
//!
//! A target (`cpu`, `gpu`, `tpu`, or a user's own file) is a YAML file
//! under `targets/`. This crate holds the typed spec, its loader, and what
//! the spec means for an instruction: [`policy`] (the layouts a target
//! requires of an instruction's operands and result) and [`tiling`] (the
//! tiling of an array in a given order). The passes ask these; adding a
//! target never needs Rust.
//!
//! Architecture invariant: the spec types carry no serde derive; the YAML
//! wire format lives in the private `yaml` module and is converted here, so
//! the rest of Tessera sees plain data.

pub mod policy;
pub mod tiling;
mod yaml;

use hlo::Opcode;
use shape::{DimVec, PrimitiveType, Tile};

pub use yaml::{LoadError, builtin_names, load_builtin, load_file, load_str};

/// A whole target: default layouts, per-opcode requirements, tiling and
/// cost weights.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetSpec {
    /// Short name, such as `cpu`.
    pub name: String,
    /// What the target models and where its rules come from.
    pub description: String,
    /// The layout of values no constraint decides.
    pub default_order: DimOrder,
    /// The requirement on every array operand that no rule constrains and
    /// that is not forwarded (a tuple element, a while state). XLA CPU
    /// makes every such operand row-major; GPU and TPU leave them free.
    pub operand_default: Option<Requirement>,
    /// Opcodes that must keep their operands' layout beyond XLA's list.
    pub layout_preserving_extra: Vec<Opcode>,
    /// Opcodes that may change layout although XLA's list says they keep it.
    pub layout_changing_extra: Vec<Opcode>,
    /// Per-opcode requirements; the first matching rule applies.
    pub rules: Vec<Rule>,
    /// How reductions like their operands laid out.
    pub reduce: ReducePolicy,
    /// How arrays are tiled, when the target tiles them.
    pub tiling: Option<TilingPolicy>,
    /// Weights of the cost model.
    pub cost: CostWeights,
}

impl TargetSpec {
    /// True when the output and every same-rank operand of `op` must share
    /// one layout on this target.
    pub fn keeps_layout(&self, op: Opcode) -> bool {
        if self.layout_changing_extra.contains(&op) {
            return false;
        }
        self.layout_preserving_extra.contains(&op) || !op.can_change_layout()
    }
}

/// A dimension order used as a default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimOrder {
    /// `{rank-1, ..., 0}`: row-major, XLA's default.
    Descending,
    /// `{0, ..., rank-1}`: column-major.
    Ascending,
}

/// A layout requirement on an operand or a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// Descending `minor_to_major`.
    RowMajor,
    /// Ascending `minor_to_major`.
    ColMajor,
    /// The target's default order.
    Default,
    /// A dot operand or result in a layout a GEMM library accepts: batch
    /// dimensions most major, row and column dimensions each contiguous
    /// (XLA GPU's `MatrixLayout`). Any such layout satisfies it; the
    /// default is preferred when the current one does not.
    MatrixLayout,
    /// A dot operand with the contracting dimensions most minor, in the
    /// order (batch, non-contracting, contracting) from major to minor.
    ContractingMinor,
    /// The default layout with the two most minor dimensions swapped
    /// (LAPACK's column-major matrices).
    Fortran,
    /// Convolution operands with the feature dimensions most minor
    /// (NHWC-like), batch most major.
    FeatureMinor,
    /// Convolution operands with the spatial dimensions most minor
    /// (NCHW-like).
    SpatialMinor,
    /// Convolution operands and results with the feature dimension most
    /// minor and the other dimensions in any order: the cost model picks
    /// it (TPU convolutions put the feature dimension in the lanes and
    /// order the rest to cut padding).
    FeatureMostMinor,
    /// The dimension named by the instruction's integer attribute (such as
    /// `dimensions={1}` on an all-gather) moved to the most major place.
    DimMajor(String),
    /// An exact `minor_to_major`.
    Fixed(DimVec),
}

/// One per-opcode rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// A name used in reports: "the `eigen-dot` rule of target cpu".
    pub name: String,
    /// The opcodes it applies to.
    pub ops: Vec<Opcode>,
    /// For custom calls: the targets it applies to (empty: any).
    pub custom_call_targets: Vec<String>,
    /// Extra conditions, all of which must hold.
    pub when: Condition,
    /// Requirements on operands.
    pub operands: OperandRequirements,
    /// A requirement on the result (every array leaf).
    pub result: Option<Requirement>,
    /// Why the backend needs this, quoted in copy explanations.
    pub reason: String,
}

/// Which operands a rule constrains.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum OperandRequirements {
    /// None.
    #[default]
    None,
    /// Every array operand.
    All(Requirement),
    /// Operands by index.
    ByIndex(Vec<(usize, Requirement)>),
}

impl OperandRequirements {
    /// The requirement on operand `i`, if any.
    pub fn get(&self, i: usize) -> Option<&Requirement> {
        match self {
            OperandRequirements::None => None,
            OperandRequirements::All(r) => Some(r),
            OperandRequirements::ByIndex(v) => v.iter().find(|(j, _)| *j == i).map(|(_, r)| r),
        }
    }
}

/// Conditions under which a rule applies. An unset field always holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Condition {
    /// A dot with (true) or without (false) batch dimensions.
    pub batch_dims: Option<bool>,
    /// A dot that is a matrix-vector product: its result has rank at most
    /// one, or a dimension of size one besides the batch dimensions.
    pub gemv: Option<bool>,
    /// Operand `n` is a constant.
    pub constant_operand: Option<usize>,
    /// Every operand's element type is one of these.
    pub operand_types: Vec<PrimitiveType>,
    /// The result's element type is one of these.
    pub result_types: Vec<PrimitiveType>,
    /// The result rank is at least this.
    pub min_rank: Option<usize>,
    /// The result rank is at most this.
    pub max_rank: Option<usize>,
    /// A convolution's `dim_labels` is exactly this.
    pub dim_labels: Option<String>,
}

/// The target's preference for reduction operands.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReducePolicy {
    /// Prefer the reduced dimensions most minor in the operand (a "row
    /// reduction"), as XLA GPU does when its row-reduction emitter is faster.
    pub reduced_dims_minor: bool,
}

/// How a tiled target tiles arrays: per element width and rank, the tile
/// shapes the hardware supports and where each may be used. The pass
/// picks among them; the data never names a choice.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TilingPolicy {
    /// The tiling rules; the first rule covering an array's element type
    /// and rank gives its candidates.
    pub rules: Vec<TilingRule>,
    /// Whether `*` may combine a small second-minor dimension with more
    /// major ones to cut padding.
    pub combine_dimensions: bool,
    /// Keep entry parameters and results that name no tiles untiled.
    pub keep_untiled_entry: bool,
}

/// One tiling rule: which arrays it covers and their candidate tilings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilingRule {
    /// Element bit widths covered (as `PrimitiveType::bit_width`).
    pub bits: Vec<u32>,
    /// Element types covered; when set, `bits` is not consulted.
    pub types: Vec<PrimitiveType>,
    /// Smallest rank covered.
    pub min_rank: usize,
    /// Largest rank covered.
    pub max_rank: usize,
    /// The tilings the hardware supports for these arrays, in the order
    /// that breaks ties.
    pub candidates: Vec<TileCandidate>,
    /// The element size `E(bits)` to set, when the storage differs from the
    /// type's default.
    pub element_size_in_bits: Option<i64>,
}

impl TilingRule {
    /// True when the rule covers arrays of this element type and rank.
    pub fn covers(&self, element_type: PrimitiveType, rank: usize) -> bool {
        let type_ok = if self.types.is_empty() {
            element_type
                .bit_width()
                .is_some_and(|b| self.bits.contains(&b))
        } else {
            self.types.contains(&element_type)
        };
        type_ok && (self.min_rank..=self.max_rank).contains(&rank)
    }
}

/// One tiling the hardware supports, and where it may be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileCandidate {
    /// The tiles, as in `(8,128)(2,1)`.
    pub tiles: Vec<Tile>,
    /// Which arrays it may tile, by the size of the dimension its first
    /// entry covers (the second most minor physical dimension for a 2-D
    /// tile, the only one for a vector's 1-D tile).
    pub fit: TileFit,
    /// Whether it serves values computed on, or only buffers resident in
    /// HBM (entry parameters).
    pub storage_only: bool,
}

/// When a candidate tiling may tile an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileFit {
    /// Any size: the tile repeats along the dimension (`(8,128)`, a full
    /// vector register).
    Any,
    /// Only when the dimension fits in one tile (`(2,128)` for a dimension
    /// of 1 or 2): a short tile is never stacked.
    Within,
    /// Only when the dimension fills at least one tile (`(32,128)(4,1)`
    /// storage tiles for 8-bit arrays in HBM).
    Filled,
}

/// Weights of the bytes-moved cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct CostWeights {
    /// Cost per byte written by a copy (a relayout).
    pub copy_byte: f64,
    /// Cost per byte written by a transpose or reshape that is not a bitcast.
    pub transpose_byte: f64,
    /// Cost per byte of tile padding in a stored buffer (a value, or a
    /// copy's result). A target file that tiles weighs padding like data,
    /// 1.0, unless it says otherwise; untiled targets store none.
    pub padding_byte: f64,
}

impl Default for CostWeights {
    fn default() -> Self {
        CostWeights {
            copy_byte: 1.0,
            transpose_byte: 1.0,
            padding_byte: 0.0,
        }
    }
}
