//! The engine: one run of the pipeline over the module loaded in a
//! database, redoing only what changed since the last run.
//!
//! The queries pull: each computes what it reads. But no query reads
//! another computation's assignment by asking for it (see the crate
//! docs): what crosses from one computation to another is written into
//! inputs by the engine. So the engine pushes: a run starts from the
//! computations whose text changed ([`Pending`]), and each phase hands on
//! what changed to the computations that read it, and no further. A
//! computation nothing reached is not looked at, not even by salsa, whose
//! check of a value would otherwise walk everything it read: a re-run
//! after a body edit that changes nothing its callers read touches that
//! computation alone. The joins over the module (the output, its reports
//! and verdicts) are kept outside salsa, per computation ([`Ledger`]), and
//! patched where a computation's part changed.
//!
//! The phases, and what each hands on:
//!
//! 1. *Input*: each computation's parse, its calls and names, its input
//!    check. A changed input signature makes the computations that name
//!    it check again; changed calls rebuild the call graph (an input,
//!    [`crate::SourceModule::calls`]), and then every computation is
//!    redone (salsa still finds most of it unchanged).
//! 2. *Up* (callees first, level by level): what each computation's
//!    callers read of it ([`crate::Exported`], and a branch's free
//!    signature). A changed export is written, and its readers (callers,
//!    and a loop condition of a body) are redone from here. A computation
//!    redone here also redoes the computations that weighed it under a
//!    boundary ([`crate::Db::consulted`]).
//! 3. *Down* (callers first): each final assignment, and the boundaries it
//!    decides for its callees ([`crate::boundaries_after`]). A changed
//!    boundary is written, and that callee redone from here.
//! 4. *Steps*: apply and relayout, then check and print. A changed output
//!    signature makes the computations that name it print again.
//!
//! Then the joins: the input verdict (after phase 1), the first failure of
//! a step, the output's problems, the reports and the output itself.
//!
//! A phase's work for a computation is marked done once the ledger holds
//! its results, whatever they are (a failed assignment is a result), so a
//! run that fails leaves nothing pending that a later run would need to
//! find again: the verdicts are read from the ledger.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hlo::{CallRole, CompId, ComputationLayout, VerifyError};
use layout_assignment::TiledEntryLayout;
use salsa::Setter;

use crate::InputFacts;
use crate::calls::{Calls, Rank};
use crate::output::{Assembled, InputRefusal, LazyReports, OutputError, Part};
use crate::pipeline::{self, InputCheck, ModuleStats, Printed, Stub};
use crate::pool::{Work, each};
use crate::{
    AssignError, Database, Exported, SignatureResult, SourceComputation, SourceModule, absolute,
};

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

/// How long a step took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The step.
    pub step: Step,
    /// Wall time.
    pub duration: Duration,
}

/// What a run must redo of one computation: a set of phases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Redo(u8);

impl Redo {
    const NOTHING: Redo = Redo(0);
    /// Parse, calls and names, input check.
    const INPUT: Redo = Redo(1);
    /// What callers read of its assignment.
    const UP: Redo = Redo(2);
    /// Its final assignment, and the boundaries it decides.
    const DOWN: Redo = Redo(4);
    /// Apply and relayout.
    const STEPS: Redo = Redo(8);
    /// Check and print.
    const PRINT: Redo = Redo(16);
    /// Every phase after the input's.
    const FROM_UP: Redo = Redo(2 | 4 | 8 | 16);
    /// Every phase.
    const ALL: Redo = Redo(31);

    fn has(self, other: Redo) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Redo {
    type Output = Redo;
    fn bitor(self, o: Redo) -> Redo {
        Redo(self.0 | o.0)
    }
}

/// What the next run has to redo: per computation (by index), the phases
/// to redo, or everything when the module changed as a whole.
#[derive(Clone, Debug, Default)]
pub struct Pending {
    /// Start over: a module-wide input changed, or nothing ran yet.
    all: bool,
    redo: Vec<Redo>,
}

impl Pending {
    /// Everything is to be redone.
    pub(crate) fn everything(&mut self) {
        self.all = true;
    }

    /// Computation `i`'s text changed.
    pub(crate) fn edited(&mut self, i: usize) {
        match self.redo.get_mut(i) {
            Some(r) => *r = *r | Redo::ALL,
            None => self.all = true,
        }
    }

    /// The module has `n` computations (a different number starts over).
    pub(crate) fn resize(&mut self, n: usize) {
        if self.redo.len() != n {
            self.all = true;
            self.redo = vec![Redo::NOTHING; n];
        }
    }

