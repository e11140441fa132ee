//! `Shape`: arrays, tuples, tokens, opaque values and buffers.

use smallvec::SmallVec;

use crate::{Layout, LayoutError, PrimitiveType, SharedLayout};

/// The largest rank Tessera accepts. Dynamic-dimension flags live in a
/// 64-bit mask, and no real program comes near this.
pub const MAX_RANK: usize = 64;

/// Dimension sizes, dimension 0 first.
pub type Dims = SmallVec<[i64; 4]>;

/// The type of an HLO value.
// Arrays are by far the most common variant; boxing them would cost an
// allocation per shape to save space on the rare tuple.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A dense (or sparse) array, scalars included.
    Array(ArrayShape),
    /// A tuple of shapes, possibly empty.
    Tuple(Vec<Shape>),
    /// `token[]`, threaded between side-effecting operations.
    Token,
    /// `opaque[]`, context data for custom calls.
    Opaque,
    /// `b(shape)`, a buffer holding an array.
    Buffer(Box<Shape>),
}

/// An array shape: element type, dimension sizes, which of them are
/// dynamic, and an optional layout.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    /// The element type; never `token` or `opaque`.
    pub element_type: PrimitiveType,
    /// Dimension sizes, dimension 0 first. A dynamic dimension holds its
    /// upper bound, or [`ArrayShape::UNBOUNDED`] for `?`.
    pub dims: Dims,
    /// Bit `i` set means dimension `i` is dynamic (`<=N` or `?`).
    pub dynamic: u64,
    /// The layout; `None` when the text gave none (an AUTO layout in an
    /// entry computation layout, or a shape whose layout is yet to be chosen).
    pub layout: Option<SharedLayout>,
}

// Written out so that the dimensions are copied in one go (see `Layout`'s
// `Clone`).
impl Clone for ArrayShape {
    fn clone(&self) -> ArrayShape {
        ArrayShape {
            element_type: self.element_type,
            dims: SmallVec::from_slice(&self.dims),
            dynamic: self.dynamic,
            layout: self.layout.clone(),
        }
    }
}

impl ArrayShape {
    /// The stored size of an unbounded dynamic dimension (`?`).
    pub const UNBOUNDED: i64 = -1;

    /// A static array with no layout.
    pub fn new(element_type: PrimitiveType, dims: &[i64]) -> ArrayShape {
        ArrayShape {
            element_type,
            dims: Dims::from_slice(dims),
            dynamic: 0,
            layout: None,
        }
    }

