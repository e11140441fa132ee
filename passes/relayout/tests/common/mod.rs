//! Brute-force oracles for the relayout tests: walk every logical index of
//! small shapes through `shape::linear_index` and compare positions, and
//! execute expanded relayouts on numbered buffers.
//!
//! These walks are the tests' ground truth; the pass itself never walks.

#![allow(dead_code)]

use hlo::{AttrValue, Computation, InstId, KnownAttr, Module, Opcode};
use relayout::{Report, RewriteKind};
use shape::{ArrayShape, Expansion, Shape};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most elements a walk visits exhaustively.
pub const WALK_LIMIT: u64 = 1 << 15;

/// Large pairs walked through a small stand-in of the same layouts.
pub static SHRUNK: AtomicUsize = AtomicUsize::new(0);
/// Large tiled pairs walked on sampled indices (no stand-in found).
pub static SAMPLED: AtomicUsize = AtomicUsize::new(0);

pub fn array(text: &str) -> ArrayShape {
    match shape::parse_shape(text) {
        Ok(Shape::Array(a)) => a,
        other => panic!("{text}: {other:?}"),
    }
}

pub fn laid_out(a: &ArrayShape) -> ArrayShape {
    ArrayShape {
        layout: Some(a.layout_or_default().into()),
        ..a.clone()
    }
}

pub fn target(name: &str) -> target::TargetSpec {
    target::load_builtin(name).expect("built-in target")
}

pub fn parse(text: &str) -> Module {
    hlo::parse_module(text, "test.hlo").unwrap_or_else(|e| panic!("{e}"))
}

