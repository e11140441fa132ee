//! The whole run-pass (`tessera run-pass --no-verify`, CPU target) on
//! generated modules of every shape in `test_support::scaling` at 1e4, 1e5
//! and 1e6 instructions: a long chain, blocks that all read one parameter
//! and one constant, a very wide root tuple, many small computations,
//! one computation needing a copy for every second instruction, and one
//! whose every result leaf needs a copy.
//! Each shape is linear in size, so the 1e6 row should be about ten times
//! the 1e5 row. `cargo xtask bench` runs this and records it.

use std::sync::Arc;

use divan::Bencher;
use test_support::scaling::Shape;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() {
    // As `tessera run-pass` sets it: a run keeps the memory it frees.
    allocator::configure(allocator::Lifetime::Batch);
    divan::main();
}

const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];

fn run_pass(bencher: Bencher<'_, '_>, shape: Shape, instructions: usize) {
    let text = shape.module(instructions);
    let opts = driver::Options {
        verify: false,
        ..driver::Options::new(Arc::new(target::load_builtin("cpu").expect("cpu target")))
    };
    bencher.bench_local(|| driver::run(&text, shape.name(), &opts).expect("runs"));
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn chain(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::Chain, instructions);
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn shared(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::Shared, instructions);
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn wide_tuple(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::WideTuple, instructions);
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn many_computations(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::ManyComputations, instructions);
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn many_copies(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::ManyCopies, instructions);
}

#[divan::bench(args = SIZES, sample_count = 3, sample_size = 1)]
fn copied_result(bencher: Bencher<'_, '_>, instructions: usize) {
    run_pass(bencher, Shape::CopiedResult, instructions);
}
