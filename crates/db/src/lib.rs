//! The incremental database: a module (its header and the source of each
//! computation) and a target as salsa inputs, per-computation tracked
//! queries (the parsed graph, its calls, its constraints, its assignment,
//! its signature, and the steps after assignment), and the engine that
//! runs them ([`engine`]).
//!
//! Granularity is one computation. Re-sending a module with one computation
//! changed re-parses and re-assigns that computation; the computations
//! around it run again only when what they read of it changed, because
//! every query returns plain comparable data and salsa backdates equal
//! results.
//!
//! No query reads another computation's assignment by asking for it.
//! What a computation's assignment reads of the others is written into
//! inputs of its own by the engine, which pushes a change from the
//! computation it happened in to the ones that read it, and only there:
//! the call graph ([`SourceModule::calls`]), what each computation exports
//! to its callers ([`SourceComputation::exported`] and
//! [`SourceComputation::free_exported`]), and the boundary its only caller
//! chose for it ([`SourceComputation::boundary`]). So a query's
//! dependencies stay within its own computation and these inputs, and
//! salsa checks what an edit did not reach without walking the call
//! graph. Three kinds of read still cross computations, each into a part
//! that does not read further: an input check reads its callees' input
//! signatures ([`InputFacts::stub`]), printing reads their output
//! signatures ([`pipeline::output_stub`]), and the call-boundary rule
//! weighs a callee under a boundary ([`bounded_cost`],
//! [`bounded_signature`]), which the engine records
//! ([`Db::consulted`]).
//!
//! The one pipeline option that changes a computation's assignment is the
//! solver (heuristic or exact, with its time limit): a field of the module
//! input, so changing it re-runs every assignment. The pass list and
//! relayout's `expand_relayouts` are another field (`pipeline::Steps`),
//! read by the steps after assignment ([`pipeline`]); `verify` decides
//! whether each computation's output is checked as it is printed. The
//! tiling options (`keep_untiled_entry`, `combine_dimensions`) are fields
//! of the target, which is an input.
//!
//! Architecture invariant: salsa values never hold a petgraph graph directly.
//! A parsed computation sits behind an `Arc` and compares by a fingerprint
//! of the text and names it was parsed from, which determine it.

pub mod calls;
pub mod engine;
mod freeing;
pub mod output;
pub mod pipeline;
mod place;
mod pool;

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use hlo::{
    CallRole, CompId, Computation, ComputationLayout, IoAlias, Module, ModuleFacts, ParseError,
};
use layout_assignment::{
    BoundSite, CallQueries, ComputationAssignment, Context, Moved, PassError, Phase, Signature,
    SolverOptions, WEIGH_LEVELS,
};
use rustc_hash::{FxHashMap, FxHasher};
use salsa::{Durability, Setter};
use target::TargetSpec;

pub use calls::{Calls, Rank};
pub use engine::{Run, RunError, Step, Timing};

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

/// The computations' names, in order, with each one's id: what a parse
/// looks names up in. An input of the module rather than a query over its
/// computations, which every parse would then read (and salsa check after
/// every edit).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameTable {
    names: Vec<String>,
    index: FxHashMap<String, CompId>,
}

impl NameTable {
    /// The table of these names, in computation order (the first of two
    /// equal names is the one found).
    pub fn new(names: Vec<String>) -> NameTable {
        let mut index = FxHashMap::default();
        for (i, n) in names.iter().enumerate() {
            index.entry(n.clone()).or_insert(CompId(i as u32));
        }
        NameTable { names, index }
    }

    /// The names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The id of the computation named `name`.
    pub fn get(&self, name: &str) -> Option<CompId> {
        self.index.get(name).copied()
    }

    /// The name of computation `id` (empty when out of range).
    pub fn name(&self, id: CompId) -> &str {
        self.names.get(id.index()).map_or("", String::as_str)
    }
}

/// A module: its header, its computations, the target and the file name.
/// Every field is of high durability but the two the engine derives from
/// the computations (their names and calls), so that the engine's writes
/// during a run leave the values that read only texts and options as they
/// were checked.
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
    /// The computations' names.
    #[returns(ref)]
    #[default]
    pub names: Arc<NameTable>,
    /// The call graph, written by the engine (see [`calls`]).
    #[returns(ref)]
    #[default]
    pub calls: Arc<Calls>,
}

/// A computation's signature as its callers read it, or why its
/// assignment failed.
pub type SignatureResult = Result<Signature, AssignError>;

/// What a computation's callers read of its assignment, as the engine
/// wrote it after the assignment ran (`None` until then): its signature
/// (for a computation whose boundary no caller decides, its final one; for
/// one whose boundary its only caller decides, the one it chooses alone)
/// and, for the latter, what its alone assignment moves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// The signature.
    pub signature: Option<SignatureResult>,
    /// The cost alone, for a computation whose caller decides its boundary.
    pub cost: Option<Result<Moved, AssignError>>,
}

/// The boundary a computation's only caller chose for it (`None` when it
/// chose none, or the computation has no such caller), or why that
/// caller's assignment failed: written by the engine from the caller's
/// final assignment (for a loop condition, from its body's final
/// signature).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen(pub Result<Option<Signature>, AssignError>);

impl Default for Chosen {
    fn default() -> Self {
        Chosen(Ok(None))
    }
}

/// One computation's text. Its own fields are of high durability; the
/// three the engine writes from the computations around it are of low
/// durability (see [`SourceModule`]).
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
    /// The module it belongs to.
    #[returns(copy)]
    pub module: SourceModule,
    /// What its callers read of its assignment (see [`Exported`]).
    #[returns(ref)]
    #[default]
    pub exported: Exported,
    /// For a conditional branch, the signature it would choose free of
    /// the conditional's requirement on its result, which its sibling
    /// branches read (see [`free_signature`]).
    #[returns(ref)]
    #[default]
    pub free_exported: Option<SignatureResult>,
    /// The boundary its only caller chose for it (see [`Chosen`]).
    #[returns(ref)]
    #[default]
    pub boundary: Chosen,
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
    /// The computations it names (see [`InputFacts::named`]), found once
    /// for the fingerprint and kept for the input facts.
    named: Vec<CompId>,
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

/// The threads freeing discarded databases (see [`Database::discard`]): at
/// most two at once, so that a caller that discards faster than databases
/// are freed waits for the oldest, and the memory waiting to be freed stays
/// bounded.
static DISCARDING: freeing::Freeing = freeing::Freeing::new("tessera-discard", 2);

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
pub fn names(db: &dyn Db, m: SourceModule) -> &[String] {
    m.names(db).names()
}

