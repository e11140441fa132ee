//! Layout assignment on small modules: XLA's own test facts (rows of the
//! table in the team's notes, cited per test) and every constraint kind.
//! Each test is one call to `check`, which runs the pass, runs the
//! structural and layout verifiers, and compares a summary with a snapshot
//! (`UPDATE_EXPECT=1 cargo test` re-blesses after a reviewed change).

use expect_test::{Expect, expect};

/// A target with no rules: XLA's generic layout assignment, without a
/// backend's constraints.
const GENERIC: &str = "name: generic\n";

fn target(name: &str) -> target::TargetSpec {
    match name {
        "generic" => target::load_str(GENERIC, "generic.yaml").unwrap(),
        other => target::load_builtin(other).unwrap(),
    }
}

/// Runs the pass on `hlo` for `target_name` and compares the resulting
/// instructions (shapes with layouts) and copies with `expected`.
fn check(target_name: &str, hlo: &str, expected: Expect) {
    let spec = target(target_name);
    let mut module = hlo::parse_module(hlo, "test.hlo").unwrap();
    let report = layout_assignment::run(&mut module, &spec).unwrap();
    let structural = hlo::verify_module(&module);
    assert!(structural.is_empty(), "{structural:?}");
    let layout = layout_assignment::check_layouts(&module, Some(&spec));
    assert!(layout.is_empty(), "{}", layout.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
    // The output computes what the input computed, with its layouts real.
    // Custom calls and a few library ops cannot be evaluated; for those the
    // layout verifier above is the check.
    let before = hlo::parse_module(hlo, "test.hlo").unwrap();
    match interp::check_equivalent(&before, &module, &[1, 2], &interp::Limits::default()) {
        Ok(_) | Err(interp::EquivalenceError::Before { error: interp::EvalError::Unsupported { .. }, .. }) => {}
        Err(e) => panic!("the output is not equivalent to the input:\n{e}\n{}", hlo::print_module(&module)),
    }
    // Deterministic: a second run on a fresh parse prints the same text.
    let mut again = hlo::parse_module(hlo, "test.hlo").unwrap();
    layout_assignment::run(&mut again, &spec).unwrap();
    assert_eq!(hlo::print_module(&module), hlo::print_module(&again));
    expected.assert_eq(&summary(&module, &report));
}

/// Every instruction as `name: shape opcode`, per computation, then the
/// copies with their cause, then the filled AUTO entry layouts.
fn summary(module: &hlo::Module, report: &layout_assignment::Report) -> String {
    let mut out = String::new();
    for comp in &module.computations {
        out.push_str(&format!("{}:\n", comp.name));
        for (id, inst) in comp.instructions() {
            let root = if comp.root() == Some(id) { "ROOT " } else { "" };
            let operands: Vec<String> = inst.operands().iter().map(|&o| comp.inst(o).name.clone()).collect();
            out.push_str(&format!("  {root}{} = {} {}({})\n", inst.name, inst.shape, inst.opcode_name(), operands.join(", ")));
        }
    }
    for c in &report.copies {
        out.push_str(&format!("copy {}: {} {} -> {} ({} bytes, {})\n", c.name, c.value, c.from, c.to, c.bytes, c.cause.name()));
    }
    for f in &report.filled {
        out.push_str(&format!("filled {}: {}\n", f.position, f.layout));
    }
    out
}

// ---------------------------------------------------------------------------
// Entry layouts.

#[test]
fn entry_layouts_flow_through_elementwise_ops() {
    // Row 64: params and result all {0,1}: the add takes {0,1}, no copy.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[42,12]{0,1}, f32[42,12]{0,1})->f32[42,12]{0,1}}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  ROOT add = f32[42,12] add(p0, p1)
}
"#,
        expect![[r#"
            e:
              p0 = f32[42,12]{0,1} parameter()
              p1 = f32[42,12]{0,1} parameter()
              ROOT add = f32[42,12]{0,1} add(p0, p1)
        "#]],
    );
}

#[test]
fn mismatched_entry_parameter_gets_one_copy() {
    // Row 65: params {1,0} and {0,1}, result {1,0}: the params keep their
    // layouts, the root is {1,0}, and p1 is copied once.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[42,12]{1,0}, f32[42,12]{0,1})->f32[42,12]{1,0}}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  ROOT add = f32[42,12] add(p0, p1)
}
"#,
        expect![[r#"
            e:
              p0 = f32[42,12]{1,0} parameter()
              p1 = f32[42,12]{0,1} parameter()
              p1.copy = f32[42,12]{1,0} copy(p1)
              ROOT add = f32[42,12]{1,0} add(p0, p1.copy)
            copy p1.copy: %p1 {0,1} -> {1,0} (2016 bytes, entry)
        "#]],
    );
}

#[test]
fn auto_entry_layouts_are_filled_and_reported() {
    // Row 101: parameter 0 without a layout (AUTO) feeding a transpose to a
    // {1,0} result gets {0,1}, which makes the transpose a bitcast.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[3,4])->f32[4,3]{1,0}}
ENTRY e {
  p0 = f32[3,4] parameter(0)
  ROOT t = f32[4,3] transpose(p0), dimensions={1,0}
}
"#,
        expect![[r#"
            e:
              p0 = f32[3,4]{0,1} parameter()
              ROOT t = f32[4,3]{1,0} transpose(p0)
            filled parameter 0: {0,1}
        "#]],
    );
}

#[test]
fn transpose_gets_the_layout_that_makes_it_a_bitcast() {
    // Row 70: param {1,0} -> log -> transpose -> tanh with result {0,1}:
    // log {1,0}, transpose {0,1} (a bitcast), tanh {0,1}, no copy.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[42,12]{1,0})->f32[12,42]{0,1}}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  log = f32[42,12] log(p0)
  t = f32[12,42] transpose(log), dimensions={1,0}
  ROOT tanh = f32[12,42] tanh(t)
}
"#,
        expect![[r#"
            e:
              p0 = f32[42,12]{1,0} parameter()
              log = f32[42,12]{1,0} log(p0)
              t = f32[12,42]{0,1} transpose(log)
              ROOT tanh = f32[12,42]{0,1} tanh(t)
        "#]],
    );
}

#[test]
fn broadcast_operand_follows_the_result_order() {
    // Row 71: f32[3,4]{1,0} broadcast into [2,3,4] then transposed {2,1,0}
    // into a {2,1,0} result: the broadcast takes {0,1,2}, so the transpose
    // is a bitcast and the operand is read in order.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[3,4]{1,0})->f32[4,3,2]{2,1,0}}
ENTRY e {
  p0 = f32[3,4] parameter(0)
  b = f32[2,3,4] broadcast(p0), dimensions={1,2}
  ROOT t = f32[4,3,2] transpose(b), dimensions={2,1,0}
}
"#,
        expect![[r#"
            e:
              p0 = f32[3,4]{1,0} parameter()
              p0.copy = f32[3,4]{0,1} copy(p0)
              b = f32[2,3,4]{0,1,2} broadcast(p0.copy)
              ROOT t = f32[4,3,2]{2,1,0} transpose(b)
            copy p0.copy: %p0 {1,0} -> {0,1} (48 bytes, entry)
        "#]],
    );
}

#[test]
fn reshape_with_size_one_dimensions_is_a_bitcast() {
    // Row 69: f32[1,2,3,1]{0,2,1,3} -> log -> reshape [3,1,2] -> tanh with
    // result {2,1,0}; size-1 dimensions move freely.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[1,2,3,1]{0,2,1,3})->f32[3,1,2]{2,1,0}}
ENTRY e {
  p0 = f32[1,2,3,1] parameter(0)
  log = f32[1,2,3,1] log(p0)
  r = f32[3,1,2] reshape(log)
  ROOT tanh = f32[3,1,2] tanh(r)
}
"#,
        expect![[r#"
            e:
              p0 = f32[1,2,3,1]{0,2,1,3} parameter()
              log = f32[1,2,3,1]{3,2,1,0} log(p0)
              r = f32[3,1,2]{2,1,0} reshape(log)
              ROOT tanh = f32[3,1,2]{2,1,0} tanh(r)
        "#]],
    );
}

#[test]
fn copy_goes_on_the_smaller_side_of_a_slice() {
    // Row 84 copies the 4x5 operand before slicing (Slice(Copy(par0))); the
    // bytes-moved model copies the 3x4 result instead.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[40,50]{1,0})->f32[30,40]{0,1}}
ENTRY e {
  p0 = f32[40,50] parameter(0)
  ROOT s = f32[30,40] slice(p0), slice={[0:30], [0:40]}
}
"#,
        expect![[r#"
            e:
              p0 = f32[40,50]{1,0} parameter()
              s = f32[30,40]{1,0} slice(p0)
              ROOT s.copy = f32[30,40]{0,1} copy(s)
            copy s.copy: %s {1,0} -> {0,1} (4800 bytes, entry)
        "#]],
    );
}

#[test]
fn copy_goes_on_the_smaller_side_of_a_broadcast() {
    // A column-major vector of a row-major result: copy the small operand of
    // the broadcast rather than the big result.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[64,32]{0,1}, f32[256,64,32]{2,1,0})->f32[256,64,32]{2,1,0}}
ENTRY e {
  p0 = f32[64,32] parameter(0)
  p1 = f32[256,64,32] parameter(1)
  b = f32[256,64,32] broadcast(p0), dimensions={1,2}
  ROOT add = f32[256,64,32] add(b, p1)
}
"#,
        expect![[r#"
            e:
              p0 = f32[64,32]{0,1} parameter()
              p0.copy = f32[64,32]{1,0} copy(p0)
              p1 = f32[256,64,32]{2,1,0} parameter()
              b = f32[256,64,32]{2,1,0} broadcast(p0.copy)
              ROOT add = f32[256,64,32]{2,1,0} add(b, p1)
            copy p0.copy: %p0 {0,1} -> {1,0} (8192 bytes, entry)
        "#]],
    );
}

#[test]
fn concatenate_operands_agree() {
    // Row 82: concat of par1 {0,1} and par2 {1,0} into a {1,0} add: par1 is
    // copied, par2 is not.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[3,8]{1,0}, f32[3,5]{0,1}, f32[3,3]{1,0})->f32[3,8]{1,0}}
ENTRY e {
  p0 = f32[3,8] parameter(0)
  p1 = f32[3,5] parameter(1)
  p2 = f32[3,3] parameter(2)
  c = f32[3,8] concatenate(p1, p2), dimensions={1}
  ROOT add = f32[3,8] add(p0, c)
}
"#,
        expect![[r#"
            e:
              p0 = f32[3,8]{1,0} parameter()
              p1 = f32[3,5]{0,1} parameter()
              p1.copy = f32[3,5]{1,0} copy(p1)
              p2 = f32[3,3]{1,0} parameter()
              c = f32[3,8]{1,0} concatenate(p1.copy, p2)
              ROOT add = f32[3,8]{1,0} add(p0, c)
            copy p1.copy: %p1 {0,1} -> {1,0} (60 bytes, entry)
        "#]],
    );
}

#[test]
fn one_copy_serves_every_user_needing_that_layout() {
    // XLA copies per use; here two users needing {0,1} share one copy.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[16,16]{1,0}, f32[16,16]{0,1})->(f32[16,16]{0,1}, f32[16,16]{0,1})}
ENTRY e {
  p0 = f32[16,16] parameter(0)
  p1 = f32[16,16] parameter(1)
  a = f32[16,16] add(p0, p1)
  m = f32[16,16] multiply(p0, p1)
  ROOT t = (f32[16,16], f32[16,16]) tuple(a, m)
}
"#,
        expect![[r#"
            e:
              p0 = f32[16,16]{1,0} parameter()
              p0.copy = f32[16,16]{0,1} copy(p0)
              p1 = f32[16,16]{0,1} parameter()
              a = f32[16,16]{0,1} add(p0.copy, p1)
              m = f32[16,16]{0,1} multiply(p0.copy, p1)
              ROOT t = (f32[16,16]{0,1}, f32[16,16]{0,1}) tuple(a, m)
            copy p0.copy: %p0 {1,0} -> {0,1} (1024 bytes, entry)
        "#]],
    );
}

// ---------------------------------------------------------------------------
// Custom calls, constraints and existing bitcasts.

#[test]
fn custom_call_operand_constraints_are_honoured() {
    // Row 87: operand_layout_constraints {0,1} and {1,0}, result {3,2,0,1},
    // entry params {1,0} and result {2,1,0,3}: Copy(CustomCall(Copy(p0), p1)).
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[4,4]{1,0}, f32[2,3]{1,0})->f32[1,2,3,4]{2,1,0,3}}
ENTRY e {
  p0 = f32[4,4] parameter(0)
  p1 = f32[2,3] parameter(1)
  ROOT cc = f32[1,2,3,4]{3,2,0,1} custom-call(p0, p1), custom_call_target="baz", operand_layout_constraints={f32[4,4]{0,1}, f32[2,3]{1,0}}
}
"#,
        expect![[r#"
            e:
              p0 = f32[4,4]{1,0} parameter()
              p0.copy = f32[4,4]{0,1} copy(p0)
              p1 = f32[2,3]{1,0} parameter()
              cc = f32[1,2,3,4]{3,2,0,1} custom-call(p0.copy, p1)
              ROOT cc.copy = f32[1,2,3,4]{2,1,0,3} copy(cc)
            copy p0.copy: %p0 {1,0} -> {0,1} (64 bytes, custom_call)
            copy cc.copy: %cc {3,2,0,1} -> {2,1,0,3} (96 bytes, entry)
        "#]],
    );
}

#[test]
fn elementwise_user_of_a_custom_call_costs_one_copy() {
    // Row 88: XLA gives Copy(Exp(CustomCall(...))). Copying before or after
    // the exp moves the same 96 bytes; on such ties Tessera keeps the
    // default layout, so the copy comes first.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[4,4]{1,0})->f32[2,3,4]{2,1,0}}
ENTRY e {
  p0 = f32[4,4] parameter(0)
  cc = f32[2,3,4]{0,2,1} custom-call(p0), custom_call_target="baz", operand_layout_constraints={f32[4,4]{1,0}}
  ROOT exp = f32[2,3,4] exponential(cc)
}
"#,
        expect![[r#"
            e:
              p0 = f32[4,4]{1,0} parameter()
              cc = f32[2,3,4]{0,2,1} custom-call(p0)
              cc.copy = f32[2,3,4]{2,1,0} copy(cc)
              ROOT exp = f32[2,3,4]{2,1,0} exponential(cc.copy)
            copy cc.copy: %cc {0,2,1} -> {2,1,0} (96 bytes, custom_call)
        "#]],
    );
}

#[test]
fn layout_constraint_custom_call_fixes_its_operand() {
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[8,16]{1,0})->f32[8,16]{1,0}}
ENTRY e {
  p0 = f32[8,16] parameter(0)
  n = f32[8,16] negate(p0)
  lc = f32[8,16]{0,1} custom-call(n), custom_call_target="LayoutConstraint"
  ROOT a = f32[8,16] abs(lc)
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,16]{1,0} parameter()
              p0.copy = f32[8,16]{0,1} copy(p0)
              n = f32[8,16]{0,1} negate(p0.copy)
              lc = f32[8,16]{0,1} custom-call(n)
              lc.copy = f32[8,16]{1,0} copy(lc)
              ROOT a = f32[8,16]{1,0} abs(lc.copy)
            copy p0.copy: %p0 {1,0} -> {0,1} (512 bytes, entry)
            copy lc.copy: %lc {0,1} -> {1,0} (512 bytes, custom_call)
        "#]],
    );
}

#[test]
fn existing_bitcasts_are_fixed_constraints_not_errors() {
    // Row 75: XLA rejects a bitcast before layout assignment; Tessera keeps
    // it and its operand's layout.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[4,6]{1,0})->f32[24]{0}}
ENTRY e {
  p0 = f32[4,6] parameter(0)
  n = f32[4,6] negate(p0)
  ROOT b = f32[24]{0} bitcast(n)
}
"#,
        expect![[r#"
            e:
              p0 = f32[4,6]{1,0} parameter()
              n = f32[4,6]{1,0} negate(p0)
              ROOT b = f32[24]{0} bitcast(n)
        "#]],
    );
}

// ---------------------------------------------------------------------------
// Tuples, tokens, aliasing.

#[test]
fn tuples_forward_layouts_and_tokens_are_never_copied() {
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[4,4]{0,1}, token[])->(f32[4,4]{1,0}, token[])}
ENTRY e {
  p0 = f32[4,4] parameter(0)
  tok = token[] parameter(1)
  t = (f32[4,4], token[]) tuple(p0, tok)
  g0 = f32[4,4] get-tuple-element(t), index=0
  g1 = token[] get-tuple-element(t), index=1
  n = f32[4,4] negate(g0)
  ROOT r = (f32[4,4], token[]) tuple(n, g1)
}
"#,
        expect![[r#"
            e:
              p0 = f32[4,4]{0,1} parameter()
              p0.copy = f32[4,4]{1,0} copy(p0)
              tok = token[] parameter()
              t = (f32[4,4]{0,1}, token[]) tuple(p0, tok)
              g0 = f32[4,4]{0,1} get-tuple-element(t)
              g1 = token[] get-tuple-element(t)
              n = f32[4,4]{1,0} negate(p0.copy)
              ROOT r = (f32[4,4]{1,0}, token[]) tuple(n, g1)
            copy p0.copy: %p0 {0,1} -> {1,0} (64 bytes, entry)
        "#]],
    );
}

#[test]
fn input_output_alias_ties_an_auto_result_to_its_parameter() {
    // Row 103: with the result AUTO, the aliased result takes parameter 0's
    // layout.
    check(
        "generic",
        r#"
HloModule m, input_output_alias={ {}: (0, {}, may-alias) }, entry_computation_layout={(f32[8,4]{0,1})->f32[8,4]}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  ROOT n = f32[8,4] negate(p0)
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{0,1} parameter()
              ROOT n = f32[8,4]{0,1} negate(p0)
            filled result: {0,1}
        "#]],
    );
}

#[test]
fn outfeed_sends_its_operand_in_the_outfeed_shape_layout() {
    // Notes 2.3: an outfeed's operand gets `outfeed_shape`'s layout,
    // mandatory. The exponential is free, so it takes {0,1} itself and the
    // copy lands on the parameter, pinned {1,0} by the entry layout.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[8,4]{1,0})->token[]}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  x = f32[8,4] exponential(p0)
  tok = token[] after-all()
  ROOT o = token[] outfeed(x, tok), outfeed_shape=f32[8,4]{0,1}
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{1,0} parameter()
              p0.copy = f32[8,4]{0,1} copy(p0)
              x = f32[8,4]{0,1} exponential(p0.copy)
              tok = token[] after-all()
              ROOT o = token[] outfeed(x, tok)
            copy p0.copy: %p0 {1,0} -> {0,1} (128 bytes, entry)
        "#]],
    );
}

#[test]
fn outfeed_of_a_tuple_constrains_each_leaf() {
    // Leaf 0 must be {0,1}; leaf 1 names no layout and is left alone.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[8,4]{1,0}, f32[2,3]{1,0})->token[]}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  p1 = f32[2,3] parameter(1)
  t = (f32[8,4], f32[2,3]) tuple(p0, p1)
  tok = token[] after-all()
  ROOT o = token[] outfeed(t, tok), outfeed_shape=(f32[8,4]{0,1}, f32[2,3])
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{1,0} parameter()
              p0.copy = f32[8,4]{0,1} copy(p0)
              p1 = f32[2,3]{1,0} parameter()
              t = (f32[8,4]{0,1}, f32[2,3]{1,0}) tuple(p0.copy, p1)
              tok = token[] after-all()
              ROOT o = token[] outfeed(t, tok)
            copy p0.copy: %p0 {1,0} -> {0,1} (128 bytes, host_transfer)
        "#]],
    );
}

#[test]
fn outfeed_without_a_layout_takes_the_operand_as_it_is() {
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[8,4]{0,1})->token[]}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  tok = token[] after-all()
  ROOT o = token[] outfeed(p0, tok), outfeed_shape=f32[8,4]
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{0,1} parameter()
              tok = token[] after-all()
              ROOT o = token[] outfeed(p0, tok)
        "#]],
    );
}

