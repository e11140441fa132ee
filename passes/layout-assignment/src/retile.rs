//! Re-tiling: ops whose data crosses tile boundaries under the layouts
//! chosen for them.
//!
//! A tiled buffer keeps each element at a position inside a tile. An op
//! that reads or writes whole tiles (a slice that starts on a tile
//! boundary, a broadcast that only adds major dimensions) moves tiles as
//! they are; an op whose offsets along a tiled dimension are not multiples
//! of the tile, or that adds, removes or re-tiles a tiled dimension, must
//! shift elements to other positions inside tiles first. That shift is a
//! relayout the op pays for, so the cost model counts its bytes:
//!
//! - slice: a start that is not a multiple of the tile, or a stride other
//!   than 1, along a tiled dimension;
//! - pad: low padding that is not a multiple of the tile, or interior
//!   padding, along a tiled dimension;
//! - concatenate: an operand whose offset along the concatenated
//!   dimension is not a multiple of its tile;
//! - broadcast: an operand dimension tiled differently in the result, or
//!   a new dimension that the result tiles;
//! - reduce: a reduced dimension that the input tiles, or a kept
//!   dimension tiled differently in the result.
//!
//! Dimensions that a `*` tile folds into one tiled dimension count as
//! one: along it, only the most major member may be cut or shifted, by a
//! whole number of tiles of rows (an index step along it is a step of as
//! many rows as the more minor members hold); a broadcast or reduce keeps
//! tiles only if it keeps the fold.
//!
//! The bytes counted are those of the buffer whose elements move: the
//! input of a reduce, the result of the others. Untiled layouts never
//! re-tile, so targets without tiling are unaffected.

use hlo::{AttrValue, Computation, InstId, KnownAttr, Opcode, PadDim, SliceDim};
use shape::{ArrayShape, DimVec, Expansion};
use smallvec::SmallVec;

use crate::ids::{RetileId, TiVec, ValueId};

/// What an op does to the dimensions it reads, as far as tiles care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RetileOp {
    /// `slice`: its dimensions, as the attribute gives them.
    Slice(Vec<SliceDim>),
    /// `pad`: its dimensions, as the attribute gives them.
    Pad(Vec<PadDim>),
    /// One operand of a `concatenate`, placed at `offset` along `dim`.
    Concatenate { dim: usize, offset: i64 },
    /// `broadcast`: result dimension of each operand dimension.
    Broadcast { dims: DimVec },
    /// `reduce`: the reduced input dimensions.
    Reduce { reduced: DimVec },
}

/// One op that may re-tile: it reads value `operand` and defines `out`.
#[derive(Clone, Debug)]
pub struct Retiling {
    /// The instruction.
    pub inst: InstId,
    /// The value it reads.
    pub operand: ValueId,
    /// The value it defines.
    pub out: ValueId,
    /// What it does to dimensions.
    pub op: RetileOp,
}

/// How a first tile level covers one logical dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Extent {
    /// Not tiled: the dimension lies in the untiled major prefix.
    Untiled,
    /// Part of a tiled dimension: tiled by `size` at tile position
    /// `position` (0 = most minor). `group` lists the logical dimensions
    /// folded into it, most major first (one unless `*` folds several), and
    /// `inner` is the product of the sizes of the members more minor than
    /// this one: an index step along this dimension moves `inner` rows.
    Tiled {
        position: usize,
        size: i64,
        group: DimVec,
        inner: i64,
    },
}

