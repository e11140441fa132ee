//! Values and physical buffers.

use std::fmt;
use std::sync::Arc;

use shape::{ArrayShape, Dims, Expansion, Layout, PrimitiveType, SharedLayout};

use crate::element::{self, Class, Num};
use crate::error::EvalError;

/// One element, decoded: what a slot holds, independent of its width.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A `pred` element.
    Pred(bool),
    /// A signed integer element of any width.
    Int(i64),
    /// An unsigned integer element of any width.
    UInt(u64),
    /// A real floating-point element of any width (exact in f64).
    Float(f64),
    /// A `c64` element: real and imaginary parts.
    Complex(f64, f64),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Pred(b) => write!(f, "{b}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
            Scalar::Complex(re, im) => write!(f, "({re:?}, {im:?})"),
        }
    }
}

pub(crate) fn num_to_scalar(n: Num) -> Scalar {
    match n {
        Num::P(b) => Scalar::Pred(b),
        Num::S(v) => Scalar::Int(v),
        Num::U(v) => Scalar::UInt(v),
        Num::F(x) => Scalar::Float(x),
        Num::C(re, im) => Scalar::Complex(re, im),
    }
}

pub(crate) fn scalar_to_num(s: Scalar) -> Num {
    match s {
        Scalar::Pred(b) => Num::P(b),
        Scalar::Int(v) => Num::S(v),
        Scalar::UInt(v) => Num::U(v),
        Scalar::Float(x) => Num::F(x),
        Scalar::Complex(re, im) => Num::C(re, im),
    }
}

/// An array value in a physical buffer: one slot per storage position of
/// its shape's layout (tile, legacy and tail padding included), each slot
/// holding one element in canonical form, or poison.
///
/// Slots that the layout reserves for padding are poison in a freshly
/// computed buffer; a `bitcast` that maps a logical element onto one of
/// them is an evaluation error.
#[derive(Clone, Debug)]
pub struct Buffer {
    shape: Arc<ArrayShape>,
    slots: Arc<Vec<u64>>,
    /// `true` marks a poison slot; `None` when no slot is poison.
    poison: Option<Arc<Vec<bool>>>,
}

/// A runtime value.
#[derive(Clone, Debug)]
pub enum Value {
    /// An array in a physical buffer.
    Array(Buffer),
    /// A tuple.
    Tuple(Vec<Value>),
    /// A token (a unit value).
    Token,
}

impl Value {
    /// The buffer, if this is an array.
    pub fn as_array(&self) -> Option<&Buffer> {
        match self {
            Value::Array(b) => Some(b),
            _ => None,
        }
    }

    /// The elements, if this is a tuple.
    pub fn tuple_elements(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(e) => Some(e),
            _ => None,
        }
    }

    /// The number of array elements in all leaves.
    pub fn element_count(&self) -> u64 {
        match self {
            Value::Array(b) => b.element_count(),
            Value::Tuple(e) => e.iter().map(Value::element_count).sum(),
            Value::Token => 0,
        }
    }
}

/// How the logical elements of a shape map to slots.
pub(crate) enum SlotMap {
    /// Logical row-major order is the slot order (descending layout, no
    /// padding of any kind).
    Identity,
    /// A permutation with strides (no tiles, no padding).
    Strided(Dims),
    /// Tiles without `*`: every tile level splits each dimension on its
    /// own, so an element's slot is a sum of one term per dimension
    /// (`offsets[d][i]` for index `i` of dimension `d`), read off the
    /// expansion once per dimension entry instead of once per element.
    Separable(Vec<Vec<u64>>),
    /// Anything else: the full expansion.
    Tiled(Box<Expansion>),
}