    /// How many computations have something to redo.
    pub(crate) fn count(&self) -> usize {
        if self.all {
            self.redo.len()
        } else {
            self.redo.iter().filter(|r| **r != Redo::NOTHING).count()
        }
    }

    fn mark(&mut self, i: usize, what: Redo) {
        if let Some(r) = self.redo.get_mut(i) {
            *r = *r | what;
        }
    }

    fn has(&self, i: usize, what: Redo) -> bool {
        self.redo.get(i).is_some_and(|r| r.has(what))
    }

    /// The computations with any of `what` to redo, in order.
    fn having(&self, what: Redo) -> Vec<usize> {
        (0..self.redo.len())
            .filter(|&i| self.has(i, what))
            .collect()
    }

    /// Marks `what` done for computation `i`.
    fn done(&mut self, i: usize, what: Redo) {
        if let Some(r) = self.redo.get_mut(i) {
            *r = Redo(r.0 & !what.0);
        }
    }
}

/// What the last run made of one computation: what the joins read, and
/// what later runs compare against to find what changed.
#[derive(Clone, Debug, Default)]
struct Kept {
    name: Arc<str>,
    /// Its calls, what it names, its signature as its callers' input
    /// checks read it, and its parse error.
    facts: Arc<InputFacts>,
    input: Arc<InputCheck>,
    /// Its signature as its callers' printing reads it.
    out_stub: Stub,
    printed: Option<Arc<Printed>>,
}

/// What the last run made of the module, per computation and as a whole,
/// kept outside salsa so that a run reads only what changed (see the
/// module docs). Each module-wide part is rebuilt when a flag says a part
/// it is made of changed.
#[derive(Debug, Default)]
pub struct Ledger {
    comps: Vec<Kept>,
    /// Per computation: the computations that name it (whose checks and
    /// printing read its signatures).
    namers: Vec<Vec<u32>>,
    /// The call graph must be rebuilt from every computation's calls.
    calls_stale: bool,
    /// The input's module-wide problems (names, the entry layout).
    input_module: Vec<VerifyError>,
    input_module_stale: bool,
    parse_errors: BTreeSet<u32>,
    input_structural: BTreeSet<u32>,
    input_bitcasts: BTreeSet<u32>,
    /// The output header, entry layout and the entry leaves it tiled.
    header: Option<(Arc<String>, Arc<ComputationLayout>, Vec<TiledEntryLayout>)>,
    failures: BTreeSet<u32>,
    output_module: Vec<VerifyError>,
    output_module_stale: bool,
    output_structural: BTreeSet<u32>,
    output_layouts: BTreeSet<u32>,
    stats: ModuleStats,
    /// The reports of the outputs made since no part's reports changed.
    reports: Option<Arc<LazyReports>>,
    /// The last output, while no part of it changed.
    output: Option<Arc<Assembled>>,
}

impl Ledger {
    /// The instructions of the computations the last run printed.
    pub(crate) fn instructions(&self) -> usize {
        self.stats.instructions
    }
}

/// A successful run: the output (with its reports, see
/// [`Assembled::reports`]) and the steps' timings.
#[derive(Clone, Debug)]
pub struct Run {
    /// The output module, from its parts.
    pub output: Arc<Assembled>,
    /// How long each step took.
    pub timings: Vec<Timing>,
}

/// Why a run gave no output.
#[derive(Clone, Debug)]
pub enum RunError {
    /// No module is loaded.
    NoModule,
    /// The input is refused (see [`InputRefusal`]).
    Input(InputRefusal),
    /// A step failed on a computation (see [`OutputError`]).
    Output(OutputError),
    /// The output's problems: a bug in Tessera.
    Verify(Vec<VerifyError>),
}

impl Database {
    /// Parses and checks what changed of the loaded module (the run's
    /// first phase), and gives the input's verdict: what the service does
    /// to a module before it holds it. The run that follows finds this
    /// done.
    pub fn check_input(&mut self) -> Result<(), RunError> {
        let m = self.module.ok_or(RunError::NoModule)?;
        self.with_engine(m, |e| e.input(&mut Vec::new()))
    }

    /// Runs the pipeline on the loaded module, redoing what changed since
    /// the last run (see the module docs).
    pub fn run(&mut self) -> Result<Run, RunError> {
        let m = self.module.ok_or(RunError::NoModule)?;
        self.with_engine(m, |e| e.run())
    }

    /// Computes every assignment (the phases up to the final assignments),
    /// whatever the input's verdict: for reading assignments directly.
    pub fn assign(&mut self) {
        self.assign_widened();
        narrow_lru(self);
    }

