//! `Layout`, `Tile` and the other layout properties, with validation.
//!
//! The field set and the text order follow XLA's `Layout` (see
//! `docs/layouts.md`): `minor_to_major`, then the properties `D(...)`,
//! `T(...)`, `L(...)`, `#(...)`, `*(...)`, `E(...)`, `S(...)`, `SC(...)`,
//! `P(...)`, `M(...)`. One Tessera extension follows them: `PAD(...)`, the
//! legacy `padded_dimensions` field of `shapes-and-layout.md`, which XLA
//! retired but whose index arithmetic the reference still describes.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::recent::Recent;
use crate::{PrimitiveType, Shape};

/// Dimension numbers in minor-to-major or major-to-minor order.
pub type DimVec = SmallVec<[usize; 4]>;

/// One tile of a tiling: its sizes, most major first, covering a suffix of
/// the physical dimensions of the shape being tiled.
#[derive(Debug, PartialEq, Eq, Hash, Default)]
pub struct Tile {
    /// Tile sizes, most major first. [`Tile::COMBINE`] marks a dimension
    /// folded into the next more minor one (`*` in text).
    // Two inline entries cover every tile in practice (`(8,128)`, `(2,1)`);
    // more spill to the heap. Each inline entry costs every layout 16 bytes.
    pub dims: SmallVec<[i64; 2]>,
}

// Written out rather than derived: `SmallVec`'s `Clone` copies element by
// element through an iterator, while `from_slice` copies the `Copy`
// elements in one go. Layouts are cloned often enough on the pass's hot
// paths for the difference to show.
impl Clone for Tile {
    fn clone(&self) -> Tile {
        Tile {
            dims: SmallVec::from_slice(&self.dims),
        }
    }
}

impl Tile {
    /// The stored value of a `*` entry. `tiled-layout.md` stores `*` as -1;
    /// XLA's code uses `INT64_MIN`. Only the meaning matters here, and -1 is
    /// what the reference document and `facts.md` use.
    pub const COMBINE: i64 = -1;

    /// A tile from its sizes, most major first.
    pub fn new(dims: &[i64]) -> Tile {
        Tile {
            dims: SmallVec::from_slice(dims),
        }
    }

    /// True if entry `i` is a `*` combine marker.
    pub fn is_combine(&self, i: usize) -> bool {
        self.dims[i] == Tile::COMBINE
    }

    /// The number of entries that are sizes, not combine markers.
    pub fn sized_entries(&self) -> usize {
        self.dims.iter().filter(|&&d| d != Tile::COMBINE).count()
    }

    /// The product of the sizes, combine markers excluded; `None` on overflow.
    pub fn element_count(&self) -> Option<u64> {
        self.dims
            .iter()
            .filter(|&&d| d != Tile::COMBINE)
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }
}

/// How one dimension of a (possibly sparse) array is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DimLevel {
    /// The encoding of the dimension.
    pub kind: DimLevelKind,
    /// False when the text carries the `+` suffix.
    pub unique: bool,
    /// False when the text carries the `~` suffix.
    pub ordered: bool,
}

/// The four dimension level types of XLA's sparse layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DimLevelKind {
    /// `D`: every entry is stored.
    Dense,
    /// `C`: only non-zeros are stored.
    Compressed,
    /// `S`: one coordinate per parent.
    Singleton,
    /// `H`: compressed with a high bound per parent.
    LooseCompressed,
}

impl DimLevelKind {
    /// The letter used in text.
    pub fn letter(self) -> char {
        match self {
            DimLevelKind::Dense => 'D',
            DimLevelKind::Compressed => 'C',
            DimLevelKind::Singleton => 'S',
            DimLevelKind::LooseCompressed => 'H',
        }
    }
}

/// A split configuration `SC(dim:i,j,...)`: where a dimension is split
/// between memories.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitConfig {
    /// The split dimension.
    pub dimension: i64,
    /// The indices at which the splits happen.
    pub split_indices: SmallVec<[i64; 2]>,
}

