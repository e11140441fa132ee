//! The HLO text parser: one computation at a time, and whole modules built
//! from the outline plus one computation parse per span.
//!
//! Architecture invariant: the parser is hand-written over bytes, makes one
//! pass over each computation, allocates only what the IR keeps (names,
//! shapes, attribute values), and never recurses more deeply than the
//! bracket nesting of its input, which is capped at
//! [`crate::lex::MAX_NESTING`].
//!
//! Large modules are parsed on the rayon pool (see [`parse_module_with`]).
//! Computations are independent once the outline has named them all, so
//! they are parsed from where they seem to be while the outline scan runs,
//! and kept once it confirms them. A computation too large for one core is
//! cut into pieces whose instructions other cores read ahead: reading an
//! instruction depends only on where it starts, while giving it an id and
//! resolving its operand names depends on the instructions before it and
//! stays in text order. So the result, errors included, is exactly the
//! sequential one.

// No panicking shortcuts outside tests: the parser reads text users send,
// and a panic must never be its answer. Set per module because Cargo
// cannot add lints to the workspace's for one crate.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod names;
mod parallel;

use std::ops::Range;
use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use shape::{PrimitiveType, Shape};

use crate::diag::{Origin, ParseError, RawError, make_error, source_line};
use crate::lex::{Cursor, describe};
use crate::outline::{ModuleOutline, Span, boolean, outline, shape_index};
use crate::parallelism::{Parallelism, Split};
use crate::print::attr_is_default;
use crate::{
    Attr, AttrKey, AttrValue, Attrs, CompId, Computation, ComputationLayout, ConvDimLabels, InstId,
    Instruction, KnownAttr, Module, Opcode, OperandAlias, PadDim, Payload, SliceDim,
};
use names::InstNames;
use parallel::parse_in_parallel;

/// Maps the name of a called computation to its id. `Sync`, so that the
/// computations of a module can be parsed on several threads.
pub type ResolveComputation<'r> = dyn Fn(&str) -> Option<CompId> + Sync + 'r;

/// How [`parse_module_with`] divides its work. Every choice gives the same
/// module and the same errors; only the speed differs.
#[derive(Clone, Debug, PartialEq, Eq)]
///
/// Whether a text is parsed on the rayon pool at all is the thread's
/// [`Parallelism`](crate::Parallelism) policy's choice
/// ([`Split::ParseText`](crate::Split::ParseText)).
#[derive(Default)]
pub struct ParseOptions {
    /// Testing only: take the parallel path whatever the text length and
    /// the pool, cut computations at exactly these byte offsets of the
    /// module text instead of at offsets the parser picks, and read every
    /// piece ahead before any computation is put together, so that the
    /// check of every cut runs. Offsets anywhere are allowed; where one is
    /// not at the start of an instruction, the parser notices and reads on
    /// sequentially.
    #[doc(hidden)]
    pub forced_splits: Option<Vec<usize>>,
}

/// Parses a whole module. `file_name` only labels errors.
pub fn parse_module(text: &str, file_name: &str) -> Result<Module, ParseError> {
    parse_module_with(text, file_name, &ParseOptions::default())
}

/// Parses a whole module, dividing the work as `options` say. The result
/// is the same as [`parse_module`]'s.
pub fn parse_module_with(
    text: &str,
    file_name: &str,
    options: &ParseOptions,
) -> Result<Module, ParseError> {
    let parallel = options.forced_splits.is_some()
        || Parallelism::splits(Split::ParseText, text.len()).is_some();
    let (outline, parsed) = if parallel {
        parse_in_parallel(text, file_name, options)?
    } else {
        let outline = outline(text, file_name)?;
        let parsed = parse_in_order(text, &outline.spans(), &Resolver::new(outline.names()));
        (outline, parsed)
    };
    let computations = parsed.map_err(|(i, e)| {
        let span = outline
            .computations
            .get(i)
            .map_or(outline.header_span, |c| c.span);
        let mut e = make_error(span.text(text).as_bytes(), e, span.origin(), file_name);
        e.source_line = source_line(text.as_bytes(), e.offset);
        e
    })?;
    let entry = CompId(outline.entry as u32);
    let given = outline.entry_computation_layout.is_some();
    let entry_computation_layout = match outline.entry_computation_layout {
        Some(layout) => layout,
        None => derived_entry_layout(computations.get(outline.entry)),
    };
    Ok(Module {
        name: outline.name,
        entry_computation_layout,
        entry_computation_layout_given: given,
        input_output_alias: outline.input_output_alias,
        is_scheduled: outline.is_scheduled,
        header_attrs: outline.header_attrs,
        debug_tables: outline.debug_tables,
        computations,
        entry,
    })
}

/// A module's outline and, for a text large enough that the thread's
/// [`Parallelism`] policy parses it on the pool ([`Split::ParseText`]),
/// its computations in module order, parsed beside the outline scan as
/// [`parse_module`] parses them (called computations resolved by their
/// position in the module). `None` for a smaller text, and when any
/// computation fails to parse: the caller then parses them one by one
/// with [`parse_computation`], which gives the same computations and
/// places the errors.
///
/// For an incremental database loading a module: it parses each
/// computation on its own later (after an edit, only that one), but its
/// first parse of a large module need not wait for the outline scan.
pub fn outline_and_parse(
    text: &str,
    file_name: &str,
) -> Result<(ModuleOutline, Option<Vec<Computation>>), ParseError> {
    if Parallelism::splits(Split::ParseText, text.len()).is_none() {
        return Ok((outline(text, file_name)?, None));
    }
    let (outline, parsed) = parse_in_parallel(text, file_name, &ParseOptions::default())?;
    Ok((outline, parsed.ok()))
}

/// Parses a module given as bytes, reporting invalid UTF-8 with its
/// position.
pub fn parse_module_bytes(bytes: &[u8], file_name: &str) -> Result<Module, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_module(text, file_name),
        Err(e) => {
            let at = e.valid_up_to();
            let byte = bytes.get(at).copied().unwrap_or(0);
            Err(make_error(
                bytes,
                RawError::new(
                    at,
                    format!("invalid UTF-8: byte 0x{byte:02x} does not start a valid character"),
                ),
                Origin::START,
                file_name,
            ))
        }
    }
}

/// A computation's parse failure: its index and the error, with an offset
/// relative to the computation's text.
type CompError = (usize, RawError);

/// Computation names to ids, by position.
struct Resolver<'a>(FxHashMap<&'a str, CompId>);

impl<'a> Resolver<'a> {
    fn new(names: impl ExactSizeIterator<Item = &'a str>) -> Self {
        let mut ids: FxHashMap<&str, CompId> = FxHashMap::default();
        ids.reserve(names.len());
        for (i, name) in names.enumerate() {
            ids.insert(name, CompId(i as u32));
        }
        Resolver(ids)
    }

    fn resolve(&self, name: &str) -> Option<CompId> {
        self.0.get(name).copied()
    }
}

