//! Random arguments, logical comparison and the equivalence check.

use std::fmt;
use std::time::{Duration, Instant};

use hlo::Module;
use shape::{ArrayShape, Shape};

use crate::element::{self, Class, Num};
use crate::error::EvalError;
use crate::eval::{Boundary, Interp, Limits, describe};
use crate::value::{Buffer, Value, fmt_index, num_to_scalar, unflatten};

/// The splitmix64 generator: small, fast, deterministic, and good enough
/// to give every element of a test input a distinct value.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A random element of class `cls`: floats are multiples of 2^-18 in
/// [-4, 4) (about two million distinct values, exact in f32), signed
/// integers lie in [-32, 96), unsigned ones in [0, 128), both cut to the
/// type's range; preds are fair coins.
pub(crate) fn random_element(rng: &mut SplitMix64, cls: Class) -> u64 {
    let float =
        |rng: &mut SplitMix64| (rng.below(1 << 21) as f64 - (1 << 20) as f64) / (1 << 18) as f64;
    match cls {
        Class::Pred => rng.below(2),
        Class::Signed(w) => {
            let v = rng.below(128) as i64 - 32;
            let (lo, hi) = if w >= 64 {
                (i64::MIN, i64::MAX)
            } else {
                (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1)
            };
            element::encode(cls, Num::S(v.clamp(lo, hi)))
        }
        Class::Unsigned(_) => element::encode(cls, Num::U(rng.below(128))),
        Class::Float(_) => element::encode(cls, Num::F(float(rng))),
        Class::Complex => {
            let re = float(rng);
            let im = float(rng);
            element::encode(cls, Num::C(re, im))
        }
    }
}

fn random_value(rng: &mut SplitMix64, entry: &Shape, declared: &Shape) -> Result<Value, EvalError> {
    match (entry, declared) {
        (Shape::Array(e), Shape::Array(d)) => {
            let cls = crate::value::class_of(d.element_type)?;
            let n = crate::value::element_count(&d.dims)?;
            if n > 1 << 28 {
                return Err(EvalError::limit(format!(
                    "parameter {d} is too large for random arguments"
                )));
            }
            let data: Vec<u64> = (0..n).map(|_| random_element(rng, cls)).collect();
            let layout = e.layout.clone().or_else(|| d.layout.clone());
            Ok(Value::Array(Buffer::from_logical_bits(
                ArrayShape {
                    layout,
                    ..d.clone()
                },
                data,
            )?))
        }
        (Shape::Tuple(es), Shape::Tuple(ds)) if es.len() == ds.len() => {
            let mut out = Vec::with_capacity(es.len());
            for (e, d) in es.iter().zip(ds) {
                out.push(random_value(rng, e, d)?);
            }
            Ok(Value::Tuple(out))
        }
        (_, Shape::Token) => Ok(Value::Token),
        (_, other) => Err(EvalError::unsupported(format!(
            "random arguments of shape {other}"
        ))),
    }
}

/// Random arguments for the entry computation: one value per parameter,
/// laid out per the entry computation layout (the parameter's own layout
/// where the entry layout leaves it AUTO). The same seed gives the same
/// logical values for any two modules with the same parameter shapes.
pub fn random_arguments(module: &Module, seed: u64) -> Result<Vec<Value>, EvalError> {
    let comp = module
        .computations
        .get(module.entry.index())
        .ok_or_else(|| EvalError::msg("the module has no entry computation"))?;
    let mut out = Vec::new();
    for (i, pid) in comp.parameters().into_iter().enumerate() {
        let declared = &comp.inst(pid).shape;
        let entry = module
            .entry_computation_layout
            .parameters
            .get(i)
            .unwrap_or(declared);
        let mut rng = SplitMix64::new(seed ^ (i as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        out.push(
            random_value(&mut rng, entry, declared).map_err(|e| EvalError::Argument {
                index: i,
                message: e.to_string(),
            })?,
        );
    }
    Ok(out)
}

/// Where and how two values differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The tuple index path of the differing leaf (empty for an array).
    pub path: Vec<usize>,
    /// The first differing logical index, when the shapes agree.
    pub index: Option<Vec<i64>>,
    /// What differs.
    pub message: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            let p: Vec<String> = self.path.iter().map(usize::to_string).collect();
            write!(f, "at output {{{}}}", p.join(","))?;
        } else {
            f.write_str("at the output")?;
        }
        if let Some(i) = &self.index {
            write!(f, ", index {}", fmt_index(i))?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Mismatch {}

/// How far apart two floating-point elements may be and still count as
/// equal: `|a - b| <= abs + rel * max(|a|, |b|)`, per component for
/// complex numbers. The default is exact (both zero): a pass that only
/// changes layouts must not change a single bit. Integers and preds always
/// compare exactly; NaN equals NaN, an infinity only itself.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tolerance {
    /// The absolute part.
    pub abs: f64,
    /// The relative part.
    pub rel: f64,
}

impl Tolerance {
    /// Exact comparison.
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };

    fn close(self, x: f64, y: f64) -> bool {
        if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) {
            return true;
        }
        if self == Tolerance::EXACT || !x.is_finite() || !y.is_finite() {
            return false;
        }
        (x - y).abs() <= self.abs + self.rel * x.abs().max(y.abs())
    }
}

