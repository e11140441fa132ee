//! The physical expansion of a layout: tiling as pad → reshape → transpose.
//!
//! Every dense layout describes its buffer as a row-major array of
//! *physical dimensions* plus a map from a logical index to an index into
//! that array. [`Expansion`] computes that description once, in
//! O(rank × tiling levels), and answers index questions from it:
//!
//! 1. legacy padded dimensions (`PAD(...)`) pad every logical dimension;
//! 2. `minor_to_major` permutes the dimensions into major-to-minor order;
//! 3. each tile level, in order, folds its `*` entries into the next more
//!    minor dimension, pads the tiled suffix to multiples of the tile, splits
//!    every tiled dimension into (count, tile) and moves the within-tile parts
//!    to the minor end, keeping their order. A later level tiles the whole
//!    shape the level before produced, cross-tile dimensions included;
//! 4. tail padding `L(n)` rounds the slot count up to a multiple of `n`.
//!
//! Sizes are computed with checked arithmetic: a layout whose buffer does
//! not fit in 64 bits is an error, never a wrapped number.

use std::fmt;

use smallvec::SmallVec;

use crate::{ArrayShape, DimVec, Dims, Layout, LayoutError, PrimitiveType, Tile};

/// Why a layout question cannot be answered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlgebraError {
    /// The layout does not fit the shape.
    #[error("invalid layout: {0}")]
    Layout(#[from] LayoutError),
    /// An unbounded dynamic dimension (`?`) has no size to lay out.
    #[error(
        "dimension {0} is unbounded ('?'); only static or bounded ('<=N') dimensions have a layout"
    )]
    Unbounded(usize),
    /// Sparse layouts are outside the dense algebra.
    #[error(
        "sparse layouts (D(...) with non-dense levels) are not supported by the layout algebra"
    )]
    Sparse,
    /// A size does not fit in 64 bits.
    #[error("{what} overflows 64 bits")]
    Overflow {
        /// What was being computed.
        what: &'static str,
    },
    /// A multi-index has the wrong number of entries.
    #[error("index has {got} entries but the shape has rank {rank}")]
    IndexRank {
        /// The shape's rank.
        rank: usize,
        /// Entries given.
        got: usize,
    },
    /// A multi-index entry is outside its dimension.
    #[error("index {index} is out of range for dimension {dim} of size {size}")]
    IndexOutOfRange {
        /// The dimension.
        dim: usize,
        /// The offending index.
        index: i64,
        /// The dimension size.
        size: i64,
    },
    /// A linear index is past the end of the buffer.
    #[error("linear index {linear} is past the end of the buffer ({slots} slots)")]
    LinearOutOfRange {
        /// The offending linear index.
        linear: u64,
        /// Slots in the buffer.
        slots: u64,
    },
    /// Two shapes that must describe the same elements do not.
    #[error("{0}")]
    Mismatch(String),
    /// The exact symbolic comparison would need more work than allowed.
    #[error("{0}")]
    TooComplex(String),
}

/// What one linear position of a buffer holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    /// The element with this logical multi-index.
    Element(Dims),
    /// A padding slot (tile padding, legacy padding or tail padding).
    Padding,
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Element(idx) => write_index(f, idx),
            Slot::Padding => f.write_str("padding"),
        }
    }
}

/// Writes an index as `(a,b,c)`.
pub(crate) fn write_index(f: &mut impl fmt::Write, idx: &[i64]) -> fmt::Result {
    f.write_char('(')?;
    crate::text::write_list(f, idx)?;
    f.write_char(')')
}

