//! `custom-call` targets and `topk`.
//!
//! A custom call reads its operands the way the callee would: where the
//! instruction states `operand_layout_constraints`, each operand is read
//! under the constrained layout (reinterpreted at a physical boundary,
//! relaid out at a logical one, exactly like a computation parameter), so a
//! pass that hands a constrained call the wrong bytes is caught. The
//! results are fresh buffers in the instruction's own layouts.
//!
//! Known targets compute what the library computes, on logical values:
//! `LayoutConstraint` (the identity), `TopK` (the largest `k` along the
//! minor dimension, with the comparator XLA passes, stable), and JAX's
//! LAPACK calls on CPU (`lapack_{s,d}{potrf,getrf,trsm,syevd}_ffi`), in
//! `f64` and rounded once to the element type. Any other target is an
//! *opaque* pure function: its results are a deterministic hash of the
//! target and its operands' logical values (see [`Interp::opaque_call`]).
//! That is all a layout pass may assume about a library call, and enough
//! to show that it hands the call the same values and reads its results
//! consistently.

use std::borrow::Cow;

use hlo::{AttrValue, Instruction, KnownAttr};
use shape::{ArrayShape, PrimitiveType, Shape};

use crate::check::SplitMix64;
use crate::element::{self, Class, Direction, FloatFormat, Num};
use crate::error::EvalError;
use crate::eval::{Interp, arity, array};
use crate::reduce::{check_signature, merge_sort};
use crate::value::{Buffer, Value, class_of, element_count};

/// The LAPACK routines JAX calls on CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lapack {
    Potrf,
    Getrf,
    Trsm,
    Syevd,
}

/// The constraint `c` for value `v`, leaf by leaf, with an untiled
/// constraint leaf replaced by the value's own layout when that has the
/// same order and only adds tiles.
fn order_only_where_untiled(v: &Value, c: &Shape) -> Shape {
    match (v, c) {
        (Value::Array(b), Shape::Array(a)) => {
            let (Some(want), Some(have)) = (a.layout.as_ref(), b.shape().layout.as_ref()) else {
                return c.clone();
            };
            let mut untiled = have.clone();
            untiled.tiles.clear();
            if want.tiles.is_empty() && !have.tiles.is_empty() && untiled == *want {
                Shape::Array(ArrayShape {
                    layout: Some(have.clone()),
                    ..a.clone()
                })
            } else {
                c.clone()
            }
        }
        (Value::Tuple(vs), Shape::Tuple(cs)) if vs.len() == cs.len() => Shape::Tuple(
            vs.iter()
                .zip(cs)
                .map(|(v, c)| order_only_where_untiled(v, c))
                .collect(),
        ),
        _ => c.clone(),
    }
}

/// Splits `lapack_sgetrf_ffi` into the routine and its element type.
fn lapack_target(target: &str) -> Option<(Lapack, char)> {
    let rest = target.strip_prefix("lapack_")?;
    let rest = rest.strip_suffix("_ffi").unwrap_or(rest);
    let mut chars = rest.chars();
    let ty = chars.next()?;
    let routine = match chars.as_str() {
        "potrf" => Lapack::Potrf,
        "getrf" => Lapack::Getrf,
        "trsm" => Lapack::Trsm,
        "syevd" => Lapack::Syevd,
        _ => return None,
    };
    Some((routine, ty))
}

/// A one-byte option of a typed-FFI `backend_config={uplo = 76 : ui8}`,
/// as the ASCII letter LAPACK takes (`L`, `U`, `N`, `T`, ...).
fn backend_letter(inst: &Instruction, name: &str) -> Option<char> {
    let text = match inst.attrs.get(KnownAttr::BackendConfig)? {
        AttrValue::Raw(t) | AttrValue::String(t) => t,
        _ => return None,
    };
    let body = text.trim().trim_start_matches('{').trim_end_matches('}');
    body.split(',').find_map(|item| {
        let (k, v) = item.split_once('=')?;
        if k.trim() != name {
            return None;
        }
        let num = v.split(':').next()?.trim();
        num.parse::<u8>().ok().map(char::from)
    })
}

