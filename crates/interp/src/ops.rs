//! Elementwise and data-movement instructions. Each reads its operands
//! logically (through their layouts) and produces logical row-major bits
//! that [`Interp::finish`] lays out per the result layout.

use hlo::{AttrValue, Instruction, KnownAttr};
use shape::{ArrayShape, PrimitiveType};

use crate::element::{self, Binary, Class, Num, Unary};
use crate::error::EvalError;
use crate::eval::{Interp, arity, array, dim_list, ints};
use crate::scalar;
use crate::value::{Buffer, Value, class_of, for_each_index, row_major_strides};

/// Fails unless `a` has the dimensions of `shape`.
pub(crate) fn same_dims(a: &Buffer, shape: &ArrayShape, what: &str) -> Result<(), EvalError> {
    EvalError::ensure(a.shape().dims == shape.dims, || {
        format!(
            "{what} has dimensions {:?} but the result has {:?}",
            &a.shape().dims[..],
            &shape.dims[..]
        )
    })
}

/// Fails unless `a` has element type `ty`.
pub(crate) fn same_type(a: &Buffer, ty: PrimitiveType, what: &str) -> Result<(), EvalError> {
    EvalError::ensure(a.element_type() == ty, || {
        format!(
            "{what} has element type {} but {ty} is required",
            a.element_type()
        )
    })
}

fn msg(e: String) -> EvalError {
    EvalError::msg(e)
}

/// Reads the start indices of `dynamic-slice` / `dynamic-update-slice`:
/// one scalar operand per dimension, or (old form) one rank-1 operand.
fn start_indices(ops: &[&Value], first: usize, rank: usize) -> Result<Vec<i64>, EvalError> {
    let rest = ops.len().saturating_sub(first);
    if rest == 1 && rank != 1 {
        let v = array(ops, first)?;
        if v.shape().rank() != 1 || v.shape().dims[0] != rank as i64 {
            return Err(EvalError::msg(format!(
                "the start index vector must have {rank} entries"
            )));
        }
        let cls = class_of(v.element_type())?;
        return v
            .logical_bits()?
            .iter()
            .map(|&b| scalar::index_value(cls, b))
            .collect();
    }
    if rest != rank {
        return Err(EvalError::msg(format!(
            "expected {rank} start indices, got {rest}"
        )));
    }
    (0..rank)
        .map(|i| {
            let v = array(ops, first + i)?;
            if v.shape().rank() != 0 {
                return Err(EvalError::msg("start indices must be scalars"));
            }
            scalar::index_value(class_of(v.element_type())?, v.logical_bits()?[0])
        })
        .collect()
}

