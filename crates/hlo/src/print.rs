//! The printer: canonical XLA text, as `HloModule::ToString` dumps it.
//!
//! Sources for the order of things (XLA, `xla/hlo/ir/`):
//! - `hlo_module.cc` `HloModule::Print`: the header attributes in the order
//!   `is_scheduled`, `input_output_alias`, `buffer_donor`,
//!   `alias_passthrough_params`, `entry_computation_layout`,
//!   `allow_spmd_sharding_propagation_to_parameters`, `..._to_output`,
//!   `replica_count`, `num_partitions`, `frontend_attributes`,
//!   `origin_recovery_table`; then a blank line; every computation is
//!   followed by a blank line.
//! - `hlo_computation.cc` `HloComputation::Print`: `[ENTRY ]%name (p: shape,
//!   ...) -> shape {`, instructions indented by two spaces, `}`, then
//!   `, execution_thread="..."` off the main thread.
//! - `hlo_instruction.cc` `PrintWithCanonicalNameMap` and
//!   `PrintExtraAttributes`: `%name = shape opcode(operands)` with a
//!   `/*index=N*/` before every fifth operand, then opcode-specific
//!   attributes, called computations, `sharding`, `frontend_attributes`,
//!   `control-predecessors`, `statistics`, `result_accuracy`, `origin`,
//!   `metadata`, `backend_config` (see [`crate::attr_group`]).
//!
//! Architecture invariant: everything is appended to one `String`; no
//! per-token allocation and no `format!` on the hot path.

use std::fmt::Write as _;

use shape::{ArrayShape, Layout, Shape};

use crate::parallelism::{Parallelism, Split};
use crate::parse::attr_group;
use crate::view::ModuleView;
use crate::{
    AttrKey, AttrValue, CompId, Computation, InstId, Instruction, KnownAttr, Module, Payload,
};

/// The module as canonical XLA text.
pub fn print_module(module: &Module) -> String {
    let mut out = String::new();
    write_module(&mut out, module);
    out
}

/// The module's header line and debug tables, with the blank line after
/// them: the text before its first computation. A module's text is this
/// followed by each computation's text ([`write_computation_in`]) and a
/// blank line.
pub fn print_header(module: &Module) -> String {
    let mut out = String::new();
    write_header(&mut out, module);
    write_tables(&mut out, module);
    out
}

/// Appends the module as canonical XLA text to `out`, so that a caller can
/// reuse one buffer.
pub fn write_module(out: &mut String, module: &Module) {
    let split = Parallelism::splits(Split::Print, module.instruction_count());
    write_module_split(out, module, split);
}

/// [`write_module`], sequentially for `None`, else in parallel in pieces
/// of about `grain` instructions.
fn write_module_split(out: &mut String, module: &Module, split: Option<usize>) {
    out.reserve(module.instruction_count() * 160 + 1024);
    write_header(out, module);
    write_tables(out, module);
    let Some(grain) = split else {
        Piece::Computations(0..module.computations.len()).write(out, module);
        return;
    };
    // A large module is printed in pieces on all cores, then joined in
    // order: the same text, sooner.
    use rayon::prelude::*;
    let texts: Vec<String> = pieces(module, grain.max(1))
        .par_iter()
        .map(|piece| {
            // Sized for the piece up front: a piece's text is tens of
            // kilobytes, and growing it by doubling copied it several
            // times over.
            let mut text = String::with_capacity(piece.instructions(module) * BYTES_PER_LINE + 256);
            piece.write(&mut text, module);
            text
        })
        .collect();
    out.reserve(texts.iter().map(String::len).sum());
    for text in &texts {
        out.push_str(text);
    }
}

/// A generous size of one printed instruction line: the corpus averages
/// about 160 bytes, metadata included.
const BYTES_PER_LINE: usize = 192;

/// One piece of a module's text (after the header and tables), with the
/// blank line that follows each computation.
enum Piece {
    /// Consecutive whole computations, by index.
    Computations(std::ops::Range<usize>),
    /// A large computation's first line, its instructions at these
    /// schedule positions, and whether its closing brace follows.
    Part {
        computation: usize,
        head: bool,
        lines: std::ops::Range<usize>,
        tail: bool,
    },
}