    /// [`Database::assign`], leaving the LRU-kept queries widened to the
    /// whole module, for a caller that reads every computation's parse and
    /// assignment next (then [`narrow_lru`]).
    pub(crate) fn assign_widened(&mut self) {
        if let Some(m) = self.module {
            self.with_engine(m, |e| {
                widen_lru(e.db, e.ledger.comps.len());
                let _ = e.input(&mut Vec::new());
                e.assignments();
            });
        }
    }

    /// Runs `f` on the engine of module `m`, with the pending work and
    /// ledger taken out of the database meanwhile (and, should `f` panic,
    /// everything left to redo).
    fn with_engine<T>(&mut self, m: SourceModule, f: impl FnOnce(&mut Engine<'_>) -> T) -> T {
        let mut pending = std::mem::take(&mut self.pending);
        pending.resize(m.computations(self).len());
        self.pending.all = true;
        let ledger = std::mem::take(&mut self.ledger);
        let mut e = Engine {
            db: self,
            m,
            pending,
            ledger,
        };
        e.start();
        let out = f(&mut e);
        let Engine {
            db,
            pending,
            ledger,
            ..
        } = e;
        db.pending = pending;
        db.ledger = ledger;
        out
    }
}

/// The parsed module's LRU-kept queries hold every computation while a
/// run writes inputs (each write is a new revision, at which salsa evicts
/// beyond the LRU's capacity); [`narrow_lru`] puts them back to one.
/// A database for one run keeps them all with no LRU at all (capacity
/// zero), which then tracks nothing.
fn widen_lru(db: &mut Database, n: usize) {
    let n = if db.one_run { 0 } else { n.max(1) };
    crate::keep_parses(db, n);
    crate::keep_assignments(db, n);
    pipeline::keep_transformed(db, n);
}

/// Puts the LRU-kept queries back to keeping one value each (see
/// [`crate::Database::release_intermediates`]).
pub(crate) fn narrow_lru(db: &mut Database) {
    crate::keep_parses(db, 1);
    crate::keep_assignments(db, 1);
    pipeline::keep_transformed(db, 1);
}

/// One run's state: the database, the module, and the pending work and
/// ledger it updates.
struct Engine<'a> {
    db: &'a mut Database,
    m: SourceModule,
    pending: Pending,
    ledger: Ledger,
}

impl Engine<'_> {
    /// Turns a pending start-over into every phase of every computation,
    /// with a ledger made anew.
    fn start(&mut self) {
        let n = self.m.computations(self.db).len();
        if !self.pending.all && self.ledger.comps.len() == n {
            return;
        }
        self.pending.all = false;
        self.pending.redo = vec![Redo::ALL; n];
        let comps = self.m.computations(self.db).clone();
        self.ledger = Ledger {
            comps: comps
                .iter()
                .map(|c| Kept {
                    name: Arc::from(c.name(self.db).as_str()),
                    ..Kept::default()
                })
                .collect(),
            namers: vec![Vec::new(); n],
            calls_stale: true,
            input_module_stale: true,
            output_module_stale: true,
            ..Ledger::default()
        };
    }

    fn comps(&self) -> Vec<SourceComputation> {
        self.m.computations(self.db).clone()
    }

    fn calls(&self) -> Arc<Calls> {
        Arc::clone(self.m.calls(self.db))
    }

    /// The whole run: the phases, then the joins.
    fn run(&mut self) -> Result<Run, RunError> {
        let mut timings = Vec::new();
        // With nothing to redo, the joins read the ledger alone.
        if self.pending.count() > 0 {
            widen_lru(self.db, self.ledger.comps.len());
            self.input(&mut timings)?;
            let t = Instant::now();
            self.assignments();
            timings.push(timing(Step::LayoutAssignment, t));
            self.steps(&mut timings);
        } else {
            self.input_verdict().map_err(RunError::Input)?;
        }
        self.join(&mut timings)
    }

