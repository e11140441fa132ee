//! The outline: a cheap scan of a module's text that parses the header and
//! the debug tables and finds each computation's name and extent without
//! parsing any instruction.
//!
//! Architecture invariant: [`crate::parse_module`] is the outline plus one
//! [`crate::parse_computation`] per computation span, so an incremental
//! database can re-parse one computation alone and get the same result.

// No panicking shortcuts outside tests: the parser reads text users send,
// and a panic must never be its answer. Set per module because Cargo
// cannot add lints to the workspace's for one crate.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::diag::{Origin, ParseError, RawError, make_error};
use crate::lex::{Cursor, describe};
use crate::parse::parse_shape;
use crate::print::{header_is_default, header_rank};
use crate::{
    AliasKind, ComputationLayout, DebugTables, FileLocation, HeaderAttr, IoAlias, StackFrame,
};

/// Where a piece of the text is: a byte range and the line and column of
/// its first character.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset just past the last byte.
    pub end: usize,
    /// 1-based line of `start`.
    pub line: u32,
    /// 1-based column of `start`, in characters.
    pub col: u32,
}

impl Span {
    /// The spanned text, taken from the whole module text the span was
    /// found in; empty if the span does not fit that text.
    pub fn text<'a>(&self, module_text: &'a str) -> &'a str {
        module_text.get(self.start..self.end).unwrap_or("")
    }

    pub(crate) fn origin(&self) -> Origin {
        Origin {
            line: self.line,
            col: self.col,
            offset: self.start,
        }
    }
}

/// One computation as the outline found it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComputationOutline {
    /// The name, without `%`.
    pub name: String,
    /// From `ENTRY` (or the name) to the closing `}`, or to the end of a
    /// trailing `, execution_thread="..."`.
    pub span: Span,
    /// True when the text marks it `ENTRY`.
    pub is_entry: bool,
}

/// The header, the debug tables and the computation spans of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleOutline {
    /// The module name.
    pub name: String,
    /// `is_scheduled=true`.
    pub is_scheduled: bool,
    /// `entry_computation_layout`, when the header gives it.
    pub entry_computation_layout: Option<ComputationLayout>,
    /// `input_output_alias`, typed.
    pub input_output_alias: Vec<IoAlias>,
    /// Every other header attribute, verbatim, in text order.
    pub header_attrs: Vec<HeaderAttr>,
    /// The debug tables.
    pub debug_tables: DebugTables,
    /// The header and the tables: everything before the first computation.
    pub header_span: Span,
    /// The computations in text order.
    pub computations: Vec<ComputationOutline>,
    /// Index into `computations` of the entry: the one marked `ENTRY`, or
    /// the last one when none is.
    pub entry: usize,
}

impl ModuleOutline {
    /// Each computation's byte range in the module text, in text order.
    pub(crate) fn spans(&self) -> Vec<std::ops::Range<usize>> {
        self.computations
            .iter()
            .map(|c| c.span.start..c.span.end)
            .collect()
    }

    /// The computation names, in text order.
    pub(crate) fn names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.computations.iter().map(|c| c.name.as_str())
    }
}

/// Scans `text` for the module header, the debug tables and the extent of
/// each computation. Instructions are not parsed.
pub fn outline(text: &str, file_name: &str) -> Result<ModuleOutline, ParseError> {
    outline_raw(text).map_err(|e| make_error(text.as_bytes(), e, Origin::START, file_name))
}

/// Counts lines incrementally as the scan moves forward.
struct LineCounter {
    offset: usize,
    line: u32,
    line_start: usize,
}

impl LineCounter {
    fn at(&mut self, bytes: &[u8], offset: usize) -> (u32, u32) {
        let gap = bytes.get(self.offset..offset).unwrap_or_default();
        let n = memchr::memchr_iter(b'\n', gap).count();
        if n > 0 {
            self.line = self
                .line
                .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            self.line_start =
                memchr::memrchr(b'\n', gap).map_or(self.line_start, |i| self.offset + i + 1);
        }
        self.offset = offset;
        let prefix = bytes.get(self.line_start..offset).unwrap_or_default();
        let col = prefix.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
        (self.line, u32::try_from(col + 1).unwrap_or(u32::MAX))
    }
}