/// Row-major strides of `dims`.
pub(crate) fn row_major_strides(dims: &[i64]) -> Dims {
    let mut strides = Dims::from_elem(1, dims.len());
    for i in (0..dims.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    strides
}

/// Calls `f` with every multi-index of `dims` in row-major order.
pub(crate) fn for_each_index(dims: &[i64], mut f: impl FnMut(&[i64])) {
    let _ = try_for_each_index::<()>(dims, |idx| {
        f(idx);
        Ok(())
    });
}

/// Calls `f` with every multi-index of `dims` in row-major order, stopping
/// at the first error.
pub(crate) fn try_for_each_index<E>(
    dims: &[i64],
    mut f: impl FnMut(&[i64]) -> Result<(), E>,
) -> Result<(), E> {
    if dims.iter().any(|&d| d <= 0) {
        return Ok(());
    }
    let mut idx = Dims::from_elem(0, dims.len());
    loop {
        f(&idx)?;
        let mut k = dims.len();
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// The element count of `dims`, or an error if it overflows or a
/// dimension is negative.
pub(crate) fn element_count(dims: &[i64]) -> Result<u64, EvalError> {
    dims.iter().try_fold(1u64, |acc, &d| {
        let d =
            u64::try_from(d).map_err(|_| EvalError::msg(format!("negative dimension size {d}")))?;
        acc.checked_mul(d)
            .ok_or_else(|| EvalError::msg("element count overflows 64 bits"))
    })
}

fn is_plain_untiled(layout: &Layout) -> bool {
    layout.tiles.is_empty()
        && layout.padded_dimensions.is_none()
        && layout.tail_padding_alignment_in_elements == 1
}

impl SlotMap {
    pub(crate) fn new(shape: &ArrayShape) -> Result<SlotMap, EvalError> {
        let layout = match &shape.layout {
            None => return Ok(SlotMap::Identity),
            Some(l) => l,
        };
        if is_plain_untiled(layout)
            && layout.validate_for_dims(&shape.dims).is_ok()
            && !layout.is_sparse()
        {
            let rank = shape.rank();
            if layout.minor_to_major.iter().copied().eq((0..rank).rev()) {
                return Ok(SlotMap::Identity);
            }
            let mut strides = Dims::from_elem(0, rank);
            let mut s = 1i64;
            for &d in &layout.minor_to_major {
                strides[d] = s;
                s = s.saturating_mul(shape.dims[d]);
            }
            return Ok(SlotMap::Strided(strides));
        }
        let expansion = Expansion::new(shape).map_err(EvalError::layout)?;
        if layout
            .tiles
            .iter()
            .all(|t| !t.dims.contains(&shape::Tile::COMBINE))
        {
            // Each output dimension of every level is a function of one
            // logical dimension, so the slot is the sum of each
            // dimension's own term (all zero at index 0).
            let mut unit = Dims::from_elem(0, shape.rank());
            let offsets = (0..shape.rank())
                .map(|d| {
                    (0..shape.dims[d].max(0))
                        .map(|i| {
                            unit[d] = i;
                            let slot = expansion.linear_index_unchecked(&unit);
                            unit[d] = 0;
                            slot
                        })
                        .collect()
                })
                .collect();
            return Ok(SlotMap::Separable(offsets));
        }
        Ok(SlotMap::Tiled(Box::new(expansion)))
    }

    /// The slot of the element at `index` (in range).
    fn slot_of(&self, dims: &[i64], index: &[i64]) -> u64 {
        match self {
            SlotMap::Identity => row_major_strides(dims)
                .iter()
                .zip(index)
                .map(|(s, i)| s * i)
                .sum::<i64>() as u64,
            SlotMap::Strided(st) => st.iter().zip(index).map(|(s, i)| s * i).sum::<i64>() as u64,
            SlotMap::Separable(offsets) => {
                offsets.iter().zip(index).map(|(o, &i)| o[i as usize]).sum()
            }
            SlotMap::Tiled(e) => e.linear_index_unchecked(index),
        }
    }

    /// The slot of every logical element, in logical row-major order.
    pub(crate) fn table(&self, dims: &[i64]) -> Vec<u64> {
        let n = dims.iter().product::<i64>().max(0) as usize;
        let mut out = Vec::with_capacity(n);
        match self {
            SlotMap::Identity => out.extend(0..n as u64),
            SlotMap::Strided(strides) => for_each_index(dims, |idx| {
                let s: i64 = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
                out.push(s as u64);
            }),
            SlotMap::Separable(offsets) => {
                // Row-major: the most minor dimension's terms added to the
                // sum of the others, which changes once per row.
                let Some((last, major)) = offsets.split_last() else {
                    out.push(0);
                    return out;
                };
                let rows: Vec<i64> = dims[..dims.len() - 1].to_vec();
                for_each_index(&rows, |idx| {
                    let base: u64 = major.iter().zip(idx).map(|(o, &i)| o[i as usize]).sum();
                    out.extend(last.iter().map(|&o| base + o));
                });
            }
            SlotMap::Tiled(e) => {
                for_each_index(dims, |idx| out.push(e.linear_index_unchecked(idx)))
            }
        }
        out
    }
}

/// The storage slot count of a shape under its layout.
pub(crate) fn storage_slots(shape: &ArrayShape) -> Result<u64, EvalError> {
    match &shape.layout {
        Some(l) if !is_plain_untiled(l) => {
            Ok(shape::storage_size(shape).map_err(EvalError::layout)?.slots)
        }
        _ => {
            if let Some(l) = &shape.layout {
                l.validate_for_dims(&shape.dims)
                    .map_err(|e| EvalError::layout(e.into()))?;
                if l.is_sparse() {
                    return Err(EvalError::msg("sparse layouts are not supported"));
                }
            }
            element_count(&shape.dims)
        }
    }
}

/// The hard cap on the slots of any buffer (2 GiB of slot storage), on top
/// of the evaluator's configurable limit.
const MAX_SLOTS: u64 = 1 << 28;

/// Fills in the default layout when a shape has none.
pub(crate) fn with_default_layout(mut shape: ArrayShape) -> ArrayShape {
    if shape.layout.is_none() {
        shape.layout = Some(Layout::descending(shape.rank()).into());
    }
    shape
}

/// Element bits in logical row-major order, with a poison flag per element
/// when any is poison.
pub(crate) type LogicalBits<'a> = (std::borrow::Cow<'a, [u64]>, Option<Vec<bool>>);

impl Buffer {
    /// Builds a buffer from canonical logical row-major element bits.
    /// `data.len()` must be the element count.
    pub(crate) fn from_logical_bits(
        shape: ArrayShape,
        data: Vec<u64>,
    ) -> Result<Buffer, EvalError> {
        let shape = with_default_layout(shape);
        let n = element_count(&shape.dims)?;
        if data.len() as u64 != n {
            return Err(EvalError::msg(format!(
                "internal: {} values for a shape of {n} elements",
                data.len()
            )));
        }
        let map = SlotMap::new(&shape)?;
        if let SlotMap::Identity = map {
            return Ok(Buffer {
                shape: Arc::new(shape),
                slots: Arc::new(data),
                poison: None,
            });
        }
        let slots_n = storage_slots(&shape)?;
        if slots_n > MAX_SLOTS {
            return Err(EvalError::limit(format!(
                "{shape} needs {slots_n} slots, more than any buffer may have (2^28)"
            )));
        }
        let slots_n = slots_n as usize;
        let table = map.table(&shape.dims);
        let mut slots = vec![0u64; slots_n];
        let mut poison = if slots_n as u64 > n {
            Some(vec![true; slots_n])
        } else {
            None
        };
        for (v, &s) in data.iter().zip(&table) {
            slots[s as usize] = *v;
            if let Some(p) = poison.as_mut() {
                p[s as usize] = false;
            }
        }
        Ok(Buffer {
            shape: Arc::new(shape),
            slots: Arc::new(slots),
            poison: poison.map(Arc::new),
        })
    }

    /// Builds a buffer from logical row-major element bits, some of them
    /// poison (`poison[i]` for element `i`): what a data movement makes of
    /// a physical view's padding.
    pub(crate) fn from_logical_bits_poison(
        shape: ArrayShape,
        data: Vec<u64>,
        poison: Option<Vec<bool>>,
    ) -> Result<Buffer, EvalError> {
        let mut out = Buffer::from_logical_bits(shape, data)?;
        let Some(poison) = poison.filter(|p| p.contains(&true)) else {
            return Ok(out);
        };
        let table = SlotMap::new(&out.shape)?.table(&out.shape.dims);
        let mut mask = match out.poison.take() {
            Some(m) => Arc::unwrap_or_clone(m),
            None => vec![false; out.slots.len()],
        };
        for (&s, &p) in table.iter().zip(&poison) {
            if p {
                mask[s as usize] = true;
            }
        }
        out.poison = Some(Arc::new(mask));
        Ok(out)
    }

    /// Slot `s` of logical element `i` (row-major), checked against the
    /// buffer's length.
    fn slot_of(&self, i: usize, s: u64) -> Result<usize, EvalError> {
        let s = s as usize;
        EvalError::ensure(s < self.slots.len(), || {
            format!(
                "element {} maps to slot {s} past the end of a {}-slot buffer",
                fmt_index(&unflatten(i as u64, &self.shape.dims)),
                self.slots.len()
            )
        })?;
        Ok(s)
    }

    /// The canonical element bits in logical row-major order, and which of
    /// them are poison (`None` when none is): for data movements, which
    /// carry a physical view's padding along instead of reading it.
    pub(crate) fn logical_bits_poison(&self) -> Result<LogicalBits<'_>, EvalError> {
        let Some(mask) = &self.poison else {
            return Ok((self.logical_bits()?, None));
        };
        let table = SlotMap::new(&self.shape)?.table(&self.shape.dims);
        let mut bits = Vec::with_capacity(table.len());
        let mut poison = Vec::with_capacity(table.len());
        for (i, &s) in table.iter().enumerate() {
            let s = self.slot_of(i, s)?;
            bits.push(self.slots[s]);
            poison.push(mask[s]);
        }
        Ok((std::borrow::Cow::Owned(bits), Some(poison)))
    }

    /// The canonical element bits in logical row-major order. Fails if a
    /// logical element maps to a poison slot.
    pub(crate) fn logical_bits(&self) -> Result<std::borrow::Cow<'_, [u64]>, EvalError> {
        let map = SlotMap::new(&self.shape)?;
        if let (SlotMap::Identity, None) = (&map, &self.poison) {
            let n = element_count(&self.shape.dims)? as usize;
            if self.slots.len() >= n {
                return Ok(std::borrow::Cow::Borrowed(&self.slots[..n]));
            }
        }
        let table = map.table(&self.shape.dims);
        let mut out = Vec::with_capacity(table.len());
        for (i, &s) in table.iter().enumerate() {
            let s = self.slot_of(i, s)?;
            if self.poison.as_ref().is_some_and(|p| p[s]) {
                return Err(EvalError::Poison {
                    inst: String::new(),
                    slot: s as u64,
                    index: fmt_index(&unflatten(i as u64, &self.shape.dims)),
                });
            }
            out.push(self.slots[s]);
        }
        Ok(std::borrow::Cow::Owned(out))
    }

    /// The same slots read under another shape (a bitcast). The slot count
    /// of `shape`'s layout must equal this buffer's, and the element types
    /// must have the same width; every logical element of the result must
    /// land on a non-poison slot, unless the result is a plain row-major
    /// array (every slot an element): such a bitcast views a buffer as its
    /// physical array, padding included, and the padding stays poison,
    /// which data movements carry and everything else refuses to read.
    pub fn reinterpret(&self, shape: ArrayShape) -> Result<Buffer, EvalError> {
        let shape = with_default_layout(shape);
        let want = storage_slots(&shape)?;
        if want != self.slots.len() as u64 {
            return Err(EvalError::BitcastSize {
                inst: String::new(),
                from: self.shape.to_string(),
                from_slots: self.slots.len() as u64,
                to: shape.to_string(),
                to_slots: want,
            });
        }
        let from_ty = self.shape.element_type;
        let to_ty = shape.element_type;
        let slots = if from_ty == to_ty {
            Arc::clone(&self.slots)
        } else {
            if element::bit_width(from_ty) != element::bit_width(to_ty) {
                return Err(EvalError::msg(format!(
                    "bitcast from {from_ty} to {to_ty} changes the element width"
                )));
            }
            let mut v = Vec::with_capacity(self.slots.len());
            for &s in self.slots.iter() {
                v.push(
                    element::from_raw(to_ty, element::raw_bits(from_ty, s))
                        .map_err(EvalError::msg)?,
                );
            }
            Arc::new(v)
        };
        let out = Buffer {
            shape: Arc::new(shape),
            slots,
            poison: self.poison.clone(),
        };
        if out.poison.is_some() && !matches!(SlotMap::new(&out.shape)?, SlotMap::Identity) {
            // Every element must be readable.
            out.logical_bits()?;
        }
        Ok(out)
    }

    /// Builds a buffer from logical values in row-major order, laid out per
    /// `shape`'s layout (the default layout if it has none). Values are
    /// converted to the element type (floats rounded to nearest even).
    pub fn from_logical(shape: ArrayShape, values: &[Scalar]) -> Result<Buffer, EvalError> {
        let cls = element::class(shape.element_type).map_err(EvalError::msg)?;
        let data: Vec<u64> = values
            .iter()
            .map(|&s| element::encode(cls, scalar_to_num(s)))
            .collect();
        Buffer::from_logical_bits(shape, data)
    }

    /// A rank-0 buffer.
    pub fn scalar(ty: PrimitiveType, value: Scalar) -> Result<Buffer, EvalError> {
        Buffer::from_logical(ArrayShape::new(ty, &[]), &[value])
    }

    /// The shape, layout included (always set).
    pub fn shape(&self) -> &ArrayShape {
        &self.shape
    }

    /// The element type.
    pub fn element_type(&self) -> PrimitiveType {
        self.shape.element_type
    }

    /// The logical element count.
    pub fn element_count(&self) -> u64 {
        self.shape.dims.iter().map(|&d| d.max(0) as u64).product()
    }

    /// The number of slots in the physical buffer.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// What physical slot `i` holds: `None` for poison (padding).
    pub fn slot(&self, i: usize) -> Option<Scalar> {
        if self
            .poison
            .as_ref()
            .is_some_and(|p| p.get(i).copied().unwrap_or(true))
        {
            return None;
        }
        let bits = *self.slots.get(i)?;
        let cls = element::class(self.shape.element_type).ok()?;
        Some(num_to_scalar(element::decode(cls, bits)))
    }

    /// The elements in logical row-major order.
    pub fn to_logical(&self) -> Result<Vec<Scalar>, EvalError> {
        let cls = element::class(self.shape.element_type).map_err(EvalError::msg)?;
        Ok(self
            .logical_bits()?
            .iter()
            .map(|&b| num_to_scalar(element::decode(cls, b)))
            .collect())
    }

    /// The element at a logical multi-index.
    pub fn get(&self, index: &[i64]) -> Result<Scalar, EvalError> {
        if index.len() != self.shape.rank()
            || index
                .iter()
                .zip(&self.shape.dims)
                .any(|(&i, &d)| i < 0 || i >= d)
        {
            return Err(EvalError::msg(format!(
                "index {} is out of range for {}",
                fmt_index(index),
                self.shape
            )));
        }
        let slot = SlotMap::new(&self.shape)?.slot_of(&self.shape.dims, index);
        self.slot(slot as usize).ok_or_else(|| EvalError::Poison {
            inst: String::new(),
            slot,
            index: fmt_index(index),
        })
    }

    /// The same logical array laid out per `layout` (a copy).
    pub fn relayout(&self, layout: Option<Layout>) -> Result<Buffer, EvalError> {
        let shape = ArrayShape {
            layout: layout.map(SharedLayout::from),
            ..(*self.shape).clone()
        };
        Buffer::from_logical_bits(shape, self.logical_bits()?.into_owned())
    }
}

