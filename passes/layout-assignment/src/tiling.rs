//! The tiling a target gives an array in a given dimension order, and the
//! dimension-combining variants of it.

use shape::{ArrayShape, Layout, Tile};
use target::{TargetSpec, TilingPolicy, TilingRule};

/// The layout `target` uses for `a` with this `minor_to_major`: the order
/// itself, plus the policy's tiles and element size on tiled targets.
pub fn layout_for(target: &TargetSpec, a: &ArrayShape, m2m: &[usize]) -> Layout {
    let mut layout = Layout::new(m2m);
    if let Some(rule) = target.tiling.as_ref().and_then(|policy| rule_for(policy, a)) {
        layout.tiles = rule.tiles.iter().cloned().collect();
        if let Some(bits) = rule.element_size_in_bits {
            layout.element_size_in_bits = bits;
        }
        apply_tall_tile(rule, a, m2m, &mut layout);
    }
    layout
}

/// The first tiling rule covering `a`'s element type and rank.
pub fn rule_for<'p>(policy: &'p TilingPolicy, a: &ArrayShape) -> Option<&'p TilingRule> {
    let bits = a.element_type.bit_width()?;
    policy.rules.iter().find(|r| {
        let type_ok = if r.types.is_empty() { r.bits.contains(&bits) } else { r.types.contains(&a.element_type) };
        type_ok && (r.min_rank..=r.max_rank).contains(&a.rank())
    })
}

/// The size of the second most minor physical dimension, if any.
fn second_minor(a: &ArrayShape, m2m: &[usize]) -> Option<i64> {
    m2m.get(1).and_then(|&d| a.dims.get(d).copied())
}

/// Replaces the first tile's second-minor size by the first tall size that
/// divides the array's second-minor dimension.
fn apply_tall_tile(rule: &TilingRule, a: &ArrayShape, m2m: &[usize], layout: &mut Layout) {
    let Some(rows) = second_minor(a, m2m) else { return };
    let Some(first) = layout.tiles.first_mut() else { return };
    if first.dims.len() != 2 {
        return;
    }
    if let Some(&tall) = rule.tall_second_minor.iter().find(|&&t| t > first.dims[0] && rows % t == 0) {
        first.dims[0] = tall;
    }
}

/// The dimension-combining variants of a policy layout: the first tile
/// gains one `*` per more major physical dimension folded into the
/// second-minor one, `(*,8,128)`, `(*,*,8,128)`, ..., fewest folds first.
/// Offered whenever the target allows combining and there is a more major
/// dimension to fold: folding cuts padding whenever the second-minor
/// dimension is not a multiple of the tile height, whether it is shorter
/// than the tile (3 rows of 8) or longer (11 rows padded to 16). The caller
/// sizes each variant with the algebra and decides whether it is worth it.
pub fn combined_variants(target: &TargetSpec, a: &ArrayShape, base: &Layout) -> Vec<Layout> {
    let Some(policy) = &target.tiling else { return Vec::new() };
    if !policy.combine_dimensions || a.rank() < 3 {
        return Vec::new();
    }
    let Some(first) = base.tiles.first() else { return Vec::new() };
    if first.dims.len() != 2 || first.dims.contains(&Tile::COMBINE) {
        return Vec::new();
    }
    (1..=a.rank() - 2)
        .map(|folds| {
            let mut tile = Tile::default();
            tile.dims.extend(std::iter::repeat_n(Tile::COMBINE, folds));
            tile.dims.extend_from_slice(&first.dims);
            let mut layout = base.clone();
            layout.tiles[0] = tile;
            layout
        })
        .collect()
}

/// The layout an operand of a layout-preserving op must have when the op
/// produces `out_layout`: the same layout for the same storage width, and
/// otherwise the same dimension order with the operand type's own tiling
/// (a `compare` of `s32` values giving `pred` keeps the order, not the
/// packed `pred` tiles).
pub fn same_layout_for(target: &TargetSpec, out_layout: &Layout, out: &ArrayShape, operand: &ArrayShape) -> Layout {
    if tiled_alike(Some(target), out, operand) || (out_layout.tiles.is_empty() && out_layout.element_size_in_bits == 0) {
        return out_layout.clone();
    }
    layout_for(target, operand, &out_layout.minor_to_major)
}

/// Whether a layout made for `a` serves `b` as it is: both have the same
/// element type and storage width, or types of one width that the target
/// tiles by the same rule. Otherwise a layout of one carries properties
/// that belong to the other's type (an `s8` value must never take an
/// `s4` value's `(8,1)` packing and `E(4)` slots, although both are
/// stored a byte wide by default), and only its order carries over.
pub fn tiled_alike(target: Option<&TargetSpec>, a: &ArrayShape, b: &ArrayShape) -> bool {
    if a.element_storage_bits() != b.element_storage_bits() {
        return false;
    }
    if a.element_type == b.element_type {
        return true;
    }
    if a.element_type.bit_width() != b.element_type.bit_width() {
        return false;
    }
    match target.and_then(|t| t.tiling.as_ref()) {
        Some(policy) => match (rule_for(policy, a), rule_for(policy, b)) {
            (Some(x), Some(y)) => std::ptr::eq(x, y),
            (x, y) => x.is_none() && y.is_none(),
        },
        None => true,
    }
}

/// The layout a buffer crossing a boundary the pass does not control (an
/// entry parameter or result, a custom call's operand or result) lives in.
/// On a tiled target, device buffers are always tiled: a given layout that
/// names no tiles fixes only the dimension order, and the target's tiling
/// is added (unless the target keeps untiled entries untiled). A layout
/// that names tiles is kept exactly.
pub fn device_layout(target: &TargetSpec, a: &ArrayShape, given: &Layout) -> Layout {
    match &target.tiling {
        Some(policy) if !policy.keep_untiled_entry && given.tiles.is_empty() && a.rank() > 0 => {
            let mut tiled = layout_for(target, a, &given.minor_to_major);
            tiled.memory_space = given.memory_space;
            tiled
        }
        _ => given.clone(),
    }
}