    /// Phase 1: parse and check what changed, and the input's verdict.
    fn input(&mut self, timings: &mut Vec<Timing>) -> Result<(), RunError> {
        let t = Instant::now();
        let comps = self.comps();
        let todo = self.pending.having(Redo::INPUT);
        // Each phase's results come back from the threads that made them,
        // rather than being looked up again here, one computation at a time.
        let facts = each(self.db, work(self.db, &comps, &todo), |db, c| {
            Arc::clone(crate::input_facts(db, c))
        });
        timings.push(timing(Step::Parse, t));
        let t = Instant::now();
        let mut check = Marked::new(comps.len(), &todo);
        for (&i, facts) in todo.iter().zip(facts) {
            self.take_facts(i, facts, &mut check);
        }
        let check = check.list;
        let checks = each(self.db, work(self.db, &comps, &check), |db, c| {
            Arc::clone(pipeline::input_check(db, c))
        });
        let entry = self.m.entry(self.db) as usize;
        for (&i, new) in check.iter().zip(checks) {
            if self.ledger.comps[i].input.names != new.names || i == entry {
                self.ledger.input_module_stale = true;
            }
            set_member(
                &mut self.ledger.input_structural,
                i,
                !new.structural.is_empty(),
            );
            set_member(&mut self.ledger.input_bitcasts, i, !new.bitcasts.is_empty());
            self.ledger.comps[i].input = new;
            self.pending.done(i, Redo::INPUT);
        }
        if self.ledger.input_module_stale {
            self.ledger.input_module = self.input_module_problems();
            self.ledger.input_module_stale = false;
        }
        let verdict = self.input_verdict();
        timings.push(timing(Step::VerifyInput, t));
        verdict.map_err(RunError::Input)
    }

    /// Takes computation `i`'s input facts into the ledger: its calls (a
    /// change makes the call graph stale), what it names, its parse error,
    /// and its input signature, whose change adds the computations that
    /// name it to those to `check`.
    fn take_facts(&mut self, i: usize, facts: Arc<InputFacts>, check: &mut Marked) {
        let kept = &self.ledger.comps[i].facts;
        if kept.roles != facts.roles {
            self.ledger.calls_stale = true;
        }
        let (named_changed, stub_changed) = (kept.named != facts.named, kept.stub != facts.stub);
        if named_changed {
            for &d in &kept.named {
                if let Some(list) = self.ledger.namers.get_mut(d.index()) {
                    list.retain(|&n| n as usize != i);
                }
            }
            for &d in &facts.named {
                if let Some(list) = self.ledger.namers.get_mut(d.index()) {
                    list.push(i as u32);
                }
            }
        }
        set_member(
            &mut self.ledger.parse_errors,
            i,
            facts.parse_error.is_some(),
        );
        self.ledger.comps[i].facts = facts;
        if stub_changed {
            for &n in &self.ledger.namers[i] {
                if check.add(n as usize) {
                    self.pending.mark(n as usize, Redo::INPUT);
                }
            }
        }
    }

    /// The input's module-wide problems: instruction names unique over the
    /// module, then the entry computation against the entry layout.
    fn input_module_problems(&self) -> Vec<VerifyError> {
        let kept = &self.ledger.comps;
        let mut problems =
            pipeline::name_problems(kept.iter().map(|k| (&*k.name, &*k.input.names)));
        let entry = self.m.entry(self.db);
        let layout = crate::entry_layout(self.db, self.m);
        problems.extend(pipeline::entry_problems(
            kept.get(entry as usize).map(|k| &k.facts.stub),
            layout,
            entry,
            kept.len(),
        ));
        problems
    }

    /// The input check of the module: parse errors first, in computation
    /// order, at their place in the file; then the module-wide and
    /// per-computation structural problems; then, once the module is
    /// otherwise well formed, the bitcasts that move bytes.
    fn input_verdict(&self) -> Result<(), InputRefusal> {
        let comps = self.m.computations(self.db);
        if let Some(&i) = self.ledger.parse_errors.first()
            && let Some(e) = &self.ledger.comps[i as usize].facts.parse_error
        {
            let c = comps[i as usize];
            return Err(InputRefusal::Parse(Box::new(absolute(
                e, c, self.db, self.m,
            ))));
        }
        let mut problems = self.ledger.input_module.clone();
        for &i in &self.ledger.input_structural {
            problems.extend(
                self.ledger.comps[i as usize]
                    .input
                    .structural
                    .iter()
                    .cloned(),
            );
        }
        if problems.is_empty() {
            for &i in &self.ledger.input_bitcasts {
                problems.extend(self.ledger.comps[i as usize].input.bitcasts.iter().cloned());
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InputRefusal::Problems(problems))
        }
    }

    /// Phases 2 and 3: the call graph, then what callers read of each
    /// computation (callees first), then the final assignments (callers
    /// first).
    fn assignments(&mut self) {
        self.rebuild_calls();
        if !self.m.steps(self.db).assign {
            // Nothing reads an assignment: the phases' work is done.
            for i in 0..self.ledger.comps.len() {
                self.pending.done(i, Redo::UP | Redo::DOWN);
            }
            return;
        }
        self.up();
        self.down();
    }