impl Piece {
    /// How many instructions the piece prints.
    fn instructions(&self, module: &Module) -> usize {
        match self {
            Piece::Computations(range) => module
                .computations
                .get(range.clone())
                .map_or(0, |comps| comps.iter().map(|c| c.schedule().len()).sum()),
            Piece::Part { lines, .. } => lines.len(),
        }
    }

    fn write(&self, out: &mut String, module: &Module) {
        match self {
            Piece::Computations(range) => {
                for i in range.clone() {
                    write_computation(out, module, CompId(i as u32));
                    out.push_str("\n\n");
                }
            }
            &Piece::Part {
                computation,
                head,
                ref lines,
                tail,
            } => {
                let Some(comp) = module.computations.get(computation) else {
                    return;
                };
                let id = CompId(computation as u32);
                if head {
                    write_computation_head(out, module, comp, id);
                }
                write_instruction_lines(out, module, comp, &comp.schedule()[lines.clone()]);
                if tail {
                    write_computation_tail(out, comp);
                    out.push_str("\n\n");
                }
            }
        }
    }
}

/// The pieces of a module's text: small computations in runs, large ones
/// cut into runs of instructions, each about `grain` instructions.
fn pieces(module: &Module, grain: usize) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let (mut run_start, mut run_size) = (0, 0);
    for (i, comp) in module.computations.iter().enumerate() {
        let n = comp.schedule().len();
        if n < 2 * grain {
            run_size += n;
            if run_size >= grain {
                pieces.push(Piece::Computations(run_start..i + 1));
                (run_start, run_size) = (i + 1, 0);
            }
            continue;
        }
        if run_start < i {
            pieces.push(Piece::Computations(run_start..i));
        }
        let mut at = 0;
        while at < n {
            let end = (at + grain).min(n);
            pieces.push(Piece::Part {
                computation: i,
                head: at == 0,
                lines: at..end,
                tail: end == n,
            });
            at = end;
        }
        (run_start, run_size) = (i + 1, 0);
    }
    if run_start < module.computations.len() {
        pieces.push(Piece::Computations(run_start..module.computations.len()));
    }
    pieces
}

/// The header attributes XLA prints before `entry_computation_layout`.
const HEADER_BEFORE_LAYOUT: &[&str] = &["buffer_donor", "alias_passthrough_params"];
/// The header attributes XLA prints after `entry_computation_layout`, in order.
const HEADER_AFTER_LAYOUT: &[&str] = &[
    "allow_spmd_sharding_propagation_to_parameters",
    "allow_spmd_sharding_propagation_to_output",
    "replica_count",
    "num_partitions",
    "frontend_attributes",
    "origin_recovery_table",
];

/// The canonical position of a verbatim header attribute: those printed
/// before `entry_computation_layout` first, then those after it in XLA's
/// order, then unknown ones.
pub(crate) fn header_rank(name: &str) -> usize {
    HEADER_BEFORE_LAYOUT
        .iter()
        .chain(HEADER_AFTER_LAYOUT)
        .position(|&n| n == name)
        .unwrap_or(HEADER_BEFORE_LAYOUT.len() + HEADER_AFTER_LAYOUT.len())
}

/// Header attributes XLA omits at their default value.
pub(crate) fn header_is_default(name: &str, value: &str) -> bool {
    match name {
        "replica_count" | "num_partitions" => value == "1",
        "alias_passthrough_params" => value == "false",
        "allow_spmd_sharding_propagation_to_parameters"
        | "allow_spmd_sharding_propagation_to_output" => value == "{false}" || value == "false",
        _ => false,
    }
}

