//! Helpers shared by the pipeline's tests.
#![allow(dead_code)]

use driver::{Output, PipelineError};

/// The two runs give the same text, reports, counts and module name, or
/// the same error; both outputs, when both succeeded. Texts that differ
/// are reported by their first line that differs.
pub fn same_answer<'o>(
    name: &str,
    a: &'o Result<Output, PipelineError>,
    b: &'o Result<Output, PipelineError>,
) -> Option<(&'o Output, &'o Output)> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            if a.text() != b.text() {
                let first = a
                    .text()
                    .lines()
                    .zip(b.text().lines())
                    .enumerate()
                    .find(|(_, (x, y))| x != y)
                    .map(|(i, (x, y))| format!("line {}: {x:?} against {y:?}", i + 1));
                panic!(
                    "{name}: the texts differ, first at {}",
                    first.unwrap_or_else(|| "the end of the shorter".into())
                );
            }
            assert_eq!(
                a.report.assignment(),
                b.report.assignment(),
                "{name}: the assignment reports differ"
            );
            assert_eq!(
                a.report.relayout(),
                b.report.relayout(),
                "{name}: the relayout reports differ"
            );
            assert_eq!(a.report.stats, b.report.stats, "{name}: the counts differ");
            assert_eq!(a.report.module, b.report.module, "{name}");
            Some((a, b))
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{name}: the errors differ");
            None
        }
        (a, b) => panic!(
            "{name}: {:?} against {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }
}
