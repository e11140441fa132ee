//! Instruction attributes: typed where a pass needs them, verbatim text
//! otherwise, so that printing loses nothing.

use smallvec::SmallVec;

use shape::Shape;
pub use shape::{PadDim, SliceDim};

use crate::CompId;

/// The attribute names Tessera understands. The declaration order is the
/// canonical print order of XLA's `HloInstruction::ToString`: opcode-specific
/// attributes first, then called computations, then the generic ones
/// (sharding, frontend attributes, control predecessors, metadata, backend
/// configuration). Attributes not listed here keep their text name in
/// [`AttrKey::Other`] and print in the opcode-specific group.
macro_rules! attr_keys {
    ($($variant:ident => $name:literal,)*) => {
        /// A known attribute name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum KnownAttr { $($variant,)* }

        const KNOWN_ATTR_NAMES: &[(KnownAttr, &str)] = &[$((KnownAttr::$variant, $name),)*];
    };
}

attr_keys! {
    // Opcode-specific attributes.
    Kind => "kind",
    Direction => "direction",
    CompareType => "type",
    Index => "index",
    IotaDimension => "iota_dimension",
    Dimensions => "dimensions",
    Slice => "slice",
    DynamicSliceSizes => "dynamic_slice_sizes",
    Padding => "padding",
    Window => "window",
    DimLabels => "dim_labels",
    FeatureGroupCount => "feature_group_count",
    BatchGroupCount => "batch_group_count",
    LhsBatchDims => "lhs_batch_dims",
    LhsContractingDims => "lhs_contracting_dims",
    RhsBatchDims => "rhs_batch_dims",
    RhsContractingDims => "rhs_contracting_dims",
    OffsetDims => "offset_dims",
    CollapsedSliceDims => "collapsed_slice_dims",
    StartIndexMap => "start_index_map",
    OperandBatchingDims => "operand_batching_dims",
    StartIndicesBatchingDims => "start_indices_batching_dims",
    IndexVectorDim => "index_vector_dim",
    SliceSizes => "slice_sizes",
    IndicesAreSorted => "indices_are_sorted",
    UpdateWindowDims => "update_window_dims",
    InsertedWindowDims => "inserted_window_dims",
    ScatterDimsToOperandDims => "scatter_dims_to_operand_dims",
    InputBatchingDims => "input_batching_dims",
    ScatterIndicesBatchingDims => "scatter_indices_batching_dims",
    UniqueIndices => "unique_indices",
    IsStable => "is_stable",
    FftType => "fft_type",
    FftLength => "fft_length",
    ChannelId => "channel_id",
    ReplicaGroups => "replica_groups",
    ConstrainLayout => "constrain_layout",
    UseGlobalDeviceIds => "use_global_device_ids",
    SplitDimension => "split_dimension",
    SourceTargetPairs => "source_target_pairs",
    ExponentBits => "exponent_bits",
    MantissaBits => "mantissa_bits",
    Distribution => "distribution",
    Algorithm => "algorithm",
    LeftSide => "left_side",
    Lower => "lower",
    UnitDiagonal => "unit_diagonal",
    TransposeA => "transpose_a",
    Largest => "largest",
    K => "k",
    CustomCallTarget => "custom_call_target",
    OperandLayoutConstraints => "operand_layout_constraints",
    OutputToOperandAliasing => "output_to_operand_aliasing",
    CustomCallHasSideEffect => "custom_call_has_side_effect",
    CustomCallSchedule => "schedule",
    ApiVersion => "api_version",
    IsHostTransfer => "is_host_transfer",
    InfeedConfig => "infeed_config",
    OutfeedConfig => "outfeed_config",
    OutfeedShape => "outfeed_shape",
    Domain => "domain",
    // Called computations.
    Calls => "calls",
    ToApply => "to_apply",
    Condition => "condition",
    Body => "body",
    TrueComputation => "true_computation",
    FalseComputation => "false_computation",
    BranchComputations => "branch_computations",
    Select => "select",
    Scatter => "scatter",
    CalledComputations => "called_computations",
    // Generic attributes.
    Sharding => "sharding",
    FrontendAttributes => "frontend_attributes",
    ControlPredecessors => "control-predecessors",
    Metadata => "metadata",
    BackendConfig => "backend_config",
}

