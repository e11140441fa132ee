//! Instructions that apply a computation per element: `map`, `reduce`,
//! `reduce-window`, `select-and-scatter` and `sort`. Reductions visit their
//! elements in a fixed logical order (row-major over the reduced or window
//! dimensions), so results never depend on layouts.

use std::borrow::Cow;

use hlo::{CompId, Instruction, KnownAttr};
use shape::{ArrayShape, Dims, PrimitiveType, Shape};

use crate::element::{self, Binary, Class, FloatFormat};
use crate::error::EvalError;
use crate::eval::{Callee, Interp, array, comp_attr, dim_list};
use crate::ops::{same_dims, same_type};
use crate::value::{Buffer, Value, row_major_strides, try_for_each_index};
use crate::window::{WindowDim, parse_window, window_count};

/// The array shapes an instruction produces: one, or the elements of a
/// tuple of `n`.
pub(crate) fn result_shapes(inst: &Instruction, n: usize) -> Result<Vec<&ArrayShape>, EvalError> {
    match &inst.shape {
        Shape::Array(a) if n == 1 => Ok(vec![a]),
        Shape::Tuple(es) if es.len() == n => es
            .iter()
            .map(|s| {
                s.as_array()
                    .ok_or_else(|| EvalError::msg("expected a tuple of arrays"))
            })
            .collect(),
        other => Err(EvalError::msg(format!(
            "expected {n} array results, the shape is {other}"
        ))),
    }
}

/// The operands of a variadic reduction are its inputs, then as many init
/// values: returns the number of inputs and the first input's dimensions.
fn inputs_and_dims(ops: &[&Value], op: &str) -> Result<(usize, Dims), EvalError> {
    if ops.is_empty() || !ops.len().is_multiple_of(2) {
        return Err(EvalError::msg(format!(
            "{op} needs inputs and as many init values"
        )));
    }
    Ok((ops.len() / 2, array(ops, 0)?.shape().dims.clone()))
}

/// Packs results: one array, or a tuple.
pub(crate) fn pack(mut vs: Vec<Value>) -> Value {
    if vs.len() == 1 {
        vs.pop().unwrap_or(Value::Token)
    } else {
        Value::Tuple(vs)
    }
}

/// Checks a per-element computation's signature.
pub(crate) fn check_signature(
    interp: &Interp<'_>,
    comp: CompId,
    params: &[PrimitiveType],
    results: &[PrimitiveType],
) -> Result<(), EvalError> {
    let c = interp
        .module
        .computations
        .get(comp.index())
        .ok_or_else(|| EvalError::msg("no such computation"))?;
    let scalar = |s: &Shape| match s {
        Shape::Array(a) if a.rank() == 0 => Some(a.element_type),
        _ => None,
    };
    let got: Vec<Option<PrimitiveType>> = c
        .parameters()
        .iter()
        .map(|&p| scalar(&c.inst(p).shape))
        .collect();
    let want: Vec<Option<PrimitiveType>> = params.iter().map(|&t| Some(t)).collect();
    if got != want {
        return Err(EvalError::msg(format!(
            "%{} takes {got:?} but is applied to scalars of types {params:?}",
            c.name
        )));
    }
    let root = c
        .root()
        .ok_or_else(|| EvalError::msg("computation without root"))?;
    let out: Vec<Option<PrimitiveType>> = match &c.inst(root).shape {
        Shape::Tuple(es) => es.iter().map(scalar).collect(),
        s => vec![scalar(s)],
    };
    let want: Vec<Option<PrimitiveType>> = results.iter().map(|&t| Some(t)).collect();
    if out != want {
        return Err(EvalError::msg(format!(
            "%{} returns {out:?}, {results:?} is required",
            c.name
        )));
    }
    Ok(())
}

