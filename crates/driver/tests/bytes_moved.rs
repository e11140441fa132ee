//! `bytes_moved` is honest: the pipeline's count over its output module
//! (every copy between two layouts, every transpose or reshape that is not
//! a bitcast) equals the sum of what the passes recorded doing (the copies
//! layout assignment inserted, the transposes and reshapes it left moving
//! data, the input's own copies its layouts made move data, and the copies
//! relayout inserted), on every bundled module and target. A move that one
//! side misses is a bytes_moved figure that flatters.

use std::sync::Arc;

fn recorded(report: &driver::PipelineReport) -> u64 {
    let la = report.assignment().map_or(0, |a| {
        a.copy_bytes() + a.movement_bytes() + a.input_copy_bytes()
    });
    let relayout = report.relayout().map_or(0, |r| r.inserted_copy_bytes());
    la + relayout
}

#[test]
fn bytes_moved_equals_what_the_passes_recorded_on_every_bundled_module() {
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for target in ["cpu", "gpu", "tpu"] {
        let opts = driver::Options::new(Arc::new(
            target::load_builtin(target).expect("a built-in target"),
        ));
        for file in test_support::hlo_files() {
            let text = std::fs::read_to_string(&file).expect("readable");
            // Error cases and modules that do not run are other tests' business.
            let Ok(out) = driver::run(&text, &file.display().to_string(), &opts) else {
                continue;
            };
            let counted = out.report.stats.copy_bytes + out.report.stats.movement_bytes;
            let recorded = recorded(&out.report);
            if counted != recorded {
                mismatches.push(format!("{} on {target}: the output moves {counted} bytes, the passes recorded {recorded}", file.display()));
            }
            checked += 1;
        }
    }
    assert!(checked > 300, "only {checked} runs");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
