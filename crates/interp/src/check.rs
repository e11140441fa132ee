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

/// True when two canonical elements are the same value: identical bits,
/// or NaN on both sides (any payload, component-wise for complex).
fn same_element(cls: Class, a: u64, b: u64) -> bool {
    if a == b {
        return true;
    }
    match (element::decode(cls, a), element::decode(cls, b)) {
        (Num::F(x), Num::F(y)) => x.is_nan() && y.is_nan(),
        (Num::C(ar, ai), Num::C(br, bi)) => {
            let same = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
            same(ar, br) && same(ai, bi)
        }
        _ => false,
    }
}

fn eq_at(a: &Value, b: &Value, path: &mut Vec<usize>) -> Result<(), Mismatch> {
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
                eq_at(p, q, path)?;
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
                if !same_element(cls, p, q) {
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
    eq_at(a, b, &mut Vec::new())
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
    /// The results differ.
    Mismatch {
        /// The seed whose arguments show the difference.
        seed: u64,
        /// Where.
        mismatch: Mismatch,
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
            EquivalenceError::Before { seed, error } => {
                write!(f, "seed {seed}: evaluating `before` failed: {error}")
            }
            EquivalenceError::After { seed, error } => {
                write!(f, "seed {seed}: evaluating `after` failed: {error}")
            }
            EquivalenceError::Mismatch {
                seed,
                mismatch,
                notes,
            } => {
                write!(f, "seed {seed}: results differ {mismatch}")?;
                for n in notes {
                    write!(f, "\n  note: in `after`, {n}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for EquivalenceError {}

/// What one evaluation produced besides its value.
pub(crate) struct Run {
    pub value: Value,
    pub work: u64,
    pub notes: Vec<String>,
    pub opaque: std::collections::BTreeSet<String>,
}

/// Evaluates `module`.
pub(crate) fn run(
    module: &Module,
    args: &[Value],
    limits: &Limits,
    mode: Boundary,
) -> Result<Run, EvalError> {
    let mut interp = Interp::new(module, limits, mode);
    let value = interp.run_entry(args)?;
    Ok(Run {
        value,
        work: interp.work,
        notes: interp.notes,
        opaque: interp.opaque_targets,
    })
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
        if let Err(mismatch) = logical_eq(&b.value, &a.value) {
            return Err(EquivalenceError::Mismatch {
                seed,
                mismatch,
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