/// Parses, runs the relayout pass alone, verifies the output.
pub fn relayout_alone(text: &str, target_name: &str, expand: bool) -> (Module, Report) {
    let mut m = parse(text);
    let r = relayout::run(
        &mut m,
        &target(target_name),
        &relayout::Options {
            expand_relayouts: expand,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let problems = hlo::verify_module(&m);
    assert!(
        problems.is_empty(),
        "verifier: {problems:?}\n{}",
        hlo::print_module(&m)
    );
    let order = hlo::uses_before_definition(&m);
    assert!(order.is_empty(), "used before defined: {order:?}");
    // The printed text parses again to the same text.
    let printed = hlo::print_module(&m);
    let again = hlo::print_module(&parse(&printed));
    assert_eq!(printed, again, "the output does not round-trip");
    (m, r)
}

/// The row-major multi-index of linear position `l` in `dims`.
pub fn unravel(mut l: u64, dims: &[i64]) -> Vec<i64> {
    let mut idx = vec![0i64; dims.len()];
    for k in (0..dims.len()).rev() {
        let d = dims[k].max(1) as u64;
        idx[k] = (l % d) as i64;
        l /= d;
    }
    idx
}

pub fn count(dims: &[i64]) -> u64 {
    dims.iter().map(|&d| d.max(0) as u64).product()
}

/// How the logical indices of a bitcast's operand and result correspond.
#[derive(Clone, Debug)]
pub enum Map {
    /// Same dimensions, same index.
    Same,
    /// Elements matched in row-major logical order (a reshape).
    RowMajor,
    /// Output dimension `k` is operand dimension `dims[k]`.
    Transpose(Vec<usize>),
}

/// The result index of operand element number `l` (row-major in FROM).
fn partner(map: &Map, l: u64, from: &ArrayShape, to: &ArrayShape) -> Vec<i64> {
    match map {
        Map::Same => unravel(l, &from.dims),
        Map::RowMajor => unravel(l, &to.dims),
        Map::Transpose(dims) => {
            let i = unravel(l, &from.dims);
            dims.iter().map(|&d| i[d]).collect()
        }
    }
}

/// Smaller shapes with the same layouts and the same verdict structure:
/// untiled pairs through `shrink_untiled`, tiled ones through
/// `shrink_tiled`. `None` when no such shrink is known.
pub fn shrink(map: &Map, from: &ArrayShape, to: &ArrayShape) -> Option<(ArrayShape, ArrayShape)> {
    let tiled = |a: &ArrayShape| !a.layout_or_default().tiles.is_empty();
    if tiled(from) || tiled(to) {
        shrink_tiled(map, from, to)
    } else {
        shrink_untiled(map, from, to)
    }
}

/// Every dimension above 3 shrinks to 3 (sizes 1 stay 1, so untiled
/// orders keep meaning the same); a reshape shrinks each group of its
/// common factors consistently.
fn shrink_untiled(
    map: &Map,
    from: &ArrayShape,
    to: &ArrayShape,
) -> Option<(ArrayShape, ArrayShape)> {
    let small = |d: i64| d.min(3);
    match map {
        Map::Same | Map::Transpose(_) => {
            let f: Vec<i64> = from.dims.iter().map(|&d| small(d)).collect();
            let t: Vec<i64> = match map {
                Map::Transpose(dims) => dims.iter().map(|&d| f[d]).collect(),
                _ => f.clone(),
            };
            Some((with_dims(from, &f), with_dims(to, &t)))
        }
        Map::RowMajor => {
            let bounds = shape::facts::common_factors(&from.dims, &to.dims);
            let (mut f, mut t) = (Vec::new(), Vec::new());
            for w in bounds.windows(2) {
                let (a, b) = (&from.dims[w[0].0..w[1].0], &to.dims[w[0].1..w[1].1]);
                if a.len() <= 1 {
                    let b2: Vec<i64> = b.iter().map(|&d| small(d)).collect();
                    f.extend(a.iter().map(|_| b2.iter().product::<i64>()));
                    t.extend(b2);
                } else if b.len() <= 1 {
                    let a2: Vec<i64> = a.iter().map(|&d| small(d)).collect();
                    t.extend(b.iter().map(|_| a2.iter().product::<i64>()));
                    f.extend(a2);
                } else if count(a) <= 4096 {
                    f.extend_from_slice(a);
                    t.extend_from_slice(b);
                } else {
                    return None;
                }
            }
            (f.len() == from.rank() && t.len() == to.rank())
                .then(|| (with_dims(from, &f), with_dims(to, &t)))
        }
    }
}

/// The tiled dimensions of a shape's first tile level, as (the logical
/// dimensions combined into one tiled dimension, its tile size); every
/// other dimension is its own group with tile size 1.
fn tile_groups(a: &ArrayShape) -> Vec<(Vec<usize>, i64)> {
    let layout = a.layout_or_default();
    let m2m = &layout.minor_to_major;
    let mut groups = Vec::new();
    let mut covered = vec![false; a.rank()];
    if let Some(tile) = layout.tiles.first() {
        // Tile entries apply to the most minor dimensions, the last entry
        // to the most minor one; a `*` entry folds its dimension into the
        // next more minor entry's group.
        let n = tile.dims.len().min(m2m.len());
        let mut pending: Vec<usize> = Vec::new();
        for k in (0..n).rev() {
            // Entry for physical position k from the minor end.
            let entry = tile.dims[tile.dims.len() - n + (n - 1 - k)];
            let dim = m2m[k];
            covered[dim] = true;
            pending.push(dim);
            if entry != shape::Tile::COMBINE {
                groups.push((std::mem::take(&mut pending), entry));
            }
        }
        if !pending.is_empty() {
            groups.push((pending, 1));
        }
    }
    for (d, c) in covered.iter().enumerate() {
        if !c {
            groups.push((vec![d], 1));
        }
    }
    groups
}

/// True when `new` dimensions keep everything a tiled verdict can depend
/// on from `old`: per tile group, the product's remainder modulo the tile
/// and whether it fills at least one tile; per dimension, whether it is 1.
fn keeps_tile_structure(a: &ArrayShape, old: &[i64], new: &[i64]) -> bool {
    if old
        .iter()
        .zip(new)
        .any(|(&o, &n)| (o == 1) != (n == 1) || n < 1)
    {
        return false;
    }
    tile_groups(a).iter().all(|(dims, t)| {
        let p = |s: &[i64]| dims.iter().map(|&d| s[d]).product::<i64>();
        let (po, pn) = (p(old), p(new));
        pn % t == po % t && (pn >= *t) == (po >= *t)
    })
}

/// Shrinks a tiled pair dimension by dimension, keeping its layouts and
/// tile structure: a dimension (with its partner on the other side) loses
/// whole multiples of the tiles that touch it, or, inside a reshape group,
/// both sides divide by a common factor. Greedy, largest cut first.
fn shrink_tiled(map: &Map, from: &ArrayShape, to: &ArrayShape) -> Option<(ArrayShape, ArrayShape)> {
    let (mut f, mut t): (Vec<i64>, Vec<i64>) = (from.dims.to_vec(), to.dims.to_vec());
    // Which (from dim, to dim) pairs scale together.
    let pairs: Vec<(usize, usize, bool)> = match map {
        Map::Same => (0..f.len()).map(|i| (i, i, true)).collect(),
        Map::Transpose(perm) => perm
            .iter()
            .enumerate()
            .map(|(j, &i)| (i, j, true))
            .collect(),
        Map::RowMajor => {
            let bounds = shape::facts::common_factors(&from.dims, &to.dims);
            let mut v = Vec::new();
            for w in bounds.windows(2) {
                let single = w[1].0 - w[0].0 == 1 && w[1].1 - w[0].1 == 1;
                for i in w[0].0..w[1].0 {
                    for j in w[0].1..w[1].1 {
                        v.push((i, j, single));
                    }
                }
            }
            v
        }
    };
    let total = |d: &[i64]| d.iter().map(|&x| x.max(0) as u64).product::<u64>();
    while total(&f) > WALK_LIMIT {
        let mut best: Option<(u64, Vec<i64>, Vec<i64>)> = None;
        for &(i, j, same_size) in &pairs {
            let (a, b) = (f[i], t[j]);
            // Candidate new sizes (a2, b2) with a/a2 == b/b2.
            let mut options: Vec<(i64, i64)> = Vec::new();
            if same_size && a == b {
                // Drop whole tiles' worth: any smaller size works if the
                // structure check passes; try a few natural ones.
                for n in [1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512] {
                    if n < a {
                        options.push((n, n));
                    }
                    for step in [8, 128, 256, 1024] {
                        let m = a % step + n * step;
                        if m < a && m > 0 {
                            options.push((m, m));
                        }
                    }
                }
            }
            for k in 2..=a.min(b).min(4096) {
                if a % k == 0 && b % k == 0 {
                    options.push((a / k, b / k));
                }
            }
            for (a2, b2) in options {
                let mut f2 = f.clone();
                let mut t2 = t.clone();
                f2[i] = a2;
                t2[j] = b2;
                if total(&f2) != total(&t2) {
                    continue;
                }
                if !keeps_tile_structure(from, &f, &f2) || !keeps_tile_structure(to, &t, &t2) {
                    continue;
                }
                let size = total(&f2);
                if best.as_ref().is_none_or(|(s, _, _)| size < *s) {
                    best = Some((size, f2, t2));
                }
            }
        }
        let (_, f2, t2) = best?;
        f = f2;
        t = t2;
    }
    Some((with_dims(from, &f), with_dims(to, &t)))
}

fn with_dims(a: &ArrayShape, dims: &[i64]) -> ArrayShape {
    ArrayShape {
        dims: dims.iter().copied().collect(),
        ..laid_out(a)
    }
}

/// The brute-force verdict: `Ok(true)` when every element keeps its slot
/// and both buffers have the same size, `Ok(false)` with a witness found,
/// checked over every index (shrinking large shapes first).
pub fn walk(map: &Map, from: &ArrayShape, to: &ArrayShape) -> Result<bool, String> {
    let (from, to) = (laid_out(from), laid_out(to));
    let sf = shape::storage_size(&from).map_err(|e| e.to_string())?;
    let st = shape::storage_size(&to).map_err(|e| e.to_string())?;
    if sf.bytes != st.bytes || sf.elements != st.elements || sf.element_bits != st.element_bits {
        return Ok(false);
    }
    let (f, t) = if sf.elements > WALK_LIMIT {
        let exact = |a: &ArrayShape, b: &ArrayShape| -> Result<bool, String> {
            let v = match map {
                Map::Same => shape::layout_change_is_bitcast(a, b),
                Map::RowMajor => shape::reshape_is_bitcast(a, b),
                Map::Transpose(d) => shape::transpose_is_bitcast(a, b, d),
            };
            v.map(|v| v.bitcast).map_err(|e| e.to_string())
        };
        let tiled =
            !from.layout_or_default().tiles.is_empty() || !to.layout_or_default().tiles.is_empty();
        match shrink(map, &from, &to) {
            // The small pair must get the same exact verdict as the big one,
            // or it would not stand for it.
            Some((f, t)) if exact(&f, &t)? == exact(&from, &to)? => {
                SHRUNK.fetch_add(1, Ordering::Relaxed);
                (f, t)
            }
            // A tiled pair whose small stand-in is not found or does not
            // keep the verdict is checked on sampled indices instead.
            _ if tiled => {
                SAMPLED.fetch_add(1, Ordering::Relaxed);
                return sampled_walk(map, &from, &to);
            }
            Some((f, t)) => {
                return Err(format!(
                    "shrinking {from} -> {to} to {f} -> {t} changes the verdict"
                ));
            }
            None => return Err(format!("no small version of {from} -> {to}")),
        }
    } else {
        (from, to)
    };
    let (a, b) = (
        shape::storage_size(&f).map_err(|e| e.to_string())?,
        shape::storage_size(&t).map_err(|e| e.to_string())?,
    );
    if a.bytes != b.bytes {
        return Ok(false);
    }
    let ef = Expansion::new(&f).map_err(|e| e.to_string())?;
    let et = Expansion::new(&t).map_err(|e| e.to_string())?;
    for l in 0..count(&f.dims) {
        let i = unravel(l, &f.dims);
        let j = partner(map, l, &f, &t);
        let a = ef.linear_index(&i).map_err(|e| e.to_string())?;
        let b = et.linear_index(&j).map_err(|e| e.to_string())?;
        if a != b {
            return Ok(false);
        }
    }
    Ok(true)
}

fn array_of(comp: &Computation, id: InstId) -> ArrayShape {
    laid_out(comp.inst(id).shape.as_array().expect("an array"))
}

/// Executes the chain of instructions from `start` (exclusive) to `end`
/// (inclusive) on FROM's numbered buffer, with pad, transpose and slice on
/// the logical array and bitcast keeping the bytes; returns an error unless
/// the result is exactly END's buffer of the numbered elements.
pub fn execute_chain(comp: &Computation, start: InstId, end: InstId) -> Result<usize, String> {
    // The chain, walked back through operand 0.
    let mut chain = vec![end];
    let mut cur = end;
    while let Some(&o) = comp.operands(cur).first() {
        if o == start {
            break;
        }
        chain.push(o);
        cur = o;
        if chain.len() > 64 {
            return Err("no chain back to the operand".into());
        }
    }
    chain.reverse();
    let from = array_of(comp, start);
    let size = |a: &ArrayShape| shape::storage_size(a).map_err(|e| e.to_string());
    // Slot contents: Some(element number) or None (padding, pad values).
    let mut buf = vec![None; size(&from)?.slots as usize];
    let ef = Expansion::new(&from).map_err(|e| e.to_string())?;
    for l in 0..count(&from.dims) {
        buf[ef
            .linear_index(&unravel(l, &from.dims))
            .map_err(|e| e.to_string())? as usize] = Some(l);
    }
    let mut shape_in = from.clone();
    let mut bitcasts = 0;
    for &id in &chain {
        let inst = comp.inst(id);
        let out = array_of(comp, id);
        let e_in = Expansion::new(&shape_in).map_err(|e| e.to_string())?;
        let e_out = Expansion::new(&out).map_err(|e| e.to_string())?;
        let read = |idx: &[i64]| -> Result<Option<u64>, String> {
            Ok(buf[e_in.linear_index(idx).map_err(|e| e.to_string())? as usize])
        };
        let mut next = vec![None; size(&out)?.slots as usize];
        match inst.opcode {
            Opcode::Bitcast => {
                if size(&shape_in)?.bytes != size(&out)?.bytes {
                    return Err(format!("bitcast %{} changes the buffer size", inst.name));
                }
                bitcasts += 1;
                next = buf.clone();
                next.resize(size(&out)?.slots as usize, None);
            }
            Opcode::Transpose => {
                let dims: Vec<usize> = inst
                    .attrs
                    .ints(KnownAttr::Dimensions)
                    .unwrap_or(&[])
                    .iter()
                    .map(|&d| d as usize)
                    .collect();
                for l in 0..count(&out.dims) {
                    let j = unravel(l, &out.dims);
                    let mut i = vec![0i64; j.len()];
                    for (k, &d) in dims.iter().enumerate() {
                        i[d] = j[k];
                    }
                    next[e_out.linear_index(&j).map_err(|e| e.to_string())? as usize] = read(&i)?;
                }
            }
            // A copy inside a chain changes only the layout (the unpacking
            // copy a target's needs add before a step).
            Opcode::Copy => {
                if shape_in.dims != out.dims {
                    return Err(format!("copy %{} changes the dimensions", inst.name));
                }
                for l in 0..count(&out.dims) {
                    let j = unravel(l, &out.dims);
                    next[e_out.linear_index(&j).map_err(|e| e.to_string())? as usize] = read(&j)?;
                }
            }
            Opcode::Slice => {
                let Some(AttrValue::Slice(sl)) = inst.attrs.get(KnownAttr::Slice) else {
                    return Err("slice attribute".into());
                };
                for l in 0..count(&out.dims) {
                    let j = unravel(l, &out.dims);
                    let i: Vec<i64> = j
                        .iter()
                        .zip(sl)
                        .map(|(&x, s)| s.start + x * s.stride)
                        .collect();
                    next[e_out.linear_index(&j).map_err(|e| e.to_string())? as usize] = read(&i)?;
                }
            }
            Opcode::Pad => {
                let Some(AttrValue::Padding(pd)) = inst.attrs.get(KnownAttr::Padding) else {
                    return Err("padding attribute".into());
                };
                if comp.inst(comp.operands(id)[1]).opcode != Opcode::Constant {
                    return Err("the padding value is not a constant".into());
                }
                for l in 0..count(&out.dims) {
                    let j = unravel(l, &out.dims);
                    let mut i = Vec::with_capacity(j.len());
                    let mut inside = true;
                    for (k, &x) in j.iter().enumerate() {
                        let step = pd[k].interior + 1;
                        let y = x - pd[k].low;
                        if y < 0 || y % step != 0 || y / step >= shape_in.dims[k] {
                            inside = false;
                        }
                        i.push(y / step);
                    }
                    let v = if inside { read(&i)? } else { None };
                    next[e_out.linear_index(&j).map_err(|e| e.to_string())? as usize] = v;
                }
            }
            other => return Err(format!("unexpected {other} in an expanded relayout")),
        }
        buf = next;
        shape_in = out;
    }
    // Every element of END is where END's layout puts it.
    let e_end = Expansion::new(&shape_in).map_err(|e| e.to_string())?;
    for l in 0..count(&shape_in.dims) {
        let at = e_end
            .linear_index(&unravel(l, &shape_in.dims))
            .map_err(|e| e.to_string())?;
        if buf[at as usize] != Some(l) {
            return Err(format!(
                "element {l} is not at slot {at} of {shape_in}: found {:?}",
                buf[at as usize]
            ));
        }
    }
    Ok(bitcasts)
}

/// Checks every bitcast of `module` that is not in `existing` (names of
/// bitcasts the input already had): each must come from a reported
/// rewrite, and the walk must confirm that it moves no element. Returns how
/// many bitcasts were proven.
pub fn prove_bitcasts(
    module: &Module,
    report: &Report,
    existing: &[(String, String)],
) -> Result<usize, String> {
    let mut proven = 0;
    for comp in &module.computations {
        let expanded: Vec<&relayout::Rewrite> = report
            .rewrites
            .iter()
            .filter(|r| r.computation == comp.name && r.kind == RewriteKind::ExpandedRelayout)
            .map(|r| &**r)
            .collect();
        let mut in_chains = std::collections::HashSet::new();
        for r in &expanded {
            for s in &r.steps {
                in_chains.insert(s.name.clone());
            }
            let find = |n: &str| {
                comp.instructions()
                    .find(|(_, i)| i.name == n)
                    .map(|(id, _)| id)
            };
            let (Some(end), Some(start)) = (find(&r.instruction), find(&r.operand)) else {
                return Err(format!(
                    "expanded relayout %{} is not in the module",
                    r.instruction
                ));
            };
            proven +=
                execute_chain(comp, start, end).map_err(|e| format!("%{}: {e}", r.instruction))?;
        }
        for (id, inst) in comp.instructions() {
            if inst.opcode != Opcode::Bitcast {
                continue;
            }
            if existing
                .iter()
                .any(|(c, n)| *c == comp.name && *n == inst.name)
                || in_chains.contains(&inst.name)
            {
                continue;
            }
            let Some(r) = report
                .rewrites
                .iter()
                .find(|r| r.computation == comp.name && r.instruction == inst.name)
            else {
                return Err(format!(
                    "bitcast %{} in {} is in no rewrite",
                    inst.name, comp.name
                ));
            };
            let map = match r.kind {
                RewriteKind::CopyToBitcast | RewriteKind::InsertedBitcast => Map::Same,
                RewriteKind::ReshapeToBitcast => Map::RowMajor,
                RewriteKind::TransposeToBitcast => Map::Transpose(
                    r.transpose_dims
                        .as_ref()
                        .ok_or("a transpose without dims")?
                        .to_vec(),
                ),
                other => return Err(format!("bitcast %{} comes from a {other}", inst.name)),
            };
            let from = array_of(comp, comp.operands(id)[0]);
            let to = array_of(comp, id);
            if from != *r.from || to != *r.to {
                return Err(format!(
                    "%{}: the report says {} -> {}, the module has {from} -> {to}",
                    inst.name, r.from, r.to
                ));
            }
            if !walk(&map, &from, &to).map_err(|e| format!("%{}: {e}", inst.name))? {
                return Err(format!(
                    "bitcast %{} ({from} -> {to}, {map:?}) moves an element",
                    inst.name
                ));
            }
            proven += 1;
        }
    }
    Ok(proven)
}

/// Checks that every remaining `copy`, `transpose` and `reshape` really
/// moves data: the walk finds a moved element or a size change.
pub fn confirm_movements(module: &Module) -> Result<usize, String> {
    let mut confirmed = 0;
    for comp in &module.computations {
        for (id, inst) in comp.instructions() {
            let map = match inst.opcode {
                Opcode::Copy => Map::Same,
                Opcode::Reshape => Map::RowMajor,
                Opcode::Transpose => Map::Transpose(
                    inst.attrs
                        .ints(KnownAttr::Dimensions)
                        .unwrap_or(&[])
                        .iter()
                        .map(|&d| d as usize)
                        .collect(),
                ),
                _ => continue,
            };
            let Some(&o) = comp.operands(id).first() else {
                continue;
            };
            let (Some(a), Some(b)) = (comp.inst(o).shape.as_array(), inst.shape.as_array()) else {
                continue;
            };
            if a.dynamic != 0 || b.dynamic != 0 {
                continue;
            }
            if walk(&map, a, b).map_err(|e| format!("%{}: {e}", inst.name))? {
                return Err(format!(
                    "%{} ({a} -> {b}) moves nothing but was kept",
                    inst.name
                ));
            }
            confirmed += 1;
        }
    }
    Ok(confirmed)
}

/// The (computation, name) of every bitcast in a module.
pub fn bitcasts(module: &Module) -> Vec<(String, String)> {
    module
        .computations
        .iter()
        .flat_map(|c| {
            c.instructions()
                .filter(|(_, i)| i.opcode == Opcode::Bitcast)
                .map(move |(_, i)| (c.name.clone(), i.name.clone()))
        })
        .collect()
}

/// The indices of one dimension where a tiled layout's arithmetic changes:
/// both ends, the middle, and both sides of every multiple of each tile
/// size that covers the dimension (tile boundaries are where a wrong
/// tiling would first misplace an element).
fn boundary_indices(size: i64, tile_sizes: &[i64]) -> Vec<i64> {
    let mut v = vec![0, 1, size / 2, size - 2, size - 1];
    for &t in tile_sizes {
        for m in [t, 2 * t, size / t * t] {
            v.extend([m - 1, m, m + 1]);
        }
    }
    v.retain(|&i| (0..size).contains(&i));
    v.sort_unstable();
    v.dedup();
    v
}

/// For tiled pairs too large to walk and with no known smaller stand-in:
/// walks every combination of boundary indices (up to `WALK_LIMIT`) and
/// then `WALK_LIMIT` pseudo-random positions. Unlike the full walk,
/// `Ok(true)` here is strong evidence rather than a proof.
fn sampled_walk(map: &Map, from: &ArrayShape, to: &ArrayShape) -> Result<bool, String> {
    let ef = Expansion::new(from).map_err(|e| e.to_string())?;
    let et = Expansion::new(to).map_err(|e| e.to_string())?;
    // The tile sizes that touch each logical dimension of FROM: a tile of
    // rank r covers FROM's r most-minor dimensions in minor-to-major order.
    let layout = from.layout_or_default();
    let mut tiles_of: Vec<Vec<i64>> = vec![Vec::new(); from.rank()];
    for tile in &layout.tiles {
        let n = tile.dims.len().min(from.rank());
        for (k, &size) in tile.dims.iter().rev().take(n).enumerate() {
            let dim = layout.minor_to_major[k];
            if size > 1 {
                tiles_of[dim].push(size);
            }
        }
    }
    let per_dim: Vec<Vec<i64>> = from
        .dims
        .iter()
        .zip(&tiles_of)
        .map(|(&d, t)| boundary_indices(d, t))
        .collect();
    let check = |i: &[i64]| -> Result<bool, String> {
        let l = i
            .iter()
            .zip(&from.dims)
            .fold(0u64, |acc, (&x, &d)| acc * d as u64 + x as u64);
        let j = partner(map, l, from, to);
        Ok(ef.linear_index(i).map_err(|e| e.to_string())?
            == et.linear_index(&j).map_err(|e| e.to_string())?)
    };
    // Every combination of boundary indices, odometer order.
    let combos: u64 = per_dim.iter().map(|v| v.len() as u64).product();
    if combos <= WALK_LIMIT {
        let mut pos = vec![0usize; per_dim.len()];
        'odometer: loop {
            let i: Vec<i64> = pos.iter().zip(&per_dim).map(|(&p, v)| v[p]).collect();
            if !check(&i)? {
                return Ok(false);
            }
            for k in (0..pos.len()).rev() {
                pos[k] += 1;
                if pos[k] < per_dim[k].len() {
                    continue 'odometer;
                }
                pos[k] = 0;
            }
            break;
        }
    }
    // A fixed linear congruential sequence keeps the test deterministic.
    let total = count(&from.dims);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..WALK_LIMIT {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = unravel((x >> 11) % total, &from.dims);
        if !check(&i)? {
            return Ok(false);
        }
    }
    Ok(true)
}
