//! The pipeline: parse, assign layouts, make relayouts explicit, verify and
//! print. The CLI, the HTTP service and `cargo xtask` all call this; none
//! of them re-implements a step.
//!
//! Every run goes through the incremental [`db::Database`]; a stateless run
//! is a run on a fresh database, so a session's answer and a fresh answer
//! are the same by construction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use db::Database;
use hlo::{Module, Opcode, ParseError};
use target::TargetSpec;

pub use layout_assignment::Report as AssignmentReport;

/// Which passes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PassName {
    /// Layout assignment (with copy insertion).
    LayoutAssignment,
}

impl PassName {
    /// The pass's name on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PassName::LayoutAssignment => "layout-assignment",
        }
    }

    /// Parses a pass name.
    pub fn from_name(name: &str) -> Option<PassName> {
        match name {
            "layout-assignment" => Some(PassName::LayoutAssignment),
            _ => None,
        }
    }

    /// Every pass, in pipeline order.
    pub fn all() -> &'static [PassName] {
        &[PassName::LayoutAssignment]
    }
}

/// Pipeline options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The target.
    pub target: Arc<TargetSpec>,
    /// The passes to run, in pipeline order.
    pub passes: Vec<PassName>,
    /// Run the verifier on the output.
    pub verify: bool,
}

impl Options {
    /// Every pass, verified, for `target`.
    pub fn new(target: Arc<TargetSpec>) -> Options {
        Options { target, passes: PassName::all().to_vec(), verify: true }
    }
}

/// How long a step took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The step: `parse`, `layout-assignment`, `verify`, `print`.
    pub step: &'static str,
    /// Wall time.
    pub duration: Duration,
}

/// Counts over the output module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Instructions in every computation.
    pub instructions: usize,
    /// `copy` instructions.
    pub copies: usize,
    /// `bitcast` instructions.
    pub bitcasts: usize,
    /// `transpose` instructions.
    pub transposes: usize,
    /// Bytes written by copies the pass inserted.
    pub copy_bytes: u64,
    /// Bytes written by transposes and reshapes that are not bitcasts.
    pub movement_bytes: u64,
    /// Tile padding in the buffers of every array value, in bytes.
    pub padding_bytes: u64,
}

/// What a run produced besides the text.
#[derive(Clone, Debug, Default)]
pub struct PipelineReport {
    /// The module name.
    pub module: String,
    /// The target name.
    pub target: String,
    /// The passes that ran.
    pub passes: Vec<&'static str>,
    /// Layout assignment's report, when it ran.
    pub assignment: Option<AssignmentReport>,
    /// Counts over the output.
    pub stats: ModuleStats,
    /// Step timings.
    pub timings: Vec<Timing>,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Output {
    /// The output module as canonical HLO text.
    pub text: String,
    /// The output module.
    pub module: Module,
    /// The report.
    pub report: PipelineReport,
}

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    /// The text does not parse.
    #[error("{0}")]
    Parse(Box<ParseError>),
    /// The module parses but cannot be assigned.
    #[error("{0}")]
    Assign(String),
    /// The output failed verification: a bug in Tessera, reported rather
    /// than printed as if it were fine.
    #[error("the output failed verification:\n{}", .0.join("\n"))]
    Verify(Vec<String>),
}

/// Runs the pipeline on a module's text, statelessly.
///
/// This calls the same per-computation functions as a database run, in the
/// same order, without the bookkeeping incremental work needs; a test
/// checks that both give byte-identical output.
pub fn run(text: &str, file_name: &str, opts: &Options) -> Result<Output, PipelineError> {
    let mut timings = Vec::new();
    let start = Instant::now();
    let mut module = hlo::parse_module(text, file_name).map_err(|e| PipelineError::Parse(Box::new(e)))?;
    timings.push(Timing { step: "parse", duration: start.elapsed() });
    let assignment = if opts.passes.contains(&PassName::LayoutAssignment) {
        let t = Instant::now();
        let report = layout_assignment::run(&mut module, &opts.target).map_err(|e| PipelineError::Assign(e.to_string()))?;
        timings.push(Timing { step: "layout-assignment", duration: t.elapsed() });
        Some(report)
    } else {
        None
    };
    finish_module(module, assignment, opts, timings)
}

