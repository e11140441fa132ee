//! The steps after assignment, per computation: input verification, apply
//! (the copies), relayout, output verification, counting and printing.
//! Each is a tracked query of one computation, so that a re-run after an
//! edit redoes only the computations whose inputs changed: a
//! computation's own text, its final assignment, or the signatures of the
//! computations it calls (which checks read through their signatures, see
//! [`hlo::CalleeSignature`]).
//!
//! The module-wide parts read only small per-computation values: the
//! header (with the entry layout the entry's signature fills), unique
//! names (from each computation's list of names), and the entry layout
//! against the entry computation.

use std::sync::Arc;

use hlo::{
    Callee, CalleeSignature, CompId, Computation, ComputationLayout, Module, ModuleView, Opcode,
    VerifyError,
};
use layout_assignment::{ApplyError, Report as AssignmentReport};
use relayout::{RelayoutError, Rewrite};
use rustc_hash::FxHashMap;

use crate::output::OutputError;
use crate::{Db, SourceComputation, SourceModule, entry_layout, final_assignment, parsed};

/// What runs after assignment: a field of the module input, so that
/// changing it re-runs only the steps it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Steps {
    /// Layout assignment applies its copies.
    pub assign: bool,
    /// The relayout pass runs.
    pub relayout: bool,
    /// Relayout expands copies between tilings.
    pub expand_relayouts: bool,
    /// The output is checked: each computation's structure and layouts,
    /// found as it is printed (see [`Printed::check`]).
    pub verify: bool,
}

impl Default for Steps {
    fn default() -> Self {
        Steps {
            assign: true,
            relayout: true,
            expand_relayouts: false,
            verify: true,
        }
    }
}

/// A computation as its callers' checks and printing see it (`None` when
/// it did not parse, or a step before its output failed). Shared, so that
/// the engine keeps the one it last saw to compare with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stub(pub Option<Arc<CalleeSignature>>);

/// A computation after one step, with what the step reports. Never equal
/// to another: the steps after it compare their own results.
#[derive(Clone, Debug)]
pub struct Stepped<R> {
    /// The computation (`None` when it did not parse).
    pub comp: Option<Arc<Computation>>,
    /// What the step reports.
    pub report: R,
}

impl<R> PartialEq for Stepped<R> {
    fn eq(&self, _: &Self) -> bool {
        false
    }
}

impl<R> Drop for Stepped<R> {
    fn drop(&mut self) {
        if let Some(comp) = &self.comp {
            crate::let_go(comp);
        }
    }
}

/// The module around one computation, as its checks and its printing see
/// it: its callees' stubs, the entry, `is_scheduled` and an entry layout.
struct View<'a> {
    callees: FxHashMap<CompId, &'a CalleeSignature>,
    entry: CompId,
    is_scheduled: bool,
    entry_layout: &'a ComputationLayout,
}

impl ModuleView for View<'_> {
    fn callee(&self, id: CompId) -> Option<Callee<'_>> {
        self.callees.get(&id).map(|&c| Callee::Signature(c))
    }
    fn entry(&self) -> CompId {
        self.entry
    }
    fn is_scheduled(&self) -> bool {
        self.is_scheduled
    }
    fn entry_computation_layout(&self) -> &ComputationLayout {
        self.entry_layout
    }
}

/// Whether the module is scheduled: what each computation's checks and
/// printing read of the header, as a query of its own, so that an edit of
/// the rest of the header (the entry computation layout, say) does not
/// check and print every computation again.
#[salsa::tracked(returns(copy))]
pub fn is_scheduled(db: &dyn Db, m: SourceModule) -> bool {
    m.header(db).is_scheduled
}

