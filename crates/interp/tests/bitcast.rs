//! The checker has teeth: true bitcasts evaluate like the reshape or
//! transpose they stand for, wrong ones are caught.

mod common;

use common::*;
use interp::{EquivalenceError, EvalError, Limits, check_equivalent};

const SEEDS: &[u64] = &[1, 2];

fn equivalent(before: &str, after: &str) -> Result<interp::Report, EquivalenceError> {
    check_equivalent(&module(before), &module(after), SEEDS, &Limits::default())
}

const TRANSPOSE: &str = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{0,1} transpose(%p), dimensions={1,0}
}
"#;

const TRUE_BITCAST: &str = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{0,1} bitcast(%p)
}
"#;

/// The same bytes read as a row-major [3,2]: a reshape, not a transpose.
const WRONG_BITCAST: &str = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{1,0} bitcast(%p)
}
"#;

#[test]
fn a_true_bitcast_equals_the_transpose_it_replaces() {
    let report = equivalent(TRANSPOSE, TRUE_BITCAST).unwrap();
    assert_eq!(report.seeds, 2);
    assert_eq!(report.elements_compared, 12);
}

#[test]
fn a_bitcast_whose_layouts_do_not_line_up_is_a_mismatch() {
    let err = equivalent(TRANSPOSE, WRONG_BITCAST).unwrap_err();
    let EquivalenceError::Mismatch {
        seed,
        mismatch,
        notes,
        ..
    } = &err
    else {
        panic!("expected a mismatch, got {err}")
    };
    assert_eq!(*seed, 1);
    // A bitcast is not a boundary: nothing to note.
    assert!(notes.is_empty(), "{notes:?}");
    // Element (0,0) is p[0][0] either way; (0,1) is p[1][0] vs p[0][1].
    assert_eq!(mismatch.index.as_deref(), Some(&[0i64, 1][..]));
    let text = err.to_string();
    assert!(
        text.starts_with("seed 1: results differ at the output, index (0,1): "),
        "{text}"
    );
    // Only (0,0) and (2,1) hold the same element either way.
    assert!(
        text.ends_with(" (4 of 6 elements of f32[3,2]{0,1} differ)"),
        "{text}"
    );
}

#[test]
fn a_reshape_bitcast_equals_reshape() {
    let reshape = r#"HloModule t
ENTRY %main (p: f32[2,3,4]) -> f32[6,4] {
  %p = f32[2,3,4]{2,0,1} parameter(0)
  ROOT %r = f32[6,4]{1,0} reshape(%p)
}
"#;
    // {2,0,1}: dimension 1 is the most major, so merging 0 and 1 is not a
    // bitcast into {1,0} ...
    let wrong = reshape.replace("reshape(%p)", "bitcast(%p)");
    assert!(matches!(
        equivalent(reshape, &wrong),
        Err(EquivalenceError::Mismatch { .. })
    ));
    // ... but with the operand in {2,1,0} it is.
    let right = wrong.replace("{2,0,1}", "{2,1,0}");
    equivalent(reshape, &right).unwrap();
}

#[test]
fn a_tiled_layout_is_its_pad_reshape_transpose() {
    // f32[4,4]{1,0:T(2,2)} is the row-major layout of
    // transpose(reshape(X, [2,2,2,2]), {0,2,1,3}).
    let explicit = r#"HloModule t
ENTRY %main (p: f32[4,4]) -> f32[2,2,2,2] {
  %p = f32[4,4]{1,0} parameter(0)
  %r = f32[2,2,2,2]{3,2,1,0} reshape(%p)
  ROOT %t = f32[2,2,2,2]{3,2,1,0} transpose(%r), dimensions={0,2,1,3}
}
"#;
    let tiled = r#"HloModule t
ENTRY %main (p: f32[4,4]) -> f32[2,2,2,2] {
  %p = f32[4,4]{1,0} parameter(0)
  %c = f32[4,4]{1,0:T(2,2)} copy(%p)
  ROOT %b = f32[2,2,2,2]{3,2,1,0} bitcast(%c)
}
"#;
    equivalent(explicit, tiled).unwrap();
    // Without the tiling the same bitcast is a plain reshape: caught.
    let untiled = tiled.replace("{1,0:T(2,2)}", "{1,0}");
    assert!(matches!(
        equivalent(explicit, &untiled),
        Err(EquivalenceError::Mismatch { .. })
    ));
}

