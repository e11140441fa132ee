//! Runs every case in `tests/cases/` through our FileCheck command line and
//! asserts LLVM's recorded verdict: the exit status, any `STDERR-CONTAINS`
//! substrings, and, when the case records it, LLVM's exact diagnostics.

#[path = "support/casefile.rs"]
mod casefile;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

fn run_case(path: &Path, contents: String) -> datatest_stable::Result<()> {
    let case = casefile::parse(&contents).map_err(|e| format!("{}: {e}", path.display()))?;
    let Some(expected_exit) = case.exit else {
        return Err(format!(
            "{}: no EXIT header; run compare_llvm --bless",
            path.display()
        )
        .into());
    };
    let dir = std::env::temp_dir().join(format!(
        "filecheck-conformance-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    let args = casefile::prepare(&case, &dir)?;
    let mut stderr = Vec::new();
    let exit = filecheck::run_cli_in_dir(&args, &mut case.input.as_bytes(), &mut stderr, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&stderr);

    if exit != expected_exit {
        return Err(format!(
            "exit status {exit}, LLVM's is {expected_exit}; our stderr:\n{stderr}"
        )
        .into());
    }
    for needle in &case.stderr_contains {
        if !stderr.contains(needle.as_str()) {
            return Err(format!("stderr lacks `{needle}`; our stderr:\n{stderr}").into());
        }
    }
    if let Some(expected) = &case.stderr
        && stderr != expected.as_str()
    {
        return Err(format!(
            "diagnostics differ from LLVM's.\n--- LLVM\n{expected}--- ours\n{stderr}"
        )
        .into());
    }
    Ok(())
}

datatest_stable::harness! {
    { test = run_case, root = "tests/cases", pattern = r"^.*\.case$" },
}
