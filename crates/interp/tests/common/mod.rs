//! Helpers shared by the interp integration tests.
#![allow(dead_code)]

use interp::{Buffer, EvalError, Limits, Scalar, Value};
use shape::ArrayShape;

/// Parses inline HLO text.
pub fn module(text: &str) -> hlo::Module {
    match hlo::parse_module(text, "test.hlo") {
        Ok(m) => m,
        Err(e) => panic!("test module does not parse: {e:?}\n{text}"),
    }
}

/// An array shape from text such as `f32[2,3]{0,1}`.
pub fn array_shape(text: &str) -> ArrayShape {
    match shape::parse_shape(text) {
        Ok(shape::Shape::Array(a)) => a,
        other => panic!("{text} is not an array shape: {other:?}"),
    }
}

/// A float buffer from logical row-major values.
pub fn floats(shape: &str, values: &[f64]) -> Value {
    let s: Vec<Scalar> = values.iter().map(|&v| Scalar::Float(v)).collect();
    Value::Array(Buffer::from_logical(array_shape(shape), &s).expect("valid test buffer"))
}

/// A signed integer buffer from logical row-major values.
pub fn ints(shape: &str, values: &[i64]) -> Value {
    let s: Vec<Scalar> = values.iter().map(|&v| Scalar::Int(v)).collect();
    Value::Array(Buffer::from_logical(array_shape(shape), &s).expect("valid test buffer"))
}

/// A pred buffer.
pub fn preds(shape: &str, values: &[bool]) -> Value {
    let s: Vec<Scalar> = values.iter().map(|&v| Scalar::Pred(v)).collect();
    Value::Array(Buffer::from_logical(array_shape(shape), &s).expect("valid test buffer"))
}

/// Evaluates a module (physical boundaries) with default limits.
pub fn run(text: &str, args: &[Value]) -> Result<Value, EvalError> {
    interp::evaluate(&module(text), args, &Limits::default())
}

/// The logical elements of an array value as f64 (ints and preds converted).
pub fn as_f64(v: &Value) -> Vec<f64> {
    let b = v.as_array().expect("an array value");
    b.to_logical()
        .expect("readable")
        .into_iter()
        .map(|s| match s {
            Scalar::Float(x) => x,
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Pred(p) => f64::from(u8::from(p)),
            Scalar::Complex(re, _) => re,
        })
        .collect()
}

/// The logical elements of an integer array value.
pub fn as_i64(v: &Value) -> Vec<i64> {
    let b = v.as_array().expect("an array value");
    b.to_logical()
        .expect("readable")
        .into_iter()
        .map(|s| match s {
            Scalar::Int(i) => i,
            Scalar::UInt(u) => u as i64,
            Scalar::Pred(p) => i64::from(p),
            other => panic!("not an integer: {other:?}"),
        })
        .collect()
}

/// Element `i` of a tuple value.
pub fn elem(v: &Value, i: usize) -> &Value {
    &v.tuple_elements().expect("a tuple value")[i]
}

/// The physical slots of an array value (`None` = padding).
pub fn slots(v: &Value) -> Vec<Option<f64>> {
    let b = v.as_array().expect("an array value");
    (0..b.slot_count())
        .map(|i| {
            b.slot(i).map(|s| match s {
                Scalar::Float(x) => x,
                Scalar::Int(i) => i as f64,
                other => panic!("unexpected {other:?}"),
            })
        })
        .collect()
}
