//! The layout questions the pass asks, answered by the exact algebra of the
//! `shape` crate. Kept in one place so that the pass reads as policy and the
//! arithmetic stays where it is tested.
//!
//! An algebra error (an absurd or invalid shape) answers "not a bitcast" and
//! "infinitely large", so that the pass never relies on a layout it cannot
//! reason about.

use std::cell::RefCell;

use rustc_hash::FxHashMap;
use shape::{ArrayShape, DimVec, Layout};
use smallvec::SmallVec;

pub use shape::{storage_bytes, storage_bytes_in};

/// True when `a` and `b`, the same logical array in two layouts, occupy
/// the same bytes: a copy between them would be a bitcast.
pub fn same_bytes(a: &ArrayShape, b: &ArrayShape) -> bool {
    if a.layout == b.layout {
        return true;
    }
    match (&a.layout, &b.layout) {
        (Some(la), Some(lb))
            if is_order_only(la)
                && is_order_only(lb)
                && a.dims == b.dims
                && a.element_type == b.element_type =>
        {
            same_order_of(&a.dims, &la.minor_to_major, &lb.minor_to_major)
        }
        _ => shape::layout_change_is_bitcast(a, b).is_ok_and(|v| v.bitcast),
    }
}

/// True when the array `a` (whose own layout is ignored) occupies the same
/// bytes in layouts `la` and `lb`: [`same_bytes`] without building shapes
/// for the common case of layouts that only order dimensions.
pub fn same_bytes_in(a: &ArrayShape, la: &Layout, lb: &Layout) -> bool {
    if la == lb {
        return true;
    }
    if is_order_only(la) && is_order_only(lb) {
        return same_order_of(&a.dims, &la.minor_to_major, &lb.minor_to_major);
    }
    shape::layout_change_is_bitcast(&a.in_layout(la.clone()), &a.in_layout(lb.clone()))
        .is_ok_and(|v| v.bitcast)
}

/// True for a layout that only orders dimensions: no tiles, padding or
/// other property that changes where bytes go.
fn is_order_only(l: &Layout) -> bool {
    l.tiles.is_empty()
        && l.padded_dimensions.is_none()
        && l.tail_padding_alignment_in_elements == 1
        && l.element_size_in_bits == 0
        && l.dim_levels().is_empty()
}

/// For order-only layouts of the same shape, given as `minor_to_major`
/// lists: equal once size-1 dimensions, which never move a byte, are
/// dropped.
fn same_order_of(dims: &[i64], a: &[usize], b: &[usize]) -> bool {
    fn big<'a>(m2m: &'a [usize], dims: &'a [i64]) -> impl Iterator<Item = usize> + 'a {
        m2m.iter()
            .copied()
            .filter(move |&d| dims.get(d).is_some_and(|&n| n != 1))
    }
    big(a, dims).eq(big(b, dims))
}

/// `shape::facts::align_minor_to_major`, remembered per thread. A large
/// module asks the same few questions many times (the 24-layer transformer
/// has 884 reshapes of 11 distinct shape pairs, each asked about every
/// candidate layout), and the answer depends only on the arguments. The
/// memory is bounded: past a limit it starts afresh.
fn aligned(in_dims: &[i64], in_m2m: &[usize], out_dims: &[i64]) -> Option<DimVec> {
    type Key = (SmallVec<[i64; 6]>, DimVec, SmallVec<[i64; 6]>);
    const LIMIT: usize = 4096;
    thread_local! {
        static MEMO: RefCell<FxHashMap<Key, Option<DimVec>>> = RefCell::new(FxHashMap::default());
    }
    MEMO.with(|memo| {
        let mut memo = memo.borrow_mut();
        let key: Key = (
            SmallVec::from_slice(in_dims),
            SmallVec::from_slice(in_m2m),
            SmallVec::from_slice(out_dims),
        );
        if let Some(answer) = memo.get(&key) {
            return answer.clone();
        }
        let answer = shape::facts::align_minor_to_major(in_dims, in_m2m, out_dims);
        if memo.len() >= LIMIT {
            memo.clear();
        }
        memo.insert(key, answer.clone());
        answer
    })
}

/// The layout of `a` when it only orders dimensions (no tiles, padding or
/// element size) and `a` is a static array with elements: the case the
/// fast paths below decide exactly without the general test.
fn order_only(a: &ArrayShape) -> Option<&[usize]> {
    if a.dynamic != 0 || a.dims.contains(&0) {
        return None;
    }
    match &a.layout {
        Some(l) if is_order_only(l) && l.minor_to_major.len() == a.rank() => {
            Some(&l.minor_to_major)
        }
        _ => None,
    }
}

/// True when a transpose with HLO `dimensions` from `operand` to `out` moves
/// no byte.
pub fn transpose_is_bitcast(operand: &ArrayShape, out: &ArrayShape, dims: &[usize]) -> bool {
    if let (Some(mi), Some(mo)) = (order_only(operand), order_only(out))
        && operand.element_type == out.element_type
        && dims.len() == out.rank()
        && dims.iter().all(|&d| d < operand.rank())
    {
        // Untiled buffers hold elements in physical order, so the
        // transpose moves nothing exactly when both walk the non-unit
        // dimensions in the same order.
        let a = mi.iter().rev().copied().filter(|&d| operand.dims[d] != 1);
        let b = mo
            .iter()
            .rev()
            .filter(|&&k| out.dims[k] != 1)
            .map(|&k| dims[k]);
        return a.eq(b);
    }
    shape::transpose_is_bitcast(operand, out, dims).is_ok_and(|v| v.bitcast)
}

