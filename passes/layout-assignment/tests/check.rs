//! The layout verifier (`check_layouts`) on broken modules: each case is a
//! module with one layout mistake, the problem the verifier must report,
//! and the same module with the mistake fixed, which must pass. The pair
//! keeps a check from passing by reporting everything or nothing.

struct Case {
    name: &'static str,
    /// `None`: the target-independent checks only.
    target: Option<&'static str>,
    broken: &'static str,
    fixed: &'static str,
    /// A substring of the one expected problem's text.
    expect: &'static str,
}

fn problems(text: &str, target_name: Option<&str>) -> Vec<String> {
    let module = hlo::parse_module(text, "case.hlo").unwrap_or_else(|e| panic!("{e}"));
    assert!(
        hlo::verify_module(&module).is_empty(),
        "structurally invalid case"
    );
    let spec = target_name.map(|t| target::load_builtin(t).unwrap());
    layout_assignment::check_layouts(&module, spec.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

const CASES: &[Case] = &[
    Case {
        name: "missing layout",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3] negate(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(p)\n}\n",
        expect: "%n: an array value has no layout",
    },
    Case {
        name: "elementwise op changes layout",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{0,1} negate(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT n = f32[2,3]{0,1} negate(p)\n}\n",
        expect: "negate keeps its layout, but operand 0 is f32[2,3]{1,0}",
    },
    Case {
        name: "broadcast out of order",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT b = f32[2,3,4]{2,1,0} broadcast(p), dimensions={0,1}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT b = f32[2,3,4]{2,1,0} broadcast(p), dimensions={0,1}\n}\n",
        expect: "broadcast operand f32[2,3]{0,1} is not in the order of its result",
    },
    Case {
        name: "bitcast that moves elements",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT b = f32[2,3]{0,1} bitcast(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT b = f32[3,2]{0,1} bitcast(p)\n}\n",
        expect: "%b:",
    },
    Case {
        // A bitcast onto a buffer's physical array (an expanded relayout's
        // first step) must keep its dimensions: merged or split, not
        // regrouped.
        name: "physical view that regroups the dimensions",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[3,5]{1,0:T(2,2)} parameter(0)\n  ROOT b = f32[4,6]{1,0} bitcast(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[3,5]{1,0:T(2,2)} parameter(0)\n  ROOT b = f32[2,3,2,2]{3,2,1,0} bitcast(p)\n}\n",
        expect: "%b: bitcast from f32[3,5]{1,0:T(2,2)} to f32[4,6]{1,0} is no layout change, reshape, transpose or physical view that keeps every byte: the plain side's dimensions [4,6] neither merge nor split the other side's physical dimensions [2,3,2,2]",
    },
    Case {
        // bf16 pairs of rows share 32 bits under (2,1): the plain layout of
        // the same dimensions is another order, the physical array is not.
        name: "repeated tiles read as a layout change",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)\n  ROOT b = bf16[8,128]{1,0} bitcast(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)\n  ROOT b = bf16[4,128,2]{2,1,0} bitcast(p)\n}\n",
        expect: "%b: bitcast from bf16[8,128]{1,0:T(8,128)(2,1)} to bf16[8,128]{1,0} is no layout change",
    },
    Case {
        // The buffers are the same size (a smaller one is refused by the
        // structural verifier), but the padding rows would be read as data:
        // f32[4,256] is no physical view of the tiles, whose physical array
        // is [1,1,8,128] (f32[8,128]{1,0} is one).
        name: "tiled bitcast across a padded tile",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[3,128]{1,0:T(8,128)} parameter(0)\n  ROOT b = f32[4,256]{1,0} bitcast(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n  ROOT b = f32[4,256]{1,0} bitcast(p)\n}\n",
        expect: "%b:",
    },
    Case {
        // The tile (2,*,4) spans dimension 0 whole, so this bitcast is the
        // transpose {3,1,0,2}, which neither layout's order shows.
        name: "tiled bitcast that is a hidden transpose",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3,4,30]{2,1,0,3:T(2,*,4)} parameter(0)\n  ROOT b = f32[30,2,3,4]{3,2,1,0} bitcast(p)\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3,4,30]{2,1,0,3:T(2,*,4)} parameter(0)\n  ROOT b = f32[30,3,2,4]{3,2,1,0} bitcast(p)\n}\n",
        expect: "%b: bitcast from f32[2,3,4,30]{2,1,0,3:T(2,*,4)} to f32[30,2,3,4]{3,2,1,0} is no layout change",
    },
    Case {
        name: "entry layout not honoured",
        target: None,
        broken: "HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{0,1}}\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT c = f32[2,3]{0,1} copy(p)\n}\n",
        fixed: "HloModule m, entry_computation_layout={(f32[2,3]{1,0})->f32[2,3]{0,1}}\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT c = f32[2,3]{0,1} copy(p)\n}\n",
        expect: "parameter 0",
    },
    Case {
        name: "call operand differs from the callee parameter",
        target: None,
        broken: "HloModule m\nf {\n  a = f32[2,3]{0,1} parameter(0)\n  ROOT n = f32[2,3]{0,1} negate(a)\n}\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT c = f32[2,3]{0,1} call(p), to_apply=f\n}\n",
        fixed: "HloModule m\nf {\n  a = f32[2,3]{1,0} parameter(0)\n  ROOT n = f32[2,3]{1,0} negate(a)\n}\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT c = f32[2,3]{1,0} call(p), to_apply=f\n}\n",
        expect: "%c:",
    },
    Case {
        name: "custom call operand constraint",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT c = f32[2,3]{0,1} custom-call(p), custom_call_target=\"foo\", operand_layout_constraints={f32[2,3]{0,1}}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT c = f32[2,3]{0,1} custom-call(p), custom_call_target=\"foo\", operand_layout_constraints={f32[2,3]{0,1}}\n}\n",
        expect: "operand 0 is f32[2,3]{1,0} but the custom call requires f32[2,3]{0,1}",
    },
    Case {
        name: "target need (CPU dot operands row-major)",
        target: Some("cpu"),
        broken: "HloModule m\nENTRY e {\n  a = f32[4,8]{0,1} parameter(0)\n  b = f32[8,2]{1,0} parameter(1)\n  ROOT d = f32[4,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  a = f32[4,8]{1,0} parameter(0)\n  b = f32[8,2]{1,0} parameter(1)\n  ROOT d = f32[4,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
        expect: "operand 0 is f32[4,8]{0,1} but target cpu needs",
    },
    Case {
        name: "array outfeed",
        target: Some("cpu"),
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  t = token[] after-all()\n  ROOT o = token[] outfeed(p, t), outfeed_shape=f32[2,3]{0,1}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  t = token[] after-all()\n  ROOT o = token[] outfeed(p, t), outfeed_shape=f32[2,3]{0,1}\n}\n",
        expect: "operand 0 is f32[2,3]{1,0} but target cpu needs {0,1}",
    },
    Case {
        name: "tuple outfeed leaf",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  q = s32[4]{0} parameter(1)\n  tu = (f32[2,3]{1,0}, s32[4]{0}) tuple(p, q)\n  t = token[] after-all()\n  ROOT o = token[] outfeed(tu, t), outfeed_shape=(f32[2,3]{0,1}, s32[4]{0})\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  q = s32[4]{0} parameter(1)\n  tu = (f32[2,3]{0,1}, s32[4]{0}) tuple(p, q)\n  t = token[] after-all()\n  ROOT o = token[] outfeed(tu, t), outfeed_shape=(f32[2,3]{0,1}, s32[4]{0})\n}\n",
        expect: "operand 0 leaf 0 is f32[2,3]{1,0} but {0,1} is required",
    },
    Case {
        name: "custom call tuple operand leaf",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  q = s32[4]{0} parameter(1)\n  tu = (f32[2,3]{1,0}, s32[4]{0}) tuple(p, q)\n  ROOT c = f32[2]{0} custom-call(tu), custom_call_target=\"foo\", operand_layout_constraints={(f32[2,3]{0,1}, s32[4]{0})}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  q = s32[4]{0} parameter(1)\n  tu = (f32[2,3]{0,1}, s32[4]{0}) tuple(p, q)\n  ROOT c = f32[2]{0} custom-call(tu), custom_call_target=\"foo\", operand_layout_constraints={(f32[2,3]{0,1}, s32[4]{0})}\n}\n",
        expect: "operand 0 leaf 0 is f32[2,3]{1,0} but {0,1} is required",
    },
    Case {
        name: "output aliased to an operand",
        target: None,
        broken: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT c = f32[2,3]{1,0} custom-call(p), custom_call_target=\"foo\", output_to_operand_aliasing={{}: (0, {})}\n}\n",
        fixed: "HloModule m\nENTRY e {\n  p = f32[2,3]{0,1} parameter(0)\n  ROOT c = f32[2,3]{0,1} custom-call(p), custom_call_target=\"foo\", output_to_operand_aliasing={{}: (0, {})}\n}\n",
        expect: "output leaf 0 aliases operand 0 but is f32[2,3]{1,0} while the operand is f32[2,3]{0,1}",
    },
];

#[test]
fn each_broken_module_has_exactly_its_problem_and_the_fixed_one_none() {
    for case in CASES {
        let broken = problems(case.broken, case.target);
        assert!(
            broken.len() == 1 && broken[0].contains(case.expect),
            "{}: expected one problem containing {:?}, got {broken:#?}",
            case.name,
            case.expect
        );
        let fixed = problems(case.fixed, case.target);
        assert!(
            fixed.is_empty(),
            "{}: the fixed module still has {fixed:#?}",
            case.name
        );
    }
}
