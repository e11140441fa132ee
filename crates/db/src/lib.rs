//! The incremental database: a module (its header and the source of each
//! computation) and a target as salsa inputs, and per-computation tracked
//! queries: the parsed graph, its calls, its constraints (the layouts
//! fixed at its boundary and its callees' signatures), its assignment and
//! its signature.
//!
//! Granularity is one computation. Re-sending a module with one computation
//! changed re-parses and re-assigns that computation; its callers and the
//! computations around it re-run only when its signature (parameter and
//! result layouts) changed, because every query returns plain comparable
//! data and salsa backdates equal results. A computation's constraints
//! re-run when a signature, the call graph or the entry layout they read
//! changed; its assignment re-runs only when the constraints differ (or its
//! own text or the target changed).
//!
//! The one pipeline option that changes a computation's assignment is the
//! solver (heuristic or exact, with its time limit): a field of the module
//! input, so changing it re-runs every assignment. The pass list and
//! relayout's `expand_relayouts` are another field (`pipeline::Steps`),
//! read by the steps after assignment ([`pipeline`]); `verify` only decides
//! whether a run reads the output's problems ([`output::output_verdict`]).
//! The tiling options (`keep_untiled_entry`, `combine_dimensions`) are
//! fields of the target, which is an input.
//!
//! The steps after assignment are per-computation queries too (see
//! [`pipeline`]), and the joins over the module are queries of their own
//! (see [`output`]): the output text, its report and its problems are
//! assembled from the computations' parts.
//!
//! Architecture invariant: salsa values never hold a petgraph graph directly.
//! A parsed computation sits behind an `Arc` and compares by a fingerprint
//! of the text and names it was parsed from, which determine it.

pub mod output;
pub mod pipeline;

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use hlo::{
    CallGraph, CallRole, CompId, Computation, ComputationLayout, IoAlias, Module, ModuleFacts,
    ParseError,
};
use layout_assignment::{
    BoundSite, CallQueries, ComputationAssignment, Context, Moved, PassError, Phase, Signature,
    SolverOptions, WEIGH_LEVELS,
};
use rustc_hash::{FxHashMap, FxHasher};
use salsa::Setter;
use target::TargetSpec;

/// The header of a module as the outline reads it: everything but the
/// computations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleHeader {
    /// The module name.
    pub name: String,
    /// `is_scheduled=true`.
    pub is_scheduled: bool,
    /// `entry_computation_layout`, when given.
    pub entry_computation_layout: Option<ComputationLayout>,
    /// `input_output_alias`.
    pub input_output_alias: Vec<IoAlias>,
    /// Other header attributes, verbatim.
    pub header_attrs: Vec<hlo::HeaderAttr>,
    /// The debug tables.
    pub debug_tables: hlo::DebugTables,
}

/// A module: its header, its computations, the target and the file name.
#[salsa::input(debug)]
pub struct SourceModule {
    /// The name errors cite.
    #[returns(ref)]
    pub file_name: String,
    /// The header and debug tables.
    #[returns(ref)]
    pub header: ModuleHeader,
    /// The computations, in text order.
    #[returns(ref)]
    pub computations: Vec<SourceComputation>,
    /// The index of the entry computation.
    #[returns(copy)]
    pub entry: u32,
    /// The target.
    #[returns(ref)]
    pub target: Arc<TargetSpec>,
    /// The solver.
    #[returns(copy)]
    pub solver: SolverOptions,
    /// The steps after assignment.
    #[returns(copy)]
    pub steps: pipeline::Steps,
}

/// One computation's text.
#[salsa::input(debug)]
pub struct SourceComputation {
    /// Its index in the module (its `CompId`).
    #[returns(copy)]
    pub index: u32,
    /// Its name.
    #[returns(ref)]
    pub name: String,
    /// Its text, from `ENTRY`/name to the closing `}`.
    #[returns(ref)]
    pub text: String,
    /// Where the text starts in the file: line, column and byte offset.
    /// Read only when reporting an error, so that edits above a
    /// computation do not re-parse it.
    #[returns(copy)]
    pub origin: (u32, u32, usize),
    /// The module it belongs to.
    #[returns(copy)]
    pub module: SourceModule,
}

impl SourceModule {
    /// The entry computation's id.
    pub fn entry_id(self, db: &dyn Db) -> CompId {
        CompId(self.entry(db))
    }
}

impl SourceComputation {
    /// Its id in the module (its index as a [`CompId`]).
    pub fn id(self, db: &dyn Db) -> CompId {
        CompId(self.index(db))
    }
}

/// A parsed computation, or its first error (with positions relative to
/// the computation's own text).
///
/// The computation is held until the steps after assignment take it for
/// their copy (see `take_parse`): they are the last to read it in a run,
/// and taking it spares them a copy of the whole computation. A reader
/// that finds it taken parses the text again (see [`parse_of`]), so what
/// any reader sees does not depend on the order they ran in.
#[derive(Debug)]
pub struct Parsed {
    held: Result<Mutex<Option<Arc<Computation>>>, ParseError>,
    fingerprint: u64,
}

impl Parsed {
    /// Why the computation does not parse, if it does not.
    pub fn error(&self) -> Option<&ParseError> {
        self.held.as_ref().err()
    }

    /// The held computation, unless it was taken (or did not parse).
    fn held(&self) -> Option<Arc<Computation>> {
        let held = self.held.as_ref().ok()?;
        held.lock().ok()?.clone()
    }
}

impl PartialEq for Parsed {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Drop for Parsed {
    fn drop(&mut self) {
        if let Ok(held) = &mut self.held
            && let Ok(Some(comp)) = held.get_mut().map(|c| c.take())
        {
            let_go(&comp);
        }
    }
}

thread_local! {
    /// The computations evicted on this thread while
    /// [`Database::release_intermediates`] runs, when it runs here: their
    /// memory is freed after the run, off its path.
    static LET_GO: std::cell::RefCell<Option<Vec<Arc<Computation>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Keeps `comp`, whose last holder is letting it go, to be freed later
/// when this thread is releasing a run's intermediates (see [`LET_GO`]);
/// else does nothing, and it is freed with its holder.
pub(crate) fn let_go(comp: &Arc<Computation>) {
    if Arc::strong_count(comp) == 1 {
        LET_GO.with(|kept| {
            if let Ok(mut kept) = kept.try_borrow_mut()
                && let Some(kept) = kept.as_mut()
            {
                kept.push(Arc::clone(comp));
            }
        });
    }
}

/// Runs `evict` with every computation it lets go kept aside (see
/// [`let_go`]), and returns those.
fn collecting_let_go(evict: impl FnOnce()) -> Vec<Arc<Computation>> {
    /// Puts the thread's list back as it was, also if `evict` panics, so
    /// that a thread never goes on keeping what it lets go.
    struct Restore(Option<Vec<Arc<Computation>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            LET_GO.with(|kept| kept.replace(before));
        }
    }
    let restore = Restore(LET_GO.with(|kept| kept.replace(Some(Vec::new()))));
    evict();
    let kept = LET_GO.with(|kept| kept.borrow_mut().take());
    drop(restore);
    kept.unwrap_or_default()
}

/// The computation names of a module, in order.
#[salsa::tracked(returns(ref))]
pub fn names(db: &dyn Db, m: SourceModule) -> Vec<String> {
    m.computations(db)
        .iter()
        .map(|c| c.name(db).clone())
        .collect()
}

/// Each computation's id by name, built once per module (a parse looks
/// the names it calls up here; building it per computation would make
/// loading a module of many computations quadratic).
#[salsa::tracked(returns(ref))]
pub fn name_index(db: &dyn Db, m: SourceModule) -> FxHashMap<String, CompId> {
    names(db, m)
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), CompId(i as u32)))
        .collect()
}

