//! The brute-force oracle shared by the integration tests: it lays an array
//! out by literally materializing every step (pad, permute, fold, pad,
//! reshape, transpose) on a numbered array, with no symbolic reasoning, and
//! generators of random small shapes and layouts.

#![allow(dead_code)]

use proptest::prelude::*;
use shape::{ArrayShape, Layout, PrimitiveType, Tile};

/// An n-d array in row-major order; `None` is padding.
#[derive(Clone, Debug)]
pub struct Nd {
    pub dims: Vec<i64>,
    pub data: Vec<Option<u64>>,
}

fn strides(dims: &[i64]) -> Vec<usize> {
    let mut s = vec![1usize; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1] as usize;
    }
    s
}

/// Every multi-index of `dims` in row-major order.
pub fn indices(dims: &[i64]) -> Vec<Vec<i64>> {
    let n: i64 = dims.iter().product();
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for mut l in 0..n {
        let mut idx = vec![0i64; dims.len()];
        for i in (0..dims.len()).rev() {
            idx[i] = l % dims[i];
            l /= dims[i];
        }
        out.push(idx);
    }
    out
}

impl Nd {
    /// The array `0, 1, 2, ...` (row-major logical numbering).
    pub fn numbered(dims: &[i64]) -> Nd {
        let n: i64 = dims.iter().product();
        Nd {
            dims: dims.to_vec(),
            data: (0..n as u64).map(Some).collect(),
        }
    }

    pub fn get(&self, idx: &[i64]) -> Option<u64> {
        let s = strides(&self.dims);
        self.data[idx
            .iter()
            .zip(&s)
            .map(|(&i, &s)| i as usize * s)
            .sum::<usize>()]
    }

    /// HLO transpose: output dimension k is input dimension perm[k].
    pub fn transpose(&self, perm: &[usize]) -> Nd {
        let dims: Vec<i64> = perm.iter().map(|&p| self.dims[p]).collect();
        let s = strides(&self.dims);
        let data = indices(&dims)
            .iter()
            .map(|o| {
                let off: usize = o.iter().zip(perm).map(|(&v, &p)| v as usize * s[p]).sum();
                self.data[off]
            })
            .collect();
        Nd { dims, data }
    }

    /// Pads at the high end of every dimension to `dims` (with `None`).
    pub fn pad_to(&self, dims: &[i64]) -> Nd {
        let data = indices(dims)
            .iter()
            .map(|o| {
                if o.iter().zip(&self.dims).all(|(&v, &d)| v < d) {
                    self.get(o)
                } else {
                    None
                }
            })
            .collect();
        Nd {
            dims: dims.to_vec(),
            data,
        }
    }

    /// Keeps `[0, dims)` of every dimension.
    pub fn slice_to(&self, dims: &[i64]) -> Nd {
        let data = indices(dims).iter().map(|o| self.get(o)).collect();
        Nd {
            dims: dims.to_vec(),
            data,
        }
    }

    pub fn reshape(&self, dims: &[i64]) -> Nd {
        assert_eq!(dims.iter().product::<i64>() as usize, self.data.len());
        Nd {
            dims: dims.to_vec(),
            data: self.data.clone(),
        }
    }
}

pub fn layout_of(s: &ArrayShape) -> Layout {
    s.layout_or_default()
}

/// The buffer of `shape` holding the array `values` (indexed by the logical
/// row-major position): slot → value, literally pad → permute → per tile
/// fold, pad, reshape, transpose → flatten → tail pad.
pub fn materialize(shape: &ArrayShape, values: &Nd) -> Vec<Option<u64>> {
    let layout = layout_of(shape);
    let mut data = physical(shape, values).data;
    let align = layout.tail_padding_alignment_in_elements as usize;
    let len = data.len().div_ceil(align) * align;
    data.resize(len, None);
    data
}

/// The physical array of `shape` holding `values`: the buffer before tail
/// padding, as an array of the physical dimensions (what the last tile
/// level's transpose produced).
pub fn physical(shape: &ArrayShape, values: &Nd) -> Nd {
    stages(shape, values)
        .pop()
        .expect("at least the untiled stage")
}