impl Interp<'_> {
    pub(crate) fn unary(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        op: Unary,
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_dims(a, shape, "the operand")?;
        let (cin, cout) = (class_of(a.element_type())?, class_of(shape.element_type)?);
        let mut out = Vec::with_capacity(n);
        for &x in a.logical_bits()?.iter() {
            out.push(element::encode(
                cout,
                element::unary(op, cin, element::decode(cin, x)).map_err(msg)?,
            ));
        }
        self.finish(shape, out)
    }

    pub(crate) fn binary(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        op: Binary,
    ) -> Result<Value, EvalError> {
        let ([a, b], shape, n) = self.array_operands(inst, ops)?;
        same_dims(a, shape, "operand 0")?;
        same_dims(b, shape, "operand 1")?;
        same_type(b, a.element_type(), "operand 1")?;
        let (cin, cout) = (class_of(a.element_type())?, class_of(shape.element_type)?);
        let (x, y) = (a.logical_bits()?, b.logical_bits()?);
        let mut out = Vec::with_capacity(n);
        const F32: Class = Class::Float(element::FloatFormat::F32);
        match element::f32_binary(op) {
            Some(f) if cin == F32 && cout == F32 => {
                for (&p, &q) in x.iter().zip(y.iter()) {
                    out.push(u64::from(
                        f(f32::from_bits(p as u32), f32::from_bits(q as u32)).to_bits(),
                    ));
                }
            }
            _ => {
                for (&p, &q) in x.iter().zip(y.iter()) {
                    out.push(element::binary_bits(op, cin, cout, p, q).map_err(msg)?);
                }
            }
        }
        self.finish(shape, out)
    }

    pub(crate) fn compare(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a, b], shape, n) = self.array_operands(inst, ops)?;
        same_type_pred(shape)?;
        same_dims(a, shape, "operand 0")?;
        same_dims(b, shape, "operand 1")?;
        same_type(b, a.element_type(), "operand 1")?;
        let ty = a.element_type();
        let cls = class_of(ty)?;
        let (dir, total) = scalar::compare_attrs(inst, ty)?;
        let (x, y) = (a.logical_bits()?, b.logical_bits()?);
        let mut out = Vec::with_capacity(n);
        for (&p, &q) in x.iter().zip(y.iter()) {
            out.push(u64::from(
                element::compare(dir, total, cls, ty, p, q).map_err(msg)?,
            ));
        }
        self.finish(shape, out)
    }

    pub(crate) fn select(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([p, t, f], shape, n) = self.array_operands(inst, ops)?;
        same_type(p, PrimitiveType::Pred, "the predicate")?;
        same_type(t, shape.element_type, "on_true")?;
        same_type(f, shape.element_type, "on_false")?;
        same_dims(t, shape, "on_true")?;
        same_dims(f, shape, "on_false")?;
        let scalar_pred = p.shape().rank() == 0;
        if !scalar_pred {
            same_dims(p, shape, "the predicate")?;
        }
        let (pv, tv, fv) = (p.logical_bits()?, t.logical_bits()?, f.logical_bits()?);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let c = pv[if scalar_pred { 0 } else { i }] & 1 != 0;
            out.push(if c { tv[i] } else { fv[i] });
        }
        self.finish(shape, out)
    }

    pub(crate) fn clamp(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let ([lo, x, hi], shape, n) = self.array_operands(inst, ops)?;
        same_type(x, shape.element_type, "the operand")?;
        same_dims(x, shape, "the operand")?;
        for (b, what) in [(lo, "min"), (hi, "max")] {
            same_type(b, shape.element_type, what)?;
            if b.shape().rank() != 0 {
                same_dims(b, shape, what)?;
            }
        }
        let cls = class_of(shape.element_type)?;
        let (lv, xv, hv) = (lo.logical_bits()?, x.logical_bits()?, hi.logical_bits()?);
        let pick = |v: &[u64], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(scalar::clamp(cls, pick(&lv, i), xv[i], pick(&hv, i))?);
        }
        self.finish(shape, out)
    }

    pub(crate) fn convert(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_dims(a, shape, "the operand")?;
        let (cin, cout) = (class_of(a.element_type())?, class_of(shape.element_type)?);
        let mut out = Vec::with_capacity(n);
        for &x in a.logical_bits()?.iter() {
            out.push(element::convert(cout, element::decode(cin, x)));
        }
        self.finish(shape, out)
    }

    pub(crate) fn bitcast_convert(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        let (from, to) = (a.element_type(), shape.element_type);
        let (wi, wo) = (element::bit_width(from), element::bit_width(to));
        let data = a.logical_bits()?;
        let raw = |b: u64| element::raw_bits(from, b);
        let mut out = Vec::with_capacity(n);
        if wi == wo {
            same_dims(a, shape, "the operand")?;
            for &x in data.iter() {
                out.push(element::from_raw(to, raw(x)).map_err(msg)?);
            }
        } else if wi > wo {
            // Each element splits into wi/wo elements along a new minor
            // dimension, least significant bits first.
            let ratio = i64::from(wi / wo);
            let ok = wi % wo == 0
                && shape.rank() == a.shape().rank() + 1
                && shape.dims[..a.shape().rank()] == a.shape().dims[..]
                && shape.dims[a.shape().rank()] == ratio;
            if !ok {
                return Err(EvalError::msg(format!(
                    "bitcast-convert from {} to {shape}: shapes do not match",
                    a.shape()
                )));
            }
            for &x in data.iter() {
                for k in 0..ratio {
                    out.push(element::from_raw(to, raw(x) >> (k as u32 * wo)).map_err(msg)?);
                }
            }
        } else {
            let ratio = (wo / wi) as usize;
            let r = a.shape().rank();
            let ok = wo % wi == 0
                && r == shape.rank() + 1
                && a.shape().dims[..r - 1] == shape.dims[..]
                && a.shape().dims[r - 1] == ratio as i64;
            if !ok {
                return Err(EvalError::msg(format!(
                    "bitcast-convert from {} to {shape}: shapes do not match",
                    a.shape()
                )));
            }
            for chunk in data.chunks(ratio) {
                let mut v = 0u64;
                for (k, &x) in chunk.iter().enumerate() {
                    v |= raw(x) << (k as u32 * wi);
                }
                out.push(element::from_raw(to, v).map_err(msg)?);
            }
        }
        self.finish(shape, out)
    }

    pub(crate) fn reduce_precision(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_dims(a, shape, "the operand")?;
        same_type(a, shape.element_type, "the operand")?;
        let cls = class_of(shape.element_type)?;
        let Class::Float(_) = cls else {
            return Err(EvalError::msg("reduce-precision needs a float operand"));
        };
        let eb = inst
            .attrs
            .int(KnownAttr::ExponentBits)
            .ok_or_else(|| EvalError::msg("missing exponent_bits="))?;
        let mb = inst
            .attrs
            .int(KnownAttr::MantissaBits)
            .ok_or_else(|| EvalError::msg("missing mantissa_bits="))?;
        if !(1..=11).contains(&eb) || !(0..=52).contains(&mb) {
            return Err(EvalError::unsupported(format!(
                "reduce-precision to e{eb}m{mb}"
            )));
        }
        let bias = (1i32 << (eb - 1)) - 1;
        let max = (2.0 - 2f64.powi(-(mb as i32))) * 2f64.powi(bias);
        let min_normal = 2f64.powi(1 - bias);
        let mut out = Vec::with_capacity(n);
        for &x in a.logical_bits()?.iter() {
            let Num::F(v) = element::decode(cls, x) else {
                return Err(EvalError::msg("internal: expected a float"));
            };
            let r = if v.is_nan() || v.is_infinite() || v == 0.0 {
                v
            } else {
                // Round the significand to `mb` bits (ties to even).
                let e = ((v.abs().to_bits() >> 52) & 0x7ff) as i32 - 1023;
                let q = 2f64.powi(e - mb as i32);
                let r = (v / q).round_ties_even() * q;
                if r.abs() > max {
                    f64::INFINITY.copysign(v)
                } else if r.abs() < min_normal {
                    0f64.copysign(v)
                } else {
                    r
                }
            };
            out.push(element::encode(cls, Num::F(r)));
        }
        self.finish(shape, out)
    }

    pub(crate) fn broadcast(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_type(a, shape.element_type, "the operand")?;
        let dims = dim_list(inst, KnownAttr::Dimensions, shape.rank())?;
        let ad = &a.shape().dims;
        if dims.len() != ad.len() || dims.iter().zip(ad).any(|(&d, &s)| shape.dims[d] != s) {
            return Err(EvalError::msg(format!(
                "broadcast of {} to {shape} with dimensions={dims:?} does not fit",
                a.shape()
            )));
        }
        let strides = row_major_strides(ad);
        let data = a.logical_bits()?;
        let mut out = Vec::with_capacity(n);
        for_each_index(&shape.dims, |idx| {
            let off: i64 = dims.iter().zip(&strides).map(|(&d, s)| idx[d] * s).sum();
            out.push(data[off as usize]);
        });
        self.finish(shape, out)
    }

    pub(crate) fn reshape(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_type(a, shape.element_type, "the operand")?;
        if a.element_count() != n as u64 {
            return Err(EvalError::msg(format!(
                "reshape of {} to {shape} changes the element count",
                a.shape()
            )));
        }
        let (data, poison) = a.logical_bits_poison()?;
        self.finish_poison(shape, data.into_owned(), poison)
    }

    pub(crate) fn transpose(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_type(a, shape.element_type, "the operand")?;
        let rank = a.shape().rank();
        let perm = dim_list(inst, KnownAttr::Dimensions, rank)?;
        let mut seen = vec![false; rank];
        for &p in &perm {
            seen[p] = true;
        }
        let ok = perm.len() == rank
            && shape.rank() == rank
            && seen.iter().all(|&s| s)
            && perm
                .iter()
                .enumerate()
                .all(|(i, &p)| shape.dims[i] == a.shape().dims[p]);
        if !ok {
            return Err(EvalError::msg(format!(
                "transpose of {} to {shape} with dimensions={perm:?}",
                a.shape()
            )));
        }
        let strides = row_major_strides(&a.shape().dims);
        let (data, poison) = a.logical_bits_poison()?;
        let mut out = Vec::with_capacity(n);
        let mut out_poison = poison.as_ref().map(|_| Vec::with_capacity(n));
        for_each_index(&shape.dims, |idx| {
            let off: i64 = perm
                .iter()
                .enumerate()
                .map(|(i, &p)| idx[i] * strides[p])
                .sum();
            out.push(data[off as usize]);
            carry(&poison, &mut out_poison, off as usize);
        });
        self.finish_poison(shape, out, out_poison)
    }

    pub(crate) fn slice(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_type(a, shape.element_type, "the operand")?;
        let Some(AttrValue::Slice(sl)) = inst.attrs.get(KnownAttr::Slice) else {
            return Err(EvalError::msg("missing slice= attribute"));
        };
        let ad = &a.shape().dims;
        let ok = sl.len() == ad.len()
            && shape.rank() == ad.len()
            && sl.iter().zip(ad).zip(&shape.dims).all(|((s, &d), &o)| {
                s.stride > 0
                    && 0 <= s.start
                    && s.start <= s.limit
                    && s.limit <= d
                    && o == if s.limit == s.start {
                        0
                    } else {
                        (s.limit - s.start - 1) / s.stride + 1
                    }
            });
        if !ok {
            return Err(EvalError::msg(format!(
                "slice={sl:?} of {} does not give {shape}",
                a.shape()
            )));
        }
        let strides = row_major_strides(ad);
        let (data, poison) = a.logical_bits_poison()?;
        let mut out = Vec::with_capacity(n);
        let mut out_poison = poison.as_ref().map(|_| Vec::with_capacity(n));
        for_each_index(&shape.dims, |idx| {
            let off: i64 = idx
                .iter()
                .zip(sl)
                .zip(&strides)
                .map(|((&i, s), st)| (s.start + i * s.stride) * st)
                .sum();
            out.push(data[off as usize]);
            carry(&poison, &mut out_poison, off as usize);
        });
        self.finish_poison(shape, out, out_poison)
    }

    pub(crate) fn dynamic_slice(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let a = array(ops, 0)?;
        let (shape, n) = self.out_array(inst)?;
        same_type(a, shape.element_type, "the operand")?;
        let rank = a.shape().rank();
        let sizes = ints(inst, KnownAttr::DynamicSliceSizes)?;
        let ad = &a.shape().dims;
        if sizes.len() != rank
            || shape.dims[..] != *sizes
            || sizes.iter().zip(ad).any(|(&s, &d)| s < 0 || s > d)
        {
            return Err(EvalError::msg(format!(
                "dynamic_slice_sizes={sizes:?} do not fit {} -> {shape}",
                a.shape()
            )));
        }
        let starts: Vec<i64> = start_indices(ops, 1, rank)?
            .into_iter()
            .zip(ad.iter().zip(sizes))
            .map(|(s, (&d, &z))| s.clamp(0, d - z))
            .collect();
        let strides = row_major_strides(ad);
        let data = a.logical_bits()?;
        let mut out = Vec::with_capacity(n);
        for_each_index(&shape.dims, |idx| {
            let off: i64 = idx
                .iter()
                .zip(&starts)
                .zip(&strides)
                .map(|((&i, &s), st)| (s + i) * st)
                .sum();
            out.push(data[off as usize]);
        });
        self.finish(shape, out)
    }

    pub(crate) fn dynamic_update_slice(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let (a, u) = (array(ops, 0)?, array(ops, 1)?);
        let (shape, _) = self.out_array(inst)?;
        same_dims(a, shape, "the operand")?;
        same_type(a, shape.element_type, "the operand")?;
        same_type(u, shape.element_type, "the update")?;
        let rank = a.shape().rank();
        let (ad, ud) = (&a.shape().dims, &u.shape().dims);
        if ud.len() != rank || ud.iter().zip(ad).any(|(&x, &d)| x > d) {
            return Err(EvalError::msg(format!(
                "the update {} does not fit in {}",
                u.shape(),
                a.shape()
            )));
        }
        self.charge(u.element_count())?;
        let starts: Vec<i64> = start_indices(ops, 2, rank)?
            .into_iter()
            .zip(ad.iter().zip(ud))
            .map(|(s, (&d, &z))| s.clamp(0, d - z))
            .collect();
        let strides = row_major_strides(ad);
        let mut out = a.logical_bits()?.into_owned();
        let upd = u.logical_bits()?;
        let mut k = 0;
        for_each_index(ud, |idx| {
            let off: i64 = idx
                .iter()
                .zip(&starts)
                .zip(&strides)
                .map(|((&i, &s), st)| (s + i) * st)
                .sum();
            out[off as usize] = upd[k];
            k += 1;
        });
        self.finish(shape, out)
    }

    pub(crate) fn pad(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let ([a, pv], shape, n) = self.array_operands(inst, ops)?;
        same_type(a, shape.element_type, "the operand")?;
        same_type(pv, shape.element_type, "the padding value")?;
        if pv.shape().rank() != 0 {
            return Err(EvalError::msg("the padding value must be a scalar"));
        }
        let Some(AttrValue::Padding(pads)) = inst.attrs.get(KnownAttr::Padding) else {
            return Err(EvalError::msg("missing padding= attribute"));
        };
        let ad = &a.shape().dims;
        let ok = pads.len() == ad.len()
            && shape.rank() == ad.len()
            && pads.iter().zip(ad).zip(&shape.dims).all(|((p, &d), &o)| {
                p.interior >= 0
                    && (d - 1)
                        .max(0)
                        .checked_mul(p.interior)
                        .and_then(|x| x.checked_add(d))
                        .and_then(|x| x.checked_add(p.low))
                        .and_then(|x| x.checked_add(p.high))
                        == Some(o)
            });
        if !ok {
            return Err(EvalError::msg(format!(
                "padding={pads:?} of {} does not give {shape}",
                a.shape()
            )));
        }
        let fill = pv.logical_bits()?[0];
        let mut out = vec![fill; n];
        let ostrides = row_major_strides(&shape.dims);
        let (data, poison) = a.logical_bits_poison()?;
        let mut out_poison = poison.as_ref().map(|_| vec![false; n]);
        let mut k = 0;
        for_each_index(ad, |idx| {
            let mut off = 0i64;
            let mut inside = true;
            for (((&i, p), &o), st) in idx.iter().zip(pads).zip(&shape.dims).zip(&ostrides) {
                let pos = p
                    .low
                    .saturating_add(i.saturating_mul(p.interior.saturating_add(1)));
                if pos < 0 || pos >= o {
                    inside = false;
                    break;
                }
                off += pos * st;
            }
            if inside {
                out[off as usize] = data[k];
                if let (Some(from), Some(to)) = (&poison, out_poison.as_mut()) {
                    to[off as usize] = from[k];
                }
            }
            k += 1;
        });
        self.finish_poison(shape, out, out_poison)
    }

    pub(crate) fn concatenate(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let (shape, n) = self.out_array(inst)?;
        let rank = shape.rank();
        let d = match dim_list(inst, KnownAttr::Dimensions, rank)?[..] {
            [d] => d,
            _ => return Err(EvalError::msg("concatenate needs exactly one dimension")),
        };
        if ops.is_empty() {
            return Err(EvalError::msg("concatenate without operands"));
        }
        let mut total = 0i64;
        for i in 0..ops.len() {
            let b = array(ops, i)?;
            same_type(b, shape.element_type, "an operand")?;
            let bd = &b.shape().dims;
            if bd.len() != rank || (0..rank).any(|k| k != d && bd[k] != shape.dims[k]) {
                return Err(EvalError::msg(format!(
                    "operand {} does not fit {shape}",
                    b.shape()
                )));
            }
            total += bd[d];
        }
        if total != shape.dims[d] {
            return Err(EvalError::msg(format!(
                "the operands add up to {total} along dimension {d}, not {}",
                shape.dims[d]
            )));
        }
        let ostrides = row_major_strides(&shape.dims);
        let mut out = vec![0u64; n];
        let mut offset = 0i64;
        for i in 0..ops.len() {
            let b = array(ops, i)?;
            let data = b.logical_bits()?;
            let mut k = 0;
            for_each_index(&b.shape().dims, |idx| {
                let off: i64 = idx
                    .iter()
                    .enumerate()
                    .map(|(j, &x)| (if j == d { x + offset } else { x }) * ostrides[j])
                    .sum();
                out[off as usize] = data[k];
                k += 1;
            });
            offset += b.shape().dims[d];
        }
        self.finish(shape, out)
    }

    pub(crate) fn reverse(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([a], shape, n) = self.array_operands(inst, ops)?;
        same_dims(a, shape, "the operand")?;
        same_type(a, shape.element_type, "the operand")?;
        let dims = dim_list(inst, KnownAttr::Dimensions, shape.rank())?;
        let mut flip = vec![false; shape.rank()];
        for d in dims {
            flip[d] = true;
        }
        let strides = row_major_strides(&shape.dims);
        let data = a.logical_bits()?;
        let mut out = Vec::with_capacity(n);
        for_each_index(&shape.dims, |idx| {
            let off: i64 = (0..idx.len())
                .map(|j| {
                    (if flip[j] {
                        shape.dims[j] - 1 - idx[j]
                    } else {
                        idx[j]
                    }) * strides[j]
                })
                .sum();
            out.push(data[off as usize]);
        });
        self.finish(shape, out)
    }

    pub(crate) fn iota(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        arity(ops, 0)?;
        let (shape, n) = self.out_array(inst)?;
        let d = inst
            .attrs
            .int(KnownAttr::IotaDimension)
            .and_then(|d| usize::try_from(d).ok())
            .filter(|&d| d < shape.rank())
            .ok_or_else(|| EvalError::msg("iota needs an iota_dimension= below the rank"))?;
        let cls = class_of(shape.element_type)?;
        let mut out = Vec::with_capacity(n);
        for_each_index(&shape.dims, |idx| {
            out.push(element::convert(cls, Num::S(idx[d])))
        });
        self.finish(shape, out)
    }
}

fn same_type_pred(shape: &ArrayShape) -> Result<(), EvalError> {
    EvalError::ensure(shape.element_type == PrimitiveType::Pred, || {
        "compare must produce pred".into()
    })
}

/// Appends the poison flag of source element `off` when the source has any.
fn carry(from: &Option<Vec<bool>>, to: &mut Option<Vec<bool>>, off: usize) {
    if let (Some(from), Some(to)) = (from, to.as_mut()) {
        to.push(from[off]);
    }
}
