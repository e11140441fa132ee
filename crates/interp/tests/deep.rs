//! Nesting far deeper than any native stack: the evaluator keeps its own
//! frame stack, so 100,000 levels of calls (and 10,000 of loops,
//! conditionals and fusions) evaluate, and fail, without a stack frame per
//! level.

mod common;

use common::*;
use interp::{EvalError, Limits};
use test_support::{Nesting, deep_module};

fn parse(text: &str) -> hlo::Module {
    hlo::parse_module(text, "deep.hlo").expect("a deep module parses")
}

/// `deep_module` negates its argument once, at the innermost level (a
/// loop's condition is false, so only its state passes through).
fn negated(nesting: Nesting, depth: usize) {
    let m = parse(&deep_module(depth, nesting));
    let input: Vec<f64> = (0..32).map(|i| f64::from(i) - 7.5).collect();
    let arg = floats("f32[4,8]", &input);
    let sign = if nesting == Nesting::While { 1.0 } else { -1.0 };
    let expected = floats(
        "f32[4,8]",
        &input.iter().map(|x| sign * x).collect::<Vec<_>>(),
    );
    for physical in [false, true] {
        let out = if physical {
            interp::evaluate(&m, std::slice::from_ref(&arg), &Limits::default())
        } else {
            interp::evaluate_logical(&m, std::slice::from_ref(&arg), &Limits::default())
        };
        let out = out.unwrap_or_else(|e| panic!("{nesting:?} x {depth}: {e}"));
        interp::logical_eq(&out, &expected)
            .unwrap_or_else(|e| panic!("{nesting:?} x {depth}: {e}"));
    }
}

#[test]
fn a_call_chain_of_100000_levels_evaluates() {
    negated(Nesting::Call, 100_000);
}

#[test]
fn deep_loops_conditionals_and_fusions_evaluate() {
    for nesting in [Nesting::While, Nesting::Conditional, Nesting::Fusion] {
        negated(nesting, 10_000);
    }
}

#[test]
fn a_deep_chain_checks_equivalent_to_itself() {
    let m = parse(&deep_module(100_000, Nesting::Call));
    let report = interp::check_equivalent(&m, &m, &[1], &Limits::default())
        .expect("the chain is equivalent to itself");
    assert_eq!(
        (report.seeds, report.elements_compared),
        (1, 32),
        "{report:?}"
    );
}

#[test]
fn an_error_at_the_bottom_of_a_deep_chain_names_both_ends() {
    let depth = 100_000;
    let m = parse(&deep_module(depth, Nesting::Call));
    // The innermost negate is the first instruction that produces elements.
    let limits = Limits {
        max_work: 10,
        ..Limits::default()
    };
    let e = interp::evaluate(&m, &[floats("f32[4,8]", &[0.; 32])], &limits).unwrap_err();
    assert!(matches!(e, EvalError::Limit { .. }), "{e}");
    let text = e.to_string();
    // The outermost caller, the cut, and the innermost instruction; the
    // path does not grow with the depth.
    assert!(
        text.starts_with("%r > … > "),
        "{}",
        &text[..text.len().min(300)]
    );
    assert!(
        text.contains("%r1 > %r0: "),
        "{}",
        &text[..text.len().min(300)]
    );
    assert!(text.len() < 2000, "{} bytes", text.len());
}

#[test]
fn a_recursive_computation_hits_the_call_depth_limit_not_the_stack() {
    let text = r#"HloModule t
%f (x: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  ROOT %c = f32[] call(%x), to_apply=%f
}
ENTRY %main (p: f32[]) -> f32[] {
  %p = f32[] parameter(0)
  ROOT %c = f32[] call(%p), to_apply=%f
}
"#;
    let m = parse(text);
    let e = interp::evaluate(&m, &[floats("f32[]", &[1.])], &Limits::default()).unwrap_err();
    assert!(matches!(e, EvalError::Limit { .. }), "{e}");
    assert!(
        e.to_string().contains("max_call_depth = 262144"),
        "{}",
        &e.to_string()[..200]
    );
}
