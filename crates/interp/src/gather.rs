//! `gather` and `scatter`, with XLA's general dimension numbers (batching
//! dimensions included). Gather clamps start indices so that the slice
//! fits; scatter skips an update whose window does not fit, as XLA's
//! reference evaluator does. Scatter applies updates in row-major order of
//! the update index.

use std::borrow::Cow;

use hlo::{Instruction, KnownAttr};
use shape::PrimitiveType;

use crate::error::EvalError;
use crate::eval::{Interp, array, comp_attr, opt_dims};
use crate::ops::same_type;
use crate::scalar;
use crate::value::{Buffer, Value, class_of, row_major_strides, try_for_each_index};

/// The start indices operand, with the index vector dimension resolved.
struct Indices<'a> {
    data: Cow<'a, [u64]>,
    cls: crate::element::Class,
    dims: Vec<i64>,
    strides: Vec<i64>,
    /// The index vector dimension, or `None` when it is the implicit
    /// trailing dimension of size 1.
    ivd: Option<usize>,
    /// The start-index dimensions other than `ivd`, in order.
    batch: Vec<usize>,
}

impl<'a> Indices<'a> {
    /// The start indices `b` of `inst`, read along its `index_vector_dim`.
    fn of(inst: &Instruction, b: &'a Buffer) -> Result<Indices<'a>, EvalError> {
        let ivd = inst
            .attrs
            .int(KnownAttr::IndexVectorDim)
            .ok_or_else(|| EvalError::msg("missing index_vector_dim="))?;
        let dims: Vec<i64> = b.shape().dims.to_vec();
        let rank = dims.len();
        let ivd = usize::try_from(ivd)
            .ok()
            .filter(|&d| d <= rank)
            .ok_or_else(|| EvalError::msg(format!("index_vector_dim={ivd} is out of range")))?;
        let ivd = (ivd < rank).then_some(ivd);
        let batch = (0..rank).filter(|&d| Some(d) != ivd).collect();
        Ok(Indices {
            data: b.logical_bits()?,
            cls: class_of(b.element_type())?,
            strides: row_major_strides(&dims).to_vec(),
            dims,
            ivd,
            batch,
        })
    }

    fn vector_len(&self) -> usize {
        self.ivd.map_or(1, |d| self.dims[d] as usize)
    }

    /// The index vector at batch position `g` (one entry per `batch` dim).
    fn vector(&self, g: &[i64], out: &mut Vec<i64>) -> Result<(), EvalError> {
        out.clear();
        let base: i64 = g
            .iter()
            .zip(&self.batch)
            .map(|(&i, &d)| i * self.strides[d])
            .sum();
        let step = self.ivd.map_or(0, |d| self.strides[d]);
        for k in 0..self.vector_len() as i64 {
            out.push(scalar::index_value(
                self.cls,
                self.data[(base + k * step) as usize],
            )?);
        }
        Ok(())
    }

    /// The start, in operand dimensions, of the slice or window at batch
    /// position `g`: index vector entry `k` goes to operand dimension
    /// `to_operand[k]`, the batch index at `batch_pos[j]` to operand
    /// batching dimension `operand_batch[j]`, and every other dimension
    /// starts at 0. `vector` is scratch space for the index vector.
    fn start(
        &self,
        g: &[i64],
        to_operand: &[usize],
        operand_batch: &[usize],
        batch_pos: &[usize],
        vector: &mut Vec<i64>,
        start: &mut [i64],
    ) -> Result<(), EvalError> {
        self.vector(g, vector)?;
        start.fill(0);
        for (&d, &v) in to_operand.iter().zip(vector.iter()) {
            start[d] = v;
        }
        for (&d, &p) in operand_batch.iter().zip(batch_pos) {
            start[d] = g[p];
        }
        Ok(())
    }

    /// The batch position (in `batch` order) of start-index dimension `d`.
    fn batch_position(&self, d: usize) -> Option<usize> {
        self.batch.iter().position(|&b| b == d)
    }
}

impl Interp<'_> {
    pub(crate) fn gather(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([operand, idx], shape, n) = self.array_operands(inst, ops)?;
        same_type(operand, shape.element_type, "the operand")?;
        let od = operand.shape().dims.clone();
        let in_rank = od.len();
        let out_rank = shape.rank();
        let offset_dims = opt_dims(inst, KnownAttr::OffsetDims, out_rank)?;
        let collapsed = opt_dims(inst, KnownAttr::CollapsedSliceDims, in_rank)?;
        let start_map = opt_dims(inst, KnownAttr::StartIndexMap, in_rank)?;
        let op_batch = opt_dims(inst, KnownAttr::OperandBatchingDims, in_rank)?;
        let ind = Indices::of(inst, idx)?;
        let idx_batch = opt_dims(inst, KnownAttr::StartIndicesBatchingDims, ind.dims.len())?;
        let sizes = inst
            .attrs
            .ints(KnownAttr::SliceSizes)
            .ok_or_else(|| EvalError::msg("missing slice_sizes="))?;
        let out_batch: Vec<usize> = (0..out_rank).filter(|d| !offset_dims.contains(d)).collect();
        let offset_operand: Vec<usize> = (0..in_rank)
            .filter(|d| !collapsed.contains(d) && !op_batch.contains(d))
            .collect();
        let idx_batch_pos: Vec<usize> = idx_batch
            .iter()
            .filter_map(|&d| ind.batch_position(d))
            .collect();
        let ok = sizes.len() == in_rank
            && sizes.iter().zip(&od).all(|(&s, &d)| 0 <= s && s <= d)
            && collapsed.iter().chain(&op_batch).all(|&d| sizes[d] <= 1)
            && offset_operand.len() == offset_dims.len()
            && offset_dims
                .iter()
                .zip(&offset_operand)
                .all(|(&o, &d)| shape.dims[o] == sizes[d])
            && start_map.len() == ind.vector_len()
            && out_batch.len() == ind.batch.len()
            && out_batch
                .iter()
                .zip(&ind.batch)
                .all(|(&o, &d)| shape.dims[o] == ind.dims[d])
            && op_batch.len() == idx_batch.len()
            && idx_batch_pos.len() == idx_batch.len()
            && op_batch
                .iter()
                .zip(&idx_batch)
                .all(|(&a, &b)| od[a] == ind.dims[b]);
        if !ok {
            return Err(EvalError::msg(format!(
                "gather dimension numbers do not fit {} with indices {} -> {shape}",
                operand.shape(),
                idx.shape()
            )));
        }
        let strides = row_major_strides(&od);
        let data = operand.logical_bits()?;
        let mut out = Vec::with_capacity(n);
        let mut g = Vec::with_capacity(out_batch.len());
        let mut s = Vec::new();
        let mut start = vec![0i64; in_rank];
        try_for_each_index(&shape.dims, |o| {
            g.clear();
            g.extend(out_batch.iter().map(|&d| o[d]));
            ind.start(
                &g,
                &start_map,
                &op_batch,
                &idx_batch_pos,
                &mut s,
                &mut start,
            )?;
            let mut off = 0i64;
            for d in 0..in_rank {
                off += start[d].clamp(0, od[d] - sizes[d]) * strides[d];
            }
            for (&o_d, &d) in offset_dims.iter().zip(&offset_operand) {
                off += o[o_d] * strides[d];
            }
            out.push(data[off as usize]);
            Ok(())
        })?;
        self.finish(shape, out)
    }

