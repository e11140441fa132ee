//! HLO opcodes and the properties passes ask of them.

use std::fmt;

macro_rules! opcodes {
    ($($variant:ident => $name:literal,)*) => {
        /// An HLO opcode. Opcodes Tessera does not know parse as
        /// [`Opcode::Unknown`], with the text kept in the instruction's
        /// payload, so that nothing is lost.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $($variant,)*
            /// An opcode not in this list; its text is in
            /// [`crate::Payload::UnknownOpcode`].
            Unknown,
        }

        const OPCODE_NAMES: &[(Opcode, &str)] = &[$((Opcode::$variant, $name),)*];
    };
}

opcodes! {
    Abs => "abs",
    Add => "add",
    AddDependency => "add-dependency",
    AfterAll => "after-all",
    AllGather => "all-gather",
    AllGatherDone => "all-gather-done",
    AllGatherStart => "all-gather-start",
    AllReduce => "all-reduce",
    AllReduceDone => "all-reduce-done",
    AllReduceStart => "all-reduce-start",
    AllToAll => "all-to-all",
    And => "and",
    AsyncDone => "async-done",
    AsyncStart => "async-start",
    AsyncUpdate => "async-update",
    Atan2 => "atan2",
    BatchNormGrad => "batch-norm-grad",
    BatchNormInference => "batch-norm-inference",
    BatchNormTraining => "batch-norm-training",
    Bitcast => "bitcast",
    BitcastConvert => "bitcast-convert",
    Broadcast => "broadcast",
    Call => "call",
    Cbrt => "cbrt",
    Ceil => "ceil",
    Cholesky => "cholesky",
    Clamp => "clamp",
    Clz => "count-leading-zeros",
    CollectiveBroadcast => "collective-broadcast",
    CollectivePermute => "collective-permute",
    CollectivePermuteDone => "collective-permute-done",
    CollectivePermuteStart => "collective-permute-start",
    Compare => "compare",
    Complex => "complex",
    Concatenate => "concatenate",
    Conditional => "conditional",
    Constant => "constant",
    Convert => "convert",
    Convolution => "convolution",
    Copy => "copy",
    CopyDone => "copy-done",
    CopyStart => "copy-start",
    Cosine => "cosine",
    CustomCall => "custom-call",
    Divide => "divide",
    Domain => "domain",
    Dot => "dot",
    DynamicReshape => "dynamic-reshape",
    DynamicSlice => "dynamic-slice",
    DynamicUpdateSlice => "dynamic-update-slice",
    Erf => "erf",
    Exp => "exponential",
    Expm1 => "exponential-minus-one",
    Fft => "fft",
    Floor => "floor",
    Fusion => "fusion",
    Gather => "gather",
    GetDimensionSize => "get-dimension-size",
    GetTupleElement => "get-tuple-element",
    Imag => "imag",
    Infeed => "infeed",
    Iota => "iota",
    IsFinite => "is-finite",
    Log => "log",
    Log1p => "log-plus-one",
    Map => "map",
    Maximum => "maximum",
    Minimum => "minimum",
    Multiply => "multiply",
    Negate => "negate",
    Not => "not",
    OptimizationBarrier => "opt-barrier",
    Or => "or",
    Outfeed => "outfeed",
    Pad => "pad",
    Parameter => "parameter",
    PartitionId => "partition-id",
    PopulationCount => "popcnt",
    Power => "power",
    RaggedAllToAll => "ragged-all-to-all",
    RaggedDot => "ragged-dot",
    Real => "real",
    Recv => "recv",
    RecvDone => "recv-done",
    Reduce => "reduce",
    ReducePrecision => "reduce-precision",
    ReduceScatter => "reduce-scatter",
    ReduceWindow => "reduce-window",
    Remainder => "remainder",
    ReplicaId => "replica-id",
    Reshape => "reshape",
    Reverse => "reverse",
    Rng => "rng",
    RngBitGenerator => "rng-bit-generator",
    RngGetAndUpdateState => "rng-get-and-update-state",
    RoundNearestAfz => "round-nearest-afz",
    RoundNearestEven => "round-nearest-even",
    Rsqrt => "rsqrt",
    Scan => "scan",
    Scatter => "scatter",
    Select => "select",
    SelectAndScatter => "select-and-scatter",
    Send => "send",
    SendDone => "send-done",
    SetDimensionSize => "set-dimension-size",
    ShiftLeft => "shift-left",
    ShiftRightArithmetic => "shift-right-arithmetic",
    ShiftRightLogical => "shift-right-logical",
    Sign => "sign",
    Sine => "sine",
    Slice => "slice",
    Sort => "sort",
    Sqrt => "sqrt",
    StochasticConvert => "stochastic-convert",
    Subtract => "subtract",
    Tan => "tan",
    Tanh => "tanh",
    TopK => "topk",
    Transpose => "transpose",
    TriangularSolve => "triangular-solve",
    Tuple => "tuple",
    While => "while",
    Xor => "xor",
}