/// One tiling level: how the shape it receives is combined, padded,
/// reshaped and transposed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileLevel {
    /// The tile, as written (`*` entries included).
    pub tile: Tile,
    /// The shape this level tiles (row-major), i.e. what the level before
    /// produced, or the permuted logical shape for the first level.
    pub input_dims: Dims,
    /// For every dimension of `combined_dims`, how many consecutive input
    /// dimensions it folds together (1 unless `*` entries fold some).
    pub groups: SmallVec<[usize; 6]>,
    /// The input after folding `*` dimensions into the next more minor one.
    pub combined_dims: Dims,
    /// How many leading dimensions of `combined_dims` the tile leaves alone.
    pub prefix: usize,
    /// The tile's sizes with `*` entries removed; they tile the last
    /// `tile_sizes.len()` dimensions of `combined_dims`.
    pub tile_sizes: Dims,
    /// `combined_dims` with the tiled suffix padded to multiples of the tile.
    pub padded_dims: Dims,
    /// The reshape of `padded_dims`: the prefix, then (count, tile) for every
    /// tiled dimension. A bitcast.
    pub split_dims: Dims,
    /// The transpose of `split_dims`: output dimension `k` is split dimension
    /// `permutation[k]` (HLO `dimensions` semantics).
    pub permutation: DimVec,
    /// The result: prefix, tile counts, then tile sizes.
    pub output_dims: Dims,
}

impl TileLevel {
    /// The tile-count dimensions (the cross-tile grid) of this level.
    pub fn tile_counts(&self) -> &[i64] {
        &self.output_dims[self.prefix..self.prefix + self.tile_sizes.len()]
    }
}

/// The canonical description of an array's buffer under its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// Element type.
    pub element_type: PrimitiveType,
    /// Logical dimensions (bounds for bounded dynamic dimensions).
    pub logical_dims: Dims,
    /// Logical dimensions after legacy `PAD(...)` padding.
    pub padded_dims: Dims,
    /// Logical dimension numbers from most major to most minor.
    pub physical_order: DimVec,
    /// Unit dimensions added on the major side because the first tile is
    /// longer than the rank (`f32[]{:T(128)}`); they lead `untiled_dims`.
    pub unit_major_dims: usize,
    /// `padded_dims` in physical (major-to-minor) order, after
    /// `unit_major_dims` dimensions of size 1: the untiled physical shape
    /// the first tile level receives.
    pub untiled_dims: Dims,
    /// The tile levels, in order.
    pub levels: SmallVec<[TileLevel; 2]>,
    /// The final physical shape; the buffer is this array in row-major
    /// order, followed by tail padding.
    pub physical_dims: Dims,
    /// Logical elements.
    pub element_count: u64,
    /// Slots of `physical_dims` (elements plus tile and legacy padding).
    pub element_slots: u64,
    /// Slots including tail padding: the buffer length in elements.
    pub storage_slots: u64,
    /// Bits one slot occupies (`E(bits)` or the type's storage width).
    pub element_bits: u64,
    /// Buffer size in bytes: `storage_slots × element_bits`, rounded up.
    pub storage_bytes: u64,
}

fn overflow(what: &'static str) -> AlgebraError {
    AlgebraError::Overflow { what }
}

fn product(dims: &[i64], what: &'static str) -> Result<u64, AlgebraError> {
    dims.iter().try_fold(1u64, |acc, &d| {
        acc.checked_mul(d as u64).ok_or_else(|| overflow(what))
    })
}

/// `ceil(a / b) * b` with overflow checking; `b > 0`.
fn round_up(a: i64, b: i64) -> Result<i64, AlgebraError> {
    let n = a
        .checked_add(b - 1)
        .ok_or_else(|| overflow("a padded dimension"))?
        / b;
    n.checked_mul(b)
        .ok_or_else(|| overflow("a padded dimension"))
}

/// Checks that a shape can be laid out and returns its layout (the default
/// descending one when the shape has none).
pub(crate) fn checked_layout(
    shape: &ArrayShape,
) -> Result<std::borrow::Cow<'_, crate::Layout>, AlgebraError> {
    for i in 0..shape.rank() {
        if shape.is_unbounded_dim(i) || shape.dims[i] < 0 {
            return Err(AlgebraError::Unbounded(i));
        }
    }
    let layout = match &shape.layout {
        Some(l) => std::borrow::Cow::Borrowed(&**l),
        None => std::borrow::Cow::Owned(crate::Layout::descending(shape.rank())),
    };
    layout.validate_for_dims(&shape.dims)?;
    if layout.is_sparse() {
        return Err(AlgebraError::Sparse);
    }
    Ok(layout)
}

