//! The pipeline: parse, assign layouts, make relayouts explicit, verify and
//! print. The CLI, the HTTP service and `cargo xtask` all call this; none
//! of them re-implements a step.
//!
//! Two paths call the same per-computation functions: [`run`] (stateless,
//! on a parsed module) and [`run_in`] / [`run_loaded`] (through the
//! incremental [`db::Database`] and its engine, whose per-computation
//! queries cover every step from parse to print, so that a re-run redoes
//! only what an edit reached). `tests/session_equivalence.rs` checks that
//! both give the same text, reports and errors on every testdata module,
//! and `tests/edits.rs` that a session edited again and again answers as
//! a stateless run of its text does.

use std::sync::Arc;
use std::time::{Duration, Instant};

use db::Database;
use hlo::{Module, Parallelism, ParseError};
use strum::{EnumString, IntoStaticStr, VariantArray};
use target::TargetSpec;

pub use db::output::Part;
pub use layout_assignment::Report as AssignmentReport;
pub use layout_assignment::{SolverKind, SolverOptions};
pub use relayout::{Report as RelayoutReport, RewriteKind as RelayoutKind};

/// Which passes run. A pass's name on command lines and in reports is the
/// variant's name in kebab case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, VariantArray, IntoStaticStr, EnumString)]
#[strum(serialize_all = "kebab-case")]
pub enum PassName {
    /// Layout assignment (with copy insertion).
    LayoutAssignment,
    /// Relayouts made explicit: bitcasts, copies, expanded relayouts.
    Relayout,
}

impl PassName {
    /// The pass's name on command lines and in reports.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Parses a pass name.
    pub fn from_name(name: &str) -> Option<PassName> {
        name.parse().ok()
    }

    /// Every pass, in pipeline order.
    pub fn all() -> &'static [PassName] {
        Self::VARIANTS
    }
}

/// Pipeline options.
#[derive(Clone, Debug)]
pub struct Options {
    /// The target.
    pub target: Arc<TargetSpec>,
    /// The passes to run, in pipeline order.
    pub passes: Vec<PassName>,
    /// Run the structural and layout verifiers on the output. The input
    /// is checked whatever this says.
    pub verify: bool,
    /// Relayout: expand every copy between two tilings into explicit pad,
    /// bitcast, transpose and slice instructions.
    pub expand_relayouts: bool,
    /// The solver that chooses layouts (the heuristic by default).
    pub solver: SolverOptions,
}

impl Options {
    /// Every pass, verified, for `target`.
    pub fn new(target: Arc<TargetSpec>) -> Options {
        Options {
            target,
            passes: PassName::all().to_vec(),
            verify: true,
            expand_relayouts: false,
            solver: SolverOptions::default(),
        }
    }
}

pub use db::{Step, Timing};

pub use db::pipeline::ModuleStats;

/// What a run produced besides the text.
#[derive(Clone, Debug, Default)]
pub struct PipelineReport {
    /// The module name.
    pub module: String,
    /// The target name.
    pub target: String,
    /// The passes that ran.
    pub passes: Vec<&'static str>,
    /// Counts over the output.
    pub stats: ModuleStats,
    /// Step timings.
    pub timings: Vec<Timing>,
    /// The passes' reports (see [`PipelineReport::assignment`]).
    reports: PassReports,
}

/// The passes' reports: made by a stateless run as it goes, or joined
/// from a database run's parts the first time they are asked for (see
/// [`db::output::Assembled::reports`]), so that a run whose caller wants
/// only the text never joins them.
#[derive(Clone, Debug)]
enum PassReports {
    Made(db::output::Reports),
    Parts(Arc<db::output::Assembled>),
}

/// What identifies a run's reports (see [`PipelineReport::reports_key`]).
/// A stateless run's are never the same as another run's.
#[derive(Clone, Debug)]
pub struct ReportsKey(Option<Arc<db::output::LazyReports>>);

