//! A reference evaluator for HLO modules over physical buffers, used to
//! prove that a pass output computes what its input computed.
//!
//! Every array value lives in a [`Buffer`] laid out exactly as its shape's
//! layout says, tile and tail padding included; padding slots hold poison.
//! Every instruction except `bitcast` computes its result logically
//! (reading operands through their layouts) and writes it into a fresh
//! buffer under its own result layout, so layouts never change what those
//! instructions compute. A `bitcast` reuses its operand's slots: element
//! `i` of the result is slot `linear_index(result_shape, i)` of the
//! operand's buffer. A bitcast whose layouts do not line up therefore
//! yields wrong values (or reads poison, or changes the buffer size, both
//! errors), which [`check_equivalent`] detects by comparing the module
//! before and after a pass on the same random inputs.
//!
//! Values crossing computation boundaries are physical too (see
//! [`evaluate`]): a parameter whose declared layout differs from the
//! layout of the buffer it receives reads that buffer reinterpreted.
//!
//! See `docs/interp.md` for what this proves and what it does not.

mod check;
mod custom;
mod element;
mod error;
mod eval;
mod fft;
mod gather;
mod linalg;
mod literal;
mod ops;
mod reduce;
mod scalar;
mod value;
mod window;

pub use check::{
    CheckOptions, DEFAULT_MAX_ELEMENTS, EquivalenceError, FirstDifference, Mismatch, Report,
    SplitMix64, Tolerance, check_equivalent, check_equivalent_with, logical_close, logical_eq,
    module_elements, random_arguments,
};
pub use error::EvalError;
pub use eval::{Limits, instruction_kind};
pub use value::{Buffer, Scalar, Value};

use eval::Boundary;

/// Evaluates the entry computation of a module whose layouts are real (the
/// output of layout assignment, or any module after it).
///
/// Arguments may come in any layout; each is first laid out per the entry
/// computation layout (the parameter's declared layout where the entry
/// layout is AUTO), then read by the parameter instruction under its own
/// declared layout, reinterpreting the buffer if the two differ. The same
/// physical reading applies wherever a value crosses a computation
/// boundary (called computations' parameters, their results, `while`
/// state, tuple elements read by `get-tuple-element`). The result is read
/// per the entry computation's result layout.
pub fn evaluate(module: &hlo::Module, args: &[Value], limits: &Limits) -> Result<Value, EvalError> {
    check::run(module, args, limits, Boundary::Physical).map(|r| r.value)
}

/// Evaluates a module whose layouts are placeholders (the input of layout
/// assignment): wherever a value crosses a computation boundary into a
/// different declared layout it is relaid out, not reinterpreted. Bitcasts
/// inside computations are still physical.
pub fn evaluate_logical(
    module: &hlo::Module,
    args: &[Value],
    limits: &Limits,
) -> Result<Value, EvalError> {
    check::run(module, args, limits, Boundary::Logical).map(|r| r.value)
}

/// Evaluates a module like [`evaluate_logical`] and returns, besides its
/// value, the kinds of instruction it evaluated ([`instruction_kind`]),
/// counting those of per-element computations compiled to programs. Tests
/// use it to show that every kind in the bundled modules is evaluable.
pub fn evaluate_traced(
    module: &hlo::Module,
    args: &[Value],
    limits: &Limits,
) -> Result<(Value, std::collections::BTreeSet<String>), EvalError> {
    let mut interp = eval::Interp::new(module, limits, Boundary::Logical);
    interp.kinds = Some(Default::default());
    let value = interp.run_entry(args)?;
    Ok((value, interp.kinds.take().unwrap_or_default()))
}
