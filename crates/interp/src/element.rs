//! Element values: how each primitive type is stored in a slot, decoded for
//! arithmetic and encoded back, and the scalar semantics of every
//! elementwise operation.
//!
//! Storage (one `u64` per slot, the canonical form):
//! - `pred`: 0 or 1;
//! - signed integers: the value sign-extended to 64 bits;
//! - unsigned integers: the value zero-extended;
//! - floating-point types: the type's own bit pattern in the low bits (so
//!   `bitcast-convert` sees the real bits);
//! - `c64`: real part's f32 bits in the low half, imaginary part's in the
//!   high half. `c128` does not fit a slot and is unsupported.
//!
//! Arithmetic: integers wrap at their width; `f64` is computed natively;
//! every narrower float type (`f32`, `bf16`, `f16`, the f8 family, `f4`) is
//! computed in `f64` and rounded once, to nearest even, to its type. For
//! `+ - * /` and `sqrt` of `f32` (and narrower) operands that single rounding
//! gives exactly the IEEE result of the narrow type; transcendental
//! functions are deterministic but not bit-identical to any particular libm.

use shape::PrimitiveType;

/// A decoded element, the working form of the arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Num {
    P(bool),
    S(i64),
    U(u64),
    F(f64),
    C(f64, f64),
}

/// How a minifloat (anything narrower than f32, and f32's cousins) encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    /// IEEE-like: the all-ones exponent holds infinities and NaNs.
    Ieee,
    /// No infinities; the all-ones bit pattern (either sign) is NaN.
    Fn,
    /// No infinities, no negative zero; the negative-zero pattern is NaN.
    Fnuz,
    /// No infinities and no NaN at all (f4e2m1fn).
    Finite,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MiniFormat {
    pub exp_bits: u32,
    pub man_bits: u32,
    pub bias: i32,
    pub special: Special,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloatFormat {
    F64,
    F32,
    Mini(MiniFormat),
}

/// The arithmetic class of an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Pred,
    Signed(u32),
    Unsigned(u32),
    Float(FloatFormat),
    /// c64: two f32 components.
    Complex,
}

const fn mini(exp_bits: u32, man_bits: u32, bias: i32, special: Special) -> FloatFormat {
    FloatFormat::Mini(MiniFormat {
        exp_bits,
        man_bits,
        bias,
        special,
    })
}

/// The class of a type, or why it cannot be evaluated.
pub(crate) fn class(ty: PrimitiveType) -> Result<Class, String> {
    use PrimitiveType as T;
    Ok(match ty {
        T::Pred => Class::Pred,
        T::S1 => Class::Signed(1),
        T::S2 => Class::Signed(2),
        T::S4 => Class::Signed(4),
        T::S8 => Class::Signed(8),
        T::S16 => Class::Signed(16),
        T::S32 => Class::Signed(32),
        T::S64 => Class::Signed(64),
        T::U1 => Class::Unsigned(1),
        T::U2 => Class::Unsigned(2),
        T::U4 => Class::Unsigned(4),
        T::U8 => Class::Unsigned(8),
        T::U16 => Class::Unsigned(16),
        T::U32 => Class::Unsigned(32),
        T::U64 => Class::Unsigned(64),
        T::F64 => Class::Float(FloatFormat::F64),
        T::F32 => Class::Float(FloatFormat::F32),
        T::F16 => Class::Float(mini(5, 10, 15, Special::Ieee)),
        T::Bf16 => Class::Float(mini(8, 7, 127, Special::Ieee)),
        T::F8E5M2 => Class::Float(mini(5, 2, 15, Special::Ieee)),
        T::F8E4M3 => Class::Float(mini(4, 3, 7, Special::Ieee)),
        T::F8E3M4 => Class::Float(mini(3, 4, 3, Special::Ieee)),
        T::F8E4M3Fn => Class::Float(mini(4, 3, 7, Special::Fn)),
        T::F8E4M3B11Fnuz => Class::Float(mini(4, 3, 11, Special::Fnuz)),
        T::F8E5M2Fnuz => Class::Float(mini(5, 2, 16, Special::Fnuz)),
        T::F8E4M3Fnuz => Class::Float(mini(4, 3, 8, Special::Fnuz)),
        T::F4E2M1Fn => Class::Float(mini(2, 1, 1, Special::Finite)),
        T::C64 => Class::Complex,
        T::F8E8M0Fnu | T::C128 | T::Token | T::Opaque => {
            return Err(format!(
                "element type {ty} is not supported by the evaluator"
            ));
        }
    })
}

