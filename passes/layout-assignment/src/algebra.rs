//! The layout questions the pass asks, answered by the exact algebra of the
//! `shape` crate. Kept in one place so that the pass reads as policy and the
//! arithmetic stays where it is tested.
//!
//! An algebra error (an absurd or invalid shape) answers "not a bitcast" and
//! "infinitely large", so that the pass never relies on a layout it cannot
//! reason about.

use shape::{ArrayShape, Layout};

pub use shape::facts::align_minor_to_major;
pub use shape::{
    layout_change_keeps_bytes, layout_change_keeps_bytes_in, reshape_keeps_bytes, storage_bytes,
    storage_bytes_in, transpose_keeps_bytes,
};

/// The output layout that makes the transpose a bitcast of `operand`.
pub fn transpose_output_layout(operand: &ArrayShape, dims: &[usize]) -> Option<Layout> {
    shape::facts::transpose_result_layout(operand, dims).ok()
}

/// The operand layout that makes the transpose into `out` a bitcast.
pub fn transpose_operand_layout(out: &ArrayShape, dims: &[usize]) -> Option<Layout> {
    shape::facts::transpose_operand_layout(out, dims).ok()
}

/// An output layout that makes the reshape of `operand` into `out` a
/// bitcast, when one exists.
pub fn reshape_output_layout(operand: &ArrayShape, out: &ArrayShape) -> Option<Layout> {
    if let Some(m) = operand.order_only()
        && out.dynamic == 0
        && !out.dims.contains(&0)
    {
        return align_minor_to_major(&operand.dims, m, &out.dims).map(|m2m| Layout::new(&m2m));
    }
    shape::facts::reshape_result_layout(operand, &out.dims)
}

/// Output layouts worth trying for a reshape of a tiled operand whose
/// output takes `tiling(order)` tiles: the untiled aligned order, and that
/// order with each dimension moved to the most major place (which is how
/// splitting a tiled minor dimension stays a bitcast: `f32[8,256]` under
/// `T(8,128)` is `f32[8,2,128]{2,0,1}` under the same tiles). Each is kept
/// only if the exact test proves the reshape a bitcast.
pub fn tiled_reshape_output_layouts(
    operand: &ArrayShape,
    out: &ArrayShape,
    tiling: &dyn Fn(&[usize]) -> Layout,
) -> Vec<Layout> {
    let Some(operand_layout) = &operand.layout else {
        return Vec::new();
    };
    if operand_layout.tiles.is_empty() || out.rank() < 2 {
        return Vec::new();
    }
    let Some(aligned_order) =
        align_minor_to_major(&operand.dims, &operand_layout.minor_to_major, &out.dims)
    else {
        return Vec::new();
    };
    let mut orders: Vec<shape::DimVec> = vec![aligned_order.clone()];
    for &d in &aligned_order {
        let mut o: shape::DimVec = aligned_order.iter().copied().filter(|&x| x != d).collect();
        o.push(d);
        if !orders.contains(&o) {
            orders.push(o);
        }
    }
    orders
        .into_iter()
        .map(|o| tiling(&o))
        .filter(|l| reshape_keeps_bytes(operand, &out.in_layout(l.clone())))
        .collect()
}

/// An operand layout that makes the reshape of `operand` into `out` a
/// bitcast, when one exists: the reshape read backwards.
pub fn reshape_operand_layout(operand: &ArrayShape, out: &ArrayShape) -> Option<Layout> {
    reshape_output_layout(out, operand)
}
