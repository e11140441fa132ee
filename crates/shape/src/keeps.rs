//! Whether a layout change, transpose or reshape keeps every byte where it
//! is: the `bitcast` of the exact test's verdict, without its reason.
//!
//! Layout assignment asks this of every candidate layout, and the
//! bytes-moved counts of every movement; most of those layouts only order
//! dimensions ([`Layout::only_orders`]), and between such layouts on a
//! static array with elements the answer is short and exact: an untiled
//! buffer holds its elements in physical order, so nothing moves exactly
//! when both sides walk the dimensions that are not 1 in the same order.
//! Anything else asks the general test (`crate::bitcast`), whose error
//! answers "moves bytes". The tests below hold the short answers to the
//! general test's on random shapes.

use crate::facts::align_minor_to_major;
use crate::{
    ArrayShape, Layout, layout_change_is_bitcast, reshape_is_bitcast, transpose_is_bitcast,
};

/// True when `a` and `b`, the same logical array in two layouts, occupy
/// the same bytes: a copy between them would be a bitcast.
pub fn layout_change_keeps_bytes(a: &ArrayShape, b: &ArrayShape) -> bool {
    if a.layout == b.layout {
        return true;
    }
    if let (Some(ma), Some(mb)) = (a.order_only(), b.order_only())
        && a.dims == b.dims
        && a.element_type == b.element_type
    {
        return same_order_of(&a.dims, ma, mb);
    }
    layout_change_is_bitcast(a, b).is_ok_and(|v| v.bitcast)
}

/// True when the array `a` (whose own layout is ignored) occupies the same
/// bytes in layouts `la` and `lb`: [`layout_change_keeps_bytes`] without
/// building shapes for layouts that only order dimensions.
pub fn layout_change_keeps_bytes_in(a: &ArrayShape, la: &Layout, lb: &Layout) -> bool {
    if la == lb {
        return true;
    }
    if let (Some(ma), Some(mb)) = (a.order_only_in(la), a.order_only_in(lb)) {
        return same_order_of(&a.dims, ma, mb);
    }
    layout_change_is_bitcast(&a.in_layout(la.clone()), &a.in_layout(lb.clone()))
        .is_ok_and(|v| v.bitcast)
}

/// True when a transpose with HLO `dims` (output dimension `k` is input
/// dimension `dims[k]`) from `from` to `to` moves no byte.
pub fn transpose_keeps_bytes(from: &ArrayShape, to: &ArrayShape, dims: &[usize]) -> bool {
    if let (Some(mf), Some(mt)) = (from.order_only(), to.order_only())
        && from.element_type == to.element_type
        && dims.len() == to.rank()
        && dims.iter().all(|&d| d < from.rank())
    {
        let a = mf.iter().rev().copied().filter(|&d| from.dims[d] != 1);
        let b = mt
            .iter()
            .rev()
            .filter(|&&k| to.dims[k] != 1)
            .map(|&k| dims[k]);
        return a.eq(b);
    }
    transpose_is_bitcast(from, to, dims).is_ok_and(|v| v.bitcast)
}

/// True when a reshape from `from` to `to` moves no byte.
pub fn reshape_keeps_bytes(from: &ArrayShape, to: &ArrayShape) -> bool {
    if let (Some(mf), Some(mt)) = (from.order_only(), to.order_only())
        && from.element_type == to.element_type
        && from.element_count() == to.element_count()
    {
        // Between untiled layouts the order that makes a reshape a bitcast
        // is unique up to size-1 dimensions (XLA's AlignLayouts finds it).
        return align_minor_to_major(&from.dims, mf, &to.dims)
            .is_some_and(|m2m| same_order_of(&to.dims, &m2m, mt));
    }
    reshape_is_bitcast(from, to).is_ok_and(|v| v.bitcast)
}

/// For order-only layouts of arrays with dimensions `dims`, given as
/// `minor_to_major` lists: equal once size-1 dimensions, which never move
/// a byte, are dropped.
fn same_order_of(dims: &[i64], a: &[usize], b: &[usize]) -> bool {
    fn big<'a>(m2m: &'a [usize], dims: &'a [i64]) -> impl Iterator<Item = usize> + 'a {
        m2m.iter()
            .copied()
            .filter(move |&d| dims.get(d).is_some_and(|&n| n != 1))
    }
    big(a, dims).eq(big(b, dims))
}