/// The extent of the first tile level on each logical dimension of `a`,
/// the tile levels after the first (which only rearrange inside a tile)
/// and the element size, read off the algebra's expansion. `None` when the
/// algebra cannot expand the layout.
fn extents(a: &ArrayShape) -> Option<(Vec<Extent>, Vec<shape::Tile>, i64)> {
    let layout = a.layout.as_ref()?;
    let mut out = vec![Extent::Untiled; a.rank()];
    if layout.tiles.is_empty() {
        return Some((out, Vec::new(), layout.element_size_in_bits));
    }
    let expansion = Expansion::new(a).ok()?;
    let level = expansion.levels.first()?;
    // The level's input dimensions are the logical ones in physical order,
    // after the unit dimensions a tiled scalar gains; `groups` says how
    // many of them each combined dimension folds.
    let lead = expansion.unit_major_dims;
    let mut input = 0;
    for (c, &count) in level.groups.iter().enumerate() {
        let logical = input.max(lead) - lead..(input + count).max(lead) - lead;
        let group: DimVec = expansion
            .physical_order
            .get(logical)?
            .iter()
            .copied()
            .collect();
        if c >= level.prefix {
            let j = c - level.prefix;
            let (position, size) = (level.tile_sizes.len() - 1 - j, level.tile_sizes[j]);
            for (k, &d) in group.iter().enumerate() {
                let inner = group[k + 1..].iter().map(|&m| a.dims[m]).product();
                out[d] = Extent::Tiled {
                    position,
                    size,
                    group: group.clone(),
                    inner,
                };
            }
        }
        input += count;
    }
    Some((
        out,
        layout.tiles.iter().skip(1).cloned().collect(),
        layout.element_size_in_bits,
    ))
}

/// True when shifting dimension `d` by `offset`, or changing its size when
/// `resized`, keeps every element at its position inside its tile. Along
/// a folded dimension only the most major member may move, and only by a
/// whole number of tiles of rows; the others would change the stride of
/// the members above them.
fn on_boundary(extent: &Extent, d: usize, offset: i64, resized: bool) -> bool {
    match extent {
        Extent::Untiled => true,
        Extent::Tiled {
            size, group, inner, ..
        } => {
            if group.first() != Some(&d) {
                return offset == 0 && !resized;
            }
            offset
                .checked_mul(*inner)
                .is_some_and(|rows| rows.rem_euclid(*size) == 0)
        }
    }
}

fn describe(extent: &Extent) -> String {
    match extent {
        Extent::Untiled => "untiled".to_string(),
        Extent::Tiled { size, group, .. } if group.len() > 1 => {
            let dims: Vec<String> = group.iter().map(ToString::to_string).collect();
            format!(
                "folded with dimensions {{{}}} and tiled by {size}",
                dims.join(",")
            )
        }
        Extent::Tiled { size, .. } => format!("tiled by {size}"),
    }
}

/// The extent `e` of an input dimension, renamed to result dimensions by
/// `map` (input dimension to result dimension; `None` when it has none).
fn renamed(e: &Extent, map: &dyn Fn(usize) -> Option<usize>) -> Option<Extent> {
    match e {
        Extent::Untiled => Some(Extent::Untiled),
        Extent::Tiled {
            position,
            size,
            group,
            inner,
        } => Some(Extent::Tiled {
            position: *position,
            size: *size,
            group: group.iter().map(|&d| map(d)).collect::<Option<DimVec>>()?,
            inner: *inner,
        }),
    }
}