impl ReportsKey {
    /// Whether layout assignment's report is the very one `other`'s is.
    pub fn same_assignment(&self, other: &ReportsKey) -> bool {
        self.same(other) && self.0.as_ref().is_some_and(|r| r.has_assignment())
    }

    /// Whether relayout's report is the very one `other`'s is.
    pub fn same_relayout(&self, other: &ReportsKey) -> bool {
        self.same(other) && self.0.as_ref().is_some_and(|r| r.has_relayout())
    }

    fn same(&self, other: &ReportsKey) -> bool {
        matches!((&self.0, &other.0), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }
}

impl Default for PassReports {
    fn default() -> Self {
        PassReports::Made((None, None))
    }
}

impl PipelineReport {
    /// Layout assignment's report, when it ran (shared: a session's re-run
    /// hands out the report its database keeps).
    pub fn assignment(&self) -> Option<&Arc<AssignmentReport>> {
        self.reports().0.as_ref()
    }

    /// The relayout pass's report, when it ran (shared, as the
    /// assignment's).
    pub fn relayout(&self) -> Option<&Arc<RelayoutReport>> {
        self.reports().1.as_ref()
    }

    /// What identifies these reports without making them: the same for
    /// two runs of one session whose reports are the very same values (the
    /// later run's parts report as the earlier's did).
    pub fn reports_key(&self) -> ReportsKey {
        match &self.reports {
            PassReports::Made(_) => ReportsKey(None),
            PassReports::Parts(out) => ReportsKey(Some(Arc::clone(out.lazy_reports()))),
        }
    }

    fn reports(&self) -> &db::output::Reports {
        match &self.reports {
            PassReports::Made(r) => r,
            PassReports::Parts(out) => out.reports(),
        }
    }
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Output {
    /// The report.
    pub report: PipelineReport,
    body: Body,
}

/// An output's text: printed whole (a stateless run), or assembled from
/// its computations' parts (a database run), whose whole text is made the
/// first time it is asked for.
#[derive(Clone, Debug)]
enum Body {
    Whole(Arc<String>),
    Parts(Arc<db::output::Assembled>),
}

impl Output {
    /// The output module as canonical HLO text.
    pub fn text(&self) -> &str {
        self.shared_text()
    }

    /// The text, shared (a session's re-run with no change hands out the
    /// text of the output it kept).
    pub fn shared_text(&self) -> &Arc<String> {
        match &self.body {
            Body::Whole(text) => text,
            Body::Parts(parts) => parts.text(),
        }
    }

    /// The output's header and computations, when the run assembled it
    /// from them (a database run: [`run_in`], [`run_loaded`]); `None`
    /// from [`run`], which prints the module whole. The text is the
    /// header followed by every computation's text, in order.
    pub fn parts(&self) -> Option<&db::output::Assembled> {
        match &self.body {
            Body::Whole(_) => None,
            Body::Parts(parts) => Some(parts),
        }
    }