/// The properties of sparse and exotic layouts, kept in one box because
/// almost no layout has any of them: a layout without them is small, and
/// layouts are cloned and moved on the pass's hot paths.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RareProperties {
    /// Sparse dimension level types; empty for a dense array.
    pub dim_levels: Vec<DimLevel>,
    /// Index type of a sparse array (`#(u32)`).
    pub index_primitive_type: Option<PrimitiveType>,
    /// Pointer type of a sparse array (`*(u32)`).
    pub pointer_primitive_type: Option<PrimitiveType>,
    /// Split configurations (`SC(...)`).
    pub split_configs: Vec<SplitConfig>,
    /// The on-device shape of a sparse array (`P(...)`).
    pub physical_shape: Option<Box<Shape>>,
    /// Bytes of dynamic-shape metadata before the data (`M(n)`).
    pub dynamic_shape_metadata_prefix_bytes: i64,
}

/// The physical layout of an array: dimension order, tiling and the other
/// properties XLA records.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    /// Dimension numbers from the most minor (fastest varying) to the most
    /// major. A permutation of `0..rank` in a valid layout.
    pub minor_to_major: DimVec,
    /// Tiles, applied in order: the first tiles the array, each later one
    /// tiles the shape the previous level produced.
    pub tiles: SmallVec<[Tile; 2]>,
    /// Total elements are padded up to a multiple of this (`L(n)`); 1 means
    /// no tail padding.
    pub tail_padding_alignment_in_elements: i64,
    /// Bits per element when not the type's default (`E(4)`); 0 means default.
    pub element_size_in_bits: i64,
    /// Backend-specific memory space (`S(1)`); 0 is the default space.
    pub memory_space: i64,
    /// Legacy `padded_dimensions` (`PAD(...)`, a Tessera extension): the size
    /// each logical dimension is padded to before the layout applies.
    // Boxed: rare, and a `SmallVec` here made every layout 48 bytes larger.
    pub padded_dimensions: Option<Box<[i64]>>,
    /// Sparse and other rare properties; `None` exactly when all of them
    /// are at their defaults (kept so by [`Layout::rare_mut`]'s users
    /// calling [`Layout::tidy`]), so that equality stays structural.
    pub(crate) rare: Option<Box<RareProperties>>,
}

// Written out for the same reason as `Tile`'s: the hot fields are
// `SmallVec`s of `Copy` numbers, which `from_slice` copies in one go.
impl Clone for Layout {
    fn clone(&self) -> Layout {
        Layout {
            minor_to_major: SmallVec::from_slice(&self.minor_to_major),
            // Most layouts have no tiles; skip the iterator for them.
            tiles: if self.tiles.is_empty() {
                SmallVec::new()
            } else {
                self.tiles.iter().cloned().collect()
            },
            tail_padding_alignment_in_elements: self.tail_padding_alignment_in_elements,
            element_size_in_bits: self.element_size_in_bits,
            memory_space: self.memory_space,
            padded_dimensions: self.padded_dimensions.clone(),
            rare: self.rare.clone(),
        }
    }
}

// Hashes the fields that tell layouts apart in practice and skips the
// rarely set ones. Equal layouts still hash equally, since every hashed field
// takes part in equality; layouts differing only in a skipped field collide
// and are told apart by `Eq`. Layouts are hashed on the pass's hot path
// (interning), where hashing every field cost more than the lookup.
impl std::hash::Hash for Layout {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.minor_to_major.hash(state);
        self.tiles.len().hash(state);
        for tile in &self.tiles {
            tile.dims.hash(state);
        }
        self.element_size_in_bits.hash(state);
        self.memory_space.hash(state);
    }
}