/// Parses one computation.
///
/// A parse is the largest thing a session holds of a computation, about
/// fourteen times its text, so it is not kept between runs: the steps after
/// it keep what later runs read of the input (signature stubs, names,
/// calls, problems, parse errors) in small queries of their own, and a run
/// that needs a computation's parse again, after an edit of it or of a
/// signature it reads, parses it again. The engine widens the LRU to the
/// whole module while it runs (it writes inputs as it goes, and salsa
/// evicts at every new revision), so a run never parses a computation
/// twice. `tests/incremental.rs` checks that a re-run after an edit parses
/// only the edited computation.
#[salsa::tracked(returns(ref), lru = 1)]
pub fn parsed(db: &dyn Db, c: SourceComputation) -> Parsed {
    let parse = parse_text(db, c);
    Parsed {
        held: parse.result.map(|comp| Mutex::new(Some(Arc::new(comp)))),
        fingerprint: parse.fingerprint,
        named: parse.named,
    }
}

/// What [`parse_text`] gives: the parse, the fingerprint of what it
/// depends on, and the computations it names (none when it failed).
struct TextParse {
    result: Result<Computation, ParseError>,
    fingerprint: u64,
    named: Vec<CompId>,
}

/// Sets how many parses salsa's LRU keeps (see [`parsed`]).
pub(crate) fn keep_parses(db: &mut Database, n: usize) {
    parsed::set_lru_capacity(db, n);
}

/// Sets how many alone assignments salsa's LRU keeps (see
/// [`alone_assignment`]). Not their constraints: an evicted value cannot
/// be compared with the next one, and the constraints are what keeps an
/// assignment from running again when what it reads did not change.
pub(crate) fn keep_assignments(db: &mut Database, n: usize) {
    alone_assignment::set_lru_capacity(db, n);
}

/// Parses `c`'s text, looking up the computations it names in its module,
/// with a fingerprint of what the result depends on. The first parse of a
/// computation loaded into an empty database takes the parse made with
/// the module's outline (see [`Seeds`]), which is what parsing its text
/// gives.
fn parse_text(db: &dyn Db, c: SourceComputation) -> TextParse {
    let m = c.module(db);
    let table = m.names(db);
    let text = c.text(db);
    if let Some(comp) = db.take_seed(c) {
        let named = pipeline::named(&comp);
        let looked_up = named
            .iter()
            .map(|&id| (table.name(id).to_string(), Some(id)))
            .collect();
        let fingerprint = parse_fingerprint(text, looked_up);
        return TextParse {
            result: Ok(comp),
            fingerprint,
            named,
        };
    }
    let looked_up = Mutex::new(Vec::new());
    let resolve = |name: &str| {
        let id = table.get(name);
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
    let looked_up = looked_up.into_inner().unwrap_or_default();
    let named = result.as_ref().map(pipeline::named).unwrap_or_default();
    TextParse {
        result,
        fingerprint: parse_fingerprint(text, looked_up),
        named,
    }
}

/// The fingerprint of a parse: its text and the computations it looked up
/// by name, with the ids found. A parse depends on nothing else. The names
/// are taken once each, in id order, since a large computation is parsed
/// in pieces that look names up in no fixed order; a parse that succeeded
/// looked up exactly the computations it names (a name not found is an
/// error), which is how a seeded parse counts them.
fn parse_fingerprint(text: &str, mut looked_up: Vec<(String, Option<CompId>)>) -> u64 {
    looked_up.sort_unstable_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    looked_up.dedup();
    let mut h = FxHasher::default();
    text.hash(&mut h);
    looked_up.hash(&mut h);
    h.finish()
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
        None => parse_text(db, c).result.map(Arc::new),
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
        None => parse_text(db, c).result,
    }
}

/// A computation's parse error, if any: what the module's input check
/// reads of each computation's parse. It is kept with the computation's
/// other input facts (see [`input_facts`]), so that the check does not
/// need the parses themselves (see [`parsed`]).
pub fn parse_error(db: &dyn Db, c: SourceComputation) -> Option<&ParseError> {
    input_facts(db, c).parse_error.as_deref()
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
    /// Boxed: rare, and a session keeps the facts of every computation.
    pub parse_error: Option<Box<ParseError>>,
}

/// The input facts of one computation: one query, since all come from one
/// read of the parse. The engine builds the call graph from every
/// computation's calls (see [`calls`]), and keeps the facts (shared) to
/// compare a later run's with.
#[salsa::tracked(returns(ref))]
pub fn input_facts(db: &dyn Db, c: SourceComputation) -> Arc<InputFacts> {
    Arc::new(match parse_of(db, c) {
        Ok(comp) => InputFacts {
            roles: hlo::calls_of(&comp),
            named: parsed(db, c).named.clone(),
            stub: pipeline::Stub(Some(Arc::new(hlo::CalleeSignature::of(&comp)))),
            parse_error: None,
        },
        Err(e) => InputFacts {
            parse_error: Some(Box::new(e)),
            ..InputFacts::default()
        },
    })
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
                .collect::<Vec<_>>()
                .into(),
            result: comp
                .root()
                .map_or(shape::Shape::Tuple(Vec::new()), |r| {
                    comp.inst(r).shape.clone()
                })
                .into(),
        },
        _ => ComputationLayout {
            parameters: Arc::default(),
            result: shape::Shape::Tuple(Vec::new()).into(),
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
    /// Boxed, as the parse error is: an error is rare, and every kept
    /// signature, cost and boundary is as large as its error variant (a
    /// session keeps several of each computation).
    #[error("{0}")]
    Pass(Box<PassError>),
}

impl From<PassError> for AssignError {
    fn from(e: PassError) -> AssignError {
        AssignError::Pass(Box::new(e))
    }
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
        self.m.names(self.db).name(id).to_string()
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
        AssignError::Pass(p) => PassError::clone(p),
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
    let graph = &m.calls(db).graph;
    let facts = Facts { db, m };
    let id = c.id(db);
    let mut q = Queries { db, m, reader: c };
    let mut signature = |other: CompId, phase: Phase| q.signature(other, phase);
    layout_assignment::context_for(&facts, graph, id, phase, boundary, &mut signature)
        .map(Arc::new)
        .map_err(AssignError::from)
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

/// The other computations, as the pass's call-boundary rule asks for them
/// while `reader`'s queries run: signatures and costs from what each
/// exported (inputs the engine wrote), and a callee weighed under a
/// boundary from its bounded queries, which the database records as
/// consulted by `reader` (see [`Db::consulted`]).
struct Queries<'db> {
    db: &'db dyn Db,
    m: SourceModule,
    reader: SourceComputation,
}