/// The number of value bits of a type (`pred` counts 1).
pub(crate) fn bit_width(ty: PrimitiveType) -> u32 {
    ty.bit_width().unwrap_or(64)
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn sext(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let shift = 64 - bits;
        ((v << shift) as i64) >> shift
    }
}

// ---------------------------------------------------------------------------
// Minifloats.

impl MiniFormat {
    fn total_bits(self) -> u32 {
        1 + self.exp_bits + self.man_bits
    }
    fn sign_bit(self) -> u64 {
        1u64 << (self.exp_bits + self.man_bits)
    }
    fn exp_max(self) -> u64 {
        (1u64 << self.exp_bits) - 1
    }
    fn nan_bits(self) -> u64 {
        match self.special {
            Special::Ieee => {
                (self.exp_max() << self.man_bits) | (1u64 << self.man_bits.saturating_sub(1))
            }
            Special::Fn => (self.exp_max() << self.man_bits) | mask(self.man_bits),
            Special::Fnuz => self.sign_bit(),
            // No NaN: saturate to the largest finite value (documented).
            Special::Finite => (self.exp_max() << self.man_bits) | mask(self.man_bits),
        }
    }
    /// The largest finite magnitude.
    fn max_finite(self) -> f64 {
        let (e, m) = match self.special {
            Special::Ieee => (self.exp_max() - 1, mask(self.man_bits)),
            Special::Fn => (self.exp_max(), mask(self.man_bits) - 1),
            Special::Fnuz | Special::Finite => (self.exp_max(), mask(self.man_bits)),
        };
        fields_value(self, e, m)
    }
}

fn pow2(e: i32) -> f64 {
    // Exact for the exponent range of every supported format.
    2f64.powi(e)
}

fn fields_value(f: MiniFormat, e: u64, m: u64) -> f64 {
    let man = m as f64 / pow2(f.man_bits as i32);
    if e == 0 {
        man * pow2(1 - f.bias)
    } else {
        (1.0 + man) * pow2(e as i32 - f.bias)
    }
}

pub(crate) fn mini_decode(f: MiniFormat, bits: u64) -> f64 {
    let bits = bits & mask(f.total_bits());
    let neg = bits & f.sign_bit() != 0;
    let e = (bits >> f.man_bits) & f.exp_max();
    let m = bits & mask(f.man_bits);
    match f.special {
        Special::Ieee if e == f.exp_max() => {
            if m == 0 {
                return if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
            }
            return f64::NAN;
        }
        Special::Fn if e == f.exp_max() && m == mask(f.man_bits) => return f64::NAN,
        Special::Fnuz if bits == f.sign_bit() => return f64::NAN,
        _ => {}
    }
    let v = fields_value(f, e, m);
    if neg { -v } else { v }
}

