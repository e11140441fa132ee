//! The exact bitcast test: does going from one (shape, layout) to another
//! move no byte?
//!
//! Both sides are described as maps from the *logical row-major linear
//! index* `L` to a slot of their buffer. For a layout change `L` is the
//! row-major index of the common shape; for a reshape it is, by definition,
//! the row-major order of both shapes; a transpose is turned into a layout
//! change by renaming the output's dimensions to the input's.
//!
//! `L` is cut into *atoms*: a mixed-radix partition of `[0, N)` at the
//! boundaries both shapes' dimension sizes allow (a common refinement of
//! their row-major digit boundaries). Each side's expansion (legacy padding,
//! permutation, every tile level with its `*` folds, pads, splits and
//! transposes) is then run symbolically on *pieces*: mixed-radix digits
//! `floor(x_a / w) mod c` of one atom `x_a`, where only an atom's top digit
//! may be padded. The final buffer offset is `Σ stride × piece`, so the map
//! is a sum of one function per atom. Each per-atom function is put in a
//! canonical form (size-1 digits dropped, digits that are always zero
//! dropped, adjacent digits with contiguous strides coalesced), which is
//! unique: two layouts are a bitcast iff every atom's canonical form is the
//! same and the buffers have the same size. This costs O(rank × levels) and
//! allocates nothing for ranks up to 6.
//!
//! Some exotic layouts leave the piece model: a later tile that does not
//! divide the dimension it tiles pads a digit in the middle of an atom, and
//! a `*` fold followed by a tile that cuts across the folded digits mixes
//! two atoms. For those the test falls back to an exact *period* argument:
//! shifting an atom by its period `Δ` (a product of tile sizes, never of
//! array sizes) shifts the offset by a constant on both sides, so the
//! two maps agree everywhere iff they agree on one period box per group of
//! interacting atoms and their per-period increments agree. That box is
//! bounded by tile sizes, not by the element count; above
//! [`FALLBACK_BUDGET`] evaluations the test reports
//! [`AlgebraError::TooComplex`] instead of guessing.

use std::fmt;

use smallvec::SmallVec;

use crate::physical::{AlgebraError, Expansion, checked_layout, write_index};
use crate::recent::Recent;
use crate::text::write_list;
use crate::{ArrayShape, DimVec, Dims, Layout, PrimitiveType, Tile};

/// The most point evaluations the fallback for exotic layouts may spend.
pub const FALLBACK_BUDGET: u64 = 1 << 20;

/// Which operation the two shapes are related by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitcastKind {
    /// Same logical dimensions, different layouts.
    LayoutChange,
    /// Different dimensions, elements matched in row-major logical order.
    Reshape,
    /// A transpose: output dimension `k` is input dimension `dims[k]`.
    Transpose,
    /// One side is the other's physical array: its elements, in row-major
    /// order, are the other side's buffer slots, padding included, and its
    /// dimensions merge or split the other side's physical dimensions (see
    /// [`physical_view_is_bitcast`]).
    PhysicalView,
}

impl fmt::Display for BitcastKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BitcastKind::LayoutChange => "layout change",
            BitcastKind::Reshape => "reshape",
            BitcastKind::Transpose => "transpose",
            BitcastKind::PhysicalView => "physical view",
        })
    }
}

/// Why the verdict is what it is. Formatting (`Display`) is the only part
/// that allocates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Every element keeps its position and the buffers have equal sizes.
    SamePositions {
        /// Buffer size in bytes.
        bytes: u64,
        /// The element types when they differ (their storage widths agree).
        types: Option<(PrimitiveType, PrimitiveType)>,
    },
    /// There are no elements, and the buffers have equal sizes.
    NoElements {
        /// Buffer size in bytes.
        bytes: u64,
    },
    /// The shapes hold different numbers of elements.
    ElementCounts {
        /// Elements in FROM.
        from: u64,
        /// Elements in TO.
        to: u64,
    },
    /// The elements have different storage widths.
    ElementBits {
        /// Bits per element in FROM.
        from: u64,
        /// Bits per element in TO.
        to: u64,
    },
    /// The buffers have different sizes.
    BufferSizes {
        /// Bytes of FROM.
        from: u64,
        /// Bytes of TO.
        to: u64,
    },
    /// An element sits at different positions.
    ElementMoved {
        /// Its index in FROM.
        from_index: Dims,
        /// Its index in TO.
        to_index: Dims,
        /// Its offset in FROM, in bits.
        from_bit: u128,
        /// Its offset in TO, in bits.
        to_bit: u128,
        /// Bits per element (the same on both sides).
        element_bits: u64,
    },
    /// One side is the other's physical array: its elements in row-major
    /// order are the other side's buffer slots, padding included.
    PhysicalView {
        /// True when TO is the view (of FROM's buffer), false when FROM is.
        to_is_view: bool,
        /// Slots of the buffer (elements of the view).
        slots: u64,
        /// Buffer size in bytes.
        bytes: u64,
    },
    /// Neither side is a plain row-major array (its elements in row-major
    /// order with no padding), so neither is the other's physical view.
    NoPlainSide,
    /// The side that is not plain has no tiles and no padding: its
    /// physical array is a transpose of it, so a bitcast must be read as a
    /// layout change, reshape or transpose.
    Untiled,
    /// The plain side has a different number of elements than the other
    /// side's buffer has slots.
    ViewSlots {
        /// Elements of the plain side.
        view: u64,
        /// Slots of the other side's buffer.
        slots: u64,
    },
    /// The plain side's dimensions neither merge nor split the other
    /// side's physical dimensions.
    NotPhysicalDims {
        /// The plain side's dimensions.
        view: Dims,
        /// The other side's physical dimensions.
        physical: Dims,
    },
}

/// The answer of the bitcast test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitcastVerdict {
    /// True when no byte moves.
    pub bitcast: bool,
    /// The relation tested.
    pub kind: BitcastKind,
    /// Why.
    pub reason: Reason,
    /// Which part of the test decided.
    pub decided_by: Method,
}

impl BitcastKind {
    /// The verdict on this relation: every decision returns through it.
    fn verdict(
        self,
        bitcast: bool,
        reason: Reason,
        decided_by: Method,
    ) -> Result<BitcastVerdict, AlgebraError> {
        Ok(BitcastVerdict {
            bitcast,
            kind: self,
            reason,
            decided_by,
        })
    }
}

/// How a verdict was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Element counts, element sizes or buffer sizes settled it.
    Sizes,
    /// The canonical per-atom forms (O(rank × levels)).
    Canonical,
    /// The period argument for exotic layouts (bounded by tile sizes).
    Periods,
}

fn write_offset(f: &mut fmt::Formatter<'_>, bit: u128, element_bits: u64) -> fmt::Result {
    if element_bits.is_multiple_of(8) {
        write!(f, "byte {}", bit / 8)
    } else {
        write!(
            f,
            "bit {bit} (byte {}, element size {element_bits} bits)",
            bit / 8
        )
    }
}

