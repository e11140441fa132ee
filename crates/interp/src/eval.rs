//! The interpreter: computations, instruction dispatch, control flow, and
//! the physical semantics of values crossing computation boundaries.

use std::collections::HashMap;
use std::rc::Rc;

use hlo::{CompId, InstId, Instruction, KnownAttr, Module, Opcode, Payload};
use shape::{ArrayShape, PrimitiveType, Shape};

use crate::element;
use crate::error::EvalError;
use crate::scalar::{self, ScalarProgram};
use crate::value::{self, Buffer, Value};

/// Safety limits of one evaluation. Exceeding one is an error, never a
/// hang or an out-of-memory abort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The most slots (elements plus padding) one buffer may have.
    pub max_buffer_slots: u64,
    /// The most work units in one evaluation: one per element produced,
    /// per multiply-add of `dot`/`convolution`, per element visited by a
    /// reduction or window, per step of a called scalar computation.
    pub max_work: u64,
    /// The most iterations of any one `while` loop.
    pub max_while_iterations: u64,
    /// The deepest nesting of computation calls (frames on the
    /// evaluator's own stack, not the native one).
    pub max_call_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_buffer_slots: 1 << 26,
            max_work: 1 << 32,
            max_while_iterations: 1 << 20,
            max_call_depth: 1 << 18,
        }
    }
}

/// How values cross computation boundaries (entry parameters and result,
/// parameters of called computations, results of calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Boundary {
    /// Layouts are real: a buffer passed where a different layout is
    /// declared is read under the declared layout without moving data,
    /// like a bitcast; arguments arrive laid out per the entry computation
    /// layout and the result is read per it.
    Physical,
    /// Layouts are placeholders (the input of layout assignment): a value
    /// passed where a different layout is declared is relaid out.
    Logical,
}

/// A computation applied per element: compiled when it is a pure scalar
/// computation, else run by the general evaluator.
pub(crate) enum Callee {
    Program(Rc<ScalarProgram>),
    General(CompId, Vec<PrimitiveType>),
}

pub(crate) struct Interp<'m> {
    pub(crate) module: &'m Module,
    limits: &'m Limits,
    mode: Boundary,
    pub(crate) work: u64,
    depth: usize,
    /// How many evaluations of a computation are under way, one inside
    /// another (see [`MAX_APPLY_NESTING`]).
    applying: usize,
    /// Where a physical boundary read a buffer under a layout it was not
    /// written in (at most [`MAX_NOTES`]), to explain mismatches.
    pub(crate) notes: Vec<String>,
    /// The custom-call targets evaluated as opaque functions.
    pub(crate) opaque_targets: std::collections::BTreeSet<String>,
    /// When tracing, the kinds of instruction evaluated (see
    /// [`instruction_kind`]).
    pub(crate) kinds: Option<std::collections::BTreeSet<String>>,
    /// When finding the first difference, the first value of every named
    /// instruction.
    pub(crate) recorded: Option<Recorded>,
    orders: HashMap<CompId, Rc<Vec<InstId>>>,
    programs: HashMap<CompId, Option<Rc<ScalarProgram>>>,
    regs: Vec<u64>,
}

/// The first value of each named instruction, in evaluation order, with its
/// opcode and shape text.
#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) order: Vec<(String, Value)>,
    pub(crate) values: HashMap<String, Value>,
    pub(crate) info: HashMap<String, (String, String)>,
    elements: u64,
}

/// The most elements [`Recorded`] keeps alive (buffers are shared, so this
/// bounds the memory recording adds).
pub(crate) const MAX_RECORDED: u64 = 1 << 26;

impl Recorded {
    fn record(&mut self, inst: &Instruction, v: &Value) {
        if self.elements > MAX_RECORDED || self.info.contains_key(&inst.name) {
            return;
        }
        self.elements += v.element_count();
        self.info.insert(
            inst.name.clone(),
            (inst.opcode_name().to_string(), inst.shape.to_string()),
        );
        self.values.insert(inst.name.clone(), v.clone());
        self.order.push((inst.name.clone(), v.clone()));
    }
}

/// One computation being evaluated: where it is in its instruction order,
/// its arguments, the values still needed, and what its current
/// instruction does with the result of the computation it runs.
struct Frame {
    comp: CompId,
    order: Rc<Vec<InstId>>,
    pos: usize,
    args: Vec<Value>,
    values: Vec<Option<Value>>,
    remaining: Vec<u32>,
    root: InstId,
    then: Then,
}

/// What a frame's current instruction does with its callee's result.
enum Then {
    /// No callee runs.
    Nothing,
    /// It is the instruction's value (call, fusion, conditional).
    Result,
    /// It is a loop's condition on `state`, after `trips` trips.
    Condition { state: Value, trips: u64 },
    /// It is a loop's next state, after `trips` trips.
    Body { trips: u64 },
}

/// What a frame does next.
enum Step {
    /// Its next instruction.
    Next,
    /// Run a computation on arguments, then hand the result over as said.
    Enter(CompId, Vec<Value>, Then),
}