// ---------------------------------------------------------------------------
// Control flow.

#[test]
fn while_state_agrees_across_init_body_condition_and_result() {
    // The body's transpose-then-transpose-back keeps the state layout; the
    // init comes in {0,1} and is copied once into the body's layout.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[8,8]{0,1})->(s32[], f32[8,8]{1,0})}
body {
  p = (s32[], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8,8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[8,8] exponential(x)
  ROOT t = (s32[], f32[8,8]) tuple(i2, x2)
}
cond {
  cp = (s32[], f32[8,8]) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(ci, n), direction=LT
}
ENTRY e {
  p0 = f32[8,8] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[8,8]) tuple(zero, p0)
  ROOT w = (s32[], f32[8,8]) while(init), condition=cond, body=body
}
"#,
        expect![[r#"
            body:
              p = (s32[], f32[8,8]{1,0}) parameter()
              i = s32[] get-tuple-element(p)
              x = f32[8,8]{1,0} get-tuple-element(p)
              one = s32[] constant()
              i2 = s32[] add(i, one)
              x2 = f32[8,8]{1,0} exponential(x)
              ROOT t = (s32[], f32[8,8]{1,0}) tuple(i2, x2)
            cond:
              cp = (s32[], f32[8,8]{1,0}) parameter()
              ci = s32[] get-tuple-element(cp)
              n = s32[] constant()
              ROOT lt = pred[] compare(ci, n)
            e:
              p0 = f32[8,8]{0,1} parameter()
              p0.copy = f32[8,8]{1,0} copy(p0)
              zero = s32[] constant()
              init = (s32[], f32[8,8]{1,0}) tuple(zero, p0.copy)
              ROOT w = (s32[], f32[8,8]{1,0}) while(init)
            copy p0.copy: %p0 {0,1} -> {1,0} (256 bytes, loop_state)
        "#]],
    );
}

#[test]
fn conditional_branches_return_one_layout() {
    // Row 77: one branch computes in {1,0}, the other returns a {0,1}
    // value; both results agree.
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(pred[], f32[4,6]{1,0}, f32[4,6]{0,1})->f32[4,6]{1,0}}
on_true {
  tp = f32[4,6] parameter(0)
  ROOT n = f32[4,6] negate(tp)
}
on_false {
  fp = f32[4,6] parameter(0)
  ROOT a = f32[4,6] abs(fp)
}
ENTRY e {
  c = pred[] parameter(0)
  x = f32[4,6] parameter(1)
  y = f32[4,6] parameter(2)
  ROOT r = f32[4,6] conditional(c, x, y), true_computation=on_true, false_computation=on_false
}
"#,
        expect![[r#"
            on_true:
              tp = f32[4,6]{1,0} parameter()
              ROOT n = f32[4,6]{1,0} negate(tp)
            on_false:
              fp = f32[4,6]{1,0} parameter()
              ROOT a = f32[4,6]{1,0} abs(fp)
            e:
              c = pred[] parameter()
              x = f32[4,6]{1,0} parameter()
              y = f32[4,6]{0,1} parameter()
              y.copy = f32[4,6]{1,0} copy(y)
              ROOT r = f32[4,6]{1,0} conditional(c, x, y.copy)
            copy y.copy: %y {0,1} -> {1,0} (96 bytes, call_signature)
        "#]],
    );
}

#[test]
fn calls_use_the_callee_signature() {
    check(
        "generic",
        r#"
HloModule m, entry_computation_layout={(f32[16,8]{0,1})->f32[8,16]{1,0}}
callee {
  p = f32[16,8] parameter(0)
  ROOT t = f32[8,16] transpose(p), dimensions={1,0}
}
ENTRY e {
  p0 = f32[16,8] parameter(0)
  ROOT c = f32[8,16] call(p0), to_apply=callee
}
"#,
        expect![[r#"
            callee:
              p = f32[16,8]{0,1} parameter()
              ROOT t = f32[8,16]{1,0} transpose(p)
            e:
              p0 = f32[16,8]{0,1} parameter()
              ROOT c = f32[8,16]{1,0} call(p0)
        "#]],
    );
}

// ---------------------------------------------------------------------------
// Target rules.

#[test]
fn cpu_dots_are_row_major() {
    // XLA CPU: dot operands and result row-major; a column-major parameter
    // is copied before the dot.
    check(
        "cpu",
        r#"
HloModule m, entry_computation_layout={(f32[32,64]{0,1}, f32[64,16]{1,0})->f32[32,16]{1,0}}
ENTRY e {
  a = f32[32,64] parameter(0)
  b = f32[64,16] parameter(1)
  ROOT d = f32[32,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#,
        expect![[r#"
            e:
              a = f32[32,64]{0,1} parameter()
              a.copy = f32[32,64]{1,0} copy(a)
              b = f32[64,16]{1,0} parameter()
              ROOT d = f32[32,16]{1,0} dot(a.copy, b)
            copy a.copy: %a {0,1} -> {1,0} (8192 bytes, target_requirement)
        "#]],
    );
}

#[test]
fn cpu_vector_matrix_dot_makes_its_constant_column_major() {
    // Row 128 (vector [12] . constant [12,24]), smaller: the constant gets
    // {0,1}, the vector and result {0}, no copy.
    check(
        "cpu",
        r#"
HloModule m, entry_computation_layout={(f32[4]{0})->f32[3]{0}}
ENTRY e {
  v = f32[4] parameter(0)
  c = f32[4,3] constant({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 }, { 10, 11, 12 } })
  ROOT d = f32[3] dot(v, c), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"#,
        expect![[r#"
            e:
              v = f32[4]{0} parameter()
              c = f32[4,3]{0,1} constant()
              ROOT d = f32[3]{0} dot(v, c)
        "#]],
    );
}

#[test]
fn cpu_elementwise_ops_run_row_major() {
    // XLA CPU makes every operand row-major, so an elementwise chain from
    // column-major parameters to a column-major result runs row-major with
    // copies at both ends.
    check(
        "cpu",
        r#"
HloModule m, entry_computation_layout={(f32[8,4]{0,1})->f32[8,4]{0,1}}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  n = f32[8,4] negate(p0)
  ROOT e = f32[8,4] exponential(n)
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{0,1} parameter()
              p0.copy = f32[8,4]{1,0} copy(p0)
              n = f32[8,4]{1,0} negate(p0.copy)
              e = f32[8,4]{1,0} exponential(n)
              ROOT e.copy = f32[8,4]{0,1} copy(e)
            copy p0.copy: %p0 {0,1} -> {1,0} (128 bytes, target_requirement)
            copy e.copy: %e {1,0} -> {0,1} (128 bytes, entry)
        "#]],
    );
}

#[test]
fn gpu_elementwise_ops_follow_their_inputs() {
    // On GPU the same chain needs no copy.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[8,4]{0,1})->f32[8,4]{0,1}}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  n = f32[8,4] negate(p0)
  ROOT e = f32[8,4] exponential(n)
}
"#,
        expect![[r#"
            e:
              p0 = f32[8,4]{0,1} parameter()
              n = f32[8,4]{0,1} negate(p0)
              ROOT e = f32[8,4]{0,1} exponential(n)
        "#]],
    );
}

#[test]
fn gpu_batched_dot_keeps_valid_matrix_layouts() {
    // Row 112: p0 f32[5,2,3]{1,2,0}, p1 f32[5,3,4]{1,2,0} are valid GEMM
    // layouts: kept, no copy.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[5,2,3]{1,2,0}, f32[5,3,4]{1,2,0})->f32[5,2,4]{2,1,0}}
ENTRY e {
  p0 = f32[5,2,3] parameter(0)
  p1 = f32[5,3,4] parameter(1)
  ROOT d = f32[5,2,4] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"#,
        expect![[r#"
            e:
              p0 = f32[5,2,3]{1,2,0} parameter()
              p1 = f32[5,3,4]{1,2,0} parameter()
              ROOT d = f32[5,2,4]{2,1,0} dot(p0, p1)
        "#]],
    );
}

#[test]
fn gpu_batched_dot_copies_an_invalid_matrix_layout() {
    // Row 113: p1 f32[5,3,4]{0,1,2} has the batch dimension minor: copied to
    // the default.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[5,2,3]{2,1,0}, f32[5,3,4]{0,1,2})->f32[5,2,4]{2,1,0}}
ENTRY e {
  p0 = f32[5,2,3] parameter(0)
  p1 = f32[5,3,4] parameter(1)
  ROOT d = f32[5,2,4] dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"#,
        expect![[r#"
            e:
              p0 = f32[5,2,3]{2,1,0} parameter()
              p1 = f32[5,3,4]{0,1,2} parameter()
              p1.copy = f32[5,3,4]{2,1,0} copy(p1)
              ROOT d = f32[5,2,4]{2,1,0} dot(p0, p1.copy)
            copy p1.copy: %p1 {0,1,2} -> {2,1,0} (240 bytes, target_requirement)
        "#]],
    );
}

#[test]
fn gpu_integer_dot_wants_contracting_dimensions_minor() {
    // Row 117: s8[32,64] x s8[64,96] -> s32: lhs {1,0}, rhs {0,1}.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(s8[32,64]{1,0}, s8[64,96]{1,0})->s32[32,96]{1,0}}
ENTRY e {
  a = s8[32,64] parameter(0)
  b = s8[64,96] parameter(1)
  ROOT d = s32[32,96] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#,
        expect![[r#"
            e:
              a = s8[32,64]{1,0} parameter()
              b = s8[64,96]{1,0} parameter()
              b.copy = s8[64,96]{0,1} copy(b)
              ROOT d = s32[32,96]{1,0} dot(a, b.copy)
            copy b.copy: %b {1,0} -> {0,1} (6144 bytes, target_requirement)
        "#]],
    );
}

/// A reduction over dimension 0 of a value whose layout nothing else
/// decides: a broadcast of a vector.
const COLUMN_SUM_OF_BROADCAST: &str = r#"
HloModule m, entry_computation_layout={(f32[32]{0})->f32[32]{0}}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p0 = f32[32] parameter(0)
  bc = f32[64,32] broadcast(p0), dimensions={1}
  z = f32[] constant(0)
  ROOT r = f32[32] reduce(bc, z), dimensions={0}, to_apply=add
}
"#;

#[test]
fn gpu_prefers_row_reductions_when_the_input_layout_is_free() {
    // Notes 3 (PropagateReductionLayoutToOperand): the reduced dimension
    // becomes the most minor, so the reduction reads contiguous rows.
    check(
        "gpu",
        COLUMN_SUM_OF_BROADCAST,
        expect![[r#"
            add:
              a = f32[] parameter()
              b = f32[] parameter()
              ROOT s = f32[] add(a, b)
            e:
              p0 = f32[32]{0} parameter()
              bc = f32[64,32]{0,1} broadcast(p0)
              z = f32[] constant()
              ROOT r = f32[32]{0} reduce(bc, z)
        "#]],
    );
}

#[test]
fn cpu_has_no_row_reduction_preference() {
    // The same module on CPU keeps the default layout.
    check(
        "cpu",
        COLUMN_SUM_OF_BROADCAST,
        expect![[r#"
            add:
              a = f32[] parameter()
              b = f32[] parameter()
              ROOT s = f32[] add(a, b)
            e:
              p0 = f32[32]{0} parameter()
              bc = f32[64,32]{1,0} broadcast(p0)
              z = f32[] constant()
              ROOT r = f32[32]{0} reduce(bc, z)
        "#]],
    );
}

#[test]
fn gpu_row_reduction_is_a_preference_not_a_copy() {
    // The reduce input comes from a parameter pinned {1,0}: a row
    // reduction would need a copy, so the pinned layout is kept.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[64,32]{1,0})->f32[32]{0}}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p0 = f32[64,32] parameter(0)
  n = f32[64,32] negate(p0)
  z = f32[] constant(0)
  ROOT r = f32[32] reduce(n, z), dimensions={0}, to_apply=add
}
"#,
        expect![[r#"
            add:
              a = f32[] parameter()
              b = f32[] parameter()
              ROOT s = f32[] add(a, b)
            e:
              p0 = f32[64,32]{1,0} parameter()
              n = f32[64,32]{1,0} negate(p0)
              z = f32[] constant()
              ROOT r = f32[32]{0} reduce(n, z)
        "#]],
    );
}

#[test]
fn gpu_variadic_reduce_rows_follow_the_result_order() {
    // Reducing dimension 1 of a rank-3 pair: dimension 1 most minor, then
    // the kept dimensions (0 and 2) in the result's {1,0} order: {1,2,0}.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[4]{0}, s32[4]{0})->(f32[4,6]{1,0}, s32[4,6]{1,0})}
argmax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  g = pred[] compare(a, b), direction=GE
  v = f32[] select(g, a, b)
  i = s32[] select(g, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = s32[4] parameter(1)
  x = f32[4,5,6] broadcast(p0), dimensions={0}
  y = s32[4,5,6] broadcast(p1), dimensions={0}
  z = f32[] constant(0)
  zi = s32[] constant(0)
  ROOT r = (f32[4,6], s32[4,6]) reduce(x, y, z, zi), dimensions={1}, to_apply=argmax
}
"#,
        expect![[r#"
            argmax:
              a = f32[] parameter()
              ai = s32[] parameter()
              b = f32[] parameter()
              bi = s32[] parameter()
              g = pred[] compare(a, b)
              v = f32[] select(g, a, b)
              i = s32[] select(g, ai, bi)
              ROOT t = (f32[], s32[]) tuple(v, i)
            e:
              p0 = f32[4]{0} parameter()
              p1 = s32[4]{0} parameter()
              x = f32[4,5,6]{1,2,0} broadcast(p0)
              y = s32[4,5,6]{1,2,0} broadcast(p1)
              z = f32[] constant()
              zi = s32[] constant()
              ROOT r = (f32[4,6]{1,0}, s32[4,6]{1,0}) reduce(x, y, z, zi)
        "#]],
    );
}

#[test]
fn gpu_sort_uses_default_layouts() {
    // Row 119: keys f32[3,2]{0,1} are copied to {1,0} for the sort.
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[3,2]{0,1})->f32[3,2]{1,0}}
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  k = f32[3,2] parameter(0)
  ROOT s = f32[3,2] sort(k), dimensions={0}, to_apply=cmp
}
"#,
        expect![[r#"
            cmp:
              a = f32[] parameter()
              b = f32[] parameter()
              ROOT lt = pred[] compare(a, b)
            e:
              k = f32[3,2]{0,1} parameter()
              k.copy = f32[3,2]{1,0} copy(k)
              ROOT s = f32[3,2]{1,0} sort(k.copy)
            copy k.copy: %k {0,1} -> {1,0} (24 bytes, target_requirement)
        "#]],
    );
}

#[test]
fn gpu_triangular_solve_takes_fortran_layouts() {
    check(
        "gpu",
        r#"
HloModule m, entry_computation_layout={(f32[16,16]{1,0}, f32[16,8]{1,0})->f32[16,8]{1,0}}
ENTRY e {
  a = f32[16,16] parameter(0)
  b = f32[16,8] parameter(1)
  ROOT x = f32[16,8] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
}
"#,
        expect![[r#"
            e:
              a = f32[16,16]{1,0} parameter()
              a.copy = f32[16,16]{0,1} copy(a)
              b = f32[16,8]{1,0} parameter()
              b.copy = f32[16,8]{0,1} copy(b)
              x = f32[16,8]{0,1} triangular-solve(a.copy, b.copy)
              ROOT x.copy = f32[16,8]{1,0} copy(x)
            copy a.copy: %a {1,0} -> {0,1} (1024 bytes, target_requirement)
            copy b.copy: %b {1,0} -> {0,1} (512 bytes, target_requirement)
            copy x.copy: %x {0,1} -> {1,0} (512 bytes, entry)
        "#]],
    );
}

// ---------------------------------------------------------------------------
// Order independence: the result does not depend on instruction order.

#[test]
fn the_result_does_not_depend_on_instruction_order() {
    let a = r#"
HloModule m, entry_computation_layout={(f32[8,4]{0,1}, f32[8,4]{1,0})->(f32[8,4]{0,1}, f32[8,4]{1,0})}
ENTRY e {
  p0 = f32[8,4] parameter(0)
  p1 = f32[8,4] parameter(1)
  x = f32[8,4] add(p0, p1)
  y = f32[8,4] multiply(p0, p1)
  ROOT t = (f32[8,4], f32[8,4]) tuple(x, y)
}
"#;
    let b = r#"
HloModule m, entry_computation_layout={(f32[8,4]{0,1}, f32[8,4]{1,0})->(f32[8,4]{0,1}, f32[8,4]{1,0})}
ENTRY e {
  p1 = f32[8,4] parameter(1)
  p0 = f32[8,4] parameter(0)
  y = f32[8,4] multiply(p0, p1)
  x = f32[8,4] add(p0, p1)
  ROOT t = (f32[8,4], f32[8,4]) tuple(x, y)
}
"#;
    let spec = target("generic");
    let layouts = |text: &str| {
        let mut module = hlo::parse_module(text, "t.hlo").unwrap();
        let report = layout_assignment::run(&mut module, &spec).unwrap();
        let comp = module.entry_computation();
        let mut v: Vec<String> = comp.instructions().map(|(_, i)| format!("{}: {}", i.name, i.shape)).collect();
        v.sort();
        (v, report.copy_bytes())
    };
    assert_eq!(layouts(a), layouts(b));
}

#[test]
fn cpu_broadcast_operands_are_row_major_and_the_broadcast_agrees() {
    // XLA CPU needs every operand row-major, a broadcast's included; the
    // broadcast reads its operand in its own order restricted to its
    // dimensions, so its result takes an order that agrees, and the entry's
    // {0,1,2} result is a copy at the root.
    check(
        "cpu",
        r#"
HloModule m, entry_computation_layout={(f32[4,8]{0,1})->(f32[4,8,2]{2,1,0}, f32[4,8,2]{0,1,2})}
ENTRY e {
  p = f32[4,8] parameter(0)
  b = f32[4,8,2] broadcast(p), dimensions={0,1}
  c = f32[4,8,2] broadcast(p), dimensions={0,1}
  ROOT t = (f32[4,8,2], f32[4,8,2]) tuple(b, c)
}
"#,
        expect![[r#"
            e:
              p = f32[4,8]{0,1} parameter()
              p.copy = f32[4,8]{1,0} copy(p)
              b = f32[4,8,2]{2,1,0} broadcast(p.copy)
              c = f32[4,8,2]{1,0,2} broadcast(p.copy)
              c.copy = f32[4,8,2]{0,1,2} copy(c)
              ROOT t = (f32[4,8,2]{2,1,0}, f32[4,8,2]{0,1,2}) tuple(b, c.copy)
            copy p.copy: %p {0,1} -> {1,0} (128 bytes, target_requirement)
            copy c.copy: %c {1,0,2} -> {0,1,2} (256 bytes, entry)
        "#]],
    );
}
