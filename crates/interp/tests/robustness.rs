//! Malformed modules and bad arguments are errors, never panics.

mod common;

use common::*;
use interp::{EvalError, Limits, SplitMix64};

fn expect_invalid(text: &str, args: &[interp::Value], needle: &str) {
    let e = run(text, args).unwrap_err();
    assert!(
        e.to_string().contains(needle),
        "expected '{needle}' in: {e}"
    );
}

#[test]
fn malformed_instructions_are_reported_with_their_name() {
    let add1 = r#"HloModule t
ENTRY %main (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %a = f32[2]{0} add(%p)
}
"#;
    expect_invalid(
        add1,
        &[floats("f32[2]", &[1., 2.])],
        "%a: expected 2 operands, got 1",
    );

    let no_dims = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{1,0} transpose(%p)
}
"#;
    expect_invalid(
        no_dims,
        &[floats("f32[2,3]", &[0.; 6])],
        "%t: missing dimensions= attribute",
    );

    let bad_perm = no_dims.replace("transpose(%p)", "transpose(%p), dimensions={0,0}");
    expect_invalid(&bad_perm, &[floats("f32[2,3]", &[0.; 6])], "%t: transpose");

    let gte = r#"HloModule t
ENTRY %main (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  %t = (f32[2]{0}) tuple(%p)
  ROOT %g = f32[2]{0} get-tuple-element(%t), index=3
}
"#;
    expect_invalid(
        gte,
        &[floats("f32[2]", &[1., 2.])],
        "%g: tuple index 3 out of range",
    );

    let bcast = r#"HloModule t
ENTRY %main (p: f32[2]) -> f32[3,4] {
  %p = f32[2]{0} parameter(0)
  ROOT %b = f32[3,4]{1,0} broadcast(%p), dimensions={1}
}
"#;
    expect_invalid(bcast, &[floats("f32[2]", &[1., 2.])], "%b: broadcast");

    let slice = r#"HloModule t
ENTRY %main (p: f32[4]) -> f32[3] {
  %p = f32[4]{0} parameter(0)
  ROOT %s = f32[3]{0} slice(%p), slice={[2:5]}
}
"#;
    expect_invalid(slice, &[floats("f32[4]", &[0.; 4])], "%s: slice=");

    let constant = r#"HloModule t
ENTRY %main () -> f32[3] {
  ROOT %c = f32[3]{0} constant({1, 2})
}
"#;
    expect_invalid(constant, &[], "%c: constant literal");

    let dot = r#"HloModule t
ENTRY %main (a: f32[2,3], b: f32[4,2]) -> f32[2,2] {
  %a = f32[2,3]{1,0} parameter(0)
  %b = f32[4,2]{1,0} parameter(1)
  ROOT %d = f32[2,2]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;
    expect_invalid(
        dot,
        &[floats("f32[2,3]", &[0.; 6]), floats("f32[4,2]", &[0.; 8])],
        "%d: dot dimension numbers",
    );

    let wrong_type = r#"HloModule t
ENTRY %main (p: f32[2]) -> s32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %n = s32[2]{0} reshape(%p)
}
"#;
    expect_invalid(
        wrong_type,
        &[floats("f32[2]", &[1., 2.])],
        "%n: the operand has element type f32",
    );
}

#[test]
fn recursion_hits_the_call_depth_limit() {
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
    let m = hlo::parse_module(text, "t.hlo").expect("the parser accepts a self-call");
    let e = interp::evaluate(&m, &[floats("f32[]", &[1.])], &Limits::default()).unwrap_err();
    assert!(matches!(e, EvalError::Limit { .. }), "{e}");
    assert!(e.to_string().contains("max_call_depth"), "{e}");
}

#[test]
fn bad_arguments_are_argument_errors() {
    let text = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %n = f32[2,3]{1,0} negate(%p)
}
"#;
    let e = run(text, &[]).unwrap_err();
    assert!(matches!(e, EvalError::Argument { .. }), "{e}");
    let e = run(text, &[floats("f32[3,2]", &[0.; 6])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "argument 0: got f32[3,2]{1,0} for a parameter of shape f32[2,3]{1,0}"
    );
    let e = run(text, &[ints("s32[2,3]", &[0; 6])]).unwrap_err();
    assert!(matches!(e, EvalError::Argument { index: 0, .. }), "{e}");
}

/// Replaces the integer at a random position of the instruction text.
fn mutate(text: &str, rng: &mut SplitMix64) -> Option<String> {
    let body = text.find("\n%").or_else(|| text.find("ENTRY"))?;
    let bytes = text.as_bytes();
    // Starts of integers: a digit not preceded by a name or number character.
    let digits: Vec<usize> = (body..bytes.len())
        .filter(|&i| {
            bytes[i].is_ascii_digit()
                && !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'.'
                    || bytes[i - 1] == b'_')
        })
        .collect();
    if digits.is_empty() {
        return None;
    }
    let at = digits[(rng.next_u64() % digits.len() as u64) as usize];
    let end = at
        + text[at..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len() - at);
    let replacement = match rng.next_u64() % 4 {
        0 => "0".to_string(),
        1 => "1".to_string(),
        2 => (rng.next_u64() % 8).to_string(),
        _ => (rng.next_u64() % 70).to_string(),
    };
    Some(format!("{}{}{}", &text[..at], replacement, &text[end..]))
}

#[test]
fn mutated_corpus_modules_never_panic() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/xla-cpu");
    let limits = Limits {
        max_work: 3_000_000,
        max_buffer_slots: 1 << 20,
        ..Limits::default()
    };
    let mut rng = SplitMix64::new(99);
    let (mut parsed, mut evaluated, mut failed) = (0, 0, 0);
    for name in [
        "pad_ops",
        "transpose_reshape_chain",
        "tuple_pytree_io",
        "cond_switch",
        "dynamic_slice_update",
        "sort_ops",
    ] {
        let text = std::fs::read_to_string(format!("{root}/{name}/after_layout.hlo")).unwrap();
        for _ in 0..25 {
            let Some(mutant) = mutate(&text, &mut rng) else {
                continue;
            };
            let Ok(m) = hlo::parse_module(&mutant, "mutant.hlo") else {
                continue;
            };
            parsed += 1;
            let Ok(args) = interp::random_arguments(&m, 1) else {
                continue;
            };
            match interp::evaluate(&m, &args, &limits) {
                Ok(_) => evaluated += 1,
                Err(_) => failed += 1,
            }
        }
    }
    eprintln!("mutants: {parsed} parsed, {evaluated} evaluated, {failed} rejected with an error");
    assert!(parsed >= 60, "only {parsed} mutants parsed");
    assert!(
        evaluated > 0 && failed > 0,
        "evaluated {evaluated}, failed {failed}"
    );
}

#[test]
fn errors_inside_loops_name_the_path() {
    let text = r#"HloModule t
%cond (s: f32[2]) -> pred[] {
  %s = f32[2]{0} parameter(0)
  ROOT %t = pred[] constant(true)
}
%loop_body (s: f32[2]) -> f32[2] {
  %s = f32[2]{0} parameter(0)
  ROOT %bad = f32[2]{0} rng(%s, %s), distribution=rng_uniform
}
ENTRY %main (p: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  ROOT %w = f32[2]{0} while(%p), condition=%cond, body=%loop_body
}
"#;
    let e = run(text, &[floats("f32[2]", &[1., 2.])]).unwrap_err();
    assert_eq!(e.instruction(), Some("%w > %loop_body > %bad"));
    assert_eq!(
        e.to_string(),
        "%w > %loop_body > %bad: unsupported: opcode rng"
    );
}