/// A layout as a shape holds it: shared between the shapes that carry
/// it, and copied only when one of them changes it.
///
/// Shapes are cloned and moved on every hot path of the pass, and a
/// layout is most of a shape's size. Held behind a shared pointer, a
/// layout costs a shape eight bytes, and a clone of the shape bumps a
/// count instead of copying it. Reading goes through `Deref`; writing
/// through `DerefMut`, which copies the layout first if another shape
/// shares it, so a shape's layout still behaves as a value of its own.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SharedLayout(Arc<Layout>);

impl SharedLayout {
    /// `layout`, shared with an equal layout this thread shared the same
    /// way a short while ago, if any.
    ///
    /// A parsed module writes a few layouts over and over (`{1,0}` on most
    /// of a transformer's values): sharing them keeps a module near one
    /// copy of each distinct layout rather than one per shape, and a parse
    /// from allocating one per shape. The cache is small and per
    /// thread, so it costs no lock, and it only decides which equal layout
    /// a shape points at, never what the layout is.
    pub fn recent(layout: Layout) -> SharedLayout {
        recent_or(layout, |s, layout| s == layout, |layout| layout)
    }

    /// [`SharedLayout::recent`] for the plain layout of `minor_to_major`
    /// ([`Layout::new`]), the form most shapes in a module are written in.
    /// Looking it up compares the order alone and builds no layout.
    pub fn plain(minor_to_major: &[usize]) -> SharedLayout {
        recent_or(
            minor_to_major,
            |s, m2m| s.minor_to_major[..] == **m2m && s.is_plain(),
            Layout::new,
        )
    }

    /// True when both hold the very same layout, not merely equal ones.
    pub fn ptr_eq(&self, other: &SharedLayout) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// How many layouts [`SharedLayout::recent`] remembers per thread.
const RECENT_LAYOUTS: usize = 8;

thread_local! {
    /// The layouts a thread shared last.
    static RECENT: std::cell::RefCell<Recent<SharedLayout, RECENT_LAYOUTS>> =
        const { std::cell::RefCell::new(Recent::new()) };
}

/// A layout [`RECENT`] keeps that `same` accepts for `key`, or the one
/// `make` makes of it, shared and kept in place of the oldest.
fn recent_or<K>(
    key: K,
    same: impl Fn(&Layout, &K) -> bool,
    make: impl FnOnce(K) -> Layout,
) -> SharedLayout {
    RECENT.with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return SharedLayout::from(make(key));
        };
        if let Some(found) = recent.find(|s| same(s, &key)) {
            return found.clone();
        }
        let shared = SharedLayout::from(make(key));
        recent.add(shared.clone());
        shared
    })
}

impl From<Layout> for SharedLayout {
    fn from(layout: Layout) -> SharedLayout {
        SharedLayout(Arc::new(layout))
    }
}

impl std::ops::Deref for SharedLayout {
    type Target = Layout;

    fn deref(&self) -> &Layout {
        &self.0
    }
}

impl std::ops::DerefMut for SharedLayout {
    fn deref_mut(&mut self) -> &mut Layout {
        Arc::make_mut(&mut self.0)
    }
}

impl PartialEq<Layout> for SharedLayout {
    fn eq(&self, other: &Layout) -> bool {
        *self.0 == *other
    }
}

impl std::fmt::Display for SharedLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq<SharedLayout> for Layout {
    fn eq(&self, other: &SharedLayout) -> bool {
        *self == *other.0
    }
}

// Printed as the layout itself, so that debug output does not change with
// how a shape holds its layout.
impl std::fmt::Debug for SharedLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            minor_to_major: DimVec::new(),
            tiles: SmallVec::new(),
            tail_padding_alignment_in_elements: 1,
            element_size_in_bits: 0,
            memory_space: 0,
            padded_dimensions: None,
            rare: None,
        }
    }
}

impl Layout {
    /// A plain layout with the given minor-to-major order and nothing else.
    pub fn new(minor_to_major: &[usize]) -> Layout {
        Layout::with_minor_to_major(DimVec::from_slice(minor_to_major))
    }

