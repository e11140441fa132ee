//! `tessera fmt` (being written).

use std::process::ExitCode;

/// Arguments of `tessera fmt`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> ExitCode {
    crate::common::fail("`tessera fmt` is not built yet")
}
