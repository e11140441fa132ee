//! Layout facts the pass needs: permutations, the layouts that make a
//! reshape or a transpose a bitcast (tile-aware, checked by the exact
//! bitcast test), and XLA's layout utilities (`AlignLayouts`,
//! `DeduceTransposeDimensionsForBitcast`, `DecomposeBitcast`,
//! `MakeShapeWithDescendingLayoutAndSamePhysicalLayout`, `DeleteDimensions`,
//! `MoveDimToMajor`, `CommonFactors`, ...).
//!
//! Permutations follow HLO `transpose` semantics throughout: applying `perm`
//! to a shape gives output dimension `k` = input dimension `perm[k]`.

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::physical::{AlgebraError, checked_layout};
use crate::{ArrayShape, DimVec, Layout, Shape, Tile, reshape_is_bitcast, transpose_is_bitcast};

/// The default (descending, row-major) layout `{rank-1, ..., 0}`.
pub fn descending_layout(rank: usize) -> Layout {
    Layout::descending(rank)
}

/// Reverses an order: minor-to-major ⇄ major-to-minor.
pub fn reverse_order(order: &[usize]) -> DimVec {
    order.iter().rev().copied().collect()
}

/// True when `p` is a permutation of `0..p.len()`. Checked in one word
/// up to 64 entries (every rank: `MAX_RANK`), as layout assignment asks it
/// of every candidate layout.
#[inline]
pub fn is_permutation(p: &[usize]) -> bool {
    if p.len() <= 64 {
        let mut seen = 0u64;
        return p.iter().all(|&d| {
            let bit = 1u64 << (d % 64);
            let fresh = d < p.len() && seen & bit == 0;
            seen |= bit;
            fresh
        });
    }
    let mut seen: SmallVec<[bool; 8]> = SmallVec::from_elem(false, p.len());
    p.iter()
        .all(|&d| d < p.len() && !std::mem::replace(&mut seen[d], true))
}

/// The inverse permutation: `inverse(p)[p[i]] = i`.
pub fn inverse_permutation(p: &[usize]) -> DimVec {
    let mut inv: DimVec = SmallVec::from_elem(0, p.len());
    for (i, &d) in p.iter().enumerate() {
        inv[d] = i;
    }
    inv
}

/// XLA's `ComposePermutations(p, q)[i] = p[q[i]]`.
pub fn compose_permutations(p: &[usize], q: &[usize]) -> DimVec {
    q.iter().map(|&i| p[i]).collect()
}

fn mismatch(msg: impl Into<String>) -> AlgebraError {
    AlgebraError::Mismatch(msg.into())
}

fn check_perm(perm: &[usize], rank: usize) -> Result<(), AlgebraError> {
    if perm.len() != rank || !is_permutation(perm) {
        return Err(mismatch(format!(
            "{perm:?} is not a permutation of 0..{rank}"
        )));
    }
    Ok(())
}

/// The layout of a transpose's result that makes `transpose(input, perm)` a
/// bitcast: the same physical order (`m2m'[i] = inverse(perm)[m2m[i]]`),
/// with tiles, element size, tail padding and memory space kept — they act
/// on physical dimensions, which do not change — and legacy padding
/// permuted along.
pub fn transpose_result_layout(input: &ArrayShape, perm: &[usize]) -> Result<Layout, AlgebraError> {
    check_perm(perm, input.rank())?;
    let mut l = checked_layout(input)?.into_owned();
    let inv = inverse_permutation(perm);
    for d in &mut l.minor_to_major {
        *d = inv[*d];
    }
    if let Some(p) = &mut l.padded_dimensions {
        *p = perm.iter().map(|&d| p[d]).collect();
    }
    Ok(l)
}

/// The layout of a transpose's operand that makes `transpose(operand, perm)`
/// with result `output` a bitcast (the other direction:
/// `m2m[i] = perm[m2m_out[i]]`).
pub fn transpose_operand_layout(
    output: &ArrayShape,
    perm: &[usize],
) -> Result<Layout, AlgebraError> {
    check_perm(perm, output.rank())?;
    let mut l = checked_layout(output)?.into_owned();
    for d in &mut l.minor_to_major {
        *d = perm[*d];
    }
    if let Some(p) = &mut l.padded_dimensions {
        let mut q = p.clone();
        for (k, &d) in perm.iter().enumerate() {
            q[d] = p[k];
        }
        *p = q;
    }
    Ok(l)
}

