//! Property tests: the symbolic algebra against the brute-force oracle of
//! `common`, on thousands of random small shapes and layouts.
//!
//! The case count follows `PROPTEST_CASES` (default 2000 per property here).

mod common;

use common::*;
use proptest::prelude::*;
use shape::{
    ArrayShape, Expansion, Layout, Method, Slot, bitcast_by_periods, is_bitcast,
    transpose_is_bitcast,
};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// (i) + (ii): indices against the materialized buffer.
fn check_indexing(s: &ArrayShape) -> Result<(), TestCaseError> {
    let e = Expansion::new(s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
    let (at, len) = slots(s);
    prop_assert_eq!(e.storage_slots, len as u64, "storage slots of {}", s);
    prop_assert_eq!(e.storage_bytes, bytes(s, len), "storage bytes of {}", s);
    let z = shape::storage_size(s).map_err(|e| TestCaseError::fail(format!("{s}: {e}")))?;
    prop_assert_eq!(
        (z.slots, z.bytes),
        (len as u64, bytes(s, len)),
        "storage size of {}",
        s
    );
    for (l, idx) in indices(&s.dims).iter().enumerate() {
        let li = e
            .linear_index(idx)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(li, at[l], "linear index of {:?} in {}", idx, s);
        prop_assert_eq!(
            e.multi_index(li).ok(),
            Some(Slot::Element(idx.as_slice().into()))
        );
    }
    // Every other slot is padding, and the inverse is total on the buffer.
    let mut is_element = vec![false; len];
    for &a in &at {
        is_element[a as usize] = true;
    }
    for (slot, &el) in is_element.iter().enumerate() {
        if !el {
            prop_assert_eq!(
                e.multi_index(slot as u64).ok(),
                Some(Slot::Padding),
                "slot {} of {}",
                slot,
                s
            );
        }
    }
    prop_assert!(e.multi_index(len as u64).is_err());
    Ok(())
}

/// Counts of one bitcast property run.
#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    bitcasts: usize,
    by_canonical: usize,
    by_periods: usize,
    /// Bitcasts with more than one element, decided by the maps.
    nontrivial_bitcasts: usize,
}

/// Checks both deciders against the oracle and tallies the verdicts.
fn check_verdict(
    from: &ArrayShape,
    to: &ArrayShape,
    perm: Option<&[usize]>,
    tally: &mut Tally,
) -> Result<(), TestCaseError> {
    let fail = |e: shape::AlgebraError| TestCaseError::fail(format!("{from} -> {to}: {e}"));
    let got = match perm {
        Some(p) => transpose_is_bitcast(from, to, p),
        None => is_bitcast(from, to),
    }
    .map_err(fail)?;
    let by_periods = bitcast_by_periods(from, to, perm).map_err(fail)?;
    let want = oracle_bitcast(from, to, perm);
    // The short answers (`shape::keeps`): their own between layouts that
    // only order dimensions, the exact test's otherwise.
    let keeps = match perm {
        Some(p) => shape::transpose_keeps_bytes(from, to, p),
        None if from.dims == to.dims => shape::layout_change_keeps_bytes(from, to),
        None => shape::reshape_keeps_bytes(from, to),
    };
    prop_assert_eq!(
        keeps,
        want,
        "short answer: {} -> {} (perm {:?})",
        from,
        to,
        perm
    );
    prop_assert_eq!(
        got.bitcast,
        want,
        "{} -> {} (perm {:?}): {}",
        from,
        to,
        perm,
        got.reason
    );
    prop_assert_eq!(
        by_periods.bitcast,
        want,
        "periods: {} -> {} (perm {:?}): {}",
        from,
        to,
        perm,
        by_periods.reason
    );
    tally.cases += 1;
    tally.bitcasts += usize::from(want);
    let n: i64 = from.dims.iter().product();
    tally.nontrivial_bitcasts += usize::from(want && n > 1 && got.decided_by != Method::Sizes);
    match got.decided_by {
        Method::Canonical => tally.by_canonical += 1,
        Method::Periods => tally.by_periods += 1,
        Method::Sizes => {}
    }
    // A "moved" reason must name a real element at the offsets it states.
    if let shape::Reason::ElementMoved {
        from_index,
        to_index,
        from_bit,
        to_bit,
        element_bits,
    } = &got.reason
    {
        let bits = u128::from(*element_bits);
        let fi = shape::linear_index(from, from_index).map_err(fail)?;
        let ti = shape::linear_index(to, to_index).map_err(fail)?;
        prop_assert_eq!(u128::from(fi) * bits, *from_bit);
        prop_assert_eq!(u128::from(ti) * bits, *to_bit);
        prop_assert_ne!(from_bit, to_bit);
    }
    Ok(())
}