/// Why `op` re-tiles when it reads `operand` and writes `out` (both with
/// their layouts), or `None` when it moves whole tiles. A layout the
/// algebra cannot expand counts as re-tiling.
pub fn reason(op: &RetileOp, operand: &ArrayShape, out: &ArrayShape) -> Option<String> {
    let Some((ext_out, rest_out, bits_out)) = extents(out) else {
        return Some("the result's layout cannot be expanded".to_string());
    };
    let resized = |d: usize| operand.dims.get(d) != out.dims.get(d);
    // A slice, pad or concatenate moves whole tiles only if its operand is
    // tiled as its result is, dimension by dimension (on a tiled target
    // the two may differ: a 3-row result in (4,128) tiles, its 10-row
    // operand in (8,128)).
    if !matches!(op, RetileOp::Broadcast { .. } | RetileOp::Reduce { .. }) {
        let Some((ext_in, rest_in, bits_in)) = extents(operand) else {
            return Some("the operand's layout cannot be expanded".to_string());
        };
        if let Some(why) = inner_tiles_differ(&rest_in, bits_in, &rest_out, bits_out) {
            return Some(why);
        }
        let shape_of = |e: &Extent| match e {
            Extent::Untiled => None,
            Extent::Tiled {
                position,
                size,
                group,
                ..
            } => Some((*position, *size, group.clone())),
        };
        for (d, (a, b)) in ext_in.iter().zip(&ext_out).enumerate() {
            if shape_of(a) != shape_of(b) {
                return Some(format!(
                    "operand dimension {d} is {} but result dimension {d} is {}",
                    describe(a),
                    describe(b)
                ));
            }
        }
    }
    match op {
        RetileOp::Slice(dims) => {
            for (d, extent) in ext_out.iter().enumerate() {
                let (start, stride) = dims.get(d).map_or((0, 1), |s| (s.start, s.stride));
                if *extent != Extent::Untiled
                    && (stride != 1 || !on_boundary(extent, d, start, resized(d)))
                {
                    return Some(format!(
                        "slice [{start}:..:{stride}] of dimension {d}, {}",
                        describe(extent)
                    ));
                }
            }
            None
        }
        RetileOp::Pad(dims) => {
            for (d, extent) in ext_out.iter().enumerate() {
                let (l, h, i) = dims
                    .get(d)
                    .map_or((0, 0, 0), |p| (p.low, p.high, p.interior));
                if *extent != Extent::Untiled && (i != 0 || !on_boundary(extent, d, l, resized(d)))
                {
                    return Some(format!(
                        "padding {l}_{h}_{i} of dimension {d}, {}",
                        describe(extent)
                    ));
                }
            }
            None
        }
        RetileOp::Concatenate { dim, offset } => {
            let extent = ext_out.get(*dim).unwrap_or(&Extent::Untiled);
            // Joining operands changes the dimension's size.
            (!on_boundary(extent, *dim, *offset, true)).then(|| {
                format!(
                    "operand at offset {offset} of dimension {dim}, {}",
                    describe(extent)
                )
            })
        }
        RetileOp::Broadcast { dims } => {
            let Some((ext_in, rest_in, bits_in)) = extents(operand) else {
                return Some("the operand's layout cannot be expanded".to_string());
            };
            if let Some(why) = inner_tiles_differ(&rest_in, bits_in, &rest_out, bits_out) {
                return Some(why);
            }
            for (i, &d) in dims.iter().enumerate() {
                let want = ext_in
                    .get(i)
                    .and_then(|e| renamed(e, &|x| dims.get(x).copied()));
                if want.as_ref() != ext_out.get(d) {
                    return Some(format!(
                        "operand dimension {i} is {} but result dimension {d} is {}",
                        ext_in.get(i).map_or_else(String::new, describe),
                        ext_out.get(d).map_or_else(String::new, describe)
                    ));
                }
            }
            for (d, extent) in ext_out.iter().enumerate() {
                if !dims.contains(&d) && *extent != Extent::Untiled {
                    return Some(format!("new dimension {d} is {}", describe(extent)));
                }
            }
            None
        }
        RetileOp::Reduce { reduced } => {
            let Some((ext_in, rest_in, bits_in)) = extents(operand) else {
                return Some("the input's layout cannot be expanded".to_string());
            };
            if let Some(why) = inner_tiles_differ(&rest_in, bits_in, &rest_out, bits_out) {
                return Some(why);
            }
            for &d in reduced {
                let extent = ext_in.get(d).unwrap_or(&Extent::Untiled);
                if *extent != Extent::Untiled {
                    return Some(format!("reduced dimension {d} is {}", describe(extent)));
                }
            }
            let kept: DimVec = (0..operand.rank())
                .filter(|d| !reduced.contains(d))
                .collect();
            let to_result = |i: usize| kept.iter().position(|&k| k == i);
            for (j, &i) in kept.iter().enumerate() {
                let want = ext_in.get(i).and_then(|e| renamed(e, &to_result));
                if want.as_ref() != ext_out.get(j) {
                    return Some(format!(
                        "input dimension {i} is {} but result dimension {j} is {}",
                        ext_in.get(i).map_or_else(String::new, describe),
                        ext_out.get(j).map_or_else(String::new, describe)
                    ));
                }
            }
            None
        }
    }
}

/// A broadcast or reduce moves whole tiles only when the tile levels after
/// the first (packing inside a tile) and the element size agree.
fn inner_tiles_differ(
    a: &[shape::Tile],
    bits_a: i64,
    b: &[shape::Tile],
    bits_b: i64,
) -> Option<String> {
    (a != b || bits_a != bits_b)
        .then(|| "the operand and result pack elements inside tiles differently".to_string())
}