fn outline_raw(text: &str) -> Result<ModuleOutline, RawError> {
    let mut c = Cursor::new(text);
    c.skip_trivia()?;
    if !c.eat_word(b"HloModule") {
        return Err(c.error(format!(
            "expected 'HloModule' at the start of the module, found {}",
            describe(c.peek())
        )));
    }
    c.skip_trivia()?;
    let name = c.expect_name("a module name after 'HloModule'")?;
    let mut out = ModuleOutline {
        name: name.to_string(),
        is_scheduled: false,
        entry_computation_layout: None,
        input_output_alias: Vec::new(),
        header_attrs: Vec::new(),
        debug_tables: DebugTables::default(),
        header_span: Span {
            start: 0,
            end: 0,
            line: 1,
            col: 1,
        },
        computations: Vec::new(),
        entry: 0,
    };
    header_attributes(&mut c, &mut out)?;
    // Canonical form: defaults dropped (XLA does not print them) and XLA's
    // print order, so that a parsed module equals its printed reparse.
    out.header_attrs
        .retain(|a| !header_is_default(&a.name, &a.value));
    out.header_attrs.sort_by_key(|a| header_rank(&a.name));
    for a in &mut out.input_output_alias {
        if a.kind == Some(AliasKind::May) {
            a.kind = None;
        }
    }
    debug_tables(&mut c, &mut out.debug_tables)?;
    c.skip_trivia()?;
    out.header_span.end = c.pos;

    let mut lines = LineCounter {
        offset: 0,
        line: 1,
        line_start: 0,
    };
    let mut names: FxHashMap<&str, ()> = FxHashMap::default();
    let mut entry: Option<usize> = None;
    while !c.at_end() {
        let start = c.pos;
        let is_entry = c.eat_word(b"ENTRY");
        if is_entry {
            if let Some(first) = entry.and_then(|i| out.computations.get(i)) {
                return Err(RawError::new(
                    start,
                    format!(
                        "a second ENTRY computation: %{} is already the entry",
                        first.name
                    ),
                ));
            }
            c.skip_trivia()?;
        }
        let name_pos = c.pos;
        let name = c.expect_name("a computation name or 'ENTRY'")?;
        if names.insert(name, ()).is_some() {
            return Err(RawError::new(
                name_pos,
                format!("duplicate computation name %{name}"),
            ));
        }
        skip_computation(&mut c, name)?;
        let (line, col) = lines.at(c.bytes, start);
        if is_entry {
            entry = Some(out.computations.len());
        }
        out.computations.push(ComputationOutline {
            name: name.to_string(),
            span: Span {
                start,
                end: c.pos,
                line,
                col,
            },
            is_entry,
        });
        c.skip_trivia()?;
    }
    if out.computations.is_empty() {
        return Err(c.error("expected a computation: a module needs at least one"));
    }
    out.entry = entry.unwrap_or(out.computations.len() - 1);
    Ok(out)
}

/// Moves past a computation's signature, body and execution thread.
fn skip_computation(c: &mut Cursor<'_>, name: &str) -> Result<(), RawError> {
    c.skip_trivia()?;
    if c.peek() == Some(b'(') {
        let open = c.pos;
        if !c.skip_parens()? {
            return Err(RawError::new(
                open,
                format!("expected ')' to close the parameter list of computation %{name}"),
            ));
        }
        c.skip_trivia()?;
        if c.bytes.get(c.pos..).is_some_and(|r| r.starts_with(b"->")) {
            c.pos += 2;
            c.skip_trivia()?;
            parse_shape(c)?;
            c.skip_trivia()?;
        }
    }
    if c.peek() != Some(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start the body of computation %{name}, found {}",
            describe(c.peek())
        )));
    }
    let open = c.pos;
    if !c.skip_braced()? {
        let (line, col) = crate::diag::line_col(c.bytes, open, Origin::START);
        return Err(c.error(format!(
            "expected '}}' to close computation %{name}, whose body opens at line {line}, column {col}"
        )));
    }
    if c.eat_comma()? {
        c.execution_thread(format_args!(" following computation %{name}"))?;
    }
    Ok(())
}

