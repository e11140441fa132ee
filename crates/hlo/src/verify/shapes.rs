//! Checks of operand counts and of the result shapes the common opcodes
//! produce from their operands and attributes.
//!
//! One function per opcode family, each collecting the problems of one
//! instruction; [`Verifier::shape_rules`] picks the family and reports
//! what it found. The rules compare logical shapes only: layouts are
//! checked for being well formed elsewhere, and for being the right ones
//! by the passes' verifier.

use shape::{ArrayShape, PrimitiveType, Shape};

use super::Verifier;
use crate::{AttrValue, Computation, Instruction, KnownAttr, Opcode};

/// What every family of rules reads of one instruction.
#[derive(Clone, Copy)]
struct Rule<'a> {
    inst: &'a Instruction,
    op: Opcode,
    /// The operands' shapes.
    ops: &'a [&'a Shape],
    /// The result's shape.
    result: &'a Shape,
    /// The result, when it is an array.
    res: Option<&'a ArrayShape>,
    /// Operand 0, when it is an array.
    a0: Option<&'a ArrayShape>,
}

impl<'a> Rule<'a> {
    /// An integer-list attribute, empty when absent.
    fn ints(&self, key: KnownAttr) -> &'a [i64] {
        self.inst.attrs.ints(key).unwrap_or(&[])
    }

    /// For opcodes that produce an array: the problem when the result is
    /// not one.
    fn need_array_result(&self, problems: &mut Vec<String>) {
        if self.res.is_none() {
            problems.push(format!(
                "{} produces an array, not {}",
                self.inst.opcode_name(),
                self.result.display_without_layout()
            ));
        }
    }

    /// The first operand and the result, when both are arrays; a result
    /// that is not one is a problem.
    fn operand_and_result(
        &self,
        problems: &mut Vec<String>,
    ) -> Option<(&'a ArrayShape, &'a ArrayShape)> {
        self.need_array_result(problems);
        self.a0.zip(self.res)
    }
}

/// An op that keeps its operand's element type.
fn keeps_element_type(o: &ArrayShape, r: &ArrayShape, problems: &mut Vec<String>) {
    if o.element_type != r.element_type {
        problems.push(format!(
            "the element type changes from {} to {}",
            o.element_type, r.element_type
        ));
    }
}