    /// A static array with the given layout.
    pub fn with_layout(element_type: PrimitiveType, dims: &[i64], layout: Layout) -> ArrayShape {
        ArrayShape {
            layout: Some(layout.into()),
            ..ArrayShape::new(element_type, dims)
        }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// True if dimension `i` is dynamic.
    pub fn is_dynamic_dim(&self, i: usize) -> bool {
        i < 64 && self.dynamic & (1u64 << i) != 0
    }

    /// True if dimension `i` is unbounded dynamic (`?`).
    pub fn is_unbounded_dim(&self, i: usize) -> bool {
        self.is_dynamic_dim(i) && self.dims[i] == ArrayShape::UNBOUNDED
    }

    /// True if any dimension is unbounded.
    pub fn has_unbounded_dim(&self) -> bool {
        (0..self.rank()).any(|i| self.is_unbounded_dim(i))
    }

    /// The number of logical elements (upper bounds for dynamic dimensions);
    /// `None` on overflow or for an unbounded dimension.
    pub fn element_count(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }

    /// The order of its layout when that layout only orders dimensions
    /// (see [`ArrayShape::order_only_in`]).
    #[inline]
    pub fn order_only(&self) -> Option<&[usize]> {
        self.order_only_in(self.layout.as_deref()?)
    }

    /// The order of `layout` when it only orders dimensions
    /// ([`Layout::only_orders`]) in a valid order and this is a static
    /// array with elements: where the layout questions have short exact
    /// answers (see [`crate::transpose_keeps_bytes`]).
    #[inline]
    pub fn order_only_in<'l>(&self, layout: &'l Layout) -> Option<&'l [usize]> {
        // A list that is no permutation is an invalid layout, which the
        // exact test refuses; an array without elements is a bitcast of
        // itself in any two layouts.
        let m2m = &layout.minor_to_major[..];
        (self.dynamic == 0
            && m2m.len() == self.dims.len()
            && layout.only_orders()
            && !self.dims.contains(&0)
            && crate::facts::is_permutation(m2m))
        .then_some(m2m)
    }

    /// This shape with `layout` in place of its own. Cheaper than cloning
    /// the shape and then replacing the layout: the old one is not copied.
    pub fn in_layout(&self, layout: Layout) -> ArrayShape {
        ArrayShape {
            element_type: self.element_type,
            dims: SmallVec::from_slice(&self.dims),
            dynamic: self.dynamic,
            layout: Some(layout.into()),
        }
    }

    /// The layout, or the default descending layout when none is set.
    pub fn layout_or_default(&self) -> Layout {
        match &self.layout {
            Some(layout) => Layout::clone(layout),
            None => Layout::descending(self.rank()),
        }
    }

    /// This shape with its layout, the default descending one when it has
    /// none. A shape with a layout is cloned, so the layout is shared.
    pub fn laid_out(&self) -> ArrayShape {
        match self.layout {
            Some(_) => self.clone(),
            None => self.in_layout(Layout::descending(self.rank())),
        }
    }

    /// Checks the layout, if any, against the dimensions.
    pub fn validate(&self) -> Result<(), LayoutError> {
        match &self.layout {
            Some(l) => l.validate_for_dims(&self.dims),
            None => Ok(()),
        }
    }

    /// How many unit dimensions the first tile of a scalar's layout adds:
    /// a tiled scalar is tiled as an array of that many dimensions of size
    /// 1 (`f32[]{:T(128)}` is one element in a 128-element tile, as XLA's
    /// TPU layouts print scalars). Zero for every array of rank 1 or more,
    /// whose tiles may not be longer than the rank.
    pub fn unit_major_dims(&self) -> usize {
        if self.rank() > 0 {
            return 0;
        }
        self.layout
            .as_ref()
            .and_then(|l| l.tiles.first())
            .map_or(0, |t| t.dims.len())
    }

    /// The same array with `n` dimensions of size 1 added on the major
    /// side: new dimensions `0..n`, most major in that order, and old
    /// dimension `d` renumbered `d + n`. Every element keeps its place in
    /// the buffer, so the layout algebra may answer questions about a
    /// shape whose first tile is longer than its rank on this one.
    pub fn with_unit_major_dims(&self, n: usize) -> ArrayShape {
        if n == 0 {
            return self.clone();
        }
        let mut dims = Dims::from_elem(1, n);
        dims.extend_from_slice(&self.dims);
        let layout = self.layout.as_ref().map(|l| {
            let mut l = l.clone();
            let mut m2m: crate::DimVec = l.minor_to_major.iter().map(|&d| d + n).collect();
            m2m.extend((0..n).rev());
            l.minor_to_major = m2m;
            if let Some(p) = &l.padded_dimensions {
                let q: Vec<i64> = std::iter::repeat_n(1, n).chain(p.iter().copied()).collect();
                l.padded_dimensions = Some(q.into_boxed_slice());
            }
            l
        });
        ArrayShape {
            element_type: self.element_type,
            dims,
            dynamic: self.dynamic.checked_shl(n as u32).unwrap_or(0),
            layout,
        }
    }

    /// Bits one element occupies: `E(bits)` when the layout sets it,
    /// otherwise the type's default storage width.
    pub fn element_storage_bits(&self) -> u64 {
        match &self.layout {
            Some(l) if l.element_size_in_bits > 0 => l.element_size_in_bits as u64,
            _ => u64::from(self.element_type.default_storage_bits().unwrap_or(8)),
        }
    }

    /// True when both shapes have the same element type and dimensions,
    /// whatever their layouts (XLA's `Compatible`).
    pub fn same_logical_shape(&self, other: &ArrayShape) -> bool {
        self.element_type == other.element_type
            && self.dims == other.dims
            && self.dynamic == other.dynamic
    }
}

impl Shape {
    /// A static array shape with no layout.
    pub fn array(element_type: PrimitiveType, dims: &[i64]) -> Shape {
        Shape::Array(ArrayShape::new(element_type, dims))
    }

    /// The array shape, if this is one.
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The array shape, mutably, if this is one.
    pub fn as_array_mut(&mut self) -> Option<&mut ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    /// True for an array shape.
    pub fn is_array(&self) -> bool {
        matches!(self, Shape::Array(_))
    }

    /// True for a tuple shape.
    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    /// The tuple elements, if this is a tuple.
    pub fn tuple_elements(&self) -> Option<&[Shape]> {
        match self {
            Shape::Tuple(e) => Some(e),
            _ => None,
        }
    }

    /// The subshape at a tuple index path, e.g. `{1, 0}`.
    pub fn subshape(&self, index: &[usize]) -> Option<&Shape> {
        index
            .iter()
            .try_fold(self, |s, &i| s.tuple_elements()?.get(i))
    }

