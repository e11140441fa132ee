//! What one computation's assignment needs to know from outside itself:
//! its role (entry, loop body, branch), the layouts fixed at its boundary,
//! and the signatures of the computations it calls.

use hlo::{CompId, IoAlias};
use rustc_hash::FxHashMap;
use shape::Shape;

/// The parameter and result layouts a computation settled on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature {
    /// One shape per parameter, layouts included.
    pub params: Vec<Shape>,
    /// The result shape, layouts included.
    pub result: Shape,
}

/// Why a boundary layout is fixed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum BoundaryReason {
    /// The module's `entry_computation_layout`.
    Entry,
    /// A loop condition sees the loop body's state layout.
    LoopState { body: String },
    /// All branches of a conditional return one layout.
    ConditionalResult { conditional: String },
}

/// The outside facts for one computation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// True for the entry computation.
    pub is_entry: bool,
    /// Fixed parameter layouts, per parameter (array leaves without a
    /// layout are free, as AUTO entry layouts are).
    pub params: Option<(Vec<Shape>, BoundaryReason)>,
    /// A required result layout (leaves without a layout are free).
    pub result: Option<(Shape, BoundaryReason)>,
    /// True for a while body: the root must keep the parameter's layout.
    pub loop_body: bool,
    /// The module's `input_output_alias` (entry only).
    pub io_alias: Vec<IoAlias>,
    /// Final signatures of the computations this one calls.
    pub callees: FxHashMap<CompId, Signature>,
}