impl Queries<'_> {
    fn comp(&self, id: CompId) -> Result<SourceComputation, PassError> {
        self.m
            .computations(self.db)
            .get(id.index())
            .copied()
            .ok_or_else(|| PassError::Module(format!("computation #{} does not exist", id.0)))
    }

    /// Whether the only caller of `c` decides its boundary.
    fn bound(&self, c: SourceComputation) -> bool {
        let graph = &self.m.calls(self.db).graph;
        layout_assignment::bound_site(graph, self.m.entry_id(self.db), c.id(self.db)).is_some()
    }
}

impl layout_assignment::CallQueries for Queries<'_> {
    fn signature(&mut self, c: CompId, phase: Phase) -> Result<Signature, PassError> {
        let c = self.comp(c)?;
        let db = self.db;
        let is_branch = self.m.calls(db).graph.is_branch(c.id(db));
        // What the engine wrote, which is what the query gives; a
        // computation whose boundary its caller decides is never asked
        // for its final or free signature by another (`context_for` asks
        // for its alone one), but should it be, the query answers.
        let exported = match phase {
            Phase::Free if is_branch => c.free_exported(db).as_ref(),
            Phase::Final | Phase::Free if self.bound(c) => None,
            _ => c.exported(db).signature.as_ref(),
        };
        let result = match exported {
            Some(s) => s.clone(),
            None => match phase {
                Phase::Free => free_signature(db, c),
                Phase::Final => final_signature(db, c),
                Phase::Alone => alone_signature(db, c),
            },
        };
        result.map_err(|e| pass_error(&e))
    }

    fn cost(
        &mut self,
        c: CompId,
        boundary: Option<Signature>,
        levels: u8,
    ) -> Result<Moved, PassError> {
        let c = self.comp(c)?;
        let result = match boundary {
            None => match &c.exported(self.db).cost {
                Some(cost) => cost.clone(),
                None => alone_cost(self.db, c),
            },
            Some(b) => {
                self.db.consulted(c, self.reader);
                bounded_cost(self.db, BoundaryKey::new(self.db, c, b, levels)).clone()
            }
        };
        result.map_err(|e| pass_error(&e))
    }

    fn signature_under(
        &mut self,
        c: CompId,
        boundary: Signature,
        levels: u8,
    ) -> Result<Signature, PassError> {
        let c = self.comp(c)?;
        self.db.consulted(c, self.reader);
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
    let table = m.names(db);
    let name_of = |c: CompId| table.name(c).to_string();
    let graph = &m.calls(db).graph;
    let entry = m.entry_id(db);
    let mut q = Queries { db, m, reader: c };
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
    .map_err(AssignError::from)
}

/// The assignment of a computation without its only caller's choice (for
/// any other computation, its final assignment).
///
/// Like a parse, it is not kept between runs (the engine widens the LRU
/// while it runs): it was the largest value a session held after the
/// texts, and a later run reads it only to redo the computation's steps.
/// What other computations and the engine read of it are queries of their
/// own, kept: its signature and cost alone ([`exports_of`]), the
/// boundaries it decides ([`callee_boundaries`]) and, for a computation
/// nothing reads, whether it failed ([`alone_error`]); salsa finds those
/// unchanged without it.
#[salsa::tracked(returns(ref), lru = 1)]
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

/// Whether the only caller of `c` decides its boundary (see
/// [`layout_assignment::bound_site`]).
pub fn is_bound(db: &dyn Db, c: SourceComputation) -> bool {
    let m = c.module(db);
    layout_assignment::bound_site(&m.calls(db).graph, m.entry_id(db), c.id(db)).is_some()
}

/// The assignment callers see: every requirement applied. For a
/// computation whose boundary its only caller decides, the bounded one
/// for the boundary that caller chose ([`SourceComputation::boundary`],
/// which the engine writes), else the alone one; a loop condition follows
/// its body's final parameters. Not a query of its own: it picks one of
/// two queries' values, and what reads it depends on the one it picked.
pub fn final_assignment(db: &dyn Db, c: SourceComputation) -> AssignmentResult {
    // Only a bound computation reads the boundary, so that the others'
    // readers keep the durability of what they read.
    if !is_bound(db, c) {
        return alone_assignment(db, c).clone();
    }
    match &c.boundary(db).0 {
        Err(e) => Err(e.clone()),
        Ok(Some(b)) => {
            bounded_assignment(db, BoundaryKey::new(db, c, b.clone(), WEIGH_LEVELS)).clone()
        }
        Ok(None) => alone_assignment(db, c).clone(),
    }
}

/// The assignment of a conditional branch before the conditional fixes its
/// result (asked only for branches: see [`free_signature`]).
#[salsa::tracked(returns(ref))]
pub fn free_assignment(db: &dyn Db, c: SourceComputation) -> AssignmentResult {
    assign(db, c, free_constraints(db, c), WEIGH_LEVELS)
}

/// The signature part of an assignment's outcome.
fn signature_of(a: &AssignmentResult) -> SignatureResult {
    a.as_ref()
        .map(|a| a.signature.clone())
        .map_err(Clone::clone)
}

/// The final signature (see [`final_assignment`]), from the signature
/// queries rather than the assignments: those are small and kept, where
/// an alone assignment is dropped after the run that made it (see
/// [`alone_assignment`]).
pub fn final_signature(db: &dyn Db, c: SourceComputation) -> SignatureResult {
    if !is_bound(db, c) {
        return alone_signature(db, c);
    }
    match &c.boundary(db).0 {
        Err(e) => Err(e.clone()),
        Ok(Some(b)) => {
            bounded_signature(db, BoundaryKey::new(db, c, b.clone(), WEIGH_LEVELS)).clone()
        }
        Ok(None) => alone_signature(db, c),
    }
}

/// The free signature of a branch: its assignment before the conditional
/// fixes its result; for any other computation, its final signature.
pub fn free_signature(db: &dyn Db, c: SourceComputation) -> SignatureResult {
    let m = c.module(db);
    if m.calls(db).graph.is_branch(c.id(db)) {
        signature_of(free_assignment(db, c))
    } else {
        final_signature(db, c)
    }
}

/// The signature a computation chooses without its only caller: what that
/// caller reads first (from [`exports_of`], which is kept when the
/// assignment is not).
pub fn alone_signature(db: &dyn Db, c: SourceComputation) -> SignatureResult {
    match &exports_of(db, c).signature {
        Some(signature) => signature.clone(),
        None => signature_of(alone_assignment(db, c)),
    }
}

/// The signature of a bounded assignment: a query of its own, since a
/// caller weighing a callee under a boundary reads it, and should run
/// again only when it changed, not whenever the assignment did.
#[salsa::tracked(returns(ref))]
pub fn bounded_signature(db: &dyn Db, key: BoundaryKey) -> SignatureResult {
    signature_of(bounded_assignment(db, key))
}