    /// Rebuilds the call graph from every computation's calls when one
    /// changed, and writes it when it differs; then every computation is
    /// redone (which computations' boundaries their callers decide, and
    /// the order of the phases, follow the graph).
    fn rebuild_calls(&mut self) {
        if !self.ledger.calls_stale {
            return;
        }
        let kept = &self.ledger.comps;
        let calls = Calls::new(
            kept.len(),
            kept.iter()
                .enumerate()
                .map(|(i, k)| (CompId(i as u32), k.facts.roles.as_slice())),
        );
        if **self.m.calls(self.db) != calls {
            self.m.set_calls(self.db).to(Arc::new(calls));
            for i in 0..kept.len() {
                self.pending.mark(i, Redo::FROM_UP);
            }
        }
        self.ledger.calls_stale = false;
    }

    /// Phase 2 (see the module docs), level by level callees first.
    fn up(&mut self) {
        let calls = self.calls();
        let comps = self.comps();
        let rank = up_ranks(&calls);
        let mut queue: BTreeSet<(Rank, u32)> = self
            .pending
            .having(Redo::UP)
            .into_iter()
            .map(|i| (rank(i), i as u32))
            .collect();
        while let Some(mut members) = lowest_level(&mut queue) {
            self.branch_exports(&calls, &comps, &mut members, &mut queue, &rank);
            let shared = Arc::clone(&calls);
            let own = each(self.db, work(self.db, &comps, &members), move |db, c| {
                up_own(db, &shared, c)
            });
            for (&i, own) in members.iter().zip(own) {
                let c = comps[i];
                if let Some(free) = own.free
                    && *c.free_exported(self.db) != Some(free.clone())
                {
                    c.set_free_exported(self.db).to(Some(free));
                    self.readers_redo(&calls, i, &mut queue, &rank);
                }
                if let Some(exported) = own.exported
                    && *c.exported(self.db) != exported
                {
                    c.set_exported(self.db).to(exported);
                    self.readers_redo(&calls, i, &mut queue, &rank);
                }
                // What weighed `c` under a boundary read values of it that
                // are not its exports: redone whether they changed or not.
                for p in self.db.consulted.readers(c) {
                    let j = p.index(self.db) as usize;
                    if comps.get(j) == Some(&p) {
                        self.redo_from_up(j, &mut queue, &rank);
                    }
                }
                self.pending.done(i, Redo::UP);
            }
        }
    }

    /// The exports of the branches `members` call (their final
    /// assignments, which read their sibling branches' free signatures),
    /// written before the members' own assignments read them. A changed
    /// one redoes its callers, those of this level among them.
    fn branch_exports(
        &mut self,
        calls: &Calls,
        comps: &[SourceComputation],
        members: &mut Vec<usize>,
        queue: &mut BTreeSet<(Rank, u32)>,
        rank: &impl Fn(usize) -> Rank,
    ) {
        let level = members.first().map_or(0, |&i| rank(i).level);
        let mut listed = Marked::new(comps.len(), members);
        let mut done = Marked::new(comps.len(), &[]);
        let mut scanned = 0;
        while scanned < listed.list.len() {
            let mut branches: Vec<usize> = Vec::new();
            for &i in &listed.list[scanned..] {
                for &b in calls.graph.callees.get(i).map_or(&[][..], Vec::as_slice) {
                    if calls.graph.is_branch(b) && done.add(b.index()) {
                        branches.push(b.index());
                    }
                }
            }
            scanned = listed.list.len();
            let exports = each(self.db, work(self.db, comps, &branches), |db, c| {
                crate::exports_of(db, c).clone()
            });
            for (&b, exported) in branches.iter().zip(exports) {
                let c = comps[b];
                if *c.exported(self.db) == exported {
                    continue;
                }
                c.set_exported(self.db).to(exported);
                // Its final assignment is the one just made. (Whatever
                // changed it marked it already; this does not rely on
                // that.)
                self.pending.mark(b, Redo::DOWN | Redo::STEPS | Redo::PRINT);
                // A caller of this level not listed yet joins it (its own
                // branches are then made too); one of another level is
                // redone when its level comes.
                for &p in calls.callers(CompId(b as u32)) {
                    let p = p.index();
                    if rank(p).level != level {
                        self.redo_from_up(p, queue, rank);
                    } else if listed.add(p) {
                        self.pending.mark(p, Redo::FROM_UP);
                    }
                }
            }
        }
        *members = listed.list;
    }