impl Expansion {
    /// Expands a shape's layout (the default descending layout if it has
    /// none). Fails on an invalid layout, an unbounded dimension, a sparse
    /// layout, or a buffer whose size overflows 64 bits.
    pub fn new(shape: &ArrayShape) -> Result<Expansion, AlgebraError> {
        let layout = checked_layout(shape)?;
        let logical_dims = shape.dims.clone();
        let element_count = product(&logical_dims, "the element count")?;
        let padded_dims: Dims = match &layout.padded_dimensions {
            Some(p) => p.iter().copied().collect(),
            None => logical_dims.clone(),
        };
        let physical_order = layout.major_to_minor();
        let unit_major_dims = shape.unit_major_dims();
        let mut untiled_dims: Dims = Dims::from_elem(1, unit_major_dims);
        untiled_dims.extend(physical_order.iter().map(|&d| padded_dims[d]));
        // Every intermediate shape is at most as large as the final one
        // (padding only grows), but check each level on its own anyway.
        product(&untiled_dims, "the padded element count")?;
        let mut levels = SmallVec::new();
        let mut current = untiled_dims.clone();
        for tile in &layout.tiles {
            let level = tile_level(tile, &current)?;
            current = level.output_dims.clone();
            levels.push(level);
        }
        let element_slots = product(&current, "the tiled element count")?;
        let align = layout.tail_padding_alignment_in_elements as u64;
        let storage_slots = element_slots
            .div_ceil(align)
            .checked_mul(align)
            .ok_or_else(|| overflow("the tail-padded element count"))?;
        let element_bits = shape.element_storage_bits();
        let bits = u128::from(storage_slots) * u128::from(element_bits);
        let storage_bytes =
            u64::try_from(bits.div_ceil(8)).map_err(|_| overflow("the buffer size in bytes"))?;
        Ok(Expansion {
            element_type: shape.element_type,
            logical_dims,
            padded_dims,
            physical_order,
            unit_major_dims,
            untiled_dims,
            levels,
            physical_dims: current,
            element_count,
            element_slots,
            storage_slots,
            element_bits,
            storage_bytes,
        })
    }

    /// The rank of the logical shape.
    pub fn rank(&self) -> usize {
        self.logical_dims.len()
    }

    /// Padding slots in the buffer (tile, legacy and tail padding).
    pub fn padding_slots(&self) -> u64 {
        self.storage_slots - self.element_count
    }

    /// Checks a multi-index against the logical dimensions.
    pub fn check_index(&self, index: &[i64]) -> Result<(), AlgebraError> {
        if index.len() != self.rank() {
            return Err(AlgebraError::IndexRank {
                rank: self.rank(),
                got: index.len(),
            });
        }
        for (dim, (&i, &d)) in index.iter().zip(&self.logical_dims).enumerate() {
            if i < 0 || i >= d {
                return Err(AlgebraError::IndexOutOfRange {
                    dim,
                    index: i,
                    size: d,
                });
            }
        }
        Ok(())
    }

    /// The index of an element in the shape produced by the first `levels`
    /// tile levels (0: the untiled physical shape). For `levels >= 1` the
    /// tile-count part, `[prefix..prefix + k]` of level `levels - 1`, says
    /// which tile the element is in.
    pub fn stage_index(&self, index: &[i64], levels: usize) -> Result<Dims, AlgebraError> {
        self.check_index(index)?;
        let cur = self.run_levels(index, levels.min(self.levels.len()));
        Ok(cur.into_iter().collect())
    }

    /// The linear slot of an element; the index must be in range (see
    /// [`Expansion::check_index`]). Never overflows: every intermediate value
    /// is below the slot count, which [`Expansion::new`] checked.
    pub fn linear_index_unchecked(&self, index: &[i64]) -> u64 {
        let cur = self.run_levels(index, self.levels.len());
        let mut linear = 0u64;
        for (&i, &d) in cur.iter().zip(&self.physical_dims) {
            linear = linear * d as u64 + i as u64;
        }
        linear
    }