    /// The output module, parsed back from its text (canonical text
    /// parses to the module it was printed from).
    pub fn module(&self) -> Result<Module, ParseError> {
        hlo::parse_module(self.text(), &self.report.module)
    }
}

/// Why a run failed. Typed up to the front doors: the CLI and the server
/// turn it into text (its `Display` is what they print).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PipelineError {
    /// The text does not parse.
    #[error("{0}")]
    Parse(Box<ParseError>),
    /// The module parses but is not well formed (the verifier's problems,
    /// each with where its text shows it), so no pass runs on it.
    #[error("the input module is invalid:\n{}", lines(.0))]
    InvalidInput(Vec<InputProblem>),
    /// The module parses but cannot be assigned.
    #[error("{0}")]
    Assign(AssignFailure),
    /// The relayout pass could not make the layouts explicit.
    #[error("relayout: {0}")]
    Relayout(Box<relayout::RelayoutError>),
    /// The output failed verification: a bug in Tessera, reported rather
    /// than printed as if it were fine (structural problems, or, when there
    /// are none, layout problems).
    #[error("the output failed verification:\n{}", lines(.0))]
    Verify(Vec<hlo::VerifyError>),
}

/// Items, one a line.
fn lines<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A problem of the input module, with where its text shows it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{located}")]
pub struct InputProblem {
    /// The problem.
    pub problem: hlo::VerifyError,
    /// The problem as a compiler prints it, `FILE:LINE:COL: error: ...`
    /// where the text shows its place (see [`hlo::VerifyError::located`]).
    pub located: String,
}

/// Why a module could not be assigned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssignFailure {
    /// The pass refused the module (a stateless run).
    #[error("{0}")]
    Pass(layout_assignment::PassError),
    /// A computation's assignment failed (a database run).
    #[error("{0}")]
    Computation(db::AssignError),
    /// An assignment could not be applied.
    #[error("{0}")]
    Apply(layout_assignment::ApplyError),
    /// The database could not take the module or an option.
    #[error("{0}")]
    Load(db::LoadError),
}

/// Runs the pipeline on a module's text, statelessly.
///
/// This calls the same per-computation functions as a database run,
/// without the bookkeeping incremental work needs;
/// `tests/session_equivalence.rs` checks that both give the same output.
pub fn run(text: &str, file_name: &str, opts: &Options) -> Result<Output, PipelineError> {
    // A large text is parsed in parts on the pool, and the steps after it
    // run there too.
    if Parallelism::splits(hlo::Split::ParseText, text.len()).is_some() {
        return on_pool(|| run_parsed(parse(text, file_name)?, text, file_name, opts));
    }
    // A smaller one is parsed here, on one thread either way. Then only a
    // module large enough for its steps to split goes to the pool: a
    // small one runs here, on this thread alone. Handed to the pool, a
    // corpus module of about a hundred instructions paid for waking
    // threads, at each split and for the run itself, and for the pool's
    // threads spinning for work beside this one after it (`mlp_fwd`, two
    // rounds of 2,000 runs: median 0.25 and 0.28 ms on the pool, 0.15 and
    // 0.18 ms here).
    let parsed = parse(text, file_name)?;
    if Parallelism::splits(hlo::Split::Module, parsed.0.instruction_count()).is_some() {
        return on_pool(|| run_parsed(parsed, text, file_name, opts));
    }
    let _one_thread =
        (Parallelism::current() == Parallelism::Auto).then(|| Parallelism::Sequential.enter());
    run_parsed(parsed, text, file_name, opts)
}

/// Parses `text`, with the time it took.
fn parse(text: &str, file_name: &str) -> Result<(Module, Duration), PipelineError> {
    let start = Instant::now();
    let module =
        hlo::parse_module(text, file_name).map_err(|e| PipelineError::Parse(Box::new(e)))?;
    Ok((module, start.elapsed()))
}

/// Runs `f` on a thread of the pool of the caller's [`Parallelism`]
/// policy (rayon's global pool for the default), the one every parallel
/// step splits its work on (parsing, needs, relayout, printing large
/// computations in parts), with the caller asleep until it is done; from
/// a thread of that pool, here.
///
/// The whole pipeline runs on a pool thread rather than on the caller's:
/// with the caller asleep, there are never more busy threads than cores.
/// Run from the caller's thread, the pool's threads kept spinning for work
/// between parallel steps and took the cores from the sequential ones. On
/// two cores, 100 warm runs of the largest corpus module: median 27.1 ms
/// and 90th percentile 37.8 ms from the caller's thread, 23.7 ms and 26.9
/// ms on the pool (best 22.0 and 22.3 ms).
///
/// The global pool rather than one of the pipeline's own: a process that
/// uses rayon elsewhere (a benchmark, a service's other work) then shares
/// one thread per core with the pipeline instead of running two pools'
/// threads on the same cores.
fn on_pool<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    Parallelism::current().install(f)
}

