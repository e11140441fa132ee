//! The module's verdicts and output, assembled from its computations'
//! parts: one query each, so that a re-run with no change is one lookup,
//! and a re-run after an edit re-reads each unchanged computation's parts
//! at a glance and redoes only the join.
//!
//! The joins follow the order of the stateless pipeline: the input's
//! parse errors, then its problems; then assignment, applying, relayout;
//! then the output's problems.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::sync::Arc;

use hlo::{ComputationLayout, ParseError, VerifyError};
use layout_assignment::{ApplyError, Report as AssignmentReport};
use relayout::{RelayoutError, Report as RelayoutReport};

use crate::pipeline::{self, ModuleStats};
use crate::{AssignError, Db, SourceModule, absolute, parse_error};

/// Why the input module is refused.
#[derive(Clone, Debug)]
pub enum InputRefusal {
    /// The first computation, in text order, that does not parse; the
    /// error is placed in the file.
    Parse(Box<ParseError>),
    /// The input's problems: module-wide, then each computation's; the
    /// bitcasts that move bytes only when there is no other.
    Problems(Vec<VerifyError>),
}

/// The input check of a module: parse errors first, in computation order,
/// at their place in the file; then the module-wide and per-computation
/// structural problems; then, once the module is otherwise well formed,
/// the bitcasts that move bytes.
#[salsa::tracked(returns(ref), no_eq)]
pub fn input_verdict(db: &dyn Db, m: SourceModule) -> Result<(), InputRefusal> {
    let comps = m.computations(db);
    for &c in comps {
        if let Some(e) = parse_error(db, c) {
            return Err(InputRefusal::Parse(Box::new(absolute(e, c, db, m))));
        }
    }
    // Each computation's checks are read (and, on one thread, made)
    // before the module-wide check, which reads every computation's
    // names: made after it, each would clear the record of reads it left
    // at their depth (see `driver::assemble`).
    let mut each: Vec<VerifyError> = Vec::new();
    for &c in comps {
        each.extend(pipeline::input_check(db, c).structural.iter().cloned());
    }
    let mut problems = pipeline::input_module_problems(db, m).clone();
    problems.append(&mut each);
    if problems.is_empty() {
        for &c in comps {
            problems.extend(pipeline::input_check(db, c).bitcasts.iter().cloned());
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(InputRefusal::Problems(problems))
    }
}

/// Why the output could not be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputError {
    /// A computation could not be assigned (its parse error is placed in
    /// the file).
    Assign(AssignError),
    /// An assignment could not be applied.
    Apply(ApplyError),
    /// Relayout failed.
    Relayout(Box<RelayoutError>),
}

impl OutputError {
    /// The step that failed, in the order the steps run over the module:
    /// every assignment, then applying each, then relayout.
    fn step(&self) -> u8 {
        match self {
            OutputError::Assign(_) => 0,
            OutputError::Apply(_) => 1,
            OutputError::Relayout(_) => 2,
        }
    }
}

/// One computation's part of an output text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The computation's name, without `%`.
    pub name: String,
    /// Its text's byte range, with the blank line after it.
    pub range: Range<usize>,
    /// The hash of that text (see [`text_hash`]).
    pub hash: u64,
}

/// The output module: its text, where each computation's part lies, and
/// the counts over it. The reports are joins of their own
/// ([`merged_assignment`], [`merged_rewrites`]): an edit that changes a
/// computation's text but not what the passes report of it does not
/// rebuild them.
#[derive(Debug)]
pub struct Assembled {
    /// The header followed by every computation's text, in order.
    pub text: Arc<String>,
    /// The header's byte range in `text`.
    pub header: Range<usize>,
    /// The entry computation layout the header prints (shared with every
    /// output made from it: it is as long as the entry's parameter list).
    pub entry_layout: Arc<ComputationLayout>,
    /// Each computation's part of `text`, in order (shared with every
    /// output made from it).
    pub computations: Arc<[Part]>,
    /// Counts over the output.
    pub stats: ModuleStats,
}

