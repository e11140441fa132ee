//! `tessera run-pass`: runs the pipeline on one module and prints the
//! result on stdout (or to `-o`), with an optional JSON report.

use std::path::PathBuf;
use std::process::ExitCode;

use driver::{Options, PassName};

use crate::common::{error_line, fail};

/// Arguments of `tessera run-pass`.
#[derive(clap::Args)]
pub struct Args {
    /// The HLO module (`-` for stdin).
    file: PathBuf,
    /// The target: `cpu`, `gpu`, `tpu`, or a path to a target YAML file.
    #[arg(long, default_value = "cpu")]
    target: String,
    /// Write the module here instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// The passes to run, comma-separated, in pipeline order.
    #[arg(long, value_delimiter = ',')]
    passes: Option<Vec<String>>,
    /// Skip the verifiers on the output (the input is always checked).
    #[arg(long)]
    no_verify: bool,
    /// Relayout: expand every copy between two tilings into explicit pad,
    /// bitcast, transpose and slice instructions.
    #[arg(long)]
    expand_relayouts: bool,
    /// Draw the output's entry computation (or --draw-computation) as
    /// Graphviz text into this file.
    #[arg(long, value_name = "FILE.dot")]
    dot: Option<PathBuf>,
    /// Draw the output's entry computation (or --draw-computation) as SVG
    /// into this file.
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<PathBuf>,
    /// The computation --dot and --svg draw (default: the entry).
    #[arg(long, value_name = "NAME")]
    draw_computation: Option<String>,
    /// The solver: `heuristic` (the local search) or `exact` (an integer
    /// program over the same cost model: the proven optimum, or a lower
    /// bound and the best assignment found within the time limit).
    #[arg(long, default_value = "heuristic", value_parser = ["heuristic", "exact"])]
    solver: String,
    /// The exact solver's time per computation, in seconds. It sets a
    /// deterministic budget of search nodes, and is also a wall-clock
    /// backstop (a part the clock stops keeps the heuristic's layouts).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    solver_time_limit: f64,
}

/// Runs the command.
pub fn run(args: Args) -> ExitCode {
    let target = match wire::resolve_target(&args.target) {
        Ok(t) => t,
        Err(e) => {
            let located = e.is_located();
            eprintln!("{}", error_line(e, located));
            return ExitCode::from(1);
        }
    };
    let mut opts = Options::new(target);
    opts.verify = !args.no_verify;
    opts.expand_relayouts = args.expand_relayouts;
    opts.solver.kind = driver::SolverKind::from_name(&args.solver).unwrap_or_default();
    match std::time::Duration::try_from_secs_f64(args.solver_time_limit) {
        Ok(limit) if limit > std::time::Duration::ZERO => opts.solver.time_limit = limit,
        _ => {
            return fail(format!(
                "--solver-time-limit must be a positive number of seconds, not {}",
                args.solver_time_limit
            ));
        }
    }
    if let Some(passes) = &args.passes {
        let mut chosen = Vec::new();
        for p in passes {
            match PassName::from_name(p.trim()) {
                Some(pass) => chosen.push(pass),
                None => {
                    let known: Vec<&str> = PassName::all().iter().map(|p| p.name()).collect();
                    return fail(format!(
                        "unknown pass '{p}'; the passes are {}",
                        known.join(", ")
                    ));
                }
            }
        }
        opts.passes = chosen;
    }
    let (text, name) = match crate::common::read_text(&args.file) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let output = match driver::run(&text, &name, &opts) {
        Ok(o) => o,
        Err(driver::PipelineError::Parse(e)) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
        Err(e) => return fail(e),
    };
    if let Some(path) = &args.report {
        let json = wire::report_json(&output.report);
        let text = serde_json::to_string_pretty(&json).unwrap_or_default();
        if let Err(e) = std::fs::write(path, text + "\n") {
            return fail(format!(
                "cannot write the report to {}: {e}",
                path.display()
            ));
        }
    }
    let pictures = [
        (&args.dot, driver::PictureKind::Dot),
        (&args.svg, driver::PictureKind::Svg),
    ];
    for (path, kind) in pictures {
        let Some(path) = path else { continue };
        let module = match output.module() {
            Ok(m) => m,
            Err(e) => return fail(e.to_string()),
        };
        let picture = match driver::picture(&module, args.draw_computation.as_deref(), kind) {
            Ok(p) => p,
            Err(e) => return fail(e.to_string()),
        };
        if let Err(e) = std::fs::write(path, picture) {
            return fail(format!("cannot write {}: {e}", path.display()));
        }
    }
    for t in &output.report.timings {
        tracing::info!(
            step = t.step.name(),
            micros = t.duration.as_micros() as u64,
            "timing"
        );
    }
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, output.text().as_bytes()) {
                return fail(format!("cannot write {}: {e}", path.display()));
            }
        }
        None => print!("{}", output.text()),
    }
    ExitCode::SUCCESS
}