/// Formats a multi-index as `(a,b,c)`.
pub(crate) fn fmt_index(idx: &[i64]) -> String {
    let parts: Vec<String> = idx.iter().map(i64::to_string).collect();
    format!("({})", parts.join(","))
}

/// The multi-index of row-major position `i`.
pub(crate) fn unflatten(mut i: u64, dims: &[i64]) -> Dims {
    let mut idx = Dims::from_elem(0, dims.len());
    for k in (0..dims.len()).rev() {
        let d = dims[k].max(1) as u64;
        idx[k] = (i % d) as i64;
        i /= d;
    }
    idx
}

/// The element class of a buffer.
pub(crate) fn class_of(ty: PrimitiveType) -> Result<Class, EvalError> {
    element::class(ty).map_err(EvalError::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-dimension sums of `SlotMap::Separable` must give every
    /// element the slot the expansion gives it: random small shapes under
    /// TPU-like and random tiles (repeated levels, tiled scalars, legacy and
    /// tail padding, sub-byte elements), in every order.
    #[test]
    fn separable_slots_match_the_expansion() {
        let mut state = 0x9E37_79B9u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        let mut separable = 0;
        for case in 0..3000 {
            let rank = next(4) as usize;
            let dims: Vec<i64> = (0..rank).map(|_| 1 + next(9) as i64).collect();
            let mut m2m: Vec<usize> = (0..rank).collect();
            for i in (1..rank).rev() {
                m2m.swap(i, next(i as u64 + 1) as usize);
            }
            let tiles: &[&str] = &[
                "",
                "T(2,4)",
                "T(8,128)",
                "T(4,128)(2,1)",
                "T(3)",
                "T(256)(128)(2,1)",
                "T(2)(2,1)",
                "T(2,2)(1,2)",
            ];
            let order: Vec<String> = m2m.iter().map(ToString::to_string).collect();
            let text = format!(
                "s8[{}]{{{}:{}}}",
                dims.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                order.join(","),
                tiles[next(tiles.len() as u64) as usize]
            );
            let text = text.replace(":}", "}").replace("[]{}", "[]");
            let Ok(shape::Shape::Array(a)) = shape::parse_shape(&text) else {
                panic!("{text}")
            };
            let Ok(map) = SlotMap::new(&a) else { continue };
            let Ok(e) = Expansion::new(&a) else { continue };
            let table = map.table(&a.dims);
            let mut i = 0;
            for_each_index(&a.dims, |idx| {
                assert_eq!(
                    table[i],
                    e.linear_index_unchecked(idx),
                    "case {case}: {text} at {idx:?}"
                );
                assert_eq!(
                    map.slot_of(&a.dims, idx),
                    table[i],
                    "case {case}: {text} at {idx:?}"
                );
                i += 1;
            });
            separable += usize::from(matches!(map, SlotMap::Separable(_)));
        }
        assert!(separable > 1000, "only {separable} separable cases");
    }
}