    /// A plain layout with the given minor-to-major order and nothing else,
    /// taking the order without copying it.
    pub fn with_minor_to_major(minor_to_major: DimVec) -> Layout {
        Layout {
            minor_to_major,
            ..Layout::default()
        }
    }

    /// The default (descending, row-major) layout of the given rank:
    /// `{rank-1, ..., 1, 0}`.
    pub fn descending(rank: usize) -> Layout {
        Layout {
            minor_to_major: (0..rank).rev().collect(),
            ..Layout::default()
        }
    }

    /// The same layout with the given tiles.
    pub fn with_tiles(mut self, tiles: &[Tile]) -> Layout {
        self.tiles = tiles.iter().cloned().collect();
        self
    }

    /// True when only `minor_to_major` is set: no tiles, no element size,
    /// no padding and no other property.
    pub fn is_plain(&self) -> bool {
        // Every field but the order, at its default (`Layout::default`),
        // read in place: this is asked on every parsed layout.
        let Layout {
            minor_to_major: _,
            tiles,
            tail_padding_alignment_in_elements,
            element_size_in_bits,
            memory_space,
            padded_dimensions,
            rare,
        } = self;
        tiles.is_empty()
            && *tail_padding_alignment_in_elements == 1
            && *element_size_in_bits == 0
            && *memory_space == 0
            && padded_dimensions.is_none()
            && rare.is_none()
    }

    /// True when the two layouts order dimensions the same way, whatever
    /// their tiles and other properties (XLA's `MinorToMajorOnly` equality).
    pub fn same_minor_to_major(&self, other: &Layout) -> bool {
        self.minor_to_major == other.minor_to_major
    }

    /// The rare properties, defaults when none is set.
    pub fn rare(&self) -> &RareProperties {
        static DEFAULT: std::sync::OnceLock<RareProperties> = std::sync::OnceLock::new();
        self.rare
            .as_deref()
            .unwrap_or_else(|| DEFAULT.get_or_init(RareProperties::default))
    }

    /// The rare properties, to set some. Call [`Layout::tidy`] afterwards.
    pub fn rare_mut(&mut self) -> &mut RareProperties {
        self.rare.get_or_insert_with(Box::default)
    }

    /// Drops the rare properties' box when all of them are at their
    /// defaults, so that a layout equals one that never set them.
    pub fn tidy(&mut self) {
        if self
            .rare
            .as_deref()
            .is_some_and(|r| *r == RareProperties::default())
        {
            self.rare = None;
        }
    }

    /// True when some rare property (sparse levels, index or pointer type,
    /// split configs, physical shape, metadata prefix) is set.
    pub fn has_rare_properties(&self) -> bool {
        self.rare.is_some()
    }

    /// True for a layout that only orders dimensions: no tiles, padding,
    /// element size or sparse levels, nothing that changes where bytes go
    /// beyond the order. Between such layouts the bitcast questions have
    /// short exact answers (see [`crate::transpose_keeps_bytes`]).
    #[inline]
    pub fn only_orders(&self) -> bool {
        self.tiles.is_empty()
            && self.padded_dimensions.is_none()
            && self.tail_padding_alignment_in_elements == 1
            && self.element_size_in_bits == 0
            && self.rare.as_ref().is_none_or(|r| r.dim_levels.is_empty())
    }

    /// Sparse dimension level types; empty for a dense array.
    pub fn dim_levels(&self) -> &[DimLevel] {
        &self.rare().dim_levels
    }

    /// True for a sparse layout (any dimension level other than dense).
    pub fn is_sparse(&self) -> bool {
        self.dim_levels()
            .iter()
            .any(|d| d.kind != DimLevelKind::Dense)
    }

    /// The dimension numbers from most major to most minor.
    pub fn major_to_minor(&self) -> DimVec {
        self.minor_to_major.iter().rev().copied().collect()
    }