/// The sequential path: one computation after the other.
fn parse_in_order(
    text: &str,
    spans: &[Range<usize>],
    resolver: &Resolver<'_>,
) -> Result<Vec<Computation>, CompError> {
    let resolve = |name: &str| resolver.resolve(name);
    let mut computations = Vec::with_capacity(spans.len());
    for (i, span) in spans.iter().enumerate() {
        let comp_text = text.get(span.clone()).unwrap_or_default();
        computations.push(CompParser::parse(comp_text, &resolve).map_err(|e| (i, e))?);
    }
    Ok(computations)
}

/// The entry computation layout XLA derives when the header has none: the
/// parameter shapes by number and the root shape, layouts as written.
fn derived_entry_layout(entry: Option<&Computation>) -> ComputationLayout {
    let Some(comp) = entry else {
        return ComputationLayout {
            parameters: Default::default(),
            result: Shape::Tuple(Vec::new()).into(),
        };
    };
    let parameters = comp
        .parameters()
        .into_iter()
        .map(|id| comp.inst(id).shape.clone())
        .collect::<Vec<_>>()
        .into();
    let result = comp
        .root()
        .map_or(Shape::Tuple(Vec::new()), |r| comp.inst(r).shape.clone())
        .into();
    ComputationLayout { parameters, result }
}

/// Parses one computation. `text` is the computation's own text, as an
/// outline span gives it (`span.text(module_text)`); `span` places it in
/// its file so that errors carry absolute lines and columns. `resolve`
/// maps called-computation names to ids.
///
/// A large computation is parsed on the rayon pool, as [`parse_module`]
/// parses one, when the thread's [`Parallelism`] policy splits its
/// [`Split::ParseText`]; the result is the same.
pub fn parse_computation(
    text: &str,
    span: &Span,
    resolve: &ResolveComputation<'_>,
    file_name: &str,
) -> Result<Computation, ParseError> {
    parse_computation_with(text, span, resolve, file_name, &ParseOptions::default())
}

/// Parses one computation, dividing the work as `options` say (forced
/// cuts are offsets in `text`). The result is the same as
/// [`parse_computation`]'s.
pub fn parse_computation_with(
    text: &str,
    span: &Span,
    resolve: &ResolveComputation<'_>,
    file_name: &str,
    options: &ParseOptions,
) -> Result<Computation, ParseError> {
    let parallel = options.forced_splits.is_some()
        || Parallelism::splits(Split::ParseText, text.len()).is_some();
    let parsed = if parallel {
        parallel::parse_one_in_parallel(text, resolve, options)
    } else {
        CompParser::parse(text, resolve)
    };
    parsed.map_err(|e| make_error(text.as_bytes(), e, span.origin(), file_name))
}

// ---------------------------------------------------------------------------
// Shared pieces.

/// Parses one shape at the cursor: the common plain array form
/// (`f32[2,3]{1,0}`) on a fast path, everything else with the `shape`
/// crate after checking its nesting depth. Element counts and buffer sizes
/// that overflow 64 bits are rejected (see [`size_problem`]).
pub(crate) fn parse_shape(c: &mut Cursor<'_>) -> Result<Shape, RawError> {
    if let Some((shape, end)) = plain_array_shape(c.bytes, c.pos) {
        if let Some(problem) = size_problem(&shape) {
            return Err(RawError::new(
                c.pos,
                format!("shape {} {problem}", c.slice(c.pos, end)),
            ));
        }
        c.pos = end;
        return Ok(shape);
    }
    c.check_shape_nesting()?;
    let start = c.pos;
    match shape::parse_shape_at(c.bytes, c.pos) {
        Ok((shape, end)) => {
            c.pos = end;
            if let Some(problem) = size_problem(&shape) {
                return Err(RawError::new(
                    start,
                    format!("shape {} {problem}", c.slice(start, end)),
                ));
            }
            Ok(shape)
        }
        Err(e) => Err(RawError::new(e.offset, e.message)),
    }
}

fn element_type_table() -> &'static FxHashMap<&'static [u8], PrimitiveType> {
    static TABLE: OnceLock<FxHashMap<&'static [u8], PrimitiveType>> = OnceLock::new();
    TABLE.get_or_init(|| {
        PrimitiveType::all()
            .filter(|t| t.is_array_type())
            .map(|t| (t.name().as_bytes(), t))
            .collect()
    })
}

/// The fast path of [`parse_shape`]: `type[d,...]` with static sizes and an
/// optional plain `{m2m}` layout, written without spaces or comments.
/// Returns `None` for anything else (including every error), which the
/// `shape` crate then parses, so both paths give identical results.
pub(crate) fn plain_array_shape(bytes: &[u8], pos: usize) -> Option<(Shape, usize)> {
    let mut i = pos;
    while bytes
        .get(i)
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        i += 1;
    }
    let element_type = *element_type_table().get(bytes.get(pos..i)?)?;
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    i += 1;
    let mut dims = shape::Dims::new();
    if bytes.get(i) == Some(&b']') {
        i += 1;
    } else {
        loop {
            let (d, next) = small_uint(bytes, i)?;
            dims.push(d);
            if dims.len() > shape::MAX_RANK {
                return None;
            }
            i = next;
            match bytes.get(i)? {
                b',' => i += 1,
                b']' => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    let mut layout = None;
    match bytes.get(i) {
        Some(b'{') if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
            let mut m2m = shape::DimVec::new();
            let mut j = i + 1;
            loop {
                let (d, next) = small_uint(bytes, j)?;
                if d >= shape::MAX_RANK as i64 {
                    return None;
                }
                m2m.push(d as usize);
                j = next;
                match bytes.get(j)? {
                    b',' => j += 1,
                    b'}' => {
                        j += 1;
                        break;
                    }
                    _ => return None,
                }
            }
            if m2m.len() != dims.len() {
                return None;
            }
            layout = Some(shape::SharedLayout::plain(&m2m));
            i = j;
        }
        Some(b'{') => {
            // `{:` starts a layout with properties; `{` and anything else is
            // not a layout. Both are the `shape` crate's business.
            return None;
        }
        Some(b' ' | b'\t' | b'\r' | b'\n' | b'/') => {
            // A layout may still follow after trivia: `f32[2] {0}`.
            let mut j = i;
            while matches!(bytes.get(j), Some(b' ' | b'\t' | b'\r' | b'\n')) {
                j += 1;
            }
            if matches!(bytes.get(j), Some(b'{' | b'/')) {
                return None;
            }
        }
        _ => {}
    }
    Some((
        Shape::Array(shape::ArrayShape {
            element_type,
            dims,
            dynamic: 0,
            layout,
        }),
        i,
    ))
}

/// Decimal digits at `i` as a non-negative integer with at most 18 digits.
#[inline]
fn small_uint(bytes: &[u8], mut i: usize) -> Option<(i64, usize)> {
    let start = i;
    let mut v: i64 = 0;
    while let Some(&b @ b'0'..=b'9') = bytes.get(i) {
        if i - start == 18 {
            return None;
        }
        v = v * 10 + i64::from(b - b'0');
        i += 1;
    }
    (i > start).then_some((v, i))
}

/// Why a shape cannot be stored, if it cannot: an element count over
/// `i64::MAX`, or a buffer (padding and tiles included) whose size in
/// bytes overflows 64 bits. Every size Tessera computes from a shape the
/// parser accepted then fits. Nesting is bounded by the parser's depth
/// limit.
fn size_problem(shape: &Shape) -> Option<String> {
    match shape {
        Shape::Array(a) => array_size_problem(a),
        Shape::Tuple(elements) => elements.iter().find_map(size_problem),
        Shape::Buffer(inner) => size_problem(inner),
        Shape::Token | Shape::Opaque => None,
    }
}

/// [`size_problem`] for one array, also what the verifier asks of every
/// array a module holds.
pub(crate) fn array_size_problem(a: &shape::ArrayShape) -> Option<String> {
    let elements = a
        .dims
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1i64, |acc, &d| acc.checked_mul(d));
    let Some(elements) = elements else {
        return Some("has more elements than fit in a 64-bit integer".to_string());
    };
    // A plain layout of fewer than 2^56 elements of at most 64 bits fits:
    // only large or tiled (padded) shapes need the algebra.
    let plain = a
        .layout
        .as_ref()
        .is_none_or(|l| l.tiles.is_empty() && l.padded_dimensions.is_none());
    if plain && elements < 1 << 56 {
        return None;
    }
    match shape::storage_size(a) {
        Err(shape::AlgebraError::Overflow { what }) => Some(format!(
            "needs more storage than a 64-bit size can count: {what} overflows 64 bits"
        )),
        _ => None,
    }
}