/// XLA's `PermuteDimensions`: the transposed shape (dimension `k` is
/// `shape` dimension `perm[k]`) with the layout that makes the transpose a
/// bitcast.
pub fn permute_dimensions(shape: &ArrayShape, perm: &[usize]) -> Result<ArrayShape, AlgebraError> {
    let layout = transpose_result_layout(shape, perm)?;
    let mut dynamic = 0u64;
    for (k, &d) in perm.iter().enumerate() {
        if shape.is_dynamic_dim(d) && k < 64 {
            dynamic |= 1 << k;
        }
    }
    Ok(ArrayShape {
        element_type: shape.element_type,
        dims: perm.iter().map(|&d| shape.dims[d]).collect(),
        dynamic,
        layout: Some(layout.into()),
    })
}

/// XLA's `DeduceTransposeDimensionsForBitcast`: the transpose dimensions
/// under which `from → to` is a bitcast, deduced from the two layouts'
/// physical orders (`Compose(from.m2m, inverse(to.m2m))`). `None` when the
/// ranks differ, the dimensions do not match, or (tile-aware) the exact
/// test says that transpose moves data.
pub fn deduce_transpose_dimensions_for_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
) -> Option<DimVec> {
    if from.rank() != to.rank() {
        return None;
    }
    let lf = checked_layout(from).ok()?;
    let lt = checked_layout(to).ok()?;
    let perm = compose_permutations(&lf.minor_to_major, &inverse_permutation(&lt.minor_to_major));
    if perm
        .iter()
        .enumerate()
        .any(|(k, &d)| to.dims[k] != from.dims[d])
    {
        return None;
    }
    transpose_is_bitcast(from, to, &perm)
        .ok()?
        .bitcast
        .then_some(perm)
}

/// XLA's `MakeShapeWithDescendingLayoutAndSamePhysicalLayout`: the
/// dimensions listed in physical (major-to-minor) order, with the descending
/// layout, so the buffer is unchanged. Tiles and the other properties stay.
pub fn descending_with_same_physical_layout(
    shape: &ArrayShape,
) -> Result<ArrayShape, AlgebraError> {
    let l = checked_layout(shape)?;
    let order = l.major_to_minor();
    let mut out = permute_dimensions(shape, &order)?;
    // permute_dimensions already yields the descending order; make it
    // explicit so the text prints `{r-1,...,0}`.
    if let Some(layout) = &mut out.layout {
        layout.minor_to_major = (0..shape.rank()).rev().collect();
    }
    Ok(out)
}

/// XLA's `MoveDimToMajor`: `dim` becomes the most major dimension, the
/// others keep their relative order.
pub fn move_dim_to_major(layout: &Layout, dim: usize) -> Layout {
    let mut l = layout.clone();
    if let Some(pos) = l.minor_to_major.iter().position(|&d| d == dim) {
        l.minor_to_major.remove(pos);
        l.minor_to_major.push(dim);
    }
    l
}

/// `MoveDimToMajor` applied to every array of a (tuple) shape that has a
/// layout and at least `dim + 1` dimensions.
pub fn move_dim_to_major_in_shape(shape: &Shape, dim: usize) -> Shape {
    let mut s = shape.clone();
    s.for_each_array_mut(&mut |a| {
        if let Some(l) = &a.layout
            && dim < a.rank()
        {
            a.layout = Some(move_dim_to_major(l, dim).into());
        }
    });
    s
}

/// XLA's `DeleteDimensions`: removes the listed dimensions (any order) and
/// renumbers the layout. Tiles are kept when they remain valid for the
/// smaller shape and dropped otherwise; legacy padding follows the
/// dimensions.
pub fn delete_dimensions(shape: &ArrayShape, dims: &[usize]) -> Result<ArrayShape, AlgebraError> {
    let r = shape.rank();
    if let Some(&d) = dims.iter().find(|&&d| d >= r) {
        return Err(mismatch(format!(
            "dimension {d} is out of range for rank {r}"
        )));
    }
    let keep: SmallVec<[usize; 8]> = (0..r).filter(|d| !dims.contains(d)).collect();
    let mut new_of: SmallVec<[usize; 8]> = SmallVec::from_elem(usize::MAX, r);
    for (n, &d) in keep.iter().enumerate() {
        new_of[d] = n;
    }
    let mut dynamic = 0u64;
    for (n, &d) in keep.iter().enumerate() {
        if shape.is_dynamic_dim(d) && n < 64 {
            dynamic |= 1 << n;
        }
    }
    let new_dims: crate::Dims = keep.iter().map(|&d| shape.dims[d]).collect();
    let layout = match &shape.layout {
        None => None,
        Some(l) => {
            let mut n = l.clone();
            n.minor_to_major = l
                .minor_to_major
                .iter()
                .filter(|&&d| new_of[d] != usize::MAX)
                .map(|&d| new_of[d])
                .collect();
            if let Some(p) = &l.padded_dimensions {
                n.padded_dimensions = Some(keep.iter().map(|&d| p[d]).collect());
            }
            if n.validate_for_dims(&new_dims).is_err() {
                n.tiles.clear();
            }
            Some(n)
        }
    };
    Ok(ArrayShape {
        element_type: shape.element_type,
        dims: new_dims,
        dynamic,
        layout,
    })
}

