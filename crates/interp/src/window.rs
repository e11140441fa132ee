//! The `window={...}` attribute of `convolution`, `reduce-window` and
//! `select-and-scatter`, as XLA prints it:
//! `{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=0x1}`.

use crate::error::EvalError;

/// One window dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_lo: i64,
    pub pad_hi: i64,
    pub lhs_dilate: i64,
    pub rhs_dilate: i64,
    pub reversal: bool,
}

/// The number of positions in a window (saturating).
pub(crate) fn window_count(window: &[WindowDim]) -> u64 {
    window
        .iter()
        .fold(1u64, |acc, w| acc.saturating_mul(w.size as u64))
}

impl WindowDim {
    /// The output size of this window dimension over an input of `input`.
    pub(crate) fn output_size(&self, input: i64) -> i64 {
        let dilated_in = if input == 0 {
            0
        } else {
            (input - 1) * self.lhs_dilate + 1
        };
        let padded = dilated_in + self.pad_lo + self.pad_hi;
        let dilated_win = (self.size - 1) * self.rhs_dilate + 1;
        if padded < dilated_win {
            0
        } else {
            (padded - dilated_win) / self.stride + 1
        }
    }

    /// The input position read for output position `out` and window
    /// position `w`, or `None` when it falls in padding or a dilation hole.
    #[inline]
    pub(crate) fn input_position(&self, out: i64, w: i64, input: i64) -> Option<i64> {
        let pos = out * self.stride - self.pad_lo + w * self.rhs_dilate;
        if pos < 0 || pos % self.lhs_dilate != 0 {
            return None;
        }
        let p = pos / self.lhs_dilate;
        (p < input).then_some(p)
    }
}

fn parse_list(value: &str, key: &str) -> Result<Vec<i64>, EvalError> {
    value
        .split('x')
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| EvalError::msg(format!("window {key}= has a bad entry '{v}'")))
        })
        .collect()
}

/// Parses a window attribute for `rank` dimensions. A missing or empty
/// window is the trivial window of size 1 in every dimension.
pub(crate) fn parse_window(text: Option<&str>, rank: usize) -> Result<Vec<WindowDim>, EvalError> {
    let one = WindowDim {
        size: 1,
        stride: 1,
        pad_lo: 0,
        pad_hi: 0,
        lhs_dilate: 1,
        rhs_dilate: 1,
        reversal: false,
    };
    let mut dims = vec![one; rank];
    let Some(text) = text else { return Ok(dims) };
    let body = text
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim();
    let check = |key: &str, n: usize| -> Result<(), EvalError> {
        if n == rank {
            Ok(())
        } else {
            Err(EvalError::msg(format!(
                "window {key}= has {n} entries but the operation has {rank} window dimensions"
            )))
        }
    };
    for part in body.split_whitespace() {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| EvalError::msg(format!("window entry '{part}' has no '='")))?;
        match key {
            "size" | "stride" | "lhs_dilate" | "rhs_dilate" | "rhs_reversal" => {
                let v = parse_list(value, key)?;
                check(key, v.len())?;
                for (d, x) in dims.iter_mut().zip(v) {
                    match key {
                        "size" => d.size = x,
                        "stride" => d.stride = x,
                        "lhs_dilate" => d.lhs_dilate = x,
                        "rhs_dilate" => d.rhs_dilate = x,
                        _ => d.reversal = x != 0,
                    }
                }
            }
            "pad" => {
                let parts: Vec<&str> = value.split('x').collect();
                check(key, parts.len())?;
                for (d, p) in dims.iter_mut().zip(parts) {
                    let (lo, hi) = p.split_once('_').ok_or_else(|| {
                        EvalError::msg(format!("window pad entry '{p}' is not lo_hi"))
                    })?;
                    d.pad_lo = lo
                        .parse()
                        .map_err(|_| EvalError::msg(format!("bad window pad '{p}'")))?;
                    d.pad_hi = hi
                        .parse()
                        .map_err(|_| EvalError::msg(format!("bad window pad '{p}'")))?;
                }
            }
            _ => return Err(EvalError::unsupported(format!("window attribute '{key}'"))),
        }
    }
    for d in &dims {
        if d.size < 0 || d.stride <= 0 || d.lhs_dilate <= 0 || d.rhs_dilate <= 0 {
            return Err(EvalError::msg(format!(
                "window sizes must be non-negative and strides and dilations positive: {d:?}"
            )));
        }
        // Keeps every position computation far from i64 overflow.
        if [
            d.size,
            d.stride,
            d.pad_lo.unsigned_abs() as i64,
            d.pad_hi.unsigned_abs() as i64,
            d.lhs_dilate,
            d.rhs_dilate,
        ]
        .iter()
        .any(|&v| !(0..=1 << 20).contains(&v))
        {
            return Err(EvalError::unsupported("window entries above 2^20"));
        }
    }
    Ok(dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_xla_windows() {
        let w = parse_window(Some("{size=3x3 stride=2x2 pad=0_1x0_1}"), 2).unwrap();
        assert_eq!(w[0].size, 3);
        assert_eq!(w[1].stride, 2);
        assert_eq!((w[1].pad_lo, w[1].pad_hi), (0, 1));
        assert_eq!(w[0].output_size(32), 16);
        let w = parse_window(Some("{size=1x2 pad=0_0x2_0 rhs_reversal=0x1}"), 2).unwrap();
        assert!(w[1].reversal && !w[0].reversal);
        assert!(parse_window(Some("{size=3}"), 2).is_err());
        assert!(parse_window(Some("{size=3 stride=0}"), 1).is_err());
    }
}