fn opcode_table() -> &'static FxHashMap<&'static str, Opcode> {
    static TABLE: OnceLock<FxHashMap<&'static str, Opcode>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: FxHashMap<&'static str, Opcode> = Opcode::all().map(|o| (o.name(), o)).collect();
        t.insert("optimization-barrier", Opcode::OptimizationBarrier);
        t
    })
}

fn attr_table() -> &'static FxHashMap<&'static str, KnownAttr> {
    static TABLE: OnceLock<FxHashMap<&'static str, KnownAttr>> = OnceLock::new();
    TABLE.get_or_init(|| KnownAttr::all().map(|k| (k.name(), k)).collect())
}

/// How a known attribute's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ValueKind {
    Ints,
    Int,
    Bool,
    Computation,
    Computations,
    Slice,
    Padding,
    Shapes,
    Aliasing,
    DimLabels,
    String,
    ControlPredecessors,
    Raw,
}

fn value_kind(k: KnownAttr) -> ValueKind {
    use KnownAttr::*;
    match k {
        Dimensions
        | DynamicSliceSizes
        | LhsBatchDims
        | LhsContractingDims
        | RhsBatchDims
        | RhsContractingDims
        | OffsetDims
        | CollapsedSliceDims
        | StartIndexMap
        | OperandBatchingDims
        | StartIndicesBatchingDims
        | SliceSizes
        | UpdateWindowDims
        | InsertedWindowDims
        | ScatterDimsToOperandDims
        | InputBatchingDims
        | ScatterIndicesBatchingDims
        | FftLength => ValueKind::Ints,
        Index | IotaDimension | IndexVectorDim | FeatureGroupCount | BatchGroupCount
        | ChannelId | SplitDimension | ExponentBits | MantissaBits | K => ValueKind::Int,
        IndicesAreSorted
        | UniqueIndices
        | IsStable
        | ConstrainLayout
        | UseGlobalDeviceIds
        | CustomCallHasSideEffect
        | IsHostTransfer
        | LeftSide
        | Lower
        | UnitDiagonal
        | Largest => ValueKind::Bool,
        Calls | ToApply | Condition | Body | TrueComputation | FalseComputation | Select
        | Scatter => ValueKind::Computation,
        BranchComputations | CalledComputations => ValueKind::Computations,
        KnownAttr::Slice => ValueKind::Slice,
        Padding => ValueKind::Padding,
        OperandLayoutConstraints => ValueKind::Shapes,
        OutputToOperandAliasing => ValueKind::Aliasing,
        DimLabels => ValueKind::DimLabels,
        CustomCallTarget => ValueKind::String,
        ControlPredecessors => ValueKind::ControlPredecessors,
        _ => ValueKind::Raw,
    }
}

/// The canonical print group of an attribute, from XLA's
/// `HloInstruction::PrintWithCanonicalNameMap` and `PrintExtraAttributes`:
/// opcode-specific attributes (0), called computations (1), `sharding` (2),
/// `frontend_attributes` (3), `control-predecessors` (4), `statistics` (5),
/// `result_accuracy` (6), `origin` (7), `metadata` (8), `backend_config` (9).
/// Within group 0 the text order is kept: XLA's order there depends on the
/// opcode.
pub fn attr_group(key: &AttrKey) -> u8 {
    match key {
        AttrKey::Known(k) => {
            use KnownAttr::*;
            match k {
                Calls | ToApply | Condition | Body | TrueComputation | FalseComputation
                | BranchComputations | Select | Scatter | CalledComputations => 1,
                Sharding => 2,
                FrontendAttributes => 3,
                ControlPredecessors => 4,
                Metadata => 8,
                BackendConfig => 9,
                _ => 0,
            }
        }
        AttrKey::Other(name) => match &**name {
            "is_composite" => 1,
            "statistics" => 5,
            "result_accuracy" => 6,
            "origin" => 7,
            _ => 0,
        },
    }
}

// ---------------------------------------------------------------------------
// Computations and instructions.