fn write_dims(f: &mut fmt::Formatter<'_>, dims: &[i64]) -> fmt::Result {
    f.write_str("[")?;
    write_list(f, dims)?;
    f.write_str("]")
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::SamePositions { bytes, types } => {
                write!(f, "every element keeps its position and both buffers are {bytes} bytes")?;
                if let Some((a, b)) = types {
                    write!(f, " (element types {a} and {b} differ but have the same storage width)")?;
                }
                Ok(())
            }
            Reason::NoElements { bytes } => {
                write!(f, "there are no elements and both buffers are {bytes} bytes")
            }
            Reason::ElementCounts { from, to } => {
                write!(f, "element counts differ: {from} vs {to}")
            }
            Reason::ElementBits { from, to } => {
                write!(f, "element sizes differ: {from} vs {to} bits")
            }
            Reason::BufferSizes { from, to } => {
                write!(f, "buffer sizes differ: {from} vs {to} bytes")
            }
            Reason::ElementMoved { from_index, to_index, from_bit, to_bit, element_bits } => {
                f.write_str("element ")?;
                write_index(f, from_index)?;
                f.write_str(" is at ")?;
                write_offset(f, *from_bit, *element_bits)?;
                f.write_str(" in FROM but ")?;
                if to_index != from_index {
                    f.write_str("its counterpart ")?;
                    write_index(f, to_index)?;
                    f.write_str(" is at ")?;
                } else {
                    f.write_str("at ")?;
                }
                write_offset(f, *to_bit, *element_bits)?;
                f.write_str(" in TO")
            }
            Reason::PhysicalView { to_is_view, slots, bytes } => {
                let (view, other) = if *to_is_view { ("TO", "FROM") } else { ("FROM", "TO") };
                write!(
                    f,
                    "{view} is {other}'s physical array: its {slots} elements in row-major order are the {slots} slots \
                     of {other}'s buffer ({bytes} bytes), padding included"
                )
            }
            Reason::NoPlainSide => f.write_str(
                "neither side is a plain row-major array (every element at its row-major position, no padding), \
                 so neither is the other's physical view",
            ),
            Reason::Untiled => f.write_str(
                "the other side has no tiles and no padding: its physical array is a transpose of it, \
                 so the bitcast must be a layout change, reshape or transpose",
            ),
            Reason::ViewSlots { view, slots } => {
                write!(f, "the plain side has {view} elements but the other side's buffer has {slots} slots")
            }
            Reason::NotPhysicalDims { view, physical } => {
                f.write_str("the plain side's dimensions ")?;
                write_dims(f, view)?;
                f.write_str(" neither merge nor split the other side's physical dimensions ")?;
                write_dims(f, physical)
            }
        }
    }
}

impl fmt::Display for BitcastVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\n{}",
            if self.bitcast { "bitcast" } else { "copy" },
            self.reason
        )
    }
}

// ---------------------------------------------------------------------------
// Sides: one shape's layout, seen over the logical dimensions used for L.

/// The facts of one side the algebra needs, borrowed where possible.
struct Side<'a> {
    /// Logical dimensions (for a transpose's TO: the input's dimensions).
    dims: &'a [i64],
    /// Logical dimensions from most major to most minor.
    order: SmallVec<[usize; 8]>,
    /// Legacy padded sizes, per logical dimension.
    padded: SmallVec<[i64; 8]>,
    tiles: &'a [Tile],
    tail: u64,
    bits: u64,
}

impl<'a> Side<'a> {
    fn new(shape: &'a ArrayShape, layout: &'a Layout) -> Side<'a> {
        let padded = match &layout.padded_dimensions {
            Some(p) => p.iter().copied().collect(),
            None => shape.dims.iter().copied().collect(),
        };
        Side {
            dims: &shape.dims,
            order: layout.minor_to_major.iter().rev().copied().collect(),
            padded,
            tiles: &layout.tiles,
            tail: layout.tail_padding_alignment_in_elements as u64,
            bits: shape.element_storage_bits(),
        }
    }

    /// This side renamed through a transpose: output dimension `k` is input
    /// dimension `perm[k]`, so the layout is re-expressed over `in_dims`.
    fn transposed(mut self, in_dims: &'a [i64], perm: &[usize]) -> Side<'a> {
        for d in &mut self.order {
            *d = perm[*d];
        }
        let mut padded: SmallVec<[i64; 8]> = SmallVec::from_elem(0, perm.len());
        for (k, &p) in perm.iter().enumerate() {
            padded[p] = self.padded[k];
        }
        self.padded = padded;
        self.dims = in_dims;
        self
    }

    /// Slots of the buffer (tail padding included), with overflow checks,
    /// without building an [`Expansion`].
    fn storage_slots(&self) -> Result<u64, AlgebraError> {
        let of = || AlgebraError::Overflow {
            what: "the buffer size",
        };
        let mut cur: SmallVec<[i64; 16]> = self.order.iter().map(|&d| self.padded[d]).collect();
        let mut next: SmallVec<[i64; 16]> = SmallVec::new();
        for tile in self.tiles {
            let start = cur.len() - tile.dims.len();
            next.clear();
            next.extend_from_slice(&cur[..start]);
            let mut sizes: SmallVec<[(i64, i64); 8]> = SmallVec::new();
            let mut size = 1i64;
            for (j, &t) in tile.dims.iter().enumerate() {
                size = size.checked_mul(cur[start + j]).ok_or_else(of)?;
                if t != Tile::COMBINE {
                    sizes.push((size, t));
                    size = 1;
                }
            }
            for &(s, t) in &sizes {
                next.push(s.checked_add(t - 1).ok_or_else(of)? / t);
            }
            for &(_, t) in &sizes {
                next.push(t);
            }
            std::mem::swap(&mut cur, &mut next);
        }
        let slots = cur
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(of)?;
        slots
            .div_ceil(self.tail)
            .checked_mul(self.tail)
            .ok_or_else(of)
    }

    fn bytes(&self, slots: u64) -> Result<u64, AlgebraError> {
        let bits = u128::from(slots) * u128::from(self.bits);
        u64::try_from(bits.div_ceil(8)).map_err(|_| AlgebraError::Overflow {
            what: "the buffer size in bytes",
        })
    }
}

// ---------------------------------------------------------------------------
// Atoms: a common mixed-radix partition of L.

/// Boundaries `1 = b[0] < b[1] < ... < b[n] = N`; atom `a` is the digit
/// `floor(L / b[a]) mod (b[a+1] / b[a])`. Atom 0 is the most minor.
#[derive(Clone, Debug)]
struct Atoms {
    b: SmallVec<[u64; 16]>,
}

impl Atoms {
    fn count(&self) -> usize {
        self.b.len() - 1
    }

    fn range(&self, a: usize) -> u64 {
        self.b[a + 1] / self.b[a]
    }

    /// The finest partition compatible with both dimension lists: every
    /// row-major suffix product of either side that divides or is divided by
    /// every other one.
    fn common(x: &[i64], y: &[i64]) -> Atoms {
        let mut all: SmallVec<[u64; 32]> = SmallVec::new();
        for dims in [x, y] {
            let mut w = 1u64;
            all.push(1);
            for &d in dims.iter().rev() {
                w *= d as u64;
                all.push(w);
            }
        }
        all.sort_unstable();
        all.dedup();
        let b = all
            .iter()
            .copied()
            .filter(|&v| all.iter().all(|&u| u % v == 0 || v % u == 0))
            .collect();
        Atoms { b }
    }

    /// Merges atoms `lo..=hi` into one.
    fn merge(&mut self, lo: usize, hi: usize) {
        self.b.drain(lo + 1..=hi);
    }

    /// The atom coordinates of a linear index `L`.
    fn weight(&self, a: usize) -> u64 {
        self.b[a]
    }
}

// ---------------------------------------------------------------------------
// Tier 1: the piece model.

/// The atom number of a padding-only piece (value always 0).
const ZERO: u8 = u8::MAX;

/// A mixed-radix digit `floor(x_atom / w) mod c` of one atom; for the atom's
/// top digit `c` may exceed the digit's range (padding). `atom == ZERO`
/// marks padding that holds no element digit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    atom: u8,
    w: u64,
    c: u64,
}