/// The option, or its default, refusing letters LAPACK does not take.
fn letter(inst: &Instruction, name: &str, default: char, allowed: &str) -> Result<char, EvalError> {
    let c = backend_letter(inst, name).unwrap_or(default);
    if allowed.contains(c) {
        Ok(c)
    } else {
        Err(EvalError::msg(format!(
            "backend_config {name} = '{c}' is not one of {allowed}"
        )))
    }
}

/// A batch of square or rectangular matrices read as `f64`, row-major per
/// matrix, with the element class to round results back to.
struct Matrices {
    data: Vec<f64>,
    batch: usize,
    rows: usize,
    cols: usize,
    cls: Class,
}

fn matrices(b: &Buffer) -> Result<Matrices, EvalError> {
    let dims = &b.shape().dims;
    if dims.len() < 2 {
        return Err(EvalError::msg(format!(
            "a LAPACK operand must be a matrix, not {}",
            b.shape()
        )));
    }
    let cls = class_of(b.element_type())?;
    if !matches!(cls, Class::Float(FloatFormat::F32 | FloatFormat::F64)) {
        return Err(EvalError::unsupported(format!(
            "LAPACK calls on {} elements",
            b.element_type()
        )));
    }
    let rows = dims[dims.len() - 2] as usize;
    let cols = dims[dims.len() - 1] as usize;
    let batch = element_count(&dims[..dims.len() - 2])? as usize;
    let data = b
        .logical_bits()?
        .iter()
        .map(|&x| match element::decode(cls, x) {
            Num::F(v) => v,
            _ => f64::NAN,
        })
        .collect();
    Ok(Matrices {
        data,
        batch,
        rows,
        cols,
        cls,
    })
}

impl Matrices {
    fn encode(&self) -> Vec<u64> {
        self.data
            .iter()
            .map(|&v| element::encode(self.cls, Num::F(v)))
            .collect()
    }
}

