//! `fft`: the four XLA transforms (`FFT`, `IFFT`, `RFFT`, `IRFFT`) over the
//! minor `fft_length.len()` dimensions (one to three).
//!
//! Each transform is a plain DFT along one dimension at a time, in `f64`
//! with twiddle factors reduced modulo the length, summed in index order,
//! and rounded once to the result type, so results never depend on
//! layouts. Inverse transforms scale by `1/N`. `IRFFT` takes the inverse
//! complex transform over the outer transformed dimensions and then the
//! Hermitian (complex-to-real) inverse along the minor one, ignoring the
//! imaginary parts that a real signal's spectrum cannot have (as numpy and
//! XLA's CPU runtime do). `c128` does not fit the evaluator's slots, so
//! only the `f32`/`c64` transforms are evaluated.

use hlo::{Instruction, KnownAttr};
use shape::PrimitiveType;

use crate::element::{self, Class, Num};
use crate::error::EvalError;
use crate::eval::{Interp, ints};
use crate::value::{class_of, row_major_strides};

/// A complex number as (re, im).
type C = (f64, f64);

/// The transform kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Fft,
    Ifft,
    Rfft,
    Irfft,
}

/// Transforms `data` (row-major over `dims`) in place along dimension `d`.
/// `inverse` selects the sign `+` and the `1/N` scale.
fn dft_along(data: &mut [C], dims: &[i64], d: usize, inverse: bool) {
    let n = dims[d] as usize;
    if n == 0 || data.is_empty() {
        return;
    }
    let step = row_major_strides(dims)[d] as usize;
    let sign = if inverse { 1.0 } else { -1.0 };
    let twiddle: Vec<C> = (0..n)
        .map(|k| {
            let a = sign * 2.0 * std::f64::consts::PI * k as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    let scale = if inverse { 1.0 / n as f64 } else { 1.0 };
    let mut line = vec![(0.0, 0.0); n];
    let block = step * n;
    for outer in 0..data.len() / block {
        for inner in 0..step {
            let base = outer * block + inner;
            for (k, slot) in line.iter_mut().enumerate() {
                *slot = data[base + k * step];
            }
            for k in 0..n {
                let (mut re, mut im) = (0.0, 0.0);
                for (j, &(xr, xi)) in line.iter().enumerate() {
                    let (wr, wi) = twiddle[(j * k) % n];
                    re += xr * wr - xi * wi;
                    im += xr * wi + xi * wr;
                }
                data[base + k * step] = (re * scale, im * scale);
            }
        }
    }
}

impl Interp<'_> {
    /// Evaluates an `fft`.
    pub(crate) fn fft(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<Value, EvalError> {
        let ([x], shape, _) = self.array_operands(inst, ops)?;
        let kind = match inst.attrs.string(KnownAttr::FftType) {
            Some("FFT") => Kind::Fft,
            Some("IFFT") => Kind::Ifft,
            Some("RFFT") => Kind::Rfft,
            Some("IRFFT") => Kind::Irfft,
            Some(other) => return Err(EvalError::msg(format!("unknown fft_type {other}"))),
            None => return Err(EvalError::msg("fft without fft_type=")),
        };
        let lens = ints(inst, KnownAttr::FftLength)?.to_vec();
        let (in_dims, out_dims) = (&x.shape().dims, &shape.dims);
        let rank = in_dims.len();
        if lens.is_empty() || lens.len() > 3 || lens.len() > rank || out_dims.len() != rank {
            return Err(EvalError::msg(format!(
                "fft_length={lens:?} does not fit {} -> {shape}",
                x.shape()
            )));
        }
        let first = rank - lens.len();
        let last = rank - 1;
        let half = lens[lens.len() - 1] / 2 + 1;
        // The expected input and output minor dimensions per kind.
        let (want_in, want_out): (Vec<i64>, Vec<i64>) = match kind {
            Kind::Fft | Kind::Ifft | Kind::Rfft => {
                let mut o = lens.clone();
                if kind == Kind::Rfft {
                    *o.last_mut().unwrap_or(&mut 0) = half;
                }
                (lens.clone(), o)
            }
            Kind::Irfft => {
                let mut i = lens.clone();
                *i.last_mut().unwrap_or(&mut 0) = half;
                (i, lens.clone())
            }
        };
        let (tin, tout) = (x.element_type(), shape.element_type);
        let types_ok = match kind {
            Kind::Fft | Kind::Ifft => tin == PrimitiveType::C64 && tout == PrimitiveType::C64,
            Kind::Rfft => tin == PrimitiveType::F32 && tout == PrimitiveType::C64,
            Kind::Irfft => tin == PrimitiveType::C64 && tout == PrimitiveType::F32,
        };
        if !types_ok {
            if [tin, tout].contains(&PrimitiveType::C128)
                || [tin, tout].contains(&PrimitiveType::F64)
            {
                return Err(EvalError::unsupported(format!(
                    "{kind:?} of {} (c128 elements)",
                    x.shape()
                )));
            }
            return Err(EvalError::msg(format!(
                "{kind:?} of {} cannot give {shape}",
                x.shape()
            )));
        }
        if in_dims[first..] != want_in[..]
            || out_dims[first..] != want_out[..]
            || in_dims[..first] != out_dims[..first]
        {
            return Err(EvalError::msg(format!(
                "{kind:?} with fft_length={lens:?} cannot take {} to {shape}",
                x.shape()
            )));
        }
        let cls_in = class_of(tin)?;
        let mut data: Vec<C> = x
            .logical_bits()?
            .iter()
            .map(|&b| match element::decode(cls_in, b) {
                Num::C(re, im) => (re, im),
                Num::F(v) => (v, 0.0),
                _ => (f64::NAN, f64::NAN),
            })
            .collect();
        let count: i64 = in_dims
            .iter()
            .product::<i64>()
            .max(out_dims.iter().product());
        self.charge(lens.iter().map(|&l| count as u64 * l as u64).sum())?;
        let result = match kind {
            Kind::Fft | Kind::Ifft => {
                for d in first..rank {
                    dft_along(&mut data, in_dims, d, kind == Kind::Ifft);
                }
                data
            }
            Kind::Rfft => {
                for d in first..rank {
                    dft_along(&mut data, in_dims, d, false);
                }
                truncate_minor(&data, in_dims, half as usize)
            }
            Kind::Irfft => {
                for d in first..last {
                    dft_along(&mut data, in_dims, d, true);
                }
                hermitian_inverse(&data, in_dims, lens[lens.len() - 1] as usize)
            }
        };
        let cls_out = class_of(tout)?;
        let bits = result
            .into_iter()
            .map(|(re, im)| match cls_out {
                Class::Complex => element::encode(cls_out, Num::C(re, im)),
                _ => element::encode(cls_out, Num::F(re)),
            })
            .collect();
        self.finish(shape, bits)
    }
}

/// Keeps the first `keep` entries of every minor line.
fn truncate_minor(data: &[C], dims: &[i64], keep: usize) -> Vec<C> {
    let n = dims.last().copied().unwrap_or(1).max(1) as usize;
    data.chunks(n)
        .flat_map(|line| line[..keep].iter().copied())
        .collect()
}

/// The complex-to-real inverse along the minor dimension: each line holds
/// the `n/2 + 1` non-negative frequencies of a real signal of length `n`.
fn hermitian_inverse(data: &[C], dims: &[i64], n: usize) -> Vec<C> {
    let half = dims.last().copied().unwrap_or(1).max(1) as usize;
    let mut out = Vec::with_capacity(data.len() / half * n);
    let twiddle: Vec<C> = (0..n.max(1))
        .map(|k| {
            let a = 2.0 * std::f64::consts::PI * k as f64 / n as f64;
            (a.cos(), a.sin())
        })
        .collect();
    for line in data.chunks(half) {
        // The full spectrum: X[k] for k <= n/2, conj(X[n-k]) above.
        let full = |k: usize| -> C {
            if k < half {
                line[k]
            } else {
                let (re, im) = line[n - k];
                (re, -im)
            }
        };
        for t in 0..n {
            let mut re = 0.0;
            for k in 0..n {
                let (xr, xi) = full(k);
                let (wr, wi) = twiddle[(k * t) % n];
                re += xr * wr - xi * wi;
            }
            out.push((re / n as f64, 0.0));
        }
    }
    out
}

use crate::value::Value;