/// An operand or control predecessor named before its definition.
struct Pending<'a> {
    user: InstId,
    names: SmallVec<[(&'a str, usize); 4]>,
}

/// An instruction as read from the text, before it is added to its
/// computation: its operands and control predecessors are still names
/// (with their offsets, for errors).
struct ParsedInstruction<'a> {
    inst: Instruction,
    name: &'a str,
    name_pos: usize,
    /// The offset of `ROOT`, when the instruction is marked so.
    root_pos: Option<usize>,
    operands: SmallVec<[(&'a str, usize); 4]>,
    control: SmallVec<[(&'a str, usize); 4]>,
}

/// The part of the computation parser that reads an instruction: what it
/// does depends only on the text and the offset it starts at, never on
/// the instructions before, so pieces of a body can be read in parallel.
struct InstructionReader<'a, 'r> {
    c: Cursor<'a>,
    resolve: &'r ResolveComputation<'r>,
    attr_buf: Vec<Attr>,
}

/// About how many instructions `range` of `text` holds: its lines, since
/// XLA prints one instruction per line. For sizing tables ahead.
fn lines_in(text: &str, range: Range<usize>) -> usize {
    let end = range.end.min(text.len());
    let bytes = text
        .as_bytes()
        .get(range.start.min(end)..end)
        .unwrap_or_default();
    memchr::memchr_iter(b'\n', bytes).count() + 1
}

/// The computation parser: an [`InstructionReader`] plus the registration
/// of each instruction read (ids, names, operands, the root).
struct CompParser<'a, 'r> {
    r: InstructionReader<'a, 'r>,
    names: InstNames<'a>,
    comp: Computation,
    pending_operands: Vec<Pending<'a>>,
    pending_control: Vec<Pending<'a>>,
    root: Option<(InstId, &'a str)>,
    last: Option<InstId>,
}

/// A computation's result shape as its signature gives it, and where.
type Signature = Option<(Shape, usize)>;

impl<'a, 'r> CompParser<'a, 'r> {
    /// A parser whose first name table has room for the instructions
    /// before byte `first_stop` when the rest get tables of their own (see
    /// [`names::Stretch::worth_it`]), else for all of them.
    fn new(text: &'a str, resolve: &'r ResolveComputation<'r>, first_stop: usize) -> Self {
        // XLA prints one instruction per line: the line count bounds the
        // instruction count, so that neither the graph nor the table of a
        // computation that keeps one grows by moving.
        let lines = lines_in(text, 0..text.len());
        let names = if first_stop < text.len() && names::Stretch::worth_it(text.len()) {
            lines_in(text, 0..first_stop)
        } else {
            lines
        };
        CompParser {
            r: InstructionReader::new(text, resolve),
            names: InstNames::with_capacity(names),
            comp: Computation::with_capacity("", lines),
            pending_operands: Vec::new(),
            pending_control: Vec::new(),
            root: None,
            last: None,
        }
    }

    /// Parses a computation's text; errors are relative to it.
    fn parse(text: &'a str, resolve: &'r ResolveComputation<'r>) -> Result<Computation, RawError> {
        let mut p = CompParser::new(text, resolve, usize::MAX);
        let signature = p.open()?;
        p.body(usize::MAX)?;
        p.close(signature)
    }

    /// The name, the signature and the `{` that opens the body.
    fn open(&mut self) -> Result<Signature, RawError> {
        let c = &mut self.r.c;
        c.skip_trivia()?;
        c.eat_word(b"ENTRY");
        c.skip_trivia()?;
        let name = c.expect_name("a computation name or 'ENTRY'")?;
        self.comp.name = name.to_string();
        let signature = self.signature()?;
        let c = &mut self.r.c;
        c.skip_trivia()?;
        if !c.eat(b'{') {
            return Err(c.error(format!(
                "expected '{{' to start the body of computation %{name}, found {}",
                describe(c.peek())
            )));
        }
        Ok(signature)
    }

    /// Parses instructions up to the closing `}` of the body, or up to the
    /// first instruction boundary at or after byte `stop`. Returns true at
    /// the `}`.
    fn body(&mut self, stop: usize) -> Result<bool, RawError> {
        loop {
            self.r.c.skip_trivia()?;
            if self.r.c.pos >= stop {
                return Ok(false);
            }
            match self.r.c.peek() {
                Some(b'}') => return Ok(true),
                None => {
                    return Err(self.r.c.error(format!(
                        "expected '}}' to close computation %{}",
                        self.comp.name
                    )));
                }
                _ => {
                    let inst = self.r.instruction()?;
                    self.register(inst, None)?;
                }
            }
        }
    }

    /// From the `}` that closes the body: the execution thread, the end of
    /// the text, operands named before their definition and the root.
    fn close(mut self, signature: Signature) -> Result<Computation, RawError> {
        let close = self.r.c.pos;
        self.r.c.pos += 1;
        self.execution_thread()?;
        self.r.c.skip_trivia()?;
        if !self.r.c.at_end() {
            return Err(self.r.c.error(format!(
                "unexpected {} after the end of computation %{}",
                describe(self.r.c.peek()),
                self.comp.name
            )));
        }
        let Some(last) = self.last else {
            return Err(RawError::new(
                close,
                format!("computation %{} has no instructions", self.comp.name),
            ));
        };
        self.resolve_pending()?;
        let root = self.root.map_or(last, |(id, _)| id);
        self.comp
            .set_root(root)
            .map_err(|e| RawError::new(close, e.to_string()))?;
        if let Some((shape, at)) = signature {
            let root_shape = &self.comp.inst(root).shape;
            if !shape.same_logical_shape(root_shape) {
                return Err(RawError::new(
                    at,
                    format!(
                        "the result shape {} of computation %{} does not match the shape {} of its root %{}",
                        shape.display_without_layout(),
                        self.comp.name,
                        root_shape.display_without_layout(),
                        self.comp.inst(root).name
                    ),
                ));
            }
        }
        Ok(self.comp)
    }

    /// `(p: shape, ...) -> shape`, when present. Returns the result shape
    /// and its offset.
    fn signature(&mut self) -> Result<Option<(Shape, usize)>, RawError> {
        let c = &mut self.r.c;
        c.skip_trivia()?;
        if !c.eat(b'(') {
            return Ok(None);
        }
        c.list_until(b')', "the parameter list", |c| {
            c.skip_trivia()?;
            c.expect_name("a parameter name")?;
            c.expect(b':', "':' after the parameter name")?;
            c.skip_trivia()?;
            parse_shape(c)?;
            Ok(())
        })?;
        c.arrow("after the parameter list")?;
        let at = c.pos;
        let shape = parse_shape(c)?;
        Ok(Some((shape, at)))
    }

    fn execution_thread(&mut self) -> Result<(), RawError> {
        let c = &mut self.r.c;
        if !c.eat_comma()? {
            return Ok(());
        }
        let thread = c.execution_thread("")?;
        // XLA prints the thread only off the main thread.
        if thread != "main" {
            self.comp.execution_thread = Some(thread.to_string());
        }
        Ok(())
    }

    /// Adds an instruction just read: it gets its id, its name is recorded,
    /// and operands defined earlier are connected now (the rest wait for
    /// the end of the body).
    // Inlined, like `InstructionReader::instruction`: the record is about
    // 600 bytes, and as a call it was copied several times on its way from
    // the reader into the graph (3.3 M more instructions per parse of the
    // transformer, under callgrind).
    ///
    /// An instruction read ahead comes with `read`: the id of its piece's
    /// first instruction and where the reader found each operand in the
    /// piece (see [`names::Stretch`]); its name is the piece's, added with
    /// the piece.
    #[inline(always)]
    fn register(
        &mut self,
        parsed: ParsedInstruction<'a>,
        read: Option<(InstId, &[u32])>,
    ) -> Result<(), RawError> {
        let ParsedInstruction {
            inst,
            name,
            name_pos,
            root_pos,
            operands,
            control,
        } = parsed;
        let mut ids: SmallVec<[InstId; 4]> = SmallVec::with_capacity(operands.len());
        let mut all_known = true;
        for (k, &(op, _)) in operands.iter().enumerate() {
            let local = read.and_then(|(base, at)| {
                let at = *at.get(k)?;
                (at != names::NOT_LOCAL).then(|| InstId::new(base.index() + at as usize))
            });
            match local.or_else(|| self.names.find(op)) {
                Some(id) => ids.push(id),
                None => {
                    all_known = false;
                    break;
                }
            }
        }
        let id = self
            .comp
            .add(inst, if all_known { &ids } else { &[] })
            .map_err(|e| RawError::new(name_pos, e.to_string()))?;
        if read.is_none() && !self.names.define(name, id) {
            return Err(RawError::new(
                name_pos,
                format!("duplicate instruction name %{name}"),
            ));
        }
        if !all_known {
            self.pending_operands.push(Pending {
                user: id,
                names: operands,
            });
        }
        if !control.is_empty() {
            self.pending_control.push(Pending {
                user: id,
                names: control,
            });
        }
        if let Some(root_pos) = root_pos {
            if let Some((_, first)) = self.root {
                return Err(RawError::new(
                    root_pos,
                    format!(
                        "a second ROOT instruction %{name} in computation %{}: %{first} is already the root",
                        self.comp.name
                    ),
                ));
            }
            self.root = Some((id, name));
        }
        self.last = Some(id);
        Ok(())
    }

    fn resolve_pending(&mut self) -> Result<(), RawError> {
        for p in std::mem::take(&mut self.pending_operands) {
            let mut ids: SmallVec<[InstId; 4]> = SmallVec::with_capacity(p.names.len());
            for (name, at) in p.names {
                let Some(id) = self.names.find(name) else {
                    return Err(RawError::new(at, format!("unknown operand %{name}")));
                };
                ids.push(id);
            }
            self.comp
                .set_operands(p.user, &ids)
                .map_err(|e| RawError::new(0, e.to_string()))?;
        }
        for p in std::mem::take(&mut self.pending_control) {
            for (name, at) in p.names {
                let Some(id) = self.names.find(name) else {
                    return Err(RawError::new(
                        at,
                        format!("unknown control predecessor %{name}"),
                    ));
                };
                self.comp
                    .add_control_dependency(id, p.user)
                    .map_err(|e| RawError::new(at, e.to_string()))?;
            }
        }
        Ok(())
    }
}

impl<'a, 'r> InstructionReader<'a, 'r> {
    fn new(text: &'a str, resolve: &'r ResolveComputation<'r>) -> Self {
        InstructionReader {
            c: Cursor::new(text),
            resolve,
            attr_buf: Vec::new(),
        }
    }

    /// One instruction, from its first byte (`ROOT` or its name) to the end
    /// of its last attribute.
    // Inlined into its two callers; see `CompParser::register`.
    #[inline(always)]
    fn instruction(&mut self) -> Result<ParsedInstruction<'a>, RawError> {
        let c = &mut self.c;
        let root_pos = c.pos;
        let is_root = c.eat_word(b"ROOT");
        if is_root {
            c.skip_trivia()?;
        }
        let name_pos = c.pos;
        let name = c.expect_name("an instruction name")?;
        let end = c.pos;
        c.equals_after(end, format_args!("instruction name %{name}"))?;
        let shape = parse_shape(c)?;
        let end = c.pos;
        c.skip_trivia()?;
        let Some(op_text) = c.ident() else {
            return Err(c.error_after(
                end,
                format!(
                    "expected an opcode after the shape of %{name}, found {}",
                    describe(c.peek())
                ),
            ));
        };
        let opcode = opcode_table()
            .get(op_text)
            .copied()
            .unwrap_or(Opcode::Unknown);
        let end = c.pos;
        c.skip_trivia()?;
        if !c.eat(b'(') {
            return Err(c.error_after(
                end,
                format!(
                    "expected '(' after opcode '{op_text}', found {}",
                    describe(c.peek())
                ),
            ));
        }
        let mut payload = match opcode {
            Opcode::Unknown => Payload::UnknownOpcode(op_text.into()),
            _ => Payload::None,
        };
        let mut operands: SmallVec<[(&'a str, usize); 4]> = SmallVec::new();
        match opcode {
            Opcode::Parameter => {
                c.skip_trivia()?;
                let at = c.pos;
                let n = c.int("a parameter number")?;
                let n = u32::try_from(n).map_err(|_| {
                    RawError::new(at, format!("parameter number {n} is out of range"))
                })?;
                payload = Payload::Parameter(n);
                c.expect(b')', "')' after the parameter number")?;
            }
            Opcode::Constant => payload = Payload::Constant(literal(c)?.into()),
            _ => operand_list(c, &mut operands)?,
        }
        // Attributes gather in a reused buffer and move into an exactly
        // sized vector: most instructions have one to three.
        let mut attrs = std::mem::take(&mut self.attr_buf);
        let mut control: SmallVec<[(&'a str, usize); 4]> = SmallVec::new();
        loop {
            let save = self.c.pos;
            self.c.skip_trivia()?;
            if !self.c.eat(b',') {
                self.c.pos = save;
                break;
            }
            self.attribute(&mut attrs, &mut control)?;
        }
        if !attrs.is_sorted_by_key(|a| attr_group(&a.key)) {
            attrs.sort_by_key(|a| attr_group(&a.key));
        }
        let mut exact: Vec<Attr> = Vec::with_capacity(attrs.len());
        exact.append(&mut attrs);
        self.attr_buf = attrs;

        let mut inst = Instruction::new(name, opcode, shape);
        inst.payload = payload;
        inst.attrs = Attrs(exact);
        Ok(ParsedInstruction {
            inst,
            name,
            name_pos,
            root_pos: is_root.then_some(root_pos),
            operands,
            control,
        })
    }
    /// One `name=value` after a `,`.
    fn attribute(
        &mut self,
        attrs: &mut Vec<Attr>,
        control: &mut SmallVec<[(&'a str, usize); 4]>,
    ) -> Result<(), RawError> {
        let (c, resolve) = (&mut self.c, self.resolve);
        c.skip_trivia()?;
        let at = c.pos;
        let Some(name) = c.ident() else {
            return Err(c.error(format!(
                "expected an attribute name after ',', found {}",
                describe(c.peek())
            )));
        };
        let end = c.pos;
        c.equals_after(end, format_args!("attribute name '{name}'"))?;
        let known = attr_table().get(name).copied();
        let duplicate = match known {
            Some(KnownAttr::ControlPredecessors) => !control.is_empty(),
            Some(k) => attrs.iter().any(|a| a.key == AttrKey::Known(k)),
            None => attrs
                .iter()
                .any(|a| matches!(&a.key, AttrKey::Other(n) if &**n == name)),
        };
        if duplicate {
            return Err(RawError::new(at, format!("duplicate attribute '{name}'")));
        }
        let kind = known.map_or(ValueKind::Raw, value_kind);
        let value = match kind {
            ValueKind::Ints => AttrValue::Ints(ints(c, name)?),
            ValueKind::Int => AttrValue::Int(c.int(format_args!("an integer value for '{name}'"))?),
            ValueKind::Bool => AttrValue::Bool(boolean(c, name)?),
            ValueKind::Computation => AttrValue::Computation(computation_ref(c, resolve, name)?),
            ValueKind::Computations => {
                let mut ids = Vec::new();
                c.expect(
                    b'{',
                    format_args!("'{{' to start the computations of '{name}'"),
                )?;
                c.list_until(b'}', format_args!("'{name}'"), |c| {
                    c.skip_trivia()?;
                    ids.push(computation_ref(c, resolve, name)?);
                    Ok(())
                })?;
                AttrValue::Computations(ids)
            }
            ValueKind::Slice => AttrValue::Slice(slice(c)?),
            ValueKind::Padding => AttrValue::Padding(padding(c)?),
            ValueKind::Shapes => AttrValue::Shapes(shapes(c, name)?),
            ValueKind::Aliasing => AttrValue::Aliasing(aliasing(c)?),
            ValueKind::DimLabels => AttrValue::DimLabels(Box::new(dim_labels(c)?)),
            ValueKind::String => AttrValue::String(c.string()?.into()),
            ValueKind::ControlPredecessors => {
                // Control predecessors become graph edges, not attributes.
                name_list(c, control)?;
                return Ok(());
            }
            ValueKind::Raw => AttrValue::Raw(c.raw_value(name)?.into()),
        };
        let key = known.map_or_else(|| AttrKey::Other(name.into()), AttrKey::Known);
        // XLA does not print default values; dropping them keeps a parsed
        // module equal to its printed reparse.
        if !attr_is_default(&key, &value) {
            attrs.push(Attr { key, value });
        }
        Ok(())
    }
}

/// The id of the computation named at the cursor, for attribute `attr`.
fn computation_ref(
    c: &mut Cursor<'_>,
    resolve: &ResolveComputation<'_>,
    attr: &str,
) -> Result<CompId, RawError> {
    let at = c.pos;
    let name = c.expect_name(format_args!("a computation name for '{attr}'"))?;
    resolve(name).ok_or_else(|| RawError::new(at, format!("computation %{name} is not defined")))
}

/// The operands between the parentheses: names, each optionally preceded
/// by its shape (which is dropped).
fn operand_list<'a>(
    c: &mut Cursor<'a>,
    operands: &mut SmallVec<[(&'a str, usize); 4]>,
) -> Result<(), RawError> {
    c.skip_trivia()?;
    if c.eat(b')') {
        return Ok(());
    }
    loop {
        c.skip_trivia()?;
        if inline_shape_follows(c) {
            parse_shape(c)?;
            c.skip_trivia()?;
        }
        let at = c.pos;
        let name = c.expect_name("an operand name")?;
        operands.push((name, at));
        c.skip_trivia()?;
        if c.eat(b')') {
            return Ok(());
        }
        if !c.eat(b',') {
            return Err(c.error(format!(
                "expected ',' or ')' after operand %{name}, found {}",
                describe(c.peek())
            )));
        }
    }
}

/// True when an operand starts with its shape: a tuple `(` or an element
/// type followed by `[`.
fn inline_shape_follows(c: &Cursor<'_>) -> bool {
    match c.peek() {
        Some(b'(') => true,
        Some(b) if b.is_ascii_alphabetic() => {
            let rest = c.bytes.get(c.pos..).unwrap_or_default();
            let n = rest
                .iter()
                .position(|&b| !b.is_ascii_alphanumeric())
                .unwrap_or(rest.len());
            rest.get(n) == Some(&b'[')
        }
        _ => false,
    }
}

/// `{%a, %b}` for control predecessors.
fn name_list<'a>(
    c: &mut Cursor<'a>,
    out: &mut SmallVec<[(&'a str, usize); 4]>,
) -> Result<(), RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start control-predecessors, found {}",
            describe(c.peek())
        )));
    }
    c.list_until(b'}', "control-predecessors", |c| {
        c.skip_trivia()?;
        let at = c.pos;
        let name = c.expect_name("an instruction name")?;
        out.push((name, at));
        Ok(())
    })
}

/// A constant's literal: everything up to the matching `)`, kept verbatim
/// (without surrounding whitespace).
fn literal<'a>(c: &mut Cursor<'a>) -> Result<&'a str, RawError> {
    let open = c.pos.saturating_sub(1);
    let start = c.pos;
    let mut depth = 0usize;
    loop {
        match c.peek() {
            None => {
                return Err(RawError::new(
                    open,
                    "expected ')' to close this constant's literal",
                ));
            }
            Some(b'"' | b'\'') => {
                c.string()?;
            }
            Some(b'(' | b'{' | b'[') => {
                depth += 1;
                if depth > crate::lex::MAX_NESTING {
                    return Err(c.error(format!(
                        "nesting is deeper than {} levels",
                        crate::lex::MAX_NESTING
                    )));
                }
                c.pos += 1;
            }
            Some(b')') if depth == 0 => {
                let text = c
                    .slice(start, c.pos)
                    .trim_matches(|ch: char| ch.is_ascii_whitespace());
                c.pos += 1;
                return Ok(text);
            }
            Some(b')' | b'}' | b']') => {
                if depth == 0 {
                    return Err(c.error(format!(
                        "unbalanced {} in a constant's literal",
                        describe(c.peek())
                    )));
                }
                depth -= 1;
                c.pos += 1;
            }
            Some(_) => c.pos += 1,
        }
    }
}

/// `{1,0}`.
fn ints(c: &mut Cursor<'_>, attr: &str) -> Result<SmallVec<[i64; 4]>, RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start the list of '{attr}', found {}",
            describe(c.peek())
        )));
    }
    let mut v = SmallVec::new();
    c.list_until(b'}', format_args!("'{attr}'"), |c| {
        c.skip_trivia()?;
        v.push(c.int(format_args!("an integer in '{attr}'"))?);
        Ok(())
    })?;
    Ok(v)
}

/// `{[0:3], [0:4:2]}`.
fn slice(c: &mut Cursor<'_>) -> Result<Vec<SliceDim>, RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start 'slice', found {}",
            describe(c.peek())
        )));
    }
    let mut dims = Vec::new();
    c.list_until(b'}', "'slice'", |c| {
        c.expect(b'[', "'[' to start a slice dimension such as [0:4]")?;
        c.skip_trivia()?;
        let start = c.int("a slice start")?;
        c.expect(b':', "':' after the slice start")?;
        c.skip_trivia()?;
        let limit = c.int("a slice limit")?;
        c.skip_trivia()?;
        let stride = if c.eat(b':') {
            c.skip_trivia()?;
            c.int("a slice stride")?
        } else {
            1
        };
        c.expect(b']', "']' to close a slice dimension")?;
        dims.push(SliceDim {
            start,
            limit,
            stride,
        });
        Ok(())
    })?;
    Ok(dims)
}