/// The output of module `m`, from its computations' parts, or the first
/// step that failed: an assignment in computation order, then applying
/// one, then relayout. Assumes the input passed [`input_verdict`].
#[salsa::tracked(returns(ref), no_eq)]
pub fn assembled(db: &dyn Db, m: SourceModule) -> Result<Arc<Assembled>, OutputError> {
    let comps = m.computations(db);
    // One read per computation: its printed part carries its failure.
    let printed: Vec<&pipeline::Printed> =
        comps.iter().map(|&c| pipeline::printed(db, c)).collect();
    // The first failure of the earliest step, in computation order:
    // assignments come before applying them, and applying before relayout.
    let first = comps
        .iter()
        .zip(&printed)
        .filter_map(|(&c, p)| Some((c, p.failure.as_deref()?)))
        .min_by_key(|(_, f)| f.step());
    if let Some((c, failure)) = first {
        return Err(match failure {
            OutputError::Assign(AssignError::Parse(p)) => {
                OutputError::Assign(AssignError::Parse(Box::new(absolute(p, c, db, m))))
            }
            other => other.clone(),
        });
    }
    let header = pipeline::printed_header(db, m);
    let mut text =
        String::with_capacity(header.len() + printed.iter().map(|p| p.text.len()).sum::<usize>());
    text.push_str(header);
    let mut parts = Vec::with_capacity(comps.len());
    let mut stats = ModuleStats::default();
    for (&c, p) in comps.iter().zip(printed) {
        let start = text.len();
        text.push_str(&p.text);
        parts.push(Part {
            name: c.name(db).clone(),
            range: start..text.len(),
            hash: p.hash,
        });
        stats.add(&p.stats);
    }
    Ok(Arc::new(Assembled {
        text: Arc::new(text),
        header: 0..header.len(),
        entry_layout: Arc::clone(&pipeline::output_entry_layout(db, m).0),
        computations: Arc::from(parts),
        stats,
    }))
}

/// The assignment report of module `m`'s output, from its computations'
/// parts (`None` when assignment does not run). Read after [`assembled`]
/// succeeded: a part that failed is skipped here, reported there.
#[salsa::tracked(returns(ref), no_eq)]
pub fn merged_assignment(db: &dyn Db, m: SourceModule) -> Option<Arc<AssignmentReport>> {
    if !m.steps(db).assign {
        return None;
    }
    let mut report = AssignmentReport::default();
    for &c in m.computations(db) {
        if let Ok(Some(part)) = pipeline::assignment_part(db, c) {
            report.extend_from(part);
        }
    }
    let (entry_layout, tiled) = pipeline::output_entry_layout(db, m);
    report.tiled_entry = tiled.clone();
    report.entry_layout = Some(ComputationLayout::clone(entry_layout));
    Some(Arc::new(report))
}

/// The relayout report of module `m`'s output: every computation's
/// rewrites, in order (`None` when relayout does not run). Read after
/// [`assembled`] succeeded, as [`merged_assignment`].
#[salsa::tracked(returns(ref), no_eq)]
pub fn merged_rewrites(db: &dyn Db, m: SourceModule) -> Option<Arc<RelayoutReport>> {
    if !m.steps(db).relayout {
        return None;
    }
    let mut rewrites = Vec::new();
    for &c in m.computations(db) {
        if let Ok(r) = pipeline::rewrites(db, c) {
            rewrites.extend(r.iter().cloned());
        }
    }
    Some(Arc::new(RelayoutReport { rewrites }))
}

/// A text's hash: SipHash with fixed keys, so the same text gives the same
/// hash in every process, and texts that differ collide with a chance of
/// 2^-64.
pub fn text_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The output's problems: the structural ones (module-wide, then each
/// computation's) or, when there are none, the layouts' (each
/// computation's).
#[salsa::tracked(returns(ref), no_eq)]
pub fn output_verdict(db: &dyn Db, m: SourceModule) -> Vec<VerifyError> {
    let comps = m.computations(db);
    let mut structural = pipeline::output_module_problems(db, m).clone();
    let mut layouts = Vec::new();
    for &c in comps {
        let check = &pipeline::printed(db, c).check;
        structural.extend(check.structural.iter().cloned());
        layouts.extend(check.layouts.iter().cloned());
    }
    if structural.is_empty() {
        layouts
    } else {
        structural
    }
}