fn write_header(out: &mut String, m: &Module) {
    out.push_str("HloModule ");
    out.push_str(&m.name);
    if m.is_scheduled {
        out.push_str(", is_scheduled=true");
    }
    if !m.input_output_alias.is_empty() {
        out.push_str(", input_output_alias={ ");
        for (i, a) in m.input_output_alias.iter().enumerate() {
            write_alias(out, i, &a.output_index, a.parameter, &a.parameter_index);
            if a.kind == Some(crate::AliasKind::Must) {
                out.push_str(", must-alias");
            }
            out.push(')');
        }
        out.push_str(" }");
    }
    let header_attr = |out: &mut String, name: &str| {
        for a in m.header_attrs.iter().filter(|a| &*a.name == name) {
            if !header_is_default(&a.name, &a.value) {
                out.push_str(", ");
                out.push_str(&a.name);
                out.push('=');
                out.push_str(&a.value);
            }
        }
    };
    for name in HEADER_BEFORE_LAYOUT {
        header_attr(out, name);
    }
    out.push_str(", entry_computation_layout={(");
    let layout = &m.entry_computation_layout;
    for (i, p) in layout.parameters.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
            if i % 5 == 0 {
                out.push_str("/*index=");
                push_int(out, i as i64);
                out.push_str("*/");
            }
        }
        write_shape(out, p, true);
    }
    out.push_str(")->");
    write_shape(out, &layout.result, true);
    out.push('}');
    for name in HEADER_AFTER_LAYOUT {
        header_attr(out, name);
    }
    for a in &m.header_attrs {
        let known =
            HEADER_BEFORE_LAYOUT.contains(&&*a.name) || HEADER_AFTER_LAYOUT.contains(&&*a.name);
        if !known {
            out.push_str(", ");
            out.push_str(&a.name);
            out.push('=');
            out.push_str(&a.value);
        }
    }
    out.push_str("\n\n");
}

fn write_tables(out: &mut String, m: &Module) {
    let t = &m.debug_tables;
    if t.is_empty() {
        return;
    }
    // A table of names: one `ID "NAME"` line each.
    let names = |out: &mut String, title: &str, names: &[(i64, Box<str>)]| {
        out.push_str(title);
        for (id, name) in names {
            push_int(out, *id);
            out.push_str(" \"");
            out.push_str(name);
            out.push_str("\"\n");
        }
    };
    names(out, "FileNames\n", &t.file_names);
    names(out, "\nFunctionNames\n", &t.function_names);
    out.push_str("\nFileLocations\n");
    for l in &t.file_locations {
        push_int(out, l.id);
        for (key, value) in [
            (" {file_name_id=", l.file_name_id),
            (" function_name_id=", l.function_name_id),
            (" line=", l.line),
            (" end_line=", l.end_line),
            (" column=", l.column),
            (" end_column=", l.end_column),
        ] {
            out.push_str(key);
            push_int(out, value);
        }
        out.push_str("}\n");
    }
    out.push_str("\nStackFrames\n");
    for f in &t.stack_frames {
        push_int(out, f.id);
        out.push_str(" {file_location_id=");
        push_int(out, f.file_location_id);
        out.push_str(" parent_frame_id=");
        push_int(out, f.parent_frame_id);
        out.push_str("}\n");
    }
    out.push_str("\n\n");
}

/// Appends one computation, from `ENTRY`/`%name` to the closing `}` (and
/// its execution thread), without a trailing newline.
pub fn write_computation(out: &mut String, module: &Module, id: CompId) {
    let Some(comp) = module.computations.get(id.index()) else {
        return;
    };
    write_computation_in(out, module, id, comp);
}

/// [`write_computation`] for a computation `comp` with id `id` in the
/// module `view` shows (which needs only the names of the computations
/// `comp` calls, and the entry).
pub fn write_computation_in(
    out: &mut String,
    view: &dyn ModuleView,
    id: CompId,
    comp: &Computation,
) {
    write_computation_head(out, view, comp, id);
    write_instruction_lines(out, view, comp, comp.schedule());
    write_computation_tail(out, comp);
}

/// A computation's first line: `[ENTRY ]%name (p: shape, ...) -> shape {`.
fn write_computation_head(out: &mut String, view: &dyn ModuleView, comp: &Computation, id: CompId) {
    if view.entry() == id {
        out.push_str("ENTRY ");
    }
    out.push('%');
    out.push_str(&comp.name);
    out.push_str(" (");
    for (i, p) in comp.parameters().into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let inst = comp.inst(p);
        out.push_str(&inst.name);
        out.push_str(": ");
        write_shape(out, &inst.shape, false);
    }
    out.push_str(") -> ");
    match comp.root() {
        Some(root) => write_shape(out, &comp.inst(root).shape, false),
        None => out.push_str("()"),
    }
    out.push_str(" {\n");
}