/// `0_1x2_3_1`: low_high[_interior] per dimension, joined by `x`.
fn padding(c: &mut Cursor<'_>) -> Result<Vec<PadDim>, RawError> {
    let mut dims = Vec::new();
    if matches!(
        c.peek(),
        None | Some(b',' | b' ' | b'\t' | b'\r' | b'\n' | b'}')
    ) {
        return Ok(dims);
    }
    loop {
        let low = c.int("a low padding")?;
        if !c.eat(b'_') {
            return Err(c.error(format!(
                "expected '_' between low and high padding, found {}",
                describe(c.peek())
            )));
        }
        let high = c.int("a high padding")?;
        let interior = if c.eat(b'_') {
            c.int("an interior padding")?
        } else {
            0
        };
        dims.push(PadDim {
            low,
            high,
            interior,
        });
        if !c.eat(b'x') {
            break;
        }
    }
    if c.peek()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(c.error(format!(
            "expected 'x' or the end of 'padding', found {}",
            describe(c.peek())
        )));
    }
    Ok(dims)
}

/// `{shape, shape}`.
fn shapes(c: &mut Cursor<'_>, attr: &str) -> Result<Vec<Shape>, RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start '{attr}', found {}",
            describe(c.peek())
        )));
    }
    let mut v = Vec::new();
    c.list_until(b'}', format_args!("'{attr}'"), |c| {
        c.skip_trivia()?;
        v.push(parse_shape(c)?);
        Ok(())
    })?;
    Ok(v)
}