/// Why a computation's alone assignment failed, if it did: what the
/// engine's phase 2 asks of a computation nothing reads, which makes its
/// assignment when it changed. A query of its own, as [`exports_of`] is,
/// and smaller: nothing reads such a computation's signature.
#[salsa::tracked(returns(ref))]
pub fn alone_error(db: &dyn Db, c: SourceComputation) -> Option<AssignError> {
    alone_assignment(db, c).as_ref().err().cloned()
}

/// What a computation's alone assignment moves, with the callees whose
/// boundary it decides: what the engine exports to its callers (see
/// [`exports_of`]), computed when it does.
pub fn alone_cost(db: &dyn Db, c: SourceComputation) -> Result<Moved, AssignError> {
    let a = alone_assignment(db, c).clone()?;
    subtree(db, c, &a, WEIGH_LEVELS)
}

/// What a computation's bounded assignment moves, with the callees whose
/// boundary it decides.
#[salsa::tracked(returns(ref))]
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
    let mut q = Queries { db, m, reader: c };
    let (graph, entry) = (&m.calls(db).graph, m.entry_id(db));
    layout_assignment::subtree_cost(graph, entry, c.id(db), a, levels, &mut q)
        .map_err(AssignError::from)
}

/// What `c` exports to its callers once its alone assignment is made (see
/// [`Exported`]): its signature alone, and its cost alone when its caller
/// decides its boundary.
///
/// A query of its own, kept when the assignment is dropped (see
/// [`alone_assignment`]): what other computations and the engine read of
/// an alone assignment is this, and the boundaries it decides
/// ([`boundaries_after`]), and salsa finds those unchanged without the
/// assignment.
#[salsa::tracked(returns(ref))]
pub fn exports_of(db: &dyn Db, c: SourceComputation) -> Exported {
    Exported {
        signature: Some(signature_of(alone_assignment(db, c))),
        cost: is_bound(db, c).then(|| alone_cost(db, c)),
    }
}

/// The boundaries `c`'s final assignment decides, for the computations it
/// decides them for: each callee whose boundary it chooses (from its
/// final assignment, see [`callee_boundaries`]) and, when `c` is a loop
/// body whose condition takes the loop state from it, that condition
/// (from `c`'s final signature).
pub fn boundaries_after(db: &dyn Db, c: SourceComputation) -> Vec<(SourceComputation, Chosen)> {
    let m = c.module(db);
    let (graph, entry, id) = (&m.calls(db).graph, m.entry_id(db), c.id(db));
    let comps = m.computations(db);
    // Asked only of a computation that decides a callee's boundary, so
    // that the others (most, on a module of many small computations) have
    // no memo of it.
    let mut out = if decided_callees(db, c).next().is_some() {
        callee_boundaries(db, c).clone()
    } else {
        Vec::new()
    };
    if let Some(BoundSite::WhileBody { condition, .. }) =
        layout_assignment::bound_site(graph, entry, id)
        && let Some(&k) = comps.get(condition.index())
    {
        let chosen =
            final_signature(db, c).map(|s| Some(layout_assignment::condition_boundary(&s)));
        out.push((k, Chosen(chosen)));
    }
    out
}

/// The callees whose boundary `c` decides (see
/// [`layout_assignment::bound_site`]), as ids and inputs.
fn decided_callees(
    db: &dyn Db,
    c: SourceComputation,
) -> impl Iterator<Item = (CompId, SourceComputation)> + '_ {
    let m = c.module(db);
    let (graph, entry, id) = (&m.calls(db).graph, m.entry_id(db), c.id(db));
    let comps = m.computations(db);
    let callees = graph.callees.get(id.index()).map_or(&[][..], Vec::as_slice);
    callees.iter().filter_map(move |&callee| {
        let decided = matches!(
            layout_assignment::bound_site(graph, entry, callee),
            Some(BoundSite::Called { caller } | BoundSite::WhileBody { caller, .. }) if caller == id
        );
        let d = comps.get(callee.index()).copied();
        d.filter(|_| decided).map(|d| (callee, d))
    })
}

/// The boundaries `c`'s final assignment chose for the callees whose
/// boundary it decides. A query of its own, kept when the assignment is
/// not (see [`exports_of`]).
#[salsa::tracked(returns(ref))]
pub fn callee_boundaries(db: &dyn Db, c: SourceComputation) -> Vec<(SourceComputation, Chosen)> {
    let assignment = final_assignment(db, c);
    decided_callees(db, c)
        .map(|(callee, d)| {
            let chosen = assignment
                .as_ref()
                .map(|a| a.boundary_for(callee).cloned())
                .map_err(Clone::clone);
            (d, Chosen(chosen))
        })
        .collect()
}

/// One query execution, as salsa's event hook reported it.
#[derive(Clone, Copy, Debug)]
struct Execution {
    query: salsa::IngredientIndex,
    key: salsa::Id,
    /// Whether the query ran, or an earlier value was checked and kept.
    ran: bool,
}

/// The database the queries run on: salsa's, and two records kept outside
/// salsa because no query reads them.
#[salsa::db]
pub trait Db: salsa::Database {
    /// Notes that an assignment of `c` is being computed (see
    /// [`Database::recomputed_computations`]).
    fn assigned(&self, c: SourceComputation);

    /// Notes that a query of `reader` weighed `callee` under a boundary
    /// (its bounded cost or signature): a value of `callee` that is not
    /// one of its inputs, which `reader`'s values now depend on. The engine
    /// makes `reader` run again whenever `callee` might have changed.
    fn consulted(&self, callee: SourceComputation, reader: SourceComputation);

    /// Takes the parse of `c` made when its module was loaded into an
    /// empty database, if one is left: its first parse takes it rather
    /// than parsing the text again.
    fn take_seed(&self, c: SourceComputation) -> Option<Computation>;
}

/// Computations parsed while their module was loaded into an empty
/// database, beside the outline scan, as a stateless parse of a large
/// module does (see [`hlo::outline_and_parse`]); each computation's first
/// parse takes its own ([`parse_text`]). Made only for a first load, and
/// dropped as soon as any text is loaded or edited again, so that a seed
/// is always the parse of its computation's text under the module's
/// names.
///
/// Kept by position, one slot each, so that threads taking their own
/// seeds neither probe a table of whole computations nor wait on one lock:
/// on the module of 16,667 computations, a hash map behind one lock was
/// 2.4% of a first run's `perf` samples.
#[derive(Debug, Default)]
pub(crate) struct Seeds {
    slots: std::sync::RwLock<Vec<Seed>>,
    /// How many slots still hold a seed.
    left: std::sync::atomic::AtomicUsize,
}

/// One computation's seed, while it is not taken.
type Seed = Mutex<Option<(SourceComputation, Computation)>>;

