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
    assert_eq!(out.text(), fresh.text());
    assert_eq!(out.report.assignment(), fresh.report.assignment());
    assert_eq!(out.report.relayout(), fresh.report.relayout());
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
                "exports_of(leaf)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "output_stub(leaf)",
                "parsed(leaf)",
                "printed(leaf)",
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
                "alone_error(main)",
                "callee_boundaries(f)",
                "callee_boundaries(main)",
                "exports_of(f)",
                "exports_of(leaf)",
                "input_check(f)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "output_entry_layout(inc)",
                "output_stub(f)",
                "output_stub(leaf)",
                "output_stub(main)",
                "parsed(leaf)",
                "parsed(main)",
                "printed(f)",
                "printed(leaf)",
                "printed(main)",
                "transformed(f)",
                "transformed(leaf)",
                "transformed(main)",
            ]
        "#]],
    );
}

#[test]
fn renaming_an_instruction_reruns_only_that_computations_steps() {
    // Instruction names are unique across the module: renaming one inside
    // the leaf changes its list of names, and the engine checks the names
    // of the whole module again from the lists it kept, without a query
    // of any other computation.
    check(
        &module("ROOT lr = f32[8,4] abs(ln)"),
        &module("ROOT lr = f32[8,4] abs(ln2)").replace("ln = f32", "ln2 = f32"),
        expect![[r#"
            [
                "exports_of(leaf)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "output_stub(leaf)",
                "parsed(leaf)",
                "printed(leaf)",
                "transformed(leaf)",
            ]
        "#]],
    );
}

#[test]
fn a_body_edit_checks_each_value_it_keeps_once() {
    // salsa keeps a value only after checking what it read, once per value
    // and run. A re-run after an edit looks at the edited computation's
    // values and at those of the computations that weighed it under a
    // boundary (here `f`, which bounds `leaf`, and the entry, which bounds
    // `f`): the engine redoes those whether what they read changed or
    // not. `g` and `add` are not looked at. This pins the checks, counted
    // per query. (Values keyed by a boundary are named by their
    // computation alone, so only the others are checked for repeats by
    // name.)
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
            "alone_assignment": 2,
            "alone_error": 1,
            "bounded_assignment": 8,
            "bounded_cost": 6,
            "bounded_signature": 12,
            "callee_boundaries": 2,
            "constraints": 3,
            "entry_layout": 1,
            "exports_of": 1,
            "input_check": 2,
            "input_facts": 3,
            "is_scheduled": 1,
            "output_entry_layout": 1,
            "output_stub": 3,
            "parsed": 3,
            "printed": 2,
            "printed_header": 1,
            "transformed": 3,
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
    driver::check_loaded_input(&mut db).expect("a well-formed module");
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
        out.text(),
        driver::run(&text, "m.hlo", &opts).expect("runs").text()
    );
}

/// The number of values a re-run after a body edit looks at (runs or
/// checks) does not grow with the module: a module of many computations
/// called by the entry, the middle one's `exponential` made `tanh` (its
/// signature unchanged), at two sizes. A re-run that read every
/// computation's parts, as the joins over the module did when they were
/// salsa queries, looked at about thirteen values per computation.
#[test]
fn a_body_edit_looks_at_as_much_whatever_the_size_of_the_module() {
    let opts = Options::new(Arc::new(target::load_builtin("cpu").expect("cpu")));
    let looked_at = |instructions: usize| {
        let text = test_support::scaling::Shape::ManyComputations.module(instructions);
        let blocks = instructions.div_ceil(6);
        let middle = format!("f{}", blocks / 2);
        let mut db = Database::with_execution_log();
        driver::run_in(&mut db, &text, "m.hlo", &opts).expect("runs");
        let body = db
            .computation_text(&middle)
            .expect("the middle computation");
        let edited = body.replace("exponential(", "tanh(");
        assert_ne!(body, edited);
        db.replace_computations(&[(middle.clone(), edited)])
            .expect("replaces");
        db.clear_executions();
        driver::run_loaded(&mut db, &opts).expect("runs");
        let mut ran: Vec<String> = db.executions().iter().map(|e| e.key.clone()).collect();
        ran.sort();
        ran.dedup();
        assert_eq!(ran, [middle], "only the edited computation's queries ran");
        db.executions().len() + db.validations().len()
    };
    let small = looked_at(600);
    let large = looked_at(6_000);
    assert_eq!(
        small, large,
        "values looked at: {small} for 100 computations, {large} for 1,000"
    );
    assert!(small < 40, "{small} values looked at");
}

/// An entry whose parameter and result are {0,1}, calling `callee` and
/// then `other`; `SECOND` is replaced by the entry's root (the call of
/// `other`), alone or after a second call of `callee`.
const BOUND: &str = r#"HloModule bound, entry_computation_layout={(f32[8,4]{0,1})->f32[8,4]{0,1}}

callee {
  cp = f32[8,4] parameter(0)
  cn = f32[8,4] negate(cp)
  ROOT cr = f32[8,4] abs(cn)
}

other {
  op = f32[8,4] parameter(0)
  ROOT oa = f32[8,4] abs(op)
}

ENTRY main {
  p = f32[8,4] parameter(0)
  c = f32[8,4] call(p), to_apply=callee
  SECOND
}
"#;

#[test]
fn a_callee_that_gains_and_loses_a_second_call_site_answers_as_a_fresh_run() {
    // Whether a computation's only caller decides its boundary follows the
    // call graph, which the engine rebuilds from the computations' calls:
    // each answer of one session, through the callee's turns between one
    // call site and two, must be a fresh run's.
    let once = BOUND.replace("SECOND", "ROOT o = f32[8,4] call(c), to_apply=other");
    let twice = BOUND.replace(
        "SECOND",
        "c2 = f32[8,4] call(c), to_apply=callee\n  ROOT o = f32[8,4] call(c2), to_apply=other",
    );
    let opts = Options::new(Arc::new(
        target::load_str("name: generic\n", "generic.yaml").expect("a target"),
    ));
    let mut db = Database::default();
    let mut callee_params = Vec::new();
    for text in [&once, &twice, &once, &twice] {
        let out = driver::run_in(&mut db, text, "m.hlo", &opts).expect("runs");
        let fresh = driver::run(text, "m.hlo", &opts).expect("runs");
        assert_eq!(out.text(), fresh.text());
        assert_eq!(out.report.assignment(), fresh.report.assignment());
        let module = out.module().expect("parses");
        let callee = module
            .computations
            .iter()
            .find(|c| c.name == "callee")
            .expect("the callee");
        let param = callee
            .instructions()
            .find(|(_, i)| i.name == "cp")
            .expect("its parameter");
        callee_params.push(param.1.shape.to_string());
    }
    // The entry bounds a callee of one call site to its own {0,1}; a callee
    // of two chooses alone.
    assert_eq!(callee_params[0], "f32[8,4]{0,1}", "{callee_params:?}");
    assert_ne!(callee_params[1], callee_params[0], "{callee_params:?}");
    assert_eq!(callee_params[2..], callee_params[..2], "{callee_params:?}");
}