/// Why a side left the piece model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leave {
    /// A dimension built from atoms `lo..=hi` was cut where the atoms do not
    /// allow it; merging those atoms may help.
    Unaligned { lo: usize, hi: usize },
    /// Padding lands inside one atom; only the fallback can decide.
    Nested,
}

/// Current dimensions as lists of pieces, most major first.
#[derive(Default)]
struct Dimset {
    pieces: SmallVec<[Piece; 32]>,
    lens: SmallVec<[u8; 16]>,
}

impl Dimset {
    fn clear(&mut self) {
        self.pieces.clear();
        self.lens.clear();
    }

    fn push_dim(&mut self, p: &[Piece]) {
        self.pieces.extend_from_slice(p);
        self.lens.push(p.len() as u8);
    }
}

fn is_top(atoms: &Atoms, p: &Piece) -> bool {
    p.atom == ZERO || p.w.saturating_mul(p.c) >= atoms.range(p.atom as usize)
}

fn atom_span(pieces: &[Piece]) -> Leave {
    let mut lo = usize::MAX;
    let mut hi = 0;
    for p in pieces.iter().filter(|p| p.atom != ZERO) {
        lo = lo.min(p.atom as usize);
        hi = hi.max(p.atom as usize);
    }
    if lo < hi {
        Leave::Unaligned { lo, hi }
    } else {
        Leave::Nested
    }
}

/// Coalesces adjacent pieces of one dimension that are consecutive digits
/// of the same atom (or both padding), and drops size-1 pieces.
fn coalesce(pieces: &mut SmallVec<[Piece; 8]>) {
    let mut out: SmallVec<[Piece; 8]> = SmallVec::new();
    // Walk from the minor end so that `last` is the more minor neighbour.
    for &p in pieces.iter().rev() {
        if p.c == 1 {
            continue;
        }
        if let Some(last) = out.last_mut()
            && last.atom == p.atom
            && (p.atom == ZERO || p.w == last.w * last.c)
        {
            last.c *= p.c;
            continue;
        }
        out.push(p);
    }
    out.reverse();
    *pieces = out;
}

/// Pads one dimension (pieces, most major first) from `size` to `target`.
fn pad_dim(
    atoms: &Atoms,
    dim: &mut SmallVec<[Piece; 8]>,
    size: u64,
    target: u64,
) -> Result<(), Leave> {
    if target == size {
        return Ok(());
    }
    if dim.is_empty() {
        dim.push(Piece {
            atom: ZERO,
            w: 1,
            c: target,
        });
        return Ok(());
    }
    let first = dim[0];
    let rest = size / first.c;
    if is_top(atoms, &first) && target.is_multiple_of(rest) {
        dim[0].c = target / rest;
        return Ok(());
    }
    if target.is_multiple_of(size) {
        dim.insert(
            0,
            Piece {
                atom: ZERO,
                w: 1,
                c: target / size,
            },
        );
        return Ok(());
    }
    Err(atom_span(dim))
}

/// Pads a dimension to a multiple of `t` and splits it into (count, tile).
fn split_dim(
    atoms: &Atoms,
    dim: &mut SmallVec<[Piece; 8]>,
    t: u64,
    count: &mut SmallVec<[Piece; 8]>,
    tile: &mut SmallVec<[Piece; 8]>,
) -> Result<(), Leave> {
    coalesce(dim);
    count.clear();
    tile.clear();
    let mut w = 1u64;
    let mut j = dim.len();
    loop {
        if w == t {
            count.extend_from_slice(&dim[..j]);
            tile.extend_from_slice(&dim[j..]);
            return Ok(());
        }
        if !t.is_multiple_of(w) {
            return Err(atom_span(dim));
        }
        let s = t / w;
        if j == 0 {
            tile.push(Piece {
                atom: ZERO,
                w: 1,
                c: s,
            });
            tile.extend_from_slice(dim);
            return Ok(());
        }
        let p = dim[j - 1];
        let c = if p.c.is_multiple_of(s) {
            p.c
        } else if j == 1 && is_top(atoms, &p) {
            p.c.div_ceil(s) * s
        } else if s > p.c {
            w *= p.c;
            j -= 1;
            continue;
        } else {
            return Err(atom_span(dim));
        };
        count.extend_from_slice(&dim[..j - 1]);
        if c / s > 1 {
            count.push(Piece {
                atom: p.atom,
                w: if p.atom == ZERO { 1 } else { p.w * s },
                c: c / s,
            });
        }
        tile.push(Piece {
            atom: p.atom,
            w: if p.atom == ZERO { 1 } else { p.w },
            c: s,
        });
        tile.extend_from_slice(&dim[j..]);
        return Ok(());
    }
}

/// The pieces of one logical dimension covering `[lo, lo·d)` of L.
fn dim_pieces(atoms: &Atoms, lo: u64, d: u64, out: &mut SmallVec<[Piece; 8]>) {
    out.clear();
    if d <= 1 {
        return;
    }
    let hi = lo * d;
    let mut a = (0..atoms.count())
        .find(|&a| atoms.b[a + 1] > lo)
        .unwrap_or(0);
    let mut at = lo;
    while at < hi && a < atoms.count() {
        let end = atoms.b[a + 1].min(hi);
        out.push(Piece {
            atom: a as u8,
            w: at / atoms.b[a],
            c: end / at,
        });
        at = end;
        a += 1;
    }
    out.reverse();
}

/// One digit of a canonical per-atom function: `stride × (floor(x/w) mod c)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digit {
    w: u64,
    c: u64,
    stride: u64,
}

/// The canonical form of a side: per atom, its digits from minor to major.
#[derive(Default)]
struct Canon {
    digits: SmallVec<[Digit; 24]>,
    /// `digits[starts[a]..starts[a+1]]` belong to atom `a`.
    starts: SmallVec<[u8; 17]>,
}

impl Canon {
    fn atom(&self, a: usize) -> &[Digit] {
        &self.digits[self.starts[a] as usize..self.starts[a + 1] as usize]
    }
}

fn eval_digits(digits: &[Digit], x: u64) -> u128 {
    let mut v = 0u128;
    for (i, d) in digits.iter().enumerate() {
        let q = x / d.w;
        let q = if i + 1 == digits.len() { q } else { q % d.c };
        v += u128::from(d.stride) * u128::from(q);
    }
    v
}