/// `{{0}: (1, {}), ...}`.
fn aliasing(c: &mut Cursor<'_>) -> Result<Vec<OperandAlias>, RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start 'output_to_operand_aliasing', found {}",
            describe(c.peek())
        )));
    }
    let mut v = Vec::new();
    c.list_until(b'}', "'output_to_operand_aliasing'", |c| {
        let output_index = shape_index(c, "an output tuple index")?;
        c.expect(b':', "':' after the output tuple index")?;
        c.expect(b'(', "'(' to start an operand alias")?;
        c.skip_trivia()?;
        let operand = c.int("an operand number")?;
        c.expect(b',', "',' after the operand number")?;
        let operand_index = shape_index(c, "an operand tuple index")?;
        c.expect(b')', "')' to close an operand alias")?;
        v.push(OperandAlias {
            output_index,
            operand,
            operand_index,
        });
        Ok(())
    })?;
    Ok(v)
}

/// `b01f_01io->b01f`.
fn dim_labels(c: &mut Cursor<'_>) -> Result<ConvDimLabels, RawError> {
    let start = c.pos;
    while c
        .peek()
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'>' | b'?'))
    {
        c.pos += 1;
    }
    let text = c.slice(start, c.pos);
    conv_dim_labels(text)
        .map_err(|why| RawError::new(start, format!("invalid dim_labels '{text}': {why}")))
}

