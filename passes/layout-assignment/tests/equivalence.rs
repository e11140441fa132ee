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
        assert!(hlo::verify_module(&after).is_empty(), "{target_name} {name}");
        assert!(hlo::uses_before_definition(&after).is_empty(), "{target_name} {name}");
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
