//! End-to-end: XLA's own layout assignment (before_layout → after_layout)
//! and the rest of its pipeline (after_layout → optimized, with fusions and
//! bitcasts) must be equivalent under the evaluator.

use std::time::Instant;

use interp::{EquivalenceError, Limits, check_equivalent};

fn load(name: &str, file: &str) -> hlo::Module {
    let path = format!(
        "{}/../../testdata/xla-cpu/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    hlo::parse_module(&text, file).unwrap_or_else(|e| panic!("{path} does not parse: {e:?}"))
}

/// Checks both steps of one corpus program and reports the time taken.
fn both_steps(name: &str, seeds: &[u64]) {
    let limits = Limits::default();
    let (before, after, optimized) = (
        load(name, "before_layout.hlo"),
        load(name, "after_layout.hlo"),
        load(name, "optimized.hlo"),
    );
    let t = Instant::now();
    let r1 = check_equivalent(&before, &after, seeds, &limits)
        .unwrap_or_else(|e| panic!("{name}: before_layout -> after_layout: {e}"));
    let t1 = t.elapsed();
    let t = Instant::now();
    let r2 = check_equivalent(&after, &optimized, seeds, &limits)
        .unwrap_or_else(|e| panic!("{name}: after_layout -> optimized: {e}"));
    let t2 = t.elapsed();
    assert_eq!(r1.seeds, seeds.len());
    assert_eq!(r2.seeds, seeds.len());
    assert!(r1.elements_compared > 0 && r1.elements_compared == r2.elements_compared);
    eprintln!(
        "{name}: before->after {t1:.2?} ({} work units), after->optimized {t2:.2?} ({} work units), {} elements compared",
        r1.work_after, r2.work_after, r1.elements_compared
    );
}

#[test]
fn cond_switch() {
    both_steps("cond_switch", &[1, 2]);
}

#[test]
fn dynamic_slice_update() {
    both_steps("dynamic_slice_update", &[1, 2]);
}

#[test]
fn einsum_awkward() {
    both_steps("einsum_awkward", &[1, 2]);
}

#[test]
fn entry_layout_colmajor() {
    both_steps("entry_layout_colmajor", &[1, 2]);
}

#[test]
fn gather_embedding() {
    both_steps("gather_embedding", &[1]);
}

#[test]
fn int8_quantized_matmul() {
    both_steps("int8_quantized_matmul", &[1, 2]);
}

#[test]
fn loops_fori_while() {
    both_steps("loops_fori_while", &[1, 2]);
}

#[test]
fn pad_ops() {
    both_steps("pad_ops", &[1, 2]);
}

#[test]
fn reductions_mixed() {
    both_steps("reductions_mixed", &[1]);
}

#[test]
fn sort_ops() {
    both_steps("sort_ops", &[1, 2]);
}

#[test]
fn transpose_reshape_chain() {
    both_steps("transpose_reshape_chain", &[1, 2]);
}

#[test]
fn tuple_pytree_io() {
    both_steps("tuple_pytree_io", &[1, 2]);
}

#[test]
fn layernorm_fwd() {
    both_steps("layernorm_fwd", &[1]);
}

#[test]
fn mlp_fwd() {
    both_steps("mlp_fwd", &[1]);
}

#[test]
fn linalg_custom_calls() {
    // JAX's LAPACK calls: Cholesky, LU, triangular solves, eigh.
    both_steps("linalg_custom_calls", &[1]);
}

#[test]
fn jax_fft_ops_and_topk() {
    for name in ["fft_ops", "topk"] {
        both_steps(&format!("../jax/{name}"), &[1, 2]);
    }
}

/// Mutations of XLA's optimized module that a wrong relayout would make:
/// every one must be caught.
#[test]
fn corrupted_optimized_modules_are_caught() {
    let name = "transpose_reshape_chain";
    let path = format!(
        "{}/../../testdata/xla-cpu/{name}/optimized.hlo",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let after = load(name, "after_layout.hlo");
    let limits = Limits::default();
    let mutations = [
        // A copy that no longer relays out: the bitcast after it reads the
        // transposed bytes as row-major.
        (
            "%copy.13 = f32[30,3,2,4]{3,2,1,0} copy(%transpose.35)",
            "%copy.13 = f32[30,3,2,4]{0,3,1,2} copy(%transpose.35)",
        ),
        // A bitcast to the wrong minor-to-major order.
        (
            "%bitcast.20 = f32[12,60]{1,0} bitcast(%copy.17)",
            "%bitcast.20 = f32[12,60]{0,1} bitcast(%copy.17)",
        ),
        // A copy into the wrong layout right before the root bitcast.
        (
            "%copy.14 = f32[24,30]{1,0} copy(%transpose.36)",
            "%copy.14 = f32[24,30]{0,1} copy(%transpose.36)",
        ),
        // A transpose replaced by a bitcast of the same shape.
        (
            "%transpose.34 = f32[24,30]{0,1} transpose(%bitcast.14), dimensions={1,0}",
            "%transpose.34 = f32[24,30]{1,0} bitcast(%bitcast.14)",
        ),
    ];
    for (from, to) in mutations {
        assert!(
            text.contains(from),
            "the corpus file no longer contains {from}"
        );
        let mutant = hlo::parse_module(&text.replacen(from, to, 1), "mutant.hlo").unwrap();
        match check_equivalent(&after, &mutant, &[1], &limits) {
            Err(EquivalenceError::Mismatch { .. }) => {}
            other => panic!("{to}: expected a mismatch, got {other:?}"),
        }
    }
}
