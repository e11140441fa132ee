//! The HLO IR, its text form and its structural verifier.
//!
//! Architecture invariant: this crate knows HLO and shapes, and nothing of
//! layouts policies, salsa, serde, YAML or HTTP.

mod attrs;
mod ir;
mod opcode;

pub use attrs::{
    Attr, AttrKey, AttrValue, Attrs, ConvDimLabels, KnownAttr, OperandAlias, PadDim, SliceDim,
};
pub use ir::{
    AliasKind, CompId, Computation, ComputationLayout, DebugTables, Edge, EditError, FileLocation,
    HeaderAttr, InstId, Instruction, IoAlias, Module, Payload, StackFrame,
};
pub use opcode::Opcode;
pub use petgraph;