/// Parses one computation.
///
/// A parse is the largest thing a session holds of a computation, about
/// fourteen times its text, so it is not kept between runs: the steps after
/// it keep what later runs read of the input (signature stubs, names,
/// calls, problems, parse errors) in small queries of their own, and a run
/// that needs a computation's parse again, after an edit of it or of a
/// signature it reads, parses it again. Salsa drops values beyond the LRU's
/// capacity only between revisions, so a run never parses a computation
/// twice. `tests/incremental.rs` checks that a re-run after an edit parses
/// only the edited computation.
#[salsa::tracked(returns(ref), lru = 1)]
pub fn parsed(db: &dyn Db, c: SourceComputation) -> Parsed {
    let (result, fingerprint) = parse_text(db, c);
    Parsed {
        held: result.map(|comp| Mutex::new(Some(Arc::new(comp)))),
        fingerprint,
    }
}

/// Parses `c`'s text, looking up the computations it names in its module,
/// with a fingerprint of what the result depends on.
fn parse_text(db: &dyn Db, c: SourceComputation) -> (Result<Computation, ParseError>, u64) {
    let m = c.module(db);
    let index = name_index(db, m);
    let text = c.text(db);
    // The result depends on the text and on the ids of the computations
    // it names, nothing else: those are what the fingerprint hashes.
    let looked_up = Mutex::new(Vec::new());
    let resolve = |name: &str| {
        let id = index.get(name).copied();
        if let Ok(mut l) = looked_up.lock() {
            l.push((name.to_string(), id));
        }
        id
    };
    let span = hlo::Span {
        start: 0,
        end: text.len(),
        line: 1,
        col: 1,
    };
    let result = hlo::parse_computation(text, &span, &resolve, "");
    let mut h = FxHasher::default();
    text.hash(&mut h);
    looked_up.into_inner().unwrap_or_default().hash(&mut h);
    (result, h.finish())
}

/// The parse of `c`, or its first error: the one [`parsed`] holds, or, if
/// the steps after assignment took it, the text parsed again.
pub fn parse_of(db: &dyn Db, c: SourceComputation) -> Result<Arc<Computation>, ParseError> {
    let parsed = parsed(db, c);
    if let Some(e) = parsed.error() {
        return Err(e.clone());
    }
    match parsed.held() {
        Some(comp) => Ok(comp),
        None => parse_text(db, c).0.map(Arc::new),
    }
}

/// The parse of `c` as a computation of its own, for the steps that change
/// it: taken from [`parsed`] when nothing else holds it, else a copy.
pub(crate) fn take_parse(db: &dyn Db, c: SourceComputation) -> Result<Computation, ParseError> {
    let parsed = parsed(db, c);
    let held = match &parsed.held {
        Ok(held) => held,
        Err(e) => return Err(e.clone()),
    };
    let taken = held.lock().ok().and_then(|mut h| h.take());
    match taken {
        Some(comp) => Ok(Arc::unwrap_or_clone(comp)),
        // Taken by an earlier run, and kept since (salsa's LRU keeps the
        // parse read last): the same inputs parse to the same computation.
        None => parse_text(db, c).0,
    }
}

/// A computation's parse error, if any: what the module's input check
/// reads of each computation's parse. It is kept with the computation's
/// other input facts (see [`input_facts`]), so that the check does not
/// need the parses themselves (see [`parsed`]).
pub fn parse_error(db: &dyn Db, c: SourceComputation) -> Option<&ParseError> {
    input_facts(db, c).parse_error.as_ref()
}

/// What the rest of the module reads of one computation's parse: the
/// calls it makes, the computations it names, its signature as callers
/// see it and its parse error.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputFacts {
    /// Each call, with the callee's role (see [`hlo::calls_of`]).
    pub roles: Vec<(CompId, CallRole)>,
    /// The computations its instructions name, in id order, once each:
    /// what its checks and its printing look up. Read from the input: the
    /// steps after it add instructions (copies, bitcasts, the relayout
    /// expansions) but never a call, so the output names the same ones.
    pub named: Vec<CompId>,
    /// Its signature (name, parameters and root), as its callers' input
    /// checks read it.
    pub stub: pipeline::Stub,
    /// Why it does not parse (then it makes no call and has no stub).
    pub parse_error: Option<ParseError>,
}

/// The input facts of one computation: one query, since all come from one
/// read of the parse, and a re-run after an edit re-reads every
/// computation's memo of each query the module-wide steps read. The call
/// graph reads it, so a computation's new signature rebuilds the call
/// graph, which is then found unchanged.
#[salsa::tracked(returns(ref))]
pub fn input_facts(db: &dyn Db, c: SourceComputation) -> InputFacts {
    match parse_of(db, c) {
        Ok(comp) => InputFacts {
            roles: hlo::calls_of(&comp),
            named: pipeline::named(&comp),
            stub: pipeline::Stub(Some(hlo::CalleeSignature::of(&comp))),
            parse_error: None,
        },
        Err(e) => InputFacts {
            parse_error: Some(e),
            ..InputFacts::default()
        },
    }
}

/// The module's call graph.
#[salsa::tracked(returns(ref))]
pub fn call_graph(db: &dyn Db, m: SourceModule) -> CallGraph {
    let comps = m.computations(db);
    CallGraph::from_calls(
        comps.len(),
        comps
            .iter()
            .map(|&c| (c.id(db), input_facts(db, c).roles.clone())),
    )
}

/// The entry computation layout: the header's, or derived from the entry
/// computation's parameters and root when the header has none.
#[salsa::tracked(returns(ref))]
pub fn entry_layout(db: &dyn Db, m: SourceModule) -> ComputationLayout {
    if let Some(l) = &m.header(db).entry_computation_layout {
        return l.clone();
    }
    let entry = m.computations(db).get(m.entry(db) as usize).copied();
    match entry.map(|c| parse_of(db, c)) {
        Some(Ok(comp)) => ComputationLayout {
            parameters: comp
                .parameters()
                .into_iter()
                .map(|p| comp.inst(p).shape.clone())
                .collect(),
            result: comp.root().map_or(shape::Shape::Tuple(Vec::new()), |r| {
                comp.inst(r).shape.clone()
            }),
        },
        _ => ComputationLayout {
            parameters: Vec::new(),
            result: shape::Shape::Tuple(Vec::new()),
        },
    }
}

/// The outcome of assigning one computation.
pub type AssignmentResult = Result<Arc<ComputationAssignment>, AssignError>;