impl Interp<'_> {
    /// Operand `i` as the callee reads it: under its constrained layout
    /// when the call states `operand_layout_constraints`. A constraint that
    /// names no tiles fixes only the order (`docs/tpu.md`: a tiled target
    /// adds its tiles at device boundaries), so an operand in that order
    /// with tiles is read as it is.
    fn callee_operand(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        i: usize,
    ) -> Result<Value, EvalError> {
        let v = ops
            .get(i)
            .ok_or_else(|| EvalError::msg(format!("missing operand {i}")))?;
        match inst.attrs.get(KnownAttr::OperandLayoutConstraints) {
            Some(AttrValue::Shapes(shapes)) => {
                let s = shapes.get(i).ok_or_else(|| {
                    EvalError::msg(format!(
                        "operand_layout_constraints has no shape for operand {i}"
                    ))
                })?;
                let declared = order_only_where_untiled(v, s);
                self.adopt(v, &declared, false, &inst.name)
            }
            _ => Ok((*v).clone()),
        }
    }

    /// Evaluates a `custom-call`.
    pub(crate) fn custom_call(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let target = inst.attrs.string(KnownAttr::CustomCallTarget).unwrap_or("");
        let mut read = Vec::with_capacity(ops.len());
        for i in 0..ops.len() {
            read.push(self.callee_operand(inst, ops, i)?);
        }
        let ops: Vec<&Value> = read.iter().collect();
        if target == "LayoutConstraint" {
            arity(&ops, 1)?;
            let b = array(&ops, 0)?;
            let (shape, _) = self.out_array(inst)?;
            if b.shape().element_type != shape.element_type || b.shape().dims != shape.dims {
                return Err(EvalError::msg("LayoutConstraint changes the logical shape"));
            }
            return self.finish(shape, b.logical_bits()?.into_owned());
        }
        if target == "TopK" {
            return self.top_k(inst, &ops);
        }
        if let Some((routine, ty)) = lapack_target(target)
            && matches!(ty, 's' | 'd')
        {
            return self.lapack(inst, &ops, routine);
        }
        self.opaque_call(inst, &ops, target)
    }

    /// An opaque library call: every result element is a hash of the
    /// target, the result leaf, the element's logical index and every
    /// operand element (logically, in row-major order), drawn like a random
    /// argument of its type. The same logical operands always give the same
    /// results, whatever their layouts; any changed operand element changes
    /// all of them.
    fn opaque_call(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        target: &str,
    ) -> Result<Value, EvalError> {
        let mut digest = fold(
            0x243F_6A88_85A3_08D3,
            target.as_bytes().iter().map(|&b| u64::from(b)),
        );
        let mut leaves = Vec::new();
        for v in ops {
            collect_leaves(v, &mut leaves);
        }
        for b in leaves {
            self.charge(b.element_count())?;
            digest = fold(
                digest,
                [b.element_type() as u64, b.shape().dims.len() as u64],
            );
            digest = fold(digest, b.shape().dims.iter().map(|&d| d as u64));
            digest = fold(digest, b.logical_bits()?.iter().copied());
        }
        self.opaque_targets.insert(target.to_string());
        let mut leaf = 0u64;
        self.opaque_value(&inst.shape, digest, &mut leaf)
    }

    fn opaque_value(
        &mut self,
        shape: &Shape,
        digest: u64,
        leaf: &mut u64,
    ) -> Result<Value, EvalError> {
        match shape {
            Shape::Array(a) => {
                let cls = element::class(a.element_type).map_err(EvalError::unsupported)?;
                let n = self.reserve(a)?;
                *leaf += 1;
                let mut rng = SplitMix64::new(digest ^ leaf.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let data = (0..n)
                    .map(|_| crate::check::random_element(&mut rng, cls))
                    .collect();
                self.finish(a, data)
            }
            Shape::Tuple(es) => {
                let mut out = Vec::with_capacity(es.len());
                for e in es {
                    out.push(self.opaque_value(e, digest, leaf)?);
                }
                Ok(Value::Tuple(out))
            }
            Shape::Token => Ok(Value::Token),
            other => Err(EvalError::unsupported(format!(
                "custom-call results of shape {other}"
            ))),
        }
    }

    /// `TopK`: the first `k` elements along the minor dimension in the
    /// order of the comparator (`called_computations`, taking value and
    /// index pairs like a two-operand `sort`), stable, with their indices;
    /// without a comparator, the largest first in total order.
    fn top_k(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let comparator = match inst.attrs.get(KnownAttr::CalledComputations) {
            Some(AttrValue::Computations(c)) => c.first().copied(),
            _ => None,
        };
        self.select_top(inst, ops, comparator, true)
    }

    /// The `topk` opcode: `k=` elements along the minor dimension, largest
    /// (or with `largest=false` smallest) first in total order, stable.
    pub(crate) fn topk_op(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let largest = !matches!(
            inst.attrs.get(KnownAttr::Largest),
            Some(AttrValue::Bool(false))
        );
        self.select_top(inst, ops, None, largest)
    }

    fn select_top(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        comparator: Option<hlo::CompId>,
        largest: bool,
    ) -> Result<Value, EvalError> {
        arity(ops, 1)?;
        let x = array(ops, 0)?;
        let (vs, is) = match &inst.shape {
            Shape::Tuple(es) if es.len() == 2 => match (&es[0], &es[1]) {
                (Shape::Array(v), Shape::Array(i)) => (v, i),
                _ => {
                    return Err(EvalError::msg(
                        "top-k must produce (values, indices) arrays",
                    ));
                }
            },
            other => {
                return Err(EvalError::msg(format!(
                    "top-k must produce (values, indices), not {other}"
                )));
            }
        };
        let dims = &x.shape().dims;
        let rank = dims.len();
        if rank == 0
            || vs.dims.len() != rank
            || is.dims != vs.dims
            || vs.dims[..rank - 1] != dims[..rank - 1]
        {
            return Err(EvalError::msg(format!(
                "top-k of {} cannot give {} and {}",
                x.shape(),
                vs,
                is
            )));
        }
        if vs.element_type != x.element_type() || !is.element_type.is_integer() {
            return Err(EvalError::msg(format!(
                "top-k of {} cannot give {} and {}",
                x.shape(),
                vs,
                is
            )));
        }
        let n = dims[rank - 1] as usize;
        let k = vs.dims[rank - 1] as usize;
        if k > n {
            return Err(EvalError::msg(format!("top-k takes {k} of {n} elements")));
        }
        if let Some(kattr) = inst.attrs.int(KnownAttr::K)
            && kattr as usize != k
        {
            return Err(EvalError::msg(format!(
                "k={kattr} but the result holds {k} elements"
            )));
        }
        let ty = x.element_type();
        let cls = class_of(ty)?;
        let icls = class_of(is.element_type)?;
        let callee = match comparator {
            Some(c) => {
                check_signature(
                    self,
                    c,
                    &[ty, ty, is.element_type, is.element_type],
                    &[PrimitiveType::Pred],
                )?;
                Some(self.callee(c)?)
            }
            None => None,
        };
        self.reserve(vs)?;
        self.reserve(is)?;
        let data: Cow<'_, [u64]> = x.logical_bits()?;
        let rows = data.len().checked_div(n).unwrap_or(0);
        let mut values = Vec::with_capacity(rows * k);
        let mut indices = Vec::with_capacity(rows * k);
        let dir = if largest {
            Direction::Gt
        } else {
            Direction::Lt
        };
        let mut args = Vec::with_capacity(4);
        let mut res = Vec::with_capacity(1);
        for r in 0..rows {
            let row = &data[r * n..(r + 1) * n];
            let index = |i: usize| element::encode(icls, Num::S(i as i64));
            let perm = merge_sort(n, &mut |i, j| match &callee {
                Some(c) => {
                    args.clear();
                    args.extend([row[i], row[j], index(i), index(j)]);
                    res.clear();
                    self.apply(c, &args, &mut res)?;
                    Ok(res.first().copied().unwrap_or(0) & 1 != 0)
                }
                None => {
                    element::compare(dir, true, cls, ty, row[i], row[j]).map_err(EvalError::msg)
                }
            })?;
            for &p in &perm[..k] {
                values.push(row[p]);
                indices.push(index(p));
            }
        }
        let v = self.finish(vs, values)?;
        let i = self.finish(is, indices)?;
        Ok(Value::Tuple(vec![v, i]))
    }

    /// JAX's LAPACK calls, on logical matrices (the minor two dimensions;
    /// any others are batch dimensions).
    fn lapack(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        routine: Lapack,
    ) -> Result<Value, EvalError> {
        let leaves = match &inst.shape {
            Shape::Tuple(es) => es.iter().map(|e| e.as_array()).collect::<Option<Vec<_>>>(),
            Shape::Array(a) => Some(vec![a]),
            _ => None,
        }
        .ok_or_else(|| EvalError::msg(format!("{routine:?} must produce arrays")))?;
        for s in &leaves {
            self.reserve(s)?;
        }
        let expect = |n: usize| {
            EvalError::ensure(leaves.len() == n, || {
                format!(
                    "{routine:?} produces {n} results, the shape has {}",
                    leaves.len()
                )
            })
        };
        let m = matrices(array(ops, 0)?)?;
        let (r, c, batch) = (m.rows, m.cols, m.batch);
        self.charge((batch * r * r * c.max(1)) as u64)?;
        let info_of = |cls: &ArrayShape, info: Vec<i64>| -> Result<Vec<u64>, EvalError> {
            let icls = class_of(cls.element_type)?;
            Ok(info
                .into_iter()
                .map(|v| element::encode(icls, Num::S(v)))
                .collect())
        };
        match routine {
            Lapack::Potrf => {
                arity(ops, 1)?;
                expect(2)?;
                let lower = letter(inst, "uplo", 'L', "LU")? == 'L';
                let mut m = m;
                let mut info = Vec::with_capacity(batch);
                for b in 0..batch {
                    info.push(potrf(&mut m.data[b * r * c..(b + 1) * r * c], r, lower));
                }
                let out = self.finish(leaves[0], m.encode())?;
                let info = self.finish(leaves[1], info_of(leaves[1], info)?)?;
                Ok(Value::Tuple(vec![out, info]))
            }
            Lapack::Getrf => {
                arity(ops, 1)?;
                expect(3)?;
                let mut m = m;
                let (mut pivots, mut info) = (Vec::new(), Vec::with_capacity(batch));
                for b in 0..batch {
                    let (p, i) = getrf(&mut m.data[b * r * c..(b + 1) * r * c], r, c);
                    pivots.extend(p);
                    info.push(i);
                }
                let out = self.finish(leaves[0], m.encode())?;
                let piv = self.finish(leaves[1], info_of(leaves[1], pivots)?)?;
                let info = self.finish(leaves[2], info_of(leaves[2], info)?)?;
                Ok(Value::Tuple(vec![out, piv, info]))
            }
            Lapack::Trsm => {
                arity(ops, 2)?;
                expect(1)?;
                let mut rhs = matrices(array(ops, 1)?)?;
                if rhs.batch != batch || r != c {
                    return Err(EvalError::msg(
                        "trsm needs square matrices with the right-hand sides' batch",
                    ));
                }
                let opts = Trsm {
                    left: letter(inst, "side", 'L', "LR")? == 'L',
                    lower: letter(inst, "uplo", 'L', "LU")? == 'L',
                    transpose: letter(inst, "trans_x", 'N', "NTC")? != 'N',
                    unit: letter(inst, "diag", 'N', "NU")? == 'U',
                };
                let need = if opts.left { rhs.rows } else { rhs.cols };
                if need != r {
                    return Err(EvalError::msg(format!(
                        "trsm of a {r}x{r} matrix with {}x{} right-hand sides",
                        rhs.rows, rhs.cols
                    )));
                }
                let (br, bc) = (rhs.rows, rhs.cols);
                for b in 0..batch {
                    trsm(
                        &m.data[b * r * r..(b + 1) * r * r],
                        &mut rhs.data[b * br * bc..(b + 1) * br * bc],
                        r,
                        br,
                        bc,
                        opts,
                    );
                }
                self.finish(leaves[0], rhs.encode())
            }
            Lapack::Syevd => {
                arity(ops, 1)?;
                expect(3)?;
                if r != c {
                    return Err(EvalError::msg("syevd needs square matrices"));
                }
                let lower = letter(inst, "uplo", 'L', "LU")? == 'L';
                let vectors = letter(inst, "mode", 'V', "VN")? == 'V';
                let mut m = m;
                let mut w = Vec::with_capacity(batch * r);
                for b in 0..batch {
                    let a = &mut m.data[b * r * r..(b + 1) * r * r];
                    let (vals, vecs) = syevd(a, r, lower);
                    w.extend(vals);
                    if vectors {
                        a.copy_from_slice(&vecs);
                    }
                }
                let wcls = class_of(leaves[1].element_type)?;
                let out = self.finish(leaves[0], m.encode())?;
                let w = self.finish(
                    leaves[1],
                    w.into_iter()
                        .map(|v| element::encode(wcls, Num::F(v)))
                        .collect(),
                )?;
                let info = self.finish(leaves[2], info_of(leaves[2], vec![0; batch])?)?;
                Ok(Value::Tuple(vec![out, w, info]))
            }
        }
    }
}

