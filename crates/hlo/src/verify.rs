//! The structural verifier: operand counts and kinds, result shapes of the
//! common opcodes, called computations, cycles, roots, names, parameter
//! numbers and layout validity. It collects every problem it finds.
//!
//! Architecture invariant: nothing here depends on which layout a value
//! has, only on whether a layout is well formed for its shape; the
//! layout-sensitive checks belong to the passes.

use std::fmt;

use petgraph::algo::toposort;
use rustc_hash::{FxHashMap, FxHashSet};

use shape::{ArrayShape, PrimitiveType, Shape};

use crate::view::ModuleView;
use crate::{AttrValue, CompId, Computation, InstId, Instruction, KnownAttr, Module, Opcode};

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
    verify_module_from(module, PARALLEL_VERIFY_INSTRUCTIONS, VERIFY_GRAIN)
}

/// [`verify_module`], in parallel from `parallel_from` instructions on, a
/// large computation in runs of `grain` instructions.
fn verify_module_from(module: &Module, parallel_from: usize, grain: usize) -> Vec<VerifyError> {
    let grain = grain.max(1);
    let total = module.instruction_count();
    if total < parallel_from {
        let mut errors = verify_module_checks(module);
        let mut v = Verifier {
            view: module,
            errors: Vec::new(),
            total,
            parallel_from,
            grain,
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
                        total,
                        parallel_from,
                        grain,
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
        total: comp.len(),
        parallel_from: PARALLEL_VERIFY_INSTRUCTIONS,
        grain: VERIFY_GRAIN,
    };
    v.computation(id, comp);
    v.errors
}

/// The checks of a module as a whole: unique computation and instruction
/// names, and the entry computation layout against the entry computation.
pub fn verify_module_checks(module: &Module) -> Vec<VerifyError> {
    let names = module.computations.iter().map(|c| {
        (
            c.name.as_str(),
            c.instructions().map(|(_, i)| i.name.as_str()),
        )
    });
    let mut errors = verify_names(names, module.instruction_count());
    match module.computations.get(module.entry.index()) {
        Some(entry) => errors.extend(verify_entry_layout(entry, &module.entry_computation_layout)),
        None => errors.push(VerifyError {
            computation: String::new(),
            instruction: None,
            message: format!(
                "the entry computation id {} is out of range ({} computations)",
                module.entry.0,
                module.computations.len()
            ),
        }),
    }
    errors
}

/// Unique names: every computation's, and every instruction's across the
/// module. `computations` gives each computation's name and its
/// instructions' names in order; `instructions` is a size hint.
pub fn verify_names<'a, I: Iterator<Item = &'a str>>(
    computations: impl Iterator<Item = (&'a str, I)> + Clone,
    instructions: usize,
) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    let mut comp_names = FxHashSet::default();
    for (c, _) in computations.clone() {
        if !comp_names.insert(c) {
            errors.push(VerifyError {
                computation: String::new(),
                instruction: None,
                message: format!("computation name %{c} is used twice"),
            });
        }
    }
    let mut inst_names: FxHashMap<&str, &str> = FxHashMap::default();
    inst_names.reserve(instructions);
    for (c, insts) in computations {
        for inst in insts {
            if let Some(first) = inst_names.insert(inst, c) {
                errors.push(VerifyError {
                    computation: c.to_string(),
                    instruction: Some(inst.to_string()),
                    message: format!(
                        "instruction name %{inst} is already used in computation %{first}"
                    ),
                });
            }
        }
    }
    errors
}

/// The entry computation layout against the entry computation: valid
/// layouts, and the parameters' and root's logical shapes.
pub fn verify_entry_layout(
    entry: &Computation,
    layout: &crate::ComputationLayout,
) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    let mut module_error = |message: String| {
        errors.push(VerifyError {
            computation: String::new(),
            instruction: None,
            message,
        })
    };
    let params = entry.parameters();
    // A leaf equal to the instruction's shape is checked with the
    // instruction; report only the layouts the header adds.
    for (i, s) in layout.parameters.iter().enumerate() {
        let same = params.get(i).is_some_and(|&p| &entry.inst(p).shape == s);
        if let (false, Err(e)) = (same, s.validate()) {
            module_error(format!(
                "entry_computation_layout parameter {i} {}: {e}",
                show(s)
            ));
        }
    }
    let root_same = entry
        .root()
        .and_then(|r| entry.get(r))
        .is_some_and(|r| r.shape == layout.result);
    if let (false, Err(e)) = (root_same, layout.result.validate()) {
        module_error(format!(
            "entry_computation_layout result {}: {e}",
            show(&layout.result)
        ));
    }
    if params.len() != layout.parameters.len() {
        module_error(format!(
            "entry_computation_layout has {} parameters but the entry computation %{} has {}",
            layout.parameters.len(),
            entry.name,
            params.len()
        ));
    } else {
        for (i, (&p, s)) in params.iter().zip(&layout.parameters).enumerate() {
            let actual = &entry.inst(p).shape;
            if !actual.same_logical_shape(s) {
                module_error(format!(
                    "entry_computation_layout parameter {i} is {} but parameter %{} is {}",
                    s.display_without_layout(),
                    entry.inst(p).name,
                    actual.display_without_layout()
                ));
            }
        }
    }
    if let Some(root) = entry.root().and_then(|r| entry.get(r))
        && !root.shape.same_logical_shape(&layout.result)
    {
        module_error(format!(
            "entry_computation_layout result is {} but the entry root %{} is {}",
            layout.result.display_without_layout(),
            root.name,
            root.shape.display_without_layout()
        ));
    }
    errors
}

/// Modules with at least this many instructions are checked in parallel.
const PARALLEL_VERIFY_INSTRUCTIONS: usize = 4096;