/// The ids of the computations `comp` names, in order, once each.
pub(crate) fn named(comp: &Computation) -> Vec<CompId> {
    let mut ids: Vec<CompId> = comp
        .instructions()
        .flat_map(|(_, i)| i.attrs.called_computations())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The entry computation layout a computation other than the entry is
/// shown: the checks ask for the entry layout only when checking the entry
/// (the layout check compares its parameters and root with it), so the
/// other computations' checks and printing do not depend on it.
static NOT_THE_ENTRY: std::sync::LazyLock<ComputationLayout> =
    std::sync::LazyLock::new(|| ComputationLayout {
        parameters: Arc::default(),
        result: shape::Shape::Tuple(Vec::new()).into(),
    });

/// The module around computation `c` (parsed or output as `comp`): its
/// callees' signatures as `stub` gives them and, when `c` is the entry,
/// the entry layout `entry_layout` gives.
fn view<'a>(
    db: &'a dyn Db,
    c: SourceComputation,
    comp: &Computation,
    stub: fn(&dyn Db, SourceComputation) -> &Stub,
    entry_layout: fn(&'a dyn Db, SourceModule) -> &'a ComputationLayout,
) -> View<'a> {
    let m = c.module(db);
    let comps = m.computations(db);
    let callees = &crate::input_facts(db, c).named;
    debug_assert_eq!(named(comp), *callees);
    let callees = callees
        .iter()
        .filter_map(|&id| Some((id, &**stub(db, *comps.get(id.index())?).0.as_ref()?)))
        .collect();
    let entry = m.entry_id(db);
    View {
        callees,
        entry,
        is_scheduled: is_scheduled(db, m),
        entry_layout: if c.id(db) == entry {
            entry_layout(db, m)
        } else {
            &NOT_THE_ENTRY
        },
    }
}

/// The input computation's signature as its callers see it (see
/// [`crate::InputFacts`]).
pub fn input_stub(db: &dyn Db, c: SourceComputation) -> &Stub {
    &crate::input_facts(db, c).stub
}

/// A computation's instruction names, in order, in one string with the
/// end of each: a session keeps two lists for every computation (input and
/// output), and a `String` per name took about three times the bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    text: String,
    /// Where each name ends in `text`: `u32`, as a computation's text is
    /// far below 4 GiB (the parser's spans are `u32` too).
    ends: Vec<u32>,
}

impl Names {
    /// The names of `comp`'s instructions, in order.
    pub fn of(comp: &Computation) -> Names {
        let mut names = Names {
            text: String::new(),
            ends: Vec::with_capacity(comp.len()),
        };
        for (_, inst) in comp.instructions() {
            names.text.push_str(&inst.name);
            names
                .ends
                .push(u32::try_from(names.text.len()).unwrap_or(u32::MAX));
        }
        names.text.shrink_to_fit();
        names
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(start, &end)| self.text.get(start as usize..end as usize).unwrap_or(""))
    }
}

/// What the module's input check reads of one input computation: its
/// instruction names, which must be unique over the module, and its own
/// problems. One query rather than two, because the check reads both of
/// every computation, and a re-run after an edit re-reads each memo the
/// check read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputCheck {
    /// Its instruction names, in order (shared with the output's when the
    /// steps add none).
    pub names: Arc<Names>,
    /// Its structural problems.
    pub structural: Vec<VerifyError>,
    /// Its bitcasts that move bytes, checked only when it has no
    /// structural problem (the check assumes well-formed shapes). The
    /// passes keep an input bitcast in the layouts it was written with (a
    /// side written without a layout means the plain descending one, as
    /// everywhere in an input), and the output verifier proves every
    /// bitcast keeps each element where it is; a bitcast that does not,
    /// under its own layouts, is the user's error.
    pub bitcasts: Vec<VerifyError>,
}

/// The names and problems of one input computation.
#[salsa::tracked(returns(ref))]
pub fn input_check(db: &dyn Db, c: SourceComputation) -> Arc<InputCheck> {
    let Ok(comp) = crate::parse_of(db, c) else {
        return Arc::default();
    };
    let comp = &*comp;
    let structural =
        hlo::verify_computation(&view(db, c, comp, input_stub, entry_layout), c.id(db), comp);
    let bitcasts = if structural.is_empty() {
        bitcast_problems(comp)
    } else {
        Vec::new()
    };
    Arc::new(InputCheck {
        names: Arc::new(Names::of(comp)),
        structural,
        bitcasts,
    })
}

/// The bitcasts of `comp` that move bytes (see [`InputCheck::bitcasts`]).
pub fn bitcast_problems(comp: &Computation) -> Vec<VerifyError> {
    let plain = shape::ArrayShape::laid_out;
    let mut problems = Vec::new();
    for (id, inst) in comp.instructions() {
        if inst.opcode != Opcode::Bitcast {
            continue;
        }
        let (Some(&o), Some(to)) = (comp.operands(id).first(), inst.shape.as_array()) else {
            continue;
        };
        let Some(from) = comp.inst(o).shape.as_array() else {
            continue;
        };
        if let Err(why) = shape::prove_bitcast(&plain(from), &plain(to)) {
            problems.push(VerifyError {
                computation: comp.name.clone(),
                instruction: Some(inst.name.clone()),
                message: format!("{why}; an input bitcast must keep every element where it is"),
            });
        }
    }
    problems
}