    /// Checks this layout against an array of the given dimensions and
    /// reports the first problem, in words a user can act on.
    pub fn validate_for_dims(&self, dims: &[i64]) -> Result<(), LayoutError> {
        let rank = dims.len();
        if self.minor_to_major.len() != rank {
            return Err(LayoutError::MinorToMajorLength {
                rank,
                len: self.minor_to_major.len(),
            });
        }
        let mut seen = 0u128;
        for &d in &self.minor_to_major {
            if d >= rank {
                return Err(LayoutError::MinorToMajorOutOfRange { dim: d, rank });
            }
            if d < 128 && seen & (1u128 << d) != 0 {
                return Err(LayoutError::MinorToMajorDuplicate { dim: d });
            }
            if d < 128 {
                seen |= 1u128 << d;
            }
        }
        let rare = self.rare();
        if !rare.dim_levels.is_empty() && rare.dim_levels.len() != rank {
            return Err(LayoutError::DimLevelCount {
                rank,
                len: rare.dim_levels.len(),
            });
        }
        if self.tail_padding_alignment_in_elements <= 0 {
            return Err(LayoutError::TailPadding(
                self.tail_padding_alignment_in_elements,
            ));
        }
        if self.element_size_in_bits < 0 {
            return Err(LayoutError::ElementSize(self.element_size_in_bits));
        }
        if self.memory_space < 0 {
            return Err(LayoutError::MemorySpace(self.memory_space));
        }
        if rare.dynamic_shape_metadata_prefix_bytes < 0 {
            return Err(LayoutError::MetadataPrefix(
                rare.dynamic_shape_metadata_prefix_bytes,
            ));
        }
        if !self.is_sparse()
            && (rare.index_primitive_type.is_some()
                || rare.pointer_primitive_type.is_some()
                || rare.physical_shape.is_some())
        {
            return Err(LayoutError::SparseFieldOnDense);
        }
        for t in [rare.index_primitive_type, rare.pointer_primitive_type]
            .into_iter()
            .flatten()
        {
            if !t.is_unsigned_integer() {
                return Err(LayoutError::SparseIntType(t));
            }
        }
        if let Some(padded) = &self.padded_dimensions {
            if padded.len() != rank {
                return Err(LayoutError::PaddedDimensionsCount {
                    rank,
                    len: padded.len(),
                });
            }
            for (dim, (&p, &d)) in padded.iter().zip(dims).enumerate() {
                if p < d {
                    return Err(LayoutError::PaddedDimensionTooSmall {
                        dim,
                        padded: p,
                        size: d,
                    });
                }
            }
        }
        // The rank each tiling level works on: the first level sees the
        // array; each later level sees what the level before produced.
        if self.tiles.len() > MAX_TILE_LEVELS {
            return Err(LayoutError::TooManyTileLevels {
                levels: self.tiles.len(),
            });
        }
        // A scalar's tile sees the scalar with unit dimensions added (XLA's
        // TPU layouts tile scalars: `f32[]{:T(128)}`); see
        // `ArrayShape::unit_major_dims`.
        let mut level_rank = if rank == 0 {
            self.tiles.first().map_or(0, |t| t.dims.len())
        } else {
            rank
        };
        for (level, tile) in self.tiles.iter().enumerate() {
            if tile.dims.is_empty() {
                return Err(LayoutError::EmptyTile { level });
            }
            if tile.dims.len() > level_rank {
                return Err(LayoutError::TileTooLong {
                    level,
                    entries: tile.dims.len(),
                    available: level_rank,
                });
            }
            for (entry, &size) in tile.dims.iter().enumerate() {
                if size == Tile::COMBINE {
                    continue;
                }
                if size <= 0 {
                    return Err(LayoutError::TileSize { level, entry, size });
                }
            }
            if *tile.dims.last().expect("tile is not empty") == Tile::COMBINE {
                return Err(LayoutError::CombineMostMinor { level });
            }
            // Untouched major dimensions stay; every sized entry becomes a
            // tile-count dimension and a within-tile dimension; `*` entries
            // disappear into their neighbour.
            level_rank = level_rank - tile.dims.len() + 2 * tile.sized_entries();
        }
        Ok(())
    }
}

