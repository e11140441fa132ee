//! `tessera filecheck`: LLVM-compatible FileCheck, so golden tests and users
//! need no LLVM install. Exit statuses are LLVM's: 0 match, 1 mismatch,
//! 2 usage error.

use std::process::ExitCode;

/// Runs FileCheck with LLVM's arguments. `--input FILE` is accepted as an
/// alias of `--input-file FILE`.
pub fn run(args: &[String]) -> ExitCode {
    let mut stdin = std::io::stdin().lock();
    let mut stderr = std::io::stderr().lock();
    let status = filecheck::run_cli(args, &mut stdin, &mut stderr);
    ExitCode::from(u8::try_from(status).unwrap_or(2))
}
