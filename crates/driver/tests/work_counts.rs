//! The pipeline's work grows linearly with the module, on every generated
//! shape of module and on a plain and a tiled target: counted in steps
//! ([`hlo::Work`]), not timed, so that a loop turning quadratic fails here
//! deterministically instead of showing as noise in a benchmark.
//!
//! Each shape is run at two sizes four times apart. Linear work is about
//! four times the steps; a quadratic loop over the shared values (the
//! `shared` shape's parameter has one user per block) would be sixteen.

use std::sync::Arc;

use hlo::{Work, WorkCounts};
use test_support::scaling::Shape;

const SMALL: usize = 3_000;
const LARGE: usize = 4 * SMALL;

/// The largest ratio of steps that still counts as linear: the sizes are
/// four times apart, and the modules' fixed parts (entry parameters, the
/// root) make the ratio a little less or more than that.
const MOST: f64 = 5.0;

fn steps(shape: Shape, instructions: usize, target: &Arc<target::TargetSpec>) -> WorkCounts {
    let text = shape.module(instructions);
    let opts = driver::Options::new(target.clone());
    let (out, counts) = hlo::counted(|| driver::run(&text, "scaling.hlo", &opts));
    if let Err(e) = out {
        panic!("{} of {instructions} instructions: {e}", shape.name());
    }
    counts
}

#[test]
fn work_grows_linearly_on_every_generated_shape() {
    let mut failures = Vec::new();
    for target_name in ["cpu", "tpu"] {
        let target = Arc::new(target::load_builtin(target_name).expect("builtin target"));
        for shape in Shape::ALL {
            let small = steps(shape, SMALL, &target);
            let large = steps(shape, LARGE, &target);
            for kind in Work::ALL {
                let (a, b) = (small.get(kind), large.get(kind));
                // Kinds a shape does not exercise at all count nothing.
                if a == 0 && b == 0 {
                    continue;
                }
                let ratio = b as f64 / a.max(1) as f64;
                if ratio > MOST {
                    failures.push(format!(
                        "{} on {target_name}: {} grew {ratio:.2}x ({a} -> {b}) for 4x the instructions",
                        shape.name(),
                        kind.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every kind of step is counted somewhere, so that the test above bounds
/// something: a count that stopped being made would read as zero growth.
#[test]
fn every_kind_of_step_is_counted() {
    // On cpu the shared shape gets copies, so operand edits count too; a
    // result whose every leaf is copied puts copies into a tuple.
    let target = Arc::new(target::load_builtin("cpu").expect("builtin target"));
    let counts = steps(Shape::Shared, SMALL, &target);
    let copied = steps(Shape::CopiedResult, SMALL, &target);
    for kind in Work::ALL {
        let (shape, counts) = match kind {
            Work::TupleLeaves => (Shape::CopiedResult, copied),
            _ => (Shape::Shared, counts),
        };
        assert!(
            counts.get(kind) > 0,
            "no {} counted on the {} shape: {counts}",
            kind.name(),
            shape.name()
        );
    }
    // The same run counts the same steps: the counts are deterministic.
    assert_eq!(counts, steps(Shape::Shared, SMALL, &target));
}
