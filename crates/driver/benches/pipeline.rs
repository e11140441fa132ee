//! The pipeline on the real modules bundled in `testdata/xla-cpu`: the
//! layout-assignment pass alone (what XLA's `pass_only` time measures) and
//! the whole `run-pass` (parse, assign, relayout, print), and that with the
//! verifiers after it, CPU target.
//! `cargo xtask bench` runs this and records it next to XLA's numbers.

use std::path::Path;
use std::sync::Arc;

use divan::Bencher;

// The same allocator as the `tessera` binary, so that the numbers are the
// ones a user of the command line or the server sees.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() {
    allocator::configure(allocator::Lifetime::Batch);
    divan::main();
}

const MODULES: &[&str] = &[
    "attention_f32",
    "cond_switch",
    "einsum_awkward",
    "large_transformer_24_f32",
    "linalg_custom_calls",
    "loops_fori_while",
    "mlp_fwd",
    "mlp_fwd_bwd",
    "transpose_reshape_chain",
];

fn text(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/xla-cpu")
        .join(name)
        .join("before_layout.hlo");
    std::fs::read_to_string(path).expect("bundled corpus module")
}

#[divan::bench(args = MODULES, sample_count = 20)]
fn pass(bencher: Bencher<'_, '_>, name: &str) {
    let module = hlo::parse_module(&text(name), name).expect("parses");
    let target = target::load_builtin("cpu").expect("cpu target");
    bencher
        .with_inputs(|| module.clone())
        .bench_local_values(|mut m| layout_assignment::run(&mut m, &target).expect("assigns"));
}

/// The whole run-pass: parse, assign, relayout, print
/// (`tessera run-pass --no-verify`).
#[divan::bench(args = MODULES, sample_count = 20)]
fn run_pass(bencher: Bencher<'_, '_>, name: &str) {
    let text = text(name);
    let opts = driver::Options {
        verify: false,
        ..driver::Options::new(Arc::new(target::load_builtin("cpu").expect("cpu target")))
    };
    bencher.bench_local(|| driver::run(&text, name, &opts).expect("runs"));
}

/// The same followed by the structural and layout verifiers (the
/// command's default).
#[divan::bench(args = MODULES, sample_count = 20)]
fn run_pass_verified(bencher: Bencher<'_, '_>, name: &str) {
    let text = text(name);
    let opts = driver::Options::new(Arc::new(target::load_builtin("cpu").expect("cpu target")));
    bencher.bench_local(|| driver::run(&text, name, &opts).expect("runs"));
}