impl Seeds {
    /// Takes the seed of `c`, the computation at `index`.
    fn take(&self, c: SourceComputation, index: usize) -> Option<Computation> {
        use std::sync::atomic::Ordering;
        let taken = {
            let slots = self.slots.read().ok()?;
            let mut slot = slots.get(index)?.lock().ok()?;
            match slot.take() {
                Some((held, comp)) if held == c => Some(comp),
                other => {
                    *slot = other;
                    None
                }
            }
        };
        if taken.is_some() && self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The slots of a large module's seeds outlive them otherwise
            // (a session would hold them, one computation's size each).
            self.clear();
        }
        taken
    }

    /// Holds `seeds`, the parses of the computations in order.
    fn set(&self, seeds: impl IntoIterator<Item = (SourceComputation, Computation)>) {
        let slots: Vec<Seed> = seeds.into_iter().map(|s| Mutex::new(Some(s))).collect();
        self.left
            .store(slots.len(), std::sync::atomic::Ordering::Release);
        if let Ok(mut held) = self.slots.write() {
            *held = slots;
        }
    }

    /// Drops every seed left (see [`Seeds`]).
    fn clear(&self) {
        if let Ok(mut held) = self.slots.write() {
            *held = Vec::new();
        }
        self.left.store(0, std::sync::atomic::Ordering::Release);
    }

    /// How many seeds are left.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.left.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Who weighed each computation under a boundary (see [`Db::consulted`]):
/// never forgotten, so that it holds every reader a value in the
/// database was computed by (and perhaps some that moved on since).
#[derive(Debug, Default)]
pub(crate) struct Consulted(Mutex<FxHashMap<SourceComputation, Vec<SourceComputation>>>);

impl Consulted {
    fn add(&self, callee: SourceComputation, reader: SourceComputation) {
        if let Ok(mut map) = self.0.lock() {
            let readers = map.entry(callee).or_default();
            if !readers.contains(&reader) {
                readers.push(reader);
            }
        }
    }

    /// The computations that weighed `callee` under a boundary.
    pub(crate) fn readers(&self, callee: SourceComputation) -> Vec<SourceComputation> {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.get(&callee).cloned())
            .unwrap_or_default()
    }
}

/// The database: salsa's storage, the records of what ran, and (on the
/// handle that runs the engine) the work pending and what the last run
/// made of each computation (see [`engine`]).
#[salsa::db]
pub struct Database {
    storage: salsa::Storage<Self>,
    executions: Arc<Mutex<Vec<Execution>>>,
    /// The computations whose assignment ran since the last clear, in the
    /// order they ran, once per run of an assignment.
    assigned: Arc<Mutex<Vec<SourceComputation>>>,
    consulted: Arc<Consulted>,
    seeds: Arc<Seeds>,
    module: Option<SourceModule>,
    /// The loaded text's `HloModule` line, by number (from 1) and text:
    /// where module-wide problems are reported. Kept out of salsa, since
    /// only error messages read it.
    header_at: Option<(usize, String)>,
    /// Where each computation starts in the module's text (see
    /// [`place::Placement`]).
    placement: place::Placement,
    /// What the next run has to redo (see [`engine::Pending`]).
    pending: engine::Pending,
    /// What the last run made of each computation (see [`engine::Ledger`]).
    ledger: engine::Ledger,
    /// The computation with the shortest text (the first of them), with
    /// its text's length, when known: what [`Database::release_intermediates`]
    /// reads last. Kept up to date by edits, so that a re-run after one
    /// does not read every computation's text to find it.
    smallest: Option<(SourceComputation, usize)>,
    /// The thread freeing the last run's intermediates, while it runs (see
    /// [`Database::release_intermediates`]).
    freeing: Arc<freeing::Freeing>,
    /// What earlier loads left behind (see [`Database::left_behind`]).
    left_behind: LeftBehind,
    /// Made for one run and then discarded (see [`Database::for_one_run`]).
    one_run: bool,
}

