//! Applying an assignment reports a graph edit it cannot make instead of
//! dropping it: the plan of one computation applied to another whose
//! instruction at a copy's site has fewer operands.

use hlo::{CompId, EditError};
use layout_assignment::{
    ApplyError, ComputationAssignment, Phase, SolverOptions, apply_computation, assign_computation,
    context_for,
};

/// Two parameters in different layouts added together: `p1` is copied once
/// for operand 1 of `add` (the test `mismatched_entry_parameter_gets_one_copy`
/// of `assignment.rs`).
const ADD: &str =
    "HloModule m, entry_computation_layout={(f32[42,12]{1,0}, f32[42,12]{0,1})->f32[42,12]{1,0}}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  ROOT add = f32[42,12] add(p0, p1)
}
";

/// The same instructions, with the root reading one operand.
const NEGATE: &str =
    "HloModule m, entry_computation_layout={(f32[42,12]{1,0}, f32[42,12]{0,1})->f32[42,12]{1,0}}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  ROOT add = f32[42,12] negate(p0)
}
";

fn assignment(module: &hlo::Module) -> ComputationAssignment {
    let target = target::load_builtin("cpu").unwrap();
    let graph = hlo::CallGraph::new(module);
    let mut no_callees = |c: CompId, _: Phase| {
        Err(layout_assignment::PassError::Module(format!(
            "no callee #{} here",
            c.0
        )))
    };
    let ctx = context_for(
        module,
        &graph,
        module.entry,
        Phase::Final,
        None,
        &mut no_callees,
    )
    .unwrap();
    let names = |c: CompId| format!("#{}", c.0);
    assign_computation(
        module.entry_computation(),
        &names,
        &ctx,
        &target,
        &SolverOptions::default(),
    )
    .unwrap()
}

#[test]
fn an_edit_that_fails_is_an_error() {
    let module = hlo::parse_module(ADD, "add.hlo").unwrap();
    let plan = assignment(&module);
    assert_eq!(plan.copies.len(), 1);
    let mut own = module.entry_computation().clone();
    let report = apply_computation(&mut own, &plan, true).unwrap();
    assert_eq!(report.copies.len(), 1);

    let other = hlo::parse_module(NEGATE, "negate.hlo").unwrap();
    let mut comp = other.entry_computation().clone();
    let error = apply_computation(&mut comp, &plan, true).unwrap_err();
    assert_eq!(
        error,
        ApplyError::Edit {
            computation: "e".into(),
            error: EditError::OperandIndex { index: 1, count: 1 },
        }
    );
}

/// The report tells the input's own copies that move bytes from the copies
/// the pass inserted, whichever it made them in: here three parameters
/// fixed in `{0,1}` each need a copy for an `add`, and the input copies
/// `p3` into the result's `{0,1}` (and `p4` into its own layout, which
/// moves nothing).
#[test]
fn input_copies_are_reported_apart_from_inserted_ones() {
    let text = "HloModule m, entry_computation_layout={(f32[42,12]{1,0}, f32[42,12]{0,1}, \
        f32[42,12]{0,1}, f32[42,12]{1,0}, f32[42,12]{1,0})->(f32[42,12]{1,0}, f32[42,12]{0,1}, \
        f32[42,12]{1,0})}
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  p2 = f32[42,12] parameter(2)
  p3 = f32[42,12] parameter(3)
  p4 = f32[42,12] parameter(4)
  a1 = f32[42,12] add(p0, p1)
  a2 = f32[42,12] add(a1, p2)
  c = f32[42,12] copy(p3)
  same = f32[42,12] copy(p4)
  ROOT t = (f32[42,12], f32[42,12], f32[42,12]) tuple(a2, c, same)
}
";
    let mut module = hlo::parse_module(text, "t.hlo").unwrap();
    let target = target::load_builtin("cpu").unwrap();
    let report = layout_assignment::run(&mut module, &target).unwrap();
    let inserted: Vec<&str> = report.copies.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(inserted, ["p1.copy", "p2.copy"]);
    let input: Vec<(&str, u64)> = report
        .input_copies
        .iter()
        .map(|m| (m.name.as_str(), m.bytes))
        .collect();
    assert_eq!(input, [("c", 42 * 12 * 4)]);
}

#[test]
fn filling_an_entry_layout_that_names_every_layout_keeps_it_shared() {
    use std::sync::Arc;
    // Every layout given: the output's entry layout is the input's, and a
    // session keeps one copy of it (the parameters can number thousands).
    let module = hlo::parse_module(ADD, "add.hlo").unwrap();
    let plan = assignment(&module);
    let given = module.entry_computation_layout.clone();
    let mut filled = given.clone();
    let tiled = layout_assignment::fill_entry_layout(&mut filled, &plan.signature);
    assert!(tiled.is_empty());
    assert_eq!(filled, given);
    assert!(Arc::ptr_eq(&filled.parameters, &given.parameters));
    assert!(Arc::ptr_eq(&filled.result, &given.result));

    // No entry layout in the header: the derived one leaves every leaf
    // AUTO, and filling it makes new parameters and result.
    let auto = "HloModule m
ENTRY e {
  p0 = f32[42,12] parameter(0)
  p1 = f32[42,12] parameter(1)
  ROOT add = f32[42,12] add(p0, p1)
}
";
    let module = hlo::parse_module(auto, "auto.hlo").unwrap();
    let plan = assignment(&module);
    let given = module.entry_computation_layout.clone();
    let mut filled = given.clone();
    layout_assignment::fill_entry_layout(&mut filled, &plan.signature);
    assert!(!Arc::ptr_eq(&filled.parameters, &given.parameters));
    assert!(!Arc::ptr_eq(&filled.result, &given.result));
    for shape in filled.parameters.iter().chain([&*filled.result]) {
        assert!(
            shape.as_array().is_some_and(|a| a.layout.is_some()),
            "{shape}"
        );
    }
}