/// The pipeline after parsing, on the current thread.
fn run_parsed(
    (mut module, parse_time): (Module, Duration),
    text: &str,
    file_name: &str,
    opts: &Options,
) -> Result<Output, PipelineError> {
    let mut timings = vec![Timing {
        step: Step::Parse,
        duration: parse_time,
    }];
    // The input is always checked, `verify` or not: the passes assume a
    // well-formed module, and the process must never panic on user input.
    let t = Instant::now();
    verify_input(&module, &|p| p.located(text, file_name))?;
    timings.push(Timing {
        step: Step::VerifyInput,
        duration: t.elapsed(),
    });
    let assignment = if opts.passes.contains(&PassName::LayoutAssignment) {
        let t = Instant::now();
        let report = layout_assignment::run_with(&mut module, &opts.target, &opts.solver)
            .map_err(|e| PipelineError::Assign(AssignFailure::Pass(e)))?;
        timings.push(Timing {
            step: Step::LayoutAssignment,
            duration: t.elapsed(),
        });
        Some(report)
    } else {
        None
    };
    finish_module(module, assignment, opts, timings)
}

/// Runs the pipeline on `text` in an existing database: only what changed
/// since the database last saw a module is recomputed.
///
/// On the caller's thread, which should not be one of rayon's: while a
/// rayon thread waits inside a query for work it split, it may run another
/// queued job, and salsa refuses a job that queries another database there
/// (see `db::engine`). Its parallel steps run on threads of their own and
/// on rayon's pool.
pub fn run_in(
    db: &mut Database,
    text: &str,
    file_name: &str,
    opts: &Options,
) -> Result<Output, PipelineError> {
    load_and_finish(db, text, file_name, opts, Then::Keep)
}

/// Runs the pipeline on `text` in a database of its own, which it then
/// discards (see [`Database::discard`]): a session's first run, for a
/// caller that keeps no session.
pub fn run_fresh(text: &str, file_name: &str, opts: &Options) -> Result<Output, PipelineError> {
    let mut db = Database::for_one_run();
    let out = load_and_finish(&mut db, text, file_name, opts, Then::Discard);
    db.discard();
    out
}

/// What becomes of a database after a run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// It is kept for the next run: its intermediates are released.
    Keep,
    /// It is discarded whole.
    Discard,
}

/// [`run_in`], then `then`.
fn load_and_finish(
    db: &mut Database,
    text: &str,
    file_name: &str,
    opts: &Options,
    then: Then,
) -> Result<Output, PipelineError> {
    let start = Instant::now();
    let loaded = db.load(text, file_name, opts.target.clone());
    if let Err(db::LoadError::Parse(e)) = loaded {
        return Err(PipelineError::Parse(e));
    }
    loaded.map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    db.set_solver(opts.solver)
        .map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    let loading = start.elapsed();
    let mut out = finish(db, opts, then);
    // Loading the text (outlining it and comparing each computation's) is
    // part of parsing, in a run given the text.
    if let Ok(out) = &mut out
        && let Some(parse) = out
            .report
            .timings
            .iter_mut()
            .find(|t| t.step == Step::Parse)
    {
        parse.duration += loading;
    }
    out
}

/// Runs the pipeline on the module already loaded in `db`, on the caller's
/// thread (see [`run_in`]).
pub fn run_loaded(db: &mut Database, opts: &Options) -> Result<Output, PipelineError> {
    finish(db, opts, Then::Keep)
}

/// The input check of [`run`] on text already parsed: the problems of a
/// module the structural verifier rejects, located in `text`. A session
/// checks the module it is given with this before holding it.
pub fn check_input(module: &Module, text: &str, file_name: &str) -> Result<(), PipelineError> {
    verify_input(module, &|p| p.located(text, file_name))
}