/// The problems of the instruction names of every computation, each
/// given by its name and its instruction names (the input's or the
/// output's): names are unique over the module.
pub fn name_problems<'a>(
    comps: impl Iterator<Item = (&'a str, &'a Names)> + Clone,
) -> Vec<VerifyError> {
    let count = comps.clone().map(|(_, n)| n.len()).sum();
    hlo::verify_names(comps.map(|(c, n)| (c, n.iter())), count)
}

/// The problems of the entry computation's signature `entry` (its input
/// or its output stub) against the entry computation layout `layout`, or
/// that there is no entry computation when `entry` is out of range.
pub fn entry_problems(
    entry: Option<&Stub>,
    layout: &ComputationLayout,
    entry_id: u32,
    comps: usize,
) -> Vec<VerifyError> {
    match entry.map(|s| &s.0) {
        Some(Some(e)) => hlo::verify_entry_layout(Callee::Signature(e), layout),
        Some(None) => Vec::new(),
        None => vec![VerifyError {
            computation: String::new(),
            instruction: None,
            message: format!(
                "the entry computation id {entry_id} is out of range ({comps} computations)"
            ),
        }],
    }
}

/// The entry computation layout of the output: the input's, with every
/// leaf the entry's final signature fills (when assignment runs), and the
/// leaves that got the target's tiling that way. Shared: every output
/// assembled from it holds it, and it is as long as the entry's
/// parameter list.
#[salsa::tracked(returns(ref))]
pub fn output_entry_layout(
    db: &dyn Db,
    m: SourceModule,
) -> (
    Arc<ComputationLayout>,
    Vec<layout_assignment::TiledEntryLayout>,
) {
    let mut layout = entry_layout(db, m).clone();
    let entry = m.computations(db).get(m.entry(db) as usize).copied();
    if m.steps(db).assign
        && let Some(Ok(a)) = entry.map(|c| final_assignment(db, c))
    {
        let tiled = layout_assignment::fill_entry_layout(&mut layout, &a.signature);
        return (Arc::new(layout), tiled);
    }
    (Arc::new(layout), Vec::new())
}

/// What the steps after assignment report of one computation.
#[derive(Clone, Debug, PartialEq)]
pub struct Transformed {
    /// The assignment report's records of it (`None` without assignment),
    /// or why applying the assignment failed.
    pub assignment: Result<Option<Arc<AssignmentReport>>, ApplyError>,
    /// The relayout pass's rewrites, or why it failed (boxed: the error is
    /// large, and rare).
    pub rewrites: Result<Vec<Arc<Rewrite>>, Box<RelayoutError>>,
}

impl Default for Transformed {
    /// No report: no assignment, and no rewrite.
    fn default() -> Self {
        Transformed {
            assignment: Ok(None),
            rewrites: Ok(Vec::new()),
        }
    }
}

/// One computation after the steps that change it: its assignment applied
/// (its copies), then the relayout pass, each when it runs. Both work on
/// one copy of the parsed computation: the steps are one query so that
/// the computation is copied once, not once per step.
///
/// Its value is dropped once the run that needed it is over (see
/// [`crate::Database::release_intermediates`]): what later runs read of a
/// computation's output is kept by the small queries after it (its stub,
/// names, problems, counts and text).
#[salsa::tracked(returns(ref), lru = 1)]
pub fn transformed(db: &dyn Db, c: SourceComputation) -> Stepped<Transformed> {
    let failed = |rewrites| Stepped {
        comp: None,
        report: Transformed {
            assignment: Ok(None),
            rewrites,
        },
    };
    if parsed(db, c).error().is_some() {
        return failed(Ok(Vec::new()));
    }
    let m = c.module(db);
    let steps = m.steps(db);
    let is_entry = c.index(db) == m.entry(db);
    let final_assignment = if steps.assign {
        match final_assignment(db, c) {
            Ok(a) => Some(a),
            Err(_) => return failed(Ok(Vec::new())),
        }
    } else {
        None
    };
    // Taken after the assignment, which reads the parse too.
    let Ok(mut out) = crate::take_parse(db, c) else {
        return failed(Ok(Vec::new()));
    };
    if final_assignment.is_none() && !steps.relayout {
        return Stepped {
            comp: Some(Arc::new(out)),
            report: Transformed {
                assignment: Ok(None),
                rewrites: Ok(Vec::new()),
            },
        };
    }
    let applied = final_assignment
        .map(|a| layout_assignment::apply_computation(&mut out, &a, is_entry))
        .transpose();
    let assignment = match applied {
        Ok(report) => report.map(Arc::new),
        Err(e) => {
            return Stepped {
                comp: None,
                report: Transformed {
                    assignment: Err(e),
                    rewrites: Ok(Vec::new()),
                },
            };
        }
    };
    let rewrites = if steps.relayout {
        let facts = relayout::ComputationFacts {
            result: is_entry.then(|| output_entry_layout(db, m).0.result.clone()),
        };
        let opts = relayout::Options {
            expand_relayouts: steps.expand_relayouts,
        };
        match relayout::run_computation(&facts, &mut out, m.target(db), &opts) {
            Ok(rewrites) => rewrites,
            Err(e) => return failed(Err(Box::new(e))),
        }
    } else {
        Vec::new()
    };
    Stepped {
        comp: Some(Arc::new(out)),
        report: Transformed {
            assignment: Ok(assignment),
            rewrites: Ok(rewrites),
        },
    }
}