    fn run_levels(&self, index: &[i64], levels: usize) -> SmallVec<[i64; 12]> {
        let mut cur: SmallVec<[i64; 12]> = SmallVec::from_elem(0, self.unit_major_dims);
        cur.extend(self.physical_order.iter().map(|&d| index[d]));
        let mut next: SmallVec<[i64; 12]> = SmallVec::new();
        for level in &self.levels[..levels] {
            next.clear();
            // Fold `*` groups (row-major merge).
            let mut at = 0;
            for &g in &level.groups {
                let mut v = 0i64;
                for k in at..at + g {
                    v = v * level.input_dims[k] + cur[k];
                }
                next.push(v);
                at += g;
            }
            // Split the tiled suffix and move the within-tile parts last.
            let k = level.tile_sizes.len();
            let p = level.prefix;
            cur.clear();
            cur.extend_from_slice(&next[..p]);
            for j in 0..k {
                cur.push(next[p + j] / level.tile_sizes[j]);
            }
            for j in 0..k {
                cur.push(next[p + j] % level.tile_sizes[j]);
            }
        }
        cur
    }

    /// The linear slot of an element.
    pub fn linear_index(&self, index: &[i64]) -> Result<u64, AlgebraError> {
        self.check_index(index)?;
        Ok(self.linear_index_unchecked(index))
    }

    /// What a linear slot holds: an element's multi-index or padding.
    pub fn multi_index(&self, linear: u64) -> Result<Slot, AlgebraError> {
        if linear >= self.storage_slots {
            return Err(AlgebraError::LinearOutOfRange {
                linear,
                slots: self.storage_slots,
            });
        }
        if linear >= self.element_slots {
            return Ok(Slot::Padding);
        }
        let mut cur: SmallVec<[i64; 12]> = SmallVec::from_elem(0, self.physical_dims.len());
        let mut rest = linear;
        for (c, &d) in cur.iter_mut().zip(&self.physical_dims).rev() {
            *c = (rest % d as u64) as i64;
            rest /= d as u64;
        }
        for level in self.levels.iter().rev() {
            let k = level.tile_sizes.len();
            let p = level.prefix;
            let mut combined: SmallVec<[i64; 12]> = SmallVec::from_slice(&cur[..p]);
            for j in 0..k {
                let x = cur[p + j] * level.tile_sizes[j] + cur[p + k + j];
                if x >= level.combined_dims[p + j] {
                    return Ok(Slot::Padding);
                }
                combined.push(x);
            }
            // Unfold `*` groups (row-major split).
            cur.clear();
            cur.resize(level.input_dims.len(), 0);
            let mut at = 0;
            for (&g, &v) in level.groups.iter().zip(&combined) {
                let mut rest = v;
                for k in (at..at + g).rev() {
                    cur[k] = rest % level.input_dims[k];
                    rest /= level.input_dims[k];
                }
                at += g;
            }
        }
        let mut index: Dims = SmallVec::from_elem(0, self.rank());
        for (&q, &d) in cur[self.unit_major_dims..].iter().zip(&self.physical_order) {
            if q >= self.logical_dims[d] {
                return Ok(Slot::Padding);
            }
            index[d] = q;
        }
        Ok(Slot::Element(index))
    }
}