/// The input check of [`run_loaded`]: parses what changed in `db` and
/// refuses a module the structural verifier rejects. A session checks an
/// edit with this before keeping it; the run that follows finds it done.
pub fn check_loaded_input(db: &mut Database) -> Result<(), PipelineError> {
    db.check_input().map_err(|e| run_error(db, e))
}

/// The input's bitcasts that move bytes. The passes keep an input bitcast
/// in the layouts it was written with (a side written without a layout
/// means the plain descending one, as everywhere in an input), and the
/// output verifier proves every bitcast keeps each element where it is; a
/// bitcast that does not, under its own layouts, is the user's error.
fn input_bitcast_problems(module: &Module) -> Vec<hlo::VerifyError> {
    module
        .computations
        .iter()
        .flat_map(db::pipeline::bitcast_problems)
        .collect()
}

/// Refuses a module the structural verifier rejects: passes assume well
/// formed input, and an output problem must mean a bug in Tessera. Each
/// problem is reported as `located` writes it, with its place in the text.
fn verify_input(
    module: &Module,
    located: &dyn Fn(&hlo::VerifyError) -> String,
) -> Result<(), PipelineError> {
    let mut problems = hlo::verify_module(module);
    if problems.is_empty() {
        problems = input_bitcast_problems(module);
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(invalid_input(problems, located))
    }
}

/// The input's problems, each located by `located`.
fn invalid_input(
    problems: Vec<hlo::VerifyError>,
    located: &dyn Fn(&hlo::VerifyError) -> String,
) -> PipelineError {
    PipelineError::InvalidInput(
        problems
            .into_iter()
            .map(|problem| InputProblem {
                located: located(&problem),
                problem,
            })
            .collect(),
    )
}

/// The steps after assignment that `opts` ask for.
pub fn steps(opts: &Options) -> db::pipeline::Steps {
    db::pipeline::Steps {
        assign: opts.passes.contains(&PassName::LayoutAssignment),
        relayout: opts.passes.contains(&PassName::Relayout),
        expand_relayouts: opts.expand_relayouts,
        verify: opts.verify,
    }
}

/// Whether a run of the module loaded in `db` with `opts` has nothing to
/// redo: no edit since the last run, and the same target, solver and
/// steps. Such a run only reads what the last one made.
pub fn nothing_to_redo(db: &Database, opts: &Options) -> bool {
    db.written_since_run() == 0
        && db.settings().is_some_and(|(target, solver, s)| {
            *target == *opts.target && solver == opts.solver && s == steps(opts)
        })
}

/// The run of the module loaded in `db` with `opts`' steps, after which
/// the run's intermediates are released (see
/// [`db::Database::release_intermediates`]).
fn finish(db: &mut Database, opts: &Options, then: Then) -> Result<Output, PipelineError> {
    db.set_steps(steps(opts))
        .map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    let busy = db.written_since_run() > 0;
    let run = db.run();
    // With nothing to redo, the run only read what the last one made:
    // nothing to release.
    if busy && then == Then::Keep {
        db.release_intermediates(run.is_ok());
    }
    let run = run.map_err(|e| run_error(db, e))?;
    let m = db.module().map(|m| m.header(db).name.clone());
    let report = PipelineReport {
        module: m.unwrap_or_default(),
        target: opts.target.name.clone(),
        passes: opts.passes.iter().map(|p| p.name()).collect(),
        stats: run.output.stats.clone(),
        timings: run.timings,
        reports: PassReports::Parts(Arc::clone(&run.output)),
    };
    Ok(Output {
        report,
        body: Body::Parts(run.output),
    })
}

