//! `cargo xtask session-memory`: what a session holds between runs, on the
//! modules `session-bench` times (the transformer with one reduction region
//! edited, and the generated 1e5-instruction module with its middle
//! computation edited), through `driver`'s `session_memory` example.

use std::process::ExitCode;

use anyhow::Context;

use crate::session_bench::{Subject, generated, transformer};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let dir = crate::root().join("target/session-memory");
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    println!(
        "Live heap bytes (dhat), as multiples of the module's text; CPU target, verified. \
         Under each row, the largest parts, and the work of the re-run after the edit.\n"
    );
    println!(
        "| module | text | parsed module | session after the first run | after a re-run on the edited text |"
    );
    println!("|---|---:|---:|---:|---:|");
    let mut ok = true;
    for (file, subject) in [("transformer", transformer()?), ("generated", generated()?)] {
        ok &= example(&dir, file, &subject)?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes `subject`'s text and edited text, and runs the example on them.
fn example(dir: &std::path::Path, file: &str, subject: &Subject) -> anyhow::Result<bool> {
    let text = dir.join(format!("{file}.hlo"));
    let edited = dir.join(format!("{file}.edited.hlo"));
    std::fs::write(&text, &subject.text)?;
    std::fs::write(&edited, &subject.edited)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .current_dir(crate::root())
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "driver",
            "--example",
            "session_memory",
            "--",
        ])
        .arg(&subject.name)
        .arg(&text)
        .arg(&edited)
        .status()?;
    Ok(status.success())
}
