//! `tessera verify` (being written).

use std::process::ExitCode;

/// Arguments of `tessera verify`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> ExitCode {
    crate::common::fail("`tessera verify` is not built yet")
}