/// Folds `values` into `acc` with a binary op, the inline form of a
/// reducer that is just `op(param0, param1)`.
fn fold(
    op: Binary,
    cls: Class,
    acc: u64,
    values: impl Iterator<Item = u64>,
) -> Result<u64, EvalError> {
    const F32: Class = Class::Float(FloatFormat::F32);
    match element::f32_binary(op) {
        Some(f) if cls == F32 => {
            let mut a = f32::from_bits(acc as u32);
            for x in values {
                a = f(a, f32::from_bits(x as u32));
            }
            Ok(u64::from(a.to_bits()))
        }
        _ => {
            let mut a = acc;
            for x in values {
                a = element::binary_bits(op, cls, cls, a, x).map_err(EvalError::msg)?;
            }
            Ok(a)
        }
    }
}

/// The inline binary op of a single-input reducer, if it is one.
fn inline_reducer(callee: &Callee, k: usize) -> Option<(Binary, Class)> {
    match callee {
        Callee::Program(p) if k == 1 => p.as_binop(),
        _ => None,
    }
}

/// Stable bottom-up merge sort of `0..n` with a fallible "less" predicate.
pub(crate) fn merge_sort(
    n: usize,
    less: &mut dyn FnMut(usize, usize) -> Result<bool, EvalError>,
) -> Result<Vec<usize>, EvalError> {
    let mut a: Vec<usize> = (0..n).collect();
    let mut buf = a.clone();
    let mut width = 1;
    while width < n {
        let mut i = 0;
        while i < n {
            let mid = (i + width).min(n);
            let hi = (i + 2 * width).min(n);
            let (mut l, mut r, mut k) = (i, mid, i);
            while l < mid && r < hi {
                if less(a[r], a[l])? {
                    buf[k] = a[r];
                    r += 1;
                } else {
                    buf[k] = a[l];
                    l += 1;
                }
                k += 1;
            }
            buf[k..k + (mid - l)].copy_from_slice(&a[l..mid]);
            k += mid - l;
            buf[k..k + (hi - r)].copy_from_slice(&a[r..hi]);
            i = hi;
        }
        std::mem::swap(&mut a, &mut buf);
        width *= 2;
    }
    Ok(a)
}

/// The window positions of one output index that fall inside the input:
/// row-major over the window, as offsets into the input.
fn window_offsets(
    window: &[WindowDim],
    out_idx: &[i64],
    in_dims: &[i64],
    strides: &[i64],
    offsets: &mut Vec<usize>,
) {
    offsets.clear();
    let sizes: Vec<i64> = window.iter().map(|w| w.size).collect();
    let _ = try_for_each_index::<()>(&sizes, |w| {
        let mut off = 0i64;
        for d in 0..w.len() {
            match window[d].input_position(out_idx[d], w[d], in_dims[d]) {
                Some(p) => off += p * strides[d],
                None => return Ok(()),
            }
        }
        offsets.push(off as usize);
        Ok(())
    });
}

/// The inputs, init values and reducer of a variadic reduction (`reduce`,
/// `reduce-window`), with the scratch space of one fold.
struct Reduction<'v> {
    inputs: Vec<Cow<'v, [u64]>>,
    inits: Vec<u64>,
    callee: Callee,
    inline: Option<(Binary, Class)>,
    acc: Vec<u64>,
    args: Vec<u64>,
    res: Vec<u64>,
}