/// True when two canonical elements are the same value within `tol`:
/// identical bits, NaN on both sides (any payload, component-wise for
/// complex), or floats within the tolerance.
fn same_element(cls: Class, a: u64, b: u64, tol: Tolerance) -> bool {
    if a == b {
        return true;
    }
    match (element::decode(cls, a), element::decode(cls, b)) {
        (Num::F(x), Num::F(y)) => tol.close(x, y),
        (Num::C(ar, ai), Num::C(br, bi)) => tol.close(ar, br) && tol.close(ai, bi),
        _ => false,
    }
}

fn eq_at(a: &Value, b: &Value, path: &mut Vec<usize>, tol: Tolerance) -> Result<(), Mismatch> {
    let fail = |path: &[usize], index: Option<Vec<i64>>, message: String| Mismatch {
        path: path.to_vec(),
        index,
        message,
    };
    match (a, b) {
        (Value::Token, Value::Token) => Ok(()),
        (Value::Tuple(x), Value::Tuple(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                path.push(i);
                eq_at(p, q, path, tol)?;
                path.pop();
            }
            Ok(())
        }
        (Value::Array(x), Value::Array(y)) => {
            let (sx, sy) = (x.shape(), y.shape());
            if sx.element_type != sy.element_type || sx.dims != sy.dims {
                return Err(fail(path, None, format!("shapes differ: {sx} vs {sy}")));
            }
            let cls = crate::value::class_of(sx.element_type)
                .map_err(|e| fail(path, None, e.to_string()))?;
            let dx = x
                .logical_bits()
                .map_err(|e| fail(path, None, format!("left value: {e}")))?;
            let dy = y
                .logical_bits()
                .map_err(|e| fail(path, None, format!("right value: {e}")))?;
            let mut first = None;
            let mut count = 0u64;
            for (i, (&p, &q)) in dx.iter().zip(dy.iter()).enumerate() {
                if !same_element(cls, p, q, tol) {
                    count += 1;
                    first.get_or_insert((i, p, q));
                }
            }
            match first {
                None => Ok(()),
                Some((i, p, q)) => {
                    let idx = unflatten(i as u64, &sx.dims).to_vec();
                    let (vp, vq) = (
                        num_to_scalar(element::decode(cls, p)),
                        num_to_scalar(element::decode(cls, q)),
                    );
                    Err(fail(
                        path,
                        Some(idx),
                        format!(
                            "{vp} vs {vq} ({count} of {} elements of {sx} differ)",
                            dx.len()
                        ),
                    ))
                }
            }
        }
        _ => Err(fail(
            path,
            None,
            format!("structures differ: {} vs {}", describe(a), describe(b)),
        )),
    }
}

/// Compares two values logically, ignoring layouts: same structure, same
/// element types and dimensions, and bit-identical elements, except that
/// any NaN equals any NaN. Reports the first differing index.
pub fn logical_eq(a: &Value, b: &Value) -> Result<(), Mismatch> {
    eq_at(a, b, &mut Vec::new(), Tolerance::EXACT)
}

/// [`logical_eq`] with floats compared within a tolerance.
pub fn logical_close(a: &Value, b: &Value, tol: Tolerance) -> Result<(), Mismatch> {
    eq_at(a, b, &mut Vec::new(), tol)
}

/// What an equivalence check did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Seeds evaluated.
    pub seeds: usize,
    /// Result elements compared, over all seeds.
    pub elements_compared: u64,
    /// Work units spent evaluating `before` and `after`, over all seeds.
    pub work_before: u64,
    /// See `work_before`.
    pub work_after: u64,
    /// Time spent evaluating `before`, over all seeds.
    pub time_before: Duration,
    /// Time spent evaluating `after`, over all seeds.
    pub time_after: Duration,
    /// Custom-call targets the evaluator does not know, evaluated in
    /// either module as opaque pure functions of their operands' logical
    /// values (sorted): the check shows these calls got the same values
    /// and their results were read consistently, not what they compute.
    pub opaque_custom_calls: Vec<String>,
}

