//! `cargo xtask`: every piece of project automation, so that nothing
//! depends on shell scripts or a developer's memory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

// The `tessera` binary's allocator, so that the timings xtask records
// (corpus, run-pass, the load test's in-process server) are the ones a
// user of the command line or the server sees.
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

mod bench;
mod browser_test;
mod check_corpus;
mod client_test;
mod corpus;
mod fuzz;
mod golden;
mod loadtest;
mod openapi;
mod run_pass;
mod session_bench;
mod session_memory;
mod steps;
mod tidy;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Tessera's project automation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the pipeline over testdata (or given paths) and print a summary.
    RunPass(run_pass::Args),
    /// Run the golden FileCheck tests, optionally also through LLVM's FileCheck.
    Golden(golden::Args),
    /// Compare with XLA on the corpus and write docs/performance.md tables.
    Corpus(corpus::Args),
    /// Open the explorer in headless Chromium and check what it shows.
    BrowserTest(browser_test::Args),
    /// Run the Python client example of docs/clients.md against tessera serve.
    ClientTest(client_test::Args),
    /// Prove every bundled and corpus module equivalent after run-pass on cpu, gpu and tpu.
    CheckCorpus(check_corpus::Args),
    /// Run the benchmarks and record them in docs/performance.md.
    Bench(bench::Args),
    /// Load the HTTP service: queueing under concurrent clients, and slow clients.
    Loadtest(loadtest::Args),
    /// Validate the service's OpenAPI document with openapi-spec-validator.
    Openapi(openapi::Args),
    /// Fuzz the pipeline: generated and edited modules on every target, outputs proven equivalent.
    Fuzz(fuzz::Args),
    /// The style gates: rustfmt, clippy with warnings denied, and docs.
    Tidy(tidy::Args),
    /// A session against stateless runs through HTTP (first run, no change, one body edit), the floor of a text answer (its bytes alone over a loopback socket), then a session's fresh database and a one-run database against a stateless run in process.
    SessionBench(session_bench::Args),
    /// What a session holds between runs, in live heap bytes against its text.
    SessionMemory(session_memory::Args),
    /// The time of each pipeline step on one module, warm (the driver's `steps` example).
    Steps(steps::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The commands that run a service in process keep its allocator
    // setting, so that they pay for memory as `tessera serve` does.
    allocator::configure(match cli.command {
        Command::Loadtest(_) | Command::SessionBench(_) | Command::SessionMemory(_) => {
            allocator::Lifetime::Service
        }
        _ => allocator::Lifetime::Batch,
    });
    let result = match cli.command {
        Command::RunPass(args) => run_pass::run(args),
        Command::Golden(args) => golden::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::Bench(args) => bench::run(args),
        Command::CheckCorpus(args) => check_corpus::run(args),
        Command::BrowserTest(args) => browser_test::run(args),
        Command::ClientTest(args) => client_test::run(args),
        Command::Loadtest(args) => loadtest::run(args),
        Command::Openapi(args) => openapi::run(args),
        Command::Fuzz(args) => fuzz::run(args),
        Command::Tidy(args) => tidy::run(args),
        Command::SessionBench(args) => session_bench::run(args),
        Command::SessionMemory(args) => session_memory::run(args),
        Command::Steps(args) => steps::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// The workspace root, whatever directory `cargo xtask` was run from.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Re-runs `cargo xtask COMMAND ARGS` from a release build, for commands
/// that measure time.
pub fn rerun_release(command: &str, args: &[String]) -> anyhow::Result<ExitCode> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!("(timing needs a release build: re-running `cargo xtask {command}` with --release)");
    let status = std::process::Command::new(cargo)
        .current_dir(root())
        .args([
            "run",
            "--quiet",
            "--release",
            "--package",
            "xtask",
            "--",
            command,
        ])
        .args(args)
        .status()?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Replaces the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`
/// in a markdown file (appending the section if it is missing).
pub fn replace_section(path: &Path, name: &str, body: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let new = match (text.find(&begin), text.find(&end)) {
        (Some(b), Some(e)) if b < e => format!("{}{begin}\n{body}\n{}", &text[..b], &text[e..]),
        _ => format!("{text}\n{begin}\n{body}\n{end}\n"),
    };
    std::fs::write(path, new)?;
    Ok(())
}
