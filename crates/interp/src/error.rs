//! Evaluation errors.

use std::fmt;

/// Why a module could not be evaluated.
///
/// `inst` names the instruction where the problem was found, as a path
/// through calling instructions (`%while.1 > %add.3`); it is empty when the
/// error is not about one instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// The module uses something the evaluator does not implement
    /// (an opcode, a custom-call target, an element type).
    Unsupported {
        /// Where.
        inst: String,
        /// What is not supported.
        what: String,
    },
    /// The module is malformed or an instruction cannot be computed
    /// (wrong operand count, missing attribute, shape mismatch, ...).
    Invalid {
        /// Where.
        inst: String,
        /// What is wrong.
        message: String,
    },
    /// A logical element was read from a padding (poison) slot: a bitcast
    /// whose layouts do not line up.
    Poison {
        /// Where.
        inst: String,
        /// The physical slot.
        slot: u64,
        /// The logical index of the element that was read.
        index: String,
    },
    /// A bitcast between shapes whose buffers have different slot counts.
    BitcastSize {
        /// Where.
        inst: String,
        /// The operand shape.
        from: String,
        /// Its slot count.
        from_slots: u64,
        /// The result shape.
        to: String,
        /// Its slot count.
        to_slots: u64,
    },
    /// A configured limit was exceeded.
    Limit {
        /// Where.
        inst: String,
        /// Which limit and by how much.
        message: String,
    },
    /// An argument does not fit the entry computation.
    Argument {
        /// The parameter number.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

impl EvalError {
    /// An `Invalid` error without an instruction yet.
    pub(crate) fn msg(message: impl Into<String>) -> EvalError {
        EvalError::Invalid {
            inst: String::new(),
            message: message.into(),
        }
    }

    /// `Ok` when `ok` holds, else [`EvalError::msg`] of what `message`
    /// says (built only on failure).
    pub(crate) fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<(), EvalError> {
        if ok {
            Ok(())
        } else {
            Err(EvalError::msg(message()))
        }
    }

    pub(crate) fn unsupported(what: impl Into<String>) -> EvalError {
        EvalError::Unsupported {
            inst: String::new(),
            what: what.into(),
        }
    }

    pub(crate) fn limit(message: impl Into<String>) -> EvalError {
        EvalError::Limit {
            inst: String::new(),
            message: message.into(),
        }
    }

    pub(crate) fn layout(e: shape::AlgebraError) -> EvalError {
        EvalError::msg(format!("layout: {e}"))
    }

    /// The instruction path, if any.
    pub fn instruction(&self) -> Option<&str> {
        match self {
            EvalError::Unsupported { inst, .. }
            | EvalError::Invalid { inst, .. }
            | EvalError::Poison { inst, .. }
            | EvalError::BitcastSize { inst, .. }
            | EvalError::Limit { inst, .. } => Some(inst.as_str()).filter(|s| !s.is_empty()),
            EvalError::Argument { .. } => None,
        }
    }

    /// Prefixes the instruction path with `name` (the instruction where
    /// the error surfaced, or a caller of it). A path longer than
    /// [`MAX_PATH`] bytes keeps its inner part and its outermost name, with
    /// the callers between them elided, so an error from deep inside a
    /// chain of 100,000 calls costs linear time, not quadratic.
    pub(crate) fn within(mut self, name: &str) -> EvalError {
        match &mut self {
            EvalError::Unsupported { inst, .. }
            | EvalError::Invalid { inst, .. }
            | EvalError::Poison { inst, .. }
            | EvalError::BitcastSize { inst, .. }
            | EvalError::Limit { inst, .. } => {
                *inst = if inst.is_empty() {
                    format!("%{name}")
                } else if let Some(at) = inst.find(ELIDED) {
                    // Already cut: only the outermost name changes.
                    format!("%{name}{}", &inst[at..])
                } else if inst.len() > MAX_PATH {
                    format!("%{name}{ELIDED}{inst}")
                } else {
                    format!("%{name} > {inst}")
                };
            }
            EvalError::Argument { .. } => {}
        }
        self
    }
}

/// The longest instruction path kept whole (see [`EvalError::within`]).
const MAX_PATH: usize = 1024;

/// Where a long instruction path is cut (instruction names have no spaces).
const ELIDED: &str = " > … > ";

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(inst) = self.instruction() {
            write!(f, "{inst}: ")?;
        }
        match self {
            EvalError::Unsupported { what, .. } => write!(f, "unsupported: {what}"),
            EvalError::Invalid { message, .. } => f.write_str(message),
            EvalError::Poison { slot, index, .. } => {
                write!(f, "reads padding slot {slot} as the element at {index}")
            }
            EvalError::BitcastSize {
                from,
                from_slots,
                to,
                to_slots,
                ..
            } => write!(
                f,
                "bitcast changes buffer size: {from} has {from_slots} slots but {to} has {to_slots}"
            ),
            EvalError::Limit { message, .. } => write!(f, "limit exceeded: {message}"),
            EvalError::Argument { index, message } => write!(f, "argument {index}: {message}"),
        }
    }
}

impl std::error::Error for EvalError {}
