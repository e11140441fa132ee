//! The whole pipeline (layout assignment, then relayout) on every real XLA
//! CPU module in `testdata/xla-cpu`: every bitcast we emit is proven by
//! the brute-force walk, every copy, transpose and reshape we keep is
//! confirmed to move data, and our bitcast count is set against the one in
//! XLA's `optimized.hlo`.

mod common;

use std::path::PathBuf;

use common::*;
use relayout::RewriteKind;

fn corpus() -> Vec<(String, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    let mut dirs: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .expect("testdata/xla-cpu")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.join("before_layout.hlo").exists())
        .map(|p| {
            (
                p.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    dirs.sort();
    dirs
}

/// Instructions with ` bitcast(` in a file, as `grep -c` counts them.
fn xla_bitcasts(dir: &std::path::Path) -> Option<usize> {
    let text = std::fs::read_to_string(dir.join("optimized.hlo")).ok()?;
    Some(text.lines().filter(|l| l.contains(" bitcast(")).count())
}

#[test]
fn every_bitcast_on_the_xla_cpu_corpus_is_proven() {
    prove_corpus("cpu");
}

#[test]
fn every_bitcast_the_tpu_pipeline_emits_on_the_corpus_is_proven() {
    prove_corpus("tpu");
}

#[test]
fn every_bitcast_the_gpu_pipeline_emits_on_the_corpus_is_proven() {
    prove_corpus("gpu");
}

/// Runs the pipeline for `target_name` on every corpus module and proves
/// each bitcast it emits by walking elements (large arrays through small
/// shapes with the same layouts).
fn prove_corpus(target_name: &str) {
    let cpu = target(target_name);
    eprintln!("target {target_name}");
    let mut table = Vec::new();
    let mut total_proven = 0;
    let dirs = corpus();
    assert!(
        dirs.len() >= 20,
        "expected the XLA CPU corpus, found {} modules",
        dirs.len()
    );
    for (name, dir) in &dirs {
        let text = std::fs::read_to_string(dir.join("before_layout.hlo")).expect("read");
        let mut m = parse(&text);
        layout_assignment::run(&mut m, &cpu).unwrap_or_else(|e| panic!("{name}: {e}"));
        let existing = bitcasts(&m);
        let report = relayout::run(&mut m, &cpu, &relayout::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let problems = hlo::verify_module(&m);
        assert!(problems.is_empty(), "{name}: {problems:?}");
        assert!(hlo::uses_before_definition(&m).is_empty(), "{name}");
        // After layout assignment every use already has its layout, up to
        // byte-identical spellings: layout assignment treats layouts with
        // the same bytes as one (a combined tile on a value whose
        // second-minor dimension fills the tile), and relayout writes the
        // difference as a bitcast, which is proven below like the rest.
        assert_eq!(report.count(RewriteKind::InsertedCopy), 0, "{name}");
        let proven =
            prove_bitcasts(&m, &report, &existing).unwrap_or_else(|e| panic!("{name}: {e}"));
        let ours = bitcasts(&m).len();
        assert_eq!(
            proven + existing.len(),
            ours,
            "{name}: every bitcast is accounted for"
        );
        let bitcast_rewrites = report
            .rewrites
            .iter()
            .filter(|r| r.kind.is_bitcast())
            .count();
        assert_eq!(
            bitcast_rewrites, proven,
            "{name}: one proof per reported bitcast"
        );
        confirm_movements(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        total_proven += proven;
        table.push((name.clone(), ours, xla_bitcasts(dir)));
    }
    eprintln!("| module | ours | XLA optimized.hlo |");
    for (name, ours, xla) in &table {
        let xla = xla.map_or_else(|| "n/a".to_string(), |x| x.to_string());
        eprintln!("| {name} | {ours} | {xla} |");
    }
    let (shrunk, sampled) = (
        SHRUNK.load(std::sync::atomic::Ordering::Relaxed),
        SAMPLED.load(std::sync::atomic::Ordering::Relaxed),
    );
    eprintln!(
        "proven bitcasts: {total_proven} (large pairs so far, all targets: {shrunk} walked through small stand-ins, {sampled} sampled)"
    );
    assert!(total_proven > 0);
}

/// XLA's own layout assignment output (`after_layout.hlo`), given to the
/// relayout pass alone under the CPU target: our model of what each use
/// needs agrees with XLA CPU's, so no use is mismatched; and every no-op
/// copy, transpose and reshape XLA left becomes a proven bitcast.
#[test]
fn xla_cpu_layouts_have_no_mismatched_use_under_our_cpu_model() {
    let cpu = target("cpu");
    let mut checked = 0;
    for (name, dir) in corpus() {
        let Ok(text) = std::fs::read_to_string(dir.join("after_layout.hlo")) else {
            continue;
        };
        let mut m = parse(&text);
        let existing = bitcasts(&m);
        let report = relayout::run(&mut m, &cpu, &relayout::Options::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mismatched: Vec<&relayout::Rewrite> = report
            .rewrites
            .iter()
            .filter(|r| {
                matches!(
                    r.kind,
                    RewriteKind::InsertedCopy | RewriteKind::InsertedBitcast
                )
            })
            .map(|r| &**r)
            .collect();
        assert!(mismatched.is_empty(), "{name}: {mismatched:?}");
        assert!(hlo::verify_module(&m).is_empty(), "{name}");
        prove_bitcasts(&m, &report, &existing).unwrap_or_else(|e| panic!("{name}: {e}"));
        checked += 1;
    }
    assert!(checked >= 20, "{checked}");
}