/// The array after each stage of the expansion: padded and permuted, then
/// after every tile level.
pub fn stages(shape: &ArrayShape, values: &Nd) -> Vec<Nd> {
    let layout = layout_of(shape);
    let mut a = values.clone();
    if let Some(p) = &layout.padded_dimensions {
        a = a.pad_to(p);
    }
    let order: Vec<usize> = layout.minor_to_major.iter().rev().copied().collect();
    a = a.transpose(&order);
    let mut out = vec![a.clone()];
    for tile in &layout.tiles {
        // A tile longer than what it tiles sees unit dimensions added on
        // the major side (a tiled scalar).
        if tile.dims.len() > a.dims.len() {
            let mut dims = vec![1; tile.dims.len() - a.dims.len()];
            dims.extend_from_slice(&a.dims);
            a = a.reshape(&dims);
        }
        let n = a.dims.len();
        let start = n - tile.dims.len();
        let mut combined: Vec<i64> = a.dims[..start].to_vec();
        let mut sizes = Vec::new();
        let mut run = 1i64;
        for (j, &t) in tile.dims.iter().enumerate() {
            run *= a.dims[start + j];
            if t != Tile::COMBINE {
                combined.push(run);
                sizes.push(t);
                run = 1;
            }
        }
        a = a.reshape(&combined);
        let prefix = combined.len() - sizes.len();
        let mut padded = combined.clone();
        for (j, &t) in sizes.iter().enumerate() {
            padded[prefix + j] = (combined[prefix + j] + t - 1) / t * t;
        }
        a = a.pad_to(&padded);
        let mut split: Vec<i64> = padded[..prefix].to_vec();
        for (j, &t) in sizes.iter().enumerate() {
            split.push(padded[prefix + j] / t);
            split.push(t);
        }
        a = a.reshape(&split);
        let k = sizes.len();
        let mut perm: Vec<usize> = (0..prefix).collect();
        perm.extend((0..k).map(|j| prefix + 2 * j));
        perm.extend((0..k).map(|j| prefix + 2 * j + 1));
        a = a.transpose(&perm);
        out.push(a.clone());
    }
    out
}

/// slot of every element, indexed by the logical row-major position.
pub fn slots(shape: &ArrayShape) -> (Vec<u64>, usize) {
    let buf = materialize(shape, &Nd::numbered(&shape.dims));
    let n: i64 = shape.dims.iter().product();
    let mut at = vec![u64::MAX; n as usize];
    for (slot, v) in buf.iter().enumerate() {
        if let Some(l) = v {
            assert_eq!(at[*l as usize], u64::MAX, "element placed twice");
            at[*l as usize] = slot as u64;
        }
    }
    assert!(at.iter().all(|&s| s != u64::MAX), "element lost");
    (at, buf.len())
}

pub fn bits(shape: &ArrayShape) -> u64 {
    shape.element_storage_bits()
}

pub fn bytes(shape: &ArrayShape, slots: usize) -> u64 {
    (slots as u64 * bits(shape)).div_ceil(8)
}

/// The brute-force bitcast verdict: equal element bits, equal byte sizes,
/// and every element (matched through `to_of_from`, a map from FROM's
/// logical position to TO's) at the same slot.
pub fn oracle_bitcast(from: &ArrayShape, to: &ArrayShape, perm: Option<&[usize]>) -> bool {
    let nf: i64 = from.dims.iter().product();
    let nt: i64 = to.dims.iter().product();
    if nf != nt || bits(from) != bits(to) {
        return false;
    }
    let (sf, lf) = slots(from);
    let (st, lt) = slots(to);
    if bytes(from, lf) != bytes(to, lt) {
        return false;
    }
    match perm {
        None => sf == st,
        Some(p) => indices(&from.dims).iter().enumerate().all(|(l, idx)| {
            let out: Vec<i64> = p.iter().map(|&d| idx[d]).collect();
            let lo = out
                .iter()
                .zip(&to.dims)
                .fold(0i64, |acc, (&v, &d)| acc * d + v);
            sf[l] == st[lo as usize]
        }),
    }
}