/// One family's check of one instruction.
type Family = fn(&Rule<'_>, &mut Vec<String>);

impl Verifier<'_> {
    /// Checks the operand count; false when it is wrong, so that the shape
    /// rules (which index operands) are skipped.
    pub(super) fn arity(&mut self, comp: &Computation, inst: &Instruction, n: usize) -> bool {
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

    /// The result shape the operands and attributes of `inst` give.
    pub(super) fn shape_rules(&mut self, comp: &Computation, inst: &Instruction, ops: &[&Shape]) {
        let op = inst.opcode;
        // Without array operands where the opcode needs them, the rules
        // below (which read dimensions) have nothing to compare.
        let problems = non_array_operands(op, ops);
        if !problems.is_empty() {
            for m in problems {
                self.error(comp, inst, m);
            }
            return;
        }
        let Some(family) = family(op) else {
            return;
        };
        let rule = Rule {
            inst,
            op,
            ops,
            result: &inst.shape,
            res: inst.shape.as_array(),
            a0: ops.first().and_then(|s| s.as_array()),
        };
        let mut problems = Vec::new();
        family(&rule, &mut problems);
        for m in problems {
            self.error(comp, inst, m);
        }
    }
}

/// The operands that are not arrays, for opcodes that read arrays only.
fn non_array_operands(op: Opcode, ops: &[&Shape]) -> Vec<String> {
    use Opcode::*;
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
    if !needs_arrays {
        return Vec::new();
    }
    ops.iter()
        .enumerate()
        .filter(|(_, s)| !s.is_array())
        .map(|(i, s)| {
            format!(
                "operand {i} must be an array, but is {}",
                s.display_without_layout()
            )
        })
        .collect()
}

/// The rules of `op`'s family; `None` for opcodes checked by operand
/// count alone. The order matters where families overlap: `copy` is an
/// elementwise unary op with a rule of its own.
fn family(op: Opcode) -> Option<Family> {
    use Opcode::*;
    Some(match op {
        Bitcast => bitcast,
        Copy => copy,
        _ if op.is_elementwise_unary() => elementwise_unary,
        _ if op.is_elementwise_binary() => elementwise_binary,
        Select => select,
        Clamp => clamp,
        Broadcast => broadcast,
        Transpose => transpose,
        Reshape => reshape,
        Reverse => reverse,
        Slice => slice,
        Pad => pad,
        Concatenate => concatenate,
        GetTupleElement => get_tuple_element,
        Tuple => tuple,
        Iota => iota,
        Reduce => reduce,
        Dot => dot,
        DynamicSlice => dynamic_slice,
        DynamicUpdateSlice => dynamic_update_slice,
        Sort => sort,
        Gather => gather,
        CustomCall => custom_call,
        GetDimensionSize => get_dimension_size,
        AfterAll => after_all,
        _ => return None,
    })
}

fn same_dims(x: &ArrayShape, y: &ArrayShape) -> bool {
    x.dims == y.dims && x.dynamic == y.dynamic
}

fn array(s: &Shape) -> Option<&ArrayShape> {
    s.as_array()
}

fn is_scalar(s: &Shape) -> bool {
    s.as_array().is_some_and(|a| a.rank() == 0)
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

/// A bitcast reinterprets its operand's buffer: both sides must be buffers
/// of one size (padding and tiles included), or bytes would be read that do
/// not exist.
fn bitcast(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { res, a0, .. } = *rule;
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

/// A copy keeps the logical shape; only layouts may change.
fn copy(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
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

/// One operand, one result of its dimensions; the element type changes only
/// for conversions and for the real parts of complex numbers.
fn elementwise_unary(rule: &Rule<'_>, problems: &mut Vec<String>) {
    use Opcode::*;
    let Rule {
        op, ops, result, ..
    } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
        if !same_dims(o, r) && op != BitcastConvert {
            problems.push(format!(
                "the operand is {} but the result is {}: the dimensions differ",
                ops[0].display_without_layout(),
                result.display_without_layout()
            ));
        }
        let type_changes = matches!(op, Convert | BitcastConvert | IsFinite | ReducePrecision)
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
                problems.push(
                    "bitcast-convert between types of one width must keep the dimensions".into(),
                );
            }
        }
    }
}

/// Two operands and a result of one set of dimensions and (but for compare,
/// complex and stochastic-convert) one element type.
fn elementwise_binary(rule: &Rule<'_>, problems: &mut Vec<String>) {
    use Opcode::*;
    let Rule {
        op,
        ops,
        result,
        res,
        a0,
        ..
    } = *rule;
    rule.need_array_result(problems);
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
                    problems.push(format!("compare produces pred, not {}", r.element_type));
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

/// A pred selector of the result's dimensions (or a scalar) and two cases
/// of the result's shape.
fn select(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops,
        result,
        res,
        a0,
        ..
    } = *rule;
    rule.need_array_result(problems);
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

/// The operand and the result alike; each bound a scalar or of the
/// operand's dimensions.
fn clamp(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops, result, res, ..
    } = *rule;
    rule.need_array_result(problems);
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

/// `dimensions` maps each operand dimension to a result dimension of the
/// same size.
fn broadcast(rule: &Rule<'_>, problems: &mut Vec<String>) {
    if let Some((o, r)) = rule.operand_and_result(problems) {
        let dims = rule.ints(KnownAttr::Dimensions);
        if dims.len() != o.rank() {
            problems.push(format!(
                "dimensions has {} entries but the operand has rank {}",
                dims.len(),
                o.rank()
            ));
        } else {
            for (i, &d) in dims.iter().enumerate() {
                match usize::try_from(d).ok().and_then(|d| r.dims.get(d)) {
                    None => problems.push(format!(
                        "dimensions entry {d} is out of range for the result rank {}",
                        r.rank()
                    )),
                    Some(&rd) if rd != o.dims[i] => problems.push(format!(
                        "operand dimension {i} (size {}) maps to result dimension {d} of size {rd}",
                        o.dims[i]
                    )),
                    Some(_) => {}
                }
            }
        }
        keeps_element_type(o, r, problems);
    }
}

/// `dimensions` is a permutation, and permutes the operand into the result.
fn transpose(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
        let dims = rule.ints(KnownAttr::Dimensions);
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
        keeps_element_type(o, r, problems);
    }
}

/// A reshape keeps the element count (of static shapes) and the element
/// type.
fn reshape(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
        if o.dynamic == 0 && r.dynamic == 0 && o.element_count() != r.element_count() {
            problems.push(format!(
                "reshape from {} to {} changes the element count",
                ops[0].display_without_layout(),
                result.display_without_layout()
            ));
        }
        keeps_element_type(o, r, problems);
    }
}

