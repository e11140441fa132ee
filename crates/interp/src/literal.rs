//! Parsing of XLA literal text (the payload of `constant(...)`).
//!
//! Scalars (`0`, `-1.5e-05`, `inf`, `-inf`, `nan`, `true`), arrays as nested
//! braces in logical row-major order (`{ {1, 2}, {3, 4} }`), and complex
//! numbers as `(re, im)`. The nesting must match the shape exactly.

use shape::ArrayShape;

use crate::element::{self, Class, Num};
use crate::error::EvalError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Open,
    Close,
    LParen,
    RParen,
    Word(&'a str),
}

/// The token of a one-byte punctuation mark.
fn punct(c: u8) -> Option<Tok<'static>> {
    match c {
        b'{' => Some(Tok::Open),
        b'}' => Some(Tok::Close),
        b'(' => Some(Tok::LParen),
        b')' => Some(Tok::RParen),
        _ => None,
    }
}

fn tokenize(text: &str) -> Vec<Tok<'_>> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(t) = punct(c) {
            out.push(t);
            i += 1;
        } else if b", \n\t\r".contains(&c) {
            i += 1;
        } else {
            let start = i;
            while i < bytes.len() && !b"{}(), \n\t\r".contains(&bytes[i]) {
                i += 1;
            }
            out.push(Tok::Word(&text[start..i]));
        }
    }
    out
}

struct Parser<'a> {
    toks: Vec<Tok<'a>>,
    pos: usize,
    cls: Class,
    ty: shape::PrimitiveType,
    out: Vec<u64>,
}

fn err(msg: impl Into<String>) -> EvalError {
    EvalError::msg(format!("constant literal: {}", msg.into()))
}

impl<'a> Parser<'a> {
    fn next(&mut self) -> Option<Tok<'a>> {
        let t = self.toks.get(self.pos).copied();
        self.pos += 1;
        t
    }

    fn level(&mut self, dims: &[i64]) -> Result<(), EvalError> {
        let Some((&n, rest)) = dims.split_first() else {
            return self.scalar();
        };
        match self.next() {
            Some(Tok::Open) => {}
            other => return Err(err(format!("expected '{{' but found {other:?}"))),
        }
        if let Some(Tok::Word("...")) = self.toks.get(self.pos) {
            return Err(err(
                "the literal is elided ('{...}'); the evaluator needs its values",
            ));
        }
        for _ in 0..n {
            self.level(rest)?;
        }
        match self.next() {
            Some(Tok::Close) => Ok(()),
            other => Err(err(format!(
                "expected '}}' after {n} entries but found {other:?}"
            ))),
        }
    }

    fn scalar(&mut self) -> Result<(), EvalError> {
        if self.cls == Class::Complex {
            if self.next() != Some(Tok::LParen) {
                return Err(err("expected '(' to open a complex number"));
            }
            let re = self.float_word()?;
            let im = self.float_word()?;
            if self.next() != Some(Tok::RParen) {
                return Err(err("expected ')' to close a complex number"));
            }
            self.out.push(element::encode(self.cls, Num::C(re, im)));
            return Ok(());
        }
        let word = match self.next() {
            Some(Tok::Word(w)) => w,
            other => return Err(err(format!("expected a value but found {other:?}"))),
        };
        let bits = match self.cls {
            Class::Pred => match word {
                "true" | "1" => 1,
                "false" | "0" => 0,
                _ => return Err(err(format!("'{word}' is not a pred value"))),
            },
            Class::Signed(_) => {
                let v: i64 = word
                    .parse()
                    .map_err(|_| err(format!("'{word}' is not a {} value", self.ty)))?;
                let bits = element::encode(self.cls, Num::S(v));
                if bits as i64 != v {
                    return Err(err(format!("{v} does not fit {}", self.ty)));
                }
                bits
            }
            Class::Unsigned(_) => {
                let v: u64 = word
                    .parse()
                    .map_err(|_| err(format!("'{word}' is not a {} value", self.ty)))?;
                let bits = element::encode(self.cls, Num::U(v));
                if bits != v {
                    return Err(err(format!("{v} does not fit {}", self.ty)));
                }
                bits
            }
            Class::Float(element::FloatFormat::F32) => {
                // Parse f32 directly: correctly rounded, no double rounding.
                let x: f32 = match special_float(word) {
                    Some(x) => x as f32,
                    None => word
                        .parse()
                        .map_err(|_| err(format!("'{word}' is not a float")))?,
                };
                u64::from(x.to_bits())
            }
            Class::Float(_) => element::encode(self.cls, Num::F(self.float(word)?)),
            Class::Complex => return Err(err("internal: complex literals are parsed above")),
        };
        self.out.push(bits);
        Ok(())
    }

    fn float_word(&mut self) -> Result<f64, EvalError> {
        match self.next() {
            Some(Tok::Word(w)) => self.float(w),
            other => Err(err(format!("expected a number but found {other:?}"))),
        }
    }

    fn float(&self, word: &str) -> Result<f64, EvalError> {
        parse_float_word(word).ok_or_else(|| err(format!("'{word}' is not a float")))
    }
}

/// The special float spellings XLA prints.
fn special_float(word: &str) -> Option<f64> {
    match word {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" | "+nan" | "-nan" | "NaN" | "-NaN" => Some(f64::NAN),
        _ => None,
    }
}

/// Parses a float as XLA prints it, special values included.
fn parse_float_word(word: &str) -> Option<f64> {
    special_float(word).or_else(|| word.parse().ok())
}

/// Parses a literal for `shape`, returning canonical logical row-major bits.
pub(crate) fn parse_literal(text: &str, shape: &ArrayShape) -> Result<Vec<u64>, EvalError> {
    let cls = element::class(shape.element_type).map_err(EvalError::unsupported)?;
    let mut p = Parser {
        toks: tokenize(text),
        pos: 0,
        cls,
        ty: shape.element_type,
        out: Vec::new(),
    };
    p.level(&shape.dims)?;
    if p.pos != p.toks.len() {
        return Err(err(format!(
            "unexpected text after the value: {:?}",
            p.toks.get(p.pos)
        )));
    }
    Ok(p.out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape::PrimitiveType as T;

    #[test]
    fn parses_nested_arrays_and_special_values() {
        let s = ArrayShape::new(T::S32, &[2, 2]);
        assert_eq!(
            parse_literal("{ {1, 2}, {3, -4} }", &s).unwrap(),
            vec![1, 2, 3, (-4i64) as u64]
        );
        let f = ArrayShape::new(T::F32, &[3]);
        let v = parse_literal("{inf, -inf, nan}", &f).unwrap();
        assert_eq!(v[0], u64::from(f32::INFINITY.to_bits()));
        assert_eq!(v[1], u64::from(f32::NEG_INFINITY.to_bits()));
        assert!(f32::from_bits(v[2] as u32).is_nan());
        let p = ArrayShape::new(T::Pred, &[]);
        assert_eq!(parse_literal("true", &p).unwrap(), vec![1]);
        assert!(parse_literal("{1, 2}", &s).is_err());
        assert!(
            parse_literal("{...}", &f)
                .unwrap_err()
                .to_string()
                .contains("elided")
        );
        assert!(parse_literal("300", &ArrayShape::new(T::S8, &[])).is_err());
        let e = ArrayShape::new(T::F32, &[2, 0]);
        assert_eq!(parse_literal("{ {}, {} }", &e).unwrap(), Vec::<u64>::new());
    }
}