/// XLA's `PrependMajorDimension` on a layout: a new dimension 0, most major.
pub fn prepend_major_dimension(layout: &Layout) -> Layout {
    let mut l = layout.clone();
    for d in &mut l.minor_to_major {
        *d += 1;
    }
    l.minor_to_major.push(0);
    l
}

/// XLA's `AppendMinorDimension` on a layout: a new last dimension, most minor.
pub fn append_minor_dimension(layout: &Layout) -> Layout {
    let mut l = layout.clone();
    let n = l.minor_to_major.len();
    l.minor_to_major.insert(0, n);
    l
}

/// XLA's `IsEffectivelyMostMajorDimension`: every dimension more major than
/// `dim` has size 1.
pub fn is_effectively_most_major_dimension(shape: &ArrayShape, dim: usize) -> bool {
    let l = shape.layout_or_default();
    match l.minor_to_major.iter().position(|&d| d == dim) {
        Some(pos) => l.minor_to_major[pos + 1..]
            .iter()
            .all(|&d| shape.dims[d] == 1),
        None => false,
    }
}

/// XLA's `CommonFactors(a, b)`: the boundaries `(i, j)` where the prefix
/// products of `a[..i]` and `b[..j]` agree, so that `a` and `b` split into
/// groups of equal products. Starts with `(0, 0)` and ends with
/// `(a.len(), b.len())`.
pub fn common_factors(a: &[i64], b: &[i64]) -> Vec<(usize, usize)> {
    let prod = |s: &[i64]| {
        s.iter()
            .fold(1i128, |acc, &d| acc.saturating_mul(i128::from(d)))
    };
    if a == b {
        return (0..=a.len()).map(|i| (i, i)).collect();
    }
    let mut bounds = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    let (mut prior_i, mut prior_j): (isize, isize) = (-1, -1);
    while i < a.len() && j < b.len() && a[i] == b[j] {
        (prior_i, prior_j) = (i as isize, j as isize);
        bounds.push((i, j));
        i += 1;
        j += 1;
    }
    if prod(&a[i..]) != prod(&b[j..]) {
        return vec![(0, 0), (a.len(), b.len())];
    }
    if prod(&a[i..]) == 0 {
        bounds.push((i, j));
        bounds.push((a.len(), b.len()));
        return bounds;
    }
    let (mut pa, mut pb) = (1i128, 1i128);
    loop {
        if pa == pb && (i as isize > prior_i || j as isize > prior_j) {
            (prior_i, prior_j) = (i as isize, j as isize);
            bounds.push((i, j));
            continue;
        }
        let (in_i, in_j) = (i < a.len(), j < b.len());
        if !(in_i || in_j) {
            break;
        }
        let next_a = pa < pb || (in_i && (!in_j || (pa == pb && a[i] <= b[j])));
        let next_b = pb < pa || (in_j && (!in_i || (pb == pa && b[j] <= a[i])));
        if next_a {
            pa = pa.saturating_mul(i128::from(a[i]));
            i += 1;
        }
        if next_b {
            pb = pb.saturating_mul(i128::from(b[j]));
            j += 1;
        }
    }
    bounds
}

/// XLA's `DimensionsUnmodifiedByReshape`: `(input dim, output dim)` pairs
/// that form a common factor on their own.
pub fn dimensions_unmodified_by_reshape(input: &[i64], output: &[i64]) -> Vec<(usize, usize)> {
    let cf = common_factors(input, output);
    cf.windows(2)
        .filter(|w| w[1].0 - w[0].0 == 1 && w[1].1 - w[0].1 == 1)
        .map(|w| w[0])
        .collect()
}