/// Rounds `x` to the nearest value of the format (ties to even) and returns
/// its bits. Overflow gives infinity (IEEE formats), NaN (`fn`/`fnuz`
/// formats) or the largest finite value (formats without NaN).
pub(crate) fn mini_encode(f: MiniFormat, x: f64) -> u64 {
    if x.is_nan() {
        return f.nan_bits();
    }
    let neg = x.is_sign_negative();
    let sign = if neg && f.special != Special::Fnuz {
        f.sign_bit()
    } else {
        0
    };
    let a = x.abs();
    let overflow = |sign: u64| -> u64 {
        match f.special {
            Special::Ieee => sign | (f.exp_max() << f.man_bits),
            Special::Fn | Special::Fnuz => f.nan_bits(),
            Special::Finite => sign | (f.exp_max() << f.man_bits) | mask(f.man_bits),
        }
    };
    if a.is_infinite() {
        return overflow(if neg { f.sign_bit() } else { 0 });
    }
    if a == 0.0 {
        return sign;
    }
    let emin = 1 - f.bias; // exponent of the smallest normal
    // floor(log2(a)) from the f64 bits; `a` is finite and nonzero.
    let raw_exp = ((a.to_bits() >> 52) & 0x7ff) as i32;
    let e_a = if raw_exp == 0 { -1075 } else { raw_exp - 1023 };
    let e_q = e_a.max(emin) - f.man_bits as i32;
    let q = pow2(e_q);
    let r = (a / q).round_ties_even() * q;
    if r == 0.0 {
        return sign;
    }
    if r > f.max_finite() {
        return overflow(if neg { f.sign_bit() } else { 0 });
    }
    let sign = if neg { f.sign_bit() } else { 0 };
    if r < pow2(emin) {
        let m = (r / pow2(emin - f.man_bits as i32)) as u64;
        return sign | m;
    }
    let raw = ((r.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let e = (raw + f.bias) as u64;
    let m = ((r / pow2(raw) - 1.0) * pow2(f.man_bits as i32)) as u64;
    sign | (e << f.man_bits) | m
}

/// Rounds an f64 to a float format, returning the rounded value as f64.
pub(crate) fn round_to(fmt: FloatFormat, x: f64) -> f64 {
    match fmt {
        FloatFormat::F64 => x,
        FloatFormat::F32 => x as f32 as f64,
        FloatFormat::Mini(m) => mini_decode(m, mini_encode(m, x)),
    }
}

fn float_decode(fmt: FloatFormat, bits: u64) -> f64 {
    match fmt {
        FloatFormat::F64 => f64::from_bits(bits),
        FloatFormat::F32 => f32::from_bits(bits as u32) as f64,
        FloatFormat::Mini(m) => mini_decode(m, bits),
    }
}

fn float_encode(fmt: FloatFormat, x: f64) -> u64 {
    match fmt {
        FloatFormat::F64 => x.to_bits(),
        FloatFormat::F32 => (x as f32).to_bits() as u64,
        FloatFormat::Mini(m) => mini_encode(m, x),
    }
}

// ---------------------------------------------------------------------------
// Decode / encode.

/// Decodes a canonical slot value.
pub(crate) fn decode(cls: Class, bits: u64) -> Num {
    match cls {
        Class::Pred => Num::P(bits & 1 != 0),
        Class::Signed(_) => Num::S(bits as i64),
        Class::Unsigned(_) => Num::U(bits),
        Class::Float(f) => Num::F(float_decode(f, bits)),
        Class::Complex => Num::C(
            f32::from_bits(bits as u32) as f64,
            f32::from_bits((bits >> 32) as u32) as f64,
        ),
    }
}

/// Encodes a value into the canonical slot form of `cls`, converting it
/// first (with `convert` semantics) when its variant does not match.
pub(crate) fn encode(cls: Class, n: Num) -> u64 {
    match cls {
        Class::Pred => u64::from(to_bool(n)),
        Class::Signed(w) => sext(to_i64_wrapping(n) as u64, w) as u64,
        Class::Unsigned(w) => to_u64_wrapping(n) & mask(w),
        Class::Float(f) => float_encode(f, to_f64(n)),
        Class::Complex => {
            let (re, im) = match n {
                Num::C(re, im) => (re, im),
                other => (to_f64(other), 0.0),
            };
            u64::from((re as f32).to_bits()) | (u64::from((im as f32).to_bits()) << 32)
        }
    }
}

/// The raw bit pattern of a canonical slot value, masked to the type width.
pub(crate) fn raw_bits(ty: PrimitiveType, bits: u64) -> u64 {
    bits & mask(bit_width(ty))
}

/// The canonical slot value of a raw bit pattern of the type's width.
pub(crate) fn from_raw(ty: PrimitiveType, raw: u64) -> Result<u64, String> {
    let w = bit_width(ty);
    Ok(match class(ty)? {
        Class::Signed(_) => sext(raw, w) as u64,
        Class::Pred => raw & 1,
        _ => raw & mask(w),
    })
}

fn to_bool(n: Num) -> bool {
    match n {
        Num::P(b) => b,
        Num::S(v) => v != 0,
        Num::U(v) => v != 0,
        Num::F(x) => x != 0.0,
        Num::C(re, im) => re != 0.0 || im != 0.0,
    }
}

fn to_f64(n: Num) -> f64 {
    match n {
        Num::P(b) => f64::from(u8::from(b)),
        Num::S(v) => v as f64,
        Num::U(v) => v as f64,
        Num::F(x) => x,
        Num::C(re, _) => re,
    }
}

fn to_i64_wrapping(n: Num) -> i64 {
    match n {
        Num::P(b) => i64::from(b),
        Num::S(v) => v,
        Num::U(v) => v as i64,
        Num::F(x) | Num::C(x, _) => x as i64,
    }
}

fn to_u64_wrapping(n: Num) -> u64 {
    match n {
        Num::P(b) => u64::from(b),
        Num::S(v) => v as u64,
        Num::U(v) => v,
        Num::F(x) | Num::C(x, _) => x as u64,
    }
}

/// `convert` from one class to another: integers wrap (truncate), floats
/// convert to integers saturating with NaN → 0, floats round to nearest
/// even, anything → pred is `!= 0`, complex → real drops the imaginary part.
pub(crate) fn convert(to: Class, n: Num) -> u64 {
    match (to, n) {
        (Class::Signed(w), Num::F(x) | Num::C(x, _)) => {
            let (lo, hi) = signed_range(w);
            let v = if x.is_nan() {
                0
            } else if x <= lo as f64 {
                lo
            } else if x >= hi as f64 {
                hi
            } else {
                x as i64
            };
            v as u64
        }
        (Class::Unsigned(w), Num::F(x) | Num::C(x, _)) => {
            let hi = mask(w);
            if x.is_nan() || x <= 0.0 {
                0
            } else if x >= hi as f64 {
                hi
            } else {
                x as u64
            }
        }
        _ => encode(to, n),
    }
}

fn signed_range(w: u32) -> (i64, i64) {
    if w >= 64 {
        (i64::MIN, i64::MAX)
    } else {
        (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1)
    }
}

// ---------------------------------------------------------------------------
// Scalar semantics.

/// The elementwise unary operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unary {
    Abs,
    Negate,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Cbrt,
    Tanh,
    Sin,
    Cos,
    Tan,
    Erf,
    Logistic,
    Floor,
    Ceil,
    RoundAfz,
    RoundEven,
    Sign,
    IsFinite,
    Not,
    Popcnt,
    Clz,
    Real,
    Imag,
}

/// The elementwise binary operations (compare is separate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Max,
    Min,
    Pow,
    Atan2,
    And,
    Or,
    Xor,
    Shl,
    ShrA,
    ShrL,
    Complex,
}

