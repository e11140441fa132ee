//! The structural verifier: operand counts and kinds, result shapes of the
//! common opcodes, called computations, cycles, roots, names, parameter
//! numbers and layout validity. It collects every problem it finds.
//!
//! `module.rs` holds the checks of a module as a whole (names, the entry
//! computation layout), `calls.rs` those of called computations and
//! `shapes.rs` those of operand counts and result shapes; this file walks
//! computations and their instructions, in parallel when they are large.
//!
//! Architecture invariant: nothing here depends on which layout a value
//! has, only on whether a layout is well formed for its shape; the
//! layout-sensitive checks belong to the passes.

mod calls;
mod module;
mod shapes;

use std::fmt;

use petgraph::algo::toposort;
use rustc_hash::FxHashMap;

use shape::{ArrayShape, Shape};

use crate::parallelism::{Parallelism, Split};
use crate::view::ModuleView;
use crate::{AttrValue, Callee, CompId, Computation, InstId, Instruction, KnownAttr, Module};

pub use module::{uses_before_definition, verify_entry_layout, verify_module_checks, verify_names};

/// One problem found by [`verify_module`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// The computation, without `%`; empty for a problem of the module.
    pub computation: String,
    /// The instruction, without `%`, when the problem is an instruction's.
    pub instruction: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl VerifyError {
    /// Where the problem is in `text`, the module text it was parsed from:
    /// the 1-based line and column of the instruction's name (or of the
    /// computation's header, for a problem of a computation), found by
    /// name; for a problem of the module, its `HloModule` line (at the
    /// entry computation layout when the problem is about it). `None` when
    /// the text does not hold it (a module built in code). The verifier
    /// itself works on the graph; positions are looked up only when a
    /// problem is reported, so the happy path never counts lines.
    pub fn locate(&self, text: &str) -> Option<(usize, usize)> {
        if self.computation.is_empty() {
            let (i, line) = text
                .lines()
                .enumerate()
                .find(|(_, l)| l.starts_with("HloModule"))?;
            let col = self
                .message
                .contains("entry_computation_layout")
                .then(|| line.find("entry_computation_layout="))
                .flatten()
                .map_or(1, |at| line[..at].chars().count() + 1);
            return Some((i + 1, col));
        }
        crate::diag::find_definition(text, &self.computation, self.instruction.as_deref())
    }

    /// The problem as a compiler prints it: `FILE:LINE:COL: error: ...`
    /// when [`VerifyError::locate`] finds it in `text`, else
    /// `FILE: error: ...`.
    pub fn located(&self, text: &str, file: &str) -> String {
        match self.locate(text) {
            Some((line, col)) => format!("{file}:{line}:{col}: error: {self}"),
            None => format!("{file}: error: {self}"),
        }
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.computation, &self.instruction) {
            (c, _) if c.is_empty() => write!(f, "module: {}", self.message),
            (c, Some(i)) => write!(f, "computation %{c}, instruction %{i}: {}", self.message),
            (c, None) => write!(f, "computation %{c}: {}", self.message),
        }
    }
}

/// Checks a module's structure and returns every problem found, in
/// computation and program order.
pub fn verify_module(module: &Module) -> Vec<VerifyError> {
    let split = Parallelism::splits(Split::Verify, module.instruction_count());
    verify_module_split(module, split)
}

/// [`verify_module`], sequentially for `None`, else in parallel, a large
/// computation in runs of `grain` instructions.
fn verify_module_split(module: &Module, split: Option<usize>) -> Vec<VerifyError> {
    let split = split.map(|grain| grain.max(1));
    if split.is_none() {
        let mut errors = verify_module_checks(module);
        let mut v = Verifier {
            view: module,
            errors: Vec::new(),
            split,
        };
        for (i, comp) in module.computations.iter().enumerate() {
            v.computation(CompId(i as u32), comp);
        }
        errors.extend(v.errors);
        return errors;
    }
    // A large module is checked on all cores: the module-wide checks (a
    // pass over every instruction name) beside the computations, these in
    // parallel, a large computation's instructions in runs. Each part
    // collects its own problems, joined in order: the sequential list,
    // sooner.
    use rayon::prelude::*;
    let (mut errors, parts) = rayon::join(
        || verify_module_checks(module),
        || {
            module
                .computations
                .par_iter()
                .enumerate()
                .map(|(i, comp)| {
                    let mut part = Verifier {
                        view: module,
                        errors: Vec::new(),
                        split,
                    };
                    part.computation(CompId(i as u32), comp);
                    part.errors
                })
                .collect::<Vec<Vec<VerifyError>>>()
        },
    );
    errors.extend(parts.into_iter().flatten());
    errors
}

