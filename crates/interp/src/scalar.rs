//! Scalar programs: the computations applied per element by `reduce`,
//! `sort`, `map`, `reduce-window`, `scatter` and `select-and-scatter`,
//! compiled to a flat register program when every instruction is a rank-0
//! elementwise operation. Running one is allocation-free; the semantics
//! are the same functions the array path uses. Computations outside that
//! subset are run by the general evaluator instead.

use hlo::{CompId, Computation, KnownAttr, Module, Opcode, Payload};
use shape::{PrimitiveType, Shape};

use crate::element::{self, Binary, Class, Direction, Num, Unary};
use crate::error::EvalError;

#[derive(Clone, Debug)]
enum Op {
    Const(u64),
    Param(usize),
    Unary(Unary, Class, Class),
    Binary(Binary, Class, Class),
    Compare(Direction, bool, Class, PrimitiveType),
    Select,
    Clamp(Class),
    Convert(Class, Class),
    BitcastConvert(PrimitiveType, PrimitiveType),
    Copy,
}

#[derive(Clone, Debug)]
struct Step {
    op: Op,
    args: [usize; 3],
}

/// A compiled scalar computation.
#[derive(Clone, Debug)]
pub(crate) struct ScalarProgram {
    steps: Vec<Step>,
    /// The register of each output (one, or one per root tuple element).
    outputs: Vec<usize>,
    /// The parameter count.
    pub params: usize,
}

fn scalar_type(shape: &Shape) -> Option<PrimitiveType> {
    match shape {
        Shape::Array(a) if a.rank() == 0 => Some(a.element_type),
        _ => None,
    }
}

/// Maps an elementwise opcode to its unary operation.
pub(crate) fn unary_op(opcode: Opcode, payload: &Payload) -> Option<Unary> {
    use Opcode as O;
    Some(match opcode {
        O::Abs => Unary::Abs,
        O::Negate => Unary::Negate,
        O::Exp => Unary::Exp,
        O::Expm1 => Unary::Expm1,
        O::Log => Unary::Log,
        O::Log1p => Unary::Log1p,
        O::Sqrt => Unary::Sqrt,
        O::Rsqrt => Unary::Rsqrt,
        O::Cbrt => Unary::Cbrt,
        O::Tanh => Unary::Tanh,
        O::Sine => Unary::Sin,
        O::Cosine => Unary::Cos,
        O::Tan => Unary::Tan,
        O::Erf => Unary::Erf,
        O::Floor => Unary::Floor,
        O::Ceil => Unary::Ceil,
        O::RoundNearestAfz => Unary::RoundAfz,
        O::RoundNearestEven => Unary::RoundEven,
        O::Sign => Unary::Sign,
        O::IsFinite => Unary::IsFinite,
        O::Not => Unary::Not,
        O::PopulationCount => Unary::Popcnt,
        O::Clz => Unary::Clz,
        O::Real => Unary::Real,
        O::Imag => Unary::Imag,
        O::Unknown => match payload {
            Payload::UnknownOpcode(name) if &**name == "logistic" => Unary::Logistic,
            _ => return None,
        },
        _ => return None,
    })
}

/// Maps an elementwise opcode to its binary operation.
pub(crate) fn binary_op(opcode: Opcode) -> Option<Binary> {
    use Opcode as O;
    Some(match opcode {
        O::Add => Binary::Add,
        O::Subtract => Binary::Sub,
        O::Multiply => Binary::Mul,
        O::Divide => Binary::Div,
        O::Remainder => Binary::Rem,
        O::Maximum => Binary::Max,
        O::Minimum => Binary::Min,
        O::Power => Binary::Pow,
        O::Atan2 => Binary::Atan2,
        O::And => Binary::And,
        O::Or => Binary::Or,
        O::Xor => Binary::Xor,
        O::ShiftLeft => Binary::Shl,
        O::ShiftRightArithmetic => Binary::ShrA,
        O::ShiftRightLogical => Binary::ShrL,
        O::Complex => Binary::Complex,
        _ => return None,
    })
}

