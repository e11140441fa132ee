//! The relayout pass: turns assigned layouts into explicit instructions, in
//! their final form.
//!
//! Layout assignment decides a layout for every value and inserts a `copy`
//! wherever a use needs another layout. This pass finishes the job, per
//! computation, in three phases:
//!
//! 1. **Mismatched uses** ([`uses`]). Every use whose operand layout is not
//!    the one its consumer needs gets a new instruction: a `bitcast` when
//!    the exact, tile-aware algebra of the `shape` crate proves that every
//!    element keeps its byte offset in a buffer of the same size, else a
//!    `copy`. One instruction per (value, layout), shared by every use that
//!    needs it. After layout assignment there is nothing to do here; on
//!    hand-laid-out HLO (`--passes relayout`) there often is.
//! 2. **No-op movements** ([`noop`]). A `copy`, `transpose` or `reshape`
//!    whose operand and result layouts make it a physical no-op becomes a
//!    `bitcast`, keeping its name and metadata.
//! 3. **Expansion** ([`expand`], on request). Every `copy` between two
//!    tilings becomes its relayout plan: `pad`, `bitcast`, `transpose`,
//!    `slice`, `bitcast`, each an ordinary HLO instruction with its layout
//!    that the layout verifier proves (the bitcasts into and out of the
//!    tiles are physical views).
//!
//! Every rewrite is reported with what, where, how many bytes it moves and
//! why.
//!
//! Architecture invariant: the pass never walks elements. Every decision is
//! the `shape` crate's symbolic verdict; the brute-force walk lives in the
//! tests only.

pub mod expand;
pub mod noop;
pub mod uses;

use std::sync::Arc;

use hlo::{CompId, Computation, EditError, InstId, Module, Parallelism, Split};
use shape::{ArrayShape, DimVec, Shape};
use strum::{Display, IntoStaticStr, VariantArray};
use target::TargetSpec;

/// What the pass does beyond its fixed work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Options {
    /// Rewrite every `copy` between two tilings into explicit pad, bitcast,
    /// transpose and slice instructions.
    pub expand_relayouts: bool,
}

/// The kind of one rewrite. Its name in reports is the variant's name in
/// kebab case: `copy-to-bitcast`, `inserted-copy`, ...
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, VariantArray, IntoStaticStr, Display,
)]
#[strum(serialize_all = "kebab-case")]
pub enum RewriteKind {
    /// A `copy` that moves no byte became a `bitcast`.
    CopyToBitcast,
    /// A `transpose` that moves no byte became a `bitcast`.
    TransposeToBitcast,
    /// A `reshape` that moves no byte became a `bitcast`.
    ReshapeToBitcast,
    /// A `copy` was inserted for uses needing another layout.
    InsertedCopy,
    /// A `bitcast` was inserted for uses needing an equivalent layout.
    InsertedBitcast,
    /// A `copy` between two tilings was expanded into its relayout plan.
    ExpandedRelayout,
}

impl RewriteKind {
    /// Every kind, in report order.
    pub fn all() -> &'static [RewriteKind] {
        Self::VARIANTS
    }

    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// True when the rewrite leaves a `bitcast` at [`Rewrite::instruction`].
    pub fn is_bitcast(self) -> bool {
        !matches!(
            self,
            RewriteKind::InsertedCopy | RewriteKind::ExpandedRelayout
        )
    }
}

/// One instruction of an expanded relayout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpandedStep {
    /// The instruction's name.
    pub name: String,
    /// `pad`, `bitcast`, `transpose`, `slice`, or `copy` (packing or
    /// unpacking sub-byte elements on a target that reads them unpacked).
    pub op: &'static str,
    /// Its result, with layout.
    pub shape: ArrayShape,
    /// Bytes it writes (0 for a bitcast), padding included.
    pub bytes: u64,
}

/// One rewrite: what, where, how many bytes, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewrite {
    /// What was done.
    pub kind: RewriteKind,
    /// The computation.
    pub computation: String,
    /// The instruction now holding the result: the new `copy`/`bitcast`,
    /// the rewritten instruction (same name), or the last step of an
    /// expansion (the copy's name).
    pub instruction: String,
    /// The value read: the operand's name.
    pub operand: String,
    /// The operand's shape, with its layout. Shared, with `to` and `why`,
    /// by the rewrites of one movement: the 24-layer transformer turns
    /// 884 reshapes of 11 distinct shape pairs into bitcasts, and a
    /// session keeps every report.
    pub from: Arc<ArrayShape>,
    /// The result's shape, with its layout.
    pub to: Arc<ArrayShape>,
    /// For a transpose turned bitcast: its `dimensions` (output dimension
    /// `k` is operand dimension `dims[k]`).
    pub transpose_dims: Option<DimVec>,
    /// Bytes moved, padding included; 0 for bitcasts.
    pub bytes: u64,
    /// The uses served (inserted instructions): `operand 1 of %add`,
    /// `the entry result`.
    pub users: Vec<String>,
    /// Why: the consumer and its need, and the algebra's reason.
    pub why: Arc<str>,
    /// The instructions of an expanded relayout, in order.
    pub steps: Vec<ExpandedStep>,
}

