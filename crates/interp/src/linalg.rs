//! `dot` and `convolution`. Operands are converted to the result element
//! type first (as XLA's reference evaluator does); products and sums are
//! rounded to that type at every step and accumulated from +0 in a fixed
//! logical order, so results never depend on layouts.

use std::borrow::Cow;

use hlo::{AttrValue, Instruction, KnownAttr};

use crate::element::{self, Binary, Class, FloatFormat, Num};
use crate::error::EvalError;
use crate::eval::{Interp, dims_below, opt_dims};
use crate::value::{Buffer, Value, class_of, row_major_strides, try_for_each_index};
use crate::window::parse_window;

/// The kinds of accumulation.
enum Data<'a> {
    Float(Vec<f64>, FloatFormat),
    Int(Vec<i64>),
    Other(Cow<'a, [u64]>, Class),
}

/// Reads an operand converted to the result class.
fn converted(b: &Buffer, to: Class) -> Result<Data<'_>, EvalError> {
    let from = class_of(b.element_type())?;
    let bits = b.logical_bits()?;
    Ok(match to {
        Class::Float(f) => Data::Float(
            bits.iter()
                .map(|&x| {
                    match element::decode(to, element::convert(to, element::decode(from, x))) {
                        Num::F(v) => v,
                        _ => 0.0,
                    }
                })
                .collect(),
            f,
        ),
        Class::Signed(_) | Class::Unsigned(_) => Data::Int(
            bits.iter()
                .map(|&x| element::convert(to, element::decode(from, x)) as i64)
                .collect(),
        ),
        _ => {
            if from == to {
                Data::Other(bits, to)
            } else {
                Data::Other(
                    Cow::Owned(
                        bits.iter()
                            .map(|&x| element::convert(to, element::decode(from, x)))
                            .collect(),
                    ),
                    to,
                )
            }
        }
    })
}

/// A multiply-accumulate engine over one pair of converted operands.
struct Mac<'a> {
    lhs: Data<'a>,
    rhs: Data<'a>,
    cls: Class,
}

impl Mac<'_> {
    /// Sums `lhs[l] * rhs[r]` over the given offset pairs.
    fn sum(&self, pairs: impl Iterator<Item = (usize, usize)>) -> Result<u64, EvalError> {
        match (&self.lhs, &self.rhs) {
            (Data::Float(a, f), Data::Float(b, _)) => {
                let mut acc = 0.0f64;
                match f {
                    FloatFormat::F64 => {
                        for (l, r) in pairs {
                            acc += a[l] * b[r];
                        }
                    }
                    FloatFormat::F32 => {
                        for (l, r) in pairs {
                            let p = (a[l] * b[r]) as f32;
                            acc = f64::from(acc as f32 + p);
                        }
                    }
                    FloatFormat::Mini(_) => {
                        for (l, r) in pairs {
                            let p = element::round_to(*f, a[l] * b[r]);
                            acc = element::round_to(*f, acc + p);
                        }
                    }
                }
                Ok(element::encode(self.cls, Num::F(acc)))
            }
            (Data::Int(a), Data::Int(b)) => {
                let mut acc = 0i64;
                for (l, r) in pairs {
                    acc = acc.wrapping_add(a[l].wrapping_mul(b[r]));
                }
                Ok(element::encode(self.cls, Num::S(acc)))
            }
            (Data::Other(a, cls), Data::Other(b, _)) => {
                let mut acc = element::decode(*cls, element::convert(*cls, Num::S(0)));
                for (l, r) in pairs {
                    let p = element::binary(
                        Binary::Mul,
                        *cls,
                        element::decode(*cls, a[l]),
                        element::decode(*cls, b[r]),
                    )
                    .map_err(EvalError::msg)?;
                    let p = element::decode(*cls, element::encode(*cls, p));
                    let s = element::binary(Binary::Add, *cls, acc, p).map_err(EvalError::msg)?;
                    acc = element::decode(*cls, element::encode(*cls, s));
                }
                Ok(element::encode(*cls, acc))
            }
            _ => Err(EvalError::msg(
                "internal: operands converted to different kinds",
            )),
        }
    }
}

/// `data` (row-major over `dims`) transposed so that `order` lists its
/// dimensions from major to minor, as f32.
fn packed(data: &[f64], dims: &[i64], order: &[usize]) -> Vec<f32> {
    let strides = row_major_strides(dims);
    let odims: Vec<i64> = order.iter().map(|&d| dims[d]).collect();
    let mut out = Vec::with_capacity(data.len());
    let _ = try_for_each_index::<()>(&odims, |idx| {
        let off: i64 = idx.iter().zip(order).map(|(&i, &d)| i * strides[d]).sum();
        out.push(data[off as usize] as f32);
        Ok(())
    });
    out
}

