//! Layout assignment's outputs compute what their inputs computed: every
//! small corpus module, on every target, evaluated by the reference
//! evaluator with layouts and bitcasts real, on the same random inputs.

use std::path::Path;

/// Corpus modules small enough for a debug-build evaluator.
const MODULES: &[&str] = &[
    "tuple_pytree_io",
    "transpose_reshape_chain",
    "pad_ops",
    "entry_layout_colmajor",
    "cond_switch",
    "dynamic_slice_update",
    "einsum_awkward",
    "gather_embedding",
    "int8_quantized_matmul",
    "loops_fori_while",
];

fn check(target_name: &str) {
    let target = target::load_builtin(target_name).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    for name in MODULES {
        let text = std::fs::read_to_string(dir.join(name).join("before_layout.hlo")).unwrap();
        let before = hlo::parse_module(&text, name).unwrap();
        let mut after = before.clone();
        layout_assignment::run(&mut after, &target).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            hlo::verify_module(&after).is_empty(),
            "{target_name} {name}"
        );
        assert!(
            hlo::uses_before_definition(&after).is_empty(),
            "{target_name} {name}"
        );
        let limits = interp::Limits::default();
        if let Err(e) = interp::check_equivalent(&before, &after, &[7], &limits) {
            panic!("{target_name} {name}: the output is not equivalent to the input:\n{e}");
        }
    }
}

#[test]
fn cpu_outputs_are_equivalent() {
    check("cpu");
}

#[test]
fn gpu_outputs_are_equivalent() {
    check("gpu");
}

#[test]
fn tpu_outputs_are_equivalent() {
    check("tpu");
}

/// The exact solver's outputs verify and compute what their inputs
/// computed, and its report is consistent: a lower bound on every
/// computation, at most the cost, and a cost at most the heuristic's.
/// An output byte-identical to the heuristic's is the one the tests above
/// prove equivalent; every other one is evaluated here. Returns how many
/// differ.
fn check_exact(target_name: &str) -> usize {
    let target = target::load_builtin(target_name).unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    let mut differ = 0;
    for name in MODULES {
        let text = std::fs::read_to_string(dir.join(name).join("before_layout.hlo")).unwrap();
        let before = hlo::parse_module(&text, name).unwrap();
        let mut heuristic = before.clone();
        let h = layout_assignment::run(&mut heuristic, &target)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut after = before.clone();
        let solver = layout_assignment::SolverOptions::exact();
        let e = layout_assignment::run_with(&mut after, &target, &solver)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            hlo::verify_module(&after).is_empty(),
            "{target_name} {name}"
        );
        assert!(
            hlo::uses_before_definition(&after).is_empty(),
            "{target_name} {name}"
        );
        let problems = layout_assignment::check_layouts(&after, Some(&target));
        assert!(problems.is_empty(), "{target_name} {name}: {problems:?}");
        let (ho, eo) = (h.optimality(), e.optimality());
        let lower = eo
            .lower_bound
            .unwrap_or_else(|| panic!("{target_name} {name}: the exact solver gave no bound"));
        assert!(
            lower <= eo.cost && eo.cost <= ho.cost,
            "{target_name} {name}: bound {lower}, exact {}, heuristic {}",
            eo.cost,
            ho.cost
        );
        assert_eq!(ho.lower_bound, None);
        if hlo::print_module(&after) == hlo::print_module(&heuristic) {
            assert_eq!(eo.cost, ho.cost, "{target_name} {name}");
            continue;
        }
        differ += 1;
        let limits = interp::Limits::default();
        if let Err(err) = interp::check_equivalent(&before, &after, &[7], &limits) {
            panic!("{target_name} {name}: the exact output is not equivalent to the input:\n{err}");
        }
    }
    differ
}

#[test]
fn exact_cpu_outputs_are_equivalent() {
    check_exact("cpu");
}

#[test]
fn exact_tpu_outputs_are_equivalent() {
    // The exact solver must have changed something on TPU (the
    // orientation and tiling of transpose_reshape_chain's reshapes), or
    // this repeats the heuristic's check.
    assert!(
        check_exact("tpu") >= 1,
        "no exact output differs from the heuristic's"
    );
}