/// The brute-force verdict for a physical view (one side's elements, in
/// row-major order, are the other side's buffer slots): equal element
/// bits; the other side has tiles or padding; the view side's buffer holds
/// element `L` at slot `L` and nothing else; it has as many elements as the
/// other side's buffer has slots; and
/// its dimensions merge or split those of a stage of the other side's
/// expansion after which the tile levels move nothing (the last stage, or
/// an earlier one). Either side may be the view.
pub fn oracle_view(from: &ArrayShape, to: &ArrayShape) -> bool {
    if bits(from) != bits(to) {
        return false;
    }
    [(to, from), (from, to)].into_iter().any(|(view, other)| {
        // An untiled, unpadded layout's physical array is its transpose;
        // bitcasts of it are read as layout changes, reshapes, transposes.
        let l = layout_of(other);
        if l.tiles.is_empty()
            && l.padded_dimensions.is_none()
            && l.tail_padding_alignment_in_elements <= 1
        {
            return false;
        }
        let n: i64 = view.dims.iter().product();
        let stages = stages(other, &Nd::numbered(&other.dims));
        let phys = stages.last().expect("at least the untiled stage");
        let align = layout_of(other).tail_padding_alignment_in_elements as usize;
        if (phys.data.len().div_ceil(align) * align) as i64 != n {
            return false;
        }
        let (at, len) = slots(view);
        if len as i64 != n || at.iter().enumerate().any(|(l, &s)| s != l as u64) {
            return false;
        }
        // A stage whose later tile levels move nothing is the physical
        // array too: those levels, applied to the stage numbered slot by
        // slot (its padding included), pad nothing and keep every slot.
        let layout = layout_of(other);
        stages.iter().enumerate().any(|(k, stage)| {
            let mut rest = Layout::descending(stage.dims.len()).with_tiles(&layout.tiles[k..]);
            rest.element_size_in_bits = layout.element_size_in_bits;
            let numbered = ArrayShape::with_layout(other.element_type, &stage.dims, rest);
            let keeps = physical(&numbered, &Nd::numbered(&stage.dims))
                .data
                .iter()
                .enumerate()
                .all(|(i, v)| *v == Some(i as u64));
            keeps && merges_or_splits(&view.dims, &stage.dims, n)
        })
    })
}

/// True when `view` merges or splits `phys` (both over `n` slots; `phys`
/// may cover fewer, the rest being tail padding): their row-major
/// boundaries below `n` form one chain under divisibility, cutting
/// `[0, n)` into digits, and the digit ranges of the dimensions form a
/// laminar family: two dimensions' ranges nest or are disjoint.
fn merges_or_splits(view: &[i64], phys: &[i64], n: i64) -> bool {
    if n == 0 {
        return true;
    }
    let cuts = |dims: &[i64]| -> Vec<i64> {
        let mut w = 1;
        let mut out = vec![1];
        for &d in dims.iter().rev() {
            w *= d;
            out.push(w.min(n));
        }
        out
    };
    let (cv, cp) = (cuts(view), cuts(phys));
    let mut chain: Vec<i64> = cv.iter().chain(&cp).copied().filter(|&b| b < n).collect();
    chain.sort_unstable();
    chain.dedup();
    // The slot count closes the chain without having to be a multiple: the
    // last digit may end in tail padding.
    if !chain.windows(2).all(|p| p[1] % p[0] == 0) {
        return false;
    }
    chain.push(n);
    // Each dimension as its range of digits [first, last).
    let digit = |b: i64| {
        chain
            .iter()
            .position(|&c| c == b)
            .expect("a boundary of the chain")
    };
    let ranges = |c: &[i64]| -> Vec<(usize, usize)> {
        c.windows(2)
            .map(|w| (digit(w[0]), digit(w[1])))
            .filter(|(a, b)| a < b)
            .collect()
    };
    let (rv, rp) = (ranges(&cv), ranges(&cp));
    rv.iter().all(|&(a, b)| {
        rp.iter()
            .all(|&(c, d)| b <= c || d <= a || (c <= a && b <= d) || (a <= c && d <= b))
    })
}

// ---------------------------------------------------------------------------
// Generators.

pub fn element_type() -> impl Strategy<Value = (PrimitiveType, i64)> {
    prop_oneof![
        4 => Just((PrimitiveType::F32, 0)),
        1 => Just((PrimitiveType::Bf16, 0)),
        1 => Just((PrimitiveType::S8, 0)),
        1 => Just((PrimitiveType::S4, 4)),
        1 => Just((PrimitiveType::S4, 0)),
        1 => Just((PrimitiveType::Pred, 1)),
        1 => Just((PrimitiveType::U2, 2)),
    ]
}

pub fn dims(max_rank: usize) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(prop_oneof![20 => 1i64..=6, 1 => Just(0i64)], 0..=max_rank)
}

/// A random permutation of `0..n`.
pub fn permutation(n: usize) -> impl Strategy<Value = Vec<usize>> {
    Just((0..n).collect::<Vec<usize>>()).prop_shuffle()
}