/// Computes one tile level applied to `input`.
fn tile_level(tile: &Tile, input: &[i64]) -> Result<TileLevel, AlgebraError> {
    let n = input.len();
    let m = tile.dims.len();
    // validate_for_dims guarantees 1 <= m <= n and a sized last entry.
    let start = n - m;
    let mut groups: SmallVec<[usize; 6]> = SmallVec::from_elem(1, start);
    let mut combined_dims: Dims = SmallVec::from_slice(&input[..start]);
    let mut tile_sizes = Dims::new();
    let mut run = 1usize;
    let mut size = 1i64;
    for (j, &t) in tile.dims.iter().enumerate() {
        size = size
            .checked_mul(input[start + j])
            .ok_or_else(|| overflow("a combined dimension"))?;
        if t == Tile::COMBINE {
            run += 1;
            continue;
        }
        groups.push(run);
        combined_dims.push(size);
        tile_sizes.push(t);
        run = 1;
        size = 1;
    }
    let k = tile_sizes.len();
    let prefix = combined_dims.len() - k;
    let mut padded_dims = combined_dims.clone();
    let mut split_dims: Dims = SmallVec::from_slice(&combined_dims[..prefix]);
    let mut counts = Dims::new();
    for j in 0..k {
        let t = tile_sizes[j];
        let padded = round_up(combined_dims[prefix + j], t)?;
        padded_dims[prefix + j] = padded;
        counts.push(padded / t);
        split_dims.push(padded / t);
        split_dims.push(t);
    }
    let mut permutation: DimVec = (0..prefix).collect();
    permutation.extend((0..k).map(|j| prefix + 2 * j));
    permutation.extend((0..k).map(|j| prefix + 2 * j + 1));
    let output_dims: Dims = permutation.iter().map(|&p| split_dims[p]).collect();
    product(&output_dims, "a tiled element count")?;
    Ok(TileLevel {
        tile: tile.clone(),
        input_dims: SmallVec::from_slice(input),
        groups,
        combined_dims,
        prefix,
        tile_sizes,
        padded_dims,
        split_dims,
        permutation,
        output_dims,
    })
}

/// Storage of an array under its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageSize {
    /// Logical elements.
    pub elements: u64,
    /// Slots in the buffer, padding of every kind included.
    pub slots: u64,
    /// Bits per slot.
    pub element_bits: u64,
    /// Bytes: `slots × element_bits` rounded up to whole bytes.
    pub bytes: u64,
}

/// Bytes of the buffer holding `a` in its layout, tile padding included;
/// saturates so that an absurd shape costs "infinitely" much rather than
/// wrapping.
pub fn storage_bytes(a: &ArrayShape) -> u64 {
    match &a.layout {
        Some(l) => storage_bytes_in(a, l),
        None => packed_bytes(a, 0).unwrap_or_else(|| storage_size(a).map_or(u64::MAX, |s| s.bytes)),
    }
}

/// Bytes of the buffer holding `a` (whose own layout is ignored) in
/// `layout`: [`storage_bytes`] without building the shape when the layout
/// only orders dimensions, or adds only an element size.
pub fn storage_bytes_in(a: &ArrayShape, layout: &Layout) -> u64 {
    let packs = layout.tiles.is_empty()
        && layout.padded_dimensions.is_none()
        && layout.tail_padding_alignment_in_elements == 1;
    if packs && let Some(bytes) = packed_bytes(a, layout.element_size_in_bits) {
        return bytes;
    }
    storage_size(&a.in_layout(layout.clone())).map_or(u64::MAX, |s| s.bytes)
}

/// The bytes of `a`'s elements packed with no padding, at `element_bits`
/// bits each (0: the type's default), when the count does not overflow.
fn packed_bytes(a: &ArrayShape, element_bits: i64) -> Option<u64> {
    if a.dynamic != 0 {
        return None;
    }
    let bits = match u64::try_from(element_bits) {
        Ok(b) if b > 0 => b,
        _ => u64::from(a.element_type.default_storage_bits().unwrap_or(8)),
    };
    a.element_count()?.checked_mul(bits).map(|b| b.div_ceil(8))
}