    /// Marks the readers of computation `i`'s exports to be redone from
    /// phase 2: its callers, the loop conditions whose body it is, and,
    /// for a branch, its sibling branches (whose final assignments read
    /// its free signature, and which their callers' phase 2 makes, so
    /// they would not redo their own later phases otherwise).
    fn readers_redo(
        &mut self,
        calls: &Calls,
        i: usize,
        queue: &mut BTreeSet<(Rank, u32)>,
        rank: &impl Fn(usize) -> Rank,
    ) {
        let id = CompId(i as u32);
        let siblings = calls
            .graph
            .roles
            .get(i)
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                CallRole::Branch { branches, .. } => Some(branches.as_slice()),
                _ => None,
            })
            .flatten()
            .filter(|&&b| b != id);
        let readers: Vec<usize> = calls
            .callers(id)
            .iter()
            .chain(calls.conditions(id))
            .chain(siblings)
            .map(|c| c.index())
            .collect();
        for r in readers {
            self.redo_from_up(r, queue, rank);
        }
    }

    fn redo_from_up(
        &mut self,
        i: usize,
        queue: &mut BTreeSet<(Rank, u32)>,
        rank: &impl Fn(usize) -> Rank,
    ) {
        self.pending.mark(i, Redo::FROM_UP);
        queue.insert((rank(i), i as u32));
    }

    /// Phase 3 (see the module docs), level by level callers first.
    fn down(&mut self) {
        let calls = self.calls();
        let comps = self.comps();
        let mut queue: BTreeSet<(Rank, u32)> = self
            .pending
            .having(Redo::DOWN)
            .into_iter()
            .map(|i| (calls.down_rank(CompId(i as u32)), i as u32))
            .collect();
        while let Some(members) = lowest_level(&mut queue) {
            let decided = each(self.db, work(self.db, &comps, &members), |db, c| {
                // A bound computation's final assignment is made here, in
                // the assignment phase (any other's is its alone one, made
                // in phase 2). Its signature rather than the assignment:
                // salsa finds it unchanged without the assignment, which a
                // session does not keep (see `crate::alone_assignment`).
                if crate::is_bound(db, c) {
                    let _ = crate::final_signature(db, c);
                }
                crate::boundaries_after(db, c)
            });
            for (&i, decided) in members.iter().zip(decided) {
                for (d, chosen) in decided {
                    if *d.boundary(self.db) == chosen {
                        continue;
                    }
                    d.set_boundary(self.db).to(chosen);
                    let j = d.index(self.db) as usize;
                    self.pending.mark(j, Redo::DOWN | Redo::STEPS | Redo::PRINT);
                    queue.insert((calls.down_rank(CompId(j as u32)), j as u32));
                }
                self.pending.done(i, Redo::DOWN);
            }
        }
    }

    /// Phase 4: apply and relayout, then check and print, what changed.
    fn steps(&mut self, timings: &mut Vec<Timing>) {
        let t = Instant::now();
        let comps = self.comps();
        let todo = self.pending.having(Redo::STEPS);
        let stubs = each(self.db, work(self.db, &comps, &todo), |db, c| {
            pipeline::output_stub(db, c).clone()
        });
        let entry = self.m.entry(self.db) as usize;
        for (&i, stub) in todo.iter().zip(stubs) {
            let kept = &mut self.ledger.comps[i];
            if kept.out_stub != stub {
                kept.out_stub = stub;
                for &n in &self.ledger.namers[i] {
                    self.pending.mark(n as usize, Redo::PRINT);
                }
                if i == entry {
                    self.ledger.output_module_stale = true;
                }
            }
            self.pending.done(i, Redo::STEPS);
        }
        if self.ledger.header.is_none() || todo.contains(&entry) {
            let (layout, tiled) = pipeline::output_entry_layout(self.db, self.m);
            let header = Arc::new(pipeline::printed_header(self.db, self.m).clone());
            let new = (header, Arc::clone(layout), tiled.clone());
            if self.ledger.header.as_ref() != Some(&new) {
                self.ledger.header = Some(new);
                self.ledger.output = None;
                self.ledger.reports = None;
                self.ledger.output_module_stale = true;
            }
        }
        timings.push(timing(Step::ApplyRelayout, t));
        let t = Instant::now();
        let todo = self.pending.having(Redo::PRINT);
        let printed = each(self.db, work(self.db, &comps, &todo), |db, c| {
            Arc::clone(pipeline::printed(db, c))
        });
        for (&i, printed) in todo.iter().zip(printed) {
            self.take_printed(i, printed);
            self.pending.done(i, Redo::PRINT);
        }
        timings.push(timing(Step::CheckPrint, t));
    }

    /// Takes computation `i`'s printed part into the ledger: its counts,
    /// failure and problems.
    fn take_printed(&mut self, i: usize, printed: Arc<Printed>) {
        let l = &mut self.ledger;
        let kept = &mut l.comps[i];
        if let Some(old) = &kept.printed {
            if Arc::ptr_eq(old, &printed) || **old == *printed {
                kept.printed = Some(printed);
                return;
            }
            if old.reports != printed.reports {
                l.reports = None;
            }
            l.stats.remove(&old.stats);
            if old.check.names != printed.check.names {
                l.output_module_stale = true;
            }
        } else {
            l.output_module_stale = true;
            l.reports = None;
        }
        l.stats.add(&printed.stats);
        set_member(&mut l.failures, i, printed.failure.is_some());
        set_member(
            &mut l.output_structural,
            i,
            !printed.check.structural.is_empty(),
        );
        set_member(&mut l.output_layouts, i, !printed.check.layouts.is_empty());
        kept.printed = Some(printed);
        l.output = None;
    }

    /// The joins: the first failure, the output's problems, the reports,
    /// and the output from its parts.
    fn join(&mut self, timings: &mut Vec<Timing>) -> Result<Run, RunError> {
        let t = Instant::now();
        if let Some(e) = self.first_failure() {
            return Err(RunError::Output(e));
        }
        let steps = self.m.steps(self.db);
        let output = self.output();
        timings.push(timing(Step::Print, t));
        if steps.verify {
            let t = Instant::now();
            let problems = self.output_verdict();
            timings.push(timing(Step::Verify, t));
            if !problems.is_empty() {
                return Err(RunError::Verify(problems));
            }
        }
        Ok(Run {
            output,
            timings: std::mem::take(timings),
        })
    }

    /// The first failure of the earliest step, in computation order:
    /// assignments come before applying them, and applying before
    /// relayout (a parse error placed in the file).
    fn first_failure(&self) -> Option<OutputError> {
        let comps = self.m.computations(self.db);
        let first = self
            .ledger
            .failures
            .iter()
            .filter_map(|&i| {
                let printed = self.ledger.comps[i as usize].printed.as_ref()?;
                Some((i as usize, printed.failure.as_deref()?))
            })
            .min_by_key(|(_, f)| f.step())?;
        Some(match first {
            (i, OutputError::Assign(AssignError::Parse(p))) => OutputError::Assign(
                AssignError::Parse(Box::new(absolute(p, comps[i], self.db, self.m))),
            ),
            (_, other) => other.clone(),
        })
    }

    /// The output's problems: the structural ones (module-wide, then each
    /// computation's) or, when there are none, the layouts' (each
    /// computation's).
    fn output_verdict(&mut self) -> Vec<VerifyError> {
        if self.ledger.output_module_stale {
            self.ledger.output_module = self.output_module_problems();
            self.ledger.output_module_stale = false;
        }
        let printed = |i: &u32| self.ledger.comps[*i as usize].printed.as_ref();
        let mut structural = self.ledger.output_module.clone();
        for p in self.ledger.output_structural.iter().filter_map(printed) {
            structural.extend(p.check.structural.iter().cloned());
        }
        if !structural.is_empty() {
            return structural;
        }
        let mut layouts = Vec::new();
        for p in self.ledger.output_layouts.iter().filter_map(printed) {
            layouts.extend(p.check.layouts.iter().cloned());
        }
        layouts
    }

    /// The output's module-wide problems: instruction names unique over
    /// the module, and the entry computation against the output's entry
    /// layout.
    fn output_module_problems(&self) -> Vec<VerifyError> {
        let kept = &self.ledger.comps;
        let empty = pipeline::Names::default();
        let mut problems = pipeline::name_problems(kept.iter().map(|k| {
            let names = k.printed.as_ref().map_or(&empty, |p| &*p.check.names);
            (&*k.name, names)
        }));
        let entry = self.m.entry(self.db) as usize;
        if let (Some(k), Some((_, layout, _))) = (kept.get(entry), &self.ledger.header)
            && let Some(stub) = &k.out_stub.0
        {
            problems.extend(hlo::verify_entry_layout(
                hlo::Callee::Signature(stub),
                layout,
            ));
        }
        problems
    }

    /// The output: the last one while no part of it changed, else one made
    /// of the current parts.
    fn output(&mut self) -> Arc<Assembled> {
        if let Some(out) = &self.ledger.output {
            return Arc::clone(out);
        }
        // The header is made by phase 4, before any join reads it.
        let (header, layout) = match &self.ledger.header {
            Some((header, layout, _)) => (Arc::clone(header), Arc::clone(layout)),
            None => (
                Arc::default(),
                Arc::new(ComputationLayout {
                    parameters: Arc::default(),
                    result: shape::Shape::Tuple(Vec::new()).into(),
                }),
            ),
        };
        let parts: Arc<[Part]> = self
            .ledger
            .comps
            .iter()
            .map(|k| Part {
                name: Arc::clone(&k.name),
                printed: k.printed.clone().unwrap_or_default(),
            })
            .collect();
        let steps = self.m.steps(self.db);
        let tiled = self
            .ledger
            .header
            .as_ref()
            .map(|(_, _, tiled)| tiled.clone());
        let reports = self
            .ledger
            .reports
            .get_or_insert_with(|| Arc::new(LazyReports::new(steps.assign, steps.relayout, tiled)));
        let out = Arc::new(Assembled::new(
            header,
            layout,
            parts,
            self.ledger.stats.clone(),
            Arc::clone(reports),
        ));
        self.ledger.output = Some(Arc::clone(&out));
        out
    }
}