#[test]
fn reading_tile_padding_as_data_is_an_error() {
    // f32[3,5] with 2x2 tiles occupies 24 slots, 9 of them padding. A
    // bitcast onto a plain array views them all (the padding as poison);
    // computing with a poison element is the error.
    let text = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[4,6] {
  %p = f32[3,5]{1,0} parameter(0)
  %c = f32[3,5]{1,0:T(2,2)} copy(%p)
  %b = f32[4,6]{1,0} bitcast(%c)
  ROOT %n = f32[4,6]{1,0} negate(%b)
}
"#;
    let args = vec![floats(
        "f32[3,5]",
        &(0..15).map(f64::from).collect::<Vec<_>>(),
    )];
    let e = run(text, &args).unwrap_err();
    let EvalError::Poison { inst, .. } = &e else {
        panic!("expected a poison read, got {e}")
    };
    assert_eq!(inst, "%n");
    assert!(e.to_string().starts_with("%n: reads padding slot"), "{e}");
    // A bitcast onto a tiled (not plain) shape must land every element on
    // data, and says so at the bitcast.
    let text = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[5,3] {
  %p = f32[3,5]{1,0} parameter(0)
  %c = f32[3,5]{1,0:T(2,2)} copy(%p)
  ROOT %b = f32[5,3]{1,0:T(2,2)} bitcast(%c)
}
"#;
    let e = run(text, &args).unwrap_err();
    assert!(
        matches!(&e, EvalError::Poison { inst, .. } if inst == "%b"),
        "{e}"
    );
}

#[test]
fn data_movements_carry_a_physical_views_padding() {
    // The expansion of a tiled-to-untiled copy: view the tiles, transpose
    // them back into rows, slice the padding away. The padding travels as
    // poison and never reaches the result.
    let expanded = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[3,5] {
  %p = f32[3,5]{1,0} parameter(0)
  %c = f32[3,5]{1,0:T(2,2)} copy(%p)
  %v = f32[2,3,2,2]{3,2,1,0} bitcast(%c)
  %t = f32[2,2,3,2]{3,2,1,0} transpose(%v), dimensions={0,2,1,3}
  %m = f32[4,6]{1,0} bitcast(%t)
  %s = f32[3,5]{1,0} slice(%m), slice={[0:3], [0:5]}
  ROOT %n = f32[3,5]{1,0} negate(%s)
}
"#;
    let plain = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[3,5] {
  %p = f32[3,5]{1,0} parameter(0)
  ROOT %n = f32[3,5]{1,0} negate(%p)
}
"#;
    equivalent(plain, expanded).unwrap();
    // Without the slice the padding reaches the negate: an error.
    let unsliced = expanded
        .replace("  %s = f32[3,5]{1,0} slice(%m), slice={[0:3], [0:5]}\n", "")
        .replace(
            "ROOT %n = f32[3,5]{1,0} negate(%s)",
            "ROOT %n = f32[4,6]{1,0} negate(%m)",
        )
        .replace("-> f32[3,5] {", "-> f32[4,6] {");
    let e = run(
        &unsliced,
        &[floats(
            "f32[3,5]",
            &(0..15).map(f64::from).collect::<Vec<_>>(),
        )],
    )
    .unwrap_err();
    assert!(
        matches!(&e, EvalError::Poison { inst, .. } if inst == "%n"),
        "{e}"
    );
}