    /// The subshape at a tuple index path, mutably.
    pub fn subshape_mut(&mut self, index: &[usize]) -> Option<&mut Shape> {
        let mut s = self;
        for &i in index {
            s = match s {
                Shape::Tuple(e) => e.get_mut(i)?,
                _ => return None,
            };
        }
        Some(s)
    }

    /// Calls `f` on every array leaf with its tuple index path, in order.
    pub fn for_each_array<'a>(&'a self, f: &mut dyn FnMut(&[usize], &'a ArrayShape)) {
        fn walk<'a>(
            s: &'a Shape,
            path: &mut Vec<usize>,
            f: &mut dyn FnMut(&[usize], &'a ArrayShape),
        ) {
            match s {
                Shape::Array(a) => f(path, a),
                Shape::Tuple(e) => {
                    for (i, s) in e.iter().enumerate() {
                        path.push(i);
                        walk(s, path, f);
                        path.pop();
                    }
                }
                Shape::Buffer(inner) => walk(inner, path, f),
                Shape::Token | Shape::Opaque => {}
            }
        }
        walk(self, &mut Vec::new(), f)
    }

    /// Calls `f` on every array leaf, mutably.
    pub fn for_each_array_mut(&mut self, f: &mut dyn FnMut(&mut ArrayShape)) {
        match self {
            Shape::Array(a) => f(a),
            Shape::Tuple(e) => e.iter_mut().for_each(|s| s.for_each_array_mut(f)),
            Shape::Buffer(inner) => inner.for_each_array_mut(f),
            Shape::Token | Shape::Opaque => {}
        }
    }

    /// The array leaves, in order: the arrays a pass gives layouts to.
    pub fn array_leaves(&self) -> SmallVec<[&ArrayShape; 2]> {
        // Most shapes are one array; they need neither a walk nor the heap.
        if let Shape::Array(a) = self {
            return SmallVec::from_slice(&[a]);
        }
        let mut v = SmallVec::new();
        self.for_each_array(&mut |_, a| v.push(a));
        v
    }

    /// The number of array leaves.
    pub fn array_leaf_count(&self) -> usize {
        let mut n = 0;
        self.for_each_array(&mut |_, _| n += 1);
        n
    }

    /// True when every array leaf has a layout.
    pub fn has_full_layout(&self) -> bool {
        let mut all = true;
        self.for_each_array(&mut |_, a| all &= a.layout.is_some());
        all
    }

    /// True when the two shapes agree in everything but layouts.
    pub fn same_logical_shape(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) => a.same_logical_shape(b),
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.same_logical_shape(y))
            }
            (Shape::Buffer(a), Shape::Buffer(b)) => a.same_logical_shape(b),
            (Shape::Token, Shape::Token) | (Shape::Opaque, Shape::Opaque) => true,
            _ => false,
        }
    }

    /// A copy with every layout removed.
    pub fn without_layouts(&self) -> Shape {
        let mut s = self.clone();
        s.for_each_array_mut(&mut |a| a.layout = None);
        s
    }

    /// Validates every array leaf's layout.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let mut result = Ok(());
        self.for_each_array(&mut |_, a| {
            if result.is_ok() {
                result = a.validate();
            }
        });
        result
    }
}

impl From<ArrayShape> for Shape {
    fn from(a: ArrayShape) -> Shape {
        Shape::Array(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction and every value of the pass holds a shape, and
    /// shapes are cloned on every hot path: a layout held in place made
    /// each shape 208 bytes, shared it costs the shape one pointer.
    #[test]
    fn a_shape_holds_its_layout_by_pointer() {
        assert_eq!(std::mem::size_of::<Option<SharedLayout>>(), 8);
        let size = std::mem::size_of::<Shape>();
        assert!(size <= 64, "a shape is {size} bytes");
    }

    /// A shape's layout behaves as its own value: changing it in one
    /// clone leaves the other clone's as it was.
    #[test]
    fn changing_a_shared_layout_changes_one_shape() {
        let a = ArrayShape::with_layout(PrimitiveType::F32, &[2, 3], Layout::new(&[1, 0]));
        let mut b = a.clone();
        assert!(
            a.layout
                .as_ref()
                .unwrap()
                .ptr_eq(b.layout.as_ref().unwrap())
        );
        b.layout.as_mut().unwrap().minor_to_major = crate::DimVec::from_slice(&[0, 1]);
        assert_eq!(a.layout.as_deref(), Some(&Layout::new(&[1, 0])));
        assert_eq!(b.layout.as_deref(), Some(&Layout::new(&[0, 1])));
        assert!(
            !a.layout
                .as_ref()
                .unwrap()
                .ptr_eq(b.layout.as_ref().unwrap())
        );
    }
}