/// A comparison direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Direction {
    pub(crate) fn parse(s: &str) -> Option<Direction> {
        Some(match s {
            "EQ" => Direction::Eq,
            "NE" => Direction::Ne,
            "LT" => Direction::Lt,
            "LE" => Direction::Le,
            "GT" => Direction::Gt,
            "GE" => Direction::Ge,
            _ => return None,
        })
    }
}

/// Applies a unary op to a value of class `cls`; the result is in the
/// class `out` (different for `abs` of complex, `is-finite`, `real`, ...).
pub(crate) fn unary(op: Unary, cls: Class, x: Num) -> Result<Num, String> {
    use Unary as U;
    let bad = || Err(format!("{op:?} is not defined for {cls:?} elements"));
    Ok(match x {
        Num::F(v) => match op {
            U::Abs => Num::F(v.abs()),
            U::Negate => Num::F(-v),
            U::Exp => Num::F(v.exp()),
            U::Expm1 => Num::F(v.exp_m1()),
            U::Log => Num::F(v.ln()),
            U::Log1p => Num::F(v.ln_1p()),
            U::Sqrt => Num::F(v.sqrt()),
            U::Rsqrt => Num::F(1.0 / v.sqrt()),
            U::Cbrt => Num::F(v.cbrt()),
            U::Tanh => Num::F(v.tanh()),
            U::Sin => Num::F(v.sin()),
            U::Cos => Num::F(v.cos()),
            U::Tan => Num::F(v.tan()),
            U::Erf => Num::F(erf(v)),
            U::Logistic => Num::F(1.0 / (1.0 + (-v).exp())),
            U::Floor => Num::F(v.floor()),
            U::Ceil => Num::F(v.ceil()),
            U::RoundAfz => Num::F(v.round()),
            U::RoundEven => Num::F(v.round_ties_even()),
            // NaN and ±0 are their own sign.
            U::Sign => Num::F(if v.is_nan() || v == 0.0 {
                v
            } else {
                v.signum()
            }),
            U::IsFinite => Num::P(v.is_finite()),
            U::Real => Num::F(v),
            U::Imag => Num::F(0.0),
            U::Not | U::Popcnt | U::Clz => return bad(),
        },
        Num::S(v) => match op {
            U::Abs => Num::S(v.wrapping_abs()),
            U::Negate => Num::S(v.wrapping_neg()),
            U::Sign => Num::S(v.signum()),
            U::Not => Num::S(!v),
            U::Popcnt | U::Clz => {
                let Class::Signed(w) = cls else { return bad() };
                let raw = v as u64 & mask(w);
                Num::S(bit_count(op, raw, w))
            }
            _ => return bad(),
        },
        Num::U(v) => match op {
            U::Abs => Num::U(v),
            U::Negate => Num::U(v.wrapping_neg()),
            U::Sign => Num::U(u64::from(v != 0)),
            U::Not => Num::U(!v),
            U::Popcnt | U::Clz => {
                let Class::Unsigned(w) = cls else {
                    return bad();
                };
                Num::U(bit_count(op, v & mask(w), w) as u64)
            }
            _ => return bad(),
        },
        Num::P(b) => match op {
            U::Not => Num::P(!b),
            U::Abs | U::Sign => Num::P(b),
            _ => return bad(),
        },
        Num::C(re, im) => match op {
            U::Abs => Num::F(re.hypot(im)),
            U::Negate => Num::C(-re, -im),
            U::Real => Num::F(re),
            U::Imag => Num::F(im),
            U::IsFinite => Num::P(re.is_finite() && im.is_finite()),
            U::Exp => {
                let m = re.exp();
                Num::C(m * im.cos(), m * im.sin())
            }
            U::Sign => {
                let a = re.hypot(im);
                if a == 0.0 {
                    Num::C(0.0, 0.0)
                } else {
                    Num::C(re / a, im / a)
                }
            }
            _ => return bad(),
        },
    })
}