#[test]
fn a_bitcast_that_changes_the_buffer_size_is_an_error() {
    let text = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[15] {
  %p = f32[3,5]{1,0} parameter(0)
  %c = f32[3,5]{1,0:T(2,2)} copy(%p)
  ROOT %b = f32[15]{0} bitcast(%c)
}
"#;
    let args = vec![floats(
        "f32[3,5]",
        &(0..15).map(f64::from).collect::<Vec<_>>(),
    )];
    let e = run(text, &args).unwrap_err();
    assert!(
        matches!(
            &e,
            EvalError::BitcastSize {
                from_slots: 24,
                to_slots: 15,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("bitcast changes buffer size"), "{e}");
}

#[test]
fn a_parameter_layout_that_disagrees_with_the_entry_layout_is_caught() {
    let before = r#"HloModule t, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %n = f32[2,3]{1,0} negate(%p)
}
"#;
    // A faithful layout assignment copies the column-major argument.
    let good = r#"HloModule t, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{1,0}}
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{0,1} parameter(0)
  %c = f32[2,3]{1,0} copy(%p)
  ROOT %n = f32[2,3]{1,0} negate(%c)
}
"#;
    equivalent(before, good).unwrap();
    // Leaving the parameter row-major reads the caller's bytes wrongly.
    let err = equivalent(before, before).unwrap_err();
    let EquivalenceError::Mismatch { notes, .. } = &err else {
        panic!("expected a mismatch, got {err}")
    };
    assert_eq!(
        notes,
        &["%p: a buffer written as f32[2,3]{0,1} is read as {1,0}".to_string()]
    );
    assert!(
        err.to_string().ends_with(
            "\n  note: in `after`, %p: a buffer written as f32[2,3]{0,1} is read as {1,0}"
        ),
        "{err}"
    );
    // So does a root whose layout disagrees with the entry result layout.
    let bad_root = good.replace("ROOT %n = f32[2,3]{1,0}", "ROOT %n = f32[2,3]{0,1}");
    assert!(matches!(
        equivalent(before, &bad_root),
        Err(EquivalenceError::Mismatch { .. })
    ));
}

#[test]
fn a_forgotten_copy_at_a_call_boundary_is_caught() {
    let before = r#"HloModule t
%f (x: f32[2,3]) -> f32[2,3] {
  %x = f32[2,3]{1,0} parameter(0)
  ROOT %n = f32[2,3]{1,0} negate(%x)
}
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %c = f32[2,3]{1,0} call(%p), to_apply=%f
}
"#;
    // The operand became column-major but the callee still reads row-major.
    let after = r#"HloModule t
%f (x: f32[2,3]) -> f32[2,3] {
  %x = f32[2,3]{1,0} parameter(0)
  ROOT %n = f32[2,3]{1,0} negate(%x)
}
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  %t = f32[2,3]{0,1} copy(%p)
  ROOT %c = f32[2,3]{1,0} call(%t), to_apply=%f
}
"#;
    let err = equivalent(before, after).unwrap_err();
    let EquivalenceError::Mismatch { notes, .. } = &err else {
        panic!("expected a mismatch, got {err}")
    };
    assert_eq!(
        notes,
        &["%x: a buffer written as f32[2,3]{0,1} is read as {1,0}".to_string()]
    );
    // With the callee's parameter relaid out too, it is equivalent.
    let fixed = after.replace(
        "%x = f32[2,3]{1,0} parameter(0)",
        "%x = f32[2,3]{0,1} parameter(0)",
    );
    equivalent(before, &fixed).unwrap();
    // The logical evaluation of a pass input relays out instead.
    let logical = interp::evaluate_logical(
        &module(after),
        &interp::random_arguments(&module(after), 3).unwrap(),
        &Limits::default(),
    )
    .unwrap();
    let reference = interp::evaluate(
        &module(before),
        &interp::random_arguments(&module(before), 3).unwrap(),
        &Limits::default(),
    )
    .unwrap();
    interp::logical_eq(&logical, &reference).unwrap();
}