/// Folds words into a 64-bit digest (splitmix-style mixing per word).
fn fold(mut h: u64, words: impl IntoIterator<Item = u64>) -> u64 {
    for w in words {
        h = (h ^ w).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 31;
    }
    h
}

fn collect_leaves<'v>(v: &'v Value, out: &mut Vec<&'v Buffer>) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(b) => out.push(b),
            Value::Tuple(es) => stack.extend(es.iter().rev()),
            Value::Token => {}
        }
    }
}

/// Cholesky in place (LAPACK `potrf`): the chosen triangle becomes the
/// factor, the other is left as it was. Returns LAPACK's `info`: 0, or the
/// 1-based order of the first minor that is not positive definite (the
/// factorization stops there).
fn potrf(a: &mut [f64], n: usize, lower: bool) -> i64 {
    // Work on the lower triangle; for `U` the transpose of the upper one.
    let at = |i: usize, j: usize| if lower { i * n + j } else { j * n + i };
    for j in 0..n {
        let mut d = a[at(j, j)];
        for k in 0..j {
            d -= a[at(j, k)] * a[at(j, k)];
        }
        if d.is_nan() || d <= 0.0 {
            a[at(j, j)] = d;
            return j as i64 + 1;
        }
        let d = d.sqrt();
        a[at(j, j)] = d;
        for i in j + 1..n {
            let mut s = a[at(i, j)];
            for k in 0..j {
                s -= a[at(i, k)] * a[at(j, k)];
            }
            a[at(i, j)] = s / d;
        }
    }
    0
}

