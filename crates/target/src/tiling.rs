//! The tiling of an array in a given dimension order: a choice among the
//! tilings the target lists for its element type and rank, and the
//! dimension-combining variants of it.
//!
//! A target's tiling rule lists candidate tilings (`target::TilingRule`):
//! tiles for any size, short tiles legal only when the dimension their
//! first entry covers fits in one tile, and storage tiles for buffers
//! resident in HBM whose dimension fills at least one tile. Among the legal
//! candidates the one storing the fewest bytes wins, ties going to the one
//! listed first; an HBM-resident buffer takes a storage tile when one is
//! legal. The choice depends only on the array's element type, dimensions,
//! order and residence, so every value derives its own tiling, whatever
//! the value it shares an order with (a `convert` from `s8` to `s4` gives
//! the `s4` result the `s4` tiling).

use crate::{TargetSpec, TileCandidate, TileFit, TilingPolicy, TilingRule};
use shape::{ArrayShape, DimVec, Layout, Tile};

/// Where a buffer lives, which decides the tilings it may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileUse {
    /// Computed on: the compute tilings.
    Compute,
    /// Resident in HBM at the program's boundary (an entry parameter): a
    /// storage tiling where one is legal, else a compute one.
    Storage,
}

/// The layout `target` uses for `a`, computed on, with this
/// `minor_to_major`: the order itself, plus the tiling the target's
/// candidates give it and their element size, on tiled targets.
pub fn layout_for(target: &TargetSpec, a: &ArrayShape, m2m: &[usize]) -> Layout {
    layout_for_use(target, a, m2m, TileUse::Compute)
}

/// [`layout_for`] for a buffer with the given residence.
pub fn layout_for_use(target: &TargetSpec, a: &ArrayShape, m2m: &[usize], use_: TileUse) -> Layout {
    let mut layout = Layout::new(m2m);
    let Some(rule) = target_rule(target, a) else {
        return layout;
    };
    if let Some(bits) = rule.element_size_in_bits {
        layout.element_size_in_bits = bits;
    }
    let chosen = match use_ {
        TileUse::Storage => cheapest(rule, a, &layout, true, &|_| true)
            .or_else(|| cheapest(rule, a, &layout, false, &|_| true)),
        TileUse::Compute => cheapest(rule, a, &layout, false, &|_| true),
    };
    if let Some(c) = chosen {
        layout.tiles = c.tiles.iter().cloned().collect();
    }
    layout
}

/// The legal candidate of `rule` (storage-only ones, or the others) whose
/// tiling stores `a` in the fewest bytes in `base`'s order, ties going to
/// the candidate listed first; `also` may rule more out.
fn cheapest<'r>(
    rule: &'r TilingRule,
    a: &ArrayShape,
    base: &Layout,
    storage_only: bool,
    also: &dyn Fn(&TileCandidate) -> bool,
) -> Option<&'r TileCandidate> {
    let mut legal = rule
        .candidates
        .iter()
        .filter(|c| c.storage_only == storage_only && fits(c, a, &base.minor_to_major) && also(c));
    let first = legal.next()?;
    let mut rest = legal.peekable();
    // One legal tiling (the usual case: a dimension longer than every
    // short tile) needs no sizing.
    if rest.peek().is_none() {
        return Some(first);
    }
    let mut layout = base.clone();
    let mut bytes_of = |c: &TileCandidate| {
        layout.tiles = c.tiles.iter().cloned().collect();
        shape::storage_bytes_in(a, &layout)
    };
    let mut best = (bytes_of(first), first);
    for c in rest {
        let bytes = bytes_of(c);
        if bytes < best.0 {
            best = (bytes, c);
        }
    }
    Some(best.1)
}

/// True when candidate `c` may tile `a` in this order: by the size of the
/// dimension its first entry covers (the second most minor physical one
/// for a 2-D tile, the only one for a vector, a unit one for a scalar).
fn fits(c: &TileCandidate, a: &ArrayShape, m2m: &[usize]) -> bool {
    let Some(first) = c.tiles.first() else {
        return true;
    };
    let (Some(&height), Some(size)) = (first.dims.first(), covered_size(a, m2m, first.dims.len()))
    else {
        return false;
    };
    match c.fit {
        TileFit::Any => true,
        TileFit::Within => size <= height,
        TileFit::Filled => size >= height,
    }
}

/// The size of the physical dimension the first entry of a tile of
/// `len` entries covers: the `len`-th most minor; 1 for a scalar.
fn covered_size(a: &ArrayShape, m2m: &[usize], len: usize) -> Option<i64> {
    if a.rank() == 0 {
        return Some(1);
    }
    let d = *m2m.get(len.checked_sub(1)?)?;
    a.dims.get(d).copied()
}

