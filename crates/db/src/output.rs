//! The module's output, assembled from its computations' parts, and why a
//! run refuses a module or fails on it. The engine ([`crate::engine`])
//! keeps each computation's part from the run that last made it, and
//! assembles a new output only from what changed.
//!
//! The verdicts follow the order of the stateless pipeline: the input's
//! parse errors, then its problems; then assignment, applying, relayout;
//! then the output's problems.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use hlo::{ComputationLayout, ParseError, VerifyError};
use layout_assignment::{ApplyError, Report as AssignmentReport, TiledEntryLayout};
use relayout::{RelayoutError, Report as RelayoutReport};

use crate::AssignError;
use crate::pipeline::{ModuleStats, Printed};

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
    pub(crate) fn step(&self) -> u8 {
        match self {
            OutputError::Assign(_) => 0,
            OutputError::Apply(_) => 1,
            OutputError::Relayout(_) => 2,
        }
    }
}

/// One computation's part of an output: its name and its printed text
/// (with the blank line after it), shared with the database.
#[derive(Clone, Debug)]
pub struct Part {
    /// The computation's name, without `%`.
    pub name: Arc<str>,
    pub(crate) printed: Arc<Printed>,
}

impl Part {
    /// Its text, with the blank line after it.
    pub fn text(&self) -> &str {
        &self.printed.text
    }

    /// Its text's hash (see [`text_hash`]): pipelines that keep an
    /// earlier answer compare computations by it.
    pub fn hash(&self) -> u64 {
        self.printed.hash.of(&self.printed.text)
    }

    /// Whether `other` is the very part this is (the same printed value),
    /// which says its text is the same without reading it.
    pub fn same(&self, other: &Part) -> bool {
        Arc::ptr_eq(&self.printed, &other.printed)
    }
}

impl PartialEq for Part {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && (self.same(other) || self.printed.text == other.printed.text)
    }
}

impl Eq for Part {}

/// The output module: its header, each computation's part in order, and
/// the counts over it. Its text, the header followed by every part, is
/// made the first time it is asked for: a pipeline that asks for the
/// changes alone never has the whole text copied.
#[derive(Debug)]
pub struct Assembled {
    /// The header: the module line, with the entry computation layout,
    /// and the debug tables.
    pub header: Arc<String>,
    /// The entry computation layout the header prints (shared with every
    /// output made from it: it is as long as the entry's parameter list).
    pub entry_layout: Arc<ComputationLayout>,
    /// Each computation's part, in order (shared with every output made
    /// from it).
    pub computations: Arc<[Part]>,
    /// Counts over the output.
    pub stats: ModuleStats,
    text: OnceLock<Arc<String>>,
    reports: Arc<LazyReports>,
}

/// The module's reports: layout assignment's and relayout's, each when its
/// pass runs.
pub type Reports = (Option<Arc<AssignmentReport>>, Option<Arc<RelayoutReport>>);

/// The module's reports, made of the parts' own the first time they are
/// asked for ([`Assembled::reports`]): a pipeline that asks for the text
/// alone never has them joined, which takes as long as the module is
/// large. Outputs whose parts report the same share one, so that the
/// reports are joined once for all of them (the engine starts a new one
/// when a part's reports change).
#[derive(Debug)]
pub struct LazyReports {
    /// Whether layout assignment ran, and relayout.
    pub(crate) assign: bool,
    pub(crate) relayout: bool,
    /// The entry leaves the header tiled (see [`AssignmentReport`]), once
    /// there is a header.
    pub(crate) tiled: Option<Vec<TiledEntryLayout>>,
    pub(crate) made: OnceLock<Reports>,
}

impl LazyReports {
    /// Whether layout assignment's report is one of them (the pass ran).
    pub fn has_assignment(&self) -> bool {
        self.assign
    }

    /// Whether relayout's report is one of them.
    pub fn has_relayout(&self) -> bool {
        self.relayout
    }

    pub(crate) fn new(assign: bool, relayout: bool, tiled: Option<Vec<TiledEntryLayout>>) -> Self {
        LazyReports {
            assign,
            relayout,
            tiled,
            made: OnceLock::new(),
        }
    }
}

impl Assembled {
    /// An output of these parts.
    pub(crate) fn new(
        header: Arc<String>,
        entry_layout: Arc<ComputationLayout>,
        computations: Arc<[Part]>,
        stats: ModuleStats,
        reports: Arc<LazyReports>,
    ) -> Assembled {
        Assembled {
            header,
            entry_layout,
            computations,
            stats,
            text: OnceLock::new(),
            reports,
        }
    }

    /// The reports this output shares with the outputs whose parts report
    /// the same (see [`LazyReports`]): one value for all of them, made or
    /// not, which a pipeline keeping an earlier answer compares by
    /// identity.
    pub fn lazy_reports(&self) -> &Arc<LazyReports> {
        &self.reports
    }

    /// The module's reports: every computation's, in order (see
    /// [`LazyReports`]).
    pub fn reports(&self) -> &Reports {
        let lazy = &self.reports;
        lazy.made.get_or_init(|| {
            let parts = || self.computations.iter().map(|p| &*p.printed.reports);
            let assignment = lazy.assign.then(|| {
                let mut report = AssignmentReport::default();
                for part in parts() {
                    if let Ok(Some(a)) = &part.assignment {
                        report.extend_from(a);
                    }
                }
                if let Some(tiled) = &lazy.tiled {
                    report.tiled_entry = tiled.clone();
                    report.entry_layout = Some(ComputationLayout::clone(&self.entry_layout));
                }
                Arc::new(report)
            });
            let relayout = lazy.relayout.then(|| {
                let mut rewrites = Vec::new();
                for part in parts() {
                    if let Ok(r) = &part.rewrites {
                        rewrites.extend(r.iter().cloned());
                    }
                }
                Arc::new(RelayoutReport { rewrites })
            });
            (assignment, relayout)
        })
    }

    /// The whole text: the header followed by every part, in order.
    pub fn text(&self) -> &Arc<String> {
        self.text.get_or_init(|| {
            let len = self.header.len()
                + self
                    .computations
                    .iter()
                    .map(|p| p.text().len())
                    .sum::<usize>();
            let mut text = String::with_capacity(len);
            text.push_str(&self.header);
            for p in self.computations.iter() {
                text.push_str(p.text());
            }
            Arc::new(text)
        })
    }

    /// Where the header and each part lie in [`Assembled::text`].
    pub fn ranges(&self) -> (Range<usize>, Vec<Range<usize>>) {
        let mut at = self.header.len();
        let parts = self
            .computations
            .iter()
            .map(|p| {
                let start = at;
                at += p.text().len();
                start..at
            })
            .collect();
        (0..self.header.len(), parts)
    }
}

/// A text's hash: SipHash with fixed keys, so the same text gives the same
/// hash in every process, and texts that differ collide with a chance of
/// 2^-64.
pub fn text_hash(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}