/// A database run's error as the pipeline's, input problems located in
/// the loaded text.
fn run_error(db: &Database, e: db::RunError) -> PipelineError {
    use db::output::{InputRefusal, OutputError};
    match e {
        db::RunError::NoModule => {
            PipelineError::Assign(AssignFailure::Load(db::LoadError::NoModule))
        }
        db::RunError::Input(InputRefusal::Parse(e)) => PipelineError::Parse(e),
        db::RunError::Input(InputRefusal::Problems(problems)) => {
            invalid_input(problems, &|p| db.located(p))
        }
        db::RunError::Output(OutputError::Assign(db::AssignError::Parse(e))) => {
            PipelineError::Parse(e)
        }
        db::RunError::Output(OutputError::Assign(e)) => {
            PipelineError::Assign(AssignFailure::Computation(e))
        }
        db::RunError::Output(OutputError::Apply(e)) => {
            PipelineError::Assign(AssignFailure::Apply(e))
        }
        db::RunError::Output(OutputError::Relayout(e)) => PipelineError::Relayout(e),
        db::RunError::Verify(problems) => PipelineError::Verify(problems),
    }
}

/// Verifies, prints and reports an assigned module.
fn finish_module(
    mut module: Module,
    assignment: Option<AssignmentReport>,
    opts: &Options,
    mut timings: Vec<Timing>,
) -> Result<Output, PipelineError> {
    let timings = &mut timings;
    let relayout = if opts.passes.contains(&PassName::Relayout) {
        let t = Instant::now();
        let ropts = relayout::Options {
            expand_relayouts: opts.expand_relayouts,
        };
        let report = relayout::run(&mut module, &opts.target, &ropts)
            .map_err(|e| PipelineError::Relayout(Box::new(e)))?;
        timings.push(Timing {
            step: Step::Relayout,
            duration: t.elapsed(),
        });
        Some(report)
    } else {
        None
    };
    // Printing, verifying and counting only read the finished module: they
    // run side by side on the pool (a small module's join costs next to
    // nothing: unstolen work runs inline).
    let verify = |module: &Module| -> (Vec<hlo::VerifyError>, Duration) {
        let t = Instant::now();
        let mut problems = hlo::verify_module(module);
        if problems.is_empty() && assignment.is_some() {
            problems = layout_assignment::check_layouts(module, Some(&opts.target));
        }
        (problems, t.elapsed())
    };
    let print = |module: &Module| {
        let t = Instant::now();
        let text = hlo::print_module(module);
        (text, t.elapsed())
    };
    // Printing, counting and verifying only read the module: a large
    // one's side by side, a small one's in turn.
    let size = module.instruction_count();
    let (((text, print_time), stats), checked) = Parallelism::join(
        hlo::Split::Module,
        size,
        || {
            Parallelism::join(
                hlo::Split::Module,
                size,
                || print(&module),
                || stats(&module, assignment.as_ref()),
            )
        },
        || opts.verify.then(|| verify(&module)),
    );
    if let Some((problems, verify_time)) = checked {
        timings.push(Timing {
            step: Step::Verify,
            duration: verify_time,
        });
        if !problems.is_empty() {
            return Err(PipelineError::Verify(problems));
        }
    }
    timings.push(Timing {
        step: Step::Print,
        duration: print_time,
    });
    let report = PipelineReport {
        module: module.name.clone(),
        target: opts.target.name.clone(),
        passes: opts.passes.iter().map(|p| p.name()).collect(),
        stats,
        timings: std::mem::take(timings),
        reports: PassReports::Made((assignment.map(Arc::new), relayout.map(Arc::new))),
    };
    Ok(Output {
        report,
        body: Body::Whole(Arc::new(text)),
    })
}

/// Counts copies, bitcasts, transposes, padding and the bytes moved over a
/// module, from the module alone (see [`ModuleStats::of`]).
pub fn stats(module: &Module, _assignment: Option<&AssignmentReport>) -> ModuleStats {
    ModuleStats::of(module)
}

/// What [`picture`] draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PictureKind {
    /// Graphviz text.
    Dot,
    /// A self-contained SVG.
    Svg,
}

/// A computation named for a picture that the module does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no computation named '{name}'; the module has {}", known.join(", "))]
pub struct UnknownComputation {
    /// The name asked for.
    pub name: String,
    /// The module's computations, in order.
    pub known: Vec<String>,
}