/// The buffer size of a shape under its layout (the default layout if none).
pub fn storage_size(shape: &ArrayShape) -> Result<StorageSize, AlgebraError> {
    // Most layouts have no tiles and no legacy padding: the buffer is then
    // the element count, tail padded, and building the whole expansion (the
    // cost model asks for sizes many times per value) is wasted work. The
    // arithmetic is the same as in `Expansion::new`, and a test compares
    // both paths.
    let layout = checked_layout(shape)?;
    let elements = product(&shape.dims, "the element count")?;
    if layout.tiles.is_empty() && layout.padded_dimensions.is_none() {
        return untiled_storage(
            elements,
            layout.tail_padding_alignment_in_elements,
            shape.element_storage_bits(),
        );
    }
    // Tiled: the sizes of each level's output, without the index maps.
    let padded: &[i64] = layout.padded_dimensions.as_deref().unwrap_or(&shape.dims);
    let mut cur: SmallVec<[i64; 12]> = SmallVec::from_elem(1, shape.unit_major_dims());
    cur.extend(layout.minor_to_major.iter().rev().map(|&d| padded[d]));
    let mut next: SmallVec<[i64; 12]> = SmallVec::new();
    let mut sizes: SmallVec<[(i64, i64); 6]> = SmallVec::new();
    for tile in &layout.tiles {
        let start = cur.len() - tile.dims.len();
        next.clear();
        next.extend_from_slice(&cur[..start]);
        sizes.clear();
        let mut size = 1i64;
        for (j, &t) in tile.dims.iter().enumerate() {
            size = size
                .checked_mul(cur[start + j])
                .ok_or_else(|| overflow("a combined dimension"))?;
            if t != Tile::COMBINE {
                sizes.push((size, t));
                size = 1;
            }
        }
        for &(size, t) in &sizes {
            next.push(round_up(size, t)? / t);
        }
        next.extend(sizes.iter().map(|&(_, t)| t));
        std::mem::swap(&mut cur, &mut next);
    }
    let slots = product(&cur, "the tiled element count")?;
    let mut z = untiled_storage(
        slots,
        layout.tail_padding_alignment_in_elements,
        shape.element_storage_bits(),
    )?;
    z.elements = elements;
    Ok(z)
}

/// The storage of `elements` elements of `element_bits` bits each, the
/// element count padded up to a multiple of `align`.
fn untiled_storage(
    elements: u64,
    align: i64,
    element_bits: u64,
) -> Result<StorageSize, AlgebraError> {
    let align = align as u64;
    let slots = elements
        .div_ceil(align)
        .checked_mul(align)
        .ok_or_else(|| overflow("the tail-padded element count"))?;
    let bits = u128::from(slots) * u128::from(element_bits);
    let bytes =
        u64::try_from(bits.div_ceil(8)).map_err(|_| overflow("the buffer size in bytes"))?;
    Ok(StorageSize {
        elements,
        slots,
        element_bits,
        bytes,
    })
}

/// The linear slot of the element at `index` (one entry per dimension).
pub fn linear_index(shape: &ArrayShape, index: &[i64]) -> Result<u64, AlgebraError> {
    Expansion::new(shape)?.linear_index(index)
}