impl Interp<'_> {
    /// Reads the `k` inputs and `k` init values of a variadic reduction
    /// into the result `shapes`, after `check(input, init, result shape)`,
    /// and its reducer; with the element count of a result.
    fn reduction<'v>(
        &mut self,
        inst: &Instruction,
        ops: &[&'v Value],
        shapes: &[&ArrayShape],
        check: impl Fn(&Buffer, &Buffer, &ArrayShape) -> Result<(), EvalError>,
    ) -> Result<(Reduction<'v>, usize), EvalError> {
        let k = shapes.len();
        let mut inputs = Vec::with_capacity(k);
        let mut inits = Vec::with_capacity(k);
        let mut in_types = Vec::with_capacity(k);
        let mut out_types = Vec::with_capacity(k);
        for (i, &s) in shapes.iter().enumerate() {
            let a = array(ops, i)?;
            let init = array(ops, k + i)?;
            check(a, init, s)?;
            same_type(init, s.element_type, "the init value")?;
            in_types.push(a.element_type());
            out_types.push(s.element_type);
            inputs.push(a.logical_bits()?);
            inits.push(init.logical_bits()?[0]);
        }
        let mut n = 0;
        for s in shapes {
            n = self.reserve(s)?;
        }
        let comp = comp_attr(inst, KnownAttr::ToApply)?;
        let params: Vec<PrimitiveType> = out_types.iter().chain(&in_types).copied().collect();
        check_signature(self, comp, &params, &out_types)?;
        let callee = self.callee(comp)?;
        let red = Reduction {
            inline: inline_reducer(&callee, k),
            callee,
            acc: inits.clone(),
            args: Vec::with_capacity(2 * k),
            res: Vec::with_capacity(k),
            inputs,
            inits,
        };
        Ok((red, n))
    }

    /// Folds the input elements at `base + offsets` (in that order) into
    /// one value per result, starting from the init values, and appends
    /// them to `outs`.
    fn reduce_into(
        &mut self,
        red: &mut Reduction<'_>,
        base: usize,
        offsets: &[usize],
        outs: &mut [Vec<u64>],
    ) -> Result<(), EvalError> {
        if let Some((op, cls)) = red.inline {
            self.charge(offsets.len() as u64)?;
            let input = &red.inputs[0];
            let values = offsets.iter().map(|&off| input[base + off]);
            outs[0].push(fold(op, cls, red.inits[0], values)?);
            return Ok(());
        }
        red.acc.copy_from_slice(&red.inits);
        for &off in offsets {
            red.args.clear();
            red.args.extend_from_slice(&red.acc);
            red.args.extend(red.inputs.iter().map(|v| v[base + off]));
            red.res.clear();
            self.apply(&red.callee, &red.args, &mut red.res)?;
            if red.res.len() != red.inits.len() {
                return Err(EvalError::msg(
                    "the reducer returned the wrong number of values",
                ));
            }
            red.acc.copy_from_slice(&red.res);
        }
        for (o, &a) in outs.iter_mut().zip(&red.acc) {
            o.push(a);
        }
        Ok(())
    }

    /// Lays out one result per shape and packs them: one array, or a tuple.
    pub(crate) fn finish_all(
        &self,
        shapes: &[&ArrayShape],
        outs: Vec<Vec<u64>>,
    ) -> Result<Value, EvalError> {
        let mut vals = Vec::with_capacity(shapes.len());
        for (s, o) in shapes.iter().zip(outs) {
            vals.push(self.finish(s, o)?);
        }
        Ok(pack(vals))
    }

    pub(crate) fn map(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let (shape, n) = self.out_array(inst)?;
        let mut inputs: Vec<Cow<'_, [u64]>> = Vec::with_capacity(ops.len());
        let mut types = Vec::with_capacity(ops.len());
        for i in 0..ops.len() {
            let a = array(ops, i)?;
            same_dims(a, shape, "an operand")?;
            types.push(a.element_type());
            inputs.push(a.logical_bits()?);
        }
        let comp = comp_attr(inst, KnownAttr::ToApply)?;
        check_signature(self, comp, &types, &[shape.element_type])?;
        let callee = self.callee(comp)?;
        let mut out = Vec::with_capacity(n);
        let mut args = Vec::with_capacity(inputs.len());
        for i in 0..n {
            args.clear();
            args.extend(inputs.iter().map(|v| v[i]));
            self.apply(&callee, &args, &mut out)?;
        }
        self.finish(shape, out)
    }

    pub(crate) fn reduce(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let (k, in_dims) = inputs_and_dims(ops, "reduce")?;
        let rank = in_dims.len();
        let reduced = dim_list(inst, KnownAttr::Dimensions, rank)?;
        let mut is_reduced = vec![false; rank];
        for &d in &reduced {
            is_reduced[d] = true;
        }
        let kept: Vec<usize> = (0..rank).filter(|&d| !is_reduced[d]).collect();
        let out_dims: Vec<i64> = kept.iter().map(|&d| in_dims[d]).collect();
        let shapes = result_shapes(inst, k)?;
        let (mut red, n) = self.reduction(inst, ops, &shapes, |a, init, s| {
            if a.shape().dims != in_dims {
                return Err(EvalError::msg(
                    "reduce inputs must have the same dimensions",
                ));
            }
            if init.shape().rank() != 0 {
                return Err(EvalError::msg("reduce init values must be scalars"));
            }
            EvalError::ensure(s.dims[..] == out_dims[..], || {
                format!("reducing {} over {reduced:?} does not give {s}", a.shape())
            })
        })?;
        let strides = row_major_strides(&in_dims);
        let red_sizes: Vec<i64> = reduced.iter().map(|&d| in_dims[d]).collect();
        let mut red_offsets = Vec::new();
        let _ = try_for_each_index::<()>(&red_sizes, |r| {
            red_offsets.push(
                r.iter()
                    .zip(&reduced)
                    .map(|(&i, &d)| i * strides[d])
                    .sum::<i64>() as usize,
            );
            Ok(())
        });
        let mut outs: Vec<Vec<u64>> = (0..k).map(|_| Vec::with_capacity(n)).collect();
        // A reduction to a rank-0 result still visits one "output index".
        try_for_each_index(&out_dims, |o| {
            let base: i64 = o.iter().zip(&kept).map(|(&i, &d)| i * strides[d]).sum();
            self.reduce_into(&mut red, base as usize, &red_offsets, &mut outs)
        })?;
        self.finish_all(&shapes, outs)
    }

    pub(crate) fn reduce_window(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let (k, in_dims) = inputs_and_dims(ops, "reduce-window")?;
        let rank = in_dims.len();
        let window = parse_window(inst.attrs.string(KnownAttr::Window), rank)?;
        let out_dims: Vec<i64> = window
            .iter()
            .zip(&in_dims)
            .map(|(w, &d)| w.output_size(d))
            .collect();
        let shapes = result_shapes(inst, k)?;
        let (mut red, n) = self.reduction(inst, ops, &shapes, |a, init, s| {
            if a.shape().dims != in_dims || init.shape().rank() != 0 {
                return Err(EvalError::msg(
                    "reduce-window inputs must agree and init values be scalars",
                ));
            }
            EvalError::ensure(s.dims[..] == out_dims[..], || {
                format!("the window over {} gives {out_dims:?}, not {s}", a.shape())
            })
        })?;
        self.charge((n as u64).saturating_mul(window_count(&window)))?;
        let strides = row_major_strides(&in_dims);
        let mut outs: Vec<Vec<u64>> = (0..k).map(|_| Vec::with_capacity(n)).collect();
        let mut offsets = Vec::new();
        try_for_each_index(&out_dims, |o| {
            window_offsets(&window, o, &in_dims, &strides, &mut offsets);
            self.reduce_into(&mut red, 0, &offsets, &mut outs)
        })?;
        self.finish_all(&shapes, outs)
    }

    pub(crate) fn select_and_scatter(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([operand, source, init], shape, _) = self.array_operands(inst, ops)?;
        same_dims(operand, shape, "the operand")?;
        same_type(source, shape.element_type, "the source")?;
        same_type(init, shape.element_type, "the init value")?;
        if init.shape().rank() != 0 {
            return Err(EvalError::msg("the init value must be a scalar"));
        }
        let in_dims = operand.shape().dims.clone();
        let window = parse_window(inst.attrs.string(KnownAttr::Window), in_dims.len())?;
        let src_dims: Vec<i64> = window
            .iter()
            .zip(&in_dims)
            .map(|(w, &d)| w.output_size(d))
            .collect();
        if source.shape().dims[..] != src_dims[..] {
            return Err(EvalError::msg(format!(
                "the source must have dimensions {src_dims:?}"
            )));
        }
        let sel = comp_attr(inst, KnownAttr::Select)?;
        let sca = comp_attr(inst, KnownAttr::Scatter)?;
        let t = operand.element_type();
        check_signature(self, sel, &[t, t], &[PrimitiveType::Pred])?;
        check_signature(
            self,
            sca,
            &[shape.element_type, shape.element_type],
            &[shape.element_type],
        )?;
        let (sel, sca) = (self.callee(sel)?, self.callee(sca)?);
        self.charge(source.element_count().saturating_mul(window_count(&window)))?;
        let data = operand.logical_bits()?;
        let src = source.logical_bits()?;
        let mut out = vec![init.logical_bits()?[0]; data.len()];
        let strides = row_major_strides(&in_dims);
        let mut offsets = Vec::new();
        let mut res = Vec::with_capacity(1);
        let mut s_i = 0usize;
        try_for_each_index(&src_dims, |o| {
            window_offsets(&window, o, &in_dims, &strides, &mut offsets);
            let mut selected: Option<usize> = None;
            for &off in &offsets {
                match selected {
                    None => selected = Some(off),
                    Some(cur) => {
                        res.clear();
                        self.apply(&sel, &[data[cur], data[off]], &mut res)?;
                        if res.first().copied().unwrap_or(0) & 1 == 0 {
                            selected = Some(off);
                        }
                    }
                }
            }
            if let Some(off) = selected {
                res.clear();
                self.apply(&sca, &[out[off], src[s_i]], &mut res)?;
                out[off] = *res
                    .first()
                    .ok_or_else(|| EvalError::msg("scatter returned nothing"))?;
            }
            s_i += 1;
            Ok(())
        })?;
        self.finish(shape, out)
    }

    pub(crate) fn sort(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        if ops.is_empty() {
            return Err(EvalError::msg("sort without operands"));
        }
        let k = ops.len();
        let shapes = result_shapes(inst, k)?;
        let dims = array(ops, 0)?.shape().dims.clone();
        let d = match dim_list(inst, KnownAttr::Dimensions, dims.len())?[..] {
            [d] => d,
            _ => return Err(EvalError::msg("sort needs exactly one dimension")),
        };
        let mut inputs: Vec<Cow<'_, [u64]>> = Vec::with_capacity(k);
        let mut types = Vec::with_capacity(2 * k);
        for (i, s) in shapes.iter().enumerate() {
            let a: &Buffer = array(ops, i)?;
            same_dims(a, s, "an operand")?;
            same_type(a, s.element_type, "an operand")?;
            types.push(a.element_type());
            types.push(a.element_type());
            inputs.push(a.logical_bits()?);
        }
        for s in &shapes {
            self.reserve(s)?;
        }
        let comp = comp_attr(inst, KnownAttr::ToApply)?;
        check_signature(self, comp, &types, &[PrimitiveType::Pred])?;
        let callee = self.callee(comp)?;
        let strides = row_major_strides(&dims);
        let len = dims[d] as usize;
        let step = strides[d] as usize;
        let mut outer = dims.clone();
        outer[d] = 1;
        let mut outs: Vec<Vec<u64>> = inputs.iter().map(|v| v.to_vec()).collect();
        let mut args = Vec::with_capacity(2 * k);
        let mut res = Vec::with_capacity(1);
        try_for_each_index(&outer, |o| {
            let base = o.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>() as usize;
            let mut less = |i: usize, j: usize| -> Result<bool, EvalError> {
                args.clear();
                for v in &inputs {
                    args.push(v[base + i * step]);
                    args.push(v[base + j * step]);
                }
                res.clear();
                self.apply(&callee, &args, &mut res)?;
                Ok(res.first().copied().unwrap_or(0) & 1 != 0)
            };
            let perm = merge_sort(len, &mut less)?;
            for (out, v) in outs.iter_mut().zip(&inputs) {
                for (j, &p) in perm.iter().enumerate() {
                    out[base + j * step] = v[base + p * step];
                }
            }
            Ok(())
        })?;
        self.finish_all(&shapes, outs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sort_is_stable_and_tolerates_bad_comparators() {
        let keys = [3, 1, 3, 2, 1];
        let p = merge_sort(5, &mut |i, j| Ok(keys[i] < keys[j])).unwrap();
        assert_eq!(p, vec![1, 4, 3, 0, 2]);
        // A comparator that is not a strict weak order still terminates.
        let p = merge_sort(7, &mut |_, _| Ok(true)).unwrap();
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..7).collect::<Vec<_>>());
    }
}