/// A picture of one computation of `module` (the entry when `computation`
/// is `None`): boxes per instruction, edges labelled with the operand's
/// layout, copies red and bitcasts green. Fails on an unknown name.
pub fn picture(
    module: &Module,
    computation: Option<&str>,
    kind: PictureKind,
) -> Result<String, UnknownComputation> {
    let id = match computation {
        None => module.entry,
        Some(name) => module
            .find_computation(name.trim_start_matches('%'))
            .ok_or_else(|| UnknownComputation {
                name: name.to_string(),
                known: module.computations.iter().map(|c| c.name.clone()).collect(),
            })?,
    };
    Ok(match kind {
        PictureKind::Dot => draw::to_dot(module, id),
        PictureKind::Svg => draw::to_svg(module, id),
    })
}

#[cfg(test)]
mod relayout_tests {
    use super::*;

    #[test]
    fn pass_names_round_trip_in_pipeline_order() {
        let names: Vec<&str> = PassName::all().iter().map(|p| p.name()).collect();
        assert_eq!(names, ["layout-assignment", "relayout"]);
        for &p in PassName::all() {
            assert_eq!(PassName::from_name(p.name()), Some(p));
        }
        assert_eq!(PassName::from_name("Relayout"), None);
        assert_eq!(PassName::from_name("layout_assignment"), None);
    }

    const TEXT: &str = r#"HloModule pipe, entry_computation_layout={(f32[2,3,4]{2,1,0}, f32[4,6]{0,1})->(f32[6,4]{1,0}, f32[4,6]{1,0})}

ENTRY %main (x: f32[2,3,4], y: f32[4,6]) -> (f32[6,4], f32[4,6]) {
  %x = f32[2,3,4] parameter(0)
  %y = f32[4,6] parameter(1)
  %r = f32[6,4] reshape(%x)
  %t = f32[6,4] transpose(%y), dimensions={1,0}
  %s = f32[6,4] add(%r, %t)
  %u = f32[4,6] transpose(%s), dimensions={1,0}
  ROOT %o = (f32[6,4], f32[4,6]) tuple(%s, %u)
}
"#;

    fn opts(passes: &[PassName]) -> Options {
        let target = Arc::new(target::load_builtin("gpu").expect("gpu"));
        Options {
            passes: passes.to_vec(),
            ..Options::new(target)
        }
    }

    #[test]
    fn relayout_runs_after_assignment_and_the_counts_are_after_it() {
        let out = run(TEXT, "t.hlo", &opts(PassName::all())).expect("run");
        assert_eq!(out.report.passes, ["layout-assignment", "relayout"]);
        let r = out.report.relayout().expect("relayout report");
        assert_eq!(r.count(RelayoutKind::ReshapeToBitcast), 1);
        assert_eq!(r.count(RelayoutKind::TransposeToBitcast), 1);
        assert_eq!(out.report.stats.bitcasts, 2);
        assert_eq!(out.report.stats.transposes, 1);
        assert!(
            out.text().contains("%r = f32[6,4]{1,0} bitcast(%x)"),
            "{}",
            out.text()
        );
        assert!(out.report.timings.iter().any(|t| t.step == Step::Relayout));
    }

    #[test]
    fn layout_assignment_alone_leaves_movements() {
        let out = run(TEXT, "t.hlo", &opts(&[PassName::LayoutAssignment])).expect("run");
        assert!(out.report.relayout().is_none());
        assert_eq!(out.report.stats.bitcasts, 0);
        assert_eq!(out.report.stats.transposes, 2);
        assert!(
            out.text().contains("%r = f32[6,4]{1,0} reshape(%x)"),
            "{}",
            out.text()
        );
    }