/// Random tiles for a shape of the given rank: up to three levels, each of
/// length 1..=rank of what it tiles (a scalar's first up to 2 long), sizes
/// 1..=4, sometimes `*`. Later levels over the tile of the level before are
/// how repeated (packed) tiles such as `T(8,128)(2,1)` or `T(256)(128)(2,1)`
/// look in small.
pub fn tiles(rank: usize) -> impl Strategy<Value = Vec<Tile>> {
    let level = |avail: usize| {
        (1..=avail.max(1)).prop_flat_map(|len| {
            prop::collection::vec(prop_oneof![6 => 1i64..=4, 1 => Just(Tile::COMBINE)], len)
                .prop_map(|mut v| {
                    if let Some(last) = v.last_mut()
                        && *last == Tile::COMBINE
                    {
                        *last = 2;
                    }
                    Tile { dims: v.into() }
                })
        })
    };
    let produced = move |t: &Tile| rank.max(t.dims.len()) - t.dims.len() + 2 * t.sized_entries();
    if rank == 0 {
        // A scalar's tiles see it as unit dimensions (`f32[]{:T(128)}`).
        return prop_oneof![
            2 => Just(Vec::new()),
            2 => level(2).prop_map(|t| vec![t]),
            1 => level(1).prop_flat_map(move |t| level(produced(&t)).prop_map(move |u| vec![t.clone(), u])),
        ]
        .boxed();
    }
    prop_oneof![
        2 => Just(Vec::new()),
        3 => level(rank).prop_map(|t| vec![t]),
        2 => level(rank).prop_flat_map(move |t| level(produced(&t)).prop_map(move |u| vec![t.clone(), u])),
        1 => level(rank).prop_flat_map(move |t| {
            let after = produced(&t);
            level(after).prop_flat_map(move |u| {
                let t = t.clone();
                let again = after - u.dims.len() + 2 * u.sized_entries();
                level(again.min(3)).prop_map(move |v| vec![t.clone(), u.clone(), v])
            })
        }),
    ]
    .boxed()
}

/// A random layout for the given dimensions.
pub fn layout_for(dims: Vec<i64>, e: i64) -> impl Strategy<Value = Layout> {
    let r = dims.len();
    (
        permutation(r),
        tiles(r),
        prop_oneof![6 => Just(1i64), 1 => 2i64..=5],
        prop::option::weighted(0.15, prop::collection::vec(0i64..=2, r)),
    )
        .prop_map(move |(perm, tiles, tail, pad)| {
            let mut l = Layout::new(&perm).with_tiles(&tiles);
            l.tail_padding_alignment_in_elements = tail;
            l.element_size_in_bits = e;
            l.padded_dimensions = pad.map(|p| p.iter().zip(&dims).map(|(x, d)| x + d).collect());
            l
        })
}

/// A random array shape with a random layout.
pub fn shape(max_rank: usize) -> impl Strategy<Value = ArrayShape> {
    (dims(max_rank), element_type()).prop_flat_map(|(d, (t, e))| {
        layout_for(d.clone(), e).prop_map(move |l| ArrayShape::with_layout(t, &d, l))
    })
}

/// A random layout for `shape`'s dimensions with the same element size.
pub fn relayout(s: &ArrayShape) -> impl Strategy<Value = ArrayShape> + use<> {
    let s = s.clone();
    let e = layout_of(&s).element_size_in_bits;
    layout_for(s.dims.to_vec(), e).prop_map(move |l| ArrayShape {
        layout: Some(l.into()),
        ..s.clone()
    })
}

/// Dimensions with product `n` (n ≥ 1), rank up to 4, size-1 dims allowed.
pub fn factorization(n: i64) -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(1i64..=6, 0..=4).prop_map(move |seeds| {
        let mut rest = n;
        let mut out = Vec::new();
        for s in seeds {
            // The largest divisor of rest that is at most s.
            let d = (1..=s).rev().find(|d| rest % d == 0).unwrap_or(1);
            out.push(d);
            rest /= d;
        }
        out.push(rest);
        out
    })
}

/// A random layout for `shape`'s dimensions; for a sub-byte type, half the
/// time with the other element size (packed `E(n)` or one byte each).
pub fn relayout_any_size(s: &ArrayShape) -> impl Strategy<Value = ArrayShape> + use<> {
    let s = s.clone();
    (relayout(&s), any::<bool>()).prop_map(move |(mut to, flip)| {
        let width = s.element_type.bit_width().unwrap_or(8) as i64;
        if flip
            && width < 8
            && let Some(l) = &mut to.layout
        {
            l.element_size_in_bits = if l.element_size_in_bits == 0 {
                width
            } else {
                0
            };
        }
        to
    })
}