fn header_attributes(c: &mut Cursor<'_>, out: &mut ModuleOutline) -> Result<(), RawError> {
    let mut seen: SmallVec<[&str; 8]> = SmallVec::new();
    loop {
        if !c.eat_comma()? {
            return Ok(());
        }
        let at = c.pos;
        let Some(attr) = c.ident() else {
            return Err(c.error(format!(
                "expected a header attribute name after ',', found {}",
                describe(c.peek())
            )));
        };
        if seen.contains(&attr) {
            return Err(RawError::new(
                at,
                format!("duplicate header attribute '{attr}'"),
            ));
        }
        seen.push(attr);
        let end = c.pos;
        c.equals_after(end, format_args!("header attribute '{attr}'"))?;
        match attr {
            "is_scheduled" => out.is_scheduled = boolean(c, attr)?,
            "entry_computation_layout" => {
                out.entry_computation_layout = Some(computation_layout(c)?)
            }
            "input_output_alias" => out.input_output_alias = io_aliases(c)?,
            _ => {
                let value = c.raw_value(attr)?;
                out.header_attrs.push(HeaderAttr {
                    name: attr.into(),
                    value: value.into(),
                });
            }
        }
    }
}

/// `true` or `false`.
pub(crate) fn boolean(c: &mut Cursor<'_>, attr: &str) -> Result<bool, RawError> {
    if c.eat_word(b"true") {
        Ok(true)
    } else if c.eat_word(b"false") {
        Ok(false)
    } else {
        Err(c.error(format!(
            "expected 'true' or 'false' for '{attr}', found {}",
            describe(c.peek())
        )))
    }
}

/// `{(shape, ...)->shape}`.
fn computation_layout(c: &mut Cursor<'_>) -> Result<ComputationLayout, RawError> {
    c.expect(b'{', "'{' to start entry_computation_layout")?;
    c.expect(
        b'(',
        "'(' to start the parameter shapes of entry_computation_layout",
    )?;
    let mut parameters = Vec::new();
    let list = "the parameter shapes of entry_computation_layout";
    c.list_until(b')', list, |c| {
        c.skip_trivia()?;
        parameters.push(parse_shape(c)?);
        Ok(())
    })?;
    c.arrow("before the result shape of entry_computation_layout")?;
    let result = parse_shape(c)?;
    c.expect(b'}', "'}' to close entry_computation_layout")?;
    // Kept for the module's life, with no room to grow.
    parameters.shrink_to_fit();
    Ok(ComputationLayout {
        parameters: std::sync::Arc::new(parameters),
        // Shared: the entry computation's root has this shape too, and a
        // session keeps both.
        result: crate::shared_shape_owned(result),
    })
}

/// A shape index `{0,1}`.
pub(crate) fn shape_index(c: &mut Cursor<'_>, what: &str) -> Result<SmallVec<[i64; 2]>, RawError> {
    c.expect(b'{', format_args!("'{{' to start {what}"))?;
    let mut index = SmallVec::new();
    c.list_until(b'}', what, |c| {
        c.skip_trivia()?;
        index.push(c.int("a tuple index")?);
        Ok(())
    })?;
    Ok(index)
}