/// How long the step that started at `t` took.
fn timing(step: Step, t: Instant) -> Timing {
    Timing {
        step,
        duration: t.elapsed(),
    }
}

/// A list of computations with a mark for each, so that adding one is
/// constant time however long the list (a full run lists them all).
struct Marked {
    list: Vec<usize>,
    marked: Vec<bool>,
}

impl Marked {
    /// The list `first`, of computations below `n`.
    fn new(n: usize, first: &[usize]) -> Marked {
        let mut marked = vec![false; n];
        for &i in first {
            if let Some(m) = marked.get_mut(i) {
                *m = true;
            }
        }
        Marked {
            list: first.to_vec(),
            marked,
        }
    }

    /// Adds `i` unless it is listed; whether it was added.
    fn add(&mut self, i: usize) -> bool {
        match self.marked.get_mut(i) {
            Some(m) if !*m => {
                *m = true;
                self.list.push(i);
                true
            }
            _ => false,
        }
    }
}

/// Puts `i` in `set` or takes it out.
fn set_member(set: &mut BTreeSet<u32>, i: usize, member: bool) {
    if member {
        set.insert(i as u32);
    } else {
        set.remove(&(i as u32));
    }
}

/// Takes the computations of the lowest level out of `queue`, in rank
/// order (`None` when it is empty).
fn lowest_level(queue: &mut BTreeSet<(Rank, u32)>) -> Option<Vec<usize>> {
    let &(first, _) = queue.first()?;
    let mut members = Vec::new();
    while let Some(&(r, i)) = queue.first()
        && r.level == first.level
    {
        queue.pop_first();
        members.push(i as usize);
    }
    Some(members)
}