/// Runs a bitcast property over `cases` generated pairs and returns the tally.
fn run_pairs<S: Strategy<Value = (ArrayShape, ArrayShape, Option<Vec<usize>>)>>(
    strategy: S,
) -> Tally {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let tally = std::cell::RefCell::new(Tally::default());
    let result = runner.run(&strategy, |(from, to, perm)| {
        check_verdict(&from, &to, perm.as_deref(), &mut tally.borrow_mut())
    });
    if let Err(e) = result {
        panic!("{}", e.to_string().lines().next().unwrap_or_default());
    }
    let t = tally.into_inner();
    eprintln!("{t:?}");
    t
}

fn pair_layout_change() -> impl Strategy<Value = (ArrayShape, ArrayShape, Option<Vec<usize>>)> {
    shape(4).prop_flat_map(|s| (Just(s.clone()), relayout(&s), Just(None)))
}

fn pair_reshape() -> impl Strategy<Value = (ArrayShape, ArrayShape, Option<Vec<usize>>)> {
    shape(4)
        .prop_flat_map(|s| {
            let n: i64 = s.dims.iter().product();
            (Just(s), factorization(n.max(1)))
        })
        .prop_filter("equal counts", |(s, d)| {
            s.dims.iter().product::<i64>() == d.iter().product::<i64>()
        })
        .prop_flat_map(|(s, d)| {
            let e = layout_of(&s).element_size_in_bits;
            let t = s.element_type;
            (
                Just(s),
                layout_for(d.clone(), e).prop_map(move |l| ArrayShape::with_layout(t, &d, l)),
                Just(None),
            )
        })
}

fn pair_transpose() -> impl Strategy<Value = (ArrayShape, ArrayShape, Option<Vec<usize>>)> {
    shape(4)
        .prop_flat_map(|s| {
            let r = s.rank();
            (Just(s), permutation(r))
        })
        .prop_flat_map(|(s, p)| {
            let dims: Vec<i64> = p.iter().map(|&d| s.dims[d]).collect();
            let e = layout_of(&s).element_size_in_bits;
            let t = s.element_type;
            (
                Just(s),
                layout_for(dims.clone(), e).prop_map(move |l| ArrayShape::with_layout(t, &dims, l)),
                Just(Some(p)),
            )
        })
}