impl KnownAttr {
    /// The attribute's text name.
    pub fn name(self) -> &'static str {
        KNOWN_ATTR_NAMES[self as usize].1
    }

    /// Every known attribute, in canonical order.
    pub fn all() -> impl Iterator<Item = KnownAttr> {
        KNOWN_ATTR_NAMES.iter().map(|&(k, _)| k)
    }

    /// Looks a name up.
    pub fn from_name(name: &str) -> Option<KnownAttr> {
        KNOWN_ATTR_NAMES
            .iter()
            .find(|&&(_, n)| n == name)
            .map(|&(k, _)| k)
    }

    /// True for attributes that name called computations.
    pub fn is_computation_ref(self) -> bool {
        use KnownAttr::*;
        matches!(
            self,
            Calls
                | ToApply
                | Condition
                | Body
                | TrueComputation
                | FalseComputation
                | BranchComputations
                | Select
                | Scatter
                | CalledComputations
        )
    }
}

/// An attribute name: a known one, or any other text kept as written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrKey {
    /// A name Tessera knows.
    Known(KnownAttr),
    /// Any other name.
    Other(Box<str>),
}

impl AttrKey {
    /// The name as it appears in text.
    pub fn name(&self) -> &str {
        match self {
            AttrKey::Known(k) => k.name(),
            AttrKey::Other(s) => s,
        }
    }

    /// A key from text: known when Tessera knows it.
    pub fn from_name(name: &str) -> AttrKey {
        KnownAttr::from_name(name).map_or_else(|| AttrKey::Other(name.into()), AttrKey::Known)
    }
}

/// One entry of `output_to_operand_aliasing={{0}: (1, {})}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperandAlias {
    /// The tuple index of the aliased output.
    pub output_index: SmallVec<[i64; 2]>,
    /// The aliased operand.
    pub operand: i64,
    /// The tuple index within the operand.
    pub operand_index: SmallVec<[i64; 2]>,
}

/// Convolution dimension labels `b01f_01io->b01f`, resolved to dimension
/// numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDimLabels {
    /// Input batch dimension.
    pub input_batch: i64,
    /// Input feature dimension.
    pub input_feature: i64,
    /// Input spatial dimensions, in spatial order.
    pub input_spatial: SmallVec<[i64; 3]>,
    /// Kernel input-feature dimension.
    pub kernel_input_feature: i64,
    /// Kernel output-feature dimension.
    pub kernel_output_feature: i64,
    /// Kernel spatial dimensions.
    pub kernel_spatial: SmallVec<[i64; 3]>,
    /// Output batch dimension.
    pub output_batch: i64,
    /// Output feature dimension.
    pub output_feature: i64,
    /// Output spatial dimensions.
    pub output_spatial: SmallVec<[i64; 3]>,
    /// The label text, kept so that printing is exact.
    pub text: Box<str>,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// A list of integers in braces: `{1,0}`, `{}`.
    Ints(SmallVec<[i64; 4]>),
    /// A bare integer: `index=0`.
    Int(i64),
    /// `true` or `false`.
    Bool(bool),
    /// One called computation: `to_apply=%add`.
    Computation(CompId),
    /// Several called computations: `branch_computations={%a, %b}`.
    Computations(Vec<CompId>),
    /// `slice={[0:3], [1:5:2]}`.
    Slice(Vec<SliceDim>),
    /// `padding=0_0x1_2_1`.
    Padding(Vec<PadDim>),
    /// A list of shapes: `operand_layout_constraints={f32[2]{0}, ...}`.
    Shapes(Vec<Shape>),
    /// `output_to_operand_aliasing={...}`.
    Aliasing(Vec<OperandAlias>),
    /// Convolution `dim_labels`, boxed: at 160 bytes it made every
    /// attribute of every instruction 184 bytes, where the other values
    /// fit in 48.
    DimLabels(Box<ConvDimLabels>),
    /// A quoted string, stored with its escapes as written, without quotes.
    String(Box<str>),
    /// Anything else: the exact text after `=`, such as a `metadata={...}`
    /// or `window={size=3x3}` value, or an enum word like `kLoop`.
    Raw(Box<str>),
}