impl Clone for Database {
    /// Another handle on the same storage, for queries on another thread.
    /// It shares the records of what ran, but not the engine's pending
    /// work and ledger, which only the handle that runs the engine keeps.
    fn clone(&self) -> Self {
        Database {
            storage: self.storage.clone(),
            executions: Arc::clone(&self.executions),
            assigned: Arc::clone(&self.assigned),
            consulted: Arc::clone(&self.consulted),
            seeds: Arc::clone(&self.seeds),
            module: self.module,
            header_at: None,
            placement: place::Placement::default(),
            pending: engine::Pending::default(),
            ledger: engine::Ledger::default(),
            smallest: self.smallest,
            freeing: Arc::clone(&self.freeing),
            left_behind: self.left_behind,
            one_run: self.one_run,
        }
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
    /// query it looks up, not only those it runs. Sessions use
    /// [`Database::recomputed_computations`], which every database records.
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

    /// A database for one run, which [`Database::discard`] then lets go
    /// of: what a stateless run does. It keeps every value it makes until
    /// it is discarded, so salsa's LRU does not track which it read last
    /// (each read of a tracked value was an insert into the LRU's list:
    /// 2.5% of a first run's `perf` samples on the module of 16,667
    /// computations).
    pub fn for_one_run() -> Self {
        Database {
            one_run: true,
            ..Database::new(None)
        }
    }

    fn new(record: Option<Box<dyn Fn(salsa::Event) + Send + Sync + 'static>>) -> Self {
        Database {
            storage: salsa::Storage::new(record),
            executions: Arc::default(),
            assigned: Arc::default(),
            consulted: Arc::default(),
            seeds: Arc::default(),
            module: None,
            header_at: None,
            placement: place::Placement::default(),
            pending: engine::Pending::default(),
            ledger: engine::Ledger::default(),
            smallest: None,
            // One at a time: a run's frees wait for the last run's.
            freeing: Arc::new(freeing::Freeing::new("tessera-release", 1)),
            left_behind: LeftBehind::default(),
            one_run: false,
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

    fn consulted(&self, callee: SourceComputation, reader: SourceComputation) {
        self.consulted.add(callee, reader);
    }

    fn take_seed(&self, c: SourceComputation) -> Option<Computation> {
        self.seeds.take(c, c.index(self) as usize)
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

/// Sets an edited computation's text, and marks it to be redone.
fn edited_text(db: &mut Database, c: SourceComputation, text: String) {
    db.seeds.take(c, c.index(db) as usize);
    let len = text.len();
    db.smallest = match db.smallest {
        // The smallest grew: which one is smallest now is not known.
        Some((s, l)) if s == c => (len <= l).then_some((c, len)),
        Some((s, l)) if (len, c.index(db)) < (l, s.index(db)) => Some((c, len)),
        kept => kept,
    };
    c.set_text(db).to(text);
    let i = c.index(db) as usize;
    db.pending.edited(i);
    db.placement.edited(i);
}

impl Database {
    /// Loads (or reloads) a module's text. Inputs whose content did not
    /// change are left alone, so nothing depending on them re-runs: a text
    /// that changes some computations' bodies has only those redone by the
    /// next run; one that changes anything module-wide (the header, the
    /// file name, which computations there are or their order) has the
    /// next run redo everything, where salsa still finds most values
    /// unchanged.
    pub fn load(
        &mut self,
        text: &str,
        file_name: &str,
        target: Arc<TargetSpec>,
    ) -> Result<SourceModule, LoadError> {
        self.seeds.clear();
        // A first load parses a large module beside its outline scan, as a
        // stateless parse does; a later one parses only what changed.
        let (outline, parsed) = if self.module.is_none() {
            hlo::outline_and_parse(text, file_name)
        } else {
            hlo::outline(text, file_name).map(|o| (o, None))
        }
        .map_err(|e| LoadError::Parse(Box::new(e)))?;
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
                let m = SourceModule::builder(
                    file_name.to_string(),
                    header.clone(),
                    Vec::new(),
                    0,
                    target.clone(),
                    SolverOptions::default(),
                    pipeline::Steps::default(),
                )
                .durability(Durability::HIGH)
                .names_durability(Durability::MEDIUM)
                .calls_durability(Durability::MEDIUM)
                .new(self);
                self.module = Some(m);
                m
            }
        };
        if m.file_name(self) != file_name {
            m.set_file_name(self).to(file_name.to_string());
            self.pending.everything();
        }
        if *m.header(self) != header {
            m.set_header(self).to(header);
            self.pending.everything();
        }
        if **m.target(self) != *target {
            m.set_target(self).to(target);
            self.pending.everything();
        }
        let comps = self.load_computations(m, text, &outline);
        if let Some(parsed) = parsed {
            self.seeds.set(comps.iter().copied().zip(parsed));
        }
        if *m.computations(self) != comps {
            m.set_computations(self).to(comps);
            self.pending.everything();
        }
        let same_names = m
            .names(self)
            .names()
            .iter()
            .map(String::as_str)
            .eq(outline.computations.iter().map(|c| c.name.as_str()));
        if !same_names {
            let names = outline.computations.iter().map(|c| c.name.clone());
            m.set_names(self)
                .to(Arc::new(NameTable::new(names.collect())));
            self.pending.everything();
        }
        if m.entry(self) != outline.entry as u32 {
            m.set_entry(self).to(outline.entry as u32);
            self.pending.everything();
        }
        self.pending.resize(outline.computations.len());
        self.placement = place::Placement::of(text, &outline);
        if !same_names {
            // Computations came, went or moved: which is smallest is not
            // known (an edit of a text keeps it known, see `edited_text`).
            self.smallest = None;
        }
        Ok(m)
    }

    /// The inputs of the outline's computations, in order: those of the
    /// same name kept (their text and place updated where they changed),
    /// new ones made, and those no longer named counted as left behind.
    fn load_computations(
        &mut self,
        m: SourceModule,
        text: &str,
        outline: &hlo::ModuleOutline,
    ) -> Vec<SourceComputation> {
        let mut old: FxHashMap<String, SourceComputation> = m
            .computations(self)
            .iter()
            .map(|&c| (c.name(self).clone(), c))
            .collect();
        let mut comps = Vec::with_capacity(outline.computations.len());
        for (i, c) in outline.computations.iter().enumerate() {
            let body = c.span.text(text);
            let input = match old.remove(&c.name) {
                Some(existing) => {
                    if existing.index(self) != i as u32 {
                        existing.set_index(self).to(i as u32);
                        self.pending.everything();
                    }
                    if existing.text(self) != body {
                        edited_text(self, existing, body.to_string());
                    }
                    existing
                }
                None => {
                    self.pending.everything();
                    SourceComputation::builder(i as u32, c.name.clone(), body.to_string(), m)
                        .durability(Durability::HIGH)
                        .exported_durability(Durability::LOW)
                        .free_exported_durability(Durability::LOW)
                        .boundary_durability(Durability::LOW)
                        .new(self)
                }
            };
            comps.push(input);
        }
        for c in old.into_values() {
            self.left_behind.computations += 1;
            self.left_behind.text_bytes += c.text(self).len();
        }
        comps
    }

    /// Replaces the text of the named computations (each text is a whole
    /// computation, as it would appear in the module).
    pub fn replace_computations(
        &mut self,
        replacements: &[(String, String)],
    ) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        let table = Arc::clone(m.names(self));
        let comps = m.computations(self).clone();
        for (name, text) in replacements {
            let c = table
                .get(name)
                .and_then(|id| comps.get(id.index()).copied())
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
        let id = m.names(self).get(name)?;
        m.computations(self)
            .get(id.index())
            .map(|c| c.text(self).clone())
    }

    /// Sets the target.
    pub fn set_target(&mut self, target: Arc<TargetSpec>) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if **m.target(self) != *target {
            m.set_target(self).to(target);
            self.pending.everything();
        }
        Ok(())
    }

    /// The loaded module's target, solver and steps, as the last writes
    /// set them.
    pub fn settings(&self) -> Option<(&TargetSpec, SolverOptions, pipeline::Steps)> {
        let m = self.module?;
        Some((&**m.target(self), m.solver(self), m.steps(self)))
    }

    /// Sets the solver (the heuristic until set).
    pub fn set_solver(&mut self, solver: SolverOptions) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if m.solver(self) != solver {
            m.set_solver(self).to(solver);
            self.pending.everything();
        }
        Ok(())
    }

    /// Sets the steps after assignment.
    pub fn set_steps(&mut self, steps: pipeline::Steps) -> Result<(), LoadError> {
        let m = self.module.ok_or(LoadError::NoModule)?;
        if m.steps(self) != steps {
            m.set_steps(self).to(steps);
            self.pending.everything();
        }
        Ok(())
    }

    /// How many computations the next run has to redo something of: every
    /// one after a module-wide change (see [`Database::load`]). A run that
    /// has little to redo does it in order rather than splitting it over
    /// threads.
    pub fn written_since_run(&self) -> usize {
        self.pending.count()
    }

    /// Drops the values of the steps a session does not keep between runs:
    /// each computation's parse ([`parsed`]) and each computation with its
    /// copies and after relayout ([`pipeline::transformed`]). A session then
    /// holds its module's text, assignments, small per-computation values
    /// and output parts, not copies of every computation. A later run that
    /// needs one again recomputes it.
    ///
    /// salsa's LRU keeps the value read last of each query (its capacity is
    /// at least one), and the computation read last is often the entry,
    /// the largest. So the smallest computation's values are read last:
    /// that is what stays. Its transformed value only after a run that
    /// `succeeded`, when it is already computed: after a failed run it
    /// could be an assignment of a module the input check refused.
    pub fn release_intermediates(&mut self, succeeded: bool) {
        // A run parses every computation it loaded: a seed left is one no
        // run will take.
        self.seeds.clear();
        engine::narrow_lru(self);
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
        self.freeing.drop_later(released, instructions);
    }

    /// Lets go of a database no one will run again: a stateless run's.
    /// Its intermediates are not narrowed to one value each first (that
    /// is for a session that goes on), and a large database is freed on a
    /// thread of its own, off the answer's path: a first run on the
    /// module of 16,667 computations spent 18 ms releasing intermediates
    /// and 29 ms dropping the database, against a stateless run of 244 ms.
    pub fn discard(self) {
        self.settle();
        self.seeds.clear();
        let instructions = self.ledger.instructions();
        DISCARDING.drop_later(self, instructions);
    }

    /// Waits until every database discarded so far is freed (see
    /// [`Database::discard`]): for measuring runs one after another
    /// without the last one's freeing in the next one's time.
    pub fn settle_discarded() {
        DISCARDING.settle();
    }

    /// Waits until the intermediates the last run released are freed (see
    /// [`Database::release_intermediates`]): for measuring what a session
    /// holds.
    pub fn settle(&self) {
        self.freeing.settle();
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
            let place::Start { line, col, .. } = self.start_of(c);
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

    /// Parses and assigns every computation (the engine's steps up to
    /// assignment, see [`Database::assign`]), and returns the module with
    /// the assignments. Parse errors carry absolute positions.
    pub fn assigned_module(
        &mut self,
    ) -> Result<
        (
            Module,
            std::collections::BTreeMap<CompId, ComputationAssignment>,
        ),
        AssignError,
    > {
        let m = self
            .module
            .ok_or_else(|| AssignError::from(PassError::Module("no module is loaded".into())))?;
        // Read while the LRU keeps every computation's parse and
        // assignment, so that none is made twice.
        self.assign_widened();
        let read = self.read_assigned(m);
        engine::narrow_lru(self);
        read
    }

    /// Every computation of `m` with its final assignment (see
    /// [`Database::assigned_module`]).
    fn read_assigned(
        &self,
        m: SourceModule,
    ) -> Result<
        (
            Module,
            std::collections::BTreeMap<CompId, ComputationAssignment>,
        ),
        AssignError,
    > {
        let mut computations = Vec::new();
        let mut assignments = std::collections::BTreeMap::new();
        for &c in m.computations(self) {
            let comp = match parse_of(self, c) {
                Ok(comp) => comp,
                Err(e) => return Err(AssignError::Parse(Box::new(absolute(&e, c, self, m)))),
            };
            computations.push(Arc::unwrap_or_clone(comp));
            let a = final_assignment(self, c).map_err(|e| match e {
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
            .ok_or_else(|| AssignError::from(PassError::Module("no module is loaded".into())))?;
        let mut computations = Vec::new();
        for &c in m.computations(self) {
            match parse_of(self, c) {
                Ok(comp) => computations.push(Arc::unwrap_or_clone(comp)),
                Err(e) => return Err(AssignError::Parse(Box::new(absolute(&e, c, self, m)))),
            }
        }
        Ok(self.module_of(m, computations))
    }

    /// Where computation `c` starts in the module's text (see
    /// [`place::Placement`]).
    fn start_of(&self, c: SourceComputation) -> place::Start {
        let Some(m) = self.module else {
            return place::Start::default();
        };
        let comps = m.computations(self);
        self.placement.start(c.index(self) as usize, |j| {
            comps.get(j).map_or("", |c| c.text(self).as_str())
        })
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
pub fn absolute(
    e: &ParseError,
    c: SourceComputation,
    db: &Database,
    m: SourceModule,
) -> ParseError {
    let place::Start { line, col, offset } = db.start_of(c);
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
        db.assign();
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

    /// What a session keeps of every computation is as large as its error
    /// variants: errors are boxed so that it stays small.
    #[test]
    fn kept_results_stay_small() {
        assert!(std::mem::size_of::<AssignError>() <= 16);
        assert!(std::mem::size_of::<Exported>() <= 40);
        assert!(std::mem::size_of::<InputFacts>() <= 96);
    }

    /// After a run a session keeps one alone assignment (the LRU's one),
    /// and a re-run with nothing changed makes none again: what it reads
    /// of the dropped ones (signatures, costs, decided boundaries) salsa
    /// finds unchanged without them.
    #[test]
    fn a_session_drops_its_assignments_after_a_run() {
        let target = Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap());
        let mut db = Database::default();
        db.load(MODULE, "m.hlo", target.clone()).unwrap();
        db.set_steps(pipeline::Steps {
            assign: true,
            relayout: true,
            expand_relayouts: false,
            verify: true,
        })
        .unwrap();
        let first = db.run().unwrap();
        let comps = db.module().unwrap().computations(&db).clone();
        let weak: Vec<_> = comps
            .iter()
            .map(|&c| Arc::downgrade(alone_assignment(&db, c).as_ref().unwrap()))
            .collect();
        // A computation the steps add no instruction to keeps one list of
        // names for its input and output checks.
        for &c in &comps {
            let (input, output) = (pipeline::input_check(&db, c), pipeline::printed(&db, c));
            assert!(Arc::ptr_eq(&input.names, &output.check.names));
        }
        db.release_intermediates(true);
        // Eviction happens when the next revision starts.
        db.load(MODULE, "other.hlo", target.clone()).unwrap();
        db.load(MODULE, "m.hlo", target).unwrap();
        assert_eq!(weak.iter().filter(|w| w.upgrade().is_some()).count(), 1);
        db.clear_executions();
        let again = db.run().unwrap();
        assert_eq!(first.output.text(), again.output.text());
        assert!(
            db.recomputed_computations().is_empty(),
            "{:?}",
            db.recomputed_computations()
        );
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

    /// A module whose entry names two computations, and a name looked up
    /// twice: what a seeded parse's fingerprint must count as a parse does.
    const CALLS: &str = "HloModule m\n\n\
        add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n\
        neg {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n\n\
        ENTRY main {\n  p = f32[4] parameter(0)\n  c = f32[4] call(p), to_apply=neg\n  \
        z = f32[] constant(0)\n  r = f32[] reduce(c, z), dimensions={0}, to_apply=add\n  \
        ROOT t = f32[] reduce(p, z), dimensions={0}, to_apply=add\n}\n";

    fn generic() -> Arc<TargetSpec> {
        Arc::new(target::load_str("name: generic\n", "generic.yaml").unwrap())
    }

    fn seeds_left(db: &Database) -> usize {
        db.seeds.len()
    }

    /// Each computation's parse, as text, and its fingerprint.
    fn parses_and_fingerprints(db: &Database) -> Vec<(String, u64)> {
        let comps = db.module().unwrap().computations(db).clone();
        comps
            .iter()
            .map(|&c| {
                let p = parsed(db, c);
                (format!("{:?}", p.held()), p.fingerprint)
            })
            .collect()
    }

    /// A first load of a module its policy parses on the pool (under
    /// `Always`, any module) seeds every computation, and each first parse
    /// takes its seed: the computation and fingerprint parsing its text
    /// gives (a fingerprint that differed would make a later parse of the
    /// same text look like a change). Under `Sequential` nothing is seeded.
    #[test]
    fn a_first_load_seeds_each_parse_with_the_parse_of_its_text() {
        let seeded = {
            let _always = hlo::Parallelism::Always.enter();
            let mut db = Database::default();
            db.load(CALLS, "m.hlo", generic()).unwrap();
            assert_eq!(seeds_left(&db), 3);
            let parses = parses_and_fingerprints(&db);
            assert_eq!(seeds_left(&db), 0, "every parse took its seed");
            assert_eq!(
                db.seeds.slots.read().unwrap().capacity(),
                0,
                "nor are their slots kept"
            );
            parses
        };
        let _sequential = hlo::Parallelism::Sequential.enter();
        let mut db = Database::default();
        db.load(CALLS, "m.hlo", generic()).unwrap();
        assert_eq!(seeds_left(&db), 0);
        let plain = parses_and_fingerprints(&db);
        assert!(plain.iter().all(|(p, _)| p.starts_with("Some(")));
        assert_eq!(seeded, plain);
    }

    /// A seed is dropped when its text changes before it is taken: by an
    /// edit of that computation, or by any load after the first (which
    /// parses only what changed). The parses are then those of the new
    /// texts.
    #[test]
    fn seeds_go_when_the_text_changes_before_the_parse() {
        let _always = hlo::Parallelism::Always.enter();
        let edited = CALLS.replace("ROOT n = f32[4] negate(x)", "ROOT n = f32[4] abs(x)");
        let neg = "neg {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] abs(x)\n}";
        let fresh = |text: &str| {
            let mut db = Database::default();
            db.load(text, "m.hlo", generic()).unwrap();
            parses_and_fingerprints(&db)
        };
        let want = fresh(&edited);
        assert_ne!(want, fresh(CALLS));

        let mut db = Database::default();
        db.load(CALLS, "m.hlo", generic()).unwrap();
        db.replace_computations(&[("neg".to_string(), neg.to_string())])
            .unwrap();
        assert_eq!(seeds_left(&db), 2);
        assert_eq!(parses_and_fingerprints(&db), want);

        let mut db = Database::default();
        db.load(CALLS, "m.hlo", generic()).unwrap();
        db.load(&edited, "m.hlo", generic()).unwrap();
        assert_eq!(seeds_left(&db), 0);
        assert_eq!(parses_and_fingerprints(&db), want);
    }

    /// A printed computation's hash is made when first asked for, and is
    /// the hash of its text; whether it was made takes no part in comparing
    /// two printed values (salsa keeps an equal value, hashed or not).
    #[test]
    fn a_printed_text_is_hashed_when_asked_and_compares_by_its_text() {
        let target = generic();
        let mut db = Database::default();
        db.load(MODULE, "m.hlo", target).unwrap();
        db.run().unwrap();
        let comps = db.module().unwrap().computations(&db).clone();
        let printed = Arc::clone(pipeline::printed(&db, comps[1]));
        assert!(printed.hash.0.get().is_none(), "not hashed before asked");
        let copy = pipeline::Printed::clone(&printed);
        let hash = printed.hash.of(&printed.text);
        assert_eq!(hash, output::text_hash(&printed.text));
        assert_eq!(printed.hash.0.get(), Some(&hash));
        assert!(copy.hash.0.get().is_none());
        assert_eq!(*printed, copy);
        let other = pipeline::Printed {
            text: "other\n\n".to_string(),
            ..copy.clone()
        };
        assert_ne!(*printed, other);
    }

    /// A run joins the module's reports only when they are asked for, and
    /// the outputs of later runs whose parts report the same share them:
    /// after a rename of an instruction (the text changes, no report does)
    /// the reports are the very same, after an edit that adds an
    /// instruction (the computation's counts change) they are joined anew.
    #[test]
    fn reports_are_joined_when_asked_and_shared_while_no_part_changes_them() {
        let mut db = Database::default();
        db.load(MODULE, "m.hlo", generic()).unwrap();
        let first = db.run().unwrap().output;
        let lazy = Arc::clone(first.lazy_reports());
        assert!(lazy.made.get().is_none(), "not joined before asked");
        let (assignment, relayout) = first.reports().clone();
        let assignment = assignment.expect("layout assignment ran");
        assert!(relayout.is_some());
        assert_eq!(assignment.computations.len(), 3);

        let renamed = "neg {\n  x = f32[4] parameter(0)\n  ROOT m = f32[4] negate(x)\n}";
        db.replace_computations(&[("neg".to_string(), renamed.to_string())])
            .unwrap();
        let second = db.run().unwrap().output;
        assert!(!Arc::ptr_eq(&first, &second), "a new output");
        assert!(Arc::ptr_eq(second.lazy_reports(), &lazy));
        assert!(Arc::ptr_eq(
            second.reports().0.as_ref().unwrap(),
            &assignment
        ));

        let grown = "neg {\n  x = f32[4] parameter(0)\n  n = f32[4] negate(x)\n  \
                     ROOT m = f32[4] negate(n)\n}";
        db.replace_computations(&[("neg".to_string(), grown.to_string())])
            .unwrap();
        let third = db.run().unwrap().output;
        assert!(!Arc::ptr_eq(third.lazy_reports(), &lazy));
        assert!(third.lazy_reports().made.get().is_none());
        let again = third.reports().0.clone().unwrap();
        assert_ne!(again, assignment);
        let fresh = {
            let mut db = Database::default();
            db.load(
                &MODULE.replace(
                    "ROOT n = f32[4] negate(x)",
                    "n = f32[4] negate(x)\n  ROOT m = f32[4] negate(n)",
                ),
                "m.hlo",
                generic(),
            )
            .unwrap();
            db.run().unwrap().output.reports().clone()
        };
        assert_eq!(Some(&again), fresh.0.as_ref());
        assert_eq!(third.reports().1, fresh.1);
    }
}