/// The deepest nesting of per-element computations that are not scalar
/// programs (each level is an operation such as a `reduce` whose reducer
/// itself runs one). Every other nesting lives on the frame stack.
const MAX_APPLY_NESTING: usize = 64;

/// The most boundary reinterpretations remembered.
const MAX_NOTES: usize = 8;

/// Checks that a value's logical structure matches a shape.
fn same_logical(a: &ArrayShape, b: &ArrayShape) -> bool {
    a.element_type == b.element_type && a.dims == b.dims
}

/// Applies `f` to every array leaf of `v` with the matching leaf of `shape`.
pub(crate) fn zip_leaves(
    v: &Value,
    shape: &Shape,
    f: &mut dyn FnMut(&Buffer, &ArrayShape) -> Result<Buffer, EvalError>,
) -> Result<Value, EvalError> {
    match (v, shape) {
        (Value::Array(b), Shape::Array(s)) => Ok(Value::Array(f(b, s)?)),
        (Value::Tuple(vs), Shape::Tuple(ss)) if vs.len() == ss.len() => {
            let mut out = Vec::with_capacity(vs.len());
            for (v, s) in vs.iter().zip(ss) {
                out.push(zip_leaves(v, s, f)?);
            }
            Ok(Value::Tuple(out))
        }
        (Value::Token, Shape::Token) => Ok(Value::Token),
        (Value::Token, Shape::Tuple(ss)) if ss.is_empty() => Ok(Value::Token),
        _ => Err(EvalError::msg(format!(
            "a value of structure {} does not fit the declared shape {shape}",
            describe(v)
        ))),
    }
}

/// Lays an argument out per the entry computation layout, taking the
/// declared parameter layout for AUTO leaves.
fn place_argument(v: &Value, entry: &Shape, declared: &Shape) -> Result<Value, EvalError> {
    match (v, entry, declared) {
        (Value::Array(b), Shape::Array(e), Shape::Array(d)) => {
            let layout = e
                .layout
                .as_deref()
                .cloned()
                .unwrap_or_else(|| d.layout_or_default());
            Ok(Value::Array(b.relayout(Some(layout))?))
        }
        (Value::Tuple(vs), Shape::Tuple(es), Shape::Tuple(ds))
            if vs.len() == es.len() && vs.len() == ds.len() =>
        {
            let mut out = Vec::with_capacity(vs.len());
            for ((v, e), d) in vs.iter().zip(es).zip(ds) {
                out.push(place_argument(v, e, d)?);
            }
            Ok(Value::Tuple(out))
        }
        (Value::Token, _, _) => Ok(Value::Token),
        _ => Err(EvalError::msg(format!(
            "a value of structure {} does not fit the entry layout {entry}",
            describe(v)
        ))),
    }
}

/// A short description of a value's structure, for messages.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Array(b) => b.shape().to_string(),
        Value::Tuple(e) => format!(
            "({})",
            e.iter().map(describe).collect::<Vec<_>>().join(", ")
        ),
        Value::Token => "token[]".into(),
    }
}