/// XLA's `InsertedOrDeleted1SizedDimensions`: when a reshape only deletes
/// and inserts size-1 dimensions, the deleted input and inserted output
/// dimensions; `None` if it changes any larger dimension.
pub fn inserted_or_deleted_1_sized_dimensions(
    input: &[i64],
    output: &[i64],
) -> Option<(Vec<usize>, Vec<usize>)> {
    let unmodified = dimensions_unmodified_by_reshape(input, output);
    let (mut deleted, mut inserted) = (Vec::new(), Vec::new());
    let mut prior: (isize, isize) = (-1, -1);
    for i in 0..=unmodified.len() {
        let (ui, uo) = match unmodified.get(i) {
            Some(&(a, b)) => (a as isize, b as isize),
            None => (input.len() as isize, output.len() as isize),
        };
        for d in (prior.0 + 1)..ui {
            if input[d as usize] > 1 {
                return None;
            }
            deleted.push(d as usize);
        }
        for d in (prior.1 + 1)..uo {
            if output[d as usize] > 1 {
                return None;
            }
            inserted.push(d as usize);
        }
        prior = (ui, uo);
    }
    Some((deleted, inserted))
}

/// XLA's `AlignLayouts` on `minor_to_major` alone: the output order that
/// makes a reshape of `input` (dims and order) into `out_dims` a bitcast
/// for untiled layouts, or `None`.
///
/// Remembered per thread: a large module asks the same few questions many
/// times (the 24-layer transformer has 884 reshapes of 11 distinct shape
/// pairs, and layout assignment asks about each under every candidate
/// layout), and the answer depends only on the arguments. The memory is
/// bounded: past a limit it starts afresh.
pub fn align_minor_to_major(in_dims: &[i64], in_m2m: &[usize], out_dims: &[i64]) -> Option<DimVec> {
    type Key = (SmallVec<[i64; 6]>, DimVec, SmallVec<[i64; 6]>);
    const LIMIT: usize = 4096;
    thread_local! {
        static MEMO: std::cell::RefCell<FxHashMap<Key, Option<DimVec>>> =
            std::cell::RefCell::new(FxHashMap::default());
    }
    let key: Key = (
        SmallVec::from_slice(in_dims),
        SmallVec::from_slice(in_m2m),
        SmallVec::from_slice(out_dims),
    );
    if let Some(answer) = MEMO.with(|memo| memo.borrow().get(&key).cloned()) {
        return answer;
    }
    // Not under the memo's borrow: the alignment asks itself about the
    // dimensions without their unit ones.
    let answer = align_now(in_dims, in_m2m, out_dims);
    MEMO.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.len() >= LIMIT {
            memo.clear();
        }
        memo.insert(key, answer.clone());
    });
    answer
}

/// [`align_minor_to_major`] without the memory.
fn align_now(in_dims: &[i64], in_m2m: &[usize], out_dims: &[i64]) -> Option<DimVec> {
    let has_one = |d: &[i64]| d.contains(&1);
    if has_one(in_dims) || has_one(out_dims) {
        // Strip size-1 dimensions, solve, map back; the output's size-1
        // dimensions go most major, in descending order.
        let in_keep: SmallVec<[usize; 8]> =
            (0..in_dims.len()).filter(|&i| in_dims[i] != 1).collect();
        let out_keep: SmallVec<[usize; 8]> =
            (0..out_dims.len()).filter(|&i| out_dims[i] != 1).collect();
        let mut in_new: SmallVec<[usize; 8]> = SmallVec::from_elem(usize::MAX, in_dims.len());
        for (n, &d) in in_keep.iter().enumerate() {
            in_new[d] = n;
        }
        let sin: SmallVec<[i64; 8]> = in_keep.iter().map(|&d| in_dims[d]).collect();
        let sout: SmallVec<[i64; 8]> = out_keep.iter().map(|&d| out_dims[d]).collect();
        let sm2m: SmallVec<[usize; 8]> = in_m2m
            .iter()
            .filter(|&&d| in_new[d] != usize::MAX)
            .map(|&d| in_new[d])
            .collect();
        let simple = align_minor_to_major(&sin, &sm2m, &sout)?;
        let mut m2m: DimVec = simple.iter().map(|&d| out_keep[d]).collect();
        m2m.extend((0..out_dims.len()).rev().filter(|&i| out_dims[i] == 1));
        return Some(m2m);
    }
    let cf = common_factors(in_dims, out_dims);
    let rank = in_dims.len();
    let mut input_to_factor: SmallVec<[usize; 8]> = SmallVec::from_elem(0, rank);
    for pos in 0..cf.len().saturating_sub(1) {
        let (start, end) = (cf[pos].0, cf[pos + 1].0);
        if start == end {
            continue;
        }
        let mut physical = in_m2m.iter().position(|&d| d == start)? as isize;
        input_to_factor[start] = pos;
        for i in start + 1..end {
            physical -= 1;
            if physical < 0 || in_m2m[physical as usize] != i {
                return None;
            }
            input_to_factor[i] = pos;
        }
    }
    let mut out: DimVec = SmallVec::new();
    let mut minor = 0usize;
    while out.len() < out_dims.len() {
        if minor >= rank {
            // Only reachable for zero-sized shapes, whose groups may be empty.
            return None;
        }
        let factor = input_to_factor[in_m2m[minor]];
        let (is, ie) = (cf[factor].0, cf[factor + 1].0);
        let (os, oe) = (cf[factor].1, cf[factor + 1].1);
        out.extend((os..oe).rev());
        minor += (ie - is).max(1);
    }
    Some(out)
}

