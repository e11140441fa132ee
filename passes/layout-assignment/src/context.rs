//! What one computation's assignment needs to know from outside itself:
//! its role (entry, loop body, branch), the layouts fixed at its boundary,
//! and the signatures of the computations it calls.

use std::sync::Arc;

use hlo::{CompId, IoAlias};
use rustc_hash::FxHashMap;
use shape::Shape;

/// The parameter and result layouts a computation settled on.
///
/// Shared: a signature is read by every caller's context, kept in each
/// assignment, in the signatures an incremental database keeps of each
/// computation and in the boundaries callers choose, and a clone is a
/// pointer. Equality compares the parts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Signature(Arc<SignatureParts>);

/// What a [`Signature`] holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SignatureParts {
    /// One shape per parameter, layouts included.
    pub params: Vec<Shape>,
    /// The result shape, layouts included.
    pub result: Shape,
}

impl Signature {
    /// The signature of parameters `params` and result `result`, shared
    /// with every equal signature of the process that is alive (see
    /// [`hlo::WeakCache`]): a session keeps every computation's signature,
    /// and a module of many computations repeats a few.
    pub fn new(params: Vec<Shape>, result: Shape) -> Signature {
        static SHARED: hlo::WeakCache<u64, Arc<SignatureParts>> = hlo::WeakCache::new();
        Signature(hlo::shared_by_hash(
            &SHARED,
            SignatureParts { params, result },
        ))
    }

    /// The parts, to change (copied first when shared).
    pub fn make_mut(&mut self) -> &mut SignatureParts {
        Arc::make_mut(&mut self.0)
    }

    /// The parts, taken (copied when shared).
    pub fn into_parts(self) -> SignatureParts {
        Arc::unwrap_or_clone(self.0)
    }
}

impl std::ops::Deref for Signature {
    type Target = SignatureParts;

    fn deref(&self) -> &SignatureParts {
        &self.0
    }
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
    /// The only caller chose these layouts for its call (the call-boundary
    /// rule: see `calls.rs`).
    Caller { caller: String },
    /// The layouts this computation chose alone, kept while it weighs its
    /// callees' boundaries, so that its callers see the same signature.
    Kept,
}

/// The outside facts for one computation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// True for the entry computation.
    pub is_entry: bool,
    /// Fixed parameter layouts, per parameter (array leaves without a
    /// layout are free, as AUTO entry layouts are). Shared with the
    /// entry computation layout, for the entry.
    pub params: Option<(Arc<Vec<Shape>>, BoundaryReason)>,
    /// A required result layout (leaves without a layout are free).
    pub result: Option<(Arc<Shape>, BoundaryReason)>,
    /// True for a while body: the root must keep the parameter's layout.
    pub loop_body: bool,
    /// The module's `input_output_alias` (entry only).
    pub io_alias: Vec<IoAlias>,
    /// Signatures of the computations this one calls: for a callee whose
    /// boundary this computation alone decides (`calls::bound_site`), the
    /// one it chose alone; for any other, its final one.
    pub callees: FxHashMap<CompId, Signature>,
    /// Callees whose signature is only a preference here: their operands
    /// and results take any layout, at the price of a copy where the
    /// preference is not met (sorted).
    pub preferred: Vec<CompId>,
}