/// Runs one side through the piece model and canonicalizes it.
fn canonical(side: &Side<'_>, atoms: &Atoms, out: &mut Canon) -> Result<(), Leave> {
    let n = side.dims.len();
    // Row-major weights of the logical dimensions.
    let mut weights: SmallVec<[u64; 8]> = SmallVec::from_elem(1, n);
    for i in (0..n.saturating_sub(1)).rev() {
        weights[i] = weights[i + 1] * side.dims[i + 1] as u64;
    }
    let mut cur = Dimset::default();
    let mut dim: SmallVec<[Piece; 8]> = SmallVec::new();
    for &d in &side.order {
        dim_pieces(atoms, weights[d], side.dims[d] as u64, &mut dim);
        pad_dim(atoms, &mut dim, side.dims[d] as u64, side.padded[d] as u64)?;
        cur.push_dim(&dim);
    }
    let mut next = Dimset::default();
    let mut count: SmallVec<[Piece; 8]> = SmallVec::new();
    let mut tile: SmallVec<[Piece; 8]> = SmallVec::new();
    let mut tiles_part: SmallVec<[Piece; 16]> = SmallVec::new();
    let mut tiles_lens: SmallVec<[u8; 8]> = SmallVec::new();
    for t in side.tiles {
        let ndims = cur.lens.len();
        let start = ndims - t.dims.len();
        next.clear();
        tiles_part.clear();
        tiles_lens.clear();
        let mut at = 0usize;
        for &len in &cur.lens[..start] {
            next.push_dim(&cur.pieces[at..at + len as usize]);
            at += len as usize;
        }
        dim.clear();
        for (j, &size) in t.dims.iter().enumerate() {
            let len = cur.lens[start + j] as usize;
            dim.extend_from_slice(&cur.pieces[at..at + len]);
            at += len;
            if size == Tile::COMBINE {
                continue;
            }
            split_dim(atoms, &mut dim, size as u64, &mut count, &mut tile)?;
            next.push_dim(&count);
            tiles_part.extend_from_slice(&tile);
            tiles_lens.push(tile.len() as u8);
            dim.clear();
        }
        let mut at = 0usize;
        for &len in &tiles_lens {
            next.push_dim(&tiles_part[at..at + len as usize]);
            at += len as usize;
        }
        std::mem::swap(&mut cur, &mut next);
    }
    // Strides of the final pieces, and the digits of each atom.
    out.digits.clear();
    out.starts.clear();
    let mut strides: SmallVec<[u64; 32]> = SmallVec::from_elem(0, cur.pieces.len());
    let mut s = 1u64;
    for (i, p) in cur.pieces.iter().enumerate().rev() {
        strides[i] = s;
        s = s.saturating_mul(p.c);
    }
    let mut mine: SmallVec<[Digit; 8]> = SmallVec::new();
    for a in 0..atoms.count() {
        out.starts.push(out.digits.len() as u8);
        mine.clear();
        for (p, &stride) in cur.pieces.iter().zip(&strides) {
            if p.atom as usize == a {
                mine.push(Digit {
                    w: p.w,
                    c: p.c,
                    stride,
                });
            }
        }
        mine.sort_unstable_by_key(|d| d.w);
        let range = atoms.range(a);
        // The digits must tile the atom: w starts at 1 and each is the
        // product of the ones below; anything else is a bug, and the
        // fallback decides instead.
        let mut expect = 1u64;
        for d in &mine {
            if d.w != expect {
                return Err(Leave::Nested);
            }
            expect = d.w.saturating_mul(d.c);
        }
        if expect < range {
            return Err(Leave::Nested);
        }
        // Canonical form: drop size-1 digits and digits that are always 0,
        // coalesce contiguous neighbours, cut the top digit to its range.
        let first = out.digits.len();
        for &d in &mine {
            if d.c == 1 || d.w >= range {
                continue;
            }
            if out.digits.len() > first {
                let last = out.digits.last_mut().expect("non-empty");
                if d.stride == last.stride.saturating_mul(last.c) {
                    last.c = last.c.saturating_mul(d.c);
                    continue;
                }
            }
            out.digits.push(d);
        }
        if let Some(last) = out.digits[first..].last_mut() {
            last.c = range.div_ceil(last.w);
        }
    }
    out.starts.push(out.digits.len() as u8);
    Ok(())
}

// ---------------------------------------------------------------------------
// Tier 2: the period argument for exotic layouts.

/// A current dimension in the period simulation: its size, how much its
/// value grows when an atom is shifted by that atom's period, and which
/// atoms its value depends on.
#[derive(Clone)]
struct KDim {
    size: u128,
    k: Vec<u128>,
    support: Vec<bool>,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn find(parent: &mut [usize], mut a: usize) -> usize {
    while parent[a] != a {
        parent[a] = parent[parent[a]];
        a = parent[a];
    }
    a
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}

/// Per-atom periods of one side: shifting atom `a` by `delta[a]` (while
/// staying in range) adds exactly `step[a]` to the slot of every element.
/// `delta[a] == None` means the period reaches the atom's range. Atoms
/// whose digits meet in one dimension are grouped (`parent`), since only
/// there can the map fail to be a sum of per-atom functions.
struct Periods {
    delta: Vec<Option<u128>>,
    step: Vec<u128>,
    parent: Vec<usize>,
}

impl Periods {
    /// Makes `delta[a]` a multiple of `need`, scaling every live dimension.
    fn require(&mut self, dims: &mut [KDim], a: usize, need: u128, range: u64) {
        if let Some(d) = self.delta[a] {
            self.scale(dims, a, need / gcd(d, need), range);
        }
    }

    /// Multiplies `delta[a]` by `m`, scaling every live dimension; a period
    /// that reaches the atom's range becomes `None` (enumerate it whole).
    fn scale(&mut self, dims: &mut [KDim], a: usize, m: u128, range: u64) {
        let Some(d) = self.delta[a] else { return };
        if m == 1 {
            return;
        }
        match d.checked_mul(m) {
            Some(nd) if nd < u128::from(range) => {
                self.delta[a] = Some(nd);
                for kd in dims.iter_mut() {
                    kd.k[a] *= m;
                }
            }
            _ => {
                self.delta[a] = None;
                for kd in dims.iter_mut() {
                    kd.k[a] = 0;
                }
            }
        }
    }

    fn group(&mut self, kd: &KDim) {
        let mut first = None;
        for (a, &s) in kd.support.iter().enumerate() {
            if s {
                match first {
                    None => first = Some(a),
                    Some(f) => union(&mut self.parent, f, a),
                }
            }
        }
    }