/// The first tile level of `input` re-expressed on `out_dims` under the
/// output order `out_m2m`: the output's physical dimensions are grouped
/// with `*` so that they fold into the same tiled dimensions.
fn regroup_first_tile(
    input: &ArrayShape,
    layout: &Layout,
    out_dims: &[i64],
    out_m2m: &[usize],
) -> Option<Tile> {
    let tile = layout.tiles.first()?;
    let in_phys: SmallVec<[i64; 8]> = layout
        .minor_to_major
        .iter()
        .rev()
        .map(|&d| input.dims[d])
        .collect();
    let start = in_phys.len().checked_sub(tile.dims.len())?;
    let mut groups: SmallVec<[(i64, i64); 6]> = SmallVec::new();
    let mut size = 1i64;
    for (j, &t) in tile.dims.iter().enumerate() {
        size = size.checked_mul(in_phys[start + j])?;
        if t != Tile::COMBINE {
            groups.push((size, t));
            size = 1;
        }
    }
    let out_phys: SmallVec<[i64; 8]> = out_m2m.iter().rev().map(|&d| out_dims[d]).collect();
    let mut entries: SmallVec<[i64; 8]> = SmallVec::new();
    let mut at = out_phys.len();
    for &(s, t) in groups.iter().rev() {
        let mut prod = 1i64;
        let mut n = 0;
        while prod < s || (n == 0 && at > 0 && s == 1 && out_phys[at - 1] == 1) {
            if at == 0 {
                return None;
            }
            at -= 1;
            prod = prod.checked_mul(out_phys[at])?;
            n += 1;
        }
        if prod != s || n == 0 {
            return None;
        }
        entries.push(t);
        entries.extend(std::iter::repeat_n(Tile::COMBINE, n - 1));
    }
    entries.reverse();
    Some(Tile {
        dims: SmallVec::from_slice(&entries),
    })
}

/// The layout for a reshape's result that makes `reshape(input) → out_dims`
/// a bitcast, or `None` when no candidate is one.
///
/// For untiled inputs this is XLA's `AlignLayouts` (size-1 dimensions
/// handled as XLA does). For tiled inputs, or with legacy padding, element
/// size or tail padding, candidates are built from the aligned order: the
/// input's tiles as they are, the first tile regrouped onto the output's
/// physical dimensions with `*` folds (later tiles kept), and the plain
/// order; the first that the exact bitcast test accepts is returned.
pub fn reshape_result_layout(input: &ArrayShape, out_dims: &[i64]) -> Option<Layout> {
    let layout = checked_layout(input).ok()?;
    let count = |d: &[i64]| d.iter().try_fold(1i64, |a, &x| a.checked_mul(x));
    if count(&input.dims)? != count(out_dims)? {
        return None;
    }
    let m2m = if count(out_dims)? == 0 {
        (0..out_dims.len()).rev().collect()
    } else {
        align_minor_to_major(&input.dims, &layout.minor_to_major, out_dims)?
    };
    let base = Layout {
        minor_to_major: m2m.clone(),
        tiles: SmallVec::new(),
        padded_dimensions: None,
        ..layout.as_ref().clone()
    };
    let mut candidates: SmallVec<[Layout; 4]> = SmallVec::new();
    if !layout.tiles.is_empty() {
        candidates.push(Layout {
            tiles: layout.tiles.clone(),
            ..base.clone()
        });
        if let Some(first) = regroup_first_tile(input, &layout, out_dims, &m2m) {
            let mut tiles = layout.tiles.clone();
            tiles[0] = first.clone();
            candidates.push(Layout {
                tiles,
                ..base.clone()
            });
            let mut only: SmallVec<[Tile; 2]> = SmallVec::new();
            only.push(first);
            candidates.push(Layout {
                tiles: only,
                ..base.clone()
            });
        }
    }
    candidates.push(base);
    let out = ArrayShape::new(input.element_type, out_dims);
    candidates.into_iter().find(|c| {
        c.validate_for_dims(out_dims).is_ok()
            && reshape_is_bitcast(input, &out.in_layout(c.clone())).is_ok_and(|v| v.bitcast)
    })
}