/// The lines of the instructions `ids`, indented, the root marked.
fn write_instruction_lines(
    out: &mut String,
    view: &dyn ModuleView,
    comp: &Computation,
    ids: &[InstId],
) {
    let root = comp.root();
    for &inst_id in ids {
        out.push_str("  ");
        if root == Some(inst_id) {
            out.push_str("ROOT ");
        }
        write_instruction(out, view, comp, inst_id);
        out.push('\n');
    }
}

/// A computation's closing brace and, off the main thread, its thread.
fn write_computation_tail(out: &mut String, comp: &Computation) {
    out.push('}');
    if let Some(thread) = comp.execution_thread.as_ref().filter(|t| *t != "main") {
        out.push_str(", execution_thread=\"");
        out.push_str(thread);
        out.push('"');
    }
}

/// Appends one instruction as `%name = shape opcode(operands), attrs`
/// (no indentation, no `ROOT`, no newline).
pub fn write_instruction(out: &mut String, view: &dyn ModuleView, comp: &Computation, id: InstId) {
    let Some(inst) = comp.get(id) else {
        return;
    };
    out.push('%');
    out.push_str(&inst.name);
    out.push_str(" = ");
    write_shape(out, &inst.shape, true);
    out.push(' ');
    out.push_str(inst.opcode_name());
    out.push('(');
    match &inst.payload {
        Payload::Parameter(n) => push_int(out, i64::from(*n)),
        Payload::Constant(literal) => out.push_str(literal),
        Payload::None | Payload::UnknownOpcode(_) => {
            for (i, &op) in inst.operands().iter().enumerate() {
                write_separator(out, i);
                write_name_of(out, comp, op);
            }
        }
    }
    out.push(')');
    write_attrs(out, view, comp, inst);
}

/// Alias `i` of a list, up to its closing parenthesis: `{0}: (1, {}`, an
/// output tuple index, then the aliased parameter or operand and its index.
fn write_alias(out: &mut String, i: usize, output: &[i64], number: i64, index: &[i64]) {
    if i > 0 {
        out.push_str(", ");
    }
    write_index(out, output);
    out.push_str(": (");
    push_int(out, number);
    out.push_str(", ");
    write_index(out, index);
}

/// What XLA prints before item `i` of an operand list or a tuple shape:
/// nothing before the first, a comma before the others, and every fifth
/// one's index as a comment.
fn write_separator(out: &mut String, i: usize) {
    if i > 0 {
        out.push_str(", ");
        if i.is_multiple_of(5) {
            out.push_str("/*index=");
            push_int(out, i as i64);
            out.push_str("*/");
        }
    }
}

fn write_name_of(out: &mut String, comp: &Computation, id: InstId) {
    match comp.get(id) {
        Some(i) => {
            out.push('%');
            out.push_str(&i.name);
        }
        None => out.push_str("null"),
    }
}

fn write_attrs(out: &mut String, view: &dyn ModuleView, comp: &Computation, inst: &Instruction) {
    let attrs = &inst.attrs.0;
    let control = inst.control_predecessors();
    if attrs.is_sorted_by_key(|a| attr_group(&a.key)) {
        let mut control_done = control.is_empty();
        for a in attrs {
            if !control_done && attr_group(&a.key) > 4 {
                write_control(out, comp, control);
                control_done = true;
            }
            write_attr(out, view, &a.key, &a.value);
        }
        if !control_done {
            write_control(out, comp, control);
        }
    } else {
        // Out of canonical order (a pass pushed an attribute at the end):
        // print group by group.
        for group in 0..=9u8 {
            if group == 4 && !control.is_empty() {
                write_control(out, comp, control);
            }
            for a in attrs.iter().filter(|a| attr_group(&a.key) == group) {
                write_attr(out, view, &a.key, &a.value);
            }
        }
    }
}

fn write_control(out: &mut String, comp: &Computation, control: &[InstId]) {
    out.push_str(", control-predecessors={");
    for (i, &p) in control.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_name_of(out, comp, p);
    }
    out.push('}');
}

