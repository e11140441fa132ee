//! `tessera filecheck` (being written).

use std::process::ExitCode;

/// Runs FileCheck with LLVM's arguments.
pub fn run(_args: &[String]) -> ExitCode {
    crate::common::fail("`tessera filecheck` is not built yet")
}