/// Where each computation is visited in phase 2: its bottom-up rank, but
/// for a computation that calls nothing and that no other computation's
/// assignment reads (a reduction's body and the like), which goes with the
/// last level. It can go anywhere, and the last level is often the entry
/// alone, most of a module like a transformer: they are assigned beside
/// it.
fn up_ranks(calls: &Calls) -> impl Fn(usize) -> Rank + '_ {
    let top = calls.schedule.bottom_up_levels.len().saturating_sub(1) as u32;
    move |i| {
        let id = CompId(i as u32);
        let rank = calls.up_rank(id);
        let leaf = calls.graph.callees.get(i).is_none_or(Vec::is_empty);
        if leaf && calls.unread(id) && !calls.graph.is_condition(id) {
            Rank { level: top, ..rank }
        } else {
            rank
        }
    }
}

/// What phase 2 computes of one computation of its own.
struct UpOwn {
    /// A branch's free signature.
    free: Option<SignatureResult>,
    /// What its callers read.
    exported: Option<Exported>,
}

/// Phase 2's work on `c` itself: a branch's free signature (its final one
/// is made by its callers, see `branch_exports`), or the exports of a
/// computation others read, or else the assignment alone of one nothing
/// reads (a loop condition's waits for its body's, in phase 3).
fn up_own(db: &Database, calls: &Calls, c: SourceComputation) -> UpOwn {
    let id = c.id(db);
    if calls.graph.is_branch(id) {
        return UpOwn {
            free: Some(crate::free_signature(db, c)),
            exported: None,
        };
    }
    if !calls.unread(id) {
        return UpOwn {
            free: None,
            exported: Some(crate::exports_of(db, c).clone()),
        };
    }
    if !calls.graph.is_condition(id) {
        let _ = crate::alone_error(db, c);
    }
    UpOwn {
        free: None,
        exported: None,
    }
}

/// The computations `todo` (indices into `comps`) as a batch's work.
fn work(db: &Database, comps: &[SourceComputation], todo: &[usize]) -> Vec<Work> {
    todo.iter()
        .map(|&i| Work {
            comp: comps[i],
            size: comps[i].text(db).len(),
        })
        .collect()
}