    #[test]
    fn relayout_alone_counts_its_copies() {
        let text = "HloModule alone\n\nENTRY %main (p: f32[4,8], q: f32[4,8]) -> f32[4,8] {\n  %p = f32[4,8]{0,1} parameter(0)\n  %q = f32[4,8]{1,0} parameter(1)\n  ROOT %a = f32[4,8]{1,0} add(%p, %q)\n}\n";
        let out = run(text, "t.hlo", &opts(&[PassName::Relayout])).expect("run");
        assert!(out.report.assignment().is_none());
        assert_eq!(out.report.stats.copies, 1);
        assert_eq!(out.report.stats.copy_bytes, 128);
        assert!(
            out.text().contains("%a = f32[4,8]{1,0} add(%p.copy, %q)"),
            "{}",
            out.text()
        );
    }

    #[test]
    fn the_database_path_runs_relayout_too() {
        let o = opts(PassName::all());
        let fresh = run(TEXT, "t.hlo", &o).expect("run");
        let mut db = Database::default();
        let incremental = run_in(&mut db, TEXT, "t.hlo", &o).expect("run_in");
        assert_eq!(fresh.text(), incremental.text());
        assert_eq!(fresh.report.relayout(), incremental.report.relayout());
    }

    #[test]
    fn expand_relayouts_is_an_option() {
        let text = "HloModule e\n\nENTRY %main (p: f32[3,200]) -> f32[3,200] {\n  %p = f32[3,200]{1,0} parameter(0)\n  ROOT %x = f32[3,200]{1,0:T(8,128)} copy(%p)\n}\n";
        let mut o = opts(&[PassName::Relayout]);
        o.expand_relayouts = true;
        let out = run(text, "t.hlo", &o).expect("run");
        assert_eq!(out.report.stats.copies, 0);
        assert!(
            out.text().contains("pad(%p, %x.zero), padding=0_5x0_56"),
            "{}",
            out.text()
        );
    }

    #[test]
    fn ill_formed_input_is_refused_with_or_without_the_output_verifier() {
        // The loop condition takes another type than the loop state.
        let text = "HloModule bad\n\n%cond (q: bf16[4]) -> pred[] {\n  %q = bf16[4] parameter(0)\n  ROOT %t = pred[] constant(true)\n}\n\n%body (s: f32[4]) -> f32[4] {\n  %s = f32[4] parameter(0)\n  ROOT %n = f32[4] negate(%s)\n}\n\nENTRY %main (a: f32[4]) -> f32[4] {\n  %a = f32[4] parameter(0)\n  ROOT %w = f32[4] while(%a), condition=%cond, body=%body\n}\n";
        for verify in [true, false] {
            let o = Options {
                verify,
                ..opts(PassName::all())
            };
            let err = run(text, "t.hlo", &o).expect_err("an ill-formed module");
            assert!(
                matches!(&err, PipelineError::InvalidInput(p) if p[0].located.contains("parameter 0 of %cond")),
                "{err}"
            );
            let mut db = Database::default();
            let err = run_in(&mut db, text, "t.hlo", &o).expect_err("an ill-formed module");
            assert!(matches!(err, PipelineError::InvalidInput(_)), "{err}");
        }
    }

    #[test]
    fn pictures_of_named_computations() {
        let out = run(TEXT, "t.hlo", &opts(PassName::all())).expect("run");
        let dot = picture(&out.module().expect("parses"), None, PictureKind::Dot).expect("dot");
        assert!(dot.starts_with("digraph \"main\""));
        let svg = picture(
            &out.module().expect("parses"),
            Some("%main"),
            PictureKind::Svg,
        )
        .expect("svg");
        assert!(svg.starts_with("<svg"));
        let err = picture(
            &out.module().expect("parses"),
            Some("nope"),
            PictureKind::Dot,
        )
        .expect_err("unknown");
        assert_eq!(err.name, "nope");
        assert!(err.known.contains(&"main".to_string()));
        assert!(
            err.to_string().contains("no computation named 'nope'"),
            "{err}"
        );
    }
}