/// Sets how many transformed computations salsa's LRU keeps (see
/// [`transformed`]).
pub(crate) fn keep_transformed(db: &mut crate::Database, n: usize) {
    transformed::set_lru_capacity(db, n);
}

/// The output computation's signature as its callers see it.
#[salsa::tracked(returns(ref))]
pub fn output_stub(db: &dyn Db, c: SourceComputation) -> Stub {
    Stub(
        transformed(db, c)
            .comp
            .as_ref()
            .map(|comp| Arc::new(CalleeSignature::of(comp))),
    )
}

/// What the output check reads of one output computation: its
/// instruction names, which must be unique over the module, and its own
/// problems (part of [`Printed`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutputCheck {
    /// Its instruction names, in order, which must be unique over the
    /// module (the engine checks them all when one computation's change).
    pub names: Arc<Names>,
    /// Its structural problems.
    pub structural: Vec<VerifyError>,
    /// With assignment, its layouts' problems, checked only when it has
    /// no structural one.
    pub layouts: Vec<VerifyError>,
}

/// The names and problems of one output computation `comp` (id `id`),
/// shown the module around it by `v`; with `assign`, its layouts are
/// checked on `target` when its structure is sound.
fn output_check(
    v: &View<'_>,
    id: CompId,
    comp: &Computation,
    assign: bool,
    target: &target::TargetSpec,
    input_names: &Arc<Names>,
) -> OutputCheck {
    let structural = hlo::verify_computation(v, id, comp);
    let layouts = if structural.is_empty() && assign {
        layout_assignment::check_computation_layouts(v, id, comp, Some(target))
    } else {
        Vec::new()
    };
    // Most computations come out with the names they came in with: a
    // session then keeps one list for both.
    let names = Names::of(comp);
    let names = if names == **input_names {
        Arc::clone(input_names)
    } else {
        Arc::new(names)
    };
    OutputCheck {
        names,
        structural,
        layouts,
    }
}

/// The output entry layout, as the entry's checks read it.
fn output_entry(db: &dyn Db, m: SourceModule) -> &ComputationLayout {
    &output_entry_layout(db, m).0
}

/// One output computation as the module's text shows it: its text, with
/// the blank line after it, the text's hash, the counts over it, what
/// stopped the steps before it, if anything, and what the output check
/// found in it. One query rather than five, because the module's joins
/// read all of them of every computation, and a re-run after an edit
/// re-reads each memo the joins read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Printed {
    /// The text, with the blank line after it.
    pub text: String,
    /// The text's hash ([`crate::output::text_hash`]), made the first time
    /// it is asked for: pipelines that keep an earlier answer compare
    /// computations by it, and a run nothing compares (a stateless one)
    /// does not hash its text.
    pub hash: TextHash,
    /// Counts over the computation.
    pub stats: ModuleStats,
    /// Why the computation has no output: its assignment failed, applying
    /// it failed, or relayout failed (at most one; boxed, as it is rare).
    pub failure: Option<Box<OutputError>>,
    /// Its names and problems, when the output is checked
    /// ([`Steps::verify`]); empty otherwise.
    pub check: OutputCheck,
    /// What the steps after assignment report of it (kept here, since the
    /// computation itself is dropped once the run is over, see
    /// [`transformed`]).
    pub reports: Arc<Transformed>,
}

