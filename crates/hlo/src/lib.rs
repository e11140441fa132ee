//! The HLO IR, its text form and its structural verifier.
//!
//! Architecture invariant: this crate knows HLO and shapes, and nothing of
//! layouts policies, salsa, serde, YAML or HTTP.
//!
//! The text API:
//! - [`outline`] finds the header, the debug tables and each computation's
//!   span without parsing instructions; [`parse_computation`] parses one
//!   span; [`parse_module`] is exactly the two together.
//! - [`print_module`] / [`write_module`] print canonical XLA text;
//!   `print_module(&parse_module(t)?) == t` for text XLA printed.
//! - [`verify_module`] checks structure and shapes (not layouts).

mod attrs;
mod calls;
mod compare;
mod diag;
mod ir;
mod lex;
mod opcode;
mod outline;
mod parallelism;
mod parse;
mod print;
mod rewrite;
mod shared;
mod verify;
mod view;
mod work;

pub use attrs::{
    Attr, AttrKey, AttrValue, Attrs, ConvDimLabels, KnownAttr, OperandAlias, PadDim, SliceDim,
};
pub use calls::{CallGraph, CallRole, CallSchedule, calls_of};
pub use compare::diff_modules;
pub use diag::{Diagnostic, ParseError, find_definition};
pub use ir::{
    AliasKind, CompId, Computation, ComputationLayout, DebugTables, Edge, EditError, FileLocation,
    HeaderAttr, InstId, Instruction, IoAlias, Module, Payload, ResolvedAlias, StackFrame,
};
pub use lex::MAX_NESTING;
pub use opcode::Opcode;
pub use outline::{ComputationOutline, ModuleOutline, Span, outline};
pub use parallelism::{Entered, Parallelism, Split};
pub use parse::{
    ParseOptions, ResolveComputation, attr_group, outline_and_parse, parse_computation,
    parse_computation_with, parse_module, parse_module_bytes, parse_module_with,
};
pub use petgraph;
pub use print::{
    print_header, print_module, write_attr_value, write_computation, write_computation_in,
    write_instruction, write_module, write_shape,
};
pub use rewrite::{CycleError, FreshNames, Placement, SchedulePositions};
pub use shared::{Downgrade, WeakCache, shared_by_hash, shared_shape, shared_shape_owned};
pub use verify::{
    VerifyError, uses_before_definition, verify_computation, verify_entry_layout, verify_module,
    verify_module_checks, verify_names,
};
pub use view::{Callee, CalleeSignature, ModuleFacts, ModuleView};
pub use work::{Work, WorkCounts, count, counted};

/// `text` without its leading `//` comment lines (and blank lines after
/// one of them), such as the `// RUN:` lines of a golden test. The parser
/// skips comments anyway; this is for comparing printed text with a file.
pub fn strip_leading_comment_lines(text: &str) -> &str {
    let mut rest = text;
    let mut seen_comment = false;
    loop {
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        let line = rest.get(..line_end).unwrap_or("").trim();
        let strip = line.starts_with("//") || (seen_comment && line.is_empty() && line_end > 0);
        if !strip {
            return rest;
        }
        seen_comment = true;
        rest = rest.get(line_end..).unwrap_or("");
    }
}

/// Every parsable module under the workspace's `testdata/`, with its path,
/// in path order: what the unit tests compare parallel and sequential
/// paths on.
#[cfg(test)]
pub(crate) fn testdata_modules() -> Vec<(std::path::PathBuf, Module)> {
    test_support::hlo_files()
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let module = parse_module(&text, "t").ok()?;
            Some((path, module))
        })
        .collect()
}