/// One attribute: its name and value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attr {
    /// The attribute name.
    pub key: AttrKey,
    /// Its value.
    pub value: AttrValue,
}

/// The attributes of an instruction, in print order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attrs(pub Vec<Attr>);

impl Attrs {
    /// The value of a known attribute.
    pub fn get(&self, key: KnownAttr) -> Option<&AttrValue> {
        self.0
            .iter()
            .find(|a| a.key == AttrKey::Known(key))
            .map(|a| &a.value)
    }

    /// The value of a known attribute, mutably.
    pub fn get_mut(&mut self, key: KnownAttr) -> Option<&mut AttrValue> {
        self.0
            .iter_mut()
            .find(|a| a.key == AttrKey::Known(key))
            .map(|a| &mut a.value)
    }

    /// The value of any attribute by its text name.
    pub fn get_by_name(&self, name: &str) -> Option<&AttrValue> {
        self.0
            .iter()
            .find(|a| a.key.name() == name)
            .map(|a| &a.value)
    }

    /// An integer-list attribute such as `dimensions`.
    pub fn ints(&self, key: KnownAttr) -> Option<&[i64]> {
        match self.get(key)? {
            AttrValue::Ints(v) => Some(v),
            _ => None,
        }
    }

    /// An integer attribute such as `index`.
    pub fn int(&self, key: KnownAttr) -> Option<i64> {
        match self.get(key)? {
            AttrValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// A boolean attribute; absent means `false`.
    pub fn flag(&self, key: KnownAttr) -> bool {
        matches!(self.get(key), Some(AttrValue::Bool(true)))
    }

    /// A string attribute such as `custom_call_target`, as written.
    pub fn string(&self, key: KnownAttr) -> Option<&str> {
        match self.get(key)? {
            AttrValue::String(s) | AttrValue::Raw(s) => Some(s),
            _ => None,
        }
    }

    /// Sets a known attribute, replacing an existing value or inserting it
    /// at its canonical position.
    pub fn set(&mut self, key: KnownAttr, value: AttrValue) {
        if let Some(v) = self.get_mut(key) {
            *v = value;
            return;
        }
        let at = self
            .0
            .iter()
            .position(|a| matches!(a.key, AttrKey::Known(k) if k > key))
            .unwrap_or(self.0.len());
        self.0.insert(
            at,
            Attr {
                key: AttrKey::Known(key),
                value,
            },
        );
    }

    /// Removes a known attribute, returning its value.
    pub fn remove(&mut self, key: KnownAttr) -> Option<AttrValue> {
        let at = self.0.iter().position(|a| a.key == AttrKey::Known(key))?;
        Some(self.0.remove(at).value)
    }

    /// The computations this instruction calls, in attribute order.
    pub fn called_computations(&self) -> impl Iterator<Item = CompId> + '_ {
        self.0.iter().flat_map(|a| {
            let ids: &[CompId] = match &a.value {
                AttrValue::Computation(c) => std::slice::from_ref(c),
                AttrValue::Computations(cs) => cs,
                _ => &[],
            };
            ids.iter().copied()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction holds its attributes, so one large value makes
    /// them all large: a convolution's `dim_labels` made each 184 bytes.
    #[test]
    fn an_attribute_is_as_small_as_its_common_values() {
        assert!(
            std::mem::size_of::<Attr>() <= 64,
            "{}",
            std::mem::size_of::<Attr>()
        );
    }
}