/// Instructions per run when a large computation's instructions are
/// checked in parallel.
const VERIFY_GRAIN: usize = 512;

/// Every use of an instruction that comes before its definition in the
/// schedule, as `(computation, user, operand)` names. XLA's parser accepts
/// such text in unscheduled modules, so `verify_module` allows it there;
/// passes must not introduce any, and tests check that with this.
pub fn uses_before_definition(module: &Module) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for comp in &module.computations {
        let position: FxHashMap<InstId, usize> = comp
            .schedule()
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect();
        for (i, (_, inst)) in comp.instructions().enumerate() {
            for &op in inst.operands().iter().chain(inst.control_predecessors()) {
                if position.get(&op).is_some_and(|&j| j > i) {
                    found.push((
                        comp.name.clone(),
                        inst.name.clone(),
                        comp.inst(op).name.clone(),
                    ));
                }
            }
        }
    }
    found
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
    /// Instructions in what is checked: large enough, in parallel.
    total: usize,
    errors: Vec<VerifyError>,
    /// From how many instructions in the module checks run in parallel.
    parallel_from: usize,
    /// Instructions per parallel run.
    grain: usize,
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

fn array(s: &Shape) -> Option<&ArrayShape> {
    s.as_array()
}

fn is_scalar(s: &Shape) -> bool {
    s.as_array().is_some_and(|a| a.rank() == 0)
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
            let position: FxHashMap<InstId, usize> = comp
                .schedule()
                .iter()
                .enumerate()
                .map(|(i, &id)| (id, i))
                .collect();
            for (i, (_, inst)) in comp.instructions().enumerate() {
                for &op in inst.operands().iter().chain(inst.control_predecessors()) {
                    if position.get(&op).is_some_and(|&j| j > i) {
                        let message = format!(
                            "uses %{} before it is computed, in a scheduled module",
                            comp.inst(op).name
                        );
                        self.error(comp, inst, message);
                    }
                }
            }
        }
        let _ = id;
        let schedule = comp.schedule();
        if schedule.len() < 2 * self.grain || self.total < self.parallel_from {
            self.instructions(comp, schedule);
            return;
        }
        use rayon::prelude::*;
        let (view, total, parallel_from, grain) =
            (self.view, self.total, self.parallel_from, self.grain);
        let parts: Vec<Vec<VerifyError>> = schedule
            .par_chunks(grain)
            .map(|run| {
                let mut part = Verifier {
                    view,
                    errors: Vec::new(),
                    total,
                    parallel_from,
                    grain,
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

    fn called(&self, id: CompId) -> Option<&'m Computation> {
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

    /// Checks the operand count; false when it is wrong, so that the shape
    /// rules (which index operands) are skipped.
    fn arity(&mut self, comp: &Computation, inst: &Instruction, n: usize) -> bool {
        use Opcode::*;
        let op = inst.opcode;
        let (ok, expected): (bool, &str) = match op {
            Parameter | Constant | Iota | PartitionId | ReplicaId | RngGetAndUpdateState => {
                (n == 0, "no operands")
            }
            _ if op.is_elementwise_unary() => (n == 1, "1 operand"),
            Bitcast
            | Broadcast
            | Transpose
            | Reshape
            | Reverse
            | Slice
            | GetTupleElement
            | Cholesky
            | Fft
            | GetDimensionSize
            | OptimizationBarrier
            | Domain
            | CopyStart
            | CopyDone
            | AllReduceDone
            | AllGatherDone
            | CollectivePermuteDone
            | SendDone
            | RecvDone
            | Infeed
            | RngBitGenerator
            | While
            | Recv => (n == 1, "1 operand"),
            _ if op.is_elementwise_binary() => (n == 2, "2 operands"),
            Dot | Convolution | Pad | Gather | TriangularSolve | SetDimensionSize
            | AddDependency | Rng | Send | Outfeed => (n == 2, "2 operands"),
            Select | Clamp | SelectAndScatter => (n == 3, "3 operands"),
            Reduce | ReduceWindow => (
                n >= 2 && n.is_multiple_of(2),
                "an even number of operands, at least 2",
            ),
            Scatter => (
                n >= 3 && n % 2 == 1,
                "an odd number of operands, at least 3",
            ),
            DynamicSlice | Conditional => (n >= 2, "at least 2 operands"),
            DynamicUpdateSlice => (n >= 2, "at least 2 operands"),
            Concatenate
            | Sort
            | Map
            | AllReduce
            | AllReduceStart
            | AllGather
            | AllGatherStart
            | AllToAll
            | ReduceScatter
            | CollectivePermute
            | CollectivePermuteStart
            | CollectiveBroadcast => (n >= 1, "at least 1 operand"),
            _ => (true, ""),
        };
        if !ok {
            self.error(
                comp,
                inst,
                format!("{} takes {expected}, but has {n}", inst.opcode_name()),
            );
        }
        ok
    }

    /// Parameter counts (and a few result shapes) of called computations.
    /// Checks the signature of a computation `inst` applies to elements:
    /// scalar parameters of the types in `params`, and a scalar result of
    /// the type in `result` (a tuple of scalars, one per entry, when there
    /// are several). Parameter counts are checked by the caller.
    fn applied(
        &mut self,
        comp: &Computation,
        inst: &Instruction,
        what: &str,
        callee: &Computation,
        params: &[PrimitiveType],
        result: &[PrimitiveType],
    ) {
        let scalar = |s: &Shape, t: PrimitiveType| {
            s.as_array()
                .is_some_and(|a| a.rank() == 0 && a.element_type == t)
        };
        let op = inst.opcode_name();
        for (k, p) in callee.parameters().into_iter().enumerate() {
            let (Some(param), Some(&t)) = (callee.get(p), params.get(k)) else {
                continue;
            };
            if !scalar(&param.shape, t) {
                self.error(
                    comp,
                    inst,
                    format!(
                        "computation %{} ({what}) takes {} as parameter {k}, but {op} applies it to {}[] elements",
                        callee.name,
                        param.shape.display_without_layout(),
                        t.name()
                    ),
                );
            }
        }
        let Some(root) = callee.root().and_then(|r| callee.get(r)) else {
            return;
        };
        let fits = match (result, &root.shape) {
            ([t], s) => scalar(s, *t),
            (ts, Shape::Tuple(es)) => {
                es.len() == ts.len() && es.iter().zip(ts).all(|(e, &t)| scalar(e, t))
            }
            _ => false,
        };
        if !fits {
            let want: Vec<String> = result.iter().map(|t| format!("{}[]", t.name())).collect();
            let want = if want.len() == 1 {
                want.join("")
            } else {
                format!("({})", want.join(", "))
            };
            self.error(
                comp,
                inst,
                format!(
                    "computation %{} ({what}) returns {}, but {op} needs {want}",
                    callee.name,
                    root.shape.display_without_layout()
                ),
            );
        }
    }

    fn called_computations(&mut self, comp: &Computation, inst: &Instruction, operands: &[&Shape]) {
        use Opcode::*;
        let n = operands.len();
        let comp_attr = |k: KnownAttr| match inst.attrs.get(k) {
            Some(AttrValue::Computation(c)) => Some(*c),
            _ => None,
        };
        let expect = |this: &mut Self, what: &str, id: Option<CompId>, params: usize| {
            let Some(id) = id else {
                this.error(
                    comp,
                    inst,
                    format!("{} needs a '{what}' computation", inst.opcode_name()),
                );
                return None;
            };
            let callee = this.called(id)?;
            let got = callee.parameters().len();
            if got != params {
                this.error(
                    comp,
                    inst,
                    format!(
                        "computation %{} ({what}) has {got} parameters, but {params} are expected",
                        callee.name
                    ),
                );
            }
            Some(callee)
        };
        let root_shape = |c: &'m Computation| c.root().and_then(|r| c.get(r)).map(|i| &i.shape);
        // A computation that receives the caller's values (a call, fusion,
        // loop or branch) must declare parameters of their shapes; passes
        // rely on it when they carry layouts across the boundary.
        let params_take = |this: &mut Self, what: &str, callee: &Computation, given: &[&Shape]| {
            for (k, p) in callee.parameters().into_iter().enumerate() {
                let (Some(param), Some(&expected)) = (callee.get(p), given.get(k)) else {
                    continue;
                };
                if !param.shape.same_logical_shape(expected) {
                    this.error(
                        comp,
                        inst,
                        format!(
                            "passes {} as parameter {k} of %{} ({what}), which takes {}",
                            expected.display_without_layout(),
                            callee.name,
                            param.shape.display_without_layout()
                        ),
                    );
                }
            }
        };
        // The element types of the operands: a computation applied to
        // elements takes scalars of these types.
        let element = |i: usize| {
            operands
                .get(i)
                .and_then(|s| s.as_array())
                .map(|a| a.element_type)
        };
        let elements =
            |range: std::ops::Range<usize>| range.map(element).collect::<Option<Vec<_>>>();
        match inst.opcode {
            Reduce | ReduceWindow => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), n);
                // Accumulators take the init values' types, then the inputs'.
                let half = n / 2;
                if let (Some(callee), Some(inputs), Some(inits)) =
                    (callee, elements(0..half), elements(half..n))
                {
                    let params: Vec<_> = inits.iter().chain(&inputs).copied().collect();
                    self.applied(comp, inst, "to_apply", callee, &params, &inits);
                }
            }
            AllReduce | AllReduceStart | ReduceScatter => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), 2);
                // Each leaf is reduced with the same scalar computation.
                let leaf = operands
                    .first()
                    .and_then(|s| first_array_leaf(s))
                    .map(|a| a.element_type);
                if let (Some(callee), Some(t)) = (callee, leaf) {
                    self.applied(comp, inst, "to_apply", callee, &[t, t], &[t]);
                }
            }
            Scatter => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), n - 1);
                // Current values, then updates: one of each per input.
                let inputs = (n.saturating_sub(1)) / 2;
                if let (Some(callee), Some(current), Some(updates)) =
                    (callee, elements(0..inputs), elements(inputs + 1..n))
                {
                    let params: Vec<_> = current.iter().chain(&updates).copied().collect();
                    self.applied(comp, inst, "to_apply", callee, &params, &current);
                }
            }
            Sort => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), 2 * n);
                if let (Some(callee), Some(types)) = (callee, elements(0..n)) {
                    let params: Vec<_> = types.iter().flat_map(|&t| [t, t]).collect();
                    self.applied(
                        comp,
                        inst,
                        "comparator",
                        callee,
                        &params,
                        &[PrimitiveType::Pred],
                    );
                }
            }
            Map => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), n);
                if let (Some(callee), Some(types), Some(out)) =
                    (callee, elements(0..n), inst.shape.as_array())
                {
                    self.applied(comp, inst, "to_apply", callee, &types, &[out.element_type]);
                }
            }
            SelectAndScatter => {
                let select = expect(self, "select", comp_attr(KnownAttr::Select), 2);
                let scatter = expect(self, "scatter", comp_attr(KnownAttr::Scatter), 2);
                if let (Some(select), Some(t)) = (select, element(0)) {
                    self.applied(
                        comp,
                        inst,
                        "select",
                        select,
                        &[t, t],
                        &[PrimitiveType::Pred],
                    );
                }
                if let (Some(scatter), Some(t)) = (scatter, element(1)) {
                    self.applied(comp, inst, "scatter", scatter, &[t, t], &[t]);
                }
            }
            Fusion => {
                if let Some(callee) = expect(self, "calls", comp_attr(KnownAttr::Calls), n) {
                    params_take(self, "calls", callee, operands);
                }
            }
            Call => {
                let callee = expect(self, "to_apply", comp_attr(KnownAttr::ToApply), n);
                if let Some(callee) = callee {
                    params_take(self, "to_apply", callee, operands);
                }
                if let Some(callee) = callee
                    && let Some(r) = root_shape(callee)
                    && !r.same_logical_shape(&inst.shape)
                {
                    self.error(
                        comp,
                        inst,
                        format!(
                            "has shape {} but computation %{} returns {}",
                            inst.shape.display_without_layout(),
                            callee.name,
                            r.display_without_layout()
                        ),
                    );
                }
            }
            While => {
                let cond = expect(self, "condition", comp_attr(KnownAttr::Condition), 1);
                let body = expect(self, "body", comp_attr(KnownAttr::Body), 1);
                // The loop state: the while's own shape.
                for (what, c) in [("condition", cond), ("body", body)] {
                    if let Some(c) = c {
                        params_take(self, what, c, &[&inst.shape]);
                    }
                }
                if let Some(cond) = cond
                    && let Some(r) = root_shape(cond)
                    && !matches!(r.as_array(), Some(a) if a.rank() == 0 && a.element_type == PrimitiveType::Pred)
                {
                    self.error(
                        comp,
                        inst,
                        format!(
                            "condition %{} returns {}, not pred[]",
                            cond.name,
                            r.display_without_layout()
                        ),
                    );
                }
                if let Some(body) = body
                    && let Some(r) = root_shape(body)
                    && !r.same_logical_shape(&inst.shape)
                {
                    self.error(
                        comp,
                        inst,
                        format!(
                            "has shape {} but body %{} returns {}",
                            inst.shape.display_without_layout(),
                            body.name,
                            r.display_without_layout()
                        ),
                    );
                }
                if let Some(op) = operands.first()
                    && !op.same_logical_shape(&inst.shape)
                {
                    self.error(
                        comp,
                        inst,
                        format!(
                            "has shape {} but its operand is {}",
                            inst.shape.display_without_layout(),
                            op.display_without_layout()
                        ),
                    );
                }
            }
            Conditional => {
                let branches: Vec<CompId> = match inst.attrs.get(KnownAttr::BranchComputations) {
                    Some(AttrValue::Computations(cs)) => cs.clone(),
                    _ => [
                        comp_attr(KnownAttr::TrueComputation),
                        comp_attr(KnownAttr::FalseComputation),
                    ]
                    .into_iter()
                    .flatten()
                    .collect(),
                };
                if branches.len() + 1 != n {
                    self.error(
                        comp,
                        inst,
                        format!(
                            "has {} branch computations but {} branch operands",
                            branches.len(),
                            n.saturating_sub(1)
                        ),
                    );
                }
                for (k, b) in branches.into_iter().enumerate() {
                    let callee = expect(self, "branch", Some(b), 1);
                    if let (Some(callee), Some(&operand)) = (callee, operands.get(k + 1)) {
                        params_take(self, "branch", callee, &[operand]);
                    }
                    if let Some(callee) = callee
                        && let Some(r) = root_shape(callee)
                        && !r.same_logical_shape(&inst.shape)
                    {
                        self.error(
                            comp,
                            inst,
                            format!(
                                "has shape {} but branch %{} returns {}",
                                inst.shape.display_without_layout(),
                                callee.name,
                                r.display_without_layout()
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn shape_rules(&mut self, comp: &Computation, inst: &Instruction, ops: &[&Shape]) {
        use Opcode::*;
        let op = inst.opcode;
        let mut problems: Vec<String> = Vec::new();
        let result = &inst.shape;
        // Array operands where the opcode needs them.
        let needs_arrays = (op.is_elementwise() && op != Copy && op != Map)
            || matches!(
                op,
                Broadcast
                    | Transpose
                    | Reshape
                    | Reverse
                    | Slice
                    | Pad
                    | Dot
                    | Convolution
                    | Concatenate
                    | Reduce
                    | DynamicSlice
                    | DynamicUpdateSlice
                    | Gather
                    | Scatter
                    | Sort
                    | ReduceWindow
            );
        if needs_arrays {
            for (i, s) in ops.iter().enumerate() {
                if !s.is_array() {
                    problems.push(format!(
                        "operand {i} must be an array, but is {}",
                        s.display_without_layout()
                    ));
                }
            }
            if !problems.is_empty() {
                for m in problems {
                    self.error(comp, inst, m);
                }
                return;
            }
        }
        let res = array(result);
        let a0 = ops.first().and_then(|s| array(s));
        let ints = |k: KnownAttr| inst.attrs.ints(k).unwrap_or(&[]);
        let same_dims = |x: &ArrayShape, y: &ArrayShape| x.dims == y.dims && x.dynamic == y.dynamic;
        let not_array = res.is_none().then(|| {
            format!(
                "{} produces an array, not {}",
                inst.opcode_name(),
                result.display_without_layout()
            )
        });
        let need_array_result = |problems: &mut Vec<String>| problems.extend(not_array.clone());
        match op {
            // A bitcast reinterprets its operand's buffer: both sides must
            // be buffers of one size (padding and tiles included), or
            // bytes would be read that do not exist.
            Bitcast => {
                if let (Some(o), Some(r)) = (a0, res)
                    && let (Ok(from), Ok(to)) = (shape::storage_size(o), shape::storage_size(r))
                    && from.bytes != to.bytes
                {
                    problems.push(format!(
                        "bitcast from {o} ({} bytes) to {r} ({} bytes) changes the buffer size; a bitcast keeps every byte",
                        from.bytes, to.bytes
                    ));
                }
            }
            Copy => {
                if let Some(o) = ops.first()
                    && !o.same_logical_shape(result)
                {
                    problems.push(format!(
                        "copy changes the shape from {} to {}",
                        o.display_without_layout(),
                        result.display_without_layout()
                    ));
                }
            }
            _ if op.is_elementwise_unary() => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    if !same_dims(o, r) && op != BitcastConvert {
                        problems.push(format!(
                            "the operand is {} but the result is {}: the dimensions differ",
                            ops[0].display_without_layout(),
                            result.display_without_layout()
                        ));
                    }
                    let type_changes =
                        matches!(op, Convert | BitcastConvert | IsFinite | ReducePrecision)
                            || (matches!(op, Abs | Real | Imag) && o.element_type.is_complex());
                    if op == IsFinite && r.element_type != PrimitiveType::Pred {
                        problems.push(format!("is-finite produces pred, not {}", r.element_type));
                    }
                    if !type_changes && o.element_type != r.element_type {
                        problems.push(format!(
                            "the element type changes from {} to {}",
                            o.element_type, r.element_type
                        ));
                    }
                    if op == BitcastConvert {
                        let (ob, rb) = (o.element_type.bit_width(), r.element_type.bit_width());
                        if ob == rb && !same_dims(o, r) {
                            problems.push("bitcast-convert between types of one width must keep the dimensions".into());
                        }
                    }
                }
            }
            _ if op.is_elementwise_binary() => {
                need_array_result(&mut problems);
                if let (Some(x), Some(y), Some(r)) = (a0, ops.get(1).and_then(|s| array(s)), res) {
                    if !same_dims(x, y) {
                        problems.push(format!(
                            "operands {} and {} have different dimensions",
                            ops[0].display_without_layout(),
                            ops[1].display_without_layout()
                        ));
                    } else if !same_dims(x, r) {
                        problems.push(format!(
                            "the result {} has other dimensions than the operands {}",
                            result.display_without_layout(),
                            ops[0].display_without_layout()
                        ));
                    }
                    if op != StochasticConvert && x.element_type != y.element_type {
                        problems.push(format!(
                            "operand element types {} and {} differ",
                            x.element_type, y.element_type
                        ));
                    }
                    match op {
                        Compare => {
                            if r.element_type != PrimitiveType::Pred {
                                problems
                                    .push(format!("compare produces pred, not {}", r.element_type));
                            }
                        }
                        Complex | StochasticConvert => {}
                        _ => {
                            if r.element_type != x.element_type {
                                problems.push(format!(
                                    "the result type {} differs from the operand type {}",
                                    r.element_type, x.element_type
                                ));
                            }
                        }
                    }
                }
            }
            Select => {
                need_array_result(&mut problems);
                if let (Some(pred), Some(r)) = (a0, res) {
                    if pred.element_type != PrimitiveType::Pred {
                        problems.push(format!(
                            "the selector must be pred, not {}",
                            pred.element_type
                        ));
                    }
                    if pred.rank() != 0 && !same_dims(pred, r) {
                        problems.push("the selector's dimensions differ from the result's".into());
                    }
                    for (i, s) in ops.iter().enumerate().skip(1) {
                        if !s.same_logical_shape(result) {
                            problems.push(format!(
                                "operand {i} is {} but the result is {}",
                                s.display_without_layout(),
                                result.display_without_layout()
                            ));
                        }
                    }
                }
            }
            Clamp => {
                need_array_result(&mut problems);
                if let (Some(x), Some(r)) = (ops.get(1).and_then(|s| array(s)), res) {
                    if !same_dims(x, r) || x.element_type != r.element_type {
                        problems.push(format!(
                            "the result {} differs from the operand {}",
                            result.display_without_layout(),
                            ops[1].display_without_layout()
                        ));
                    }
                    for i in [0, 2] {
                        if let Some(b) = ops.get(i).and_then(|s| array(s))
                            && b.rank() != 0
                            && !same_dims(b, x)
                        {
                            problems.push(format!(
                                "bound {i} must be a scalar or have the operand's dimensions"
                            ));
                        }
                    }
                }
            }
            Broadcast => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    let dims = ints(KnownAttr::Dimensions);
                    if dims.len() != o.rank() {
                        problems.push(format!(
                            "dimensions has {} entries but the operand has rank {}",
                            dims.len(),
                            o.rank()
                        ));
                    } else {
                        for (i, &d) in dims.iter().enumerate() {
                            match usize::try_from(d).ok().and_then(|d| r.dims.get(d)) {
                                None => problems.push(format!("dimensions entry {d} is out of range for the result rank {}", r.rank())),
                                Some(&rd) if rd != o.dims[i] => problems.push(format!(
                                    "operand dimension {i} (size {}) maps to result dimension {d} of size {rd}",
                                    o.dims[i]
                                )),
                                Some(_) => {}
                            }
                        }
                    }
                    if o.element_type != r.element_type {
                        problems.push(format!(
                            "the element type changes from {} to {}",
                            o.element_type, r.element_type
                        ));
                    }
                }
            }
            Transpose => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    let dims = ints(KnownAttr::Dimensions);
                    if !is_permutation(dims, o.rank()) {
                        problems.push(format!(
                            "dimensions {dims:?} is not a permutation of 0..{}",
                            o.rank()
                        ));
                    } else if r.rank() != o.rank()
                        || dims
                            .iter()
                            .enumerate()
                            .any(|(i, &d)| r.dims[i] != o.dims[d as usize])
                    {
                        problems.push(format!(
                            "transposing {} by {dims:?} does not give {}",
                            ops[0].display_without_layout(),
                            result.display_without_layout()
                        ));
                    }
                    if o.element_type != r.element_type {
                        problems.push(format!(
                            "the element type changes from {} to {}",
                            o.element_type, r.element_type
                        ));
                    }
                }
            }
            Reshape => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    if o.dynamic == 0 && r.dynamic == 0 && o.element_count() != r.element_count() {
                        problems.push(format!(
                            "reshape from {} to {} changes the element count",
                            ops[0].display_without_layout(),
                            result.display_without_layout()
                        ));
                    }
                    if o.element_type != r.element_type {
                        problems.push(format!(
                            "the element type changes from {} to {}",
                            o.element_type, r.element_type
                        ));
                    }
                }
            }
            Reverse => {
                if let (Some(o), Some(r)) = (a0, res) {
                    for &d in ints(KnownAttr::Dimensions) {
                        if d < 0 || d as usize >= o.rank() {
                            problems.push(format!(
                                "dimensions entry {d} is out of range for rank {}",
                                o.rank()
                            ));
                        }
                    }
                    if !o.same_logical_shape(r) {
                        problems.push("reverse must keep the shape".into());
                    }
                }
            }
            Slice => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    match inst.attrs.get(KnownAttr::Slice) {
                        Some(AttrValue::Slice(sl)) if sl.len() == o.rank() => {
                            let mut expected = Vec::with_capacity(sl.len());
                            for (i, s) in sl.iter().enumerate() {
                                if s.stride <= 0
                                    || s.start < 0
                                    || s.start > s.limit
                                    || s.limit > o.dims[i]
                                {
                                    problems.push(format!(
                                        "slice dimension {i} [{}:{}:{}] does not fit size {}",
                                        s.start, s.limit, s.stride, o.dims[i]
                                    ));
                                    expected.clear();
                                    break;
                                }
                                expected.push(
                                    (s.limit - s.start).saturating_add(s.stride - 1) / s.stride,
                                );
                            }
                            if !expected.is_empty() && expected.as_slice() != r.dims.as_slice() {
                                problems.push(format!(
                                    "the slice gives dimensions {expected:?}, but the result is {}",
                                    result.display_without_layout()
                                ));
                            }
                        }
                        Some(AttrValue::Slice(sl)) => {
                            problems.push(format!(
                                "slice has {} dimensions but the operand has rank {}",
                                sl.len(),
                                o.rank()
                            ));
                        }
                        _ => problems.push("slice needs a 'slice' attribute".into()),
                    }
                }
            }
            Pad => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    if !ops.get(1).is_some_and(|s| is_scalar(s)) {
                        problems.push("the padding value must be a scalar".into());
                    }
                    match inst.attrs.get(KnownAttr::Padding) {
                        Some(AttrValue::Padding(pd)) if pd.len() == o.rank() => {
                            let expected: Vec<i64> = pd
                                .iter()
                                .zip(&o.dims)
                                .map(|(d, &n)| {
                                    d.low
                                        .saturating_add(d.high)
                                        .saturating_add(n)
                                        .saturating_add((n - 1).max(0).saturating_mul(d.interior))
                                })
                                .collect();
                            if pd.iter().any(|d| d.interior < 0) {
                                problems.push("interior padding must not be negative".into());
                            }
                            if expected.as_slice() != r.dims.as_slice() {
                                problems.push(format!("the padding gives dimensions {expected:?}, but the result is {}", result.display_without_layout()));
                            }
                        }
                        Some(AttrValue::Padding(pd)) => {
                            problems.push(format!(
                                "padding has {} dimensions but the operand has rank {}",
                                pd.len(),
                                o.rank()
                            ));
                        }
                        _ => problems.push("pad needs a 'padding' attribute".into()),
                    }
                }
            }
            Concatenate => {
                need_array_result(&mut problems);
                let dims = ints(KnownAttr::Dimensions);
                if let (Some(first), Some(r)) = (a0, res) {
                    match dims {
                        [d] if *d >= 0 && (*d as usize) < first.rank() => {
                            let d = *d as usize;
                            let mut total = 0i64;
                            for (i, s) in ops.iter().enumerate() {
                                let Some(a) = array(s) else { continue };
                                let compatible = a.rank() == first.rank()
                                    && (0..a.rank()).all(|k| k == d || a.dims[k] == first.dims[k]);
                                if !compatible {
                                    problems.push(format!("operand {i} {} does not fit the others along dimension {d}", s.display_without_layout()));
                                }
                                total = total.saturating_add(a.dims.get(d).copied().unwrap_or(0));
                            }
                            if r.dims.get(d) != Some(&total) || r.rank() != first.rank() {
                                problems.push(format!("the concatenation has size {total} along dimension {d}, but the result is {}", result.display_without_layout()));
                            }
                        }
                        _ => problems.push(format!(
                            "dimensions must name one dimension below rank {}, not {dims:?}",
                            first.rank()
                        )),
                    }
                }
            }
            GetTupleElement => match (ops.first(), inst.attrs.int(KnownAttr::Index)) {
                (Some(Shape::Tuple(elements)), Some(i)) => {
                    match usize::try_from(i).ok().and_then(|i| elements.get(i)) {
                        Some(e) if !e.same_logical_shape(result) => problems.push(format!(
                            "element {i} of the operand is {} but the result is {}",
                            e.display_without_layout(),
                            result.display_without_layout()
                        )),
                        Some(_) => {}
                        None => problems.push(format!(
                            "index {i} is out of range for a tuple of {} elements",
                            elements.len()
                        )),
                    }
                }
                (Some(Shape::Tuple(_)), None) => {
                    problems.push("get-tuple-element needs an 'index' attribute".into())
                }
                (Some(s), _) => problems.push(format!(
                    "the operand must be a tuple, not {}",
                    s.display_without_layout()
                )),
                (None, _) => {}
            },
            Tuple => {
                let ok = match result {
                    Shape::Tuple(elements) => {
                        elements.len() == ops.len()
                            && elements
                                .iter()
                                .zip(ops)
                                .all(|(e, o)| e.same_logical_shape(o))
                    }
                    _ => false,
                };
                if !ok {
                    problems.push(format!(
                        "the result {} is not the tuple of the operand shapes",
                        result.display_without_layout()
                    ));
                }
            }
            Iota => {
                need_array_result(&mut problems);
                if let Some(r) = res {
                    match inst.attrs.int(KnownAttr::IotaDimension) {
                        Some(d) if d >= 0 && (d as usize) < r.rank() => {}
                        Some(d) => problems.push(format!(
                            "iota_dimension {d} is out of range for rank {}",
                            r.rank()
                        )),
                        None => problems.push("iota needs an 'iota_dimension' attribute".into()),
                    }
                }
            }
            Reduce => {
                let n = ops.len() / 2;
                let dims = ints(KnownAttr::Dimensions);
                if let Some(first) = a0 {
                    let mut seen = 0u128;
                    let mut dims_ok = true;
                    for &d in dims {
                        if d < 0
                            || d as usize >= first.rank()
                            || seen & (1u128 << (d as u32 % 128)) != 0
                        {
                            problems.push(format!(
                                "dimensions {dims:?} must be distinct dimensions below rank {}",
                                first.rank()
                            ));
                            dims_ok = false;
                            break;
                        }
                        seen |= 1u128 << d as u32;
                    }
                    for (i, s) in ops.iter().enumerate().take(n).skip(1) {
                        if array(s).is_some_and(|a| !same_dims(a, first)) {
                            problems.push(format!("input {i} has other dimensions than input 0"));
                        }
                    }
                    for (i, s) in ops.iter().enumerate().skip(n) {
                        if !is_scalar(s) {
                            problems.push(format!(
                                "init value {} (operand {i}) must be a scalar",
                                i - n
                            ));
                        }
                    }
                    if dims_ok {
                        let kept: Vec<i64> = first
                            .dims
                            .iter()
                            .enumerate()
                            .filter(|(i, _)| !dims.contains(&(*i as i64)))
                            .map(|(_, &d)| d)
                            .collect();
                        let results: Vec<&Shape> = match result {
                            Shape::Tuple(e) if n > 1 => e.iter().collect(),
                            s => vec![s],
                        };
                        if results.len() != n {
                            problems.push(format!("reduce of {n} inputs must produce {n} results"));
                        }
                        for r in results {
                            if array(r).is_none_or(|a| a.dims.as_slice() != kept.as_slice()) {
                                problems.push(format!("reducing dimensions {dims:?} gives dimensions {kept:?}, but the result is {}", r.display_without_layout()));
                                break;
                            }
                        }
                    }
                }
            }
            Dot => {
                need_array_result(&mut problems);
                if let (Some(l), Some(r), Some(out)) = (a0, ops.get(1).and_then(|s| array(s)), res)
                {
                    let (lb, lc) = (
                        ints(KnownAttr::LhsBatchDims),
                        ints(KnownAttr::LhsContractingDims),
                    );
                    let (rb, rc) = (
                        ints(KnownAttr::RhsBatchDims),
                        ints(KnownAttr::RhsContractingDims),
                    );
                    let in_range = |v: &[i64], a: &ArrayShape| {
                        v.iter().all(|&d| d >= 0 && (d as usize) < a.rank())
                    };
                    if lb.len() != rb.len() || lc.len() != rc.len() {
                        problems.push(
                            "lhs and rhs need as many batch and as many contracting dimensions"
                                .into(),
                        );
                    } else if !in_range(lb, l)
                        || !in_range(lc, l)
                        || !in_range(rb, r)
                        || !in_range(rc, r)
                    {
                        problems.push("a batch or contracting dimension is out of range".into());
                    } else {
                        for (x, y) in lb.iter().zip(rb).chain(lc.iter().zip(rc)) {
                            if l.dims[*x as usize] != r.dims[*y as usize] {
                                problems.push(format!(
                                    "lhs dimension {x} (size {}) and rhs dimension {y} (size {}) must match",
                                    l.dims[*x as usize], r.dims[*y as usize]
                                ));
                            }
                        }
                        let mut expected: Vec<i64> =
                            lb.iter().map(|&d| l.dims[d as usize]).collect();
                        expected.extend(
                            (0..l.rank() as i64)
                                .filter(|d| !lb.contains(d) && !lc.contains(d))
                                .map(|d| l.dims[d as usize]),
                        );
                        expected.extend(
                            (0..r.rank() as i64)
                                .filter(|d| !rb.contains(d) && !rc.contains(d))
                                .map(|d| r.dims[d as usize]),
                        );
                        if expected.as_slice() != out.dims.as_slice() {
                            problems.push(format!(
                                "the dot gives dimensions {expected:?}, but the result is {}",
                                result.display_without_layout()
                            ));
                        }
                    }
                }
            }
            DynamicSlice => {
                need_array_result(&mut problems);
                if let (Some(o), Some(r)) = (a0, res) {
                    let sizes = ints(KnownAttr::DynamicSliceSizes);
                    if ops.len() != 1 + o.rank()
                        && !(ops.len() == 2 && array(ops[1]).is_some_and(|a| a.rank() == 1))
                    {
                        problems.push(format!("dynamic-slice of a rank-{} operand takes {} scalar start indices, but has {}", o.rank(), o.rank(), ops.len() - 1));
                    }
                    if sizes.len() != o.rank() {
                        problems.push(format!(
                            "dynamic_slice_sizes has {} entries but the operand has rank {}",
                            sizes.len(),
                            o.rank()
                        ));
                    } else {
                        if sizes.iter().zip(&o.dims).any(|(&s, &d)| s < 0 || s > d) {
                            problems.push(format!(
                                "dynamic_slice_sizes {sizes:?} does not fit the operand {}",
                                ops[0].display_without_layout()
                            ));
                        }
                        if sizes != r.dims.as_slice() {
                            problems.push(format!(
                                "dynamic_slice_sizes {sizes:?} differs from the result {}",
                                result.display_without_layout()
                            ));
                        }
                    }
                }
            }
            DynamicUpdateSlice => {
                if let (Some(o), Some(u)) = (a0, ops.get(1).and_then(|s| array(s))) {
                    if u.rank() != o.rank() || u.dims.iter().zip(&o.dims).any(|(a, b)| a > b) {
                        problems.push(format!(
                            "the update {} does not fit in the operand {}",
                            ops[1].display_without_layout(),
                            ops[0].display_without_layout()
                        ));
                    }
                    if ops.len() != 2 + o.rank()
                        && !(ops.len() == 3 && array(ops[2]).is_some_and(|a| a.rank() == 1))
                    {
                        problems.push(format!("dynamic-update-slice of a rank-{} operand takes {} scalar start indices, but has {}", o.rank(), o.rank(), ops.len() - 2));
                    }
                    if !ops[0].same_logical_shape(result) {
                        problems.push("dynamic-update-slice must keep the operand's shape".into());
                    }
                }
            }
            Sort => {
                let dims = ints(KnownAttr::Dimensions);
                if let Some(first) = a0 {
                    if dims.len() != 1 || dims[0] < 0 || dims[0] as usize >= first.rank().max(1) {
                        problems.push(format!(
                            "sort needs one dimension below rank {}, not {dims:?}",
                            first.rank()
                        ));
                    }
                    for (i, s) in ops.iter().enumerate().skip(1) {
                        if array(s).is_some_and(|a| !same_dims(a, first)) {
                            problems
                                .push(format!("operand {i} has other dimensions than operand 0"));
                        }
                    }
                    let ok = match result {
                        Shape::Tuple(e) => {
                            ops.len() > 1
                                && e.len() == ops.len()
                                && e.iter().zip(ops).all(|(x, y)| x.same_logical_shape(y))
                        }
                        s => ops.len() == 1 && s.same_logical_shape(ops[0]),
                    };
                    if !ok {
                        problems.push(format!(
                            "the result {} does not match the operands",
                            result.display_without_layout()
                        ));
                    }
                }
            }
            Gather => {
                if let (Some(o), Some(_)) = (a0, res) {
                    let sizes = ints(KnownAttr::SliceSizes);
                    if sizes.len() != o.rank() {
                        problems.push(format!(
                            "slice_sizes has {} entries but the operand has rank {}",
                            sizes.len(),
                            o.rank()
                        ));
                    }
                }
            }
            CustomCall => {
                if let Some(AttrValue::Shapes(shapes)) =
                    inst.attrs.get(KnownAttr::OperandLayoutConstraints)
                {
                    if shapes.len() != ops.len() {
                        problems.push(format!(
                            "operand_layout_constraints has {} shapes for {} operands",
                            shapes.len(),
                            ops.len()
                        ));
                    } else {
                        for (i, (s, o)) in shapes.iter().zip(ops).enumerate() {
                            if !s.same_logical_shape(o) {
                                problems.push(format!("operand layout constraint {i} {} does not match the operand {}", s.display_without_layout(), o.display_without_layout()));
                            }
                        }
                    }
                }
            }
            GetDimensionSize => {
                if let Some(r) = res
                    && (r.rank() != 0 || r.element_type != PrimitiveType::S32)
                {
                    problems.push("get-dimension-size produces s32[]".into());
                }
            }
            AfterAll => {
                if !matches!(result, Shape::Token) {
                    problems.push("after-all produces token[]".into());
                }
                for (i, s) in ops.iter().enumerate() {
                    if !matches!(s, Shape::Token) {
                        problems.push(format!(
                            "operand {i} must be a token, not {}",
                            s.display_without_layout()
                        ));
                    }
                }
            }
            _ => {}
        }
        for m in problems {
            self.error(comp, inst, m);
        }
    }
}

fn is_permutation(dims: &[i64], rank: usize) -> bool {
    if dims.len() != rank {
        return false;
    }
    let mut seen = vec![false; rank];
    dims.iter().all(|&d| {
        usize::try_from(d)
            .ok()
            .and_then(|d| seen.get_mut(d))
            .is_some_and(|s| !std::mem::replace(s, true))
    })
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
                let sequential = verify_module_from(m, usize::MAX, VERIFY_GRAIN);
                for grain in [1, 3, VERIFY_GRAIN] {
                    let parallel = verify_module_from(m, 0, grain);
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
        let sequential = verify_module_from(&module, usize::MAX, VERIFY_GRAIN);
        let messages: Vec<&str> = sequential.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(
            messages[0].contains("already used")
                && messages[2].contains("entry_computation_layout")
        );
        for grain in [1, 2, VERIFY_GRAIN] {
            assert_eq!(
                verify_module_from(&module, 0, grain),
                sequential,
                "runs of {grain}"
            );
        }
    }
}
