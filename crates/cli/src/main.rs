//! `tessera`: the command-line front door. Every subcommand parses its
//! arguments, calls the library, and formats the answer; none of them
//! re-implements a step of the pipeline.
//!
//! Logs go to stderr through tracing (`RUST_LOG` filters them); HLO and
//! other results go to stdout.

use std::process::ExitCode;

// mimalloc, configured by `crates/allocator` (which says why).
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

use clap::{Parser, Subcommand};

mod cmd_check;
mod cmd_filecheck;
mod cmd_fmt;
mod cmd_layout;
mod cmd_run_pass;
mod cmd_serve;
mod cmd_verify;
mod common;

/// Tessera: layout assignment for XLA HLO.
#[derive(Parser)]
#[command(name = "tessera", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = common::LogFormat::Text)]
    log_format: common::LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Print HLO files in canonical XLA text.
    Fmt(cmd_fmt::Args),
    /// Check that an HLO module is well formed.
    Verify(cmd_verify::Args),
    /// Run the pipeline (layout assignment and relayouts) on a module.
    RunPass(cmd_run_pass::Args),
    /// Prove that two modules compute the same values (exit 0), or show
    /// where they differ (exit 1); 2 when they cannot be compared.
    Check(cmd_check::Args),
    /// Explore the layout algebra: index, explain, bitcast, plan, draw.
    Layout(cmd_layout::Args),
    /// Serve the pipeline over HTTP (see docs/http-api.md).
    Serve(cmd_serve::Args),
    /// LLVM-compatible FileCheck: `tessera filecheck [OPTIONS] CHECK_FILE [--input FILE]`.
    #[command(disable_help_flag = true)]
    Filecheck {
        /// FileCheck's own arguments, in LLVM's form.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// How long the process for `command` lives: `serve` stays up, every other
/// command runs once and exits (see `crates/allocator`).
fn lifetime(command: &Command) -> allocator::Lifetime {
    match command {
        Command::Serve(_) => allocator::Lifetime::Service,
        _ => allocator::Lifetime::Batch,
    }
}

/// The exit status of a command line clap refused: 0 for `--help` and
/// `--version` (clap reports them as errors that print to stdout), 2 for
/// `tessera filecheck`, whose usage errors follow LLVM FileCheck's
/// convention, and for `tessera check`, whose 1 means "the modules
/// differ", and 1 otherwise, as for any other bad input.
fn usage_exit_status(error: &clap::Error, args: &[std::ffi::OsString]) -> u8 {
    if !error.use_stderr() {
        return 0;
    }
    if matches!(subcommand_name(args), Some("filecheck" | "check")) {
        2
    } else {
        1
    }
}

/// The first word of the command line that is neither an option nor the
/// value of the global `--log-format`: the subcommand the user meant, even
/// when clap could not parse the rest.
fn subcommand_name(args: &[std::ffi::OsString]) -> Option<&str> {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    while let Some(word) = words.next() {
        let word = word?;
        if word == "--log-format" {
            words.next();
        } else if !word.starts_with('-') {
            return Some(word);
        }
    }
    None
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(error) => {
            // Printing can only fail on a closed stream, and then there is
            // nobody left to tell.
            let _ = error.print();
            return ExitCode::from(usage_exit_status(&error, &args));
        }
    };
    // Parsing the command line spawns no thread, so this is still in time.
    allocator::configure(lifetime(&cli.command));
    let default_level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    common::init_logging(cli.log_format, default_level);
    match cli.command {
        Command::Fmt(args) => cmd_fmt::run(args),
        Command::Verify(args) => cmd_verify::run(args),
        Command::RunPass(args) => cmd_run_pass::run(args),
        Command::Layout(args) => cmd_layout::run(args),
        Command::Check(args) => cmd_check::run(args),
        Command::Serve(args) => cmd_serve::run(args),
        Command::Filecheck { args } => cmd_filecheck::run(&args),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, lifetime};

    fn lifetime_of(line: &[&str]) -> allocator::Lifetime {
        let cli = Cli::try_parse_from(line).expect("a valid command line");
        lifetime(&cli.command)
    }

    #[test]
    fn only_serve_keeps_the_service_lifetime() {
        use allocator::Lifetime::{Batch, Service};
        assert_eq!(lifetime_of(&["tessera", "serve"]), Service);
        assert_eq!(
            lifetime_of(&["tessera", "serve", "--addr", "127.0.0.1:0"]),
            Service
        );
        assert_eq!(lifetime_of(&["tessera", "run-pass", "m.hlo"]), Batch);
        assert_eq!(lifetime_of(&["tessera", "fmt", "m.hlo"]), Batch);
        assert_eq!(lifetime_of(&["tessera", "verify", "m.hlo"]), Batch);
    }
}