/// LU with partial pivoting in place (LAPACK `getrf`): unit lower `L` below
/// the diagonal, `U` on and above. Returns the 1-based pivot rows and
/// `info` (0, or the 1-based index of the first zero pivot).
fn getrf(a: &mut [f64], m: usize, n: usize) -> (Vec<i64>, i64) {
    let mut pivots = Vec::with_capacity(m.min(n));
    let mut info = 0;
    for j in 0..m.min(n) {
        let mut p = j;
        for i in j + 1..m {
            if a[i * n + j].abs() > a[p * n + j].abs() {
                p = i;
            }
        }
        pivots.push(p as i64 + 1);
        if a[p * n + j] != 0.0 {
            if p != j {
                for k in 0..n {
                    a.swap(p * n + k, j * n + k);
                }
            }
            let d = a[j * n + j];
            for i in j + 1..m {
                a[i * n + j] /= d;
            }
        } else if info == 0 {
            info = j as i64 + 1;
        }
        for i in j + 1..m {
            let l = a[i * n + j];
            for k in j + 1..n {
                a[i * n + k] -= l * a[j * n + k];
            }
        }
    }
    (pivots, info)
}

/// The options of a triangular solve.
#[derive(Clone, Copy, Debug)]
struct Trsm {
    left: bool,
    lower: bool,
    transpose: bool,
    unit: bool,
}