/// Why two modules were not shown equivalent.
#[derive(Clone, Debug, PartialEq)]
pub enum EquivalenceError {
    /// The modules cannot be compared (different parameter or result
    /// shapes, no seeds).
    Setup(String),
    /// `before` could not be evaluated.
    Before {
        /// The seed.
        seed: u64,
        /// Why.
        error: EvalError,
    },
    /// `after` could not be evaluated.
    After {
        /// The seed.
        seed: u64,
        /// Why.
        error: EvalError,
    },
    /// A module is larger than the check may evaluate.
    TooLarge {
        /// Which module: `before` or `after`.
        module: &'static str,
        /// The elements its instructions produce (each instruction once).
        elements: u64,
        /// The bound ([`CheckOptions::max_elements`]).
        max: u64,
    },
    /// The results differ.
    Mismatch {
        /// The seed whose arguments show the difference.
        seed: u64,
        /// Where.
        mismatch: Mismatch,
        /// The first instruction of `after`, in evaluation order, whose
        /// value differs from the value of the instruction of the same name
        /// in `before` (evaluated once more, recording values, to find it):
        /// usually the wrong bitcast or copy itself, or the first reader of
        /// a wrong one. `None` when no named value differs.
        first_difference: Option<Box<FirstDifference>>,
        /// Places where `after` read a buffer at a computation boundary
        /// (entry parameter or result, called computation, tuple element)
        /// under a layout other than the one it was written in: the usual
        /// suspects for the difference.
        notes: Vec<String>,
    },
}

impl fmt::Display for EquivalenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EquivalenceError::Setup(m) => write!(f, "cannot compare the modules: {m}"),
            EquivalenceError::TooLarge {
                module,
                elements,
                max,
            } => write!(
                f,
                "`{module}` is too large to check: its instructions produce {elements} elements, more than max_elements = {max}"
            ),
            EquivalenceError::Before { seed, error } => {
                write!(f, "seed {seed}: evaluating `before` failed: {error}")
            }
            EquivalenceError::After { seed, error } => {
                write!(f, "seed {seed}: evaluating `after` failed: {error}")
            }
            EquivalenceError::Mismatch {
                seed,
                mismatch,
                first_difference,
                notes,
            } => {
                write!(f, "seed {seed}: results differ {mismatch}")?;
                if let Some(d) = first_difference {
                    write!(f, "\n  first difference: {d}")?;
                }
                for n in notes {
                    write!(f, "\n  note: in `after`, {n}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for EquivalenceError {}

impl EquivalenceError {
    /// True when the error shows that the modules differ: the results
    /// differ, the entry signatures differ, or `after` alone fails to
    /// evaluate because of what it does (reads padding, bitcasts between
    /// sizes, is malformed). False when the check could not be done: a
    /// module is too large, `before` fails, or `after` needs something the
    /// evaluator lacks or exceeds a limit.
    pub fn shows_difference(&self) -> bool {
        match self {
            EquivalenceError::Mismatch { .. } | EquivalenceError::Setup(_) => true,
            EquivalenceError::After { error, .. } => matches!(
                error,
                EvalError::Poison { .. }
                    | EvalError::BitcastSize { .. }
                    | EvalError::Invalid { .. }
            ),
            EquivalenceError::TooLarge { .. } | EquivalenceError::Before { .. } => false,
        }
    }
}

/// The first instruction whose value differs between the two modules.
#[derive(Clone, Debug, PartialEq)]
pub struct FirstDifference {
    /// The instruction's name, with `%`.
    pub instruction: String,
    /// Its opcode in `after` (`bitcast`, `copy`, ...).
    pub opcode: String,
    /// Its shape in `after`, layout included.
    pub shape: String,
    /// Its opcode in `before`, when different.
    pub before_opcode: Option<String>,
    /// Its operands that `before` has no instruction of the same name for
    /// (copies and bitcasts a pass inserted), as `%c = f32[8,4]{0,1} copy`:
    /// when the instruction reads one of them physically, the usual
    /// culprit.
    pub inserted_operands: Vec<String>,
    /// Where its values differ.
    pub mismatch: Mismatch,
}

impl fmt::Display for FirstDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {} {}", self.instruction, self.shape, self.opcode)?;
        if let Some(b) = &self.before_opcode {
            write!(f, " (a {b} in `before`)")?;
        }
        let m = &self.mismatch;
        if let Some(i) = &m.index {
            write!(f, " differs at index {}", fmt_index(i))?;
        } else {
            f.write_str(" differs")?;
        }
        write!(f, ": {}", m.message)?;
        for o in &self.inserted_operands {
            write!(f, "; it reads {o}, which `before` does not have")?;
        }
        Ok(())
    }
}

/// The default of [`CheckOptions::max_elements`] for `tessera check`:
/// 2^28 elements. Every corpus module but XLA's optimized
/// `large_transformer_24_f32` (about 10^9) is smaller.
pub const DEFAULT_MAX_ELEMENTS: u64 = 1 << 28;

/// What [`check_equivalent_with`] does.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckOptions {
    /// The seeds of the random arguments, one evaluation of each module
    /// per seed.
    pub seeds: Vec<u64>,
    /// Bounds on each evaluation.
    pub limits: Limits,
    /// How close floating-point results must be (exact by default).
    pub tolerance: Tolerance,
    /// The most elements the instructions of either module may produce,
    /// each instruction counted once ([`module_elements`]); larger modules
    /// are not evaluated (`EquivalenceError::TooLarge`).
    pub max_elements: Option<u64>,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            seeds: vec![1],
            limits: Limits::default(),
            tolerance: Tolerance::EXACT,
            max_elements: None,
        }
    }
}

