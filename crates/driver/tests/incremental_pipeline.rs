//! Incrementality of the whole pipeline, counted through salsa's event
//! hook: which queries re-execute, printing included, when a session runs
//! again after one computation changed.

use std::sync::Arc;

use db::Database;
use driver::Options;
use expect_test::{Expect, expect};

/// `add` (a reduction), `leaf` (called by `f`), `f` and `g` (called by the
/// entry), and the entry. `LEAF_ROOT` is replaced to edit the leaf.
const MODULE: &str = r#"HloModule inc, entry_computation_layout={(f32[8,4]{1,0})->(f32[8,4]{1,0}, f32[8])}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

leaf {
  lp = f32[8,4] parameter(0)
  ln = f32[8,4] negate(lp)
  LEAF_ROOT
}

f {
  fp = f32[8,4] parameter(0)
  ROOT fc = f32[8,4] call(fp), to_apply=leaf
}

g {
  gp = f32[8,4] parameter(0)
  zero = f32[] constant(0)
  ROOT gr = f32[8] reduce(gp, zero), dimensions={1}, to_apply=add
}

ENTRY main {
  p = f32[8,4] parameter(0)
  x = f32[8,4] call(p), to_apply=f
  y = f32[8] call(p), to_apply=g
  ROOT t = (f32[8,4], f32[8]) tuple(x, y)
}
"#;

fn module(leaf_root: &str) -> String {
    MODULE.replace("LEAF_ROOT", leaf_root)
}

/// Runs the pipeline on `before`, then on `after` in the same database,
/// and checks the queries the second run executed (sorted, as
/// `query(computation)`, assignment queries left out: `crates/db`'s tests
/// count those) and that its answer is a fresh run's.
fn check(before: &str, after: &str, expected: Expect) {
    let opts = Options::new(Arc::new(target::load_builtin("tpu").expect("tpu")));
    let mut db = Database::with_execution_log();
    driver::run_in(&mut db, before, "m.hlo", &opts).expect("runs");
    db.clear_executions();
    let out = driver::run_in(&mut db, after, "m.hlo", &opts).expect("runs");
    let assignment = ["assignment", "signature", "cost", "constraints"];
    let mut ran: Vec<String> = db
        .executions()
        .into_iter()
        .filter(|e| !assignment.iter().any(|a| e.query.contains(a)))
        .map(|e| format!("{}({})", e.query, e.key))
        .collect();
    ran.sort();
    ran.dedup();
    expected.assert_debug_eq(&ran);
    let fresh = driver::run(after, "m.hlo", &opts).expect("runs");
    assert_eq!(out.text, fresh.text);
    assert_eq!(out.report.assignment, fresh.report.assignment);
    assert_eq!(out.report.relayout, fresh.report.relayout);
    assert_eq!(out.report.stats, fresh.report.stats);
}

