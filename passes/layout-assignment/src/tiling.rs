//! The tiling a target gives an array in a given dimension order.

use shape::{ArrayShape, Layout};
use target::{TargetSpec, TilingPolicy, TilingRule};

/// The layout `target` uses for `a` with this `minor_to_major`: the order
/// itself, plus the policy's tiles and element size on tiled targets.
pub fn layout_for(target: &TargetSpec, a: &ArrayShape, m2m: &[usize]) -> Layout {
    let mut layout = Layout::new(m2m);
    if let Some(policy) = &target.tiling {
        if let Some(rule) = rule_for(policy, a) {
            layout.tiles = rule.tiles.iter().cloned().collect();
            if let Some(bits) = rule.element_size_in_bits {
                layout.element_size_in_bits = bits;
            }
        }
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