/// True when XLA would not print this attribute value: it is the default.
pub(crate) fn attr_is_default(key: &AttrKey, value: &AttrValue) -> bool {
    use KnownAttr::*;
    let AttrKey::Known(k) = key else {
        return false;
    };
    match (k, value) {
        (
            IsStable
            | IndicesAreSorted
            | UniqueIndices
            | ConstrainLayout
            | UseGlobalDeviceIds
            | CustomCallHasSideEffect
            | IsHostTransfer,
            AttrValue::Bool(false),
        ) => true,
        (FeatureGroupCount | BatchGroupCount, AttrValue::Int(1)) => true,
        (
            LhsBatchDims
            | RhsBatchDims
            | OperandBatchingDims
            | StartIndicesBatchingDims
            | InputBatchingDims
            | ScatterIndicesBatchingDims,
            AttrValue::Ints(v),
        ) => v.is_empty(),
        _ => false,
    }
}

fn write_attr(out: &mut String, view: &dyn ModuleView, key: &AttrKey, value: &AttrValue) {
    if attr_is_default(key, value) {
        return;
    }
    out.push_str(", ");
    out.push_str(key.name());
    out.push('=');
    write_attr_value(out, view, value);
}

/// Appends an attribute value in XLA's canonical form.
pub fn write_attr_value(out: &mut String, view: &dyn ModuleView, value: &AttrValue) {
    match value {
        AttrValue::Ints(v) => write_int_list(out, v),
        AttrValue::Int(v) => push_int(out, *v),
        AttrValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        AttrValue::Computation(c) => write_comp_name(out, view, *c),
        AttrValue::Computations(cs) => {
            out.push('{');
            for (i, c) in cs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_comp_name(out, view, *c);
            }
            out.push('}');
        }
        AttrValue::Slice(dims) => {
            // Like padding: every stride prints as soon as one is not 1.
            let strides = dims.iter().any(|d| d.stride != 1);
            out.push('{');
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('[');
                push_int_fields(out, ':', [d.start, d.limit], strides.then_some(d.stride));
                out.push(']');
            }
            out.push('}');
        }
        AttrValue::Padding(dims) => {
            // XLA prints the interior padding of every dimension as soon as
            // one dimension has some.
            let interior = dims.iter().any(|d| d.interior != 0);
            for (i, d) in dims.iter().enumerate() {
                if i > 0 {
                    out.push('x');
                }
                push_int_fields(out, '_', [d.low, d.high], interior.then_some(d.interior));
            }
        }
        AttrValue::Shapes(shapes) => {
            out.push('{');
            for (i, s) in shapes.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_shape(out, s, true);
            }
            out.push('}');
        }
        AttrValue::Aliasing(aliases) => {
            out.push('{');
            for (i, a) in aliases.iter().enumerate() {
                write_alias(out, i, &a.output_index, a.operand, &a.operand_index);
                out.push(')');
            }
            out.push('}');
        }
        AttrValue::DimLabels(d) => out.push_str(&d.text),
        AttrValue::String(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        AttrValue::Raw(s) => out.push_str(s),
    }
}

fn write_comp_name(out: &mut String, view: &dyn ModuleView, id: CompId) {
    out.push('%');
    match view.callee(id) {
        Some(c) => out.push_str(c.name()),
        None => {
            out.push_str("invalid_computation_");
            push_int(out, i64::from(id.0));
        }
    }
}

fn write_int_list(out: &mut String, v: &[i64]) {
    out.push('{');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(out, *x);
    }
    out.push('}');
}

fn write_index(out: &mut String, v: &[i64]) {
    write_int_list(out, v);
}

/// Appends a shape exactly as its `Display` prints it (with layouts) or as
/// `display_without_layout` does, without going through `fmt` for the
/// common cases.
pub fn write_shape(out: &mut String, shape: &Shape, layouts: bool) {
    match shape {
        Shape::Array(a) => write_array(out, a, layouts),
        Shape::Tuple(elements) => {
            out.push('(');
            for (i, e) in elements.iter().enumerate() {
                write_separator(out, i);
                write_shape(out, e, layouts);
            }
            out.push(')');
        }
        Shape::Token => out.push_str("token[]"),
        Shape::Opaque => out.push_str("opaque[]"),
        Shape::Buffer(inner) => {
            out.push_str("b(");
            write_shape(out, inner, layouts);
            out.push(')');
        }
    }
}

