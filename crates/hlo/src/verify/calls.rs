//! Checks of the computations an instruction calls: each named one has
//! the parameters the call passes it, and returns what the call returns.
//!
//! Two kinds of call are checked differently. A computation *applied* to
//! elements (a reduction's, a sort's comparator) takes and returns scalars
//! of the operands' element types. A computation that *receives the
//! caller's values* (a call, fusion, loop or branch) takes parameters of
//! the operands' shapes; passes rely on that when they carry layouts
//! across the boundary.

use shape::{PrimitiveType, Shape};

use super::{Verifier, first_array_leaf};
use crate::{AttrValue, Callee, CompId, Computation, Instruction, KnownAttr, Opcode};

/// The instruction whose calls are checked, with its operands' shapes.
#[derive(Clone, Copy)]
pub(super) struct Caller<'a> {
    comp: &'a Computation,
    inst: &'a Instruction,
    operands: &'a [&'a Shape],
}

impl Caller<'_> {
    /// The computation a single-computation attribute names.
    fn callee(&self, key: KnownAttr) -> Option<CompId> {
        match self.inst.attrs.get(key) {
            Some(AttrValue::Computation(c)) => Some(*c),
            _ => None,
        }
    }

    /// The element type of operand `i`, when it is an array.
    fn element(&self, i: usize) -> Option<PrimitiveType> {
        self.operands
            .get(i)
            .and_then(|s| s.as_array())
            .map(|a| a.element_type)
    }

    /// The element types of a range of operands, when all are arrays.
    fn elements(&self, range: std::ops::Range<usize>) -> Option<Vec<PrimitiveType>> {
        range.map(|i| self.element(i)).collect()
    }
}

impl<'m> Verifier<'m> {
    /// Parameter counts and signatures of the computations `inst` calls,
    /// which all exist.
    pub(super) fn called_computations(
        &mut self,
        comp: &Computation,
        inst: &Instruction,
        operands: &[&Shape],
    ) {
        use Opcode::*;
        let at = Caller {
            comp,
            inst,
            operands,
        };
        match inst.opcode {
            Reduce | ReduceWindow | AllReduce | AllReduceStart | ReduceScatter | Scatter | Sort
            | Map | SelectAndScatter => self.applied_callees(at),
            Fusion => {
                let n = operands.len();
                if let Some(callee) = self.expect(at, "calls", at.callee(KnownAttr::Calls), n) {
                    self.params_take(at, "calls", callee, operands);
                }
            }
            Call => self.call(at),
            While => self.while_loop(at),
            Conditional => self.conditional(at),
            _ => {}
        }
    }

