//! Element types, shapes and layouts, their text form, and the exact layout
//! algebra over them.
//!
//! Architecture invariant: this crate is pure. It knows nothing of HLO
//! instructions, graphs, I/O, serde or salsa, so that every other crate can
//! use it and its answers can be tested in isolation.

mod bitcast;
mod element;
pub mod facts;
mod keeps;
mod layout;
mod physical;
mod plan;
mod recent;
mod shape;
pub mod text;

pub use bitcast::{
    BitcastKind, BitcastVerdict, FALLBACK_BUDGET, Method, Reason, bitcast_by_periods, is_bitcast,
    layout_change_is_bitcast, physical_view_is_bitcast, prove_bitcast, reshape_is_bitcast,
    transpose_is_bitcast,
};
pub use element::PrimitiveType;
pub use keeps::{
    layout_change_keeps_bytes, layout_change_keeps_bytes_in, reshape_keeps_bytes,
    transpose_keeps_bytes,
};
pub use layout::{
    DimLevel, DimLevelKind, DimVec, Layout, LayoutError, MAX_TILE_LEVELS, SharedLayout,
    SplitConfig, Tile,
};
pub use physical::{
    AlgebraError, Expansion, Slot, StorageSize, TileLevel, linear_index, multi_index,
    storage_bytes, storage_bytes_in, storage_size,
};
pub use plan::{PadDim, Plan, SliceDim, Step, StepOp, relayout_plan, relayout_plan_at};
pub use shape::{ArrayShape, Dims, MAX_RANK, Shape};
pub use text::{TextError, parse_layout, parse_shape, parse_shape_at};

impl std::str::FromStr for Shape {
    type Err = TextError;
    fn from_str(s: &str) -> Result<Shape, TextError> {
        parse_shape(s)
    }
}
