//! Goldens that pin the layouts the pipeline chooses for every bundled
//! corpus module, on every built-in target, not only how many copies it
//! makes: the entry computation layout, every `copy` with its operand and
//! layouts, and every `bitcast`, as the output text prints them (metadata
//! left out), with the counts over the output.
//!
//! Each module's expectation for target T is
//! `testdata/xla-cpu/<module>/layouts.<T>.txt`. A change that moves a
//! layout fails here with the first lines that differ; when the change is
//! meant, record the new layouts with
//! `TESSERA_BLESS=1 cargo test -p driver --test layout_goldens` and review
//! the diff of those files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

const TARGETS: [&str; 3] = ["cpu", "gpu", "tpu"];

fn corpus_modules() -> Vec<PathBuf> {
    let dir = test_support::testdata_dir().join("xla-cpu");
    let mut modules: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/xla-cpu")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.join("before_layout.hlo").is_file())
        .collect();
    modules.sort();
    modules
}

/// What the golden pins of one output module.
fn summary(name: &str, target: &str, out: &driver::Output) -> String {
    let stats = &out.report.stats;
    let mut s = format!(
        "# {name} on {target}: what `tessera run-pass --target={target}` chooses\n\
         # instructions {}, copies {}, bitcasts {}, transposes {}, bytes moved {}, padding bytes {}\n",
        stats.instructions,
        stats.copies,
        stats.bitcasts,
        stats.transposes,
        stats.copy_bytes + stats.movement_bytes,
        stats.padding_bytes,
    );
    for line in out.text().lines() {
        let pinned =
            line.starts_with("HloModule") || line.contains(" copy(") || line.contains(" bitcast(");
        if pinned {
            // Metadata (source lines) says nothing of layouts.
            let line = line.split(", metadata={").next().unwrap_or(line);
            s.push_str(line.trim_end());
            s.push('\n');
        }
    }
    s
}

fn check(module_dir: &Path, target: &str, failures: &mut Vec<String>) {
    let name = module_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let text = std::fs::read_to_string(module_dir.join("before_layout.hlo")).expect("the module");
    let spec = Arc::new(target::load_builtin(target).expect("a built-in target"));
    let out = driver::run(&text, &format!("{name}.hlo"), &driver::Options::new(spec))
        .unwrap_or_else(|e| panic!("{name} on {target}: {e}"));
    let got = summary(&name, target, &out);
    let path = module_dir.join(format!("layouts.{target}.txt"));
    if std::env::var_os("TESSERA_BLESS").is_some() {
        std::fs::write(&path, &got).expect("writes the golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got == want {
        return;
    }
    let first = got
        .lines()
        .zip(want.lines())
        .position(|(g, w)| g != w)
        .unwrap_or_else(|| got.lines().count().min(want.lines().count()));
    failures.push(format!(
        "{}: line {} differs\n  expected: {}\n  got:      {}",
        path.display(),
        first + 1,
        want.lines().nth(first).unwrap_or("(the end of the file)"),
        got.lines().nth(first).unwrap_or("(the end of the output)"),
    ));
}

#[test]
fn every_corpus_module_keeps_its_layouts_on_every_target() {
    let modules = corpus_modules();
    assert!(
        modules.len() >= 20,
        "found {} corpus modules",
        modules.len()
    );
    let mut failures = Vec::new();
    for dir in &modules {
        for target in TARGETS {
            check(dir, target, &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} goldens differ (bless with TESSERA_BLESS=1 when the change is meant):\n{}",
        failures.len(),
        modules.len() * TARGETS.len(),
        failures.join("\n")
    );
}