/// Runs the pipeline on `text` in an existing database: only what changed
/// since the database last saw a module is recomputed.
pub fn run_in(db: &mut Database, text: &str, file_name: &str, opts: &Options) -> Result<Output, PipelineError> {
    let mut timings = Vec::new();
    let start = Instant::now();
    let loaded = db.load(text, file_name, opts.target.clone());
    if let Err(db::LoadError::Parse(e)) = loaded {
        return Err(PipelineError::Parse(e));
    }
    loaded.map_err(|e| PipelineError::Assign(e.to_string()))?;
    finish(db, opts, start, &mut timings)
}

/// Runs the pipeline on the module already loaded in `db`.
pub fn run_loaded(db: &Database, opts: &Options) -> Result<Output, PipelineError> {
    let mut timings = Vec::new();
    finish(db, opts, Instant::now(), &mut timings)
}

fn finish(db: &Database, opts: &Options, start: Instant, timings: &mut Vec<Timing>) -> Result<Output, PipelineError> {
    let assign = opts.passes.contains(&PassName::LayoutAssignment);
    let (module, assignment) = if assign {
        let (module, assignments) = db.assigned_module().map_err(|e| match e {
            db::AssignError::Parse(p) => PipelineError::Parse(p),
            other => PipelineError::Assign(other.to_string()),
        })?;
        timings.push(Timing { step: "parse+layout-assignment", duration: start.elapsed() });
        let t = Instant::now();
        let mut module = module;
        let report = layout_assignment::apply_module(&mut module, &assignments);
        timings.push(Timing { step: "apply", duration: t.elapsed() });
        (module, Some(report))
    } else {
        let (module, _) = db.assigned_module().map_err(|e| PipelineError::Assign(e.to_string()))?;
        timings.push(Timing { step: "parse", duration: start.elapsed() });
        (module, None)
    };
    finish_module(module, assignment, opts, std::mem::take(timings))
}

/// Verifies, prints and reports an assigned module.
fn finish_module(
    mut module: Module,
    assignment: Option<AssignmentReport>,
    opts: &Options,
    mut timings: Vec<Timing>,
) -> Result<Output, PipelineError> {
    let timings = &mut timings;
    if opts.verify {
        let t = Instant::now();
        let mut problems: Vec<String> = hlo::verify_module(&module).iter().map(ToString::to_string).collect();
        if problems.is_empty() && assignment.is_some() {
            problems.extend(layout_assignment::check_layouts(&module, Some(&opts.target)).iter().map(ToString::to_string));
        }
        timings.push(Timing { step: "verify", duration: t.elapsed() });
        if !problems.is_empty() {
            return Err(PipelineError::Verify(problems));
        }
    }
    let t = Instant::now();
    let text = hlo::print_module(&module);
    timings.push(Timing { step: "print", duration: t.elapsed() });
    let stats = stats(&mut module, assignment.as_ref());
    let report = PipelineReport {
        module: module.name.clone(),
        target: opts.target.name.clone(),
        passes: opts.passes.iter().map(|p| p.name()).collect(),
        assignment,
        stats,
        timings: std::mem::take(timings),
    };
    Ok(Output { text, module, report })
}

/// Counts copies, bitcasts, transposes and padding over a module.
pub fn stats(module: &mut Module, assignment: Option<&AssignmentReport>) -> ModuleStats {
    let mut s = ModuleStats::default();
    for comp in &module.computations {
        for (_, inst) in comp.instructions() {
            s.instructions += 1;
            match inst.opcode {
                Opcode::Copy => s.copies += 1,
                Opcode::Bitcast => s.bitcasts += 1,
                Opcode::Transpose => s.transposes += 1,
                _ => {}
            }
            inst.shape.for_each_array(&mut |_, a| {
                if a.layout.is_some() {
                    s.padding_bytes += shape::storage_size(a).map_or(0, |z| (z.slots - z.elements) * z.element_bits / 8);
                }
            });
        }
    }
    if let Some(r) = assignment {
        s.copy_bytes = r.copy_bytes();
        s.movement_bytes = r.movement_bytes();
    }
    s
}
