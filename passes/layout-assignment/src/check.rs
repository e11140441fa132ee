//! The layout-sensitive verifier: checks that a module's layouts are
//! consistent and honour every constraint. The pipeline runs it after every
//! pass; `tessera verify --layouts` runs it on any module.
//!
//! It checks, for every computation:
//! - every array value has a layout, and every layout is valid for its shape;
//! - ops that keep their layout read same-rank operands in their own layout,
//!   and broadcasts read operands in their result's order;
//! - custom-call `operand_layout_constraints`, `outfeed_shape` and a target's operand needs
//!   hold (with a target);
//! - the entry computation's parameters and root match the entry layout;
//! - calls, fusions, loops and conditionals agree with their computations;
//! - every `bitcast` moves no byte, by the exact algebra.
//!
//! Layouts are compared by what they do to bytes: two layouts that differ
//! only in where size-1 dimensions go are the same.

use std::fmt;

use hlo::{AttrValue, Callee, CompId, Computation, InstId, KnownAttr, Module, ModuleView, Opcode};
use shape::{ArrayShape, Layout, Shape};
use target::TargetSpec;

use crate::algebra;
use crate::policy::{self, Need};

/// A layout problem: where (computation, instruction) and what, in the
/// structural verifier's form, so that both are reported alike.
pub type LayoutProblem = hlo::VerifyError;

/// Checks every layout of `module`; with a target, its rules too.
pub fn check_layouts(module: &Module, target: Option<&TargetSpec>) -> Vec<LayoutProblem> {
    let mut problems = Vec::new();
    for id in module.computation_ids() {
        Checker {
            module,
            comp: module.computation(id),
            target,
            problems: &mut problems,
        }
        .run(id);
    }
    problems
}

/// The layout checks of one computation `comp` (id `id`) of the module
/// `view` shows, which gives it the signatures of the computations it
/// calls: what [`check_layouts`] reports for it.
pub fn check_computation_layouts(
    view: &dyn ModuleView,
    id: CompId,
    comp: &Computation,
    target: Option<&TargetSpec>,
) -> Vec<LayoutProblem> {
    let mut problems = Vec::new();
    Checker {
        module: view,
        comp,
        target,
        problems: &mut problems,
    }
    .run(id);
    problems
}

struct Checker<'a> {
    module: &'a dyn ModuleView,
    comp: &'a Computation,
    target: Option<&'a TargetSpec>,
    problems: &'a mut Vec<LayoutProblem>,
}

/// True when two shapes of the same logical array hold their bytes alike.
fn same_layout(a: &ArrayShape, b: &ArrayShape) -> bool {
    if a.rank() == 0 && b.rank() == 0 {
        return true;
    }
    a.layout.is_some() && b.layout.is_some() && algebra::layout_change_keeps_bytes(a, b)
}

fn with(a: &ArrayShape, layout: &Layout) -> ArrayShape {
    a.in_layout(layout.clone())
}

/// Compares two shapes leaf by leaf; returns the first differing pair.
fn first_difference<'s>(a: &'s Shape, b: &'s Shape) -> Option<(&'s ArrayShape, &'s ArrayShape)> {
    a.array_leaves()
        .into_iter()
        .zip(b.array_leaves())
        .find(|(x, y)| !same_layout(x, y))
}

impl<'a> Checker<'a> {
    fn report(&mut self, id: Option<InstId>, message: String) {
        self.problems.push(LayoutProblem {
            computation: self.comp.name.clone(),
            instruction: id.map(|i| self.comp.inst(i).name.clone()),
            message,
        });
    }

    fn run(&mut self, id: CompId) {
        let comp = self.comp;
        for (inst_id, inst) in comp.instructions() {
            // A scalar has one layout, which XLA never prints.
            let mut missing = false;
            inst.shape
                .for_each_array(&mut |_, a| missing |= a.layout.is_none() && a.rank() > 0);
            if missing {
                self.report(Some(inst_id), "an array value has no layout".into());
                continue;
            }
            if let Err(e) = inst.shape.validate() {
                self.report(Some(inst_id), format!("invalid layout: {e}"));
                continue;
            }
            self.instruction(inst_id);
        }
        if id == self.module.entry() {
            self.entry();
        }
    }

    fn operand_array(&self, id: InstId, i: usize) -> Option<&ArrayShape> {
        self.comp
            .operands(id)
            .get(i)
            .and_then(|&o| self.comp.inst(o).shape.as_array())
    }