fn bit_count(op: Unary, raw: u64, w: u32) -> i64 {
    if op == Unary::Popcnt {
        i64::from(raw.count_ones())
    } else {
        i64::from(raw.leading_zeros()) - i64::from(64 - w.min(64))
    }
}

/// Applies a binary op to two values of class `cls`.
pub(crate) fn binary(op: Binary, cls: Class, a: Num, b: Num) -> Result<Num, String> {
    use Binary as B;
    let bad = || Err(format!("{op:?} is not defined for {cls:?} elements"));
    Ok(match (a, b) {
        (Num::F(x), Num::F(y)) => match op {
            B::Add => Num::F(x + y),
            B::Sub => Num::F(x - y),
            B::Mul => Num::F(x * y),
            B::Div => Num::F(x / y),
            B::Rem => Num::F(x % y),
            B::Max => Num::F(fmax(x, y)),
            B::Min => Num::F(fmin(x, y)),
            B::Pow => Num::F(x.powf(y)),
            B::Atan2 => Num::F(x.atan2(y)),
            B::Complex => Num::C(x, y),
            _ => return bad(),
        },
        (Num::S(x), Num::S(y)) => {
            let Class::Signed(w) = cls else { return bad() };
            Num::S(match op {
                B::Add => x.wrapping_add(y),
                B::Sub => x.wrapping_sub(y),
                B::Mul => x.wrapping_mul(y),
                B::Div => {
                    if y == 0 {
                        -1
                    } else {
                        x.wrapping_div(y)
                    }
                }
                B::Rem => {
                    if y == 0 {
                        x
                    } else {
                        x.wrapping_rem(y)
                    }
                }
                B::Max => x.max(y),
                B::Min => x.min(y),
                B::Pow => ipow_signed(x, y),
                B::And => x & y,
                B::Or => x | y,
                B::Xor => x ^ y,
                B::Shl => {
                    if (y as u64 & mask(w)) >= u64::from(w) {
                        0
                    } else {
                        x.wrapping_shl(y as u32)
                    }
                }
                B::ShrA => {
                    let s = (y as u64 & mask(w)).min(u64::from(w) - 1);
                    x >> s
                }
                B::ShrL => {
                    let s = y as u64 & mask(w);
                    if s >= u64::from(w) {
                        0
                    } else {
                        ((x as u64 & mask(w)) >> s) as i64
                    }
                }
                _ => return bad(),
            })
        }
        (Num::U(x), Num::U(y)) => {
            let Class::Unsigned(w) = cls else {
                return bad();
            };
            Num::U(match op {
                B::Add => x.wrapping_add(y),
                B::Sub => x.wrapping_sub(y),
                B::Mul => x.wrapping_mul(y),
                B::Div => x.checked_div(y).unwrap_or(u64::MAX),
                B::Rem => {
                    if y == 0 {
                        x
                    } else {
                        x % y
                    }
                }
                B::Max => x.max(y),
                B::Min => x.min(y),
                B::Pow => ipow_unsigned(x, y),
                B::And => x & y,
                B::Or => x | y,
                B::Xor => x ^ y,
                B::Shl => {
                    if y >= u64::from(w) {
                        0
                    } else {
                        x << y
                    }
                }
                B::ShrA => {
                    // Arithmetic shift of an unsigned value: shift in the
                    // type's top bit.
                    let sx = sext(x, w);
                    let s = y.min(u64::from(w) - 1);
                    (sx >> s) as u64
                }
                B::ShrL => {
                    if y >= u64::from(w) {
                        0
                    } else {
                        x >> y
                    }
                }
                _ => return bad(),
            })
        }
        (Num::P(x), Num::P(y)) => Num::P(match op {
            B::And | B::Min | B::Mul => x & y,
            B::Or | B::Max | B::Add => x | y,
            B::Xor | B::Sub => x ^ y,
            _ => return bad(),
        }),
        (Num::C(ar, ai), Num::C(br, bi)) => match op {
            B::Add => Num::C(ar + br, ai + bi),
            B::Sub => Num::C(ar - br, ai - bi),
            B::Mul => Num::C(ar * br - ai * bi, ar * bi + ai * br),
            B::Div => {
                let d = br * br + bi * bi;
                Num::C((ar * br + ai * bi) / d, (ai * br - ar * bi) / d)
            }
            _ => return bad(),
        },
        _ => return Err(format!("{op:?} applied to mismatched element kinds")),
    })
}