/// Why a computation could not be assigned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssignError {
    #[error("{0}")]
    Parse(Box<ParseError>),
    #[error("{0}")]
    Pass(PassError),
}

struct Facts<'db> {
    db: &'db dyn Db,
    m: SourceModule,
}

impl ModuleFacts for Facts<'_> {
    fn entry(&self) -> CompId {
        self.m.entry_id(self.db)
    }
    fn entry_layout(&self) -> ComputationLayout {
        entry_layout(self.db, self.m).clone()
    }
    fn io_alias(&self) -> Vec<IoAlias> {
        self.m.header(self.db).input_output_alias.clone()
    }
    fn name(&self, id: CompId) -> String {
        names(self.db, self.m)
            .get(id.index())
            .cloned()
            .unwrap_or_default()
    }
}

/// A computation with a boundary its only caller chose: the key of the
/// bounded queries.
#[salsa::interned(unsafe(no_lifetime), revisions = usize::MAX)]
pub struct BoundaryKey {
    /// The computation.
    #[returns(copy)]
    pub comp: SourceComputation,
    /// Its parameters and result (leaves without a layout are free).
    #[returns(ref)]
    pub boundary: Signature,
    /// How many levels of its own callees it weighs (`WEIGH_LEVELS` for a
    /// final assignment, fewer for one its caller prices).
    #[returns(copy)]
    pub levels: u8,
}

/// The outcome of building one computation's constraints.
pub type ConstraintsResult = Result<Arc<Context>, AssignError>;

fn pass_error(e: &AssignError) -> PassError {
    match e {
        AssignError::Pass(p) => p.clone(),
        AssignError::Parse(p) => PassError::Module(p.message.clone()),
    }
}

/// Builds the constraints of computation `c` for `phase` (with `boundary`,
/// its parameters and result as its only caller chose them): the layouts
/// fixed at its boundary (entry layout, loop state, branch result,
/// aliasing, its caller's choice) and the signatures of the computations it
/// calls.
fn build_constraints(
    db: &dyn Db,
    c: SourceComputation,
    phase: Phase,
    boundary: Option<&Signature>,
) -> ConstraintsResult {
    let m = c.module(db);
    let graph = call_graph(db, m);
    let facts = Facts { db, m };
    let id = c.id(db);
    let mut q = Queries { db, m };
    let mut signature = |other: CompId, phase: Phase| q.signature(other, phase);
    layout_assignment::context_for(&facts, graph, id, phase, boundary, &mut signature)
        .map(Arc::new)
        .map_err(AssignError::Pass)
}

/// The constraints of a computation as its callers see it (without its
/// only caller's choice, for a computation whose boundary that caller
/// decides): what its assignment must honour beyond its own text and the
/// target. It re-runs when a signature around it, the call graph or the
/// entry layout changes, and the assignment re-runs only when the
/// constraints it returns differ.
#[salsa::tracked(returns(ref))]
pub fn constraints(db: &dyn Db, c: SourceComputation) -> ConstraintsResult {
    build_constraints(db, c, Phase::Final, None)
}

/// The constraints of a conditional branch before the conditional fixes
/// its result (asked only for branches).
#[salsa::tracked(returns(ref))]
pub fn free_constraints(db: &dyn Db, c: SourceComputation) -> ConstraintsResult {
    build_constraints(db, c, Phase::Free, None)
}

/// The other queries, as the pass's call-boundary rule asks for them.
struct Queries<'db> {
    db: &'db dyn Db,
    m: SourceModule,
}

impl Queries<'_> {
    fn comp(&self, id: CompId) -> Result<SourceComputation, PassError> {
        self.m
            .computations(self.db)
            .get(id.index())
            .copied()
            .ok_or_else(|| PassError::Module(format!("computation #{} does not exist", id.0)))
    }
}

impl layout_assignment::CallQueries for Queries<'_> {
    fn signature(&mut self, c: CompId, phase: Phase) -> Result<Signature, PassError> {
        let c = self.comp(c)?;
        let result = match phase {
            Phase::Free => free_signature(self.db, c),
            Phase::Final => final_signature(self.db, c),
            Phase::Alone => alone_signature(self.db, c),
        };
        result.clone().map_err(|e| pass_error(&e))
    }

    fn cost(
        &mut self,
        c: CompId,
        boundary: Option<Signature>,
        levels: u8,
    ) -> Result<Moved, PassError> {
        let c = self.comp(c)?;
        let result = match boundary {
            None => alone_cost(self.db, c),
            Some(b) => bounded_cost(self.db, BoundaryKey::new(self.db, c, b, levels)),
        };
        result.clone().map_err(|e| pass_error(&e))
    }

    fn signature_under(
        &mut self,
        c: CompId,
        boundary: Signature,
        levels: u8,
    ) -> Result<Signature, PassError> {
        let c = self.comp(c)?;
        bounded_signature(self.db, BoundaryKey::new(self.db, c, boundary, levels))
            .clone()
            .map_err(|e| pass_error(&e))
    }
}

/// Assigns `c` under `ctx`, with the call-boundary rule for its callees to
/// `levels` levels.
fn assign(
    db: &dyn Db,
    c: SourceComputation,
    ctx: &ConstraintsResult,
    levels: u8,
) -> AssignmentResult {
    db.assigned(c);
    let m = c.module(db);
    let comp = parse_of(db, c).map_err(|e| AssignError::Parse(Box::new(e)))?;
    let ctx = ctx.clone()?;
    let all = names(db, m);
    let name_of = |c: CompId| all.get(c.index()).cloned().unwrap_or_default();
    let graph = call_graph(db, m);
    let entry = m.entry_id(db);
    let mut q = Queries { db, m };
    layout_assignment::decide(
        &comp,
        &name_of,
        graph,
        entry,
        c.id(db),
        &ctx,
        m.target(db),
        levels,
        &m.solver(db),
        &mut q,
    )
    .map(Arc::new)
    .map_err(AssignError::Pass)
}

/// The assignment of a computation without its only caller's choice (for
/// any other computation, its final assignment).
#[salsa::tracked(returns(ref))]
pub fn alone_assignment(db: &dyn Db, c: SourceComputation) -> AssignmentResult {
    assign(db, c, constraints(db, c), WEIGH_LEVELS)
}

/// The assignment of a computation whose only caller decides its boundary,
/// with its parameters and result fixed to `boundary` (leaves without a
/// layout are free), weighing the key's levels of its own callees.
#[salsa::tracked(returns(ref))]
pub fn bounded_assignment(db: &dyn Db, key: BoundaryKey) -> AssignmentResult {
    let c = key.comp(db);
    assign(
        db,
        c,
        &build_constraints(db, c, Phase::Final, Some(key.boundary(db))),
        key.levels(db),
    )
}