    fn instruction(&mut self, id: InstId) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let op = inst.opcode;
        match op {
            Opcode::Bitcast => {
                if let (Some(from), Some(to)) = (self.operand_array(id, 0), inst.shape.as_array())
                    && let Err(message) = shape::prove_bitcast(from, to)
                {
                    self.report(Some(id), message);
                }
                return;
            }
            Opcode::Broadcast => self.check_broadcast(id),
            Opcode::While => self.check_while(id),
            Opcode::Call | Opcode::Fusion => self.check_call(id),
            Opcode::Conditional => self.check_conditional(id),
            _ => {}
        }
        let keeps = match self.target {
            Some(t) => t.keeps_layout(op),
            None => !op.can_change_layout(),
        };
        if keeps && !matches!(op, Opcode::While | Opcode::Tuple) {
            self.check_kept_layout(id);
        }
        self.check_tuple_operands(id);
        self.check_aliasing(id);
        // Custom-call constraints and target needs.
        if let Some(target) = self.target {
            if !policy::forwards_operands(op) {
                let needs = policy::inst_needs(target, comp, id);
                for (i, need, _) in needs.operand_needs() {
                    let Some(a) = self.operand_array(id, i) else {
                        continue;
                    };
                    let ok = match need {
                        Need::Exact(l) => same_layout(a, &with(a, l)),
                        Need::Matrix(_) | Need::Minor(_) => {
                            a.layout.as_ref().is_some_and(|l| need.accepts_order(l))
                        }
                    };
                    if !ok {
                        self.report(
                            Some(id),
                            format!(
                                "operand {i} is {a} but target {} needs {}",
                                target.name,
                                need.preferred()
                            ),
                        );
                    }
                }
            }
        } else if let Some(AttrValue::Shapes(shapes)) =
            inst.attrs.get(KnownAttr::OperandLayoutConstraints)
        {
            for (i, s) in shapes.iter().enumerate() {
                let (Some(want), Some(a)) = (s.as_array(), self.operand_array(id, i)) else {
                    continue;
                };
                if want.layout.is_some() && !same_layout(a, want) {
                    self.report(
                        Some(id),
                        format!("operand {i} is {a} but the custom call requires {want}"),
                    );
                }
            }
        }
    }

    /// A broadcast's operand must be in the order of its result (the
    /// order matters here; tiles follow the target's policy for the
    /// operand's own shape).
    fn check_broadcast(&mut self, id: InstId) {
        let inst = self.comp.inst(id);
        let (Some(operand), Some(out)) = (
            self.operand_array(id, 0).filter(|a| a.rank() > 0),
            inst.shape.as_array(),
        ) else {
            return;
        };
        let Some(out_layout) = &out.layout else {
            return;
        };
        let dims: Vec<usize> = inst
            .attrs
            .ints(KnownAttr::Dimensions)
            .unwrap_or(&[])
            .iter()
            .filter_map(|&d| usize::try_from(d).ok())
            .collect();
        let m2m: shape::DimVec = out_layout
            .minor_to_major
            .iter()
            .filter_map(|d| dims.iter().position(|x| x == d))
            .collect();
        if !same_order(operand, operand.layout.as_deref(), &Layout::new(&m2m)) {
            self.report(
                Some(id),
                format!("broadcast operand {operand} is not in the order of its result {out}"),
            );
        }
    }

    /// An op that keeps its layout: each same-rank operand is laid out as
    /// its result (per leaf for collectives on tuples).
    fn check_kept_layout(&mut self, id: InstId) {
        let inst = self.comp.inst(id);
        let op = inst.opcode;
        let out_leaves = inst.shape.array_leaves();
        let per_leaf = out_leaves.len() == inst.operands().len() && out_leaves.len() > 1;
        for (i, _) in inst.operands().iter().enumerate() {
            let (Some(a), Some(out)) = (
                self.operand_array(id, i),
                if per_leaf {
                    out_leaves.get(i).copied()
                } else {
                    out_leaves.first().copied()
                },
            ) else {
                continue;
            };
            if a.rank() == out.rank() && a.rank() > 0 {
                let (Some(la), Some(lo)) = (&a.layout, &out.layout) else {
                    continue;
                };
                // Another element width keeps the order, with its own tiles.
                let want = match self.target {
                    Some(t) => crate::tiling::same_layout_for(t, lo, out, a),
                    None if !crate::tiling::tiled_alike(None, a, out) => {
                        let mut want = Layout::clone(lo);
                        want.tiles = la.tiles.clone();
                        want.element_size_in_bits = la.element_size_in_bits;
                        want
                    }
                    None => Layout::clone(lo),
                };
                // The operand's own tiling of the order, or exactly the
                // result's layout (which a given layout may be even
                // where the target would not choose it): with elements
                // stored in as many bits, the same layout puts every
                // element in the same place, whatever the two types
                // (`u8` and `pred` under `T(2,2)` on gpu, found by the
                // fuzzer, seed 2 case 319412).
                let exact = a.element_storage_bits() == out.element_storage_bits()
                    && same_layout(a, &with(a, lo));
                if !exact && (!same_order(a, Some(la), &want) || !same_layout(a, &with(a, &want))) {
                    self.report(
                        Some(id),
                        format!(
                            "{op} keeps its layout, but operand {i} is {a} and the result is {out}"
                        ),
                    );
                }
            }
        }
    }

    /// Needs on leaves of tuple operands: a constrained custom call's tuple
    /// operand, a tuple outfeed. Without a target the layouts are compared
    /// as written.
    fn check_tuple_operands(&mut self, id: InstId) {
        let comp = self.comp;
        let inst = comp.inst(id);
        if !matches!(inst.opcode, Opcode::CustomCall | Opcode::Outfeed) {
            return;
        }
        let needs = match self.target {
            Some(target) => policy::inst_needs(target, comp, id)
                .tuple_operand_leaves()
                .to_vec(),
            None => {
                let given: Vec<(usize, Shape)> = match (
                    inst.opcode,
                    inst.attrs.get(KnownAttr::OperandLayoutConstraints),
                ) {
                    (Opcode::Outfeed, _) => policy::outfeed_shape(inst)
                        .map(|s| vec![(0, s)])
                        .unwrap_or_default(),
                    (_, Some(AttrValue::Shapes(shapes))) => {
                        shapes.iter().cloned().enumerate().collect()
                    }
                    _ => Vec::new(),
                };
                let mut out = Vec::new();
                for (operand, s) in given.into_iter().filter(|(_, s)| s.is_tuple()) {
                    for (leaf, a) in s.array_leaves().into_iter().enumerate() {
                        if let Some(l) = &a.layout {
                            out.push((
                                operand,
                                leaf,
                                Layout::clone(l),
                                policy::NeedSource::CustomCall,
                            ));
                        }
                    }
                }
                out
            }
        };
        for (operand, leaf, want, _) in needs {
            let Some(&o) = inst.operands().get(operand) else {
                continue;
            };
            let Some(a) = comp.inst(o).shape.array_leaves().get(leaf).copied() else {
                continue;
            };
            if !same_layout(a, &with(a, &want)) {
                self.report(
                    Some(id),
                    format!("operand {operand} leaf {leaf} is {a} but {want} is required"),
                );
            }
        }
    }

    /// An output aliased to an operand must have the operand's layout.
    fn check_aliasing(&mut self, id: InstId) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let out_leaves = inst.shape.array_leaves();
        for resolved in comp.operand_aliases(id) {
            let (alias, o) = (resolved.alias, resolved.operand);
            let (out_range, in_range) = (resolved.output_leaves, resolved.operand_leaves);
            let in_leaves = comp.inst(o).shape.array_leaves();
            for (x, y) in out_range.zip(in_range) {
                let (Some(out), Some(a)) = (out_leaves.get(x), in_leaves.get(y)) else {
                    continue;
                };
                let Some(l) = a.layout.as_ref().filter(|_| a.rank() == out.rank()) else {
                    continue;
                };
                if !same_layout(out, &with(out, l)) {
                    self.report(
                        Some(id),
                        format!(
                            "output leaf {x} aliases operand {} but is {out} while the operand is {a}",
                            alias.operand
                        ),
                    );
                }
            }
        }
    }

    fn callee(&self, id: InstId, key: KnownAttr) -> Option<Callee<'a>> {
        match self.comp.inst(id).attrs.get(key)? {
            AttrValue::Computation(c) => self.module.callee(*c),
            _ => None,
        }
    }

    fn param_shape(callee: Callee<'a>, n: usize) -> Option<&'a Shape> {
        callee.parameter_shapes().get(n).copied()
    }

    fn root_shape(callee: Callee<'a>) -> Option<&'a Shape> {
        callee.root_shape()
    }

    /// Reports the first leaf where `a` and `b` are laid out differently;
    /// `what` names the pair (formatted only when they differ).
    fn agree(&mut self, id: InstId, what: fmt::Arguments<'_>, a: &Shape, b: &Shape) {
        if let Some((x, y)) = first_difference(a, b) {
            self.report(Some(id), format!("{what}: {x} differs from {y}"));
        }
    }

    // The shapes compared below borrow from the module, not from the
    // checker, so they need no copies while problems are reported.
    fn check_while(&mut self, id: InstId) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let Some(&init) = inst.operands().first() else {
            return;
        };
        let init = &comp.inst(init).shape;
        if let Some(body) = self.callee(id, KnownAttr::Body) {
            let (param, root) = (Self::param_shape(body, 0), Self::root_shape(body));
            if let Some(p) = param {
                self.agree(id, format_args!("loop init vs body parameter"), init, p);
            }
            if let Some(r) = root {
                self.agree(
                    id,
                    format_args!("body root vs body parameter"),
                    r,
                    param.unwrap_or(r),
                );
                self.agree(
                    id,
                    format_args!("while result vs body root"),
                    &inst.shape,
                    r,
                );
            }
        }
        if let Some(cond) = self.callee(id, KnownAttr::Condition)
            && let Some(p) = Self::param_shape(cond, 0)
        {
            self.agree(
                id,
                format_args!("loop init vs condition parameter"),
                init,
                p,
            );
        }
    }

    fn check_call(&mut self, id: InstId) {
        let comp = self.comp;
        let inst = comp.inst(id);
        let callee = self
            .callee(id, KnownAttr::ToApply)
            .or_else(|| self.callee(id, KnownAttr::Calls));
        let Some(callee) = callee else { return };
        for (i, &o) in inst.operands().iter().enumerate() {
            if let Some(p) = Self::param_shape(callee, i) {
                self.agree(
                    id,
                    format_args!("operand {i} vs {} parameter {i}", callee.name()),
                    &comp.inst(o).shape,
                    p,
                );
            }
        }
        if let Some(r) = Self::root_shape(callee) {
            self.agree(
                id,
                format_args!("result vs {} root", callee.name()),
                &inst.shape,
                r,
            );
        }
    }

    fn check_conditional(&mut self, id: InstId) {
        let (comp, module) = (self.comp, self.module);
        let inst = comp.inst(id);
        for (j, b) in inst.attrs.called_computations().enumerate() {
            let Some(branch) = module.callee(b) else {
                continue;
            };
            if let (Some(&arg), Some(p)) =
                (inst.operands().get(j + 1), Self::param_shape(branch, 0))
            {
                self.agree(
                    id,
                    format_args!("operand {} vs branch {} parameter", j + 1, branch.name()),
                    &comp.inst(arg).shape,
                    p,
                );
            }
            if let Some(r) = Self::root_shape(branch) {
                self.agree(
                    id,
                    format_args!("result vs branch {} root", branch.name()),
                    &inst.shape,
                    r,
                );
            }
        }
    }

    fn entry(&mut self) {
        let layout = self.module.entry_computation_layout();
        let comp = self.comp;
        for (n, p) in comp.parameters().into_iter().enumerate() {
            let Some(want) = layout.parameters.get(n) else {
                continue;
            };
            let have = &comp.inst(p).shape;
            for (x, y) in have.array_leaves().into_iter().zip(want.array_leaves()) {
                if y.layout.is_some() && !same_layout(x, y) {
                    self.report(
                        Some(p),
                        format!(
                            "entry parameter {n} is {x} but the entry computation layout says {y}"
                        ),
                    );
                }
            }
        }
        if let Some(root) = comp.root() {
            let have = &comp.inst(root).shape;
            for (x, y) in have
                .array_leaves()
                .into_iter()
                .zip(layout.result.array_leaves())
            {
                if y.layout.is_some() && !same_layout(x, y) {
                    self.report(
                        Some(root),
                        format!("the root is {x} but the entry computation layout says {y}"),
                    );
                }
            }
        }
    }
}

/// True when `a`'s layout orders dimensions like `want` (ignoring size-1
/// dimensions, which never move a byte).
fn same_order(a: &ArrayShape, have: Option<&Layout>, want: &Layout) -> bool {
    let Some(have) = have else { return false };
    let big = |l: &Layout| -> Vec<usize> {
        l.minor_to_major
            .iter()
            .copied()
            .filter(|&d| a.dims.get(d).is_some_and(|&n| n != 1))
            .collect()
    };
    big(have) == big(want)
}