/// Solves `op(A) X = B` (left) or `X op(A) = B` (right) in place of `B`
/// (`br` x `bc`, row-major), reading only `A`'s `uplo` triangle.
fn trsm(a: &[f64], b: &mut [f64], n: usize, br: usize, bc: usize, o: Trsm) {
    // t(i, j): element (i, j) of op(A), zero outside the triangle.
    let t = |i: usize, j: usize| -> f64 {
        let (r, c) = if o.transpose { (j, i) } else { (i, j) };
        if r == c {
            return if o.unit { 1.0 } else { a[r * n + c] };
        }
        if (r > c) == o.lower {
            a[r * n + c]
        } else {
            0.0
        }
    };
    // op(A) is lower triangular when exactly one of `lower` and
    // `transpose` holds the other way round.
    let op_lower = o.lower != o.transpose;
    if o.left {
        // Column by column: op(A) x = b.
        for col in 0..bc {
            let order: Box<dyn Iterator<Item = usize>> = if op_lower {
                Box::new(0..n)
            } else {
                Box::new((0..n).rev())
            };
            for i in order {
                let mut s = b[i * bc + col];
                for k in 0..n {
                    if k != i && ((op_lower && k < i) || (!op_lower && k > i)) {
                        s -= t(i, k) * b[k * bc + col];
                    }
                }
                b[i * bc + col] = s / t(i, i);
            }
        }
    } else {
        // Row by row: x op(A) = b, i.e. op(A)^T x^T = b^T.
        for row in 0..br {
            let order: Box<dyn Iterator<Item = usize>> = if op_lower {
                Box::new((0..n).rev())
            } else {
                Box::new(0..n)
            };
            for j in order {
                let mut s = b[row * bc + j];
                for k in 0..n {
                    if k != j && ((op_lower && k > j) || (!op_lower && k < j)) {
                        s -= b[row * bc + k] * t(k, j);
                    }
                }
                b[row * bc + j] = s / t(j, j);
            }
        }
    }
}