/// The boundary the only caller of `c` chose for it in its final
/// assignment, when it chose one (for a loop condition, its body's final
/// parameters). Read by [`final_assignment`] only.
fn chosen_boundary(db: &dyn Db, c: SourceComputation) -> Result<Option<Signature>, AssignError> {
    let m = c.module(db);
    let graph = call_graph(db, m);
    let entry = m.entry_id(db);
    let comps = m.computations(db);
    let comp_of = |id: CompId| {
        comps.get(id.index()).copied().ok_or_else(|| {
            AssignError::Pass(PassError::Module(format!(
                "computation #{} does not exist",
                id.0
            )))
        })
    };
    match layout_assignment::bound_site(graph, entry, c.id(db)) {
        Some(BoundSite::Called { caller } | BoundSite::WhileBody { caller, .. }) => {
            Ok(final_assignment(db, comp_of(caller)?)
                .clone()?
                .boundary_for(c.id(db))
                .cloned())
        }
        Some(BoundSite::WhileCondition { body, .. }) => Ok(Some(
            layout_assignment::condition_boundary(&final_signature(db, comp_of(body)?).clone()?),
        )),
        None => Ok(None),
    }
}

/// The assignment callers see: every requirement applied. For a
/// computation whose boundary its only caller decides, the bounded one
/// when that caller's final assignment chose a boundary, else the alone
/// one; a loop condition follows its body's final parameters.
///
/// It reads the caller's final assignment itself, so it runs again
/// whenever that changes; but then it only looks up an assignment already
/// made for the boundary read (the bounded or the alone one), and is found
/// unchanged unless the boundary changed. One query rather than two (the
/// boundary, then the assignment), since a re-run after an edit re-reads
/// every computation's memo of each.
#[salsa::tracked(returns(ref))]
pub fn final_assignment(db: &dyn Db, c: SourceComputation) -> AssignmentResult {
    match chosen_boundary(db, c)? {
        Some(b) => bounded_assignment(db, BoundaryKey::new(db, c, b, WEIGH_LEVELS)).clone(),
        None => alone_assignment(db, c).clone(),
    }
}

/// The assignment of a conditional branch before the conditional fixes its
/// result; for any other computation, the final one.
#[salsa::tracked(returns(ref))]
pub fn free_assignment(db: &dyn Db, c: SourceComputation) -> AssignmentResult {
    let m = c.module(db);
    let is_branch = call_graph(db, m)
        .roles
        .get(c.index(db) as usize)
        .is_some_and(|roles| roles.iter().any(|r| matches!(r, CallRole::Branch { .. })));
    if is_branch {
        assign(db, c, free_constraints(db, c), WEIGH_LEVELS)
    } else {
        final_assignment(db, c).clone()
    }
}

/// The signature part of an assignment's outcome.
fn signature_of(a: &AssignmentResult) -> Result<Signature, AssignError> {
    a.as_ref()
        .map(|a| a.signature.clone())
        .map_err(Clone::clone)
}

/// The final signature: what callers depend on.
#[salsa::tracked(returns(ref))]
pub fn final_signature(db: &dyn Db, c: SourceComputation) -> Result<Signature, AssignError> {
    signature_of(final_assignment(db, c))
}

/// The free signature of a branch.
#[salsa::tracked(returns(ref))]
pub fn free_signature(db: &dyn Db, c: SourceComputation) -> Result<Signature, AssignError> {
    signature_of(free_assignment(db, c))
}

/// The signature a computation chooses without its only caller: what that
/// caller reads first.
#[salsa::tracked(returns(ref))]
pub fn alone_signature(db: &dyn Db, c: SourceComputation) -> Result<Signature, AssignError> {
    signature_of(alone_assignment(db, c))
}

/// The signature of a bounded assignment.
#[salsa::tracked(returns(ref))]
pub fn bounded_signature(db: &dyn Db, key: BoundaryKey) -> Result<Signature, AssignError> {
    signature_of(bounded_assignment(db, key))
}

/// What a computation's alone assignment moves, with the callees whose
/// boundary it decides.
#[salsa::tracked]
pub fn alone_cost(db: &dyn Db, c: SourceComputation) -> Result<Moved, AssignError> {
    let a = alone_assignment(db, c).clone()?;
    subtree(db, c, &a, WEIGH_LEVELS)
}

/// What a computation's bounded assignment moves, with the callees whose
/// boundary it decides.
#[salsa::tracked]
pub fn bounded_cost(db: &dyn Db, key: BoundaryKey) -> Result<Moved, AssignError> {
    let a = bounded_assignment(db, key).clone()?;
    subtree(db, key.comp(db), &a, key.levels(db))
}

fn subtree(
    db: &dyn Db,
    c: SourceComputation,
    a: &ComputationAssignment,
    levels: u8,
) -> Result<Moved, AssignError> {
    let m = c.module(db);
    let mut q = Queries { db, m };
    let (graph, entry) = (call_graph(db, m), m.entry_id(db));
    layout_assignment::subtree_cost(graph, entry, c.id(db), a, levels, &mut q)
        .map_err(AssignError::Pass)
}

/// One query execution, as salsa's event hook reported it.
#[derive(Clone, Copy, Debug)]
struct Execution {
    query: salsa::IngredientIndex,
    key: salsa::Id,
    /// Whether the query ran, or an earlier value was checked and kept.
    ran: bool,
}

/// The database the queries run on: salsa's, and a record of the
/// assignments computed, kept outside salsa because no query reads it.
#[salsa::db]
pub trait Db: salsa::Database {
    /// Notes that an assignment of `c` is being computed (see
    /// [`Database::recomputed_computations`]).
    fn assigned(&self, c: SourceComputation);
}

/// The database.
#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    executions: Arc<Mutex<Vec<Execution>>>,
    /// The computations whose assignment ran since the last clear, in the
    /// order they ran, once per run of an assignment.
    assigned: Arc<Mutex<Vec<SourceComputation>>>,
    module: Option<SourceModule>,
    /// The loaded text's `HloModule` line, by number (from 1) and text:
    /// where module-wide problems are reported. Kept out of salsa, since
    /// only error messages read it.
    header_at: Option<(usize, String)>,
    /// How many computations' inputs were written since the last run
    /// ended (every computation, for a module-wide input): how much a run
    /// may have to redo, which decides whether it splits its work.
    written: usize,
    /// The computation with the shortest text (the first of them), with
    /// its text's length, when known: what [`Database::release_intermediates`]
    /// reads last. Kept up to date by edits, so that a re-run after one
    /// does not read every computation's text to find it.
    smallest: Option<(SourceComputation, usize)>,
    /// The thread freeing the last run's intermediates, while it runs (see
    /// [`Database::release_intermediates`]).
    freeing: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
    /// What earlier loads left behind (see [`Database::left_behind`]).
    left_behind: LeftBehind,
}

/// What warming a module's assignments reads ([`Database::warm_plan`]):
/// its call graph, entry and computations, and the computations another
/// thread warms.
pub struct WarmPlan<'a> {
    graph: &'a CallGraph,
    entry: CompId,
    comps: &'a [SourceComputation],
    left: rustc_hash::FxHashSet<CompId>,
}