/// Resolves convolution dimension labels into dimension numbers.
pub(crate) fn conv_dim_labels(text: &str) -> Result<ConvDimLabels, String> {
    let (lhs, rest) = text.split_once('_').ok_or("expected lhs_rhs->out")?;
    let (rhs, out) = rest
        .split_once("->")
        .ok_or("expected '->' before the output labels")?;
    struct Part {
        a: i64,
        b: i64,
        spatial: SmallVec<[i64; 3]>,
    }
    fn part(labels: &str, a: u8, b: u8, what: &str) -> Result<Part, String> {
        let mut pa = None;
        let mut pb = None;
        let mut spatial: SmallVec<[Option<i64>; 3]> = SmallVec::new();
        let digits = labels.bytes().filter(u8::is_ascii_digit).count();
        spatial.resize(digits, None);
        for (i, ch) in labels.bytes().enumerate() {
            let i = i as i64;
            let slot = if ch == a {
                &mut pa
            } else if ch == b {
                &mut pb
            } else if ch.is_ascii_digit() {
                match spatial.get_mut(usize::from(ch - b'0')) {
                    Some(s) => s,
                    None => {
                        return Err(format!(
                            "spatial dimension {} in the {what} labels is out of range",
                            ch as char
                        ));
                    }
                }
            } else {
                return Err(format!("unexpected '{}' in the {what} labels", ch as char));
            };
            if slot.replace(i).is_some() {
                return Err(format!(
                    "'{}' appears twice in the {what} labels",
                    ch as char
                ));
            }
        }
        let (Some(a), Some(b)) = (pa, pb) else {
            return Err(format!(
                "the {what} labels need one '{}' and one '{}'",
                a as char, b as char
            ));
        };
        let spatial = spatial
            .into_iter()
            .collect::<Option<SmallVec<[i64; 3]>>>()
            .ok_or("missing spatial dimension")?;
        Ok(Part { a, b, spatial })
    }
    let input = part(lhs, b'b', b'f', "input")?;
    let kernel = part(rhs, b'i', b'o', "kernel")?;
    let output = part(out, b'b', b'f', "output")?;
    if input.spatial.len() != kernel.spatial.len() || input.spatial.len() != output.spatial.len() {
        return Err("the three parts have different numbers of spatial dimensions".into());
    }
    Ok(ConvDimLabels {
        input_batch: input.a,
        input_feature: input.b,
        input_spatial: input.spatial,
        kernel_input_feature: kernel.a,
        kernel_output_feature: kernel.b,
        kernel_spatial: kernel.spatial,
        output_batch: output.a,
        output_feature: output.b,
        output_spatial: output.spatial,
        text: text.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Computation {
        let span = Span {
            start: 0,
            end: text.len(),
            line: 1,
            col: 1,
        };
        let resolve = |n: &str| (n == "add").then_some(CompId(7));
        parse_computation(text, &span, &resolve, "t").unwrap()
    }

    #[test]
    fn typed_attributes() {
        let c = one(
            "%c {\n  %p = f32[4,6]{1,0} parameter(0)\n  %s = f32[2,3]{1,0} slice(f32[4,6]{1,0} %p), slice={[0:4:2], [0:3]}, metadata={op_name=\"x\"}\n  \
             %z = f32[] constant(0)\n  %pd = f32[5,9]{1,0} pad(%p, %z), padding=0_1x1_2_0\n  \
             ROOT %r = f32[] reduce(%p, %z), dimensions={0,1}, to_apply=%add\n}",
        );
        let s = c.instructions().nth(1).unwrap().1;
        assert_eq!(
            s.attrs.get(KnownAttr::Slice),
            Some(&AttrValue::Slice(vec![
                SliceDim {
                    start: 0,
                    limit: 4,
                    stride: 2
                },
                SliceDim {
                    start: 0,
                    limit: 3,
                    stride: 1
                }
            ]))
        );
        assert_eq!(
            s.attrs.get(KnownAttr::Metadata),
            Some(&AttrValue::Raw("{op_name=\"x\"}".into()))
        );
        let pd = c.instructions().nth(3).unwrap().1;
        assert_eq!(
            pd.attrs.get(KnownAttr::Padding),
            Some(&AttrValue::Padding(vec![
                PadDim {
                    low: 0,
                    high: 1,
                    interior: 0
                },
                PadDim {
                    low: 1,
                    high: 2,
                    interior: 0
                }
            ]))
        );
        let r = c.inst(c.root().unwrap());
        assert_eq!(r.attrs.ints(KnownAttr::Dimensions), Some(&[0i64, 1][..]));
        assert_eq!(
            r.attrs.get(KnownAttr::ToApply),
            Some(&AttrValue::Computation(CompId(7)))
        );
        assert_eq!(c.operands(c.root().unwrap()).len(), 2);
    }

    #[test]
    fn forward_references_and_control_edges() {
        let c = one(
            "%c {\n  ROOT %b = f32[] negate(%a), control-predecessors={%d}\n  %a = f32[] constant(1)\n  %d = f32[] constant(2)\n}",
        );
        let root = c.root().unwrap();
        assert_eq!(c.inst(root).name, "b");
        assert_eq!(c.inst(c.operands(root)[0]).name, "a");
        assert_eq!(c.inst(c.inst(root).control_predecessors()[0]).name, "d");
    }

    #[test]
    fn attribute_groups_are_sorted_stably() {
        let c = one(
            "%c {\n  ROOT %a = f32[2]{0} broadcast(%x), metadata={}, foo=1, dimensions={0}, sharding={replicated}\n  %x = f32[] constant(1)\n}",
        );
        let names: Vec<_> = c
            .inst(c.root().unwrap())
            .attrs
            .0
            .iter()
            .map(|a| a.key.name().to_string())
            .collect();
        assert_eq!(names, ["foo", "dimensions", "sharding", "metadata"]);
    }

    #[test]
    fn dim_labels_resolve() {
        let d = conv_dim_labels("b01f_01io->b01f").unwrap();
        assert_eq!((d.input_batch, d.input_feature), (0, 3));
        assert_eq!(d.input_spatial.as_slice(), &[1, 2]);
        assert_eq!((d.kernel_input_feature, d.kernel_output_feature), (2, 3));
        let d = conv_dim_labels("bf01_oi01->bf10").unwrap();
        assert_eq!(d.output_spatial.as_slice(), &[3, 2]);
        assert!(conv_dim_labels("bf0_oi01->bf01").is_err());
        assert!(conv_dim_labels("bb01_oi01->bf01").is_err());
        assert!(conv_dim_labels("bf01-oi01").is_err());
    }

    /// The fast shape path agrees with the `shape` crate wherever it
    /// answers, and answers for the common forms.
    #[test]
    fn fast_shapes_match_the_shape_crate() {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("f32"),
            Just("bf16"),
            Just("s32"),
            Just("pred"),
            Just("token"),
            Just("F32"),
            Just("b("),
            Just("["),
            Just("]"),
            Just("{"),
            Just("}"),
            Just(","),
            Just("0"),
            Just("1"),
            Just("2"),
            Just("17"),
            Just("64"),
            Just(":T(2,2)"),
            Just(" "),
            Just("<=3"),
            Just("?"),
            Just("/*c*/"),
            Just("("),
            Just(")"),
            Just("99999999999999999999"),
            Just("\n"),
            Just("%x"),
        ];
        let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
            cases: 1500,
            failure_persistence: None,
            ..Default::default()
        });
        runner
            .run(&proptest::collection::vec(piece, 1..12), |pieces| {
                let text: String = pieces.concat();
                if let Some((fast, end)) = plain_array_shape(text.as_bytes(), 0) {
                    let slow = shape::parse_shape_at(text.as_bytes(), 0);
                    prop_assert_eq!(Ok((fast, end)), slow.map_err(|e| e.message), "{}", text);
                }
                Ok(())
            })
            .unwrap();
        for text in [
            "f32[2,3]{1,0} add",
            "bf16[]",
            "pred[7]{0}",
            "s32[1,2,3]{0,2,1}",
            "f32[4]\n  ROOT",
        ] {
            let (fast, end) = plain_array_shape(text.as_bytes(), 0).unwrap();
            assert_eq!(
                shape::parse_shape_at(text.as_bytes(), 0),
                Ok((fast, end)),
                "{text}"
            );
        }
        for text in [
            "f32[2]{0:T(2)}",
            "f32[2] {0}",
            "f32[<=2]",
            "(f32[])",
            "f32[2,3]{0}",
            "f32[2]/*c*/{0}",
        ] {
            assert_eq!(plain_array_shape(text.as_bytes(), 0), None, "{text}");
        }
    }

    #[test]
    fn attribute_value_scanners() {
        let mut c = Cursor::new("{1, -2 ,3}x");
        assert_eq!(ints(&mut c, "d").unwrap().as_slice(), &[1, -2, 3]);
        assert_eq!(c.peek(), Some(b'x'));
        assert_eq!(ints(&mut Cursor::new("{}"), "d").unwrap().len(), 0);
        assert!(ints(&mut Cursor::new("{1,}"), "d").is_err());
        assert!(
            ints(&mut Cursor::new("1"), "d")
                .unwrap_err()
                .message
                .contains("expected '{'")
        );
        let mut c = Cursor::new("-1_2x0_0_3, next");
        assert_eq!(
            padding(&mut c).unwrap(),
            vec![
                PadDim {
                    low: -1,
                    high: 2,
                    interior: 0
                },
                PadDim {
                    low: 0,
                    high: 0,
                    interior: 3
                }
            ]
        );
        assert_eq!(c.peek(), Some(b','));
        assert_eq!(padding(&mut Cursor::new(", x")).unwrap(), vec![]);
        assert!(padding(&mut Cursor::new("1_2y")).is_err());
        assert_eq!(
            slice(&mut Cursor::new("{[0:4], [1:9:3]}")).unwrap(),
            vec![
                SliceDim {
                    start: 0,
                    limit: 4,
                    stride: 1
                },
                SliceDim {
                    start: 1,
                    limit: 9,
                    stride: 3
                }
            ]
        );
        let v = aliasing(&mut Cursor::new("{{0,1}: (2, {3}), {}: (0, {})}")).unwrap();
        assert_eq!(
            (
                v[0].output_index.as_slice(),
                v[0].operand,
                v[0].operand_index.as_slice()
            ),
            (&[0i64, 1][..], 2, &[3i64][..])
        );
        assert_eq!(v[1].output_index.len(), 0);
        let s = shapes(&mut Cursor::new("{f32[2]{0}, (s32[], pred[])}"), "c").unwrap();
        assert_eq!(s.len(), 2);
        let mut names = SmallVec::new();
        name_list(&mut Cursor::new("{%a, b.1}"), &mut names).unwrap();
        assert_eq!(names.iter().map(|n| n.0).collect::<Vec<_>>(), ["a", "b.1"]);
        let mut c = Cursor::new("(f32[2]{0} %x, (s32[]) y)");
        c.pos = 1;
        let mut ops = SmallVec::new();
        operand_list(&mut c, &mut ops).unwrap();
        assert_eq!(ops.iter().map(|n| n.0).collect::<Vec<_>>(), ["x", "y"]);
        let mut c = Cursor::new("({1, (2)}, \")\") ), x");
        c.pos = 1;
        assert_eq!(literal(&mut c).unwrap(), "{1, (2)}, \")\"");
    }

    #[test]
    fn literals_are_verbatim() {
        let c = one("%c {\n  ROOT %k = f32[2,2]{1,0} constant({ {1, 2}, {3, 4} }), metadata={}\n}");
        assert_eq!(
            c.inst(c.root().unwrap()).payload,
            Payload::Constant("{ {1, 2}, {3, 4} }".into())
        );
    }
}