/// The first tiling rule covering `a`'s element type and rank.
pub fn rule_for<'p>(policy: &'p TilingPolicy, a: &ArrayShape) -> Option<&'p TilingRule> {
    policy
        .rules
        .iter()
        .find(|r| r.covers(a.element_type, a.rank()))
}

/// The first tiling rule of `target` covering `a`, if it tiles at all.
fn target_rule<'t>(target: &'t TargetSpec, a: &ArrayShape) -> Option<&'t TilingRule> {
    target
        .tiling
        .as_ref()
        .and_then(|policy| rule_for(policy, a))
}

/// True when the target may give `a`, with residence `use_`, the tiling
/// of `layout`: its tiles are one of the target's candidates for `a` (a
/// compute one, or for an HBM-resident buffer a storage one too) legal for
/// `a` in that order, or (with `*` entries in the first tile) the combined
/// form of a compute one that repeats. A layout whose tiles the target
/// does not list at all (one given in the input) is taken as it is.
pub fn allows(target: &TargetSpec, a: &ArrayShape, layout: &Layout, use_: TileUse) -> bool {
    let Some(rule) = target_rule(target, a) else {
        return true;
    };
    let Some(first) = layout.tiles.first() else {
        return true;
    };
    let usable = |c: &TileCandidate| {
        (!c.storage_only || use_ == TileUse::Storage)
            && layout.element_size_in_bits == rule.element_size_in_bits.unwrap_or(0)
    };
    let plain: Vec<i64> = first
        .dims
        .iter()
        .copied()
        .filter(|&d| d != Tile::COMBINE)
        .collect();
    let folds = first.dims.len() - plain.len();
    let listed = rule.candidates.iter().filter(|c| {
        c.tiles.first().is_some_and(|t| t.dims[..] == plain[..])
            && c.tiles[1..] == layout.tiles[1..]
    });
    let mut any = false;
    for c in listed {
        any = true;
        if folds > 0 {
            // A combined tile covers the folded dimensions as one.
            if usable(c) && !c.storage_only && c.fit == TileFit::Any {
                return true;
            }
            continue;
        }
        if usable(c) && fits(c, a, &layout.minor_to_major) {
            return true;
        }
    }
    !any
}

/// The dimension-combining variants of a layout: the first tile gains one
/// `*` per more major physical dimension folded into the one its first
/// entry covers, `(*,8,128)`, `(*,*,8,128)`, ..., fewest folds first, each
/// with the compute tiling that stores the folded array in the fewest
/// bytes among those that repeat (a short tile is for one dimension that
/// fits in it, not for a fold). Offered whenever the target allows
/// combining and there is a more major dimension to fold: folding cuts
/// padding whenever the covered dimension is not a multiple of the tile
/// height, whether it is shorter than the tile (3 rows of 8) or longer (11
/// rows padded to 16). The caller sizes each variant with the algebra and
/// decides whether it is worth it.
pub fn combined_variants(target: &TargetSpec, a: &ArrayShape, base: &Layout) -> Vec<Layout> {
    let Some(policy) = &target.tiling else {
        return Vec::new();
    };
    if !policy.combine_dimensions || a.rank() < 3 {
        return Vec::new();
    }
    let Some(first) = base.tiles.first() else {
        return Vec::new();
    };
    if first.dims.len() != 2 || first.dims.contains(&Tile::COMBINE) {
        return Vec::new();
    }
    let Some(rule) = rule_for(policy, a) else {
        return Vec::new();
    };
    (1..=a.rank() - 2)
        .filter_map(|folds| {
            let mut best: Option<(u64, Layout)> = None;
            for c in rule
                .candidates
                .iter()
                .filter(|c| !c.storage_only && c.fit == TileFit::Any)
            {
                let Some(tile) = c.tiles.first().filter(|t| t.dims.len() == 2) else {
                    continue;
                };
                let mut combined = Tile::default();
                combined
                    .dims
                    .extend(std::iter::repeat_n(Tile::COMBINE, folds));
                combined.dims.extend_from_slice(&tile.dims);
                let mut layout = base.clone();
                layout.tiles = c.tiles.iter().cloned().collect();
                layout.tiles[0] = combined;
                let bytes = shape::storage_bytes_in(a, &layout);
                if best.as_ref().is_none_or(|(b, _)| bytes < *b) {
                    best = Some((bytes, layout));
                }
            }
            best.map(|(_, l)| l)
        })
        .collect()
}

