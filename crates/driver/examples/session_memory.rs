//! What a session holds between runs, in live heap bytes (counted by
//! `dhat`, not the resident set, which the allocator's retained pages
//! blur), as a multiple of the module's text: after the first run, after a
//! re-run on an edited text, and the largest parts of it; then the work
//! of that re-run (the queries that ran, and the values checked and kept).
//! `cargo xtask session-memory` runs it on the transformer and a generated
//! module; by hand:
//! `cargo run --release -p driver --example session_memory -- NAME FILE EDITED_FILE`.

use std::any::Any;
use std::sync::Arc;

use db::{Database, SourceComputation, pipeline};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn live() -> f64 {
    dhat::HeapStats::get().curr_bytes as f64
}

fn main() -> std::process::ExitCode {
    let _profiler = dhat::Profiler::builder().testing().build();
    match measure() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn measure() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, name, file, edited_file] = &args[..] else {
        return Err("usage: session_memory NAME FILE EDITED_FILE".into());
    };
    let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let (text, edited) = (read(file)?, read(edited_file)?);
    let target = target::load_builtin("cpu").map_err(|e| e.to_string())?;
    let opts = driver::Options::new(Arc::new(target));
    let size = text.len() as f64;
    let times = |bytes: f64| format!("{:.2}x", bytes / size);

    let before = live();
    let module = hlo::parse_module(&text, file).map_err(|e| e.to_string())?;
    let parse = live() - before;
    drop(module);

    let before = live();
    let mut db = Database::default();
    drop(driver::run_in(&mut db, &text, file, &opts).map_err(|e| e.to_string())?);
    // The run's intermediates are freed on a thread of their own.
    db.settle();
    let first = live() - before;
    // The output shares its parts and reports with the session's ledger;
    // kept to measure those.
    let out = driver::run_in(&mut db, &edited, file, &opts).map_err(|e| e.to_string())?;
    db.settle();
    let after_edit = live() - before;
    println!(
        "| {name} | {:.2} MB | {} | {} | {} |",
        size / 1e6,
        times(parse),
        times(first),
        times(after_edit)
    );
    for (part, bytes) in parts(&db, &out) {
        eprintln!("  {part:>18}: {}", times(bytes));
    }
    drop(out);
    drop(db);
    let (ran, checked, computations) = work(&text, &edited, file, &opts)?;
    eprintln!(
        "  re-run after the edit: {ran} queries ran, {checked} values checked ({:.1} per computation)",
        checked as f64 / computations as f64
    );
    Ok(())
}

/// The work of a re-run on the edited text, counted on a database that
/// logs it (kept apart from the one measured, since the log takes memory
/// and slows every lookup): the queries that ran, the values salsa
/// checked and kept, and the computations.
fn work(
    text: &str,
    edited: &str,
    file: &str,
    opts: &driver::Options,
) -> Result<(usize, usize, usize), String> {
    let mut db = Database::with_execution_log();
    drop(driver::run_in(&mut db, text, file, opts).map_err(|e| e.to_string())?);
    db.clear_executions();
    drop(driver::run_in(&mut db, edited, file, opts).map_err(|e| e.to_string())?);
    let computations = db.module().map_or(0, |m| m.computations(&db).len());
    Ok((
        db.executions().len(),
        db.validations().len(),
        computations.max(1),
    ))
}

/// The live bytes of copies of the largest values the session holds, per
/// query over every computation (each measured alone, then dropped; an
/// assignment is not among them, since a session drops it after the run
/// that made it, see `db::alone_assignment`), and
/// of the joins the last output `out` shares with the session's ledger.
fn parts(db: &Database, out: &driver::Output) -> Vec<(&'static str, f64)> {
    let Some(m) = db.module() else {
        return Vec::new();
    };
    let comps = m.computations(db).clone();
    type Part<'a> = (&'static str, &'a dyn Fn(SourceComputation) -> Box<dyn Any>);
    let copies: [Part<'_>; 9] = [
        ("input text", &|c| Box::new(c.text(db).clone())),
        ("printed text", &|c| {
            Box::new(pipeline::printed(db, c).text.clone())
        }),
        ("reports", &|c| {
            Box::new(pipeline::Transformed::clone(
                &pipeline::printed(db, c).reports,
            ))
        }),
        ("input checks", &|c| {
            Box::new(pipeline::InputCheck::clone(pipeline::input_check(db, c)))
        }),
        ("output checks", &|c| {
            let check = &pipeline::printed(db, c).check;
            Box::new((
                pipeline::Names::clone(&check.names),
                check.structural.clone(),
                check.layouts.clone(),
            ))
        }),
        ("input facts", &|c| {
            Box::new(db::InputFacts::clone(db::input_facts(db, c)))
        }),
        ("constraints", &|c| {
            Box::new(db::constraints(db, c).as_deref().ok().cloned())
        }),
        ("output stubs", &|c| {
            Box::new(pipeline::output_stub(db, c).clone())
        }),
        // What callers read of a computation's assignment, kept (the
        // assignment itself is not).
        ("exported signature", &|c| {
            let exported = &c.exported(db).signature;
            Box::new(exported.clone().map(|s| s.map(|s| s.into_parts())))
        }),
    ];
    let mut parts = Vec::new();
    for (part, copy) in copies {
        let before = live();
        let held: Vec<Box<dyn Any>> = comps.iter().map(|&c| copy(c)).collect();
        parts.push((part, live() - before));
        drop(held);
    }
    let before = live();
    let merged = (
        out.report.relayout().map(|r| (**r).clone()),
        out.report.assignment().map(|a| (**a).clone()),
    );
    parts.push(("merged reports", live() - before));
    drop(merged);
    let before = live();
    let assembled = out.parts().map(|a| {
        let names: Vec<String> = a.computations.iter().map(|p| p.name.to_string()).collect();
        (a.header.to_string(), names)
    });
    parts.push(("output header and names", live() - before));
    drop(assembled);
    parts
}
