//! `cargo xtask`: every piece of project automation, so that nothing
//! depends on shell scripts or a developer's memory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod golden;
mod run_pass;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::RunPass(args) => run_pass::run(args),
        Command::Golden(args) => golden::run(args),
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
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Every `.hlo` file under `dir`, sorted.
pub fn hlo_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "hlo") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
