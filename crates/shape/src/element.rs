//! Element (primitive) types, with their text names and storage widths.

use std::fmt;

/// An XLA primitive type: the element type of an array, or one of the
/// non-array leaf kinds (`token`, `opaque`).
///
/// Tuples and buffers are not primitive types here; they are variants of
/// [`crate::Shape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PrimitiveType {
    Pred,
    S1,
    S2,
    S4,
    S8,
    S16,
    S32,
    S64,
    U1,
    U2,
    U4,
    U8,
    U16,
    U32,
    U64,
    F16,
    Bf16,
    F32,
    F64,
    F8E5M2,
    F8E4M3,
    F8E4M3Fn,
    F8E4M3B11Fnuz,
    F8E3M4,
    F8E5M2Fnuz,
    F8E4M3Fnuz,
    F4E2M1Fn,
    F8E8M0Fnu,
    C64,
    C128,
    Token,
    Opaque,
}

/// Every primitive type with its lowercase text name, as XLA prints it.
const NAMES: &[(PrimitiveType, &str)] = &[
    (PrimitiveType::Pred, "pred"),
    (PrimitiveType::S1, "s1"),
    (PrimitiveType::S2, "s2"),
    (PrimitiveType::S4, "s4"),
    (PrimitiveType::S8, "s8"),
    (PrimitiveType::S16, "s16"),
    (PrimitiveType::S32, "s32"),
    (PrimitiveType::S64, "s64"),
    (PrimitiveType::U1, "u1"),
    (PrimitiveType::U2, "u2"),
    (PrimitiveType::U4, "u4"),
    (PrimitiveType::U8, "u8"),
    (PrimitiveType::U16, "u16"),
    (PrimitiveType::U32, "u32"),
    (PrimitiveType::U64, "u64"),
    (PrimitiveType::F16, "f16"),
    (PrimitiveType::Bf16, "bf16"),
    (PrimitiveType::F32, "f32"),
    (PrimitiveType::F64, "f64"),
    (PrimitiveType::F8E5M2, "f8e5m2"),
    (PrimitiveType::F8E4M3, "f8e4m3"),
    (PrimitiveType::F8E4M3Fn, "f8e4m3fn"),
    (PrimitiveType::F8E4M3B11Fnuz, "f8e4m3b11fnuz"),
    (PrimitiveType::F8E3M4, "f8e3m4"),
    (PrimitiveType::F8E5M2Fnuz, "f8e5m2fnuz"),
    (PrimitiveType::F8E4M3Fnuz, "f8e4m3fnuz"),
    (PrimitiveType::F4E2M1Fn, "f4e2m1fn"),
    (PrimitiveType::F8E8M0Fnu, "f8e8m0fnu"),
    (PrimitiveType::C64, "c64"),
    (PrimitiveType::C128, "c128"),
    (PrimitiveType::Token, "token"),
    (PrimitiveType::Opaque, "opaque"),
];

impl PrimitiveType {
    /// All primitive types, in declaration order.
    pub fn all() -> impl Iterator<Item = PrimitiveType> {
        NAMES.iter().map(|&(t, _)| t)
    }

    /// The lowercase name used in HLO text, e.g. `bf16`.
    pub fn name(self) -> &'static str {
        // The table is in declaration order, so the discriminant indexes it.
        NAMES[self as usize].1
    }

    /// Looks a type up by its HLO text name.
    pub fn from_name(name: &str) -> Option<PrimitiveType> {
        NAMES.iter().find(|&&(_, n)| n == name).map(|&(t, _)| t)
    }

    /// True for types that can be the element type of an array.
    pub fn is_array_type(self) -> bool {
        !matches!(self, PrimitiveType::Token | PrimitiveType::Opaque)
    }

    /// True for the unsigned integer types, the only ones XLA allows as
    /// sparse index or pointer types.
    pub fn is_unsigned_integer(self) -> bool {
        use PrimitiveType::*;
        matches!(self, U1 | U2 | U4 | U8 | U16 | U32 | U64)
    }

    /// True for signed and unsigned integer types.
    pub fn is_integer(self) -> bool {
        use PrimitiveType::*;
        self.is_unsigned_integer() || matches!(self, S1 | S2 | S4 | S8 | S16 | S32 | S64)
    }

    /// True for real floating-point types, the f8 and f4 families included.
    pub fn is_float(self) -> bool {
        use PrimitiveType::*;
        matches!(
            self,
            F16 | Bf16
                | F32
                | F64
                | F8E5M2
                | F8E4M3
                | F8E4M3Fn
                | F8E4M3B11Fnuz
                | F8E3M4
                | F8E5M2Fnuz
                | F8E4M3Fnuz
                | F4E2M1Fn
                | F8E8M0Fnu
        )
    }

    /// True for the complex types.
    pub fn is_complex(self) -> bool {
        matches!(self, PrimitiveType::C64 | PrimitiveType::C128)
    }

    /// The number of bits of information in one element: 4 for `s4`, 1 for
    /// `pred`, 64 for `c64`. `None` for `token` and `opaque`.
    pub fn bit_width(self) -> Option<u32> {
        use PrimitiveType::*;
        Some(match self {
            Pred | S1 | U1 => 1,
            S2 | U2 => 2,
            S4 | U4 | F4E2M1Fn => 4,
            S8 | U8 | F8E5M2 | F8E4M3 | F8E4M3Fn | F8E4M3B11Fnuz | F8E3M4 | F8E5M2Fnuz
            | F8E4M3Fnuz | F8E8M0Fnu => 8,
            S16 | U16 | F16 | Bf16 => 16,
            S32 | U32 | F32 => 32,
            S64 | U64 | F64 | C64 => 64,
            C128 => 128,
            Token | Opaque => return None,
        })
    }

    /// The bits one element occupies in a buffer when the layout does not
    /// say otherwise with `E(bits)`.
    ///
    /// This follows XLA's `ByteSizeOfPrimitiveType`: every type narrower than
    /// a byte (`pred`, `s4`, `u2`, ...) takes a whole byte unless the layout
    /// packs it with an explicit element size, as in `s4[8]{0:E(4)}`.
    pub fn default_storage_bits(self) -> Option<u32> {
        self.bit_width().map(|bits| bits.max(8))
    }
}

impl fmt::Display for PrimitiveType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_follow_declaration_order() {
        for (i, t) in PrimitiveType::all().enumerate() {
            assert_eq!(t as usize, i, "{t:?} is out of order in NAMES");
            assert_eq!(PrimitiveType::from_name(t.name()), Some(t));
        }
        assert_eq!(PrimitiveType::from_name("f128"), None);
    }

    #[test]
    fn storage_widths_follow_xla() {
        assert_eq!(PrimitiveType::Pred.default_storage_bits(), Some(8));
        assert_eq!(PrimitiveType::S4.default_storage_bits(), Some(8));
        assert_eq!(PrimitiveType::S4.bit_width(), Some(4));
        assert_eq!(PrimitiveType::Bf16.default_storage_bits(), Some(16));
        assert_eq!(PrimitiveType::C128.default_storage_bits(), Some(128));
        assert_eq!(PrimitiveType::Token.default_storage_bits(), None);
    }
}