#[test]
fn a_while_loop_whose_state_layout_changes_is_caught() {
    let text = r#"HloModule t
%cond (s: (s32[], f32[2,3])) -> pred[] {
  %s = (s32[], f32[2,3]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(2)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (s: (s32[], f32[2,3])) -> (s32[], f32[2,3]) {
  %s = (s32[], f32[2,3]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[2,3]{1,0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %w = f32[2,3]{LAYOUT} exponential(%v)
  ROOT %t = (s32[], f32[2,3]{LAYOUT}) tuple(%j, %w)
}
ENTRY %main (p: f32[2,3]) -> f32[2,3] {
  %p = f32[2,3]{1,0} parameter(0)
  %z = s32[] constant(0)
  %init = (s32[], f32[2,3]{1,0}) tuple(%z, %p)
  %w = (s32[], f32[2,3]{1,0}) while(%init), condition=%cond, body=%body
  ROOT %r = f32[2,3]{1,0} get-tuple-element(%w), index=1
}
"#;
    let good = text.replace("LAYOUT", "1,0");
    let bad = text.replace("LAYOUT", "0,1");
    equivalent(&good, &good).unwrap();
    assert!(matches!(
        equivalent(&good, &bad),
        Err(EquivalenceError::Mismatch { .. })
    ));
}

#[test]
fn a_mismatch_names_the_first_differing_instruction() {
    let err = equivalent(TRANSPOSE, WRONG_BITCAST).unwrap_err();
    let EquivalenceError::Mismatch {
        first_difference: Some(d),
        ..
    } = &err
    else {
        panic!("expected a mismatch with its first difference, got {err}")
    };
    assert_eq!(
        (d.instruction.as_str(), d.opcode.as_str()),
        ("%t", "bitcast")
    );
    assert_eq!(d.before_opcode.as_deref(), Some("transpose"));
    let text = err.to_string();
    assert!(
        text.contains("first difference: %t = f32[3,2]{1,0} bitcast (a transpose in `before`) differs at index (0,1)"),
        "{text}"
    );
    // Inside a chain, the bitcast is named, not the instructions after it.
    let chain = |t: &str| {
        format!(
            "HloModule t\nENTRY %main (p: f32[2,3]) -> f32[3,2] {{\n  %p = f32[2,3]{{1,0}} parameter(0)\n  {t}\n  %n = f32[3,2]{{1,0}} negate(%t)\n  ROOT %e = f32[3,2]{{1,0}} exponential(%n)\n}}\n"
        )
    };
    let before = chain("%t = f32[3,2]{1,0} transpose(%p), dimensions={1,0}");
    let after = chain("%t = f32[3,2]{1,0} bitcast(%p)");
    let err = equivalent(&before, &after).unwrap_err();
    let EquivalenceError::Mismatch {
        first_difference: Some(d),
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(d.instruction, "%t", "{err}");
}

#[test]
fn floats_compare_exactly_unless_a_tolerance_is_given() {
    // (x + y) * z against x * z + y * z: equal up to rounding.
    let m = |root: &str| {
        format!(
            "HloModule t\nENTRY %main (x: f32[64], y: f32[64], z: f32[64]) -> f32[64] {{\n  %x = f32[64]{{0}} parameter(0)\n  %y = f32[64]{{0}} parameter(1)\n  %z = f32[64]{{0}} parameter(2)\n  {root}\n}}\n"
        )
    };
    let before = module(&m(
        "%s = f32[64]{0} add(%x, %y)\n  ROOT %r = f32[64]{0} multiply(%s, %z)",
    ));
    let after = module(&m(
        "%a = f32[64]{0} multiply(%x, %z)\n  %b = f32[64]{0} multiply(%y, %z)\n  ROOT %r = f32[64]{0} add(%a, %b)",
    ));
    let mut options = interp::CheckOptions {
        seeds: vec![1, 2, 3],
        ..Default::default()
    };
    assert!(matches!(
        interp::check_equivalent_with(&before, &after, &options),
        Err(EquivalenceError::Mismatch { .. })
    ));
    options.tolerance = interp::Tolerance {
        abs: 1e-5,
        rel: 1e-5,
    };
    interp::check_equivalent_with(&before, &after, &options).unwrap();
}

#[test]
fn modules_above_the_element_bound_are_not_evaluated() {
    let options = interp::CheckOptions {
        max_elements: Some(11),
        ..Default::default()
    };
    let err = interp::check_equivalent_with(&module(TRANSPOSE), &module(TRUE_BITCAST), &options)
        .unwrap_err();
    assert_eq!(
        err,
        EquivalenceError::TooLarge {
            module: "before",
            elements: 12,
            max: 11
        }
    );
    let options = interp::CheckOptions {
        max_elements: Some(12),
        ..Default::default()
    };
    interp::check_equivalent_with(&module(TRANSPOSE), &module(TRUE_BITCAST), &options).unwrap();
}
