//! `cargo xtask tidy`: the style gates CI holds the code to.
//!
//! - `cargo fmt --all --check`: one style (`rustfmt.toml`);
//! - `cargo clippy --workspace --all-targets --locked -- -D warnings`: the
//!   workspace lints (`[workspace.lints]` in `Cargo.toml`) and clippy's
//!   defaults, with every warning an error;
//! - `cargo doc --workspace --no-deps --locked` with `RUSTDOCFLAGS=-D
//!   warnings`: every doc link resolves and every doc comment renders.
//!
//! Every gate runs even when an earlier one fails, so that one run shows
//! all that is wrong; the command fails if any did. `--fix` runs `cargo
//! fmt --all` instead of checking it (clippy and doc still check).

use std::process::{Command, ExitCode};
use std::time::Instant;

/// Arguments of `cargo xtask tidy`.
#[derive(clap::Args)]
pub struct Args {
    /// Format the code instead of checking its format.
    #[arg(long)]
    fix: bool,
}

/// One gate: its name, the cargo arguments, and extra environment.
struct Gate {
    name: &'static str,
    args: Vec<&'static str>,
    env: Vec<(&'static str, &'static str)>,
}

fn gates(fix: bool) -> Vec<Gate> {
    vec![
        Gate {
            name: "rustfmt",
            args: if fix {
                vec!["fmt", "--all"]
            } else {
                vec!["fmt", "--all", "--check"]
            },
            env: vec![],
        },
        Gate {
            name: "clippy",
            args: vec![
                "clippy",
                "--workspace",
                "--all-targets",
                "--locked",
                "--quiet",
                "--",
                "-D",
                "warnings",
            ],
            env: vec![],
        },
        Gate {
            name: "doc",
            args: vec!["doc", "--workspace", "--no-deps", "--locked", "--quiet"],
            env: vec![("RUSTDOCFLAGS", "-D warnings")],
        },
    ]
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::root();
    let mut failed = Vec::new();
    for gate in gates(args.fix) {
        eprintln!("== cargo {}", gate.args.join(" "));
        let started = Instant::now();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(&gate.args)
            .envs(gate.env.iter().copied())
            .current_dir(&root)
            .status()?;
        eprintln!(
            "   {}: {} in {:.1} s",
            gate.name,
            if status.success() { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !status.success() {
            failed.push(gate.name);
        }
    }
    if failed.is_empty() {
        println!("tidy: rustfmt, clippy and doc are clean");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("tidy: failed: {}", failed.join(", "));
        Ok(ExitCode::from(1))
    }
}