#[cfg(test)]
mod tests {
    //! The short answers must agree with the exact test on every case;
    //! these tests walk random small shapes in order-only layouts, where
    //! the short answers decide (`tests/properties.rs` holds them to the
    //! brute-force oracle on tiled and sub-byte layouts too).
    use super::*;
    use crate::PrimitiveType;
    use crate::facts::transpose_result_layout;
    use proptest::prelude::*;
    use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};
    use std::cell::Cell;

    /// Rank 1 to 4, sizes mostly 1 to 4 with many 1s: order-only layouts
    /// whose short answers hinge on where the unit dimensions sit.
    fn dims() -> impl Strategy<Value = Vec<i64>> {
        prop::collection::vec(prop::sample::select(vec![1i64, 1, 2, 3, 4]), 1..=4)
    }

    /// A permutation of `0..n`.
    fn permutation(n: usize) -> impl Strategy<Value = Vec<usize>> {
        Just((0..n).collect::<Vec<_>>()).prop_shuffle()
    }

    /// Dimensions, an order of them, and a second order.
    fn dims_and_two_orders() -> impl Strategy<Value = (Vec<i64>, Vec<usize>, Vec<usize>)> {
        dims().prop_flat_map(|d| {
            let n = d.len();
            (Just(d), permutation(n), permutation(n))
        })
    }

    /// Runs `check` on 3,000 cases of `strategy` from a fixed seed, and
    /// asserts that more than 100 were bitcasts (`check`'s answer), so that
    /// a wrong short answer would show.
    fn run_counting_bitcasts<S: Strategy>(
        strategy: S,
        check: impl Fn(S::Value) -> Result<bool, TestCaseError>,
    ) {
        let config = ProptestConfig {
            cases: 3000,
            failure_persistence: None,
            ..ProptestConfig::default()
        };
        let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let mut runner = TestRunner::new_with_rng(config, rng);
        let bitcasts = Cell::new(0usize);
        let outcome = runner.run(&strategy, |case| {
            bitcasts.set(bitcasts.get() + usize::from(check(case)?));
            Ok(())
        });
        if let Err(e) = outcome {
            panic!("{e}");
        }
        let bitcasts = bitcasts.get();
        assert!(
            bitcasts > 100,
            "only {bitcasts} bitcasts: the test would not notice a wrong short answer"
        );
    }

    fn array(dims: &[i64], m2m: &[usize]) -> ArrayShape {
        ArrayShape::with_layout(PrimitiveType::F32, dims, Layout::new(m2m))
    }

    /// The array shape `text` spells.
    fn array_shape(text: &str) -> ArrayShape {
        let shape: crate::Shape = text.parse().expect("a shape");
        shape.as_array().expect("an array shape").clone()
    }

    fn layout_of(a: &ArrayShape) -> &Layout {
        a.layout.as_deref().expect("a laid-out shape")
    }

    fn exact_transpose(a: &ArrayShape, b: &ArrayShape, dims: &[usize]) -> bool {
        transpose_is_bitcast(a, b, dims).unwrap().bitcast
    }

    fn exact_reshape(a: &ArrayShape, b: &ArrayShape) -> bool {
        reshape_is_bitcast(a, b).unwrap().bitcast
    }

    #[test]
    fn transposes_answer_as_the_exact_test() {
        let cases = dims_and_two_orders().prop_flat_map(|(d, a, b)| {
            let n = d.len();
            (Just(d), Just(a), Just(b), permutation(n))
        });
        run_counting_bitcasts(cases, |(dims, a_m2m, b_m2m, perm)| {
            let out_dims: Vec<i64> = perm.iter().map(|&d| dims[d]).collect();
            let a = array(&dims, &a_m2m);
            let b = array(&out_dims, &b_m2m);
            let fast = transpose_keeps_bytes(&a, &b, &perm);
            prop_assert_eq!(
                fast,
                exact_transpose(&a, &b, &perm),
                "{} -> {} dims {:?}",
                a,
                b,
                perm
            );
            // The layout a transpose derives for its result is a bitcast.
            let derived = ArrayShape {
                layout: transpose_result_layout(&a, &perm).ok().map(Into::into),
                ..b.clone()
            };
            prop_assert!(transpose_keeps_bytes(&a, &derived, &perm));
            prop_assert!(exact_transpose(&a, &derived, &perm));
            Ok(fast)
        });
    }

    /// A factorisation of `count` into factors of 2, 3, 4 and 6 (at most
    /// four, the rest last), the `picks` choosing among the factors that
    /// divide what is left, and a unit dimension inserted at `unit`.
    fn factorise(count: i64, picks: &[usize], unit: Option<usize>) -> Vec<i64> {
        let mut out = Vec::new();
        let mut left = count;
        for &pick in picks {
            if left <= 1 {
                break;
            }
            let f = [2, 3, 4, 6]
                .into_iter()
                .filter(|f| left % f == 0)
                .nth(pick)
                .unwrap_or(left);
            out.push(f);
            left /= f;
        }
        if left > 1 {
            out.push(left);
        }
        if let Some(at) = unit {
            out.insert(at.min(out.len()), 1);
        }
        if out.is_empty() {
            out.push(1);
        }
        out
    }

    #[test]
    fn reshapes_answer_as_the_exact_test() {
        let cases = (
            dims_and_two_orders(),
            prop::collection::vec(0..2usize, 4),
            prop::option::weighted(0.33, 0..5usize),
        )
            .prop_flat_map(|((d, a, _), picks, unit)| {
                let out = factorise(d.iter().product(), &picks, unit);
                let n = out.len();
                (Just(d), Just(a), Just(out), permutation(n))
            });
        run_counting_bitcasts(cases, |(dims, a_m2m, out_dims, b_m2m)| {
            let a = array(&dims, &a_m2m);
            let b = array(&out_dims, &b_m2m);
            let fast = reshape_keeps_bytes(&a, &b);
            prop_assert_eq!(fast, exact_reshape(&a, &b), "{} -> {}", a, b);
            // The remembered alignment is the one the test proves.
            if let Some(m2m) = align_minor_to_major(&a.dims, &layout_of(&a).minor_to_major, &b.dims)
            {
                let derived = b.in_layout(Layout::new(&m2m));
                prop_assert!(exact_reshape(&a, &derived), "{} -> {}", a, derived);
            }
            Ok(fast)
        });
    }

    #[test]
    fn layout_changes_answer_as_the_exact_test() {
        run_counting_bitcasts(dims_and_two_orders(), |(dims, a_m2m, b_m2m)| {
            let a = array(&dims, &a_m2m);
            let b = array(&dims, &b_m2m);
            let exact = layout_change_is_bitcast(&a, &b).unwrap().bitcast;
            prop_assert_eq!(layout_change_keeps_bytes(&a, &b), exact, "{} vs {}", a, b);
            prop_assert_eq!(
                layout_change_keeps_bytes_in(&a, layout_of(&b), layout_of(&a)),
                exact,
                "{} vs {}, layouts alone",
                a,
                b
            );
            Ok(exact)
        });
    }

    /// An order that is no permutation is an invalid layout: the exact
    /// test refuses it, and so the answer is that bytes move, as for any
    /// question the exact test cannot answer.
    #[test]
    fn invalid_orders_move_bytes() {
        // `{1,1,0}` repeats dimension 1 and leaves out 2, both of size 1:
        // by the orders of the dimensions that are not 1 alone, nothing
        // would move.
        let a = ArrayShape::with_layout(PrimitiveType::F32, &[2], Layout::new(&[0]));
        let bad = ArrayShape::with_layout(PrimitiveType::F32, &[2, 1, 1], Layout::new(&[1, 1, 0]));
        assert!(reshape_is_bitcast(&a, &bad).is_err());
        assert!(!reshape_keeps_bytes(&a, &bad));
        let b = ArrayShape::with_layout(PrimitiveType::F32, &[1, 2, 1], Layout::new(&[0, 0, 1]));
        let t = ArrayShape::with_layout(PrimitiveType::F32, &[2, 1, 1], Layout::new(&[2, 0, 1]));
        assert!(transpose_is_bitcast(&b, &t, &[1, 0, 2]).is_err());
        assert!(!transpose_keeps_bytes(&b, &t, &[1, 0, 2]));
    }

    /// An array without elements is a bitcast of itself in any two
    /// layouts: the exact test says so, and so does the short answer.
    #[test]
    fn arrays_without_elements_keep_their_bytes() {
        let a = ArrayShape::with_layout(PrimitiveType::F32, &[0, 3], Layout::new(&[0, 1]));
        let b = a.in_layout(Layout::new(&[1, 0]));
        assert!(layout_change_is_bitcast(&a, &b).unwrap().bitcast);
        assert!(layout_change_keeps_bytes(&a, &b));
        assert!(layout_change_keeps_bytes_in(
            &a,
            layout_of(&a),
            layout_of(&b)
        ));
        let t = ArrayShape::with_layout(PrimitiveType::F32, &[3, 0], Layout::new(&[0, 1]));
        assert_eq!(
            transpose_keeps_bytes(&a, &t, &[1, 0]),
            exact_transpose(&a, &t, &[1, 0])
        );
    }

    /// Layouts that do more than order dimensions go to the exact test:
    /// `f32[8,256]` under `T(8,128)` is `f32[8,2,128]{2,0,1}` under the
    /// same tiles, where the orders alone would say the bytes move.
    #[test]
    fn tiled_layouts_go_to_the_exact_test() {
        let from = array_shape("f32[8,256]{1,0:T(8,128)}");
        let to = array_shape("f32[8,2,128]{2,0,1:T(8,128)}");
        assert!(reshape_keeps_bytes(&from, &to));
        assert!(exact_reshape(&from, &to));
        let untiled = from.in_layout(Layout::new(&[1, 0]));
        let split = to.in_layout(Layout::new(&[2, 0, 1]));
        assert!(!reshape_keeps_bytes(&untiled, &split));
    }
}