/// A reverse names dimensions of the operand and keeps its shape.
fn reverse(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { res, a0, .. } = *rule;
    if let (Some(o), Some(r)) = (a0, res) {
        for &d in rule.ints(KnownAttr::Dimensions) {
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

/// Each dimension's `[start:limit:stride]` fits the operand and gives the
/// result's size.
fn slice(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { inst, result, .. } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
        match inst.attrs.get(KnownAttr::Slice) {
            Some(AttrValue::Slice(sl)) if sl.len() == o.rank() => {
                let mut expected = Vec::with_capacity(sl.len());
                for (i, s) in sl.iter().enumerate() {
                    if s.stride <= 0 || s.start < 0 || s.start > s.limit || s.limit > o.dims[i] {
                        problems.push(format!(
                            "slice dimension {i} [{}:{}:{}] does not fit size {}",
                            s.start, s.limit, s.stride, o.dims[i]
                        ));
                        expected.clear();
                        break;
                    }
                    expected.push((s.limit - s.start).saturating_add(s.stride - 1) / s.stride);
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

/// A scalar padding value, and low, high and interior padding that give the
/// result's dimensions.
fn pad(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        inst, ops, result, ..
    } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
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
                    problems.push(format!(
                        "the padding gives dimensions {expected:?}, but the result is {}",
                        result.display_without_layout()
                    ));
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

/// Operands agree but along the one dimension named, whose sizes add up to
/// the result's.
fn concatenate(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops,
        result,
        res,
        a0,
        ..
    } = *rule;
    rule.need_array_result(problems);
    let dims = rule.ints(KnownAttr::Dimensions);
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
                        problems.push(format!(
                            "operand {i} {} does not fit the others along dimension {d}",
                            s.display_without_layout()
                        ));
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

/// The index names an element of the tuple operand, of the result's shape.
fn get_tuple_element(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        inst, ops, result, ..
    } = *rule;
    match (ops.first(), inst.attrs.int(KnownAttr::Index)) {
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
    }
}

/// The result is the tuple of the operand shapes.
fn tuple(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
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

/// `iota_dimension` names a dimension of the result.
fn iota(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { inst, res, .. } = *rule;
    rule.need_array_result(problems);
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

/// Distinct dimensions to reduce, inputs of one set of dimensions, scalar
/// init values, and one result per input with the kept dimensions.
fn reduce(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops, result, a0, ..
    } = *rule;
    let n = ops.len() / 2;
    let dims = rule.ints(KnownAttr::Dimensions);
    if let Some(first) = a0 {
        let mut seen = 0u128;
        let mut dims_ok = true;
        for &d in dims {
            if d < 0 || d as usize >= first.rank() || seen & (1u128 << (d as u32 % 128)) != 0 {
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

/// Batch and contracting dimensions pair up in range and in size, and the
/// rest give the result: batch, then lhs, then rhs dimensions.
fn dot(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops,
        result,
        res,
        a0,
        ..
    } = *rule;
    rule.need_array_result(problems);
    if let (Some(l), Some(r), Some(out)) = (a0, ops.get(1).and_then(|s| array(s)), res) {
        let (lb, lc) = (
            rule.ints(KnownAttr::LhsBatchDims),
            rule.ints(KnownAttr::LhsContractingDims),
        );
        let (rb, rc) = (
            rule.ints(KnownAttr::RhsBatchDims),
            rule.ints(KnownAttr::RhsContractingDims),
        );
        let in_range =
            |v: &[i64], a: &ArrayShape| v.iter().all(|&d| d >= 0 && (d as usize) < a.rank());
        if lb.len() != rb.len() || lc.len() != rc.len() {
            problems
                .push("lhs and rhs need as many batch and as many contracting dimensions".into());
        } else if !in_range(lb, l) || !in_range(lc, l) || !in_range(rb, r) || !in_range(rc, r) {
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
            let mut expected: Vec<i64> = lb.iter().map(|&d| l.dims[d as usize]).collect();
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

/// One scalar start index per dimension (or one vector of them), and sizes
/// that fit the operand and give the result.
fn dynamic_slice(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
    if let Some((o, r)) = rule.operand_and_result(problems) {
        let sizes = rule.ints(KnownAttr::DynamicSliceSizes);
        if ops.len() != 1 + o.rank()
            && !(ops.len() == 2 && array(ops[1]).is_some_and(|a| a.rank() == 1))
        {
            problems.push(format!(
                "dynamic-slice of a rank-{} operand takes {} scalar start indices, but has {}",
                o.rank(),
                o.rank(),
                ops.len() - 1
            ));
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

/// An update that fits in the operand, one scalar start index per dimension
/// (or one vector), and the operand's shape as result.
fn dynamic_update_slice(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops, result, a0, ..
    } = *rule;
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

/// One dimension to sort along, operands of one set of dimensions, and the
/// result their tuple (or the one operand's shape).
fn sort(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule {
        ops, result, a0, ..
    } = *rule;
    let dims = rule.ints(KnownAttr::Dimensions);
    if let Some(first) = a0 {
        if dims.len() != 1 || dims[0] < 0 || dims[0] as usize >= first.rank().max(1) {
            problems.push(format!(
                "sort needs one dimension below rank {}, not {dims:?}",
                first.rank()
            ));
        }
        for (i, s) in ops.iter().enumerate().skip(1) {
            if array(s).is_some_and(|a| !same_dims(a, first)) {
                problems.push(format!("operand {i} has other dimensions than operand 0"));
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

/// `slice_sizes` has one entry per operand dimension.
fn gather(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { res, a0, .. } = *rule;
    if let (Some(o), Some(_)) = (a0, res) {
        let sizes = rule.ints(KnownAttr::SliceSizes);
        if sizes.len() != o.rank() {
            problems.push(format!(
                "slice_sizes has {} entries but the operand has rank {}",
                sizes.len(),
                o.rank()
            ));
        }
    }
}

/// `operand_layout_constraints` gives one shape per operand, of its logical
/// shape.
fn custom_call(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { inst, ops, .. } = *rule;
    if let Some(AttrValue::Shapes(shapes)) = inst.attrs.get(KnownAttr::OperandLayoutConstraints) {
        if shapes.len() != ops.len() {
            problems.push(format!(
                "operand_layout_constraints has {} shapes for {} operands",
                shapes.len(),
                ops.len()
            ));
        } else {
            for (i, (s, o)) in shapes.iter().zip(ops).enumerate() {
                if !s.same_logical_shape(o) {
                    problems.push(format!(
                        "operand layout constraint {i} {} does not match the operand {}",
                        s.display_without_layout(),
                        o.display_without_layout()
                    ));
                }
            }
        }
    }
}

/// The result is an s32 scalar.
fn get_dimension_size(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { res, .. } = *rule;
    if let Some(r) = res
        && (r.rank() != 0 || r.element_type != PrimitiveType::S32)
    {
        problems.push("get-dimension-size produces s32[]".into());
    }
}

/// Tokens in, a token out.
fn after_all(rule: &Rule<'_>, problems: &mut Vec<String>) {
    let Rule { ops, result, .. } = *rule;
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