    fn of(side: &Side<'_>, atoms: &Atoms) -> Periods {
        let na = atoms.count();
        let mut p = Periods {
            delta: vec![Some(1); na],
            step: vec![0; na],
            parent: (0..na).collect(),
        };
        let n = side.dims.len();
        let mut weights = vec![1u64; n];
        for i in (0..n.saturating_sub(1)).rev() {
            weights[i] = weights[i + 1] * side.dims[i + 1] as u64;
        }
        // Where logical dimension i meets atom a: the overlap [olo, ohi) of
        // their L-ranges. The dimension holds floor(x_a / (olo/b_a)) mod
        // (ohi/olo) at weight olo/lo.
        let overlap = |i: usize, a: usize| -> Option<(u64, u64)> {
            if side.dims[i] <= 1 {
                return None;
            }
            let (lo, hi) = (weights[i], weights[i] * side.dims[i] as u64);
            let (olo, ohi) = (lo.max(atoms.b[a]), hi.min(atoms.b[a + 1]));
            (olo < ohi).then_some((olo, ohi))
        };
        // A period shift must leave the atom's digits below the overlap
        // alone, and all of them when the overlap is not the atom's top.
        let mut none: [KDim; 0] = [];
        for i in 0..n {
            for a in 0..na {
                if let Some((olo, ohi)) = overlap(i, a) {
                    let top = ohi == atoms.b[a + 1];
                    let need = if top {
                        olo / atoms.b[a]
                    } else {
                        ohi / atoms.b[a]
                    };
                    p.require(&mut none, a, u128::from(need), atoms.range(a));
                }
            }
        }
        let logical: Vec<KDim> = (0..n)
            .map(|i| {
                let mut kd = KDim {
                    size: 0,
                    k: vec![0; na],
                    support: vec![false; na],
                };
                for a in 0..na {
                    if let Some((olo, ohi)) = overlap(i, a) {
                        kd.support[a] = true;
                        if let (true, Some(d)) = (ohi == atoms.b[a + 1], p.delta[a]) {
                            kd.k[a] =
                                d / u128::from(olo / atoms.b[a]) * u128::from(olo / weights[i]);
                        }
                    }
                }
                kd
            })
            .collect();
        let mut cur: Vec<KDim> = side
            .order
            .iter()
            .map(|&d| KDim {
                size: side.padded[d] as u128,
                ..logical[d].clone()
            })
            .collect();
        for kd in &cur {
            p.group(kd);
        }
        for t in side.tiles {
            let start = cur.len() - t.dims.len();
            let mut combined: Vec<KDim> = cur[..start].to_vec();
            let mut sizes: Vec<u128> = Vec::new();
            let mut acc: Option<KDim> = None;
            for (j, &size) in t.dims.iter().enumerate() {
                let d = &cur[start + j];
                let merged = match acc.take() {
                    None => d.clone(),
                    Some(x) => KDim {
                        size: x.size * d.size,
                        k: x.k
                            .iter()
                            .zip(&d.k)
                            .map(|(&u, &v)| u * d.size + v)
                            .collect(),
                        support: x
                            .support
                            .iter()
                            .zip(&d.support)
                            .map(|(&u, &v)| u || v)
                            .collect(),
                    },
                };
                if size == Tile::COMBINE {
                    acc = Some(merged);
                } else {
                    p.group(&merged);
                    combined.push(merged);
                    sizes.push(size as u128);
                }
            }
            let prefix = combined.len() - sizes.len();
            for (j, &ts) in sizes.iter().enumerate() {
                for a in 0..na {
                    let k = combined[prefix + j].k[a];
                    if !k.is_multiple_of(ts) {
                        p.scale(&mut combined, a, ts / gcd(k, ts), atoms.range(a));
                    }
                }
            }
            let mut next: Vec<KDim> = combined[..prefix].to_vec();
            for (j, &ts) in sizes.iter().enumerate() {
                let c = &combined[prefix + j];
                next.push(KDim {
                    size: c.size.div_ceil(ts),
                    k: c.k.iter().map(|&v| v / ts).collect(),
                    support: c.support.clone(),
                });
            }
            for (j, &ts) in sizes.iter().enumerate() {
                let c = &combined[prefix + j];
                next.push(KDim {
                    size: ts,
                    k: vec![0; na],
                    support: c.support.clone(),
                });
            }
            cur = next;
        }
        let mut stride = 1u128;
        for kd in cur.iter().rev() {
            for a in 0..na {
                p.step[a] += stride * kd.k[a];
            }
            stride = stride.saturating_mul(kd.size);
        }
        p
    }
}

/// Decomposes a row-major linear index over `dims`.
fn unflatten(mut l: u64, dims: &[i64]) -> Dims {
    let mut idx: Dims = SmallVec::from_elem(0, dims.len());
    for (v, &d) in idx.iter_mut().zip(dims).rev() {
        let d = d as u64;
        *v = (l % d) as i64;
        l /= d;
    }
    idx
}

/// A point where the two sides disagree: `L` and both slots.
type Witness = (u64, u128, u128);

/// Decides the comparison with the period argument.
fn fallback(
    from: &ArrayShape,
    to_eff: &ArrayShape,
    sf: &Side<'_>,
    st: &Side<'_>,
    atoms: &Atoms,
) -> Result<Option<Witness>, AlgebraError> {
    let ea = Expansion::new(from)?;
    let eb = Expansion::new(to_eff)?;
    let eval = |l: u64| -> (u128, u128) {
        let a = ea.linear_index_unchecked(&unflatten(l, sf.dims));
        let b = eb.linear_index_unchecked(&unflatten(l, st.dims));
        (u128::from(a), u128::from(b))
    };
    let mut pa = Periods::of(sf, atoms);
    let mut pb = Periods::of(st, atoms);
    let na = atoms.count();
    let mut box_size = vec![0u64; na];
    for (a, size) in box_size.iter_mut().enumerate() {
        let range = atoms.range(a);
        *size = range;
        if let (Some(x), Some(y)) = (pa.delta[a], pb.delta[a]) {
            let l = x / gcd(x, y) * y;
            if l < u128::from(range) {
                *size = l as u64;
                if pa.step[a] * (l / x) != pb.step[a] * (l / y) {
                    let at = (l as u64) * atoms.weight(a);
                    let (fa, fb) = eval(at);
                    return Ok(Some((at, fa, fb)));
                }
            }
        }
        let rb = find(&mut pb.parent, a);
        union(&mut pa.parent, a, rb);
    }
    // One box per group of interacting atoms, every other atom at 0.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut root_of = vec![usize::MAX; na];
    for a in 0..na {
        let r = find(&mut pa.parent, a);
        if root_of[r] == usize::MAX {
            root_of[r] = groups.len();
            groups.push(Vec::new());
        }
        groups[root_of[r]].push(a);
    }
    let mut total = 0u64;
    for g in &groups {
        let size = g
            .iter()
            .try_fold(1u64, |acc, &a| acc.checked_mul(box_size[a]));
        total = size.and_then(|s| total.checked_add(s)).unwrap_or(u64::MAX);
    }
    if total > FALLBACK_BUDGET {
        return Err(AlgebraError::TooComplex(format!(
            "deciding this bitcast exactly needs {total} point evaluations (budget {FALLBACK_BUDGET}): \
             the layouts pad digits inside tiles or fold dimensions across tile boundaries with large periods"
        )));
    }
    for g in &groups {
        let mut x = vec![0u64; g.len()];
        loop {
            let l: u64 = g.iter().zip(&x).map(|(&a, &v)| v * atoms.weight(a)).sum();
            let (fa, fb) = eval(l);
            if fa != fb {
                return Ok(Some((l, fa, fb)));
            }
            // Odometer over the box.
            let mut i = 0;
            loop {
                if i == g.len() {
                    break;
                }
                x[i] += 1;
                if x[i] < box_size[g[i]] {
                    break;
                }
                x[i] = 0;
                i += 1;
            }
            if i == g.len() {
                break;
            }
        }
    }
    Ok(None)
}

// ---------------------------------------------------------------------------
// The entry points.

/// Tests whether FROM and TO, which have the same logical dimensions, hold
/// every element at the same place in buffers of the same size.
pub fn layout_change_is_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
) -> Result<BitcastVerdict, AlgebraError> {
    decide(from, to, BitcastKind::LayoutChange, &[], false)
}

/// Tests whether reshaping FROM into TO (elements matched in row-major
/// logical order) moves no byte. Equal dimensions are a layout change.
pub fn reshape_is_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
) -> Result<BitcastVerdict, AlgebraError> {
    decide(from, to, BitcastKind::Reshape, &[], false)
}

/// Tests whether the transpose of FROM with HLO `dimensions` (output
/// dimension `k` is input dimension `dims[k]`) into TO moves no byte.
pub fn transpose_is_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
    dims: &[usize],
) -> Result<BitcastVerdict, AlgebraError> {
    decide(from, to, BitcastKind::Transpose, dims, false)
}

/// A layout change when the dimensions agree, a reshape otherwise.
pub fn is_bitcast(from: &ArrayShape, to: &ArrayShape) -> Result<BitcastVerdict, AlgebraError> {
    let kind = if from.dims == to.dims {
        BitcastKind::LayoutChange
    } else {
        BitcastKind::Reshape
    };
    decide(from, to, kind, &[], false)
}

// ---------------------------------------------------------------------------
// Physical views.