impl WarmPlan<'_> {
    /// The plan's computations in levels, each level in the schedule's
    /// order: first those of [`Database::warm_up`], callees first, then
    /// those of [`Database::warm_down`], callers first (see
    /// [`hlo::CallSchedule::bottom_up_levels`]). The computations of one
    /// level read only values of earlier levels' computations, which are
    /// then computed already, so they can be warmed side by side, each
    /// level after the one before.
    pub fn levels(&self) -> (Vec<Vec<SourceComputation>>, Vec<Vec<SourceComputation>>) {
        let schedule = self.graph.schedule();
        let levels = |levels: &[Vec<CompId>]| -> Vec<Vec<SourceComputation>> {
            levels
                .iter()
                .map(|level| {
                    level
                        .iter()
                        .filter(|id| !self.left.contains(id))
                        .filter_map(|id| self.comps.get(id.index()).copied())
                        .collect::<Vec<_>>()
                })
                .filter(|level| !level.is_empty())
                .collect()
        };
        (
            levels(&schedule.bottom_up_levels),
            levels(&schedule.top_down_levels),
        )
    }
}

/// The computations that loads left behind in a database: those of an
/// earlier module that a later one does not name. salsa cannot delete an
/// input, so each keeps its text and the values computed from it for as
/// long as the database lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftBehind {
    /// How many computations.
    pub computations: usize,
    /// Their texts' bytes.
    pub text_bytes: usize,
}

impl Default for Database {
    /// A database that does not record query executions.
    fn default() -> Self {
        Database::new(None)
    }
}

impl Database {
    /// A database that also records every query execution and every
    /// earlier value checked and kept, for [`Database::executions`] and
    /// [`Database::validations`]: what the incrementality tests count.
    ///
    /// Not the default: with a recorder, salsa builds an event for every
    /// query it looks up, not only those it runs. A re-run of the largest
    /// corpus module after one body edit took 3.9 ms with the recorder and
    /// 2.2 ms without. Sessions use [`Database::recomputed_computations`],
    /// which every database records.
    pub fn with_execution_log() -> Self {
        let executions: Arc<Mutex<Vec<Execution>>> = Arc::default();
        let log = executions.clone();
        let record = move |event: salsa::Event| {
            let (database_key, ran) = match event.kind {
                salsa::EventKind::WillExecute { database_key } => (database_key, true),
                salsa::EventKind::DidValidateMemoizedValue { database_key } => {
                    (database_key, false)
                }
                _ => return,
            };
            if let Ok(mut log) = log.lock() {
                log.push(Execution {
                    query: database_key.ingredient_index(),
                    key: database_key.key_index(),
                    ran,
                });
            }
        };
        let mut db = Database::new(Some(Box::new(record)));
        db.executions = executions;
        db
    }

    fn new(record: Option<Box<dyn Fn(salsa::Event) + Send + Sync + 'static>>) -> Self {
        Database {
            storage: salsa::Storage::new(record),
            executions: Arc::default(),
            assigned: Arc::default(),
            module: None,
            header_at: None,
            written: 0,
            smallest: None,
            freeing: Arc::default(),
            left_behind: LeftBehind::default(),
        }
    }
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {
    fn assigned(&self, c: SourceComputation) {
        if let Ok(mut log) = self.assigned.lock() {
            log.push(c);
        }
    }
}

/// A query that ran, by name and the computation it ran for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExecutedQuery {
    /// The query's name, such as `final_assignment`.
    pub query: String,
    /// The computation's name, or the module's for module-level queries.
    pub key: String,
}

/// Why a module could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Parse(Box<ParseError>),
    #[error("no computation is named '{0}'")]
    UnknownComputation(String),
    #[error("no module is loaded")]
    NoModule,
}

/// Sets an edited computation's text, and counts the write.
fn edited_text(db: &mut Database, c: SourceComputation, text: String) {
    let len = text.len();
    db.smallest = match db.smallest {
        // The smallest grew: which one is smallest now is not known.
        Some((s, l)) if s == c => (len <= l).then_some((c, len)),
        Some((s, l)) if (len, c.index(db)) < (l, s.index(db)) => Some((c, len)),
        kept => kept,
    };
    c.set_text(db).to(text);
    db.wrote(1);
}