impl<'m> Interp<'m> {
    pub(crate) fn new(module: &'m Module, limits: &'m Limits, mode: Boundary) -> Interp<'m> {
        Interp {
            module,
            limits,
            mode,
            work: 0,
            depth: 0,
            applying: 0,
            notes: Vec::new(),
            opaque_targets: Default::default(),
            kinds: None,
            recorded: None,
            orders: HashMap::new(),
            programs: HashMap::new(),
            regs: Vec::new(),
        }
    }

    /// Counts work and fails when the budget is exhausted.
    pub(crate) fn charge(&mut self, units: u64) -> Result<(), EvalError> {
        self.work = self.work.saturating_add(units);
        if self.work > self.limits.max_work {
            return Err(EvalError::limit(format!(
                "the evaluation needs more than max_work = {} work units",
                self.limits.max_work
            )));
        }
        Ok(())
    }

    /// Checks that a buffer of this shape may be created, charges one unit
    /// per element, and returns the element count.
    pub(crate) fn reserve(&mut self, shape: &ArrayShape) -> Result<usize, EvalError> {
        let n = value::element_count(&shape.dims)?;
        let slots = value::storage_slots(shape)?;
        if slots.max(n) > self.limits.max_buffer_slots {
            return Err(EvalError::limit(format!(
                "{shape} needs {} slots, more than max_buffer_slots = {}",
                slots.max(n),
                self.limits.max_buffer_slots
            )));
        }
        self.charge(n)?;
        usize::try_from(n).map_err(|_| EvalError::limit("element count does not fit usize"))
    }

    /// The instruction's array shape after [`Interp::reserve`].
    pub(crate) fn out_array<'i>(
        &mut self,
        inst: &'i Instruction,
    ) -> Result<(&'i ArrayShape, usize), EvalError> {
        let shape = inst.shape.as_array().ok_or_else(|| {
            EvalError::msg(format!("{} must produce an array", inst.opcode_name()))
        })?;
        element::class(shape.element_type).map_err(EvalError::unsupported)?;
        let n = self.reserve(shape)?;
        Ok((shape, n))
    }

    /// The operands of an instruction that takes exactly `N` arrays and
    /// produces one array, with the result shape and its element count.
    pub(crate) fn array_operands<'v, 'i, const N: usize>(
        &mut self,
        inst: &'i Instruction,
        ops: &[&'v Value],
    ) -> Result<([&'v Buffer; N], &'i ArrayShape, usize), EvalError> {
        arity(ops, N)?;
        let arrays = (0..N)
            .map(|i| array(ops, i))
            .collect::<Result<Vec<_>, _>>()?;
        let arrays = <[&Buffer; N]>::try_from(arrays)
            .map_err(|_| EvalError::msg("internal: the operand count changed"))?;
        let (shape, n) = self.out_array(inst)?;
        Ok((arrays, shape, n))
    }

    /// Wraps logical row-major bits into a buffer laid out per `shape`.
    pub(crate) fn finish(&self, shape: &ArrayShape, data: Vec<u64>) -> Result<Value, EvalError> {
        Ok(Value::Array(Buffer::from_logical_bits(
            shape.clone(),
            data,
        )?))
    }

    /// [`Self::finish`] for a data movement, which carries poison elements
    /// (a physical view's padding) along.
    pub(crate) fn finish_poison(
        &self,
        shape: &ArrayShape,
        data: Vec<u64>,
        poison: Option<Vec<bool>>,
    ) -> Result<Value, EvalError> {
        Ok(Value::Array(Buffer::from_logical_bits_poison(
            shape.clone(),
            data,
            poison,
        )?))
    }

    /// The topological order (operands first) of the instructions the
    /// root depends on.
    fn order(&mut self, comp_id: CompId) -> Result<Rc<Vec<InstId>>, EvalError> {
        if let Some(o) = self.orders.get(&comp_id) {
            return Ok(Rc::clone(o));
        }
        let comp = self
            .module
            .computations
            .get(comp_id.index())
            .ok_or_else(|| EvalError::msg(format!("no computation with id {}", comp_id.0)))?;
        let root = comp
            .root()
            .ok_or_else(|| EvalError::msg(format!("computation %{} has no root", comp.name)))?;
        let bound = comp.node_bound();
        let mut state = vec![0u8; bound];
        let mut order = Vec::with_capacity(comp.len());
        let mut stack: Vec<(InstId, usize)> = vec![(root, 0)];
        state[root.index()] = 1;
        while let Some(&mut (id, ref mut next)) = stack.last_mut() {
            let ops = comp.operands(id);
            if *next < ops.len() {
                let op = ops[*next];
                *next += 1;
                match state[op.index()] {
                    0 => {
                        state[op.index()] = 1;
                        stack.push((op, 0));
                    }
                    1 => {
                        return Err(EvalError::msg(format!(
                            "computation %{} has a cycle through %{}",
                            comp.name,
                            comp.inst(op).name
                        )));
                    }
                    _ => {}
                }
            } else {
                state[id.index()] = 2;
                order.push(id);
                stack.pop();
            }
        }
        let order = Rc::new(order);
        self.orders.insert(comp_id, Rc::clone(&order));
        Ok(order)
    }

    /// Evaluates a computation on argument values.
    ///
    /// Calls, fusions, conditionals and loops do not recurse: each nested
    /// computation is a [`Frame`] on an explicit stack, so a chain of
    /// 100,000 calls needs heap, not native stack. Only a computation
    /// applied per element that is not a pure scalar program (see
    /// [`Interp::apply`]) starts a nested stack, from inside the operation
    /// applying it; that nesting is bounded by [`MAX_APPLY_NESTING`].
    pub(crate) fn call(&mut self, comp_id: CompId, args: Vec<Value>) -> Result<Value, EvalError> {
        if self.applying >= MAX_APPLY_NESTING {
            return Err(EvalError::limit(format!(
                "computations applied per element nest deeper than {MAX_APPLY_NESTING} levels"
            )));
        }
        self.applying += 1;
        let base = self.depth;
        let mut stack = Vec::new();
        let r = self.run_frames(&mut stack, comp_id, args);
        // An error leaves frames behind; they are this call's.
        self.depth = base;
        self.applying -= 1;
        r
    }

    /// Pushes a frame for `comp_id` (what a recursive call's prologue did).
    fn enter(
        &mut self,
        stack: &mut Vec<Frame>,
        comp_id: CompId,
        args: Vec<Value>,
    ) -> Result<(), EvalError> {
        if self.depth >= self.limits.max_call_depth {
            return Err(EvalError::limit(format!(
                "calls nest deeper than max_call_depth = {} (a recursive computation?)",
                self.limits.max_call_depth
            )));
        }
        let order = self.order(comp_id)?;
        let comp = &self.module.computations[comp_id.index()];
        let nparams = comp.parameters().len();
        if args.len() != nparams {
            return Err(EvalError::msg(format!(
                "computation %{} takes {nparams} parameters but is called with {}",
                comp.name,
                args.len()
            )));
        }
        let root = comp
            .root()
            .ok_or_else(|| EvalError::msg("computation has no root"))?;
        let bound = comp.node_bound();
        let mut remaining = vec![0u32; bound];
        for &id in order.iter() {
            for op in comp.operands(id) {
                remaining[op.index()] += 1;
            }
        }
        self.depth += 1;
        stack.push(Frame {
            comp: comp_id,
            order,
            pos: 0,
            args,
            values: vec![None; bound],
            remaining,
            root,
            then: Then::Nothing,
        });
        Ok(())
    }

    /// Runs frames until the one pushed for `comp_id` returns.
    fn run_frames(
        &mut self,
        stack: &mut Vec<Frame>,
        comp_id: CompId,
        args: Vec<Value>,
    ) -> Result<Value, EvalError> {
        self.enter(stack, comp_id, args)?;
        // What the frame on top receives from the callee that just returned.
        let mut returned: Option<Result<Value, EvalError>> = None;
        loop {
            let Some(frame) = stack.last_mut() else {
                return Err(EvalError::msg("internal: the frame stack emptied"));
            };
            let step = match returned.take() {
                Some(r) => self.resume(frame, r),
                None if frame.pos == frame.order.len() => {
                    let root = frame.root;
                    let r = frame.values[root.index()]
                        .take()
                        .ok_or_else(|| EvalError::msg("internal: root not evaluated"));
                    stack.pop();
                    self.depth -= 1;
                    if stack.is_empty() {
                        return r;
                    }
                    returned = Some(r);
                    continue;
                }
                None => self.step(frame),
            };
            match step {
                Ok(Step::Next) => {}
                Ok(Step::Enter(callee, args, then)) => {
                    frame.then = then;
                    if let Err(e) = self.enter(stack, callee, args) {
                        // The callee failed before its first instruction:
                        // its caller sees the error as the call's result.
                        returned = Some(Err(e));
                    }
                }
                Err(e) => {
                    stack.pop();
                    self.depth -= 1;
                    if stack.is_empty() {
                        return Err(e);
                    }
                    returned = Some(Err(e));
                }
            }
        }
    }

    /// Evaluates the frame's next instruction, or starts the computation it
    /// calls.
    fn step(&mut self, frame: &mut Frame) -> Result<Step, EvalError> {
        let module = self.module;
        let comp = &module.computations[frame.comp.index()];
        let id = frame.order[frame.pos];
        let inst = comp.inst(id);
        let mut operands: Vec<&Value> = Vec::with_capacity(comp.operands(id).len());
        for o in comp.operands(id) {
            match frame.values[o.index()].as_ref() {
                Some(v) => operands.push(v),
                None => return Err(EvalError::msg("internal: operand evaluated out of order")),
            }
        }
        let result = match self.control(inst, &operands) {
            Ok(Some((callee, args, then))) => return Ok(Step::Enter(callee, args, then)),
            Ok(None) => self.instruction(inst, &operands, &frame.args),
            Err(e) => Err(e),
        };
        self.complete(frame, result)?;
        Ok(Step::Next)
    }

    /// Finishes the frame's current instruction with its result (what the
    /// loop of a recursive evaluator did after `instruction`).
    fn complete(
        &mut self,
        frame: &mut Frame,
        result: Result<Value, EvalError>,
    ) -> Result<(), EvalError> {
        let module = self.module;
        let comp = &module.computations[frame.comp.index()];
        let id = frame.order[frame.pos];
        let inst = comp.inst(id);
        let result = result
            .and_then(|v| self.adopt(&v, &inst.shape, false, &inst.name))
            .map_err(|e| e.within(&inst.name))?;
        if let Some(r) = self.recorded.as_mut() {
            r.record(inst, &result);
        }
        for o in comp.operands(id) {
            let r = &mut frame.remaining[o.index()];
            *r -= 1;
            if *r == 0 && *o != frame.root {
                frame.values[o.index()] = None;
            }
        }
        frame.values[id.index()] = Some(result);
        frame.pos += 1;
        Ok(())
    }

    /// For an instruction that runs another computation (call, fusion,
    /// conditional, while), the computation to enter first, its arguments,
    /// and what to do with its result.
    fn control(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
    ) -> Result<Option<(CompId, Vec<Value>, Then)>, EvalError> {
        use Opcode as O;
        match inst.opcode {
            O::Call | O::Fusion | O::While | O::Conditional => {}
            _ => return Ok(None),
        }
        if let Some(k) = self.kinds.as_mut() {
            k.insert(instruction_kind(inst));
        }
        match inst.opcode {
            O::Call | O::Fusion => {
                let key = if inst.opcode == O::Call {
                    KnownAttr::ToApply
                } else {
                    KnownAttr::Calls
                };
                let comp = comp_attr(inst, key)?;
                Ok(Some((
                    comp,
                    ops.iter().map(|v| (*v).clone()).collect(),
                    Then::Result,
                )))
            }
            O::While => {
                arity(ops, 1)?;
                let cond = comp_attr(inst, KnownAttr::Condition)?;
                comp_attr(inst, KnownAttr::Body)?;
                let state = ops[0].clone();
                Ok(Some((
                    cond,
                    vec![state.clone()],
                    Then::Condition { state, trips: 0 },
                )))
            }
            _ => {
                let (comp, arg) = self.branch(inst, ops)?;
                Ok(Some((comp, vec![arg], Then::Result)))
            }
        }
    }

    /// Hands the frame's current instruction the result of the computation
    /// it ran, and goes on with the loop it runs, if any.
    fn resume(
        &mut self,
        frame: &mut Frame,
        r: Result<Value, EvalError>,
    ) -> Result<Step, EvalError> {
        let module = self.module;
        let inst = module.computations[frame.comp.index()].inst(frame.order[frame.pos]);
        let result = match std::mem::replace(&mut frame.then, Then::Nothing) {
            Then::Nothing => Err(EvalError::msg("internal: a result nobody waits for")),
            Then::Result => r,
            Then::Condition { state, trips } => {
                let cond = comp_attr(inst, KnownAttr::Condition)?;
                match r
                    .map_err(|e| e.within(&self.comp_name(cond)))
                    .and_then(|c| scalar_pred(&c))
                {
                    Ok(false) => Ok(state),
                    Ok(true) => match self.next_trip(trips) {
                        Ok(()) => {
                            let body = comp_attr(inst, KnownAttr::Body)?;
                            return Ok(Step::Enter(
                                body,
                                vec![state],
                                Then::Body { trips: trips + 1 },
                            ));
                        }
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                }
            }
            Then::Body { trips } => {
                let body = comp_attr(inst, KnownAttr::Body)?;
                match r.map_err(|e| e.within(&self.comp_name(body))) {
                    Ok(state) => {
                        let cond = comp_attr(inst, KnownAttr::Condition)?;
                        return Ok(Step::Enter(
                            cond,
                            vec![state.clone()],
                            Then::Condition { state, trips },
                        ));
                    }
                    Err(e) => Err(e),
                }
            }
        };
        self.complete(frame, result)?;
        Ok(Step::Next)
    }

    /// The branch a conditional takes, and its operand.
    fn branch(&mut self, inst: &Instruction, ops: &[&Value]) -> Result<(CompId, Value), EvalError> {
        if ops.is_empty() {
            return Err(EvalError::msg("conditional without a predicate"));
        }
        let sel = array(ops, 0)?;
        if sel.shape().rank() != 0 {
            return Err(EvalError::msg("the conditional selector must be a scalar"));
        }
        let bits = sel.logical_bits()?[0];
        let branches: Vec<CompId> = match inst.attrs.get(KnownAttr::BranchComputations) {
            Some(hlo::AttrValue::Computations(c)) => c.clone(),
            _ => vec![
                comp_attr(inst, KnownAttr::TrueComputation)?,
                comp_attr(inst, KnownAttr::FalseComputation)?,
            ],
        };
        if branches.is_empty() || ops.len() != branches.len() + 1 {
            return Err(EvalError::msg(format!(
                "conditional has {} branches but {} branch operands",
                branches.len(),
                ops.len().saturating_sub(1)
            )));
        }
        let k = if sel.element_type() == PrimitiveType::Pred {
            if branches.len() != 2 {
                return Err(EvalError::msg("a pred conditional needs two branches"));
            }
            if bits & 1 != 0 { 0 } else { 1 }
        } else {
            let cls = value::class_of(sel.element_type())?;
            let i = scalar::index_value(cls, bits)?;
            // Out-of-range indices run the last branch.
            if i < 0 || i as u64 >= branches.len() as u64 {
                branches.len() - 1
            } else {
                i as usize
            }
        };
        Ok((branches[k], ops[k + 1].clone()))
    }

    /// Counts one more trip of a loop that has made `trips`.
    fn next_trip(&mut self, trips: u64) -> Result<(), EvalError> {
        if trips + 1 > self.limits.max_while_iterations {
            return Err(EvalError::limit(format!(
                "the loop runs more than max_while_iterations = {} times",
                self.limits.max_while_iterations
            )));
        }
        self.charge(1)
    }

    /// Makes a value fit a declared shape: the logical shapes must agree;
    /// where the layouts differ the buffer is reinterpreted (physical
    /// boundary) or relaid out (logical boundary). With `auto_keeps`, a
    /// declared leaf without a layout (AUTO) keeps the value's layout.
    pub(crate) fn adopt(
        &mut self,
        v: &Value,
        declared: &Shape,
        auto_keeps: bool,
        site: &str,
    ) -> Result<Value, EvalError> {
        let mode = self.mode;
        let notes = &mut self.notes;
        zip_leaves(v, declared, &mut |b, s| {
            if !same_logical(b.shape(), s) {
                return Err(EvalError::msg(format!(
                    "computed {} but the declared shape is {s}",
                    b.shape()
                )));
            }
            if s.layout.is_none() && auto_keeps {
                return Ok(b.clone());
            }
            let want = s.layout_or_default();
            if b.shape().layout_or_default() == want {
                return Ok(b.clone());
            }
            match mode {
                Boundary::Physical => {
                    if notes.len() < MAX_NOTES
                        && !notes.iter().any(|n| n.starts_with(&format!("%{site}:")))
                    {
                        notes.push(format!(
                            "%{site}: a buffer written as {} is read as {want}",
                            b.shape()
                        ));
                    }
                    b.reinterpret(ArrayShape {
                        layout: Some(want.into()),
                        ..s.clone()
                    })
                }
                Boundary::Logical => b.relayout(Some(want)),
            }
        })
    }

    /// Evaluates the entry computation.
    pub(crate) fn run_entry(&mut self, args: &[Value]) -> Result<Value, EvalError> {
        let module = self.module;
        let entry = module.entry;
        let comp = module
            .computations
            .get(entry.index())
            .ok_or_else(|| EvalError::msg("the module has no entry computation"))?;
        let params = comp.parameters();
        if args.len() != params.len() {
            return Err(EvalError::Argument {
                index: args.len().min(params.len()),
                message: format!(
                    "the entry computation takes {} arguments, {} given",
                    params.len(),
                    args.len()
                ),
            });
        }
        let ecl = &module.entry_computation_layout;
        let mut values = Vec::with_capacity(args.len());
        for (i, (arg, &pid)) in args.iter().zip(&params).enumerate() {
            let declared = &comp.inst(pid).shape;
            let as_argument = |e: EvalError| EvalError::Argument {
                index: i,
                message: e.to_string(),
            };
            // Check the logical shape first, whatever the mode.
            zip_leaves(arg, declared, &mut |b, s| {
                if same_logical(b.shape(), s) {
                    Ok(b.clone())
                } else {
                    Err(EvalError::msg(format!(
                        "got {} for a parameter of shape {s}",
                        b.shape()
                    )))
                }
            })
            .map_err(as_argument)?;
            let v = match self.mode {
                Boundary::Logical => zip_leaves(arg, declared, &mut |b, s| {
                    b.relayout(Some(s.layout_or_default()))
                })
                .map_err(as_argument)?,
                Boundary::Physical => {
                    // The caller's buffer is laid out per the entry
                    // computation layout (the declared layout where AUTO);
                    // the parameter instruction reads it under its own.
                    let entry_shape = ecl.parameters.get(i).unwrap_or(declared);
                    let placed = place_argument(arg, entry_shape, declared).map_err(as_argument)?;
                    let name = &comp.inst(pid).name;
                    self.adopt(&placed, declared, false, name)
                        .map_err(|e| e.within(name))?
                }
            };
            values.push(v);
        }
        let result = self.call(entry, values)?;
        match self.mode {
            Boundary::Logical => Ok(result),
            Boundary::Physical => self
                .adopt(&result, &ecl.result, true, "entry result")
                .map_err(|e| EvalError::msg(format!("entry result: {e}"))),
        }
    }

    /// The callee for a per-element computation.
    pub(crate) fn callee(&mut self, comp_id: CompId) -> Result<Callee, EvalError> {
        if let Some(p) = self.programs.get(&comp_id) {
            if let Some(p) = p {
                return Ok(Callee::Program(Rc::clone(p)));
            }
        } else {
            let order = self.order(comp_id)?;
            let p = scalar::compile(self.module, comp_id, &order).map(Rc::new);
            self.programs.insert(comp_id, p.clone());
            if let (Some(k), Some(_)) = (self.kinds.as_mut(), &p) {
                // A compiled program evaluates every instruction it holds.
                let comp = &self.module.computations[comp_id.index()];
                k.extend(order.iter().map(|&id| instruction_kind(comp.inst(id))));
            }
            if let Some(p) = p {
                return Ok(Callee::Program(p));
            }
        }
        let comp = &self.module.computations[comp_id.index()];
        let mut types = Vec::new();
        for pid in comp.parameters() {
            match &comp.inst(pid).shape {
                Shape::Array(a) if a.rank() == 0 => types.push(a.element_type),
                other => {
                    return Err(EvalError::msg(format!(
                        "computation %{} applied per element must take scalars, not {other}",
                        comp.name
                    )));
                }
            }
        }
        Ok(Callee::General(comp_id, types))
    }

    /// Applies a per-element computation to canonical scalar arguments,
    /// appending the scalar results to `out`.
    pub(crate) fn apply(
        &mut self,
        callee: &Callee,
        args: &[u64],
        out: &mut Vec<u64>,
    ) -> Result<(), EvalError> {
        match callee {
            Callee::Program(p) => {
                self.charge(p.len())?;
                let mut regs = std::mem::take(&mut self.regs);
                let r = p.run(args, &mut regs, out);
                self.regs = regs;
                r
            }
            Callee::General(comp, types) => {
                if types.len() != args.len() {
                    return Err(EvalError::msg(format!(
                        "the applied computation takes {} parameters, {} given",
                        types.len(),
                        args.len()
                    )));
                }
                let mut values = Vec::with_capacity(args.len());
                for (&ty, &bits) in types.iter().zip(args) {
                    values.push(Value::Array(Buffer::from_logical_bits(
                        ArrayShape::new(ty, &[]),
                        vec![bits],
                    )?));
                }
                let r = self.call(*comp, values)?;
                let mut push = |v: &Value| -> Result<(), EvalError> {
                    match v {
                        Value::Array(b) if b.shape().rank() == 0 => {
                            out.push(b.logical_bits()?[0]);
                            Ok(())
                        }
                        other => Err(EvalError::msg(format!(
                            "an applied computation must return scalars, not {}",
                            describe(other)
                        ))),
                    }
                };
                match &r {
                    Value::Tuple(es) => es.iter().try_for_each(&mut push),
                    v => push(v),
                }
            }
        }
    }

    /// A computation's name, for error paths.
    fn comp_name(&self, id: CompId) -> String {
        self.module
            .computations
            .get(id.index())
            .map_or_else(|| format!("computation {}", id.0), |c| c.name.clone())
    }

    /// Dispatches one instruction.
    fn instruction(
        &mut self,
        inst: &Instruction,
        ops: &[&Value],
        args: &[Value],
    ) -> Result<Value, EvalError> {
        use Opcode as O;
        if let Some(k) = self.kinds.as_mut() {
            k.insert(instruction_kind(inst));
        }
        match inst.opcode {
            O::Parameter => {
                let n = inst
                    .parameter_number()
                    .ok_or_else(|| EvalError::msg("parameter without a number"))?;
                let v = args
                    .get(n as usize)
                    .ok_or_else(|| EvalError::msg(format!("parameter({n}) has no argument")))?;
                // Reads the argument under the declared shape (see `adopt`,
                // applied by the caller of `instruction`).
                Ok(v.clone())
            }
            O::Constant => {
                let Payload::Constant(text) = &inst.payload else {
                    return Err(EvalError::msg("constant without a literal"));
                };
                let (shape, _) = self.out_array(inst)?;
                let data = crate::literal::parse_literal(text, shape)?;
                self.finish(shape, data)
            }
            O::Tuple => Ok(Value::Tuple(ops.iter().map(|v| (*v).clone()).collect())),
            O::GetTupleElement => {
                arity(ops, 1)?;
                let index = inst
                    .attrs
                    .int(KnownAttr::Index)
                    .ok_or_else(|| EvalError::msg("get-tuple-element without index="))?;
                let elems = ops[0]
                    .tuple_elements()
                    .ok_or_else(|| EvalError::msg("get-tuple-element of a non-tuple"))?;
                usize::try_from(index)
                    .ok()
                    .and_then(|i| elems.get(i))
                    .cloned()
                    .ok_or_else(|| {
                        EvalError::msg(format!(
                            "tuple index {index} out of range ({} elements)",
                            elems.len()
                        ))
                    })
            }
            O::AfterAll => Ok(Value::Token),
            O::AddDependency | O::Domain => {
                if ops.is_empty() {
                    return Err(EvalError::msg("missing operand"));
                }
                Ok(ops[0].clone())
            }
            O::OptimizationBarrier => {
                arity(ops, 1)?;
                Ok(ops[0].clone())
            }
            O::Copy => {
                arity(ops, 1)?;
                match ops[0] {
                    Value::Array(b) => {
                        let (shape, _) = self.out_array(inst)?;
                        if !same_logical(b.shape(), shape) {
                            return Err(EvalError::msg(format!(
                                "copy of {} to {shape}",
                                b.shape()
                            )));
                        }
                        let (data, poison) = b.logical_bits_poison()?;
                        self.finish_poison(shape, data.into_owned(), poison)
                    }
                    // A tuple copy copies the tuple, not the buffers.
                    other => Ok(other.clone()),
                }
            }
            O::Bitcast => {
                arity(ops, 1)?;
                let b = array(ops, 0)?;
                let shape = inst
                    .shape
                    .as_array()
                    .ok_or_else(|| EvalError::msg("bitcast must produce an array"))?;
                self.reserve(shape)?;
                Ok(Value::Array(b.reinterpret(shape.clone())?))
            }
            O::Call | O::Fusion | O::While | O::Conditional => Err(EvalError::msg(
                "internal: control flow evaluated outside the frame machine",
            )),
            O::CustomCall => self.custom_call(inst, ops),
            O::TopK => self.topk_op(inst, ops),
            O::Fft => self.fft(inst, ops),
            O::Map => self.map(inst, ops),
            O::Reduce => self.reduce(inst, ops),
            O::ReduceWindow => self.reduce_window(inst, ops),
            O::SelectAndScatter => self.select_and_scatter(inst, ops),
            O::Sort => self.sort(inst, ops),
            O::Gather => self.gather(inst, ops),
            O::Scatter => self.scatter(inst, ops),
            O::Dot => self.dot(inst, ops),
            O::Convolution => self.convolution(inst, ops),
            O::Broadcast => self.broadcast(inst, ops),
            O::Reshape => self.reshape(inst, ops),
            O::Transpose => self.transpose(inst, ops),
            O::Slice => self.slice(inst, ops),
            O::DynamicSlice => self.dynamic_slice(inst, ops),
            O::DynamicUpdateSlice => self.dynamic_update_slice(inst, ops),
            O::Pad => self.pad(inst, ops),
            O::Concatenate => self.concatenate(inst, ops),
            O::Reverse => self.reverse(inst, ops),
            O::Iota => self.iota(inst, ops),
            O::Convert => self.convert(inst, ops),
            O::BitcastConvert => self.bitcast_convert(inst, ops),
            O::ReducePrecision => self.reduce_precision(inst, ops),
            O::Compare => self.compare(inst, ops),
            O::Select => self.select(inst, ops),
            O::Clamp => self.clamp(inst, ops),
            opcode => {
                if let Some(u) = scalar::unary_op(opcode, &inst.payload) {
                    self.unary(inst, ops, u)
                } else if let Some(b) = scalar::binary_op(opcode) {
                    self.binary(inst, ops, b)
                } else {
                    Err(EvalError::unsupported(format!(
                        "opcode {}",
                        inst.opcode_name()
                    )))
                }
            }
        }
    }
}

/// What an instruction is, for coverage: its opcode name, with the target
/// of a `custom-call` (`custom-call:TopK`) and the type of an `fft`
/// (`fft:IRFFT`).
pub fn instruction_kind(inst: &Instruction) -> String {
    match inst.opcode {
        Opcode::CustomCall => format!(
            "custom-call:{}",
            inst.attrs.string(KnownAttr::CustomCallTarget).unwrap_or("")
        ),
        Opcode::Fft => format!(
            "fft:{}",
            inst.attrs.string(KnownAttr::FftType).unwrap_or("")
        ),
        _ => inst.opcode_name().to_string(),
    }
}

/// Fails unless there are exactly `n` operands.
pub(crate) fn arity(ops: &[&Value], n: usize) -> Result<(), EvalError> {
    EvalError::ensure(ops.len() == n, || {
        format!("expected {n} operands, got {}", ops.len())
    })
}

/// Operand `i` as an array.
pub(crate) fn array<'v>(ops: &[&'v Value], i: usize) -> Result<&'v Buffer, EvalError> {
    match ops.get(i) {
        Some(Value::Array(b)) => {
            value::class_of(b.element_type())?;
            Ok(b)
        }
        Some(other) => Err(EvalError::msg(format!(
            "operand {i} must be an array, not {}",
            describe(other)
        ))),
        None => Err(EvalError::msg(format!("missing operand {i}"))),
    }
}