/// Tests whether one side is the other's *physical array*: a bitcast that
/// reinterprets a buffer as the row-major array of its physical dimensions
/// (the split of a tiled array into tile counts and tile sizes, padding
/// included), or back. The relayout plans begin and end with such
/// bitcasts, and their element counts differ whenever the tiles pad.
///
/// It holds when both sides store elements of the same width and
/// - one side, the *view*, is plain: every element sits at its row-major
///   position and the buffer has no padding (decided by the exact
///   layout-change test against the descending layout);
/// - the other side has tiles or padding (legacy or tail): an untiled
///   layout's physical array is a transpose of it, and a bitcast that
///   flattens it is read as the reshape it looks like (`f32[8,4]{0,1}` to
///   `f32[32]` moves elements);
/// - the view has exactly as many elements as the other side's buffer has
///   slots (tail padding included), so that view element `L` is slot `L`;
/// - the view's dimensions merge or split the other side's physical
///   dimensions, or those of a stage of its expansion whose later tile
///   levels move nothing: every view dimension either lies within one
///   physical dimension or is a run of whole ones (in row-major
///   boundaries, the suffix products of the dimensions: the two lists
///   refine one chain under divisibility, and a view dimension that spans a
///   physical boundary starts and ends on one). This is what makes the
///   view *the* physical array, not an arbitrary reshape of it:
///   `f32[3,5]{1,0:T(2,2)}` (physical `[2,3,2,2]`) viewed as `f32[24]` or
///   `f32[6,2,2]` is one, viewed as `f32[4,6]` is not, and
///   `bf16[8,128]{1,0:T(8,128)(2,1)}` (physical `[4,128,2,1]`) viewed as
///   `bf16[8,128]` is not either.
///
/// TO is tried as the view first, then FROM.
pub fn physical_view_is_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
) -> Result<BitcastVerdict, AlgebraError> {
    let kind = BitcastKind::PhysicalView;
    checked_layout(from)?;
    checked_layout(to)?;
    let (bf, bt) = (from.element_storage_bits(), to.element_storage_bits());
    if bf != bt {
        return kind.verdict(
            false,
            Reason::ElementBits { from: bf, to: bt },
            Method::Sizes,
        );
    }
    let plain_to = plain(to)?;
    let plain_from = plain(from)?;
    let mut first: Option<(Reason, Method)> = None;
    for (view, other, how, to_is_view) in
        [(to, from, plain_to, true), (from, to, plain_from, false)]
    {
        let Some(how) = how else { continue };
        let (reason, method) = match view_of(view, other)? {
            Ok(bytes) => {
                let reason = match view.element_count() {
                    Some(0) => Reason::NoElements { bytes },
                    n => Reason::PhysicalView {
                        to_is_view,
                        slots: n.unwrap_or(0),
                        bytes,
                    },
                };
                return kind.verdict(true, reason, how);
            }
            Err(reason) => (reason, Method::Sizes),
        };
        first.get_or_insert((reason, method));
    }
    let (reason, method) = first.unwrap_or((Reason::NoPlainSide, Method::Canonical));
    kind.verdict(false, reason, method)
}

/// How `s` was shown to be plain (its buffer is its elements in row-major
/// order, nothing else), or `None` when it is not.
fn plain(s: &ArrayShape) -> Result<Option<Method>, AlgebraError> {
    let layout = checked_layout(s)?;
    let mut descending = Layout::descending(s.rank());
    descending.element_size_in_bits = layout.element_size_in_bits;
    // The common case, decided without the general test: no tiles, no
    // padding, and the dimensions larger than 1 in descending order.
    let big = |l: &Layout| {
        l.minor_to_major
            .iter()
            .copied()
            .filter(|&d| s.dims[d] != 1)
            .collect::<SmallVec<[usize; 8]>>()
    };
    let no_tail = match s.element_count() {
        Some(n) => n.is_multiple_of(layout.tail_padding_alignment_in_elements as u64),
        None => false,
    };
    if layout.tiles.is_empty()
        && layout.padded_dimensions.is_none()
        && no_tail
        && big(&layout) == big(&descending)
    {
        return Ok(Some(Method::Canonical));
    }
    // Equal bytes are not enough: sub-byte elements may leave a padding
    // slot in the last byte.
    if Some(crate::storage_size(s)?.slots) != s.element_count() {
        return Ok(None);
    }
    let v = layout_change_is_bitcast(s, &s.in_layout(descending))?;
    Ok(v.bitcast.then_some(v.decided_by))
}

/// Whether the plain `view` is `other`'s physical array: `Ok(bytes)` if so,
/// the reason if not.
fn view_of(view: &ArrayShape, other: &ArrayShape) -> Result<Result<u64, Reason>, AlgebraError> {
    let layout = checked_layout(other)?;
    if layout.tiles.is_empty()
        && layout.padded_dimensions.is_none()
        && layout.tail_padding_alignment_in_elements <= 1
    {
        return Ok(Err(Reason::Untiled));
    }
    let e = Expansion::new(other)?;
    let n = view.element_count().ok_or(AlgebraError::Overflow {
        what: "the element count",
    })?;
    if n != e.storage_slots {
        return Ok(Err(Reason::ViewSlots {
            view: n,
            slots: e.storage_slots,
        }));
    }
    if n == 0 {
        return Ok(Ok(e.storage_bytes));
    }
    // Row-major boundaries (suffix products) below the slot count.
    let slots = e.storage_slots;
    let boundaries = |dims: &[i64]| -> SmallVec<[u64; 16]> {
        let mut out = SmallVec::new();
        let mut w = 1u64;
        for &d in dims.iter().rev() {
            w *= d as u64;
            if w < slots {
                out.push(w);
            }
        }
        out
    };
    let bv = boundaries(&view.dims);
    let fits = |u: u64, v: u64| u.is_multiple_of(v) || v.is_multiple_of(u);
    // The view's dimensions merge or split the physical ones: their
    // boundaries refine one chain, and a view dimension that spans a
    // physical boundary starts and ends on physical boundaries (it merges
    // whole dimensions; otherwise it lies inside one, a split).
    let merges_or_splits = |dims: &[i64]| {
        let bp = boundaries(dims);
        if !bv.iter().all(|&v| bp.iter().all(|&p| fits(v, p))) {
            return false;
        }
        let on = |b: u64| b == 1 || b >= slots || bp.contains(&b);
        let mut lo = 1u64;
        view.dims.iter().rev().all(|&d| {
            let hi = lo * d as u64;
            let whole = !bp.iter().any(|&p| lo < p && p < hi) || (on(lo) && on(hi));
            lo = hi;
            whole
        })
    };
    if merges_or_splits(&e.physical_dims) {
        return Ok(Ok(e.storage_bytes));
    }
    // A stage of the expansion whose later tile levels move nothing (they
    // pad nothing and only reshape) holds the same buffer in row-major
    // order, so its dimensions are the physical array's as well: a view
    // may stop there. Whether the later levels move nothing is the exact
    // test of a plain layout: the stage with those levels as its tiles.
    for (k, level) in e.levels.iter().enumerate() {
        if !merges_or_splits(&level.input_dims) {
            continue;
        }
        let mut rest = Layout::descending(level.input_dims.len()).with_tiles(&layout.tiles[k..]);
        rest.element_size_in_bits = layout.element_size_in_bits;
        let stage = ArrayShape::with_layout(other.element_type, &level.input_dims, rest);
        if plain(&stage)?.is_some() {
            return Ok(Ok(e.storage_bytes));
        }
    }
    Ok(Err(Reason::NotPhysicalDims {
        view: view.dims.clone(),
        physical: e.physical_dims.clone(),
    }))
}

/// Test hook: the same test, decided by the period argument alone (skipping
/// the canonical forms), so that both halves can be checked against a
/// brute-force oracle. `dims` empty means a layout change or reshape.
#[doc(hidden)]
pub fn bitcast_by_periods(
    from: &ArrayShape,
    to: &ArrayShape,
    dims: Option<&[usize]>,
) -> Result<BitcastVerdict, AlgebraError> {
    match dims {
        Some(d) => decide(from, to, BitcastKind::Transpose, d, true),
        None => {
            let kind = if from.dims == to.dims {
                BitcastKind::LayoutChange
            } else {
                BitcastKind::Reshape
            };
            decide(from, to, kind, &[], true)
        }
    }
}