impl Database {
    /// Loads (or reloads) a module's text. Inputs whose content did not
    /// change are left alone, so nothing depending on them re-runs.
    pub fn load(
        &mut self,
        text: &str,
        file_name: &str,
        target: Arc<TargetSpec>,
    ) -> Result<SourceModule, LoadError> {
        let outline = hlo::outline(text, file_name).map_err(|e| LoadError::Parse(Box::new(e)))?;
        self.header_at = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.starts_with("HloModule"))
            .map(|(i, l)| (i + 1, l.to_string()));
        let header = ModuleHeader {
            name: outline.name.clone(),
            is_scheduled: outline.is_scheduled,
            entry_computation_layout: outline.entry_computation_layout.clone(),
            input_output_alias: outline.input_output_alias.clone(),
            header_attrs: outline.header_attrs.clone(),
            debug_tables: outline.debug_tables.clone(),
        };
        let m = match self.module {
            Some(m) => m,
            None => {
                let m = SourceModule::new(
                    self,
                    file_name.to_string(),
                    header.clone(),
                    Vec::new(),
                    0,
                    target.clone(),
                    SolverOptions::default(),
                    pipeline::Steps::default(),
                );
                self.module = Some(m);
                m
            }
        };
        let all = outline.computations.len();
        if m.file_name(self) != file_name {
            m.set_file_name(self).to(file_name.to_string());
            self.wrote(all);
        }
        if *m.header(self) != header {
            m.set_header(self).to(header);
            self.wrote(all);
        }
        if **m.target(self) != *target {
            m.set_target(self).to(target);
            self.wrote(all);
        }
        let mut old: FxHashMap<String, SourceComputation> = m
            .computations(self)
            .iter()
            .map(|&c| (c.name(self).clone(), c))
            .collect();
        let mut comps = Vec::with_capacity(outline.computations.len());
        for (i, c) in outline.computations.iter().enumerate() {
            let body = c.span.text(text);
            let origin = (c.span.line, c.span.col, c.span.start);
            let input = match old.remove(&c.name) {
                Some(existing) => {
                    if existing.index(self) != i as u32 {
                        existing.set_index(self).to(i as u32);
                        self.wrote(1);
                    }
                    if existing.text(self) != body {
                        edited_text(self, existing, body.to_string());
                    }
                    if existing.origin(self) != origin {
                        existing.set_origin(self).to(origin);
                    }
                    existing
                }
                None => {
                    self.wrote(1);
                    SourceComputation::new(
                        self,
                        i as u32,
                        c.name.clone(),
                        body.to_string(),
                        origin,
                        m,
                    )
                }
            };
            comps.push(input);
        }
        for c in old.into_values() {
            self.left_behind.computations += 1;
            self.left_behind.text_bytes += c.text(self).len();
        }
        if *m.computations(self) != comps {
            m.set_computations(self).to(comps);
            self.wrote(all);
        }
        if m.entry(self) != outline.entry as u32 {
            m.set_entry(self).to(outline.entry as u32);
            self.wrote(all);
        }
        // Computations may have come, gone or moved.
        self.smallest = None;
        Ok(m)
    }

    /// Replaces the text of the named computations (each text is a whole
    /// computation, as it would appear in the module).
    pub fn replace_computations(
        &mut self,
        replacements: &[(String, String)],
    ) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        let comps = m.computations(self).clone();
        for (name, text) in replacements {
            let c = comps
                .iter()
                .copied()
                .find(|c| c.name(self) == name)
                .ok_or_else(|| LoadError::UnknownComputation(name.clone()))?;
            if c.text(self) != text {
                edited_text(self, c, text.clone());
            }
        }
        Ok(())
    }

    /// The text of the named computation of the loaded module.
    pub fn computation_text(&self, name: &str) -> Option<String> {
        let m = self.module?;
        m.computations(self)
            .iter()
            .copied()
            .find(|c| c.name(self) == name)
            .map(|c| c.text(self).clone())
    }

    /// Sets the target.
    pub fn set_target(&mut self, target: Arc<TargetSpec>) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if **m.target(self) != *target {
            m.set_target(self).to(target);
            self.wrote(m.computations(self).len());
        }
        Ok(())
    }

    /// Sets the solver (the heuristic until set).
    pub fn set_solver(&mut self, solver: SolverOptions) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if m.solver(self) != solver {
            m.set_solver(self).to(solver);
            self.wrote(m.computations(self).len());
        }
        Ok(())
    }

    /// Sets the steps after assignment.
    pub fn set_steps(&mut self, steps: pipeline::Steps) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if m.steps(self) != steps {
            m.set_steps(self).to(steps);
            self.wrote(m.computations(self).len());
        }
        Ok(())
    }

    /// Counts `n` computations' inputs as written.
    fn wrote(&mut self, n: usize) {
        self.written = self.written.saturating_add(n);
    }

    /// How many computations' inputs were written since the last run
    /// ended ([`Database::ran`]); every computation's, for a module-wide
    /// input such as the target. A run that has little to redo does it in
    /// order rather than splitting it over threads.
    pub fn written_since_run(&self) -> usize {
        self.written
    }

    /// Marks the end of a run: what is written from now on is the next
    /// run's to redo.
    pub fn ran(&mut self) {
        self.written = 0;
    }

    /// Drops the values of the steps a session does not keep between runs:
    /// each computation's parse ([`parsed`]) and each computation with its
    /// copies and after relayout ([`pipeline::transformed`]). A session then
    /// holds its module's text, assignments, small per-computation values
    /// and output text, not copies of every computation. A later run that
    /// needs one again recomputes it.
    ///
    /// salsa's LRU keeps the value read last of each query (its capacity is
    /// at least one), and the computation read last is often the entry,
    /// the largest. So the smallest computation's values are read last:
    /// that is what stays. Its transformed value only after a run that
    /// `succeeded`, when it is already computed: after a failed run it
    /// could be an assignment of a module the input check refused.
    pub fn release_intermediates(&mut self, succeeded: bool) {
        if self.smallest.is_none()
            && let Some(m) = self.module
        {
            self.smallest = m
                .computations(self)
                .iter()
                .map(|&c| (c, c.text(self).len()))
                .min_by_key(|&(c, len)| (len, c.index(self)));
        }
        if let Some((small, _)) = self.smallest {
            let _ = parsed(self, small);
            if succeeded {
                let _ = pipeline::transformed(self, small);
            }
        }
        // Freeing a first run's parses and transformed computations took
        // about a twentieth of it (30 ms on a module of 16,667
        // computations): salsa drops what it evicts, so each is kept aside
        // as it goes and freed on a thread of its own, off the run's path.
        let released = collecting_let_go(|| salsa::Database::trigger_lru_eviction(self));
        let instructions = released.iter().map(|c| c.len()).sum();
        if hlo::Parallelism::splits(hlo::Split::Release, instructions).is_none() {
            return;
        }
        // One at a time: a run's frees wait for the last run's.
        self.settle();
        // A thread the OS refuses drops its closure, and so the
        // computations, here.
        if let Ok(thread) = std::thread::Builder::new()
            .name("tessera-release".into())
            .spawn(move || drop(released))
            && let Ok(mut freeing) = self.freeing.lock()
        {
            *freeing = Some(thread);
        }
    }

    /// Waits until the intermediates the last run released are freed (see
    /// [`Database::release_intermediates`]): for measuring what a session
    /// holds.
    pub fn settle(&self) {
        let thread = self.freeing.lock().ok().and_then(|mut f| f.take());
        if let Some(thread) = thread {
            // A panic while freeing leaves nothing to wait for.
            let _ = thread.join();
        }
    }

    /// The loaded module.
    pub fn module(&self) -> Option<SourceModule> {
        self.module
    }

    /// The computations earlier loads left behind (see [`LeftBehind`]):
    /// what this database holds beyond its module. A session that loads
    /// module after module into one database counts them, and starts a
    /// new database before they outweigh the module.
    pub fn left_behind(&self) -> LeftBehind {
        self.left_behind
    }

    /// What would be left behind after loading a module whose
    /// computations have these names: what is already, and each
    /// computation of the loaded module that none of them names.
    pub fn would_leave_behind<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> LeftBehind {
        let mut left = self.left_behind;
        let Some(m) = self.module else {
            return left;
        };
        let kept: rustc_hash::FxHashSet<&str> = names.into_iter().collect();
        for &c in m.computations(self) {
            if !kept.contains(c.name(self).as_str()) {
                left.computations += 1;
                left.text_bytes += c.text(self).len();
            }
        }
        left
    }

    /// Forgets the recorded query executions and assignments.
    pub fn clear_executions(&self) {
        if let Ok(mut log) = self.executions.lock() {
            log.clear();
        }
        if let Ok(mut log) = self.assigned.lock() {
            log.clear();
        }
    }

    /// The query executions since the last clear, resolved to names (none
    /// unless the database was made by [`Database::with_execution_log`]).
    pub fn executions(&self) -> Vec<ExecutedQuery> {
        self.logged(true)
    }

    /// The earlier values checked since the last clear and kept, without
    /// running their query, resolved to names: what a re-run after an edit
    /// spends on what the edit did not change (none unless the database
    /// was made by [`Database::with_execution_log`]). salsa checks a value
    /// by checking what it read, so each kept value is one check.
    pub fn validations(&self) -> Vec<ExecutedQuery> {
        self.logged(false)
    }

    /// The logged queries that ran (`ran`) or were checked and kept.
    fn logged(&self, ran: bool) -> Vec<ExecutedQuery> {
        let log: Vec<Execution> = self
            .executions
            .lock()
            .map(|l| l.iter().filter(|e| e.ran == ran).cloned().collect())
            .unwrap_or_default();
        let by_id: FxHashMap<salsa::Id, String> = match self.module {
            Some(m) => {
                let mut map: FxHashMap<salsa::Id, String> = m
                    .computations(self)
                    .iter()
                    .map(|c| (salsa::plumbing::AsId::as_id(c), c.name(self).clone()))
                    .collect();
                map.insert(
                    salsa::plumbing::AsId::as_id(&m),
                    m.header(self).name.clone(),
                );
                map
            }
            None => FxHashMap::default(),
        };
        log.iter()
            .map(|e| {
                let query = salsa::Database::ingredient_debug_name(self, e.query).to_string();
                // The bounded queries are keyed by a computation and a
                // boundary: named by the computation.
                let key = match by_id.get(&e.key) {
                    Some(name) => name.clone(),
                    None if query.starts_with("bounded_") => {
                        let key = <BoundaryKey as salsa::plumbing::FromId>::from_id(e.key);
                        format!("{} bounded", key.comp(self).name(self))
                    }
                    None => format!("{:?}", e.key),
                };
                ExecutedQuery { query, key }
            })
            .collect()
    }

    /// The names of the computations whose assignment ran since the last
    /// clear, in module order. Recorded by the assignment queries
    /// themselves, in every database: salsa's event hook
    /// ([`Database::with_execution_log`]) would cost every lookup.
    pub fn recomputed_computations(&self) -> Vec<String> {
        let mut ran = self.assigned.lock().map(|l| l.clone()).unwrap_or_default();
        ran.sort_unstable_by_key(|c| c.index(self));
        ran.dedup();
        ran.iter().map(|c| c.name(self).clone()).collect()
    }

    /// A problem of the loaded module as a compiler prints it:
    /// `FILE:LINE:COL: error: ...`, the position found by name in its
    /// computation's text and rebased to the file (see
    /// [`hlo::VerifyError::located`]).
    pub fn located(&self, problem: &hlo::VerifyError) -> String {
        let Some(m) = self.module else {
            return problem.to_string();
        };
        let file = m.file_name(self);
        if problem.computation.is_empty() {
            // A module-wide problem: at the header line, as `VerifyError::locate` finds it.
            if let Some((line, text)) = &self.header_at
                && let Some((_, col)) = problem.locate(text)
            {
                return format!("{file}:{line}:{col}: error: {problem}");
            }
        }
        let comp = m
            .computations(self)
            .iter()
            .copied()
            .find(|c| *c.name(self) == problem.computation);
        let at = comp.and_then(|c| {
            let (line, col, _) = c.origin(self);
            let (l, k) = hlo::find_definition(
                c.text(self),
                &problem.computation,
                problem.instruction.as_deref(),
            )?;
            Some((
                l + line as usize - 1,
                if l == 1 { k + col as usize - 1 } else { k },
            ))
        });
        match at {
            Some((line, col)) => format!("{file}:{line}:{col}: error: {problem}"),
            None => format!("{file}: error: {problem}"),
        }
    }

    /// Parses and assigns every computation, and returns the module with
    /// the assignments. Parse errors carry absolute positions.
    pub fn assigned_module(
        &self,
    ) -> Result<
        (
            Module,
            std::collections::BTreeMap<CompId, ComputationAssignment>,
        ),
        AssignError,
    > {
        let m = self
            .module
            .ok_or_else(|| AssignError::Pass(PassError::Module("no module is loaded".into())))?;
        let mut computations = Vec::new();
        let mut assignments = std::collections::BTreeMap::new();
        self.warm(m);
        for &c in m.computations(self) {
            let comp = match parse_of(self, c) {
                Ok(comp) => comp,
                Err(e) => return Err(AssignError::Parse(Box::new(absolute(&e, c, self, m)))),
            };
            computations.push(Arc::unwrap_or_clone(comp));
            let a = final_assignment(self, c).clone().map_err(|e| match e {
                AssignError::Parse(p) => AssignError::Parse(Box::new(absolute(&p, c, self, m))),
                other => other,
            })?;
            assignments.insert(c.id(self), ComputationAssignment::clone(&a));
        }
        Ok((self.module_of(m, computations), assignments))
    }

    /// The loaded module as parsed, before any pass. Parse errors carry
    /// absolute positions.
    pub fn parsed_module(&self) -> Result<Module, AssignError> {
        let m = self
            .module
            .ok_or_else(|| AssignError::Pass(PassError::Module("no module is loaded".into())))?;
        let mut computations = Vec::new();
        for &c in m.computations(self) {
            match parse_of(self, c) {
                Ok(comp) => computations.push(Arc::unwrap_or_clone(comp)),
                Err(e) => return Err(AssignError::Parse(Box::new(absolute(&e, c, self, m)))),
            }
        }
        Ok(self.module_of(m, computations))
    }

    /// Runs the assignment queries in the pass's schedule
    /// ([`CallGraph::schedule`]): alone (or free) assignments callees
    /// first, then final ones callers first. Each query then finds the
    /// queries it reads already computed, or already checked in this
    /// revision, so that neither computing nor re-checking them recurses
    /// as deep as the call graph. Failures stay memoised, to be reported
    /// in computation order.
    pub fn warm(&self, m: SourceModule) {
        self.warm_but(m, &[]);
    }

    /// The independent leaves of module `m` (see
    /// [`layout_assignment::is_independent_leaf`]): computations that are
    /// only applied (by reductions, sorts, scatters) and call nothing.
    /// Their final assignments read no other computation's and none reads
    /// theirs, so they can be made beside the others' ([`Database::warm_but`]).
    pub fn independent_leaves(&self, m: SourceModule) -> Vec<SourceComputation> {
        let graph = self.call_graph_aside(m);
        let entry = m.entry_id(self);
        m.computations(self)
            .iter()
            .copied()
            .filter(|c| layout_assignment::is_independent_leaf(graph, entry, c.id(self)))
            .collect()
    }

    /// [`Database::warm`], but for the computations `left` (independent
    /// leaves, which another thread warms).
    pub fn warm_but(&self, m: SourceModule, left: &[SourceComputation]) {
        let plan = self.warm_plan(m, left);
        let schedule = plan.graph.schedule();
        let wanted = |id: &&CompId| !plan.left.contains(id);
        for &id in schedule.bottom_up.iter().filter(wanted) {
            if let Some(&c) = plan.comps.get(id.index()) {
                self.warm_up(c, &plan);
            }
        }
        // The entry's assignment, last above, reads every computation it
        // calls: the final assignments run on a handle of their own.
        let top = self.scratch();
        for &id in schedule.top_down.iter().filter(wanted) {
            if let Some(&c) = plan.comps.get(id.index()) {
                top.warm_down(c);
            }
        }
    }

    /// What warming module `m` reads, the computations `left` left out
    /// (see [`WarmPlan`]).
    pub fn warm_plan(&self, m: SourceModule, left: &[SourceComputation]) -> WarmPlan<'_> {
        let graph = self.call_graph_aside(m);
        WarmPlan {
            graph,
            entry: m.entry_id(self),
            comps: m.computations(self),
            left: left.iter().map(|c| c.id(self)).collect(),
        }
    }

    /// The assignments of `c` that its callers read, callees first (see
    /// [`Database::warm`]): its alone assignment (and the free one, for a
    /// branch; a branch's alone one and a loop condition's come with the
    /// computation that holds them), and the cost its caller weighs.
    pub fn warm_up(&self, c: SourceComputation, plan: &WarmPlan<'_>) {
        let graph = plan.graph;
        let id = c.id(self);
        if graph.is_branch(id) {
            let _ = free_assignment(self, c);
        }
        if graph.is_condition(id) || graph.is_branch(id) {
            return;
        }
        for &callee in &graph.callees[id.index()] {
            if graph.is_branch(callee)
                && let Some(&b) = plan.comps.get(callee.index())
            {
                let _ = alone_assignment(self, b);
            }
        }
        let _ = alone_assignment(self, c);
        if layout_assignment::bound_site(graph, plan.entry, id).is_some() {
            let _ = alone_cost(self, c);
        }
    }

    /// The final assignment of `c`, callers first (see [`Database::warm`]).
    pub fn warm_down(&self, c: SourceComputation) {
        let _ = final_assignment(self, c);
    }

    /// The call graph of module `m`. It reads every computation, so it is
    /// computed on a handle of its own (see [`Database::scratch`]), then
    /// looked up on this one.
    fn call_graph_aside(&self, m: SourceModule) -> &CallGraph {
        let _ = call_graph(&self.scratch(), m);
        call_graph(self, m)
    }

    /// Another handle on the database, with its own record of the queries
    /// running, for work that follows or precedes a query that reads every
    /// computation (a join, the call graph, the entry's assignment).
    ///
    /// salsa keeps, per handle, one record of reads for each depth of
    /// nested queries, and reuses it: each query that runs clears it, in
    /// time proportional to the most reads the record ever held. On the
    /// handle a join ran on, every later query at that depth would clear a
    /// table the size of the module: quadratic on a module of many
    /// computations (in a profile of a first run on one of 16,667, 6.6%
    /// of the samples were clearing those tables; 0.4% with this). A
    /// handle made for the work takes its record with it when dropped.
    pub fn scratch(&self) -> Database {
        self.clone()
    }

    /// A handle for work that reads every computation: a
    /// [`scratch`](Database::scratch) one when an input was written since
    /// the last successful run, else this one. With nothing written, every
    /// value such work reads is looked up and no query runs, so there is no
    /// record of reads to keep apart, and a re-run with no change does not
    /// pay for a handle.
    pub fn for_joins(&self) -> std::borrow::Cow<'_, Database> {
        if self.written == 0 {
            std::borrow::Cow::Borrowed(self)
        } else {
            std::borrow::Cow::Owned(self.scratch())
        }
    }

    fn module_of(&self, m: SourceModule, computations: Vec<Computation>) -> Module {
        let header = m.header(self);
        Module {
            name: header.name.clone(),
            entry_computation_layout: entry_layout(self, m).clone(),
            entry_computation_layout_given: header.entry_computation_layout.is_some(),
            input_output_alias: header.input_output_alias.clone(),
            is_scheduled: header.is_scheduled,
            header_attrs: header.header_attrs.clone(),
            debug_tables: header.debug_tables.clone(),
            computations,
            entry: m.entry_id(self),
        }
    }
}