impl Opcode {
    /// The opcode's text, e.g. `get-tuple-element`; `"unknown"` for
    /// [`Opcode::Unknown`], whose real text lives in the instruction.
    pub fn name(self) -> &'static str {
        OPCODE_NAMES
            .iter()
            .find(|&&(o, _)| o == self)
            .map_or("unknown", |&(_, n)| n)
    }

    /// Looks an opcode up by its text. Unknown text gives `None`.
    pub fn from_name(name: &str) -> Option<Opcode> {
        // `opt-barrier` is printed by XLA; `optimization-barrier` is accepted too.
        if name == "optimization-barrier" {
            return Some(Opcode::OptimizationBarrier);
        }
        OPCODE_NAMES
            .iter()
            .find(|&&(_, n)| n == name)
            .map(|&(o, _)| o)
    }

    /// Every known opcode.
    pub fn all() -> impl Iterator<Item = Opcode> {
        OPCODE_NAMES.iter().map(|&(o, _)| o)
    }

    /// Elementwise ops of one operand.
    pub fn is_elementwise_unary(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Abs | Cbrt
                | Ceil
                | Clz
                | Convert
                | BitcastConvert
                | Cosine
                | Erf
                | Exp
                | Expm1
                | Floor
                | Imag
                | IsFinite
                | Log
                | Log1p
                | Negate
                | Not
                | PopulationCount
                | Real
                | ReducePrecision
                | RoundNearestAfz
                | RoundNearestEven
                | Rsqrt
                | Sign
                | Sine
                | Sqrt
                | Tan
                | Tanh
                | Copy
        )
    }

    /// Elementwise ops of two operands.
    pub fn is_elementwise_binary(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Add | Atan2
                | And
                | Compare
                | Complex
                | Divide
                | Maximum
                | Minimum
                | Multiply
                | Or
                | Power
                | Remainder
                | ShiftLeft
                | ShiftRightArithmetic
                | ShiftRightLogical
                | StochasticConvert
                | Subtract
                | Xor
        )
    }

    /// True for ops that compute each output element from the elements at
    /// the same index of their operands (`copy` included: logically it is
    /// the identity).
    pub fn is_elementwise(self) -> bool {
        self.is_elementwise_unary()
            || self.is_elementwise_binary()
            || matches!(self, Opcode::Select | Opcode::Clamp | Opcode::Map)
    }

    /// XLA's `InstructionCanChangeLayout`: false means the output and every
    /// operand of the same rank must share one layout.
    pub fn can_change_layout(self) -> bool {
        use Opcode::*;
        if self.is_elementwise() && self != Copy {
            return false;
        }
        !matches!(
            self,
            Pad | Slice
                | DynamicSlice
                | DynamicUpdateSlice
                | Concatenate
                | Reverse
                | ReduceWindow
                | SelectAndScatter
                | Scatter
                | Scan
                | Sort
                | TopK
                | Fft
                | TriangularSolve
                | Cholesky
                | While
                | SetDimensionSize
                | OptimizationBarrier
                | AddDependency
                | AllGather
                | AllGatherStart
                | AllGatherDone
                | AllToAll
                | RaggedAllToAll
                | CollectivePermute
                | CollectivePermuteStart
                | CollectivePermuteDone
                | CollectiveBroadcast
                | AllReduce
                | AllReduceStart
                | AllReduceDone
                | ReduceScatter
        )
    }

    /// Ops whose result is made of their operands' buffers, untouched:
    /// they read no element, write none and reinterpret none, so every
    /// array leaf of the result *is* an array leaf of an operand, in the
    /// same layout. `tuple` and `get-tuple-element` build and take apart
    /// tuples of buffers; `opt-barrier`, `add-dependency` and `domain`
    /// return their (first) operand and add only an ordering or a
    /// sharding boundary; `async-update` returns the `async-start`'s
    /// tuple, and `async-done` its element 1, the result the wrapped
    /// computation wrote while the start was in flight. XLA's dataflow
    /// analysis defines no value at any of them, and a pass must not give
    /// their results layouts of their own.
    ///
    /// Not `bitcast`: it reinterprets the bytes under another shape or
    /// layout, so its result is a value of its own. Not the ops that call
    /// a computation with their operands
    /// ([`Opcode::passes_operands_to_callee`]): the callee reads them.
    pub fn forwards_buffers(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Tuple
                | GetTupleElement
                | OptimizationBarrier
                | AddDependency
                | Domain
                | AsyncUpdate
                | AsyncDone
        )
    }

    /// Ops whose operands become the parameters of a computation they
    /// call (after a conditional's branch index): the operands are read in
    /// the layouts the callee's parameters have, not by the op itself.
    /// Ops that apply a computation to elements (`reduce`, `sort`, `map`,
    /// ...) are not among them: they read their operands themselves and
    /// hand the callee scalars.
    pub fn passes_operands_to_callee(self) -> bool {
        use Opcode::*;
        matches!(self, While | Call | Conditional | Fusion | AsyncStart)
    }

    /// Collectives that carry several arrays at once (as several operands
    /// or the leaves of a tuple) and keep each array's layout separately:
    /// operand `i` is laid out like result leaf `i`, where other ops that
    /// keep their layout tie every output to one layout. `opt-barrier` is
    /// not one of them, though it too passes a tuple through leaf by leaf:
    /// it is no collective, and it forwards its operand's buffers
    /// ([`Opcode::forwards_buffers`]), so each leaf keeps its layout by
    /// being the same value, which no pass needs to ask about.
    pub fn is_per_leaf_collective(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            AllReduce
                | AllReduceStart
                | AllReduceDone
                | AllToAll
                | CollectivePermute
                | CollectivePermuteStart
                | CollectivePermuteDone
                | AllGather
                | AllGatherStart
                | AllGatherDone
                | ReduceScatter
                | CollectiveBroadcast
        )
    }

    /// Ops that run another computation, named in their attributes.
    pub fn calls_computations(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Call | Conditional
                | While
                | Fusion
                | Map
                | Reduce
                | ReduceWindow
                | ReduceScatter
                | AllReduce
                | AllReduceStart
                | Scan
                | Scatter
                | SelectAndScatter
                | Sort
                | CustomCall
                | AsyncStart
                | AsyncUpdate
                | AsyncDone
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in Opcode::all() {
            assert_eq!(Opcode::from_name(op.name()), Some(op), "{op:?}");
        }
        assert_eq!(Opcode::from_name("frobnicate"), None);
    }

    /// The opcode families the passes build on do not overlap: a value is
    /// forwarded, handed to a callee, or read by the op, never two of
    /// these.
    #[test]
    fn forwarding_calling_and_collectives_are_disjoint() {
        for op in Opcode::all() {
            let kinds = [
                op.forwards_buffers(),
                op.passes_operands_to_callee(),
                op.is_per_leaf_collective(),
            ];
            assert!(kinds.iter().filter(|&&k| k).count() <= 1, "{op:?}");
        }
        assert!(Opcode::AsyncUpdate.forwards_buffers());
        assert!(!Opcode::Bitcast.forwards_buffers());
        assert!(!Opcode::OptimizationBarrier.is_per_leaf_collective());
    }

    #[test]
    fn layout_changing_follows_xla() {
        assert!(!Opcode::Add.can_change_layout());
        assert!(!Opcode::Slice.can_change_layout());
        assert!(Opcode::Copy.can_change_layout());
        assert!(Opcode::Transpose.can_change_layout());
        assert!(Opcode::Dot.can_change_layout());
    }
}