/// The f32 fast path of a binary op, when there is one. It computes
/// exactly what [`binary`] computes for f32 elements (the single f32
/// rounding of `+ - * /` equals rounding the f64 result), and every caller
/// that has one uses it, so no two paths can disagree.
pub(crate) fn f32_binary(op: Binary) -> Option<fn(f32, f32) -> f32> {
    Some(match op {
        Binary::Add => |a, b| a + b,
        Binary::Sub => |a, b| a - b,
        Binary::Mul => |a, b| a * b,
        Binary::Div => |a, b| a / b,
        Binary::Max => |a, b| fmax(f64::from(a), f64::from(b)) as f32,
        Binary::Min => |a, b| fmin(f64::from(a), f64::from(b)) as f32,
        _ => return None,
    })
}

/// A binary op on canonical bits, from class `cin` to class `cout`.
pub(crate) fn binary_bits(
    op: Binary,
    cin: Class,
    cout: Class,
    a: u64,
    b: u64,
) -> Result<u64, String> {
    const F32: Class = Class::Float(FloatFormat::F32);
    if cin == F32
        && cout == F32
        && let Some(f) = f32_binary(op)
    {
        return Ok(u64::from(
            f(f32::from_bits(a as u32), f32::from_bits(b as u32)).to_bits(),
        ));
    }
    Ok(encode(
        cout,
        binary(op, cin, decode(cin, a), decode(cin, b))?,
    ))
}