/// Reads `direction=` and `type=` of a compare instruction.
pub(crate) fn compare_attrs(
    inst: &hlo::Instruction,
    operand_ty: PrimitiveType,
) -> Result<(Direction, bool), EvalError> {
    let dir_text = inst
        .attrs
        .string(KnownAttr::Direction)
        .ok_or_else(|| EvalError::msg("compare has no direction= attribute"))?;
    let dir = Direction::parse(dir_text)
        .ok_or_else(|| EvalError::msg(format!("unknown comparison direction '{dir_text}'")))?;
    let total = match inst.attrs.string(KnownAttr::CompareType) {
        None => false,
        Some("TOTALORDER") => true,
        Some("FLOAT") | Some("SIGNED") | Some("UNSIGNED") => false,
        Some(other) => return Err(EvalError::unsupported(format!("comparison type {other}"))),
    };
    if total && !operand_ty.is_float() {
        // TOTALORDER only changes float comparisons.
        return Ok((dir, false));
    }
    Ok((dir, total))
}

/// Compiles a computation, or returns `None` if it is not a pure scalar
/// computation of supported operations.
pub(crate) fn compile(
    module: &Module,
    comp_id: CompId,
    order: &[hlo::InstId],
) -> Option<ScalarProgram> {
    let comp: &Computation = module.computations.get(comp_id.index())?;
    let root = comp.root()?;
    let mut reg = vec![usize::MAX; comp.node_bound()];
    let mut steps = Vec::with_capacity(order.len());
    let params = comp.parameters().len();
    let mut outputs = Vec::new();
    for &id in order {
        let inst = comp.inst(id);
        let ops = comp.operands(id);
        let arg = |i: usize| -> Option<usize> {
            let r = *reg.get(ops.get(i)?.index())?;
            (r != usize::MAX).then_some(r)
        };
        let op_ty =
            |i: usize| -> Option<PrimitiveType> { scalar_type(&comp.inst(*ops.get(i)?).shape) };
        if id == root && inst.opcode == Opcode::Tuple {
            for i in 0..ops.len() {
                op_ty(i)?;
                outputs.push(arg(i)?);
            }
            continue;
        }
        let ty = scalar_type(&inst.shape)?;
        let cls = element::class(ty).ok()?;
        let (op, args) = match inst.opcode {
            Opcode::Parameter => {
                let n = inst.parameter_number()? as usize;
                if n >= params {
                    return None;
                }
                (Op::Param(n), [0; 3])
            }
            Opcode::Constant => {
                let Payload::Constant(text) = &inst.payload else {
                    return None;
                };
                let bits = crate::literal::parse_literal(text, inst.shape.as_array()?).ok()?;
                (Op::Const(*bits.first()?), [0; 3])
            }
            Opcode::Copy => {
                if ops.len() != 1 || op_ty(0)? != ty {
                    return None;
                }
                (Op::Copy, [arg(0)?, 0, 0])
            }
            Opcode::Convert => {
                if ops.len() != 1 {
                    return None;
                }
                let from = element::class(op_ty(0)?).ok()?;
                (Op::Convert(from, cls), [arg(0)?, 0, 0])
            }
            // A rank-0 bitcast between types of one width reinterprets bits.
            Opcode::BitcastConvert | Opcode::Bitcast => {
                if ops.len() != 1 {
                    return None;
                }
                let from = op_ty(0)?;
                if element::bit_width(from) != element::bit_width(ty) {
                    return None;
                }
                (Op::BitcastConvert(from, ty), [arg(0)?, 0, 0])
            }
            Opcode::Compare => {
                if ops.len() != 2 || ty != PrimitiveType::Pred || op_ty(0)? != op_ty(1)? {
                    return None;
                }
                let t = op_ty(0)?;
                let (dir, total) = compare_attrs(inst, t).ok()?;
                (
                    Op::Compare(dir, total, element::class(t).ok()?, t),
                    [arg(0)?, arg(1)?, 0],
                )
            }
            Opcode::Select => {
                if ops.len() != 3
                    || op_ty(0)? != PrimitiveType::Pred
                    || op_ty(1)? != ty
                    || op_ty(2)? != ty
                {
                    return None;
                }
                (Op::Select, [arg(0)?, arg(1)?, arg(2)?])
            }
            Opcode::Clamp => {
                if ops.len() != 3 || (0..3).any(|i| op_ty(i) != Some(ty)) {
                    return None;
                }
                (Op::Clamp(cls), [arg(0)?, arg(1)?, arg(2)?])
            }
            opcode => {
                if let Some(u) = unary_op(opcode, &inst.payload) {
                    if ops.len() != 1 {
                        return None;
                    }
                    let from = element::class(op_ty(0)?).ok()?;
                    (Op::Unary(u, from, cls), [arg(0)?, 0, 0])
                } else if let Some(b) = binary_op(opcode) {
                    if ops.len() != 2 || op_ty(0)? != op_ty(1)? {
                        return None;
                    }
                    let from = element::class(op_ty(0)?).ok()?;
                    (Op::Binary(b, from, cls), [arg(0)?, arg(1)?, 0])
                } else {
                    return None;
                }
            }
        };
        reg[id.index()] = steps.len();
        steps.push(Step { op, args });
        if id == root {
            outputs.push(steps.len() - 1);
        }
    }
    if outputs.is_empty() {
        return None;
    }
    Some(ScalarProgram {
        steps,
        outputs,
        params,
    })
}