/// The layout an operand of a layout-preserving op must have when the op
/// produces `out_layout`: the same layout when the operand may take it (the
/// same storage width, and a tiling legal for the operand's own
/// dimensions), and otherwise the same dimension order with the operand's
/// own tiling (a `compare` of `s32` values giving `pred` keeps the order,
/// not the packed `pred` tiles; the 10-row operand of a slice whose 3-row
/// result has `(4,128)` tiles keeps `(8,128)`).
pub fn same_layout_for(
    target: &TargetSpec,
    out_layout: &Layout,
    out: &ArrayShape,
    operand: &ArrayShape,
) -> Layout {
    let untiled = out_layout.tiles.is_empty() && out_layout.element_size_in_bits == 0;
    if untiled
        || (tiled_alike(Some(target), out, operand)
            && allows(target, operand, out_layout, TileUse::Compute))
    {
        return out_layout.clone();
    }
    layout_for(target, operand, &out_layout.minor_to_major)
}

/// The layout a value of shape `member` with residence `use_` takes when
/// it shares a layout with a value of shape `origin` in `layout` (a group
/// of values joined by layout-preserving ops): [`same_layout_for`] for a
/// value computed on, and for an HBM-resident one, the storage tiling of
/// the same order.
pub fn member_layout(
    target: &TargetSpec,
    layout: &Layout,
    origin: &ArrayShape,
    member: &ArrayShape,
    use_: TileUse,
) -> Layout {
    match use_ {
        TileUse::Storage if target.tiling.is_some() => {
            layout_for_use(target, member, &layout.minor_to_major, TileUse::Storage)
        }
        _ => same_layout_for(target, layout, origin, member),
    }
}

/// True when the target has storage tilings for arrays like `a`: an entry
/// parameter of this shape lives in HBM in one of them where legal.
pub fn has_storage_tiles(target: &TargetSpec, a: &ArrayShape) -> bool {
    target_rule(target, a).is_some_and(|r| r.candidates.iter().any(|c| c.storage_only))
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
/// entry result, a custom call's operand or result) lives in. On a tiled
/// target, device buffers are always tiled: a given layout that names no
/// tiles fixes only the dimension order, and the target's tiling is added
/// (unless the target keeps untiled entries untiled). A layout that names
/// tiles is kept exactly.
pub fn device_layout(target: &TargetSpec, a: &ArrayShape, given: &Layout) -> Layout {
    device_layout_for_use(target, a, given, TileUse::Compute)
}

/// [`device_layout`] for a buffer with the given residence: an entry
/// parameter is HBM-resident and takes a storage tiling where one is legal.
pub fn device_layout_for_use(
    target: &TargetSpec,
    a: &ArrayShape,
    given: &Layout,
    use_: TileUse,
) -> Layout {
    match &target.tiling {
        Some(policy) if !policy.keep_untiled_entry && given.tiles.is_empty() => {
            let mut tiled = layout_for_use(target, a, &given.minor_to_major, use_);
            tiled.memory_space = given.memory_space;
            tiled
        }
        _ => given.clone(),
    }
}

/// The layout of a scalar: the target's tiling for it (XLA's TPU layouts
/// tile scalars, `f32[]{:T(128)}`) unless the given one names tiles.
pub fn scalar_layout(target: &TargetSpec, a: &ArrayShape) -> Layout {
    let given = a.layout.as_deref().cloned().unwrap_or_default();
    if target.tiling.is_some() && given.tiles.is_empty() {
        let mut tiled = layout_for(target, a, &[]);
        tiled.memory_space = given.memory_space;
        return tiled;
    }
    given
}

/// The `minor_to_major` that stores `a` with the least padding under the
/// target's tiling for `use_`, with `minor` most minor when given: every
/// pair of dimensions is tried as the two most minor physical ones (the
/// pair the tiles cover), the others kept in descending order, more major.
/// Ties go to descending (with `minor` moved first), then to the pair
/// found first.
pub fn least_padding_order(
    target: &TargetSpec,
    a: &ArrayShape,
    use_: TileUse,
    minor: Option<usize>,
) -> DimVec {
    let rank = a.rank();
    let bytes = |m2m: &[usize]| shape::storage_bytes_in(a, &layout_for_use(target, a, m2m, use_));
    let order = |first: usize, second: Option<usize>| -> DimVec {
        let mut m2m: DimVec = DimVec::new();
        m2m.push(first);
        m2m.extend(second);
        m2m.extend((0..rank).rev().filter(|&d| d != first && Some(d) != second));
        m2m
    };
    let mut best: DimVec = match minor {
        Some(m) => order(m, None),
        None => (0..rank).rev().collect(),
    };
    if target.tiling.is_none() || rank < 2 {
        return best;
    }
    let mut best_bytes = bytes(&best);
    let minors: DimVec = match minor {
        Some(m) => [m].into_iter().collect(),
        None => (0..rank).rev().collect(),
    };
    for &first in &minors {
        for second in (0..rank).rev().filter(|&d| d != first) {
            let m2m = order(first, Some(second));
            let b = bytes(&m2m);
            if b < best_bytes {
                (best, best_bytes) = (m2m, b);
            }
        }
    }
    best
}