/// The most tiling levels a layout may have. Real layouts use one to
/// three (`T(8,128)(2,1)`); each level adds dimensions to the expansion,
/// so a deep nest is rejected rather than expanded.
pub const MAX_TILE_LEVELS: usize = 8;

/// Why a layout does not fit a shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("Dimensions size is {rank}, but minor to major size is {len}")]
    MinorToMajorLength { rank: usize, len: usize },
    #[error("minor_to_major entry {dim} is out of range for rank {rank}")]
    MinorToMajorOutOfRange { dim: usize, rank: usize },
    #[error("minor_to_major names dimension {dim} twice, so it is not a permutation")]
    MinorToMajorDuplicate { dim: usize },
    #[error("the layout has {len} dimension level types but the shape has rank {rank}")]
    DimLevelCount { rank: usize, len: usize },
    #[error("tail padding alignment L({0}) must be at least 1")]
    TailPadding(i64),
    #[error("element size E({0}) must not be negative")]
    ElementSize(i64),
    #[error("memory space S({0}) must not be negative")]
    MemorySpace(i64),
    #[error("dynamic shape metadata prefix M({0}) must not be negative")]
    MetadataPrefix(i64),
    #[error("index type, pointer type and physical shape are only allowed on sparse arrays")]
    SparseFieldOnDense,
    #[error("sparse index and pointer types must be unsigned integers, not {0}")]
    SparseIntType(PrimitiveType),
    #[error("padded dimensions PAD(...) has {len} entries but the shape has rank {rank}")]
    PaddedDimensionsCount { rank: usize, len: usize },
    #[error("padded dimension {dim} is {padded}, smaller than the dimension size {size}")]
    PaddedDimensionTooSmall { dim: usize, padded: i64, size: i64 },
    #[error("the layout has {levels} tiling levels; at most {max} are supported", max = MAX_TILE_LEVELS)]
    TooManyTileLevels { levels: usize },
    #[error("tile {level} is empty")]
    EmptyTile { level: usize },
    #[error(
        "tile {level} has {entries} entries but {} {available} dimensions",
        if *level == 0 { "the shape has" } else { "the tiling level before it produced" }
    )]
    TileTooLong {
        level: usize,
        entries: usize,
        available: usize,
    },
    #[error("tile {level} entry {entry} is {size}; tile sizes must be positive or '*'")]
    TileSize {
        level: usize,
        entry: usize,
        size: i64,
    },
    #[error(
        "tile {level} ends with '*', but '*' combines a dimension into the next more minor one, so it cannot be the most minor entry"
    )]
    CombineMostMinor { level: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(dims: &[i64], layout: Layout) -> Result<(), String> {
        layout.validate_for_dims(dims).map_err(|e| e.to_string())
    }

    /// Each property set alone, and none: a layout is plain exactly when
    /// it equals the plain layout of its order.
    fn one_property_each() -> Vec<Layout> {
        let base = Layout::new(&[1, 0]);
        let mut rare = base.clone();
        rare.rare_mut().dynamic_shape_metadata_prefix_bytes = 8;
        vec![
            base.clone(),
            base.clone().with_tiles(&[Tile::new(&[8, 128])]),
            Layout {
                tail_padding_alignment_in_elements: 4,
                ..base.clone()
            },
            Layout {
                element_size_in_bits: 4,
                ..base.clone()
            },
            Layout {
                memory_space: 1,
                ..base.clone()
            },
            Layout {
                padded_dimensions: Some(vec![8, 8].into()),
                ..base.clone()
            },
            rare,
        ]
    }

    #[test]
    fn plain_means_the_order_and_nothing_else() {
        for l in one_property_each() {
            assert_eq!(l.is_plain(), l == Layout::new(&l.minor_to_major), "{l:?}");
        }
        assert!(Layout::new(&[]).is_plain());
    }

    #[test]
    fn recent_layouts_are_shared_and_unchanged() {
        // A thread of its own starts with an empty cache, whatever ran on
        // the test harness's thread before.
        std::thread::spawn(recent_layouts_on_a_fresh_thread)
            .join()
            .expect("the check passes");
    }

    fn recent_layouts_on_a_fresh_thread() {
        let layouts = one_property_each();
        let first: Vec<SharedLayout> = layouts.iter().cloned().map(SharedLayout::recent).collect();
        for (l, s) in layouts.iter().zip(&first) {
            assert_eq!(**s, *l);
            let again = SharedLayout::recent(l.clone());
            assert!(again.ptr_eq(s), "{l:?} was not shared");
        }
        // The plain form finds the plain layout, and only it, among them.
        let plain = SharedLayout::plain(&[1, 0]);
        assert!(plain.ptr_eq(&first[0]));
        assert_eq!(*SharedLayout::plain(&[0, 1]), Layout::new(&[0, 1]));
        // More layouts than the cache holds: each is still the one asked for.
        for rank in 0..3 * RECENT_LAYOUTS {
            let m2m: Vec<usize> = (0..rank).rev().collect();
            assert_eq!(*SharedLayout::plain(&m2m), Layout::descending(rank));
        }
    }

    #[test]
    fn valid_layouts() {
        assert_eq!(
            check(
                &[3, 5],
                Layout::new(&[1, 0]).with_tiles(&[Tile::new(&[2, 2])])
            ),
            Ok(())
        );
        // A later tile may reach into the cross-tile dimensions.
        let l = Layout::new(&[1, 0]).with_tiles(&[Tile::new(&[2, 4]), Tile::new(&[2, 1, 1, 1])]);
        assert_eq!(check(&[8, 8], l), Ok(()));
        let l = Layout::new(&[4, 3, 2, 1, 0]).with_tiles(&[Tile::new(&[-1, -1, 2, -1, 3])]);
        assert_eq!(check(&[2, 7, 8, 11, 10], l), Ok(()));
    }

    #[test]
    fn invalid_layouts() {
        assert_eq!(
            check(&[2, 3], Layout::new(&[0, 1, 2])),
            Err("Dimensions size is 2, but minor to major size is 3".into())
        );
        assert!(
            check(&[2, 3], Layout::new(&[0, 0]))
                .unwrap_err()
                .contains("not a permutation")
        );
        assert!(
            check(&[2, 3], Layout::new(&[0, 2]))
                .unwrap_err()
                .contains("out of range")
        );
        let l = Layout::new(&[1, 0]).with_tiles(&[Tile::new(&[0, 2])]);
        assert!(check(&[2, 3], l).unwrap_err().contains("must be positive"));
        let l = Layout::new(&[1, 0]).with_tiles(&[Tile::new(&[2, -1])]);
        assert!(check(&[2, 3], l).unwrap_err().contains("most minor"));
        let l = Layout::new(&[0]).with_tiles(&[Tile::new(&[8, 128])]);
        assert!(
            check(&[5], l)
                .unwrap_err()
                .contains("the shape has 1 dimensions")
        );
        // A deep nest is refused before anything expands it.
        let deep = vec![Tile::new(&[1]); MAX_TILE_LEVELS + 1];
        assert!(
            check(&[5], Layout::new(&[0]).with_tiles(&deep))
                .unwrap_err()
                .contains("tiling levels; at most 8")
        );
        assert_eq!(
            check(&[5], Layout::new(&[0]).with_tiles(&deep[1..])),
            Ok(())
        );
        let l = Layout::new(&[1, 0]).with_tiles(&[Tile::new(&[2, 4]), Tile::new(&[1, 2, 1, 1, 1])]);
        assert!(
            check(&[8, 8], l)
                .unwrap_err()
                .contains("produced 4 dimensions")
        );
    }
}