/// `{ {0}: (0, {}, may-alias), ... }`.
fn io_aliases(c: &mut Cursor<'_>) -> Result<Vec<IoAlias>, RawError> {
    c.expect(b'{', "'{' to start input_output_alias")?;
    let mut aliases = Vec::new();
    c.list_until(b'}', "input_output_alias", |c| {
        let output_index = shape_index(c, "an output tuple index")?;
        c.expect(
            b':',
            "':' after the output tuple index in input_output_alias",
        )?;
        c.expect(b'(', "'(' to start an alias in input_output_alias")?;
        c.skip_trivia()?;
        let parameter = c.int("a parameter number")?;
        c.expect(b',', "',' after the parameter number in input_output_alias")?;
        let parameter_index = shape_index(c, "a parameter tuple index")?;
        c.skip_trivia()?;
        let mut kind = None;
        if c.eat(b',') {
            c.skip_trivia()?;
            kind = Some(if c.eat_word(b"may-alias") {
                AliasKind::May
            } else if c.eat_word(b"must-alias") {
                AliasKind::Must
            } else {
                return Err(c.error(format!(
                    "expected 'may-alias' or 'must-alias', found {}",
                    describe(c.peek())
                )));
            });
        }
        c.expect(b')', "')' to close an alias in input_output_alias")?;
        aliases.push(IoAlias {
            output_index,
            parameter,
            parameter_index,
            kind,
        });
        Ok(())
    })?;
    Ok(aliases)
}

fn debug_tables(c: &mut Cursor<'_>, tables: &mut DebugTables) -> Result<(), RawError> {
    let mut seen = [false; 4];
    loop {
        c.skip_trivia()?;
        let at = c.pos;
        let (index, name) = if c.eat_word(b"FileNames") {
            (0, "FileNames")
        } else if c.eat_word(b"FunctionNames") {
            (1, "FunctionNames")
        } else if c.eat_word(b"FileLocations") {
            (2, "FileLocations")
        } else if c.eat_word(b"StackFrames") {
            (3, "StackFrames")
        } else {
            return Ok(());
        };
        if seen
            .get_mut(index)
            .is_none_or(|seen| std::mem::replace(seen, true))
        {
            return Err(RawError::new(at, format!("duplicate {name} table")));
        }
        loop {
            c.skip_trivia()?;
            if !matches!(c.peek(), Some(b'0'..=b'9' | b'-')) {
                break;
            }
            let id = c.int("a row id")?;
            c.skip_trivia()?;
            match index {
                0 | 1 => {
                    let text: Box<str> = c.string()?.into();
                    if index == 0 {
                        tables.file_names.push((id, text));
                    } else {
                        tables.function_names.push((id, text));
                    }
                }
                2 => {
                    let mut row = FileLocation {
                        id,
                        file_name_id: 0,
                        function_name_id: 0,
                        line: 0,
                        end_line: 0,
                        column: 0,
                        end_column: 0,
                    };
                    fields(c, name, &mut |key, value| {
                        let slot = match key {
                            "file_name_id" => &mut row.file_name_id,
                            "function_name_id" => &mut row.function_name_id,
                            "line" => &mut row.line,
                            "end_line" => &mut row.end_line,
                            "column" => &mut row.column,
                            "end_column" => &mut row.end_column,
                            _ => return false,
                        };
                        *slot = value;
                        true
                    })?;
                    tables.file_locations.push(row);
                }
                _ => {
                    let mut row = StackFrame {
                        id,
                        file_location_id: 0,
                        parent_frame_id: 0,
                    };
                    fields(c, name, &mut |key, value| {
                        let slot = match key {
                            "file_location_id" => &mut row.file_location_id,
                            "parent_frame_id" => &mut row.parent_frame_id,
                            _ => return false,
                        };
                        *slot = value;
                        true
                    })?;
                    tables.stack_frames.push(row);
                }
            }
        }
    }
}