/// What the pass did to a module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Every rewrite, per computation in module order, phases in order.
    /// Each is shared: an incremental database holds a computation's
    /// rewrites once, for its own part and for the module's report.
    pub rewrites: Vec<Arc<Rewrite>>,
}

impl Report {
    /// The rewrites of one kind.
    pub fn count(&self, kind: RewriteKind) -> usize {
        self.rewrites.iter().filter(|r| r.kind == kind).count()
    }

    /// Bytes moved by the instructions the pass inserted or expanded. A
    /// copy the pass inserted and then expanded counts once, as its
    /// expansion.
    ///
    /// The expanded copies are gathered first: looking each inserted copy
    /// up among all rewrites made every JSON answer quadratic in the
    /// number of copies.
    pub fn bytes_moved(&self) -> u64 {
        let expanded: std::collections::HashSet<(&str, &str)> = self
            .rewrites
            .iter()
            .filter(|r| r.kind == RewriteKind::ExpandedRelayout)
            .map(|r| (r.computation.as_str(), r.instruction.as_str()))
            .collect();
        self.rewrites
            .iter()
            .filter(|r| {
                !(r.kind == RewriteKind::InsertedCopy
                    && expanded.contains(&(r.computation.as_str(), r.instruction.as_str())))
            })
            .map(|r| r.bytes)
            .sum()
    }

    /// Bytes moved by the copies the pass inserted.
    pub fn inserted_copy_bytes(&self) -> u64 {
        self.rewrites
            .iter()
            .filter(|r| r.kind == RewriteKind::InsertedCopy)
            .map(|r| r.bytes)
            .sum()
    }
}

/// Why the pass could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayoutError {
    /// A graph edit was refused: a bug in the pass, reported rather than
    /// hidden.
    #[error("computation {computation}: graph edit failed: {error}")]
    Edit {
        computation: String,
        error: EditError,
    },
    /// The computation's instructions form a cycle.
    #[error("computation {computation} has a cycle through %{instruction}")]
    Cycle {
        computation: String,
        instruction: String,
    },
    /// A layout a use needs is not valid for its value.
    #[error(
        "computation {computation}: %{instruction} needs {layout} for {operand}, which is not a valid layout of it: {message}"
    )]
    InvalidNeed {
        computation: String,
        instruction: String,
        operand: String,
        layout: String,
        message: String,
    },
    /// A tiled copy has no relayout plan.
    #[error(
        "computation {computation}: cannot expand %{instruction} from {from} to {to}: {message}"
    )]
    Plan {
        computation: String,
        instruction: String,
        from: String,
        to: String,
        message: String,
    },
    /// The entry result does not have the shape the module's
    /// `entry_computation_layout` gives.
    #[error(
        "computation {computation}: the root does not match the entry computation layout's result {expected}"
    )]
    RootShape {
        computation: String,
        expected: String,
    },
}

/// What a computation's relayout needs to know about the module around it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ComputationFacts {
    /// The layout the computation's result must have (the entry's
    /// `entry_computation_layout` result, shared with it); leaves without
    /// a layout are free.
    pub result: Option<Arc<Shape>>,
}

/// The facts of computation `id` in `module`: only the entry has a fixed
/// result.
pub fn facts_for(module: &dyn hlo::ModuleFacts, id: CompId) -> ComputationFacts {
    if id == module.entry() {
        ComputationFacts {
            result: Some(module.entry_layout().result),
        }
    } else {
        ComputationFacts::default()
    }
}

/// Runs the pass on every computation of `module`.
///
/// Computations are independent here, so a large module's are rewritten on
/// all cores (see [`Split::Module`]); the rewrites are reported in
/// computation order, and the first error in that order is the one
/// returned, as a sequential run would.
pub fn run(
    module: &mut Module,
    target: &TargetSpec,
    opts: &Options,
) -> Result<Report, RelayoutError> {
    let facts: Vec<ComputationFacts> = module
        .computation_ids()
        .map(|id| facts_for(module, id))
        .collect();
    let size = module.instruction_count();
    let per_computation: Vec<Result<Vec<Arc<Rewrite>>, RelayoutError>> =
        Parallelism::map_mut(Split::Module, size, &mut module.computations, |i, comp| {
            run_computation(&facts[i], comp, target, opts)
        });
    let mut report = Report::default();
    for rewrites in per_computation {
        report.rewrites.extend(rewrites?);
    }
    Ok(report)
}