    pub(crate) fn scatter(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        if ops.len() < 3 || ops.len().is_multiple_of(2) {
            return Err(EvalError::msg(
                "scatter needs operands, indices and as many updates",
            ));
        }
        let k = ops.len() / 2;
        let shapes = crate::reduce::result_shapes(inst, k)?;
        let od = array(ops, 0)?.shape().dims.clone();
        let in_rank = od.len();
        let idx = array(ops, k)?;
        let ud = array(ops, k + 1)?.shape().dims.clone();
        let mut operands = Vec::with_capacity(k);
        let mut updates = Vec::with_capacity(k);
        let mut types: Vec<PrimitiveType> = Vec::with_capacity(2 * k);
        for (i, s) in shapes.iter().enumerate() {
            let (a, u) = (array(ops, i)?, array(ops, k + 1 + i)?);
            if a.shape().dims != od || u.shape().dims != ud || s.dims != od {
                return Err(EvalError::msg(
                    "scatter operands, updates and results must agree",
                ));
            }
            same_type(a, s.element_type, "an operand")?;
            same_type(u, s.element_type, "an update")?;
            types.push(a.element_type());
            operands.push(a.logical_bits()?.into_owned());
            updates.push(u.logical_bits()?);
        }
        for s in &shapes {
            self.reserve(s)?;
        }
        self.charge(ud.iter().map(|&d| d.max(0) as u64).product())?;
        let upd_rank = ud.len();
        let window_dims = opt_dims(inst, KnownAttr::UpdateWindowDims, upd_rank)?;
        let inserted = opt_dims(inst, KnownAttr::InsertedWindowDims, in_rank)?;
        let to_operand = opt_dims(inst, KnownAttr::ScatterDimsToOperandDims, in_rank)?;
        let in_batch = opt_dims(inst, KnownAttr::InputBatchingDims, in_rank)?;
        let ind = Indices::of(inst, idx)?;
        let idx_batch = opt_dims(inst, KnownAttr::ScatterIndicesBatchingDims, ind.dims.len())?;
        let idx_batch_pos: Vec<usize> = idx_batch
            .iter()
            .filter_map(|&d| ind.batch_position(d))
            .collect();
        let scatter_dims: Vec<usize> = (0..upd_rank).filter(|d| !window_dims.contains(d)).collect();
        let window_operand: Vec<usize> = (0..in_rank)
            .filter(|d| !inserted.contains(d) && !in_batch.contains(d))
            .collect();
        let ok = window_operand.len() == window_dims.len()
            && window_dims
                .iter()
                .zip(&window_operand)
                .all(|(&u, &d)| ud[u] <= od[d])
            && to_operand.len() == ind.vector_len()
            && scatter_dims.len() == ind.batch.len()
            && scatter_dims
                .iter()
                .zip(&ind.batch)
                .all(|(&u, &d)| ud[u] == ind.dims[d])
            && in_batch.len() == idx_batch.len()
            && idx_batch_pos.len() == idx_batch.len();
        if !ok {
            return Err(EvalError::msg(
                "scatter dimension numbers do not fit the operand, indices and updates",
            ));
        }
        // The window extent in every operand dimension.
        let mut extent = vec![1i64; in_rank];
        for (&u, &d) in window_dims.iter().zip(&window_operand) {
            extent[d] = ud[u];
        }
        let comp = comp_attr(inst, KnownAttr::ToApply)?;
        let params: Vec<PrimitiveType> = types.iter().chain(&types).copied().collect();
        crate::reduce::check_signature(self, comp, &params, &types)?;
        let callee = self.callee(comp)?;
        let strides = row_major_strides(&od);
        let ustrides = row_major_strides(&ud);
        let mut g = Vec::new();
        let mut s = Vec::new();
        let mut start = vec![0i64; in_rank];
        let mut args = Vec::with_capacity(2 * k);
        let mut res = Vec::with_capacity(k);
        try_for_each_index(&ud, |u| {
            g.clear();
            g.extend(scatter_dims.iter().map(|&d| u[d]));
            ind.start(
                &g,
                &to_operand,
                &in_batch,
                &idx_batch_pos,
                &mut s,
                &mut start,
            )?;
            if (0..in_rank).any(|d| start[d] < 0 || start[d] > od[d] - extent[d]) {
                return Ok(());
            }
            let mut off = 0i64;
            for d in 0..in_rank {
                off += start[d] * strides[d];
            }
            for (&ud_i, &d) in window_dims.iter().zip(&window_operand) {
                off += u[ud_i] * strides[d];
            }
            let uoff: i64 = u.iter().zip(&ustrides).map(|(i, st)| i * st).sum();
            let (off, uoff) = (off as usize, uoff as usize);
            args.clear();
            args.extend(operands.iter().map(|v| v[off]));
            args.extend(updates.iter().map(|v| v[uoff]));
            res.clear();
            self.apply(&callee, &args, &mut res)?;
            if res.len() != k {
                return Err(EvalError::msg(
                    "the scatter computation returned the wrong number of values",
                ));
            }
            for (v, &r) in operands.iter_mut().zip(&res) {
                v[off] = r;
            }
            Ok(())
        })?;
        self.finish_all(&shapes, operands)
    }
}