/// The checks of one computation `comp` (id `id`) of the module `view`
/// shows, which gives it the signatures of the computations it calls: what
/// [`verify_module`] reports for it beside the module-wide checks
/// ([`verify_module_checks`]). A large computation is checked in parallel.
pub fn verify_computation(
    view: &dyn ModuleView,
    id: CompId,
    comp: &Computation,
) -> Vec<VerifyError> {
    let mut v = Verifier {
        view,
        errors: Vec::new(),
        split: Parallelism::splits(Split::Verify, comp.len()),
    };
    v.computation(id, comp);
    v.errors
}

/// True when every instruction of the graph is scheduled once and after
/// all its operands and control predecessors: then there is no cycle, and
/// the general search (which names an instruction on a cycle) is not
/// needed. XLA prints computations in such an order.
fn schedule_is_topological(comp: &Computation) -> bool {
    let graph = comp.graph();
    let schedule = comp.schedule();
    if schedule.len() != graph.node_count() {
        return false;
    }
    let bound = comp.node_bound();
    let mut position = vec![usize::MAX; bound];
    for (i, &id) in schedule.iter().enumerate() {
        match position.get_mut(id.index()) {
            Some(slot) if *slot == usize::MAX => *slot = i,
            _ => return false,
        }
    }
    schedule.iter().enumerate().all(|(i, &id)| {
        graph
            .neighbors_directed(id, petgraph::Direction::Incoming)
            .all(|p| position.get(p.index()).is_some_and(|&j| j < i))
    })
}

struct Verifier<'m> {
    /// The module around the computations checked.
    view: &'m dyn ModuleView,
    errors: Vec<VerifyError>,
    /// `Some(grain)` when what is checked is large enough to check in
    /// parallel, in runs of `grain` instructions.
    split: Option<usize>,
}

/// A shape for messages: layouts included, since they can be the problem.
fn show(s: &Shape) -> String {
    s.to_string()
}
/// The first array leaf of a shape, in order (an all-reduce of a tuple
/// reduces every leaf with one computation). Nesting is bounded by the
/// parser's depth limit.
fn first_array_leaf(s: &Shape) -> Option<&ArrayShape> {
    match s {
        Shape::Array(a) => Some(a),
        Shape::Tuple(es) => es.iter().find_map(first_array_leaf),
        _ => None,
    }
}

impl<'m> Verifier<'m> {
    fn comp_error(&mut self, comp: &Computation, message: String) {
        self.errors.push(VerifyError {
            computation: comp.name.clone(),
            instruction: None,
            message,
        });
    }

    fn error(&mut self, comp: &Computation, inst: &Instruction, message: String) {
        self.errors.push(VerifyError {
            computation: comp.name.clone(),
            instruction: Some(inst.name.clone()),
            message,
        });
    }

    fn computation(&mut self, id: CompId, comp: &Computation) {
        match comp.root() {
            None => self.comp_error(comp, "has no ROOT instruction".into()),
            Some(r) if comp.get(r).is_none() => self.comp_error(
                comp,
                "the ROOT instruction is not in the computation".into(),
            ),
            Some(_) => {}
        }
        if comp.is_empty() {
            self.comp_error(comp, "has no instructions".into());
        }
        if !schedule_is_topological(comp)
            && let Err(cycle) = toposort(comp.graph(), None)
        {
            let inst = comp.inst(cycle.node_id());
            self.error(
                comp,
                inst,
                "is part of a cycle of operand and control dependencies".into(),
            );
        }
        // Parameter numbers: unique and dense.
        let mut numbers: FxHashMap<u32, &str> = FxHashMap::default();
        for (_, inst) in comp.instructions() {
            if let Some(n) = inst.parameter_number()
                && let Some(first) = numbers.insert(n, inst.name.as_str())
            {
                self.error(
                    comp,
                    inst,
                    format!("parameter number {n} is already used by %{first}"),
                );
            }
        }
        let count = numbers.len() as u32;
        for (_, inst) in comp.instructions() {
            if let Some(n) = inst.parameter_number()
                && n >= count
            {
                self.error(
                        comp,
                        inst,
                        format!("parameter number {n} leaves a gap: the computation has {count} parameters, numbered 0 to {}", count.saturating_sub(1)),
                    );
            }
        }
        if self.view.is_scheduled() {
            for (user, op) in module::early_uses(comp) {
                let message = format!(
                    "uses %{} before it is computed, in a scheduled module",
                    comp.inst(op).name
                );
                self.error(comp, comp.inst(user), message);
            }
        }
        let _ = id;
        let schedule = comp.schedule();
        let grain = match self.split {
            Some(grain) if schedule.len() >= 2 * grain => grain,
            _ => {
                self.instructions(comp, schedule);
                return;
            }
        };
        use rayon::prelude::*;
        let (view, split) = (self.view, self.split);
        let parts: Vec<Vec<VerifyError>> = schedule
            .par_chunks(grain)
            .map(|run| {
                let mut part = Verifier {
                    view,
                    errors: Vec::new(),
                    split,
                };
                part.instructions(comp, run);
                part.errors
            })
            .collect();
        self.errors.extend(parts.into_iter().flatten());
    }