/// Runs the pass on one computation: mismatched uses, no-op movements,
/// then (on request) expansion. The result depends only on the computation,
/// its facts, the target and the options, so an incremental database can
/// cache it per computation.
pub fn run_computation(
    facts: &ComputationFacts,
    comp: &mut Computation,
    target: &TargetSpec,
    opts: &Options,
) -> Result<Vec<Arc<Rewrite>>, RelayoutError> {
    let _span = tracing::debug_span!("relayout", computation = %comp.name).entered();
    let mut rewrites = uses::fix_uses(facts, comp, target)?;
    rewrites.extend(noop::movements_to_bitcasts(comp));
    if opts.expand_relayouts {
        rewrites.extend(expand::expand_copies(comp, target)?);
    }
    tracing::debug!(rewrites = rewrites.len(), "relayout done");
    Ok(rewrites)
}

/// Wraps an edit error with the computation's name.
pub(crate) fn edit(computation: &str) -> impl Fn(EditError) -> RelayoutError + '_ {
    move |error| RelayoutError::Edit {
        computation: computation.to_string(),
        error,
    }
}

/// A topological order (operands first) of the computation.
pub(crate) fn order(comp: &Computation) -> Result<Vec<InstId>, RelayoutError> {
    comp.topological_order().map_err(|e| RelayoutError::Cycle {
        computation: e.computation,
        instruction: e.instruction,
    })
}

/// True when both arrays live in the same memory space (`S(n)`). The
/// bitcast test compares byte positions only; a change of memory space
/// always moves the bytes, so it is never a bitcast.
pub(crate) fn same_memory_space(a: &ArrayShape, b: &ArrayShape) -> bool {
    a.layout_or_default().memory_space == b.layout_or_default().memory_space
}

/// Bytes of `a`'s buffer, padding included (saturating on absurd shapes).
pub(crate) fn storage_bytes(a: &ArrayShape) -> u64 {
    shape::storage_size(a).map_or(u64::MAX, |s| s.bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Report, Rewrite, RewriteKind};

    fn rewrite(
        kind: RewriteKind,
        computation: &str,
        instruction: &str,
        bytes: u64,
    ) -> Arc<Rewrite> {
        let a = shape::ArrayShape::new(shape::PrimitiveType::F32, &[2, 3]);
        Arc::new(Rewrite {
            kind,
            computation: computation.into(),
            instruction: instruction.into(),
            operand: "p".into(),
            from: Arc::new(a.clone()),
            to: Arc::new(a),
            transpose_dims: None,
            bytes,
            users: Vec::new(),
            why: Arc::from(""),
            steps: Vec::new(),
        })
    }

    #[test]
    fn an_expanded_copy_counts_once_as_its_expansion_in_its_own_computation() {
        use RewriteKind::{ExpandedRelayout, InsertedBitcast, InsertedCopy};
        let report = Report {
            rewrites: vec![
                // Expanded in `main`: counted as the expansion (40), not as
                // the copy (24).
                rewrite(InsertedCopy, "main", "copy.1", 24),
                rewrite(ExpandedRelayout, "main", "copy.1", 40),
                // The same name in another computation, not expanded there.
                rewrite(InsertedCopy, "body", "copy.1", 24),
                // Expanded under another name: the copy still counts.
                rewrite(InsertedCopy, "main", "copy.2", 8),
                rewrite(ExpandedRelayout, "main", "copy.3", 16),
                rewrite(InsertedBitcast, "main", "bitcast.1", 0),
            ],
        };
        assert_eq!(report.bytes_moved(), 40 + 24 + 8 + 16);
        assert_eq!(report.inserted_copy_bytes(), 24 + 24 + 8);
    }

    #[test]
    fn kinds_keep_their_report_names_and_order() {
        let names: Vec<String> = RewriteKind::all().iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            [
                "copy-to-bitcast",
                "transpose-to-bitcast",
                "reshape-to-bitcast",
                "inserted-copy",
                "inserted-bitcast",
                "expanded-relayout"
            ]
        );
        for &k in RewriteKind::all() {
            assert_eq!(k.name(), k.to_string());
        }
    }
}