impl Interp<'_> {
    pub(crate) fn dot(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let ([lhs, rhs], shape, n) = self.array_operands(inst, ops)?;
        let (ld, rd) = (&lhs.shape().dims, &rhs.shape().dims);
        let lb = opt_dims(inst, KnownAttr::LhsBatchDims, ld.len())?;
        let rb = opt_dims(inst, KnownAttr::RhsBatchDims, rd.len())?;
        let lc = opt_dims(inst, KnownAttr::LhsContractingDims, ld.len())?;
        let rc = opt_dims(inst, KnownAttr::RhsContractingDims, rd.len())?;
        let distinct = |v: &[usize], rank: usize| {
            let mut seen = vec![false; rank];
            v.iter().all(|&d| !std::mem::replace(&mut seen[d], true))
        };
        let lused: Vec<usize> = lb.iter().chain(&lc).copied().collect();
        let rused: Vec<usize> = rb.iter().chain(&rc).copied().collect();
        let ok = lb.len() == rb.len()
            && lc.len() == rc.len()
            && distinct(&lused, ld.len())
            && distinct(&rused, rd.len())
            && lb.iter().zip(&rb).all(|(&a, &b)| ld[a] == rd[b])
            && lc.iter().zip(&rc).all(|(&a, &b)| ld[a] == rd[b]);
        if !ok {
            return Err(EvalError::msg(format!(
                "dot dimension numbers do not fit {} and {}",
                lhs.shape(),
                rhs.shape()
            )));
        }
        let lfree: Vec<usize> = (0..ld.len()).filter(|d| !lused.contains(d)).collect();
        let rfree: Vec<usize> = (0..rd.len()).filter(|d| !rused.contains(d)).collect();
        let want: Vec<i64> = lb
            .iter()
            .map(|&d| ld[d])
            .chain(lfree.iter().map(|&d| ld[d]))
            .chain(rfree.iter().map(|&d| rd[d]))
            .collect();
        if shape.dims[..] != want[..] {
            return Err(EvalError::msg(format!(
                "dot of {} and {} gives {want:?}, not {shape}",
                lhs.shape(),
                rhs.shape()
            )));
        }
        let csizes: Vec<i64> = lc.iter().map(|&d| ld[d]).collect();
        let csize: u64 = csizes.iter().map(|&d| d as u64).product();
        self.charge((n as u64).saturating_mul(csize))?;
        let (ls, rs) = (row_major_strides(ld), row_major_strides(rd));
        let mut pairs = Vec::with_capacity(csize as usize);
        let _ = try_for_each_index::<()>(&csizes, |c| {
            let l: i64 = c.iter().zip(&lc).map(|(&i, &d)| i * ls[d]).sum();
            let r: i64 = c.iter().zip(&rc).map(|(&i, &d)| i * rs[d]).sum();
            pairs.push((l as usize, r as usize));
            Ok(())
        });
        let cls = class_of(shape.element_type)?;
        let mac = Mac {
            lhs: converted(lhs, cls)?,
            rhs: converted(rhs, cls)?,
            cls,
        };
        if let (Data::Float(a, FloatFormat::F32), Data::Float(b, _)) = (&mac.lhs, &mac.rhs) {
            // The f32 fast path: both operands transposed to
            // [batch, free, contracting] so that every sum runs over
            // contiguous memory, in the same order and with the same
            // roundings as the general path.
            let lorder: Vec<usize> = lb.iter().chain(&lfree).chain(&lc).copied().collect();
            let rorder: Vec<usize> = rb.iter().chain(&rfree).chain(&rc).copied().collect();
            let lp = packed(a, ld, &lorder);
            let rp = packed(b, rd, &rorder);
            let k = csize as usize;
            let batches: usize = lb.iter().map(|&d| ld[d] as usize).product();
            let m: usize = lfree.iter().map(|&d| ld[d] as usize).product();
            let nn: usize = rfree.iter().map(|&d| rd[d] as usize).product();
            let mut out = Vec::with_capacity(n);
            for bi in 0..batches {
                for i in 0..m {
                    let lrow = &lp[(bi * m + i) * k..][..k];
                    for j in 0..nn {
                        let rrow = &rp[(bi * nn + j) * k..][..k];
                        let mut acc = 0f32;
                        for (x, y) in lrow.iter().zip(rrow) {
                            acc += x * y;
                        }
                        out.push(u64::from(acc.to_bits()));
                    }
                }
            }
            return self.finish(shape, out);
        }
        let nb = lb.len();
        let nl = lfree.len();
        let mut out = Vec::with_capacity(n);
        try_for_each_index(&shape.dims, |o| {
            let mut lbase = 0i64;
            let mut rbase = 0i64;
            for k in 0..nb {
                lbase += o[k] * ls[lb[k]];
                rbase += o[k] * rs[rb[k]];
            }
            for (k, &d) in lfree.iter().enumerate() {
                lbase += o[nb + k] * ls[d];
            }
            for (k, &d) in rfree.iter().enumerate() {
                rbase += o[nb + nl + k] * rs[d];
            }
            let (lbase, rbase) = (lbase as usize, rbase as usize);
            out.push(mac.sum(pairs.iter().map(|&(l, r)| (lbase + l, rbase + r)))?);
            Ok(())
        })?;
        self.finish(shape, out)
    }

    pub(crate) fn convolution(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Value, EvalError> {
        let ([lhs, rhs], shape, n) = self.array_operands(inst, ops)?;
        let Some(AttrValue::DimLabels(dl)) = inst.attrs.get(KnownAttr::DimLabels) else {
            return Err(EvalError::msg("missing dim_labels= attribute"));
        };
        let ns = dl.input_spatial.len();
        let (ld, rd, od) = (&lhs.shape().dims, &rhs.shape().dims, &shape.dims);
        if ld.len() != ns + 2 || rd.len() != ns + 2 || od.len() != ns + 2 {
            return Err(EvalError::msg(
                "convolution operands and result must have rank spatial + 2",
            ));
        }
        let perm =
            |batch: i64, feat: i64, spatial: &[i64], what: &str| -> Result<Vec<usize>, EvalError> {
                let mut all = vec![batch, feat];
                all.extend_from_slice(spatial);
                let v = dims_below(&all, ns + 2, what)?;
                let mut seen = vec![false; ns + 2];
                if v.iter().any(|&d| std::mem::replace(&mut seen[d], true)) || spatial.len() != ns {
                    return Err(EvalError::msg(format!(
                        "dim_labels for the {what} are not a permutation"
                    )));
                }
                Ok(v)
            };
        let li = perm(dl.input_batch, dl.input_feature, &dl.input_spatial, "input")?;
        let ki = perm(
            dl.kernel_input_feature,
            dl.kernel_output_feature,
            &dl.kernel_spatial,
            "kernel",
        )?;
        let oi = perm(
            dl.output_batch,
            dl.output_feature,
            &dl.output_spatial,
            "output",
        )?;
        let (ib, ifd, isp) = (li[0], li[1], &li[2..]);
        let (kif, kof, ksp) = (ki[0], ki[1], &ki[2..]);
        let (ob, of, osp) = (oi[0], oi[1], &oi[2..]);
        let window = parse_window(inst.attrs.string(KnownAttr::Window), ns)?;
        let fgc = inst.attrs.int(KnownAttr::FeatureGroupCount).unwrap_or(1);
        let bgc = inst.attrs.int(KnownAttr::BatchGroupCount).unwrap_or(1);
        let (in_batch, in_feat, k_in, k_out) = (ld[ib], ld[ifd], rd[kif], rd[kof]);
        let ok = fgc >= 1
            && bgc >= 1
            && in_feat % fgc == 0
            && k_in == in_feat / fgc
            && k_out % fgc == 0
            && in_batch % bgc == 0
            && k_out % bgc == 0
            && od[ob] == in_batch / bgc
            && od[of] == k_out
            && (0..ns).all(|i| {
                window[i].size == rd[ksp[i]] && od[osp[i]] == window[i].output_size(ld[isp[i]])
            });
        if !ok {
            return Err(EvalError::msg(format!(
                "convolution of {} and {} does not give {shape} under its window and dim_labels",
                lhs.shape(),
                rhs.shape()
            )));
        }
        let wsizes: Vec<i64> = window.iter().map(|w| w.size).collect();
        let wcount: u64 = wsizes.iter().map(|&s| s as u64).product();
        self.charge(
            (n as u64)
                .saturating_mul(wcount)
                .saturating_mul(k_in as u64),
        )?;
        let (ls, rs) = (row_major_strides(ld), row_major_strides(rd));
        let cls = class_of(shape.element_type)?;
        let mac = Mac {
            lhs: converted(lhs, cls)?,
            rhs: converted(rhs, cls)?,
            cls,
        };
        let out_group = k_out / fgc;
        let depth_mult = k_out / bgc;
        let batch_group = in_batch / bgc;
        let mut out = Vec::with_capacity(n);
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        try_for_each_index(od, |o| {
            let fgi = o[of] / out_group;
            let bgi = o[of] / depth_mult;
            let batch = o[ob] + (bgi * batch_group) % in_batch;
            let lbase = batch * ls[ib];
            let rbase = o[of] * rs[kof];
            pairs.clear();
            try_for_each_index::<EvalError>(&wsizes, |w| {
                let mut l = lbase;
                let mut r = rbase;
                for i in 0..ns {
                    let Some(p) = window[i].input_position(o[osp[i]], w[i], ld[isp[i]]) else {
                        return Ok(());
                    };
                    l += p * ls[isp[i]];
                    let kw = if window[i].reversal {
                        window[i].size - 1 - w[i]
                    } else {
                        w[i]
                    };
                    r += kw * rs[ksp[i]];
                }
                for rz in 0..k_in {
                    let iz = fgi * k_in + rz;
                    pairs.push(((l + iz * ls[ifd]) as usize, (r + rz * rs[kif]) as usize));
                }
                Ok(())
            })?;
            out.push(mac.sum(pairs.iter().copied())?);
            Ok(())
        })?;
        self.finish(shape, out)
    }
}
