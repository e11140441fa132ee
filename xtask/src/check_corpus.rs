//! `cargo xtask check-corpus`: proves, with the reference evaluator, that
//! every bundled module and every corpus module computes the same values
//! after `run-pass` as before, on the cpu, gpu and tpu targets (the same
//! check as `tessera check`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

/// Arguments of `cargo xtask check-corpus`.
#[derive(clap::Args)]
pub struct Args {
    /// The shared corpus (default: ../shared/corpus/xla-cpu beside the
    /// workspace; skipped when missing).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// The targets to run the pipeline for.
    #[arg(long, value_delimiter = ',', default_value = "cpu,gpu,tpu")]
    targets: Vec<String>,
    /// Random argument sets per check.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Also expand relayouts into explicit pad/bitcast/transpose/slice steps.
    #[arg(long)]
    expand_relayouts: bool,
    /// Only modules whose path contains this text.
    #[arg(long)]
    filter: Option<String>,
    /// Skip modules whose instructions produce more elements than this
    /// (default: no bound, every module is checked).
    #[arg(long)]
    max_elements: Option<u64>,
}

/// The outcome of one (module, target) check.
enum Outcome {
    Equivalent,
    Differ(String),
    NotChecked(String),
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if cfg!(debug_assertions) {
        return crate::rerun_release(
            "check-corpus",
            &std::env::args().skip(2).collect::<Vec<_>>(),
        );
    }
    let root = crate::root();
    let modules = modules(&root, args.corpus.clone())?;
    let modules: Vec<(String, String)> = match &args.filter {
        Some(f) => modules
            .into_iter()
            .filter(|(name, _)| name.contains(f.as_str()))
            .collect(),
        None => modules,
    };
    let options = interp::CheckOptions {
        seeds: (1..=args.seeds).collect(),
        limits: interp::Limits::default(),
        tolerance: interp::Tolerance::EXACT,
        max_elements: args.max_elements,
    };
    let mut failures = Vec::new();
    let mut unchecked = Vec::new();
    let mut equivalent = 0usize;
    let start = Instant::now();
    for target_name in &args.targets {
        let target = wire::resolve_target(target_name).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut opts = driver::Options::new(target);
        opts.expand_relayouts = args.expand_relayouts;
        for (name, text) in &modules {
            let t = Instant::now();
            let outcome = check_one(name, text, &opts, &options);
            let secs = t.elapsed().as_secs_f64();
            let line = match &outcome {
                Outcome::Equivalent => {
                    equivalent += 1;
                    "equivalent".to_string()
                }
                Outcome::Differ(m) => {
                    failures.push(format!("{target_name} {name}: {m}"));
                    "DIFFER".to_string()
                }
                Outcome::NotChecked(m) => {
                    unchecked.push(format!("{target_name} {name}: {m}"));
                    "not checked".to_string()
                }
            };
            println!("{target_name:<4} {name:<60} {line} ({secs:.2} s)");
        }
    }
    let total = modules.len() * args.targets.len();
    println!(
        "{equivalent} of {total} checks equivalent ({} modules x {} targets: {}), {} differ, {} not checked, in {:.0} s",
        modules.len(),
        args.targets.len(),
        args.targets.join(", "),
        failures.len(),
        unchecked.len(),
        start.elapsed().as_secs_f64()
    );
    for f in failures.iter().chain(&unchecked) {
        eprintln!("{f}");
    }
    Ok(if failures.is_empty() && unchecked.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the pipeline on one module and checks its output against it.
fn check_one(
    name: &str,
    text: &str,
    opts: &driver::Options,
    options: &interp::CheckOptions,
) -> Outcome {
    let output = match driver::run(text, name, opts) {
        Ok(o) => o,
        Err(e) => return Outcome::NotChecked(format!("run-pass failed: {e}")),
    };
    let parse =
        |t: &str, label: &str| hlo::parse_module(t, label).map_err(|e| format!("{label}: {e:?}"));
    let (before, after) = match (parse(text, name), parse(output.text(), "output")) {
        (Ok(b), Ok(a)) => (b, a),
        (Err(e), _) | (_, Err(e)) => return Outcome::NotChecked(e),
    };
    match interp::check_equivalent_with(&before, &after, options) {
        Ok(_) => Outcome::Equivalent,
        Err(e) if e.shows_difference() => Outcome::Differ(e.to_string()),
        Err(e) => Outcome::NotChecked(e.to_string()),
    }
}

/// Every valid module under `testdata/` (files whose first RUN line
/// expects a failure are malformed on purpose), then every corpus file
/// whose text differs from all of those once leading comment lines are
/// stripped (the bundled copies of the corpus only add comments). Named by
/// path, in path order.
fn modules(root: &Path, corpus: Option<PathBuf>) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in test_support::hlo_files_under(&root.join("testdata"))? {
        if crate::run_pass::expects_failure(&f) {
            continue;
        }
        let text =
            std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        let Ok(module) = hlo::parse_module(&text, "m") else {
            continue;
        };
        if !hlo::verify_module(&module).is_empty() {
            continue;
        }
        seen.insert(hlo::strip_leading_comment_lines(&text).to_string());
        out.push((
            f.strip_prefix(root).unwrap_or(&f).display().to_string(),
            text,
        ));
    }
    let corpus = corpus.unwrap_or_else(|| root.join("../shared/corpus/xla-cpu"));
    if corpus.is_dir() {
        for f in test_support::hlo_files_under(&corpus)? {
            let text = std::fs::read_to_string(&f)
                .with_context(|| format!("cannot read {}", f.display()))?;
            if seen.contains(hlo::strip_leading_comment_lines(&text)) {
                continue;
            }
            let shown = f
                .strip_prefix(root.join(".."))
                .unwrap_or(&f)
                .display()
                .to_string();
            out.push((format!("../{shown}"), text));
        }
    } else {
        eprintln!(
            "note: no corpus at {}; checking testdata/ only",
            corpus.display()
        );
    }
    Ok(out)
}