    /// The per-instruction checks of `ids`, in order.
    fn instructions(&mut self, comp: &Computation, ids: &[InstId]) {
        for &inst_id in ids {
            if let Some(inst) = comp.get(inst_id) {
                self.instruction(comp, inst_id, inst);
            }
        }
    }

    fn called(&self, id: CompId) -> Option<Callee<'m>> {
        self.view.callee(id)
    }

    fn instruction(&mut self, comp: &Computation, _id: InstId, inst: &Instruction) {
        // Layouts must be well formed for their shapes.
        let mut bad = Vec::new();
        inst.shape.for_each_array(&mut |_, a| {
            if let Err(e) = a.validate() {
                bad.push(format!("the layout of {a} is invalid: {e}"));
            } else if let Some(problem) = crate::parse::array_size_problem(a) {
                bad.push(format!("shape {a} {problem}"));
            }
        });
        for message in bad {
            self.error(comp, inst, message);
        }
        if let Some(AttrValue::Shapes(shapes)) = inst.attrs.get(KnownAttr::OperandLayoutConstraints)
        {
            for s in shapes {
                if let Err(e) = s.validate() {
                    self.error(
                        comp,
                        inst,
                        format!("operand layout constraint {}: {e}", show(s)),
                    );
                }
            }
        }
        // Called computations exist.
        let mut all_called = true;
        for c in inst.attrs.called_computations() {
            if self.called(c).is_none() {
                self.error(
                    comp,
                    inst,
                    format!("calls computation id {}, which does not exist", c.0),
                );
                all_called = false;
            }
        }
        let operands: Vec<&Shape> = inst
            .operands()
            .iter()
            .map(|&o| &comp.inst(o).shape)
            .collect();
        if !self.arity(comp, inst, operands.len()) {
            return;
        }
        if all_called {
            self.called_computations(comp, inst, &operands);
        }
        self.shape_rules(comp, inst, &operands);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel verifier reports the sequential problems, in the same
    /// order, on every module under `testdata/` and on a damaged copy of
    /// each (every fifth instruction's shape gains a dimension, so that
    /// most computations have problems spread through them).
    #[test]
    fn parallel_verify_is_sequential_verify() {
        let (mut checked, mut problems) = (0, 0);
        for (path, module) in crate::testdata_modules() {
            let mut damaged = module.clone();
            for comp in &mut damaged.computations {
                let ids: Vec<InstId> = comp.schedule().iter().copied().skip(2).step_by(5).collect();
                for id in ids {
                    if let Shape::Array(a) = &mut comp.inst_mut(id).shape {
                        a.dims.push(7);
                    }
                }
            }
            for m in [&module, &damaged] {
                let sequential = verify_module_split(m, None);
                for grain in [1, 3, Split::Verify.grain()] {
                    let parallel = verify_module_split(m, Some(grain));
                    assert!(
                        sequential == parallel,
                        "{} in runs of {grain}",
                        path.display()
                    );
                }
                problems += sequential.len();
            }
            checked += 1;
        }
        assert!(
            checked > 100 && problems > 1000,
            "{checked} modules checked, {problems} problems compared"
        );
    }

    /// Module-wide problems (checked beside the computations on the
    /// parallel path) still come first, in the sequential order.
    #[test]
    fn module_problems_come_first_in_parallel_too() {
        let text = "HloModule m, entry_computation_layout={(f32[2]{0})->f32[3]{0}}\n\n\
                    %f (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %n = f32[] negate(%x)\n}\n\n\
                    ENTRY %main (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  \
                    %x = f32[3]{0} negate(%p)\n  ROOT %n = f32[2]{0} add(%p, %x)\n}\n";
        let module = crate::parse_module(text, "t").unwrap();
        let sequential = verify_module_split(&module, None);
        let messages: Vec<&str> = sequential.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(
            messages[0].contains("already used")
                && messages[2].contains("entry_computation_layout")
        );
        for grain in [1, 2, Split::Verify.grain()] {
            assert_eq!(
                verify_module_split(&module, Some(grain)),
                sequential,
                "runs of {grain}"
            );
        }
    }
}
