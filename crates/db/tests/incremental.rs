//! Incrementality, counted through salsa's event hook: which queries
//! re-execute when one computation of a module changes.

use std::sync::Arc;

use db::Database;
use expect_test::{Expect, expect};

/// Five computations: `add` (a reduction), `leaf` (called by `f`), `f` and
/// `g` (called by the entry), and the entry. `LEAF_ROOT` is replaced to edit
/// the leaf.
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

/// Loads `before`, assigns everything, then loads `after` and lists the
/// queries that ran for it (sorted, as `query(computation)`).
fn check(before: &str, after: &str, expected: Expect) {
    let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
    let mut db = Database::with_execution_log();
    db.load(before, "m.hlo", target.clone()).unwrap();
    db.assigned_module().unwrap();
    db.clear_executions();
    db.load(after, "m.hlo", target.clone()).unwrap();
    db.assign();
    let mut ran: Vec<String> = db
        .executions()
        .into_iter()
        .map(|e| format!("{}({})", e.query, e.key))
        .collect();
    ran.sort();
    ran.dedup();
    expected.assert_debug_eq(&ran);
    // Read after the count: building the whole module reads every
    // computation's parse, which the database does not keep between
    // revisions (see `db::parsed`).
    let (module, _) = db.assigned_module().unwrap();
    // Incremental or not, the answer is the one a fresh database gives.
    let mut fresh = Database::with_execution_log();
    fresh.load(after, "m.hlo", target).unwrap();
    let (fresh_module, _) = fresh.assigned_module().unwrap();
    assert_eq!(hlo::print_module(&module), hlo::print_module(&fresh_module));
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
fn editing_a_leaf_body_reruns_only_that_leaf() {
    // abs becomes exponential: the body changes, the signature does not.
    check(
        &module("ROOT lr = f32[8,4] abs(ln)"),
        &module("ROOT lr = f32[8,4] exponential(ln)"),
        expect![[r#"
            [
                "alone_assignment(leaf)",
                "exports_of(leaf)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "parsed(leaf)",
            ]
        "#]],
    );
}

#[test]
fn changing_a_leaf_root_layout_reruns_its_callers() {
    // A custom call fixes the leaf's result layout; changing it changes the
    // leaf's signature, so `f`, which calls the leaf, runs again, and so
    // does the entry, which calls `f`. `g` and `add` are not assigned
    // again. Each of `leaf`, `f` and `g` has one call site, so its caller
    // decides its boundary (the call-boundary rule): the new signatures
    // make `f` and the entry copy at those calls, so they weigh bounding
    // their callees (`bounded_*`, and the costs of the callees alone: the
    // first run computed `g`'s in the schedule, and it did not change),
    // keep today's choice: the boundaries they decide are the ones they
    // had, so no callee's final assignment is looked at.
    check(
        &module(
            r#"ROOT lr = f32[8,4]{1,0} custom-call(ln), custom_call_target="k", operand_layout_constraints={f32[8,4]{1,0}}"#,
        ),
        &module(
            r#"ROOT lr = f32[8,4]{0,1} custom-call(ln), custom_call_target="k", operand_layout_constraints={f32[8,4]{1,0}}"#,
        ),
        expect![[r#"
            [
                "alone_assignment(f)",
                "alone_assignment(leaf)",
                "alone_assignment(main)",
                "alone_error(main)",
                "bounded_assignment(f bounded)",
                "bounded_assignment(g bounded)",
                "bounded_assignment(leaf bounded)",
                "bounded_cost(f bounded)",
                "bounded_cost(leaf bounded)",
                "bounded_signature(f bounded)",
                "bounded_signature(g bounded)",
                "bounded_signature(leaf bounded)",
                "callee_boundaries(f)",
                "callee_boundaries(main)",
                "constraints(f)",
                "constraints(main)",
                "exports_of(f)",
                "exports_of(leaf)",
                "input_check(f)",
                "input_check(leaf)",
                "input_facts(leaf)",
                "parsed(f)",
                "parsed(g)",
                "parsed(leaf)",
            ]
        "#]],
    );
}

#[test]
fn constraints_rerun_when_what_they_read_changes_and_assignments_only_when_they_differ() {
    // A header attribute that layout assignment does not use changes: the
    // entry's constraints read the header (for the entry layout and
    // `input_output_alias`), so they re-run, find the same constraints,
    // and the entry's assignment does not re-run. No other computation's
    // constraints read the header.
    let text = module("ROOT lr = f32[8,4] abs(ln)");
    let edited = text.replacen("HloModule inc,", "HloModule inc, replica_count=2,", 1);
    assert_ne!(text, edited);
    check(
        &text,
        &edited,
        expect![[r#"
            [
                "constraints(main)",
                "entry_layout(inc)",
                "is_scheduled(inc)",
            ]
        "#]],
    );
}

#[test]
fn changing_the_entry_layout_reruns_the_entry_constraints_and_assignment_only() {
    // The entry result's first leaf changes layout: the entry's
    // constraints change, so its assignment re-runs; the callees' alone
    // and final assignments do not. The entry now copies `f`'s result, so
    // it weighs bounding `f` (and `f`, `leaf`) to the layout it wants,
    // finds it no cheaper, and keeps today's choice: the boundaries it
    // decides for `f` and `g` are the ones they had, so their final
    // assignments are not looked at. The callees' costs alone were
    // computed by the first run's schedule and stay. (The header is
    // module-wide, so every computation's input is checked again, but
    // none reads more of the header than whether it is scheduled.)
    let text = module("ROOT lr = f32[8,4] abs(ln)");
    let edited = text.replacen("->(f32[8,4]{1,0}, f32[8])", "->(f32[8,4]{0,1}, f32[8])", 1);
    assert_ne!(text, edited);
    check(
        &text,
        &edited,
        expect![[r#"
            [
                "alone_assignment(main)",
                "alone_error(main)",
                "bounded_assignment(f bounded)",
                "bounded_assignment(g bounded)",
                "bounded_assignment(leaf bounded)",
                "bounded_cost(f bounded)",
                "bounded_cost(leaf bounded)",
                "bounded_signature(f bounded)",
                "bounded_signature(g bounded)",
                "bounded_signature(leaf bounded)",
                "callee_boundaries(main)",
                "constraints(main)",
                "entry_layout(inc)",
                "input_check(main)",
                "is_scheduled(inc)",
                "parsed(f)",
                "parsed(g)",
                "parsed(leaf)",
            ]
        "#]],
    );
}

/// An entry whose parameter and result are {0,1}, and two computations with
/// one call site each: the entry bounds both to {0,1} (the call-boundary
/// rule). `CALLEE_ROOT` is replaced to edit the first.
const BOUND: &str = r#"HloModule bound, entry_computation_layout={(f32[8,4]{0,1})->f32[8,4]{0,1}}

callee {
  cp = f32[8,4] parameter(0)
  cn = f32[8,4] negate(cp)
  CALLEE_ROOT
}

other {
  op = f32[8,4] parameter(0)
  ROOT oa = f32[8,4] abs(op)
}

ENTRY main {
  p = f32[8,4] parameter(0)
  c = f32[8,4] call(p), to_apply=callee
  ROOT o = f32[8,4] call(c), to_apply=other
}
"#;

fn bound(callee_root: &str) -> String {
    BOUND.replace("CALLEE_ROOT", callee_root)
}

#[test]
fn bounded_callees_take_the_callers_layouts() {
    let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
    let mut db = Database::with_execution_log();
    db.load(&bound("ROOT cr = f32[8,4] abs(cn)"), "m.hlo", target)
        .unwrap();
    let (module, assignments) = db.assigned_module().unwrap();
    assert!(
        assignments.values().all(|a| a.copies.is_empty()),
        "{}",
        hlo::print_module(&module)
    );
    for a in assignments.values() {
        for s in a.signature.params.iter().chain([&a.signature.result]) {
            assert_eq!(s.to_string(), "f32[8,4]{0,1}");
        }
    }
}

#[test]
fn editing_a_bounded_callee_body_reruns_only_that_callee() {
    // The callee's body changes, neither its signatures nor what it moves:
    // its alone assignment (what its caller reads first) and its bounded
    // one (its final assignment) re-run, and nothing else.
    check(
        &bound("ROOT cr = f32[8,4] abs(cn)"),
        &bound("ROOT cr = f32[8,4] exponential(cn)"),
        expect![[r#"
            [
                "alone_assignment(callee)",
                "bounded_assignment(callee bounded)",
                "exports_of(callee)",
                "input_check(callee)",
                "input_facts(callee)",
                "parsed(callee)",
            ]
        "#]],
    );
}

#[test]
fn a_bounded_callee_that_now_costs_more_inside_moves_the_copy_out() {
    // The callee's root becomes a custom call that reads and writes {1,0}:
    // one copy on each side of it is needed whatever the entry chooses, so
    // the entry keeps today's choice (ties keep it) and makes both copies
    // itself. Both callees' chosen boundaries change (back to none), so
    // their final assignments re-run and take their alone ones; the
    // untouched `other` is not assigned again (its alone assignment did not
    // change).
    check(
        &bound("ROOT cr = f32[8,4] abs(cn)"),
        &bound(
            r#"ROOT cr = f32[8,4]{1,0} custom-call(cn), custom_call_target="k", operand_layout_constraints={f32[8,4]{1,0}}"#,
        ),
        expect![[r#"
            [
                "alone_assignment(callee)",
                "alone_assignment(main)",
                "alone_error(main)",
                "bounded_assignment(callee bounded)",
                "bounded_signature(callee bounded)",
                "callee_boundaries(main)",
                "exports_of(callee)",
                "input_check(callee)",
                "input_check(main)",
                "input_facts(callee)",
                "parsed(callee)",
            ]
        "#]],
    );
}

#[test]
fn recomputed_computations_names_assignments_that_ran() {
    let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
    // Without salsa's event hook: the assignments record themselves.
    let mut db = Database::default();
    db.load(
        &module("ROOT lr = f32[8,4] abs(ln)"),
        "m.hlo",
        target.clone(),
    )
    .unwrap();
    db.assigned_module().unwrap();
    db.clear_executions();
    db.replace_computations(&[(
        "leaf".to_string(),
        "leaf {\n  lp = f32[8,4] parameter(0)\n  ln = f32[8,4] negate(lp)\n  ROOT lr = f32[8,4] sine(ln)\n}".to_string(),
    )])
    .unwrap();
    // `assign`, not `assigned_module`: reading every computation's
    // assignment makes again those the database dropped after the last run
    // (see `db::alone_assignment`).
    db.assign();
    assert_eq!(db.recomputed_computations(), vec!["leaf".to_string()]);
    db.clear_executions();
    db.assign();
    assert!(db.recomputed_computations().is_empty());
}
