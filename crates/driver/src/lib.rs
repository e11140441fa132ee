//! The pipeline: parse, assign layouts, make relayouts explicit, verify and
//! print. The CLI, the HTTP service and `cargo xtask` all call this; none
//! of them re-implements a step.
//!
//! Two paths call the same per-computation functions: [`run`] (stateless,
//! on a parsed module) and [`run_in`] / [`run_loaded`] (through the
//! incremental [`db::Database`], whose per-computation queries cover every
//! step from parse to print, so that a re-run redoes only what an edit
//! touched). `tests/session_equivalence.rs` checks that both give the same
//! text, reports and errors on every testdata module; making the stateless
//! run a run on a fresh database waits until that is as fast.

use std::sync::Arc;
use std::time::{Duration, Instant};

use db::Database;
use hlo::{Module, Parallelism, ParseError, Split};
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

/// How long a step took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The step.
    pub step: Step,
    /// Wall time.
    pub duration: Duration,
}

/// A step of the pipeline, as timings name it: one vocabulary for a
/// stateless run and a database run. A database run applies an
/// assignment together with relayout, and checks the output together with
/// printing it, per computation, so it has steps of its own for those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// Parsing (and, in a database, loading) the text.
    Parse,
    /// The input's structural check.
    VerifyInput,
    /// Layout assignment (with its copies, in a stateless run).
    LayoutAssignment,
    /// The relayout pass (a stateless run).
    Relayout,
    /// Applying each computation's assignment, then relayout (a database
    /// run).
    ApplyRelayout,
    /// Checking, printing and counting each output computation (a
    /// database run).
    CheckPrint,
    /// Printing the output.
    Print,
    /// The output's structural and layout checks.
    Verify,
}

impl Step {
    /// The step's name in reports: `parse`, `verify-input`, ...
    pub fn name(self) -> &'static str {
        match self {
            Step::Parse => "parse",
            Step::VerifyInput => "verify-input",
            Step::LayoutAssignment => "layout-assignment",
            Step::Relayout => "relayout",
            Step::ApplyRelayout => "apply+relayout",
            Step::CheckPrint => "check+print",
            Step::Print => "print",
            Step::Verify => "verify",
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// Layout assignment's report, when it ran (shared: a session's
    /// re-run hands out the report its database keeps).
    pub assignment: Option<Arc<AssignmentReport>>,
    /// The relayout pass's report, when it ran (shared, as the
    /// assignment's).
    pub relayout: Option<Arc<RelayoutReport>>,
    /// Counts over the output.
    pub stats: ModuleStats,
    /// Step timings.
    pub timings: Vec<Timing>,
}

/// The result of a run.
#[derive(Clone, Debug)]
pub struct Output {
    /// The output module as canonical HLO text (shared: a session's
    /// re-run with no change hands out the text it kept).
    pub text: Arc<String>,
    /// The report.
    pub report: PipelineReport,
    /// Where the text's parts lie, when the run assembled the text from
    /// them (a database run: [`run_in`], [`run_loaded`]); `None` from
    /// [`run`], which prints the module whole.
    pub parts: Option<OutputParts>,
}

/// The parts of an output text: the header (the module line, with the
/// entry computation layout, and the debug tables) and each computation's
/// text, with the blank line after it. The text is the header followed by
/// every computation, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputParts {
    /// The header's byte range in the text.
    pub header: std::ops::Range<usize>,
    /// The entry computation layout the header prints.
    pub entry_layout: Arc<hlo::ComputationLayout>,
    /// Each computation's name, byte range and text hash, in order.
    pub computations: Arc<[Part]>,
}