/// NaN-propagating maximum; `max(-0, +0)` is `+0` whatever the order.
fn fmax(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x > y || (x == y && x.is_sign_positive()) {
        x
    } else {
        y
    }
}

/// NaN-propagating minimum; `min(-0, +0)` is `-0` whatever the order.
fn fmin(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x < y || (x == y && x.is_sign_negative()) {
        x
    } else {
        y
    }
}

fn ipow_signed(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    ipow_unsigned(base as u64, exp as u64) as i64
}

fn ipow_unsigned(mut base: u64, mut exp: u64) -> u64 {
    let mut acc = 1u64;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exp >>= 1;
    }
    acc
}

/// A totally ordered key for a float bit pattern of `bits` width
/// (`TOTALORDER`: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN).
fn total_order_key(raw: u64, bits: u32) -> u64 {
    let sign = 1u64 << (bits - 1);
    if raw & sign != 0 {
        !raw & mask(bits)
    } else {
        raw | sign
    }
}

/// Compares two values of class `cls`. `total_order` selects `TOTALORDER`
/// for floats; otherwise floats compare as IEEE (NaN unordered).
pub(crate) fn compare(
    dir: Direction,
    total_order: bool,
    cls: Class,
    ty: PrimitiveType,
    a_bits: u64,
    b_bits: u64,
) -> Result<bool, String> {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match cls {
        Class::Pred => Some((a_bits & 1).cmp(&(b_bits & 1))),
        Class::Signed(_) => Some((a_bits as i64).cmp(&(b_bits as i64))),
        Class::Unsigned(_) => Some(a_bits.cmp(&b_bits)),
        Class::Float(f) => {
            if total_order {
                let w = bit_width(ty);
                Some(
                    total_order_key(raw_bits(ty, a_bits), w)
                        .cmp(&total_order_key(raw_bits(ty, b_bits), w)),
                )
            } else {
                float_decode(f, a_bits).partial_cmp(&float_decode(f, b_bits))
            }
        }
        Class::Complex => {
            let (a, b) = (decode(cls, a_bits), decode(cls, b_bits));
            let eq = a == b;
            return match dir {
                Direction::Eq => Ok(eq),
                Direction::Ne => Ok(!eq),
                _ => Err("complex numbers are only compared with EQ or NE".into()),
            };
        }
    };
    Ok(match ord {
        None => dir == Direction::Ne,
        Some(o) => match dir {
            Direction::Eq => o == Ordering::Equal,
            Direction::Ne => o != Ordering::Equal,
            Direction::Lt => o == Ordering::Less,
            Direction::Le => o != Ordering::Greater,
            Direction::Gt => o == Ordering::Greater,
            Direction::Ge => o != Ordering::Less,
        },
    })
}