/// The elements a module's instructions produce, every instruction of
/// every computation counted once (a loop body once, not per iteration):
/// the size of the module for [`CheckOptions::max_elements`].
pub fn module_elements(module: &Module) -> u64 {
    fn count(s: &Shape) -> u64 {
        match s {
            Shape::Array(a) => a
                .dims
                .iter()
                .fold(1u64, |n, &d| n.saturating_mul(d.max(0) as u64)),
            Shape::Tuple(es) => es.iter().map(count).fold(0, u64::saturating_add),
            _ => 0,
        }
    }
    let mut total = 0u64;
    for comp in &module.computations {
        for &id in comp.schedule() {
            total = total.saturating_add(count(&comp.inst(id).shape));
        }
    }
    total
}

/// What one evaluation produced besides its value.
pub(crate) struct Run {
    pub value: Value,
    pub work: u64,
    pub notes: Vec<String>,
    pub opaque: std::collections::BTreeSet<String>,
    pub recorded: Option<crate::eval::Recorded>,
}

/// Evaluates `module`.
pub(crate) fn run(
    module: &Module,
    args: &[Value],
    limits: &Limits,
    mode: Boundary,
) -> Result<Run, EvalError> {
    run_recording(module, args, limits, mode, false)
}

/// [`run`], recording the first value of every named instruction when
/// `record` is set (up to [`crate::eval::MAX_RECORDED`] elements).
fn run_recording(
    module: &Module,
    args: &[Value],
    limits: &Limits,
    mode: Boundary,
    record: bool,
) -> Result<Run, EvalError> {
    let mut interp = Interp::new(module, limits, mode);
    if record {
        interp.recorded = Some(Default::default());
    }
    let value = interp.run_entry(args)?;
    Ok(Run {
        value,
        work: interp.work,
        notes: interp.notes,
        opaque: interp.opaque_targets,
        recorded: interp.recorded,
    })
}

/// Evaluates both modules once more, recording every named value, and
/// finds the first instruction of `after` (in evaluation order) whose value
/// differs from the same-named one of `before`.
fn first_difference(
    before: &Module,
    after: &Module,
    args: &[Value],
    limits: &Limits,
    tol: Tolerance,
) -> Option<FirstDifference> {
    let b = run_recording(before, args, limits, Boundary::Logical, true)
        .ok()?
        .recorded?;
    // `after` may fail past the difference (reading padding, say): what it
    // recorded until then still counts.
    let a = {
        let mut interp = Interp::new(after, limits, Boundary::Physical);
        interp.recorded = Some(Default::default());
        let _ = interp.run_entry(args);
        interp.recorded?
    };
    for (name, value) in &a.order {
        let Some(theirs) = b.values.get(name) else {
            continue;
        };
        if let Err(mismatch) = logical_close(theirs, value, tol) {
            if mismatch.message.starts_with("shapes differ")
                || mismatch.message.starts_with("structures differ")
            {
                continue;
            }
            let (opcode, shape) = a.info.get(name).cloned().unwrap_or_default();
            let before_opcode = b
                .info
                .get(name)
                .map(|(o, _)| o.clone())
                .filter(|o| *o != opcode);
            let inserted_operands = after
                .computations
                .iter()
                .find_map(|c| {
                    c.schedule()
                        .iter()
                        .find(|&&id| c.inst(id).name == *name)
                        .map(|&id| (c, id))
                })
                .map(|(c, id)| {
                    c.operands(id)
                        .iter()
                        .map(|&o| c.inst(o))
                        .filter(|o| !b.info.contains_key(&o.name))
                        .map(|o| format!("%{} = {} {}", o.name, o.shape, o.opcode_name()))
                        .collect()
                })
                .unwrap_or_default();
            return Some(FirstDifference {
                instruction: format!("%{name}"),
                opcode,
                shape,
                before_opcode,
                inserted_operands,
                mismatch,
            });
        }
    }
    None
}