impl Output {
    /// The output module, parsed back from its text (canonical text
    /// parses to the module it was printed from).
    pub fn module(&self) -> Result<Module, ParseError> {
        hlo::parse_module(&self.text, &self.report.module)
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
    on_pool(|| run_here(text, file_name, opts))
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

fn run_here(text: &str, file_name: &str, opts: &Options) -> Result<Output, PipelineError> {
    let mut timings = Vec::new();
    let start = Instant::now();
    let mut module =
        hlo::parse_module(text, file_name).map_err(|e| PipelineError::Parse(Box::new(e)))?;
    timings.push(Timing {
        step: Step::Parse,
        duration: start.elapsed(),
    });
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
/// (see `fan_out`). Its parallel steps run on threads of their own and on
/// rayon's pool.
pub fn run_in(
    db: &mut Database,
    text: &str,
    file_name: &str,
    opts: &Options,
) -> Result<Output, PipelineError> {
    run_in_here(db, text, file_name, opts)
}

fn run_in_here(
    db: &mut Database,
    text: &str,
    file_name: &str,
    opts: &Options,
) -> Result<Output, PipelineError> {
    let mut timings = Vec::new();
    let start = Instant::now();
    let loaded = db.load(text, file_name, opts.target.clone());
    if let Err(db::LoadError::Parse(e)) = loaded {
        return Err(PipelineError::Parse(e));
    }
    loaded.map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    db.set_solver(opts.solver)
        .map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    finish(db, opts, start, &mut timings)
}

/// Runs the pipeline on the module already loaded in `db`, on the caller's
/// thread (see [`run_in`]).
pub fn run_loaded(db: &mut Database, opts: &Options) -> Result<Output, PipelineError> {
    finish(db, opts, Instant::now(), &mut Vec::new())
}

/// The input check of [`run`] on text already parsed: the problems of a
/// module the structural verifier rejects, located in `text`. A session
/// checks the module it is given with this before holding it.
pub fn check_input(module: &Module, text: &str, file_name: &str) -> Result<(), PipelineError> {
    verify_input(module, &|p| p.located(text, file_name))
}

/// The input check of [`run_loaded`]: parses what changed in `db` and
/// refuses a module the structural verifier rejects. A session checks an
/// edit with this before keeping it.
pub fn check_loaded_input(db: &Database) -> Result<(), PipelineError> {
    let Some(m) = db.module() else {
        return Err(PipelineError::Assign(AssignFailure::Load(
            db::LoadError::NoModule,
        )));
    };
    // On the caller's thread, as `run_loaded`; on a handle of its own, as
    // there (see `db::Database::for_joins`).
    checked_input(
        &db.for_joins(),
        m,
        splits(db.written_since_run()),
        Instant::now(),
        &mut Vec::new(),
    )
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
        Err(PipelineError::InvalidInput(
            problems
                .into_iter()
                .map(|problem| InputProblem {
                    located: located(&problem),
                    problem,
                })
                .collect(),
        ))
    }
}

fn finish(
    db: &mut Database,
    opts: &Options,
    start: Instant,
    timings: &mut Vec<Timing>,
) -> Result<Output, PipelineError> {
    let Some(m) = db.module() else {
        return Err(PipelineError::Assign(AssignFailure::Load(
            db::LoadError::NoModule,
        )));
    };
    let steps = db::pipeline::Steps {
        assign: opts.passes.contains(&PassName::LayoutAssignment),
        relayout: opts.passes.contains(&PassName::Relayout),
        expand_relayouts: opts.expand_relayouts,
        verify: opts.verify,
    };
    db.set_steps(steps)
        .map_err(|e| PipelineError::Assign(AssignFailure::Load(e)))?;
    let written = db.written_since_run();
    let out = assemble(db, m, opts, written, start, timings);
    // With nothing written since a successful run, that run released what
    // it made and this one only looked values up: nothing to release.
    if written > 0 {
        db.release_intermediates(out.is_ok());
    }
    // A run that failed is redone in full next time (its joins may not
    // have been reached in the call graph's order).
    if out.is_ok() {
        db.ran();
    }
    out
}

/// Whether a run on `db` splits its work over threads: when it may have
/// more to redo than a few computations. A re-run after a small edit
/// reads every unchanged computation's parts at a glance, and threads
/// would cost more to start than they save (each also begins with an
/// empty allocator heap).
fn splits(written: usize) -> bool {
    Parallelism::splits(Split::Computations, written).is_some()
}

/// The input check of the module `m` loaded in `db`, from its
/// computations' parts (see [`db::output::input_verdict`]). Only what
/// changed since the last check is recomputed; with `parallel`, the
/// computations are first parsed and checked side by side.
fn checked_input(
    db: &Database,
    m: db::SourceModule,
    parallel: bool,
    start: Instant,
    timings: &mut Vec<Timing>,
) -> Result<(), PipelineError> {
    use db::pipeline;
    // Only a parallel check parses and checks ahead of the verdict.
    let comps = if parallel {
        largest_first(db, m.computations(db))
    } else {
        Vec::new()
    };
    if parallel {
        each_computation(db, &comps, |db, c| {
            let _ = db::parsed(db, c);
        });
    }
    timings.push(Timing {
        step: Step::Parse,
        duration: start.elapsed(),
    });
    let t = Instant::now();
    // The checks run only on a module whose computations all parse.
    if parallel && comps.iter().all(|&c| db::parse_error(db, c).is_none()) {
        each_computation(db, &comps, |db, c| {
            let _ = pipeline::input_check(db, c);
        });
    }
    match db::output::input_verdict(db, m) {
        Ok(()) => {}
        Err(db::output::InputRefusal::Parse(e)) => return Err(PipelineError::Parse(e.clone())),
        Err(db::output::InputRefusal::Problems(problems)) => {
            return Err(PipelineError::InvalidInput(
                problems
                    .iter()
                    .map(|p| InputProblem {
                        problem: p.clone(),
                        located: db.located(p),
                    })
                    .collect(),
            ));
        }
    }
    timings.push(Timing {
        step: Step::VerifyInput,
        duration: t.elapsed(),
    });
    Ok(())
}

/// The output of the module `m` loaded in `db` (see
/// [`db::output::assembled`]), `written` computations' inputs having been
/// written since the last successful run. When that is many, each
/// computation's steps are first run side by side, a step at a time;
/// when few, the joins compute what they read, in order; when none, the
/// joins are looked up.
fn assemble(
    db: &Database,
    m: db::SourceModule,
    opts: &Options,
    written: usize,
    start: Instant,
    timings: &mut Vec<Timing>,
) -> Result<Output, PipelineError> {
    use db::pipeline;
    let parallel = splits(written);
    // The input's check ends with a join over every computation, and the
    // joins below read every computation: each on a handle of its own
    // when they may run (see `db::Database::for_joins`).
    checked_input(&db.for_joins(), m, parallel, start, timings)?;
    // Assignments are computed (or re-checked) in the call graph's order,
    // parallel or not: a computation's assignment reads its callers' and
    // callees', so asking for them in any other order would make salsa
    // follow the call chain down, a recursion as deep as the input's.
    let t = Instant::now();
    if m.steps(db).assign && written > 0 {
        if parallel {
            warm_beside(db, m);
        } else {
            db.warm(m);
        }
    }
    timings.push(Timing {
        step: Step::LayoutAssignment,
        duration: t.elapsed(),
    });
    if parallel {
        let comps = largest_first(db, m.computations(db));
        // Each computation's steps after assignment depend on no other
        // computation's but through signatures: they run side by side.
        let t = Instant::now();
        each_computation(db, &comps, |db, c| {
            let _ = pipeline::reports(db, c);
        });
        timings.push(Timing {
            step: Step::ApplyRelayout,
            duration: t.elapsed(),
        });
        // Checking, printing and counting a computation only read it: one
        // query, which checks and prints a large computation side by side.
        let t = Instant::now();
        each_computation(db, &comps, |db, c| {
            let _ = pipeline::printed(db, c);
            if opts.verify {
                let _ = pipeline::output_names(db, c);
            }
        });
        timings.push(Timing {
            step: Step::CheckPrint,
            duration: t.elapsed(),
        });
    }
    let t = Instant::now();
    // Each join on a handle of its own: where the steps did not run
    // first (a run on one thread, a small re-run), a join computes what it
    // reads, in queries nested in it, and on a shared handle each of those
    // would clear the record of reads the join before left at its depth
    // (the output's module-wide check reads every computation's names, and
    // the merged report then ran every computation's `reports` under it:
    // quadratic in the number of computations).
    let out = match db::output::assembled(&*db.for_joins(), m) {
        Ok(out) => Arc::clone(out),
        Err(db::output::OutputError::Assign(db::AssignError::Parse(e))) => {
            return Err(PipelineError::Parse(e.clone()));
        }
        Err(db::output::OutputError::Assign(e)) => {
            return Err(PipelineError::Assign(AssignFailure::Computation(e.clone())));
        }
        Err(db::output::OutputError::Apply(e)) => {
            return Err(PipelineError::Assign(AssignFailure::Apply(e.clone())));
        }
        Err(db::output::OutputError::Relayout(e)) => {
            return Err(PipelineError::Relayout(e.clone()));
        }
    };
    timings.push(Timing {
        step: Step::Print,
        duration: t.elapsed(),
    });
    if opts.verify {
        let t = Instant::now();
        let joins = db.for_joins();
        let problems = db::output::output_verdict(&*joins, m);
        timings.push(Timing {
            step: Step::Verify,
            duration: t.elapsed(),
        });
        if !problems.is_empty() {
            return Err(PipelineError::Verify(problems.clone()));
        }
    }
    let report = PipelineReport {
        module: m.header(db).name.clone(),
        target: opts.target.name.clone(),
        passes: opts.passes.iter().map(|p| p.name()).collect(),
        assignment: db::output::merged_assignment(&*db.for_joins(), m).clone(),
        relayout: db::output::merged_rewrites(&*db.for_joins(), m).clone(),
        stats: out.stats.clone(),
        timings: std::mem::take(timings),
    };
    let parts = OutputParts {
        header: out.header.clone(),
        entry_layout: Arc::clone(&out.entry_layout),
        computations: Arc::clone(&out.computations),
    };
    Ok(Output {
        text: Arc::clone(&out.text),
        report,
        parts: Some(parts),
    })
}

/// The assignments of module `m` in the call graph's order (see
/// [`db::Database::warm`]), level by level, the computations of a level
/// side by side (see [`db::WarmPlan::levels`]): on a module whose entry
/// calls 16,666 computations, their alone assignments were two thirds of
/// a first run's assignment step, one after the other. The independent
/// leaves (reduction regions and the like, which read no other
/// computation's assignment and whose assignments none reads) are
/// assigned on another thread meanwhile, as the stateless pass assigns
/// them: beside the entry, most of a module like the transformer. A
/// scoped thread, for the reason [`fan_out`] gives.
fn warm_beside(db: &Database, m: db::SourceModule) {
    let leaves = db.independent_leaves(m);
    let policy = Parallelism::current();
    std::thread::scope(|scope| {
        if !leaves.is_empty() {
            let handle = db.scratch();
            let leaves = &leaves;
            scope.spawn(move || {
                let _policy = policy.enter();
                for &c in leaves {
                    let _ = db::final_assignment(&handle, c);
                }
            });
        }
        let plan = db.warm_plan(m, &leaves);
        let (up, down) = plan.levels();
        for level in &up {
            each_computation(db, &largest_first(db, level), |db, c| {
                db.warm_up(c, &plan);
            });
        }
        // The entry's assignment, last above, reads every computation it
        // calls: the final assignments run on a handle of their own.
        let top = db.scratch();
        for level in &down {
            each_computation(&top, &largest_first(db, level), |db, c| db.warm_down(c));
        }
    });
}

/// Runs `step` for every computation of `comps`, on all cores, each
/// thread with its own handle on the database (salsa then computes each
/// query once, whichever thread asks first, and the others wait for it).
/// The threads take the computations in the order given, which should be
/// [`largest_first`]. The results stay in the database, to be read in
/// module order.
fn each_computation(
    db: &Database,
    comps: &[db::SourceComputation],
    step: impl Fn(&Database, db::SourceComputation) + Sync,
) {
    fan_out(db, comps.len(), |db, i| step(db, comps[i]));
}

/// Computations `comps`, the longest text first (ties in their order),
/// for [`each_computation`]. The entry is often most of a module
/// and comes last in its text: taken last, it ran alone on one thread
/// while the other had nothing left to take (on the transformer, a fresh
/// database's run took 1.7x a stateless run with two threads and 1.3x
/// with one). Taken first, the small computations fill the other thread
/// meanwhile.
fn largest_first(db: &Database, comps: &[db::SourceComputation]) -> Vec<db::SourceComputation> {
    let sizes: Vec<usize> = comps.iter().map(|c| c.text(db).len()).collect();
    by_size_descending(&sizes)
        .into_iter()
        .map(|i| comps[i])
        .collect()
}

/// The indices of `sizes`, largest first; equal sizes keep their order.
fn by_size_descending(sizes: &[usize]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    order
}

/// Runs `step` for every index below `n`, on as many threads as rayon's
/// pool has (the caller's thread one of them), each taking the next index
/// from a shared counter and running it with its own handle on the
/// database.
///
/// Scoped threads, not rayon's pool: the queries split large computations
/// on rayon's pool (parsing, relayout, verifying), and a pool thread that
/// waits for such a split inside a query runs other queued jobs meanwhile.
/// Were the fan-out's jobs on that pool, such a thread could start one of
/// them, with another database handle, in the middle of a query, which
/// salsa refuses with a panic ("cannot change database mid-query"); two
/// sessions running at once made that happen. A scoped thread waits for
/// rayon without taking its jobs, and runs only its own handle's queries.
fn fan_out(db: &Database, n: usize, step: impl Fn(&Database, usize) + Sync) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let policy = Parallelism::current();
    let threads = policy.split(Split::Computations, n).map_or(1, |grain| {
        rayon::current_num_threads().min(n.div_ceil(grain))
    });
    let next = AtomicUsize::new(0);
    let work = |db: &Database| {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            step(db, i);
        }
    };
    if threads == 1 {
        work(db);
        return;
    }
    std::thread::scope(|scope| {
        for _ in 1..threads {
            let handle = db.clone();
            let work = &work;
            // The thread decides its splits under the caller's policy;
            // what it hands to rayon runs on the global pool.
            scope.spawn(move || {
                let _policy = policy.enter();
                work(&handle)
            });
        }
        work(db);
    });
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
    let (((text, print_time), stats), checked) = rayon::join(
        || rayon::join(|| print(&module), || stats(&module, assignment.as_ref())),
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
        assignment: assignment.map(Arc::new),
        relayout: relayout.map(Arc::new),
        stats,
        timings: std::mem::take(timings),
    };
    Ok(Output {
        text: Arc::new(text),
        report,
        parts: None,
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
    fn computations_are_handed_out_largest_first_ties_in_module_order() {
        // An entry of 900 bytes after small regions: it is taken first.
        assert_eq!(by_size_descending(&[10, 30, 10, 900, 30]), [3, 1, 4, 0, 2]);
        assert!(by_size_descending(&[]).is_empty());
    }

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
        let r = out.report.relayout.as_ref().expect("relayout report");
        assert_eq!(r.count(RelayoutKind::ReshapeToBitcast), 1);
        assert_eq!(r.count(RelayoutKind::TransposeToBitcast), 1);
        assert_eq!(out.report.stats.bitcasts, 2);
        assert_eq!(out.report.stats.transposes, 1);
        assert!(
            out.text.contains("%r = f32[6,4]{1,0} bitcast(%x)"),
            "{}",
            out.text
        );
        assert!(out.report.timings.iter().any(|t| t.step == Step::Relayout));
    }

    #[test]
    fn layout_assignment_alone_leaves_movements() {
        let out = run(TEXT, "t.hlo", &opts(&[PassName::LayoutAssignment])).expect("run");
        assert!(out.report.relayout.is_none());
        assert_eq!(out.report.stats.bitcasts, 0);
        assert_eq!(out.report.stats.transposes, 2);
        assert!(
            out.text.contains("%r = f32[6,4]{1,0} reshape(%x)"),
            "{}",
            out.text
        );
    }

    #[test]
    fn relayout_alone_counts_its_copies() {
        let text = "HloModule alone\n\nENTRY %main (p: f32[4,8], q: f32[4,8]) -> f32[4,8] {\n  %p = f32[4,8]{0,1} parameter(0)\n  %q = f32[4,8]{1,0} parameter(1)\n  ROOT %a = f32[4,8]{1,0} add(%p, %q)\n}\n";
        let out = run(text, "t.hlo", &opts(&[PassName::Relayout])).expect("run");
        assert!(out.report.assignment.is_none());
        assert_eq!(out.report.stats.copies, 1);
        assert_eq!(out.report.stats.copy_bytes, 128);
        assert!(
            out.text.contains("%a = f32[4,8]{1,0} add(%p.copy, %q)"),
            "{}",
            out.text
        );
    }

    #[test]
    fn the_database_path_runs_relayout_too() {
        let o = opts(PassName::all());
        let fresh = run(TEXT, "t.hlo", &o).expect("run");
        let mut db = Database::default();
        let incremental = run_in(&mut db, TEXT, "t.hlo", &o).expect("run_in");
        assert_eq!(fresh.text, incremental.text);
        assert_eq!(fresh.report.relayout, incremental.report.relayout);
    }

    #[test]
    fn expand_relayouts_is_an_option() {
        let text = "HloModule e\n\nENTRY %main (p: f32[3,200]) -> f32[3,200] {\n  %p = f32[3,200]{1,0} parameter(0)\n  ROOT %x = f32[3,200]{1,0:T(8,128)} copy(%p)\n}\n";
        let mut o = opts(&[PassName::Relayout]);
        o.expand_relayouts = true;
        let out = run(text, "t.hlo", &o).expect("run");
        assert_eq!(out.report.stats.copies, 0);
        assert!(
            out.text.contains("pad(%p, %x.zero), padding=0_5x0_56"),
            "{}",
            out.text
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