/// The error function, from the complementary error function's Chebyshev
/// fit (Numerical Recipes `erfcc`, fractional error below 1.2e-7): plenty
/// for f32 and deterministic, which is what equivalence checking needs.
fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 { 1.0 - erfc } else { erfc - 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(ty: PrimitiveType) -> MiniFormat {
        match class(ty) {
            Ok(Class::Float(FloatFormat::Mini(m))) => m,
            other => panic!("{ty} is not a minifloat: {other:?}"),
        }
    }

    #[test]
    fn bf16_and_f16_round_to_nearest_even() {
        let bf = fmt(PrimitiveType::Bf16);
        assert_eq!(mini_encode(bf, 1.0), 0x3f80);
        assert_eq!(mini_encode(bf, -2.0), 0xc000);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: rounds to even (1).
        assert_eq!(mini_encode(bf, 1.0 + 2f64.powi(-8)), 0x3f80);
        assert_eq!(mini_encode(bf, 1.0 + 3.0 * 2f64.powi(-8)), 0x3f82);
        assert_eq!(mini_encode(bf, f64::INFINITY), 0x7f80);
        assert_eq!(mini_decode(bf, 0x3f80), 1.0);
        assert!(mini_decode(bf, mini_encode(bf, f64::NAN)).is_nan());
        let h = fmt(PrimitiveType::F16);
        assert_eq!(mini_encode(h, 65504.0), 0x7bff);
        assert_eq!(mini_encode(h, 65520.0), 0x7c00); // overflows to inf
        assert_eq!(mini_encode(h, 2f64.powi(-24)), 0x0001); // smallest subnormal
        assert_eq!(mini_encode(h, 2f64.powi(-26)), 0x0000); // rounds to zero
        assert_eq!(mini_decode(h, 0x0001), 2f64.powi(-24));
        assert_eq!(mini_encode(h, -0.0), 0x8000);
    }

    #[test]
    fn every_f8_pattern_round_trips() {
        for ty in [
            PrimitiveType::F8E5M2,
            PrimitiveType::F8E4M3,
            PrimitiveType::F8E4M3Fn,
            PrimitiveType::F8E4M3B11Fnuz,
            PrimitiveType::F8E3M4,
            PrimitiveType::F8E5M2Fnuz,
            PrimitiveType::F8E4M3Fnuz,
        ] {
            let f = fmt(ty);
            for bits in 0..256u64 {
                let v = mini_decode(f, bits);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(mini_encode(f, v), bits, "{ty} {bits:#x} = {v}");
            }
        }
        let e4m3fn = fmt(PrimitiveType::F8E4M3Fn);
        assert_eq!(mini_decode(e4m3fn, 0x7e), 448.0);
        assert!(mini_decode(e4m3fn, 0x7f).is_nan());
    }

    #[test]
    fn integer_semantics_follow_xla() {
        let s32 = Class::Signed(32);
        let q = |op, a, b| binary(op, s32, Num::S(a), Num::S(b)).unwrap();
        assert_eq!(q(Binary::Div, 7, 0), Num::S(-1));
        assert_eq!(q(Binary::Rem, 7, 0), Num::S(7));
        assert_eq!(
            encode(s32, q(Binary::Div, i32::MIN as i64, -1)),
            i32::MIN as i64 as u64
        );
        assert_eq!(q(Binary::Shl, 1, 40), Num::S(0));
        assert_eq!(q(Binary::ShrA, -8, 40), Num::S(-1));
        assert_eq!(encode(Class::Signed(8), Num::S(200)), (-56i64) as u64);
        assert_eq!(convert(Class::Signed(8), Num::F(1e9)), 127);
        assert_eq!(convert(Class::Unsigned(8), Num::F(-3.0)), 0);
        assert_eq!(convert(Class::Signed(32), Num::F(f64::NAN)), 0);
    }
}
