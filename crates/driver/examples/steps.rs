//! Times each pipeline step on one module, warm, in process: the best of N
//! runs per step, and the best whole run. For finding where the time goes
//! (under `perf` or `valgrind --tool=callgrind`, which counts instructions
//! and so stays repeatable on a busy machine):
//! `cargo run --release -p driver --example steps -- FILE [N] [TARGET] [--no-verify] [--fresh-db | --one-run]`.
//! With `--fresh-db` each run is a session's first run: `driver::run_in` on
//! a new database (dropped with the output).
//! With `STEPS_DECILES` set it also prints each step's 10th, 50th and 90th
//! percentile and the deciles of the whole run. With `--one-run` each run
//! is `driver::run_fresh`: on a database made for it alone, which it frees
//! on a thread of its own; that freeing is waited for between runs, and
//! not counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() -> std::process::ExitCode {
    allocator::configure(allocator::Lifetime::Batch);
    match steps() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn steps() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: steps FILE [N] [TARGET] [--no-verify]")?;
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let target = args.get(3).map_or("cpu", String::as_str);
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let target = target::load_builtin(target).map_err(|e| e.to_string())?;
    let mut opts = driver::Options::new(Arc::new(target));
    opts.verify = !args.iter().any(|a| a == "--no-verify");
    let fresh_db = args.iter().any(|a| a == "--fresh-db");
    let one_run = args.iter().any(|a| a == "--one-run");
    let mut best: BTreeMap<&'static str, Duration> = BTreeMap::new();
    let mut all: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    let mut order = Vec::new();
    let mut totals = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = std::time::Instant::now();
        let mut db = (fresh_db && !one_run).then(db::Database::default);
        let out = match &mut db {
            Some(db) => driver::run_in(db, &text, path, &opts),
            None if one_run => driver::run_fresh(&text, path, &opts),
            None => driver::run(&text, path, &opts),
        }
        .map_err(|e| e.to_string())?;
        let report = out.report.clone();
        let ran = start.elapsed();
        drop(out);
        drop(db);
        let total = start.elapsed();
        totals.push(total);
        // What a one-run database frees off the run's path is done before
        // the next run starts.
        db::Database::settle_discarded();
        // What the steps do not cover: the report and stats at the end of
        // the run, and dropping the output.
        let covered: Duration = report.timings.iter().map(|t| t.duration).sum();
        let mut steps: Vec<(&'static str, Duration)> = report
            .timings
            .iter()
            .map(|t| (t.step.name(), t.duration))
            .collect();
        steps.push(("(rest of run)", ran.saturating_sub(covered)));
        steps.push(("(drop output)", total - ran));
        for (step, duration) in steps {
            if !best.contains_key(step) {
                order.push(step);
            }
            let e = best.entry(step).or_insert(Duration::MAX);
            *e = (*e).min(duration);
            all.entry(step).or_default().push(duration);
        }
    }
    let deciles = std::env::var_os("STEPS_DECILES").is_some();
    for step in order {
        if deciles {
            let mut v = all[step].clone();
            v.sort();
            let d: Vec<String> = [1, 5, 9]
                .iter()
                .map(|&k| format!("{:.2}", v[(v.len() - 1) * k / 10].as_secs_f64() * 1e3))
                .collect();
            println!(
                "{step:>20} {:>10.3} ms  (10/50/90th pct: {})",
                best[step].as_secs_f64() * 1e3,
                d.join(" ")
            );
        } else {
            println!("{step:>20} {:>10.3} ms", best[step].as_secs_f64() * 1e3);
        }
    }
    // The whole run includes dropping the output, as a caller pays it.
    totals.sort();
    println!(
        "{:>20} {:>10.3} ms",
        "total (best)",
        totals[0].as_secs_f64() * 1e3
    );
    println!(
        "{:>20} {:>10.3} ms",
        "total (median)",
        totals[totals.len() / 2].as_secs_f64() * 1e3
    );
    println!(
        "{:>20} {:>10.3} ms",
        "total (90th pct)",
        totals[totals.len() * 9 / 10].as_secs_f64() * 1e3
    );
    if deciles {
        let deciles: Vec<String> = (0..=10)
            .map(|k| {
                format!(
                    "{:.1}",
                    totals[(totals.len() - 1) * k / 10].as_secs_f64() * 1e3
                )
            })
            .collect();
        println!("{:>20} {}", "deciles", deciles.join(" "));
    }
    Ok(())
}
