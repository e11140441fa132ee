//! `cargo xtask steps FILE`: the time of each pipeline step on one module,
//! warm and in process: the driver's `steps` example, built for release.
//! The best run of each step, the best whole run and the median; with
//! `--fresh-db`, each run is a session's first run on a new database; with
//! `--one-run`, a run on a database made for it alone (`driver::run_fresh`,
//! freed off the run's path and waited for between runs). The
//! example is what `docs/performance.md` quotes where it compares two
//! builds step by step.

use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `cargo xtask steps`.
#[derive(clap::Args)]
pub struct Args {
    /// The module to time.
    file: PathBuf,
    /// Warm runs.
    #[arg(long, default_value_t = 20)]
    runs: usize,
    /// The built-in target.
    #[arg(long, default_value = "cpu")]
    target: String,
    /// Leave out the verifiers on the output (`tessera run-pass --no-verify`).
    #[arg(long)]
    no_verify: bool,
    /// Run each time on a new database, as a session's first run.
    #[arg(long)]
    fresh_db: bool,
    /// Run each time on a database made for that run and then discarded.
    #[arg(long)]
    one_run: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The file is resolved here: the example runs from the workspace root.
    let file = std::path::absolute(&args.file)?;
    let mut command = std::process::Command::new(cargo);
    command
        .current_dir(crate::root())
        .args(["run", "--quiet", "--release", "--package", "driver"])
        .args(["--example", "steps", "--"])
        .arg(&file)
        .arg(args.runs.to_string())
        .arg(&args.target);
    if args.no_verify {
        command.arg("--no-verify");
    }
    if args.fresh_db {
        command.arg("--fresh-db");
    }
    if args.one_run {
        command.arg("--one-run");
    }
    let status = command.status()?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