/// A called-computation attribute.
pub(crate) fn comp_attr(inst: &Instruction, key: KnownAttr) -> Result<CompId, EvalError> {
    match inst.attrs.get(key) {
        Some(hlo::AttrValue::Computation(c)) => Ok(*c),
        _ => Err(EvalError::msg(format!("missing {}= attribute", key.name()))),
    }
}

/// An integer-list attribute.
pub(crate) fn ints(inst: &Instruction, key: KnownAttr) -> Result<&[i64], EvalError> {
    inst.attrs
        .ints(key)
        .ok_or_else(|| EvalError::msg(format!("missing {}= attribute", key.name())))
}

/// An integer-list attribute that must list dimension numbers below `rank`.
pub(crate) fn dim_list(
    inst: &Instruction,
    key: KnownAttr,
    rank: usize,
) -> Result<Vec<usize>, EvalError> {
    dims_below(ints(inst, key)?, rank, key.name())
}

/// An optional integer-list attribute (absent is empty) that must list
/// dimension numbers below `rank`.
pub(crate) fn opt_dims(
    inst: &Instruction,
    key: KnownAttr,
    rank: usize,
) -> Result<Vec<usize>, EvalError> {
    dims_below(inst.attrs.ints(key).unwrap_or(&[]), rank, key.name())
}

/// Checks dimension numbers against a rank.
pub(crate) fn dims_below(v: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, EvalError> {
    v.iter()
        .map(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d < rank)
                .ok_or_else(|| {
                    EvalError::msg(format!(
                        "{what}: dimension {d} is out of range for rank {rank}"
                    ))
                })
        })
        .collect()
}

fn scalar_pred(v: &Value) -> Result<bool, EvalError> {
    match v {
        Value::Array(b) if b.shape().rank() == 0 && b.element_type() == PrimitiveType::Pred => {
            Ok(b.logical_bits()?[0] & 1 != 0)
        }
        other => Err(EvalError::msg(format!(
            "a while condition must return pred[], not {}",
            describe(other)
        ))),
    }
}