fn check_permutation(
    from: &ArrayShape,
    to: &ArrayShape,
    dims: &[usize],
) -> Result<(), AlgebraError> {
    let r = from.rank();
    if dims.len() != r || to.rank() != r {
        return Err(AlgebraError::Mismatch(format!(
            "transpose dimensions have {} entries, but FROM has rank {r} and TO rank {}",
            dims.len(),
            to.rank()
        )));
    }
    let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, r);
    for &d in dims {
        if d >= r || seen[d] {
            return Err(AlgebraError::Mismatch(format!(
                "transpose dimensions must be a permutation of 0..{r}"
            )));
        }
        seen[d] = true;
    }
    for (k, &d) in dims.iter().enumerate() {
        if to.dims[k] != from.dims[d] {
            return Err(AlgebraError::Mismatch(format!(
                "TO dimension {k} is {} but the transpose takes FROM dimension {d} of size {}",
                to.dims[k], from.dims[d]
            )));
        }
    }
    Ok(())
}

/// TO re-expressed over FROM's dimensions through a transpose.
fn transposed_shape(
    to: &ArrayShape,
    layout: &Layout,
    from_dims: &[i64],
    perm: &[usize],
) -> ArrayShape {
    let mut l = layout.clone();
    for d in &mut l.minor_to_major {
        *d = perm[*d];
    }
    if let Some(p) = &layout.padded_dimensions {
        let mut q = p.clone();
        for (k, &d) in perm.iter().enumerate() {
            q[d] = p[k];
        }
        l.padded_dimensions = Some(q);
    }
    ArrayShape {
        element_type: to.element_type,
        dims: SmallVec::from_slice(from_dims),
        dynamic: 0,
        layout: Some(l.into()),
    }
}

/// [`decide`] for shapes with a first tile longer than the rank (a tiled
/// scalar), which tiles the array seen with unit major dimensions: decided
/// on those views, which hold every element at the same place. `nf` and
/// `nt` are the unit dimensions each view adds (one at least is not 0).
fn decide_unit_major(
    (from, nf): (&ArrayShape, usize),
    (to, nt): (&ArrayShape, usize),
    kind: BitcastKind,
    perm: &[usize],
    periods_only: bool,
) -> Result<BitcastVerdict, AlgebraError> {
    let (from, to) = match kind {
        BitcastKind::Transpose => {
            let n = nf.max(nt);
            let perm: DimVec = (0..n).chain(perm.iter().map(|&d| d + n)).collect();
            let (from, to) = (from.with_unit_major_dims(n), to.with_unit_major_dims(n));
            return decide(&from, &to, kind, &perm, periods_only);
        }
        _ => (from.with_unit_major_dims(nf), to.with_unit_major_dims(nt)),
    };
    // Unequal unit dimensions make a layout change a reshape of the
    // views; the verdict still names the relation asked about.
    let asked = kind;
    let kind = if kind == BitcastKind::LayoutChange && from.dims != to.dims {
        BitcastKind::Reshape
    } else {
        kind
    };
    let verdict = decide(&from, &to, kind, perm, periods_only)?;
    Ok(BitcastVerdict {
        kind: asked,
        ..verdict
    })
}

/// Where two canonical forms over the same atoms first part: the linear
/// index of an element and its slots under each form, or `None` when the
/// first atom that differs shows no witness (which a unique canonical form
/// rules out; the fallback then decides rather than trust it).
fn canonical_witness(atoms: &Atoms, ca: &Canon, cb: &Canon) -> Option<(u64, u128, u128)> {
    let a = (0..atoms.count()).find(|&a| ca.atom(a) != cb.atom(a))?;
    let (da, db) = (ca.atom(a), cb.atom(a));
    // The first digit boundary where the forms part is a witness (the
    // canonical form is unique).
    let mut cands: SmallVec<[u64; 16]> = SmallVec::new();
    cands.push(1);
    cands.extend(
        da.iter()
            .chain(db)
            .flat_map(|d| [d.w, d.w.saturating_mul(d.c)]),
    );
    cands.sort_unstable();
    cands
        .iter()
        .filter(|&&x| x < atoms.range(a))
        .find_map(|&x| {
            let (fa, fb) = (eval_digits(da, x), eval_digits(db, x));
            (fa != fb).then(|| (x * atoms.weight(a), fa, fb))
        })
}

fn decide(
    from: &ArrayShape,
    to: &ArrayShape,
    kind: BitcastKind,
    perm: &[usize],
    periods_only: bool,
) -> Result<BitcastVerdict, AlgebraError> {
    let asked = |(q, _): &Remembered| q.is(from, to, kind, perm, periods_only);
    let known = RECENT.with(|r| Some(r.try_borrow_mut().ok()?.find(asked)?.1.clone()));
    if let Some(verdict) = known {
        return verdict;
    }
    let verdict = decide_now(from, to, kind, perm, periods_only);
    let question = Question {
        from: from.clone(),
        to: to.clone(),
        kind,
        perm: DimVec::from_slice(perm),
        periods_only,
    };
    RECENT.with(|r| {
        if let Ok(mut recent) = r.try_borrow_mut() {
            recent.add((question, verdict.clone()));
        }
    });
    verdict
}

/// How many verdicts a thread remembers (see [`RECENT`]).
const RECENT_VERDICTS: usize = 16;

/// The arguments of one [`decide`].
struct Question {
    from: ArrayShape,
    to: ArrayShape,
    kind: BitcastKind,
    perm: DimVec,
    periods_only: bool,
}

impl Question {
    /// True when these are the arguments (the cheap ones compared first;
    /// shapes that share a layout compare it by pointer).
    fn is(
        &self,
        from: &ArrayShape,
        to: &ArrayShape,
        kind: BitcastKind,
        perm: &[usize],
        periods_only: bool,
    ) -> bool {
        self.kind == kind
            && self.periods_only == periods_only
            && self.perm[..] == *perm
            && self.from == *from
            && self.to == *to
    }
}

thread_local! {
    /// The verdicts a thread reached last (the one that answered last tried
    /// first). A module asks the same few questions again and again, from
    /// several places: the 24-layer transformer's 884 reshapes are 11
    /// distinct shape pairs, which relayout decides and the output check
    /// proves again; a module of many small computations asks the same
    /// question in each (relayout, then the bytes-moved counts, each about
    /// 6,000 instructions a time for the generated module's transpose). A
    /// verdict depends only on the question, so a remembered one is the
    /// one [`decide_now`] gives; the cache is bounded and per thread, so it
    /// needs no lock and holds no more than a few shapes.
    static RECENT: std::cell::RefCell<Recent<Remembered, RECENT_VERDICTS>> =
        const { std::cell::RefCell::new(Recent::new()) };
}

/// A question and the verdict it got.
type Remembered = (Question, Result<BitcastVerdict, AlgebraError>);