/// True when a reshape from `operand` to `out` moves no byte.
pub fn reshape_is_bitcast(operand: &ArrayShape, out: &ArrayShape) -> bool {
    if let (Some(mi), Some(mo)) = (order_only(operand), order_only(out))
        && operand.element_type == out.element_type
        && operand.element_count() == out.element_count()
    {
        // For untiled layouts the order that makes a reshape a bitcast is
        // unique up to size-1 dimensions (XLA's AlignLayouts finds it).
        return aligned(&operand.dims, mi, &out.dims)
            .is_some_and(|m2m| same_order_of(&out.dims, &m2m, mo));
    }
    shape::reshape_is_bitcast(operand, out).is_ok_and(|v| v.bitcast)
}

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
    if let Some(m) = order_only(operand)
        && out.dynamic == 0
        && !out.dims.contains(&0)
    {
        return aligned(&operand.dims, m, &out.dims).map(|m2m| Layout::new(&m2m));
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
    let Some(aligned_order) = aligned(&operand.dims, &operand_layout.minor_to_major, &out.dims)
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
        .filter(|l| reshape_is_bitcast(operand, &out.in_layout(l.clone())))
        .collect()
}

/// An operand layout that makes the reshape of `operand` into `out` a
/// bitcast, when one exists: the reshape read backwards.
pub fn reshape_operand_layout(operand: &ArrayShape, out: &ArrayShape) -> Option<Layout> {
    reshape_output_layout(out, operand)
}

#[cfg(test)]
mod tests {
    //! The fast paths must agree with the exact algebra of the `shape`
    //! crate on every case; these tests walk random small shapes.
    use super::*;
    use shape::PrimitiveType;

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn permutation(&mut self, n: usize) -> Vec<usize> {
            let mut p: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                p.swap(i, self.below(i + 1));
            }
            p
        }
        fn dims(&mut self, rank: usize) -> Vec<i64> {
            (0..rank).map(|_| [1, 1, 2, 3, 4][self.below(5)]).collect()
        }
    }

    fn array(dims: &[i64], m2m: &[usize]) -> ArrayShape {
        ArrayShape::with_layout(PrimitiveType::F32, dims, Layout::new(m2m))
    }

    fn exact_transpose(a: &ArrayShape, b: &ArrayShape, dims: &[usize]) -> bool {
        shape::transpose_is_bitcast(a, b, dims).unwrap().bitcast
    }

    fn exact_reshape(a: &ArrayShape, b: &ArrayShape) -> bool {
        shape::reshape_is_bitcast(a, b).unwrap().bitcast
    }

    #[test]
    fn transpose_fast_path_matches_the_algebra() {
        let mut rng = Rng(7);
        let mut bitcasts = 0;
        for _ in 0..3000 {
            let rank = 1 + rng.below(4);
            let dims = rng.dims(rank);
            let perm = rng.permutation(rank);
            let out_dims: Vec<i64> = perm.iter().map(|&d| dims[d]).collect();
            let a = array(&dims, &rng.permutation(rank));
            let b = array(&out_dims, &rng.permutation(rank));
            let fast = transpose_is_bitcast(&a, &b, &perm);
            assert_eq!(
                fast,
                exact_transpose(&a, &b, &perm),
                "{a} -> {b} dims {perm:?}"
            );
            bitcasts += usize::from(fast);
            let derived = ArrayShape {
                layout: transpose_output_layout(&a, &perm).map(Into::into),
                ..b.clone()
            };
            assert!(
                transpose_is_bitcast(&a, &derived, &perm) && exact_transpose(&a, &derived, &perm)
            );
        }
        assert!(
            bitcasts > 100,
            "only {bitcasts} bitcasts: the test would not notice a wrong fast path"
        );
    }

    #[test]
    fn reshape_fast_path_matches_the_algebra() {
        let mut rng = Rng(11);
        let mut bitcasts = 0;
        for _ in 0..3000 {
            let rank = 1 + rng.below(4);
            let dims = rng.dims(rank);
            // A random factorisation of the same element count.
            let count: i64 = dims.iter().product();
            let mut out_dims = Vec::new();
            let mut left = count;
            while left > 1 && out_dims.len() < 4 {
                let f = [2, 3, 4, 6]
                    .iter()
                    .copied()
                    .filter(|f| left % f == 0)
                    .nth(rng.below(2))
                    .unwrap_or(left);
                out_dims.push(f);
                left /= f;
            }
            if left > 1 {
                out_dims.push(left);
            }
            if rng.below(3) == 0 {
                out_dims.insert(rng.below(out_dims.len() + 1), 1);
            }
            if out_dims.is_empty() {
                out_dims.push(1);
            }
            let a = array(&dims, &rng.permutation(rank));
            let b = array(&out_dims, &rng.permutation(out_dims.len()));
            let fast = reshape_is_bitcast(&a, &b);
            assert_eq!(fast, exact_reshape(&a, &b), "{a} -> {b}");
            bitcasts += usize::from(fast);
            if let Some(l) = reshape_output_layout(&a, &b) {
                let derived = b.in_layout(l);
                assert!(exact_reshape(&a, &derived), "{a} -> {derived}");
            }
        }
        assert!(
            bitcasts > 100,
            "only {bitcasts} bitcasts: the test would not notice a wrong fast path"
        );
    }

    #[test]
    fn same_bytes_fast_path_matches_the_algebra() {
        let mut rng = Rng(3);
        for _ in 0..3000 {
            let rank = 1 + rng.below(4);
            let dims = rng.dims(rank);
            let a = array(&dims, &rng.permutation(rank));
            let b = array(&dims, &rng.permutation(rank));
            assert_eq!(
                same_bytes(&a, &b),
                shape::layout_change_is_bitcast(&a, &b).unwrap().bitcast,
                "{a} vs {b}"
            );
        }
    }
}
