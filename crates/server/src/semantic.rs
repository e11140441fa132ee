//! `verify=semantic`: the answer of a layout-assignment route also carries
//! the reference evaluator's check that the output computes what the input
//! computed (the check of `tessera check`), bounded by the service's
//! `semantic_max_elements`.

use std::time::Instant;

use serde::Deserialize;
use serde::de::{self, Visitor};
use serde_json::{Map, Value, json};

/// What `verify=` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// `false`: no verifier on the output.
    Off,
    /// `true`: the structural and layout verifiers (the default).
    On,
    /// `semantic`: the verifiers, and the semantic check in the answer.
    Semantic,
}

impl<'de> Deserialize<'de> for Verify {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Verify, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Verify;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or \"semantic\"")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Verify, E> {
                Ok(if v { Verify::On } else { Verify::Off })
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Verify, E> {
                match v {
                    "true" => Ok(Verify::On),
                    "false" => Ok(Verify::Off),
                    "semantic" => Ok(Verify::Semantic),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The check of `after` against `before`, as the answer's
/// `semantic_check` object: `result` is `equivalent`, `differ` or
/// `not_checked` (too large, or beyond what the evaluator can do).
pub fn check_json(before: &hlo::Module, after: &hlo::Module, max_elements: u64) -> Value {
    let started = Instant::now();
    let limits = interp::Limits {
        // Time follows size: 64 work units (elements produced, multiply-adds,
        // loop trips) per element allowed, and no buffer above the bound.
        max_work: max_elements.saturating_mul(64),
        max_buffer_slots: max_elements.min(interp::Limits::default().max_buffer_slots),
        ..interp::Limits::default()
    };
    let options = interp::CheckOptions {
        seeds: vec![1],
        limits,
        tolerance: interp::Tolerance::EXACT,
        max_elements: Some(max_elements),
    };
    let mut out = Map::new();
    out.insert("seeds".into(), json!(1));
    out.insert("max_elements".into(), json!(max_elements));
    out.insert(
        "module_elements".into(),
        json!(interp::module_elements(before)),
    );
    match interp::check_equivalent_with(before, after, &options) {
        Ok(report) => {
            out.insert("result".into(), json!("equivalent"));
            out.insert("elements_compared".into(), json!(report.elements_compared));
            out.insert(
                "opaque_custom_calls".into(),
                json!(report.opaque_custom_calls),
            );
        }
        Err(e) => {
            out.insert(
                "result".into(),
                json!(if e.shows_difference() {
                    "differ"
                } else {
                    "not_checked"
                }),
            );
            out.insert("message".into(), json!(e.to_string()));
            if let interp::EquivalenceError::Mismatch {
                mismatch,
                first_difference,
                ..
            } = &e
            {
                out.insert("output".into(), json!(mismatch.path));
                out.insert("index".into(), json!(mismatch.index));
                if let Some(d) = first_difference {
                    out.insert(
                        "first_difference".into(),
                        json!({
                            "instruction": d.instruction,
                            "opcode": d.opcode,
                            "shape": d.shape,
                            "index": d.mismatch.index,
                            "message": d.mismatch.message,
                            "inserted_operands": d.inserted_operands,
                        }),
                    );
                }
            }
        }
    }
    out.insert(
        "time_us".into(),
        json!(started.elapsed().as_micros() as u64),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_reads_booleans_and_semantic() {
        let v: Verify = serde_json::from_str("\"semantic\"").expect("semantic");
        assert_eq!(v, Verify::Semantic);
        let v: Verify = serde_json::from_str("false").expect("bool");
        assert_eq!(v, Verify::Off);
        assert!(serde_json::from_str::<Verify>("\"maybe\"").is_err());
    }
}
