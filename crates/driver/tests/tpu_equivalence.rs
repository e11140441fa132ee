//! Every module under `testdata/tpu/`, through the whole pipeline (layout
//! assignment, relayout, the output verifiers) on each TPU target: the
//! output verifies, and the reference evaluator, with layouts and bitcasts
//! real, proves it computes what its input computes on the same random
//! inputs.

use std::sync::Arc;

fn tpu_modules() -> Vec<std::path::PathBuf> {
    let dir = test_support::testdata_dir().join("tpu");
    let files: Vec<_> = test_support::hlo_files()
        .into_iter()
        .filter(|p| p.starts_with(&dir))
        .collect();
    assert!(
        files.len() >= 40,
        "only {} modules under testdata/tpu",
        files.len()
    );
    files
}

fn check(target_name: &str) {
    let target = Arc::new(target::load_builtin(target_name).expect("built-in target"));
    let opts = driver::Options::new(target);
    let mut checked = 0;
    for path in tpu_modules() {
        let name = path.display().to_string();
        let t = std::time::Instant::now();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let before = hlo::parse_module(&text, &name).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        // Verification of the output is on: a problem fails the run.
        let out = driver::run(&text, &name, &opts)
            .unwrap_or_else(|e| panic!("{name} on {target_name}: {e}"));
        let report = interp::check_equivalent(
            &before,
            &out.module().expect("the output parses"),
            &[7],
            &interp::Limits::default(),
        )
        .unwrap_or_else(|e| {
            panic!("{name} on {target_name}: the output is not equivalent to the input:\n{e}")
        });
        assert!(
            report.elements_compared > 0,
            "{name} on {target_name}: nothing compared"
        );
        eprintln!(
            "{name} on {target_name}: {:.2?}, {} work units",
            t.elapsed(),
            report.work_after
        );
        checked += 1;
    }
    assert!(checked >= 40);
}

#[test]
fn tpu_outputs_verify_and_are_equivalent() {
    check("tpu");
}

#[test]
fn tpu_v5e_outputs_verify_and_are_equivalent() {
    check("tpu-v5e");
}

#[test]
fn tpu_v3_outputs_verify_and_are_equivalent() {
    check("tpu-v3");
}