/// How XLA's `DecomposeBitcast` splits a bitcast into simpler ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BitcastDecomposition {
    /// The bitcast is a reshape that is a bitcast.
    Reshape,
    /// The bitcast is a transpose with these dimensions.
    Transpose {
        /// HLO transpose dimensions.
        dims: DimVec,
    },
    /// Transpose, reshape, transpose; every step a bitcast.
    Trt {
        /// The first transpose's dimensions.
        transpose1_dims: DimVec,
        /// The first transpose's result (FROM in physical order).
        transpose1_shape: Box<ArrayShape>,
        /// The reshape's result (TO in physical order).
        reshape_shape: Box<ArrayShape>,
        /// The second transpose's dimensions.
        transpose2_dims: DimVec,
    },
}

/// XLA's `DecomposeBitcast`. Errors when `from → to` is no bitcast of
/// these forms.
pub fn decompose_bitcast(
    from: &ArrayShape,
    to: &ArrayShape,
) -> Result<BitcastDecomposition, AlgebraError> {
    if reshape_is_bitcast(from, to)?.bitcast {
        return Ok(BitcastDecomposition::Reshape);
    }
    if let Some(dims) = deduce_transpose_dimensions_for_bitcast(from, to) {
        return Ok(BitcastDecomposition::Transpose { dims });
    }
    let lf = checked_layout(from)?;
    let lt = checked_layout(to)?;
    let t1 = descending_with_same_physical_layout(from)?;
    let r = descending_with_same_physical_layout(to)?;
    let rev_f: DimVec = (0..from.rank()).rev().collect();
    let rev_t: DimVec = (0..to.rank()).rev().collect();
    let transpose1_dims = compose_permutations(&lf.minor_to_major, &rev_f);
    let transpose2_dims = compose_permutations(&rev_t, &inverse_permutation(&lt.minor_to_major));
    let ok = transpose_is_bitcast(from, &t1, &transpose1_dims)?.bitcast
        && reshape_is_bitcast(&t1, &r)?.bitcast
        && transpose_is_bitcast(&r, to, &transpose2_dims)?.bitcast;
    if !ok {
        return Err(mismatch(format!("{from} -> {to} is not a bitcast")));
    }
    Ok(BitcastDecomposition::Trt {
        transpose1_dims,
        transpose1_shape: Box::new(t1),
        reshape_shape: Box::new(r),
        transpose2_dims,
    })
}

#[cfg(test)]
mod tests {
    use super::is_permutation;

    /// The one-word check answers as the plain definition on every list
    /// of up to four entries from `0..6`, and on lists longer than a word.
    #[test]
    fn permutations_are_told_as_by_definition() {
        let plain = |p: &[usize]| {
            let mut sorted = p.to_vec();
            sorted.sort_unstable();
            sorted.iter().copied().eq(0..p.len())
        };
        let mut checked = 0;
        for len in 0..=4u32 {
            for code in 0..6usize.pow(len) {
                let p: Vec<usize> = (0..len).map(|i| code / 6usize.pow(i) % 6).collect();
                assert_eq!(is_permutation(&p), plain(&p), "{p:?}");
                checked += 1;
            }
        }
        assert!(checked > 1000);
        let long: Vec<usize> = (0..70).rev().collect();
        assert!(is_permutation(&long));
        let mut repeated = long.clone();
        repeated[3] = repeated[4];
        assert!(!is_permutation(&repeated));
        // 64 and 0 share a bit position: only the length check tells 64
        // apart in a list of 64.
        let mut wide: Vec<usize> = (0..64).collect();
        wide[0] = 64;
        assert!(!is_permutation(&wide));
    }
}