impl ScalarProgram {
    /// `Some((op, class))` when the program is `op(param0, param1)` (or,
    /// for a commutative op, `op(param1, param0)`) on one class: the
    /// reducers of most reductions, which callers may run inline.
    pub(crate) fn as_binop(&self) -> Option<(Binary, Class)> {
        if self.params != 2 || self.outputs.len() != 1 {
            return None;
        }
        let out = *self.outputs.first()?;
        let step = self.steps.get(out)?;
        let Op::Binary(op, from, to) = &step.op else {
            return None;
        };
        if from != to {
            return None;
        }
        let param = |r: usize| match self.steps.get(r).map(|s| &s.op) {
            Some(Op::Param(n)) => Some(*n),
            _ => None,
        };
        let commutative = matches!(
            op,
            Binary::Add
                | Binary::Mul
                | Binary::Max
                | Binary::Min
                | Binary::And
                | Binary::Or
                | Binary::Xor
        );
        match (param(step.args[0])?, param(step.args[1])?) {
            (0, 1) => Some((*op, *from)),
            (1, 0) if commutative => Some((*op, *from)),
            _ => None,
        }
    }

    /// The number of steps, the work one run costs.
    pub(crate) fn len(&self) -> u64 {
        self.steps.len() as u64
    }

    /// Runs the program on canonical argument bits; `regs` is scratch
    /// space. Outputs are appended to `out`.
    pub(crate) fn run(
        &self,
        args: &[u64],
        regs: &mut Vec<u64>,
        out: &mut Vec<u64>,
    ) -> Result<(), EvalError> {
        if args.len() != self.params {
            return Err(EvalError::msg(format!(
                "the computation takes {} parameters but was given {}",
                self.params,
                args.len()
            )));
        }
        regs.clear();
        for step in &self.steps {
            let [a, b, c] = step.args;
            let v = match &step.op {
                Op::Const(bits) => *bits,
                Op::Param(n) => args[*n],
                Op::Copy => regs[a],
                Op::Unary(u, from, to) => {
                    let r = element::unary(*u, *from, element::decode(*from, regs[a]))
                        .map_err(EvalError::msg)?;
                    element::encode(*to, r)
                }
                Op::Binary(op, from, to) => element::binary_bits(*op, *from, *to, regs[a], regs[b])
                    .map_err(EvalError::msg)?,
                Op::Compare(dir, total, cls, ty) => u64::from(
                    element::compare(*dir, *total, *cls, *ty, regs[a], regs[b])
                        .map_err(EvalError::msg)?,
                ),
                Op::Select => {
                    if regs[a] & 1 != 0 {
                        regs[b]
                    } else {
                        regs[c]
                    }
                }
                Op::Clamp(cls) => clamp(*cls, regs[a], regs[b], regs[c])?,
                Op::Convert(from, to) => element::convert(*to, element::decode(*from, regs[a])),
                Op::BitcastConvert(from, to) => {
                    element::from_raw(*to, element::raw_bits(*from, regs[a]))
                        .map_err(EvalError::msg)?
                }
            };
            regs.push(v);
        }
        out.extend(self.outputs.iter().map(|&r| regs[r]));
        Ok(())
    }
}

/// `clamp(lo, x, hi)` = `min(max(x, lo), hi)`.
pub(crate) fn clamp(cls: Class, lo: u64, x: u64, hi: u64) -> Result<u64, EvalError> {
    let d = |b| element::decode(cls, b);
    let m = element::binary(Binary::Max, cls, d(x), d(lo)).map_err(EvalError::msg)?;
    let r = element::binary(Binary::Min, cls, m, d(hi)).map_err(EvalError::msg)?;
    Ok(element::encode(cls, r))
}

/// Decodes an index operand element to i64.
pub(crate) fn index_value(cls: Class, bits: u64) -> Result<i64, EvalError> {
    match element::decode(cls, bits) {
        Num::S(v) => Ok(v),
        Num::U(v) => Ok(i64::try_from(v).unwrap_or(i64::MAX)),
        _ => Err(EvalError::msg("index operands must be integers")),
    }
}