/// [`decide`] without the cache: the exact test itself.
fn decide_now(
    from: &ArrayShape,
    to: &ArrayShape,
    kind: BitcastKind,
    perm: &[usize],
    periods_only: bool,
) -> Result<BitcastVerdict, AlgebraError> {
    // A first tile longer than the rank (a tiled scalar) tiles the array
    // seen with unit major dimensions: decide on those views, which hold
    // every element at the same place.
    let (nf, nt) = (from.unit_major_dims(), to.unit_major_dims());
    if nf > 0 || nt > 0 {
        return decide_unit_major((from, nf), (to, nt), kind, perm, periods_only);
    }
    let lf = checked_layout(from)?;
    let lt = checked_layout(to)?;
    match kind {
        BitcastKind::Transpose => check_permutation(from, to, perm)?,
        BitcastKind::LayoutChange if from.dims != to.dims => {
            return Err(AlgebraError::Mismatch(format!(
                "a layout change needs equal dimensions, but FROM has {:?} and TO has {:?}",
                &from.dims[..],
                &to.dims[..]
            )));
        }
        _ => {}
    }
    let sf = Side::new(from, &lf);
    let mut st = Side::new(to, &lt);
    if kind == BitcastKind::Transpose {
        st = st.transposed(&from.dims, perm);
    }
    let count = |s: &ArrayShape| {
        s.element_count().ok_or(AlgebraError::Overflow {
            what: "the element count",
        })
    };
    let (nf, nt) = (count(from)?, count(to)?);
    if nf != nt {
        return kind.verdict(
            false,
            Reason::ElementCounts { from: nf, to: nt },
            Method::Sizes,
        );
    }
    if sf.bits != st.bits {
        return kind.verdict(
            false,
            Reason::ElementBits {
                from: sf.bits,
                to: st.bits,
            },
            Method::Sizes,
        );
    }
    let (bf, bt) = (
        sf.bytes(sf.storage_slots()?)?,
        st.bytes(st.storage_slots()?)?,
    );
    if bf != bt {
        return kind.verdict(
            false,
            Reason::BufferSizes { from: bf, to: bt },
            Method::Sizes,
        );
    }
    if nf == 0 {
        return kind.verdict(true, Reason::NoElements { bytes: bf }, Method::Sizes);
    }
    let types =
        (from.element_type != to.element_type).then_some((from.element_type, to.element_type));
    let same = Reason::SamePositions { bytes: bf, types };
    let moved = |l: u64, a: u128, b: u128| {
        let from_index = unflatten(l, &from.dims);
        let to_index = match kind {
            BitcastKind::LayoutChange | BitcastKind::PhysicalView => from_index.clone(),
            BitcastKind::Reshape => unflatten(l, &to.dims),
            BitcastKind::Transpose => perm.iter().map(|&d| from_index[d]).collect(),
        };
        let bits = u128::from(sf.bits);
        Reason::ElementMoved {
            from_index,
            to_index,
            from_bit: a * bits,
            to_bit: b * bits,
            element_bits: sf.bits,
        }
    };
    // Identical physical descriptions (same dimensions, order, padding and
    // tiles) are the same map: the common case of a transpose whose result
    // layout was made with `permute_dimensions`.
    if sf.dims == st.dims
        && sf.order == st.order
        && sf.padded == st.padded
        && sf.tiles == st.tiles
        && sf.tail == st.tail
    {
        return kind.verdict(true, same, Method::Canonical);
    }
    let mut atoms = Atoms::common(sf.dims, st.dims);
    let (mut ca, mut cb) = (Canon::default(), Canon::default());
    for _ in 0..=atoms.count() {
        if periods_only {
            break;
        }
        match (
            canonical(&sf, &atoms, &mut ca),
            canonical(&st, &atoms, &mut cb),
        ) {
            (Ok(()), Ok(())) => {
                if let Some((l, fa, fb)) = canonical_witness(&atoms, &ca, &cb) {
                    return kind.verdict(false, moved(l, fa, fb), Method::Canonical);
                }
                if (0..atoms.count()).all(|a| ca.atom(a) == cb.atom(a)) {
                    return kind.verdict(true, same, Method::Canonical);
                }
                break;
            }
            (Err(Leave::Nested), _) | (_, Err(Leave::Nested)) => break,
            (Err(Leave::Unaligned { lo, hi }), _) | (_, Err(Leave::Unaligned { lo, hi })) => {
                atoms.merge(lo, hi);
            }
        }
    }
    let to_eff = match kind {
        BitcastKind::Transpose => transposed_shape(to, &lt, &from.dims, perm),
        _ => to.in_layout(lt.as_ref().clone()),
    };
    let from_layout = lf.as_ref().clone();
    let from_eff = from.in_layout(from_layout.clone());
    let to_layout = to_eff.layout_or_default();
    let se = Side::new(&from_eff, &from_layout);
    let te = Side::new(&to_eff, &to_layout);
    match fallback(&from_eff, &to_eff, &se, &te, &atoms)? {
        None => kind.verdict(true, same, Method::Periods),
        Some((l, a, b)) => kind.verdict(false, moved(l, a, b), Method::Periods),
    }
}
/// A bitcast reinterprets bytes and does not record which logical op it
/// stands for, so it is proven when the exact algebra shows it moves no
/// byte as one of them: a layout change (same dimensions), a reshape
/// (row-major element order), a transpose (the permutation deduced from
/// the two layouts), or a physical view (one side is the other's buffer
/// as the row-major array of its physical dimensions: the first and last
/// steps of an expanded relayout).
pub fn prove_bitcast(from: &ArrayShape, to: &ArrayShape) -> Result<(), String> {
    let as_reshape = is_bitcast(from, to);
    if as_reshape.as_ref().is_ok_and(|v| v.bitcast) {
        return Ok(());
    }
    if let Some(dims) = crate::facts::deduce_transpose_dimensions_for_bitcast(from, to)
        && transpose_is_bitcast(from, to, &dims).is_ok_and(|v| v.bitcast)
    {
        return Ok(());
    }
    let as_view = physical_view_is_bitcast(from, to);
    if as_view.as_ref().is_ok_and(|v| v.bitcast) {
        return Ok(());
    }
    // Tiles can make a transpose a bitcast whose dimension order differs
    // from the two layouts' orders (a tile that spans a whole dimension
    // hides where it sits). Try every permutation that matches the
    // dimension sizes; there are few unless many sizes repeat.
    if from.rank() == to.rank() && from.rank() <= crate::MAX_RANK {
        let mut found = false;
        let mut tried = 0usize;
        let mut perm: Vec<usize> = Vec::with_capacity(to.rank());
        let mut used = vec![false; from.rank()];
        permutations_matching(from, to, &mut perm, &mut used, &mut tried, &mut found);
        if found {
            return Ok(());
        }
    }
    // Equal element counts make a reshape the likely reading; different
    // ones a physical view. Say why that one fails.
    let likely = match (&as_reshape, &as_view) {
        (Ok(v), Ok(w)) if matches!(v.reason, Reason::ElementCounts { .. }) => Ok(&w.reason),
        (Ok(v), _) => Ok(&v.reason),
        (Err(e), _) => Err(e),
    };
    Err(match likely {
        Ok(reason) => format!(
            "bitcast from {} to {} is no layout change, reshape, transpose or physical view that keeps every byte: {reason}",
            from, to
        ),
        Err(e) => format!("cannot prove bitcast from {} to {}: {e}", from, to),
    })
}

/// The most permutations `prove_bitcast` tries.
const MAX_PERMUTATIONS: usize = 5040;

/// Depth-first over the permutations `perm` with `to.dims[k] ==
/// from.dims[perm[k]]`, stopping at the first that makes a bitcast
/// transpose or after `MAX_PERMUTATIONS`.
fn permutations_matching(
    from: &ArrayShape,
    to: &ArrayShape,
    perm: &mut Vec<usize>,
    used: &mut [bool],
    tried: &mut usize,
    found: &mut bool,
) {
    if *found || *tried >= MAX_PERMUTATIONS {
        return;
    }
    let k = perm.len();
    if k == to.rank() {
        *tried += 1;
        *found = transpose_is_bitcast(from, to, perm).is_ok_and(|v| v.bitcast);
        return;
    }
    for d in 0..from.rank() {
        if !used[d] && from.dims[d] == to.dims[k] {
            used[d] = true;
            perm.push(d);
            permutations_matching(from, to, perm, used, tried, found);
            perm.pop();
            used[d] = false;
            if *found {
                return;
            }
        }
    }
}