/// Pairs derived through the layout facts, so that many are bitcasts: a
/// transpose with `permute_dimensions`, a reshape with
/// `reshape_result_layout`, each sometimes perturbed (two entries of the
/// result's minor_to_major swapped).
fn pair_derived() -> impl Strategy<Value = (ArrayShape, ArrayShape, Option<Vec<usize>>)> {
    shape(4)
        .prop_flat_map(|s| {
            let r = s.rank();
            let n: i64 = s.dims.iter().product();
            (
                Just(s),
                permutation(r),
                factorization(n.max(1)),
                any::<bool>(),
                any::<bool>(),
                0..8usize,
            )
        })
        .prop_map(|(s, p, d, transpose, perturb, k)| {
            let swap = |mut to: ArrayShape| {
                if let Some(l) = &mut to.layout {
                    let r = l.minor_to_major.len();
                    if perturb && r >= 2 {
                        l.minor_to_major.swap(k % r, (k + 1) % r);
                    }
                }
                to
            };
            let n: i64 = s.dims.iter().product();
            if transpose || n != d.iter().product::<i64>() {
                let to = shape::facts::permute_dimensions(&s, &p).expect("valid permutation");
                return (s, swap(to), Some(p));
            }
            match shape::facts::reshape_result_layout(&s, &d) {
                Some(l) => {
                    let to = ArrayShape::with_layout(s.element_type, &d, l);
                    (s, swap(to), None)
                }
                None => {
                    let to = shape::facts::permute_dimensions(&s, &p).expect("valid permutation");
                    (s, swap(to), Some(p))
                }
            }
        })
}

#[test]
fn derived_verdicts_match() {
    let t = run_pairs(pair_derived());
    // At least a quarter of the derived pairs are real (multi-element)
    // bitcasts decided by comparing the maps.
    assert!(t.nontrivial_bitcasts * 4 >= t.cases, "{t:?}");
}

#[test]
fn layout_change_verdicts_match() {
    run_pairs(pair_layout_change());
}

#[test]
fn reshape_verdicts_match() {
    run_pairs(pair_reshape());
}

#[test]
fn transpose_verdicts_match() {
    run_pairs(pair_transpose());
}

/// The verdicts are remembered per thread (a bounded cache of the last
/// questions): asked again, in the same order and in reverse, with more
/// distinct questions than the cache holds and with repeats close
/// together, every question gets the answer it got first, reason and
/// method included, and that answer agrees with the oracle.
#[test]
fn remembered_verdicts_are_the_first_ones() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let strategy = proptest::collection::vec(
        prop_oneof![pair_derived(), pair_reshape(), pair_transpose()],
        40,
    );
    let pairs = proptest::strategy::ValueTree::current(&strategy.new_tree(&mut runner).unwrap());
    let ask = |(from, to, perm): &(ArrayShape, ArrayShape, Option<Vec<usize>>)| match perm {
        Some(p) => transpose_is_bitcast(from, to, p),
        None => is_bitcast(from, to),
    };
    let first: Vec<_> = pairs.iter().map(ask).collect();
    for (pair, verdict) in pairs.iter().zip(&first) {
        let (from, to, perm) = pair;
        if let Ok(v) = verdict {
            assert_eq!(
                v.bitcast,
                oracle_bitcast(from, to, perm.as_deref()),
                "{from} -> {to}"
            );
        }
        assert_eq!(&ask(pair), verdict, "asked twice in a row: {from} -> {to}");
    }
    for (pair, verdict) in pairs
        .iter()
        .zip(&first)
        .chain(pairs.iter().zip(&first).rev())
    {
        assert_eq!(&ask(pair), verdict, "asked again: {} -> {}", pair.0, pair.1);
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn indexing_matches_the_oracle(s in shape(4)) {
        check_indexing(&s)?;
    }

}

#[test]
fn default_layout_is_used_when_missing() {
    let s = ArrayShape::new(shape::PrimitiveType::F32, &[2, 3]);
    let e = Expansion::new(&s).unwrap();
    assert_eq!(e.linear_index(&[1, 2]).unwrap(), 5);
    assert_eq!(Layout::descending(2).minor_to_major.as_slice(), &[1, 0]);
}