fn parameter_shapes(m: &Module) -> Result<(Vec<Shape>, Shape), EquivalenceError> {
    let comp = m
        .computations
        .get(m.entry.index())
        .ok_or_else(|| EquivalenceError::Setup("a module has no entry computation".into()))?;
    let params = comp
        .parameters()
        .iter()
        .map(|&p| comp.inst(p).shape.without_layouts())
        .collect();
    let root = comp
        .root()
        .ok_or_else(|| EquivalenceError::Setup("the entry computation has no root".into()))?;
    Ok((params, comp.inst(root).shape.without_layouts()))
}

/// Checks that `after` computes what `before` computes, on random inputs.
///
/// For every seed, random logical arguments are drawn (from `before`'s
/// parameter shapes) and both modules are evaluated on them: `before` with
/// logical boundaries (its layouts are taken as placeholders: arguments are
/// relaid out to its parameter layouts), `after` with physical ones
/// (arguments arrive laid out per its entry computation layout and every
/// layout it declares is taken literally, see [`crate::evaluate`]). The
/// results are compared with [`logical_eq`].
pub fn check_equivalent(
    before: &Module,
    after: &Module,
    seeds: &[u64],
    limits: &Limits,
) -> Result<Report, EquivalenceError> {
    check_equivalent_with(
        before,
        after,
        &CheckOptions {
            seeds: seeds.to_vec(),
            limits: limits.clone(),
            ..CheckOptions::default()
        },
    )
}

/// [`check_equivalent`] with every option: a tolerance for floats and a
/// bound on the size of the modules. On a mismatch it also names the first
/// instruction whose value differs ([`FirstDifference`]).
pub fn check_equivalent_with(
    before: &Module,
    after: &Module,
    options: &CheckOptions,
) -> Result<Report, EquivalenceError> {
    let (seeds, limits, tol) = (&options.seeds[..], &options.limits, options.tolerance);
    if let Some(max) = options.max_elements {
        for (module, m) in [("before", before), ("after", after)] {
            let elements = module_elements(m);
            if elements > max {
                return Err(EquivalenceError::TooLarge {
                    module,
                    elements,
                    max,
                });
            }
        }
    }
    if seeds.is_empty() {
        return Err(EquivalenceError::Setup("no seeds given".into()));
    }
    let (pb, rb) = parameter_shapes(before)?;
    let (pa, ra) = parameter_shapes(after)?;
    if pb != pa {
        return Err(EquivalenceError::Setup(format!(
            "the entry parameters differ: {} vs {}",
            Shape::Tuple(pb),
            Shape::Tuple(pa)
        )));
    }
    if rb != ra {
        return Err(EquivalenceError::Setup(format!(
            "the entry results differ: {rb} vs {ra}"
        )));
    }
    let mut report = Report::default();
    for &seed in seeds {
        let args = random_arguments(before, seed)
            .map_err(|error| EquivalenceError::Before { seed, error })?;
        let t = Instant::now();
        let b = run(before, &args, limits, Boundary::Logical)
            .map_err(|error| EquivalenceError::Before { seed, error })?;
        report.time_before += t.elapsed();
        let t = Instant::now();
        let a = run(after, &args, limits, Boundary::Physical)
            .map_err(|error| EquivalenceError::After { seed, error })?;
        report.time_after += t.elapsed();
        if let Err(mismatch) = logical_close(&b.value, &a.value, tol) {
            return Err(EquivalenceError::Mismatch {
                seed,
                mismatch,
                first_difference: first_difference(before, after, &args, limits, tol).map(Box::new),
                notes: a.notes,
            });
        }
        report.seeds += 1;
        report.elements_compared += b.value.element_count();
        report.work_before += b.work;
        report.work_after += a.work;
        for t in b.opaque.into_iter().chain(a.opaque) {
            if let Err(at) = report.opaque_custom_calls.binary_search(&t) {
                report.opaque_custom_calls.insert(at, t);
            }
        }
    }
    Ok(report)
}
