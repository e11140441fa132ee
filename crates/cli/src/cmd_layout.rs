//! `tessera layout` (being written).

use std::process::ExitCode;

/// Arguments of `tessera layout`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> ExitCode {
    crate::common::fail("`tessera layout` is not built yet")
}