fn write_array(out: &mut String, a: &ArrayShape, layouts: bool) {
    out.push_str(a.element_type.name());
    out.push('[');
    for (i, &d) in a.dims.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if a.is_unbounded_dim(i) {
            out.push('?');
        } else {
            if a.is_dynamic_dim(i) {
                out.push_str("<=");
            }
            push_int(out, d);
        }
    }
    out.push(']');
    let Some(layout) = a.layout.as_ref().filter(|_| layouts) else {
        return;
    };
    if a.rank() > 0 && only_minor_to_major(layout) {
        out.push('{');
        for (i, &d) in layout.minor_to_major.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_int(out, d as i64);
        }
        out.push('}');
    } else if a.rank() > 0 || !layout.is_plain() {
        // Rare: tiles and other properties. The shape crate's printer is
        // the reference for those.
        let _ = write!(out, "{layout}");
    }
}

/// True when `Layout`'s `Display` would print the minor-to-major list
/// and nothing else.
fn only_minor_to_major(l: &Layout) -> bool {
    !l.is_sparse()
        && l.tiles.is_empty()
        && l.tail_padding_alignment_in_elements == 1
        && l.element_size_in_bits == 0
        && l.memory_space == 0
        && {
            let r = l.rare();
            r.index_primitive_type.is_none()
                && r.pointer_primitive_type.is_none()
                && r.split_configs.is_empty()
                && r.physical_shape.is_none()
                && r.dynamic_shape_metadata_prefix_bytes <= 0
        }
        && l.padded_dimensions.is_none()
}

/// Writes `a{sep}b`, then `{sep}c` when there is a third field: a slice
/// dimension's `start:limit:stride`, a padding's `low_high_interior`.
fn push_int_fields(out: &mut String, sep: char, [a, b]: [i64; 2], c: Option<i64>) {
    push_int(out, a);
    out.push(sep);
    push_int(out, b);
    if let Some(c) = c {
        out.push(sep);
        push_int(out, c);
    }
}

/// Appends a decimal integer without going through `fmt`.
pub fn push_int(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    for &b in &buf[i..] {
        out.push(b as char);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel printer gives the sequential text, byte for byte, on
    /// every module under `testdata/` (forced on small ones too).
    #[test]
    fn parallel_print_is_sequential_print() {
        let mut checked = 0;
        let mut split = 0;
        for (path, module) in crate::testdata_modules() {
            let mut sequential = String::new();
            write_module_split(&mut sequential, &module, None);
            for grain in [1, 3, Split::Print.grain()] {
                let mut parallel = String::new();
                write_module_split(&mut parallel, &module, Some(grain));
                assert!(
                    sequential == parallel,
                    "{} in pieces of {grain}",
                    path.display()
                );
            }
            checked += 1;
            split += usize::from(
                module
                    .computations
                    .iter()
                    .any(|c| c.schedule().len() >= 2 * 3),
            );
        }
        assert!(
            checked > 100 && split > 50,
            "{checked} modules checked, {split} with a computation cut in parts"
        );
    }

    #[test]
    fn integers_print_like_display() {
        for v in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN, -1] {
            let mut s = String::new();
            push_int(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }

    #[test]
    fn shapes_print_like_display() {
        for text in [
            "f32[3,5]{1,0:T(2,2)}",
            "bf16[8,256]{1,0:T(8,128)(2,1)}",
            "f32[]",
            "u32[]{:T(128)}",
            "f32[123,<=456]{1,0}",
            "f32[?,3]{1,0}",
            "(f32[1], f32[2], f32[3], f32[4], f32[5], /*index=5*/f32[6]{0})",
            "()",
            "token[]",
            "opaque[]",
            "b(f32[4]{0})",
            "s4[123,456]{1,0:T(2,128)E(4)}",
            "f32[2,3]{1,0:L(4)}",
            "f32[4,4]{1,0:D(D,C+~)#(u16)*(u32)}",
            "(f32[2]{0}, (s32[], pred[3]{0}))",
        ] {
            let shape: Shape = text.parse().unwrap();
            let mut s = String::new();
            write_shape(&mut s, &shape, true);
            assert_eq!(s, shape.to_string(), "{text}");
            let mut s = String::new();
            write_shape(&mut s, &shape, false);
            assert_eq!(s, shape.display_without_layout().to_string(), "{text}");
        }
    }
}