/// A printed text's hash, made when first asked for ([`Printed::hash`]).
/// It says nothing the text does not, so it takes no part in comparing
/// two printed values: equal texts are equal, hashed or not.
#[derive(Clone, Debug, Default)]
pub struct TextHash(pub(crate) std::sync::OnceLock<u64>);

impl TextHash {
    /// The hash of `text`, which must be the text this hash belongs to.
    pub fn of(&self, text: &str) -> u64 {
        *self.0.get_or_init(|| crate::output::text_hash(text))
    }
}

impl PartialEq for TextHash {
    fn eq(&self, _: &TextHash) -> bool {
        true
    }
}

/// Why the steps before printing stopped on computation `c`, if they did:
/// its assignment (when assignment runs), then applying it, then relayout.
fn failure(db: &dyn Db, c: SourceComputation) -> Option<Box<OutputError>> {
    if c.module(db).steps(db).assign
        && let Err(e) = final_assignment(db, c)
    {
        return Some(Box::new(OutputError::Assign(e)));
    }
    let report = &transformed(db, c).report;
    if let Err(e) = &report.assignment {
        return Some(Box::new(OutputError::Apply(e.clone())));
    }
    if let Err(e) = &report.rewrites {
        return Some(Box::new(OutputError::Relayout(e.clone())));
    }
    None
}

/// The output computation's text, its hash, its counts, its failure and
/// its check.
#[salsa::tracked(returns(ref))]
pub fn printed(db: &dyn Db, c: SourceComputation) -> Arc<Printed> {
    let failure = failure(db, c);
    let stepped = transformed(db, c);
    let reports = Arc::new(stepped.report.clone());
    let Some(comp) = &stepped.comp else {
        return Arc::new(Printed {
            failure,
            reports,
            ..Printed::default()
        });
    };
    let m = c.module(db);
    let steps = m.steps(db);
    let id = c.id(db);
    let v = view(db, c, comp, output_stub, output_entry);
    let target = m.target(db);
    let input_names = Arc::clone(&input_check(db, c).names);
    let check = || {
        if steps.verify {
            output_check(&v, id, comp, steps.assign, target, &input_names)
        } else {
            OutputCheck::default()
        }
    };
    let print = || {
        let mut text = String::with_capacity(comp.len() * 192 + 256);
        hlo::write_computation_in(&mut text, &v, id, comp);
        text.push_str("\n\n");
        // The capacity above is a guess made generous so that printing
        // rarely grows the buffer; a session keeps this text, so it keeps
        // no more than the text (the spare room was twice the text on
        // modules of many small computations).
        text.shrink_to_fit();
        text
    };
    // Checking and printing only read the computation: those of a large
    // one run side by side (each also splits its own work), those of a
    // small one in turn, which costs less than handing one to the pool.
    let (check, text) = if hlo::Parallelism::splits(hlo::Split::Verify, comp.len()).is_some() {
        rayon::join(check, print)
    } else {
        (check(), print())
    };
    let mut stats = ModuleStats::default();
    stats.add_computation(comp, id.0 == m.entry(db));
    Arc::new(Printed {
        hash: TextHash::default(),
        text,
        stats,
        failure,
        check,
        reports,
    })
}

/// The output module's header and debug tables.
#[salsa::tracked(returns(ref))]
pub fn printed_header(db: &dyn Db, m: SourceModule) -> String {
    let h = m.header(db);
    let module = Module {
        name: h.name.clone(),
        entry_computation_layout: ComputationLayout::clone(&output_entry_layout(db, m).0),
        entry_computation_layout_given: h.entry_computation_layout.is_some(),
        input_output_alias: h.input_output_alias.clone(),
        is_scheduled: h.is_scheduled,
        header_attrs: h.header_attrs.clone(),
        debug_tables: h.debug_tables.clone(),
        computations: Vec::new(),
        entry: m.entry_id(db),
    };
    hlo::print_header(&module)
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
    /// Bytes of the buffers of every array value, padding included
    /// (counted once per buffer, as `padding_bytes`).
    pub storage_bytes: u64,
    /// Bytes of the elements of those buffers: `storage_bytes` without
    /// the padding.
    pub logical_bytes: u64,
}