/// `{key=INT key=INT ...}`; `set` returns false for an unknown key.
fn fields(
    c: &mut Cursor<'_>,
    table: &str,
    set: &mut dyn FnMut(&str, i64) -> bool,
) -> Result<(), RawError> {
    if !c.eat(b'{') {
        return Err(c.error(format!(
            "expected '{{' to start a {table} row, found {}",
            describe(c.peek())
        )));
    }
    loop {
        c.skip_trivia()?;
        if c.eat(b'}') {
            return Ok(());
        }
        if c.eat(b',') {
            continue;
        }
        let at = c.pos;
        let Some(key) = c.ident() else {
            return Err(c.error(format!(
                "expected a field name or '}}' in a {table} row, found {}",
                describe(c.peek())
            )));
        };
        c.expect(b'=', format_args!("'=' after '{key}'"))?;
        c.skip_trivia()?;
        let value = c.int(format_args!("an integer for '{key}'"))?;
        if !set(key, value) {
            return Err(RawError::new(at, format!("unknown {table} field '{key}'")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_header_tables_and_spans() {
        let text = "HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]}, \
                    input_output_alias={ {0}: (0, {}, must-alias) }, replica_count=2\n\n\
                    FileNames\n1 \"a.py\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=2}\n\n\
                    %c (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0), metadata={op_name=\"}\"}\n}\n\n\
                    ENTRY %e (a: f32[2]) -> f32[2]{0} {\n  ROOT %a = f32[2]{0} parameter(0)\n}, execution_thread=\"main\"\n";
        let o = outline(text, "t.hlo").unwrap();
        assert_eq!(o.name, "m");
        assert!(o.is_scheduled);
        let ecl = o.entry_computation_layout.as_ref().unwrap();
        assert_eq!(ecl.result.to_string(), "f32[2]");
        assert_eq!(ecl.parameters[0].to_string(), "f32[2]{0}");
        assert_eq!(o.input_output_alias[0].kind, Some(AliasKind::Must));
        assert_eq!(&*o.header_attrs[0].name, "replica_count");
        assert_eq!(&*o.header_attrs[0].value, "2");
        assert_eq!(o.debug_tables.file_names, vec![(1, "a.py".into())]);
        assert_eq!(o.debug_tables.file_locations[0].line, 3);
        assert_eq!(o.computations.len(), 2);
        assert_eq!(o.computations[0].name, "c");
        assert!(o.computations[0].span.text(text).ends_with("\"}\"}\n}"));
        assert_eq!(
            (o.computations[0].span.line, o.computations[0].span.col),
            (9, 1)
        );
        assert!(o.computations[1].is_entry);
        assert!(
            o.computations[1]
                .span
                .text(text)
                .ends_with("execution_thread=\"main\"")
        );
        assert_eq!(o.entry, 1);
    }

    #[test]
    fn header_is_canonical() {
        let text = "HloModule m, zz=1, replica_count=1, num_partitions=2, \
                    input_output_alias={ {}: (0, {}, may-alias) }\n%c {\n ROOT %x = f32[] constant(0)\n}\n";
        let o = outline(text, "t").unwrap();
        let names: Vec<&str> = o.header_attrs.iter().map(|a| &*a.name).collect();
        assert_eq!(names, ["num_partitions", "zz"]);
        assert_eq!(o.input_output_alias[0].kind, None);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = outline("", "f").unwrap_err();
        assert_eq!((e.line, e.col), (1, 1));
        assert!(e.message.starts_with("expected 'HloModule'"));
        let e = outline(
            "HloModule m\nENTRY %a {\n ROOT %x = f32[] constant(0)\n}\nENTRY %b {\n}\n",
            "f",
        )
        .unwrap_err();
        assert_eq!((e.line, e.col), (5, 1));
        assert!(e.message.contains("second ENTRY"));
        let e = outline("HloModule m\n%a {\n ROOT %x = f32[] constant(0)\n", "f").unwrap_err();
        assert_eq!(
            e.message,
            "expected '}' to close computation %a, whose body opens at line 2, column 4"
        );
        assert_eq!((e.line, e.col), (4, 1));
    }
}
