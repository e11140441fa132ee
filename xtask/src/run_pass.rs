//! `cargo xtask run-pass`: the main job. Runs the whole pipeline over the
//! bundled testdata (or the given files and directories), writes every
//! output module under `target/run-pass/`, and prints a summary table.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use driver::{Options, PassName};

/// Arguments of `cargo xtask run-pass`.
#[derive(clap::Args)]
pub struct Args {
    /// Files or directories (default: testdata/).
    paths: Vec<PathBuf>,
    /// The target: cpu, gpu, tpu, or a path to a target YAML file.
    #[arg(long, default_value = "cpu")]
    target: String,
    /// The passes to run, comma-separated.
    #[arg(long, value_delimiter = ',')]
    passes: Option<Vec<String>>,
}

/// One row of the summary.
struct Row {
    module: String,
    instructions: usize,
    copies: usize,
    bitcasts: usize,
    bytes_moved: u64,
    padding: u64,
    /// Bytes of every buffer, padding included, and of their elements.
    storage: u64,
    logical: u64,
    millis: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::root();
    let target = wire::resolve_target(&args.target).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut opts = Options::new(target);
    if let Some(passes) = &args.passes {
        opts.passes = passes
            .iter()
            .map(|p| PassName::from_name(p).with_context(|| format!("unknown pass '{p}'")))
            .collect::<anyhow::Result<_>>()?;
    }
    let paths = if args.paths.is_empty() {
        vec![root.join("testdata")]
    } else {
        args.paths.clone()
    };
    let mut files = Vec::new();
    for p in &paths {
        if p.is_dir() {
            // Files whose RUN lines expect failure are malformed on purpose.
            files.extend(
                test_support::hlo_files_under(p)?
                    .into_iter()
                    .filter(|f| !expects_failure(f)),
            );
        } else {
            files.push(p.clone());
        }
    }
    let out_dir = root.join("target/run-pass");
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(files.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        Some(bar)
    } else {
        None
    };
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for file in &files {
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        if let Some(bar) = &bar {
            bar.set_message(shown.clone());
        }
        let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {shown}"))?;
        let start = Instant::now();
        match driver::run(&text, &shown, &opts) {
            Ok(output) => {
                let millis = start.elapsed().as_secs_f64() * 1e3;
                let rel = file.strip_prefix(&root).unwrap_or(file);
                let dest = out_dir.join(rel);
                if let Some(parent) = dest.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&dest, output.text().as_bytes())?;
                let report = wire::report_json(&output.report);
                std::fs::write(
                    dest.with_extension("report.json"),
                    serde_json::to_string_pretty(&report)? + "\n",
                )?;
                let s = &output.report.stats;
                rows.push(Row {
                    module: shown,
                    instructions: s.instructions,
                    copies: s.copies,
                    bitcasts: s.bitcasts,
                    bytes_moved: s.copy_bytes + s.movement_bytes,
                    padding: s.padding_bytes,
                    storage: s.storage_bytes,
                    logical: s.logical_bytes,
                    millis,
                });
            }
            Err(e) => failures.push(format!("{shown}: {e}")),
        }
        if let Some(bar) = &bar {
            bar.inc(1);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    print_table(&rows, &opts.target.name);
    println!(
        "outputs and reports: {}",
        out_dir.strip_prefix(&root).unwrap_or(&out_dir).display()
    );
    for f in &failures {
        eprintln!("error: {f}");
    }
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// True when the file's first RUN line runs a command that must fail.
pub(crate) fn expects_failure(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    filecheck::lit::run_lines(&text)
        .first()
        .is_some_and(|l| l.trim_start().starts_with("not "))
}

fn print_table(rows: &[Row], target: &str) {
    let width = rows
        .iter()
        .map(|r| r.module.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let build = if cfg!(debug_assertions) {
        "debug build: run `cargo xtask bench` for real timings"
    } else {
        "release build"
    };
    // Storage over logical bytes: how much of the buffers is padding.
    let ratio = |storage: u64, logical: u64| {
        if logical == 0 {
            1.0
        } else {
            storage as f64 / logical as f64
        }
    };
    println!("target: {target} ({build})");
    println!(
        "{:<width$}  {:>8}  {:>6}  {:>8}  {:>12}  {:>10}  {:>13}  {:>9}",
        "module",
        "instrs",
        "copies",
        "bitcasts",
        "bytes moved",
        "padding",
        "storage/logic",
        "time ms"
    );
    for r in rows {
        println!(
            "{:<width$}  {:>8}  {:>6}  {:>8}  {:>12}  {:>10}  {:>13.3}  {:>9.2}",
            r.module,
            r.instructions,
            r.copies,
            r.bitcasts,
            r.bytes_moved,
            r.padding,
            ratio(r.storage, r.logical),
            r.millis
        );
    }
    let total = |f: fn(&Row) -> u64| rows.iter().map(f).sum::<u64>();
    println!(
        "{:<width$}  {:>8}  {:>6}  {:>8}  {:>12}  {:>10}  {:>13.3}  {:>9.2}",
        format!("total ({} modules)", rows.len()),
        total(|r| r.instructions as u64),
        total(|r| r.copies as u64),
        total(|r| r.bitcasts as u64),
        total(|r| r.bytes_moved),
        total(|r| r.padding),
        ratio(total(|r| r.storage), total(|r| r.logical)),
        rows.iter().map(|r| r.millis).sum::<f64>()
    );
}
