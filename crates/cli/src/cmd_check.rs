//! `tessera check`: proves two modules compute the same values with the
//! reference evaluator (`crates/interp`, see `docs/interp.md`).

use std::io::Write;
use std::process::ExitCode;

use crate::cmd_fmt::load;

/// Arguments of `tessera check`.
#[derive(clap::Args)]
pub struct Args {
    /// The module before a pass (its layouts are taken as placeholders);
    /// `-` reads standard input.
    before: String,
    /// The module after it (its layouts are taken literally).
    after: String,
    /// How many random argument sets to evaluate both modules on (seeds
    /// 1 to N).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
    /// Refuse modules whose instructions produce more elements than this
    /// (each instruction counted once).
    #[arg(long, default_value_t = interp::DEFAULT_MAX_ELEMENTS, value_name = "N")]
    max_elements: u64,
    /// Floating-point results may differ by this much in absolute value
    /// (default 0: exact, right for a pass that only changes layouts).
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    atol: f64,
    /// ... or by this fraction of the larger magnitude.
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    rtol: f64,
}

/// Runs the command. Exit status 0: equivalent on every seed; 1: the
/// modules differ (the first differing output, index and values, the first
/// differing instruction, or the instruction of `after` that read padding
/// or bitcast between sizes); 2: usage error, unreadable input, or a check
/// that could not be done (too large, unsupported, a limit).
pub fn run(args: Args) -> ExitCode {
    crate::common::on_std_streams(|out, err| run_with(&args, out, err))
}

fn run_with(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    if !(args.atol >= 0.0 && args.rtol >= 0.0) {
        let _ = writeln!(err, "error: --atol and --rtol must be non-negative numbers");
        return 2;
    }
    let (Some((_, before, _)), Some((_, after, _))) =
        (load(&args.before, err), load(&args.after, err))
    else {
        return 2;
    };
    let options = interp::CheckOptions {
        seeds: (1..=args.seeds).collect(),
        limits: interp::Limits::default(),
        tolerance: interp::Tolerance {
            abs: args.atol,
            rel: args.rtol,
        },
        max_elements: Some(args.max_elements),
    };
    match interp::check_equivalent_with(&before, &after, &options) {
        Ok(report) => {
            let _ = writeln!(
                out,
                "equivalent on {} seed(s): {} result elements compared ({} and {} work units)",
                report.seeds, report.elements_compared, report.work_before, report.work_after
            );
            if !report.opaque_custom_calls.is_empty() {
                let _ = writeln!(
                    out,
                    "note: custom-call targets evaluated as opaque functions of their operands: {}",
                    report.opaque_custom_calls.join(", ")
                );
            }
            0
        }
        Err(e) if e.shows_difference() => {
            let _ = writeln!(out, "differ: {e}");
            1
        }
        Err(e) => {
            let _ = writeln!(err, "error: not checked: {e}");
            2
        }
    }
}