/// A parse error re-based from its computation's text to the file.
pub fn absolute(e: &ParseError, c: SourceComputation, db: &dyn Db, m: SourceModule) -> ParseError {
    let (line, col, offset) = c.origin(db);
    let mut e = e.clone();
    if e.line == 1 {
        e.col += col - 1;
    }
    e.line += line - 1;
    e.offset += offset;
    e.file = m.file_name(db).clone();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODULE: &str = "HloModule m\n\n\
        add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
        neg {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n\n\
        ENTRY main {\n  p = f32[4] parameter(0)\n  ROOT c = f32[4] call(p), to_apply=neg\n}\n";

    /// Weak references to the parse of every computation of `db`'s module.
    fn parses(db: &Database) -> Vec<std::sync::Weak<Computation>> {
        let comps = db.module().unwrap().computations(db).clone();
        comps
            .iter()
            .map(|&c| Arc::downgrade(&parse_of(db, c).unwrap()))
            .collect()
    }

    /// The steps after assignment take a computation's parse for their
    /// copy instead of copying it, and a reader after them still finds
    /// the same parse (made again).
    #[test]
    fn the_steps_take_the_parse_and_later_readers_parse_again() {
        let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
        let mut db = Database::default();
        db.load(MODULE, "m.hlo", target).unwrap();
        let comps = db.module().unwrap().computations(&db).clone();
        let weak = parses(&db);
        let text = |c| format!("{:?}", parse_of(&db, c).unwrap());
        let before: Vec<String> = comps.iter().map(|&c| text(c)).collect();
        for &c in &comps {
            assert!(pipeline::transformed(&db, c).comp.is_some());
        }
        assert!(
            weak.iter().all(|w| w.upgrade().is_none()),
            "a parse was copied, not taken"
        );
        let after: Vec<String> = comps.iter().map(|&c| text(c)).collect();
        assert_eq!(before, after);
    }

    /// A load counts the computations of the module before it that the
    /// new one does not name, and `would_leave_behind` foresees them.
    #[test]
    fn loads_count_the_computations_they_leave_behind() {
        let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
        let mut db = Database::default();
        assert_eq!(db.would_leave_behind(["x"]), LeftBehind::default());
        db.load(MODULE, "m.hlo", target.clone()).unwrap();
        assert_eq!(db.left_behind(), LeftBehind::default());
        // The same module again, and one with a body changed: nothing.
        db.load(MODULE, "m.hlo", target.clone()).unwrap();
        db.load(
            &MODULE.replace("negate(x)", "abs(x)"),
            "m.hlo",
            target.clone(),
        )
        .unwrap();
        assert_eq!(db.left_behind(), LeftBehind::default());
        // `neg` renamed: its input stays behind, with its text.
        let renamed = MODULE.replace("neg ", "neg2 ").replace("=neg\n", "=neg2\n");
        let neg_text = db.computation_text("neg").unwrap();
        let expected = LeftBehind {
            computations: 1,
            text_bytes: neg_text.len(),
        };
        assert_eq!(db.would_leave_behind(["add", "neg2", "main"]), expected);
        db.load(&renamed, "m.hlo", target.clone()).unwrap();
        assert_eq!(db.left_behind(), expected);
        assert!(db.computation_text("neg").is_none());
        // Back to `neg`: `neg2` is left behind too, and `neg` is a new
        // input (salsa cannot bring the old one back by name).
        db.load(MODULE, "m.hlo", target).unwrap();
        assert_eq!(db.left_behind().computations, 2);
    }

    #[test]
    fn evicted_parses_are_handed_over_to_be_freed_later() {
        let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
        let mut db = Database::default();
        db.load(MODULE, "m.hlo", target).unwrap();
        let alive = |weak: &[std::sync::Weak<Computation>]| {
            weak.iter().filter(|w| w.upgrade().is_some()).count()
        };

        // Outside a release, salsa frees what it evicts where it evicts it:
        // the LRU keeps one parse of the three.
        let weak = parses(&db);
        salsa::Database::trigger_lru_eviction(&mut db);
        assert_eq!(alive(&weak), 1);

        // In a release, what is evicted is handed over, alive, with its last
        // reference, and freed when the list is dropped.
        let weak = parses(&db);
        let kept = collecting_let_go(|| salsa::Database::trigger_lru_eviction(&mut db));
        assert_eq!(kept.len(), 2);
        assert!(kept.iter().all(|c| Arc::strong_count(c) == 1));
        assert_eq!(alive(&weak), 3);
        drop(kept);
        assert_eq!(alive(&weak), 1);
    }
}