impl ModuleStats {
    /// Counts copies, bitcasts, transposes, padding and the bytes moved
    /// over a module, from the module alone.
    ///
    /// Bytes moved are what the output's own instructions move because of
    /// layouts: every `copy` whose result is laid out otherwise than its
    /// operand (`copy_bytes`), and every `transpose` or `reshape` that is
    /// not a bitcast under the exact algebra (`movement_bytes`); each
    /// counts the bytes of its result's buffer. This is independent of the
    /// passes' records: a test checks that both agree on every bundled
    /// module.
    pub fn of(module: &Module) -> ModuleStats {
        let mut s = ModuleStats::default();
        for (id, comp) in module.computation_ids().zip(&module.computations) {
            s.add_computation(comp, id == module.entry);
        }
        s
    }

    /// Takes away the counts of a part added before.
    pub fn remove(&mut self, o: &ModuleStats) {
        self.instructions -= o.instructions;
        self.copies -= o.copies;
        self.bitcasts -= o.bitcasts;
        self.transposes -= o.transposes;
        self.copy_bytes -= o.copy_bytes;
        self.movement_bytes -= o.movement_bytes;
        self.padding_bytes -= o.padding_bytes;
        self.storage_bytes -= o.storage_bytes;
        self.logical_bytes -= o.logical_bytes;
    }

    /// Adds another part's counts.
    pub fn add(&mut self, o: &ModuleStats) {
        self.instructions += o.instructions;
        self.copies += o.copies;
        self.bitcasts += o.bitcasts;
        self.transposes += o.transposes;
        self.copy_bytes += o.copy_bytes;
        self.movement_bytes += o.movement_bytes;
        self.padding_bytes += o.padding_bytes;
        self.storage_bytes += o.storage_bytes;
        self.logical_bytes += o.logical_bytes;
    }

    /// Adds the counts of one computation.
    fn add_computation(&mut self, comp: &Computation, is_entry: bool) {
        let s = self;
        for (_, inst) in comp.instructions() {
            s.instructions += 1;
            match inst.opcode {
                Opcode::Copy => s.copies += 1,
                Opcode::Bitcast => s.bitcasts += 1,
                Opcode::Transpose => s.transposes += 1,
                _ => {}
            }
            let (copied, moved) = moved_bytes(comp, inst);
            s.copy_bytes += copied;
            s.movement_bytes += moved;
            // Padding is counted once per buffer: bitcasts, tuples and
            // get-tuple-elements alias buffers defined elsewhere, and so do
            // the parameters of called computations.
            let aliases = inst.opcode == Opcode::Bitcast
                || inst.opcode.forwards_buffers()
                || (inst.opcode == Opcode::Parameter && !is_entry);
            if aliases {
                continue;
            }
            inst.shape.for_each_array(&mut |_, a| {
                if a.layout.is_some()
                    && let Ok(z) = shape::storage_size(a)
                {
                    let logical =
                        (u128::from(z.elements) * u128::from(z.element_bits)).div_ceil(8) as u64;
                    s.padding_bytes += (z.slots - z.elements) * z.element_bits / 8;
                    s.storage_bytes += z.bytes;
                    s.logical_bytes += logical;
                }
            });
        }
    }
}

/// The bytes one instruction moves because of layouts, as (copied, moved
/// by a transpose or reshape): its result's buffer when it is a copy
/// between two layouts, or a transpose or reshape that is not a bitcast.
fn moved_bytes(comp: &hlo::Computation, inst: &hlo::Instruction) -> (u64, u64) {
    let (Some(out), Some(&op)) = (inst.shape.as_array(), inst.operands().first()) else {
        return (0, 0);
    };
    let Some(operand) = comp.inst(op).shape.as_array() else {
        return (0, 0);
    };
    let (Some(lo), Some(lr)) = (&operand.layout, &out.layout) else {
        return (0, 0);
    };
    let bytes = || shape::storage_size(out).map_or(0, |z| z.bytes);
    let keeps_bytes = match inst.opcode {
        // A copy between two layouts that keep every byte in place moves
        // nothing because of layouts (relayout makes it a bitcast).
        Opcode::Copy if lo == lr => return (0, 0),
        Opcode::Copy => {
            return if shape::layout_change_keeps_bytes(operand, out) {
                (0, 0)
            } else {
                (bytes(), 0)
            };
        }
        Opcode::Transpose => match inst.attrs.ints(hlo::KnownAttr::Dimensions) {
            Some(dims) => {
                let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
                shape::transpose_keeps_bytes(operand, out, &dims)
            }
            None => return (0, 0),
        },
        Opcode::Reshape => shape::reshape_keeps_bytes(operand, out),
        _ => return (0, 0),
    };
    if keeps_bytes { (0, 0) } else { (0, bytes()) }
}
