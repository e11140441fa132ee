//! Pass time against module size: generated modules of 1e3 to 1e6
//! instructions, built from a repeated block (transpose, reshape,
//! elementwise ops, a broadcast, a reduction and a dot), so that growth can
//! be read off directly. `cargo xtask bench` runs this and records it.

use divan::Bencher;

fn main() {
    divan::main();
}

/// The chain shape of `test_support::scaling` (12-instruction blocks).
fn generated_module(instructions: usize) -> String {
    test_support::scaling::Shape::Chain.module(instructions)
}

#[divan::bench(args = [1_000, 3_000, 10_000, 30_000, 100_000, 1_000_000], sample_count = 5, sample_size = 1)]
fn layout_assignment_cpu(bencher: Bencher<'_, '_>, instructions: usize) {
    let module = hlo::parse_module(&generated_module(instructions), "scaling.hlo")
        .expect("generated module parses");
    let target = target::load_builtin("cpu").expect("cpu target");
    bencher
        .with_inputs(|| module.clone())
        .bench_local_values(|mut m| layout_assignment::run(&mut m, &target).expect("assigns"));
}

#[divan::bench(args = [1_000, 3_000, 10_000, 30_000, 100_000, 1_000_000], sample_count = 5, sample_size = 1)]
fn layout_assignment_tpu(bencher: Bencher<'_, '_>, instructions: usize) {
    let module = hlo::parse_module(&generated_module(instructions), "scaling.hlo")
        .expect("generated module parses");
    let target = target::load_builtin("tpu").expect("tpu target");
    bencher
        .with_inputs(|| module.clone())
        .bench_local_values(|mut m| layout_assignment::run(&mut m, &target).expect("assigns"));
}