/// Eigenvalues (ascending) and eigenvectors (columns, row-major `n` x `n`)
/// of the symmetric matrix given by `a`'s `uplo` triangle, by cyclic
/// Jacobi rotations. Each eigenvector is signed so that its largest
/// component (the first of equal ones) is positive: LAPACK leaves the sign
/// open, and a fixed one keeps results a function of the input.
fn syevd(a: &[f64], n: usize, lower: bool) -> (Vec<f64>, Vec<f64>) {
    let mut s = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let (r, c) = if (i >= j) == lower { (i, j) } else { (j, i) };
            s[i * n + j] = a[r * n + c];
        }
    }
    let mut v = vec![0.0; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    for _sweep in 0..64 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| s[i * n + j] * s[i * n + j])
            .sum();
        if off.is_nan() || off <= 1e-300 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                let theta = (s[q * n + q] - s[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let sn = t * c;
                for k in 0..n {
                    let (skp, skq) = (s[k * n + p], s[k * n + q]);
                    s[k * n + p] = c * skp - sn * skq;
                    s[k * n + q] = sn * skp + c * skq;
                }
                for k in 0..n {
                    let (spk, sqk) = (s[p * n + k], s[q * n + k]);
                    s[p * n + k] = c * spk - sn * sqk;
                    s[q * n + k] = sn * spk + c * sqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - sn * vkq;
                    v[k * n + q] = sn * vkp + c * vkq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&x, &y| s[x * n + x].total_cmp(&s[y * n + y]));
    let values = order.iter().map(|&i| s[i * n + i]).collect();
    let mut vectors = vec![0.0; n * n];
    for (col, &src) in order.iter().enumerate() {
        let mut big = 0;
        for k in 0..n {
            if v[k * n + src].abs() > v[big * n + src].abs() {
                big = k;
            }
        }
        let sign = if v[big * n + src] < 0.0 { -1.0 } else { 1.0 };
        for k in 0..n {
            vectors[k * n + col] = sign * v[k * n + src];
        }
    }
    (values, vectors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
        let mut c = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                c[i * n + j] = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum();
            }
        }
        c
    }

    fn spd(n: usize) -> Vec<f64> {
        let m: Vec<f64> = (0..n * n)
            .map(|i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0)
            .collect();
        let mut mt = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                mt[i * n + j] = m[j * n + i];
            }
        }
        let mut a = matmul(&m, &mt, n);
        for i in 0..n {
            a[i * n + i] += n as f64;
        }
        a
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() < 1e-9 * (1.0 + x.abs()))
    }

    #[test]
    fn potrf_factors_both_triangles() {
        let n = 5;
        let a = spd(n);
        for lower in [true, false] {
            let mut f = a.clone();
            assert_eq!(potrf(&mut f, n, lower), 0);
            let mut l = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..=i {
                    l[i * n + j] = if lower { f[i * n + j] } else { f[j * n + i] };
                }
            }
            let mut lt = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    lt[i * n + j] = l[j * n + i];
                }
            }
            assert!(close(&matmul(&l, &lt, n), &a));
        }
        let mut bad = vec![1.0, 2.0, 2.0, 1.0];
        assert_eq!(potrf(&mut bad, 2, true), 2);
    }

    #[test]
    fn getrf_reconstructs_the_permuted_matrix() {
        let n = 4;
        let a: Vec<f64> = (0..n * n).map(|i| ((i * 5 + 1) % 7) as f64 - 3.0).collect();
        let mut f = a.clone();
        let (piv, info) = getrf(&mut f, n, n);
        assert_eq!(info, 0);
        let mut l = vec![0.0; n * n];
        let mut u = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                if j < i {
                    l[i * n + j] = f[i * n + j];
                } else {
                    u[i * n + j] = f[i * n + j];
                }
            }
            l[i * n + i] = 1.0;
        }
        let mut pa = a.clone();
        for (j, &p) in piv.iter().enumerate() {
            let p = p as usize - 1;
            for k in 0..n {
                pa.swap(j * n + k, p * n + k);
            }
        }
        assert!(close(&matmul(&l, &u, n), &pa));
    }

    #[test]
    fn trsm_solves_every_variant() {
        let n = 4;
        let a: Vec<f64> = (0..n * n)
            .map(|i| {
                if i % (n + 1) == 0 {
                    3.0 + i as f64
                } else {
                    ((i * 3) % 5) as f64 - 2.0
                }
            })
            .collect();
        let x: Vec<f64> = (0..n * n).map(|i| (i % 6) as f64 - 2.5).collect();
        for bits in 0..16 {
            let o = Trsm {
                left: bits & 1 != 0,
                lower: bits & 2 != 0,
                transpose: bits & 4 != 0,
                unit: bits & 8 != 0,
            };
            // op(A) as a dense matrix.
            let mut t = vec![0.0; n * n];
            for i in 0..n {
                for j in 0..n {
                    let (r, c) = if o.transpose { (j, i) } else { (i, j) };
                    t[i * n + j] = if r == c {
                        if o.unit { 1.0 } else { a[r * n + c] }
                    } else if (r > c) == o.lower {
                        a[r * n + c]
                    } else {
                        0.0
                    };
                }
            }
            let mut b = if o.left {
                matmul(&t, &x, n)
            } else {
                matmul(&x, &t, n)
            };
            trsm(&a, &mut b, n, n, n, o);
            assert!(close(&b, &x), "{o:?}");
        }
    }

    #[test]
    fn syevd_diagonalizes() {
        let n = 5;
        let a = spd(n);
        let (w, v) = syevd(&a, n, true);
        assert!(w.windows(2).all(|p| p[0] <= p[1]));
        let av = matmul(&a, &v, n);
        for i in 0..n {
            for j in 0..n {
                assert!((av[i * n + j] - v[i * n + j] * w[j]).abs() < 1e-9);
            }
        }
        // The upper triangle alone gives the same answer.
        let mut upper_only = a.clone();
        for i in 0..n {
            for j in 0..i {
                upper_only[i * n + j] = f64::NAN;
            }
        }
        assert_eq!(syevd(&upper_only, n, false).0, w);
    }

    #[test]
    fn lapack_targets() {
        assert_eq!(lapack_target("lapack_strsm_ffi"), Some((Lapack::Trsm, 's')));
        assert_eq!(
            lapack_target("lapack_dsyevd_ffi"),
            Some((Lapack::Syevd, 'd'))
        );
        assert_eq!(lapack_target("lib"), None);
    }
}
