//! `cargo xtask golden [--llvm]`: runs the golden FileCheck tests. With
//! `--llvm`, every FileCheck stage also runs through LLVM's binary, which
//! must agree; the binary is found on PATH or at the Debian path.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// Arguments of `cargo xtask golden`.
#[derive(clap::Args)]
pub struct Args {
    /// Also run every FileCheck through LLVM's FileCheck.
    #[arg(long)]
    llvm: bool,
    /// Only the golden files whose path contains this text.
    filter: Option<String>,
}

/// Where LLVM's FileCheck may be.
fn find_llvm_filecheck() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LLVM_FILECHECK") {
        return Some(PathBuf::from(p));
    }
    let candidates = [
        "/usr/lib/llvm-19/bin/FileCheck",
        "/usr/lib/llvm-18/bin/FileCheck",
        "/usr/lib/llvm-17/bin/FileCheck",
        "/usr/lib/llvm-16/bin/FileCheck",
        "/usr/lib/llvm-15/bin/FileCheck",
        "/usr/lib/llvm-14/bin/FileCheck",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("FileCheck"))
                    .find(|p| p.exists())
            })
        })
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(crate::root())
        .args(["test", "-p", "cli", "--test", "golden", "--"]);
    if let Some(f) = &args.filter {
        cmd.arg(f);
    }
    if args.llvm {
        match find_llvm_filecheck() {
            Some(path) => {
                eprintln!("cross-checking with {}", path.display());
                cmd.env("TESSERA_LLVM_FILECHECK", path);
            }
            None => anyhow::bail!(
                "--llvm: no LLVM FileCheck found (set LLVM_FILECHECK, or install Debian's llvm package)"
            ),
        }
    }
    let status = cmd.status()?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