/// Dimensions that merge or split `phys` (a common refinement), chosen by
/// `seeds`: every dimension is cut into prime factors, some adjacent
/// digits are merged again, and size-1 dimensions are sprinkled in.
fn regroup(phys: &[i64], seeds: &[u32]) -> Vec<i64> {
    let mut digits: Vec<i64> = Vec::new();
    for &d in phys {
        let mut rest = d;
        let mut p = 2;
        let mut factors = Vec::new();
        while rest > 1 {
            if rest % p == 0 {
                factors.push(p);
                rest /= p;
            } else {
                p += 1;
            }
        }
        digits.extend(if factors.is_empty() { vec![d] } else { factors });
    }
    let mut out: Vec<i64> = Vec::new();
    for (i, &d) in digits.iter().enumerate() {
        let s = seeds[i % seeds.len()].rotate_left(i as u32);
        match (out.last_mut(), s % 3) {
            (Some(last), 0) => *last *= d,
            _ => out.push(d),
        }
        if s.is_multiple_of(7) {
            out.push(1);
        }
    }
    out
}

/// A view candidate for `other`: its physical dimensions regrouped (most
/// often), or any factorization of its slot count, or of another count;
/// plain most often, sometimes with a random layout; either direction.
fn pair_view() -> impl Strategy<Value = (ArrayShape, ArrayShape)> {
    shape(4)
        .prop_flat_map(|s| {
            let phys = physical(&s, &Nd::numbered(&s.dims));
            let align = layout_of(&s).tail_padding_alignment_in_elements as usize;
            let slots = (phys.data.len().div_ceil(align) * align) as i64;
            (
                Just((s, phys.dims, slots)),
                prop::collection::vec(any::<u32>(), 4),
                0..10u32,
                factorization(slots.max(1)),
                any::<bool>(),
                any::<bool>(),
            )
        })
        .prop_flat_map(|((s, phys, slots), seeds, mode, factored, plain, swap)| {
            let mut dims = match mode {
                0..=5 if phys.iter().product::<i64>() == slots => regroup(&phys, &seeds),
                9 => regroup(&s.dims, &seeds),
                _ => factored,
            };
            if slots == 0 {
                dims = vec![0];
            }
            let e = layout_of(&s).element_size_in_bits;
            let t = s.element_type;
            let mut descending = Layout::descending(dims.len());
            descending.element_size_in_bits = e;
            // A random layout pads every dimension now and then, which
            // would make a high-rank view huge; those get two entries of
            // the descending order swapped instead.
            let r = dims.len();
            let view = if plain {
                Just(descending).boxed()
            } else if r <= 4 {
                layout_for(dims.clone(), e).boxed()
            } else {
                let (i, j) = (seeds[0] as usize % r, seeds[1] as usize % r);
                descending.minor_to_major.swap(i, j);
                Just(descending).boxed()
            };
            (
                Just(s),
                view.prop_map(move |l| ArrayShape::with_layout(t, &dims, l)),
                Just(swap),
            )
        })
        .prop_map(|(s, v, swap)| if swap { (v, s) } else { (s, v) })
}

#[test]
fn physical_view_verdicts_match() {
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let tally = std::cell::RefCell::new((0usize, 0usize, 0usize, 0usize));
    let result = runner.run(&pair_view(), |(from, to)| {
        let got = shape::physical_view_is_bitcast(&from, &to)
            .map_err(|e| TestCaseError::fail(format!("{from} -> {to}: {e}")))?;
        let want = oracle_view(&from, &to);
        prop_assert_eq!(got.bitcast, want, "{} -> {}: {}", from, to, got.reason);
        let mut t = tally.borrow_mut();
        t.0 += 1;
        t.1 += usize::from(want);
        // Views of a padded buffer: the element counts differ.
        t.2 += usize::from(want && from.element_count() != to.element_count());
        // Plain, the right size, but not the physical dimensions.
        t.3 += usize::from(matches!(got.reason, shape::Reason::NotPhysicalDims { .. }));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (cases, views, padded, other_dims) = tally.into_inner();
    eprintln!(
        "{cases} cases, {views} physical views, {padded} of them over padding, {other_dims} refused for their dimensions"
    );
    assert!(
        views * 4 >= cases && padded * 10 >= cases && other_dims * 50 >= cases,
        "{cases} cases, {views} views, {padded} padded, {other_dims} other dims"
    );
}