/// What linear slot `linear` of the buffer holds.
pub fn multi_index(shape: &ArrayShape, linear: u64) -> Result<Slot, AlgebraError> {
    Expansion::new(shape)?.multi_index(linear)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_shape;

    fn array(text: &str) -> ArrayShape {
        parse_shape(text)
            .expect("test shape parses")
            .as_array()
            .expect("an array")
            .clone()
    }

    #[test]
    fn storage_sizes_agree_with_the_expansion() {
        for text in [
            "f32[3,5]{0,1}",
            "s4[7,3]{1,0:E(4)}",
            "pred[9]{0:L(16)E(1)}",
            "bf16[2,3,5]{2,0,1:L(4)}",
            "u8[]",
            "f64[0,4]",
            "f32[3,5]{1,0:T(2,2)}",
            "bf16[3,300]{0,1:T(8,128)(2,1)}",
            "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",
            "s4[5,70]{1,0:T(8,128)(8,1)L(3)E(4)}",
            "f32[]{:T(128)}",
            "pred[]{:T(2,4)(2,1)}",
            "f32[3,5]{1,0:T(2,4)(2,1,1,1)PAD(4,9)}",
        ] {
            let a = array(text);
            let e = Expansion::new(&a).unwrap();
            let z = storage_size(&a).unwrap();
            assert_eq!(
                (z.elements, z.slots, z.element_bits, z.bytes),
                (
                    e.element_count,
                    e.storage_slots,
                    e.element_bits,
                    e.storage_bytes
                ),
                "{text}"
            );
        }
        assert!(storage_size(&array("f32[4611686018427387904,4]")).is_err());
    }

    #[test]
    fn pad_reshape_transpose_of_f32_3_5() {
        let e = Expansion::new(&array("f32[3,5]{1,0:T(2,2)}")).unwrap();
        let l = &e.levels[0];
        assert_eq!(&l.padded_dims[..], &[4, 6]);
        assert_eq!(&l.split_dims[..], &[2, 2, 3, 2]);
        assert_eq!(&l.permutation[..], &[0, 2, 1, 3]);
        assert_eq!(&l.output_dims[..], &[2, 3, 2, 2]);
        assert_eq!(l.tile_counts(), &[2, 3]);
        assert_eq!(e.storage_slots, 24);
        assert_eq!(e.linear_index(&[2, 3]).unwrap(), 17);
        assert_eq!(
            e.multi_index(17).unwrap(),
            Slot::Element(SmallVec::from_slice(&[2, 3]))
        );
    }

    #[test]
    fn a_tiled_scalar_is_one_element_in_a_tile() {
        // XLA's TPU layouts tile scalars: one element, then padding.
        for (text, slots, bytes) in [
            ("f32[]{:T(128)}", 128, 512),
            ("bf16[]{:T(256)}", 256, 512),
            ("pred[]{:T(512)}", 512, 512),
        ] {
            let e = Expansion::new(&array(text)).unwrap();
            assert_eq!(
                (e.unit_major_dims, e.storage_slots, e.storage_bytes),
                (1, slots, bytes),
                "{text}"
            );
            assert_eq!(e.linear_index(&[]).unwrap(), 0);
            assert_eq!(e.multi_index(0).unwrap(), Slot::Element(SmallVec::new()));
            assert_eq!(e.multi_index(1).unwrap(), Slot::Padding);
            assert_eq!(storage_size(&array(text)).unwrap().bytes, bytes);
        }
        // The same element sits where a one-element vector under the same
        // tile holds it, in a buffer of the same size: a bitcast; untiled,
        // the buffer is smaller.
        let scalar = array("f32[]{:T(128)}");
        assert!(
            crate::is_bitcast(&scalar, &array("f32[1]{0:T(128)}"))
                .unwrap()
                .bitcast
        );
        assert!(
            crate::is_bitcast(&scalar, &array("f32[1,1]{1,0:T(1,128)}"))
                .unwrap()
                .bitcast
        );
        assert!(!crate::is_bitcast(&scalar, &array("f32[]")).unwrap().bitcast);
        assert!(
            !crate::is_bitcast(&scalar, &array("f32[1]{0:T(256)}"))
                .unwrap()
                .bitcast
        );
        // A relayout from an untiled scalar pads it into the tile.
        let plan = crate::relayout_plan(&array("f32[]"), &scalar).unwrap();
        assert!(!plan.is_bitcast());
        assert!(
            plan.from
                .layout
                .as_ref()
                .is_some_and(|l| l.tiles.is_empty())
        );
        assert_eq!(plan.steps.last().map(|s| &s.shape), Some(&scalar));
        // Arrays of rank 1 or more may not have tiles longer than the rank.
        assert!(Expansion::new(&array("f32[5]{0:T(8,128)}")).is_err());
    }

    #[test]
    fn errors_are_reported() {
        let e = Expansion::new(&array("f32[3,5]{1,0:T(2,2)}")).unwrap();
        assert!(matches!(
            e.linear_index(&[3, 0]),
            Err(AlgebraError::IndexOutOfRange { .. })
        ));
        assert!(matches!(
            e.linear_index(&[1]),
            Err(AlgebraError::IndexRank { .. })
        ));
        assert!(matches!(
            e.multi_index(24),
            Err(AlgebraError::LinearOutOfRange { .. })
        ));
        let huge = array("f32[1000000000000,1000000000000]");
        assert!(matches!(
            Expansion::new(&huge),
            Err(AlgebraError::Overflow { .. })
        ));
    }
}