    /// The computation `id` names as the call's `what`, which must exist
    /// (a missing one is reported where the attribute is read) and take
    /// `params` parameters.
    fn expect(
        &mut self,
        at: Caller<'_>,
        what: &str,
        id: Option<CompId>,
        params: usize,
    ) -> Option<Callee<'m>> {
        let Some(id) = id else {
            self.error(
                at.comp,
                at.inst,
                format!("{} needs a '{what}' computation", at.inst.opcode_name()),
            );
            return None;
        };
        let callee = self.called(id)?;
        let got = callee.parameter_shapes().len();
        if got != params {
            self.error(
                at.comp,
                at.inst,
                format!(
                    "computation %{} ({what}) has {got} parameters, but {params} are expected",
                    callee.name()
                ),
            );
        }
        Some(callee)
    }

    /// A computation that receives the caller's values must declare
    /// parameters of their shapes.
    fn params_take(&mut self, at: Caller<'_>, what: &str, callee: Callee<'_>, given: &[&Shape]) {
        for (k, param) in callee.parameter_shapes().into_iter().enumerate() {
            let Some(&expected) = given.get(k) else {
                continue;
            };
            if !param.same_logical_shape(expected) {
                self.error(
                    at.comp,
                    at.inst,
                    format!(
                        "passes {} as parameter {k} of %{} ({what}), which takes {}",
                        expected.display_without_layout(),
                        callee.name(),
                        param.display_without_layout()
                    ),
                );
            }
        }
    }

    /// The call returns what `callee` (its `what`) returns.
    fn returns_own_shape(&mut self, at: Caller<'_>, what: &str, callee: Callee<'_>) {
        if let Some(r) = callee.root_shape()
            && !r.same_logical_shape(&at.inst.shape)
        {
            self.error(
                at.comp,
                at.inst,
                format!(
                    "has shape {} but {what}%{} returns {}",
                    at.inst.shape.display_without_layout(),
                    callee.name(),
                    r.display_without_layout()
                ),
            );
        }
    }

    /// Computations applied to elements: the accumulators, comparators
    /// and combiners of reductions, scatters, sorts and maps.
    fn applied_callees(&mut self, at: Caller<'_>) {
        use Opcode::*;
        let n = at.operands.len();
        let to_apply = at.callee(KnownAttr::ToApply);
        match at.inst.opcode {
            Reduce | ReduceWindow => {
                let callee = self.expect(at, "to_apply", to_apply, n);
                // Accumulators take the init values' types, then the inputs'.
                let half = n / 2;
                if let (Some(callee), Some(inputs), Some(inits)) =
                    (callee, at.elements(0..half), at.elements(half..n))
                {
                    let params: Vec<_> = inits.iter().chain(&inputs).copied().collect();
                    self.applied(at.comp, at.inst, "to_apply", callee, &params, &inits);
                }
            }
            AllReduce | AllReduceStart | ReduceScatter => {
                let callee = self.expect(at, "to_apply", to_apply, 2);
                // Each leaf is reduced with the same scalar computation.
                let leaf = at
                    .operands
                    .first()
                    .and_then(|s| first_array_leaf(s))
                    .map(|a| a.element_type);
                if let (Some(callee), Some(t)) = (callee, leaf) {
                    self.applied(at.comp, at.inst, "to_apply", callee, &[t, t], &[t]);
                }
            }
            Scatter => {
                let callee = self.expect(at, "to_apply", to_apply, n - 1);
                // Current values, then updates: one of each per input.
                let inputs = (n.saturating_sub(1)) / 2;
                if let (Some(callee), Some(current), Some(updates)) =
                    (callee, at.elements(0..inputs), at.elements(inputs + 1..n))
                {
                    let params: Vec<_> = current.iter().chain(&updates).copied().collect();
                    self.applied(at.comp, at.inst, "to_apply", callee, &params, &current);
                }
            }
            Sort => {
                let callee = self.expect(at, "to_apply", to_apply, 2 * n);
                if let (Some(callee), Some(types)) = (callee, at.elements(0..n)) {
                    let params: Vec<_> = types.iter().flat_map(|&t| [t, t]).collect();
                    let pred = [PrimitiveType::Pred];
                    self.applied(at.comp, at.inst, "comparator", callee, &params, &pred);
                }
            }
            Map => {
                let callee = self.expect(at, "to_apply", to_apply, n);
                if let (Some(callee), Some(types), Some(out)) =
                    (callee, at.elements(0..n), at.inst.shape.as_array())
                {
                    let result = [out.element_type];
                    self.applied(at.comp, at.inst, "to_apply", callee, &types, &result);
                }
            }
            SelectAndScatter => {
                let select = self.expect(at, "select", at.callee(KnownAttr::Select), 2);
                let scatter = self.expect(at, "scatter", at.callee(KnownAttr::Scatter), 2);
                if let (Some(select), Some(t)) = (select, at.element(0)) {
                    let pred = [PrimitiveType::Pred];
                    self.applied(at.comp, at.inst, "select", select, &[t, t], &pred);
                }
                if let (Some(scatter), Some(t)) = (scatter, at.element(1)) {
                    self.applied(at.comp, at.inst, "scatter", scatter, &[t, t], &[t]);
                }
            }
            _ => {}
        }
    }

    /// Checks the signature of a computation `inst` applies to elements:
    /// scalar parameters of the types in `params`, and a scalar result of
    /// the type in `result` (a tuple of scalars, one per entry, when there
    /// are several). Parameter counts are checked by the caller.
    fn applied(
        &mut self,
        comp: &Computation,
        inst: &Instruction,
        what: &str,
        callee: Callee<'_>,
        params: &[PrimitiveType],
        result: &[PrimitiveType],
    ) {
        let scalar = |s: &Shape, t: PrimitiveType| {
            s.as_array()
                .is_some_and(|a| a.rank() == 0 && a.element_type == t)
        };
        let op = inst.opcode_name();
        for (k, param) in callee.parameter_shapes().into_iter().enumerate() {
            let Some(&t) = params.get(k) else {
                continue;
            };
            if !scalar(param, t) {
                self.error(
                    comp,
                    inst,
                    format!(
                        "computation %{} ({what}) takes {} as parameter {k}, but {op} applies it to {}[] elements",
                        callee.name(),
                        param.display_without_layout(),
                        t.name()
                    ),
                );
            }
        }
        let Some(root) = callee.root_shape() else {
            return;
        };
        let fits = match (result, root) {
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
                    callee.name(),
                    root.display_without_layout()
                ),
            );
        }
    }

    /// A `call` passes its operands and returns the callee's result.
    fn call(&mut self, at: Caller<'_>) {
        let n = at.operands.len();
        let callee = self.expect(at, "to_apply", at.callee(KnownAttr::ToApply), n);
        if let Some(callee) = callee {
            self.params_take(at, "to_apply", callee, at.operands);
            self.returns_own_shape(at, "computation ", callee);
        }
    }

    /// A loop's state is its own shape: the operand, the condition's and
    /// the body's parameter and the body's result all have it, and the
    /// condition returns `pred[]`.
    fn while_loop(&mut self, at: Caller<'_>) {
        let cond = self.expect(at, "condition", at.callee(KnownAttr::Condition), 1);
        let body = self.expect(at, "body", at.callee(KnownAttr::Body), 1);
        for (what, c) in [("condition", cond), ("body", body)] {
            if let Some(c) = c {
                self.params_take(at, what, c, &[&at.inst.shape]);
            }
        }
        if let Some(cond) = cond
            && let Some(r) = cond.root_shape()
            && !matches!(r.as_array(), Some(a) if a.rank() == 0 && a.element_type == PrimitiveType::Pred)
        {
            self.error(
                at.comp,
                at.inst,
                format!(
                    "condition %{} returns {}, not pred[]",
                    cond.name(),
                    r.display_without_layout()
                ),
            );
        }
        if let Some(body) = body {
            self.returns_own_shape(at, "body ", body);
        }
        if let Some(op) = at.operands.first()
            && !op.same_logical_shape(&at.inst.shape)
        {
            self.error(
                at.comp,
                at.inst,
                format!(
                    "has shape {} but its operand is {}",
                    at.inst.shape.display_without_layout(),
                    op.display_without_layout()
                ),
            );
        }
    }

    /// A conditional passes operand `k + 1` to branch `k`, and every
    /// branch returns the conditional's shape.
    fn conditional(&mut self, at: Caller<'_>) {
        let n = at.operands.len();
        let branches: Vec<CompId> = match at.inst.attrs.get(KnownAttr::BranchComputations) {
            Some(AttrValue::Computations(cs)) => cs.clone(),
            _ => [
                at.callee(KnownAttr::TrueComputation),
                at.callee(KnownAttr::FalseComputation),
            ]
            .into_iter()
            .flatten()
            .collect(),
        };
        if branches.len() + 1 != n {
            self.error(
                at.comp,
                at.inst,
                format!(
                    "has {} branch computations but {} branch operands",
                    branches.len(),
                    n.saturating_sub(1)
                ),
            );
        }
        for (k, b) in branches.into_iter().enumerate() {
            let callee = self.expect(at, "branch", Some(b), 1);
            if let (Some(callee), Some(&operand)) = (callee, at.operands.get(k + 1)) {
                self.params_take(at, "branch", callee, &[operand]);
            }
            if let Some(callee) = callee {
                self.returns_own_shape(at, "branch ", callee);
            }
        }
    }
}