/// The bytes of the buffer whose elements a re-tiling op moves: the input
/// of a reduce, the result otherwise.
pub fn moved_bytes(op: &RetileOp, operand: &ArrayShape, out: &ArrayShape) -> u64 {
    match op {
        RetileOp::Reduce { .. } => crate::algebra::storage_bytes(operand),
        _ => crate::algebra::storage_bytes(out),
    }
}

/// The ops of `comp` that may re-tile, with the values they read and
/// define (`leaf_values` maps an instruction to its array values). Only
/// array operands of the op's rank pairing (or, for broadcast and reduce,
/// any rank above 0) are listed.
pub fn collect(
    comp: &Computation,
    order: &[InstId],
    leaf_values: &[SmallVec<[ValueId; 1]>],
) -> TiVec<RetileId, Retiling> {
    let mut out = TiVec::new();
    let ints = |inst: &hlo::Instruction| -> Option<DimVec> {
        inst.attrs
            .ints(KnownAttr::Dimensions)?
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect()
    };
    for &id in order {
        let inst = comp.inst(id);
        let value_of = |o: InstId| {
            leaf_values
                .get(o.index())
                .and_then(|v| (v.len() == 1).then(|| v[0]))
        };
        let Some(results) = leaf_values.get(id.index()) else {
            continue;
        };
        let mut push = |operand: InstId, out_leaf: usize, op: RetileOp| {
            if let (Some(v), Some(&o)) = (value_of(operand), results.get(out_leaf)) {
                out.push(Retiling {
                    inst: id,
                    operand: v,
                    out: o,
                    op,
                });
            }
        };
        match inst.opcode {
            Opcode::Slice => {
                let (Some(AttrValue::Slice(s)), Some(&o)) =
                    (inst.attrs.get(KnownAttr::Slice), inst.operands().first())
                else {
                    continue;
                };
                push(o, 0, RetileOp::Slice(s.clone()));
            }
            Opcode::Pad => {
                let (Some(AttrValue::Padding(p)), Some(&o)) =
                    (inst.attrs.get(KnownAttr::Padding), inst.operands().first())
                else {
                    continue;
                };
                push(o, 0, RetileOp::Pad(p.clone()));
            }
            Opcode::Concatenate => {
                let Some(&[dim]) = ints(inst).as_deref() else {
                    continue;
                };
                let mut offset = 0i64;
                for &o in inst.operands() {
                    let size = comp
                        .inst(o)
                        .shape
                        .as_array()
                        .and_then(|a| a.dims.get(dim).copied())
                        .unwrap_or(0);
                    push(o, 0, RetileOp::Concatenate { dim, offset });
                    offset = offset.saturating_add(size);
                }
            }
            Opcode::Broadcast => {
                let (Some(dims), Some(&o)) = (ints(inst), inst.operands().first()) else {
                    continue;
                };
                if comp
                    .inst(o)
                    .shape
                    .as_array()
                    .is_some_and(|a| a.rank() > 0 && a.rank() == dims.len())
                {
                    push(o, 0, RetileOp::Broadcast { dims });
                }
            }
            Opcode::Reduce => {
                let Some(reduced) = ints(inst) else { continue };
                // A variadic reduce takes N inputs, then N initial values.
                let inputs = inst.operands().len() / 2;
                for (i, &o) in inst.operands()[..inputs].iter().enumerate() {
                    let rank = comp.inst(o).shape.as_array().map_or(0, ArrayShape::rank);
                    if rank > 0 && reduced.iter().all(|&d| d < rank) {
                        push(
                            o,
                            i,
                            RetileOp::Reduce {
                                reduced: reduced.clone(),
                            },
                        );
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The layout order of a reduce input that moves whole tiles: the kept
/// dimensions in the result's order (most minor, where the tiles are),
/// then the reduced dimensions more major, in descending order.
pub fn aligned_reduce_input_order(
    result_m2m: &[usize],
    reduced: &[usize],
    rank: usize,
) -> Option<DimVec> {
    let kept: DimVec = (0..rank).filter(|d| !reduced.contains(d)).collect();
    let mut m2m: DimVec = result_m2m
        .iter()
        .filter_map(|&j| kept.get(j).copied())
        .collect();
    let mut major: DimVec = reduced.iter().copied().collect();
    major.sort_unstable();
    m2m.extend(major.iter().rev().copied());
    (m2m.len() == rank).then_some(m2m)
}