#[test]
fn nothing_changed_nothing_runs() {
    let text = module("ROOT lr = f32[8,4] abs(ln)");
    check(
        &text,
        &text,
        expect![[r#"
        []
    "#]],
    );
}

#[test]
fn a_body_edit_reruns_only_that_computations_steps() {
    // abs becomes exponential: the body changes, the signature does not.
    check(
        &module("ROOT lr = f32[8,4] abs(ln)"),
        &module("ROOT lr = f32[8,4] exponential(ln)"),
        expect![[r#"
            [
                "assembled(inc)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "output_names(leaf)",
                "output_stub(leaf)",
                "output_verdict(inc)",
                "parsed(leaf)",
                "printed(leaf)",
                "reports(leaf)",
                "transformed(leaf)",
            ]
        "#]],
    );
}

#[test]
fn a_signature_edit_reruns_the_neighbours_steps_too() {
    // A custom call fixes the leaf's result layout; changing it changes the
    // leaf's signature, and with it what `f` calls.
    check(
        &module(
            r#"ROOT lr = f32[8,4]{1,0} custom-call(ln), custom_call_target="k", operand_layout_constraints={f32[8,4]{1,0}}"#,
        ),
        &module(
            r#"ROOT lr = f32[8,4]{0,1} custom-call(ln), custom_call_target="k", operand_layout_constraints={f32[8,4]{1,0}}"#,
        ),
        expect![[r#"
            [
                "assembled(inc)",
                "call_graph(inc)",
                "input_check(f)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "input_verdict(inc)",
                "merged_rewrites(inc)",
                "output_entry_layout(inc)",
                "output_module_problems(inc)",
                "output_names(f)",
                "output_names(leaf)",
                "output_stub(f)",
                "output_stub(leaf)",
                "output_stub(main)",
                "output_verdict(inc)",
                "parsed(leaf)",
                "parsed(main)",
                "printed(f)",
                "printed(leaf)",
                "printed(main)",
                "reports(f)",
                "reports(leaf)",
                "reports(main)",
                "transformed(f)",
                "transformed(leaf)",
                "transformed(main)",
            ]
        "#]],
    );
}

#[test]
fn renaming_an_instruction_reruns_the_module_wide_name_checks_too() {
    // Instruction names are unique across the module: renaming one inside
    // the leaf re-runs the module-wide checks of the names, which read
    // each computation's list of names, and nothing else of the others.
    check(
        &module("ROOT lr = f32[8,4] abs(ln)"),
        &module("ROOT lr = f32[8,4] abs(ln2)").replace("ln = f32", "ln2 = f32"),
        expect![[r#"
            [
                "assembled(inc)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "input_module_problems(inc)",
                "input_verdict(inc)",
                "merged_rewrites(inc)",
                "output_module_problems(inc)",
                "output_names(leaf)",
                "output_stub(leaf)",
                "output_verdict(inc)",
                "parsed(leaf)",
                "printed(leaf)",
                "reports(leaf)",
                "transformed(leaf)",
            ]
        "#]],
    );
}

#[test]
fn a_body_edit_checks_each_value_it_keeps_once() {
    // A re-run after an edit reads every computation's parts, and salsa
    // keeps a value only after checking what it read: that check, once per
    // value, is what such a re-run spends on the computations the edit did
    // not touch. This pins the checks, counted per query over the module's
    // five computations; a new per-computation query shows up here as five
    // more. (Values keyed by a boundary are named by their computation
    // alone, so only the others are checked for repeats by name.)
    let opts = Options::new(Arc::new(target::load_builtin("tpu").expect("tpu")));
    let mut db = Database::with_execution_log();
    driver::run_in(
        &mut db,
        &module("ROOT lr = f32[8,4] abs(ln)"),
        "m.hlo",
        &opts,
    )
    .expect("runs");
    db.clear_executions();
    let edited = module("ROOT lr = f32[8,4] exponential(ln)");
    driver::run_in(&mut db, &edited, "m.hlo", &opts).expect("runs");
    let checked = db.validations();
    let mut named: Vec<String> = checked
        .iter()
        .filter(|v| !v.query.starts_with("bounded_"))
        .map(|v| format!("{}({})", v.query, v.key))
        .collect();
    let all = named.len();
    named.sort();
    named.dedup();
    assert_eq!(named.len(), all, "a value was checked twice in one run");
    let mut per_query = std::collections::BTreeMap::<String, usize>::new();
    for v in &checked {
        *per_query.entry(v.query.clone()).or_default() += 1;
    }
    expect![[r#"
        {
            "alone_assignment": 4,
            "alone_cost": 3,
            "alone_signature": 3,
            "bounded_assignment": 8,
            "bounded_cost": 6,
            "bounded_signature": 10,
            "call_graph": 1,
            "constraints": 5,
            "entry_layout": 1,
            "final_assignment": 5,
            "input_check": 4,
            "input_facts": 4,
            "input_module_problems": 1,
            "input_verdict": 1,
            "merged_assignment": 1,
            "merged_rewrites": 1,
            "name_index": 1,
            "names": 1,
            "output_entry_layout": 1,
            "output_module_problems": 1,
            "output_names": 4,
            "output_stub": 4,
            "parsed": 4,
            "printed": 4,
            "printed_header": 1,
            "reports": 4,
            "transformed": 4,
        }
    "#]]
    .assert_debug_eq(&per_query);
}

/// A session checked when loaded (as the service checks a new session)
/// keeps each computation's parse and checks for its first run, which
/// neither parses nor checks again, and answers as a fresh run does.
#[test]
fn a_first_run_after_a_check_reuses_the_parses_and_checks() {
    let text = module("ROOT lr = f32[8,4] abs(ln)");
    let opts = Options::new(Arc::new(target::load_builtin("tpu").expect("tpu")));
    let mut db = Database::with_execution_log();
    db.load(&text, "m.hlo", opts.target.clone()).expect("loads");
    driver::check_loaded_input(&db).expect("a well-formed module");
    db.clear_executions();
    let out = driver::run_loaded(&mut db, &opts).expect("runs");
    let again: Vec<String> = db
        .executions()
        .into_iter()
        .map(|e| format!("{}({})", e.query, e.key))
        .filter(|q| q.starts_with("input") || q.starts_with("parsed"))
        .collect();
    assert_eq!(again, Vec::<String>::new(), "parsed or checked again");
    assert_eq!(
        out.text,
        driver::run(&text, "m.hlo", &opts).expect("runs").text
    );
}
