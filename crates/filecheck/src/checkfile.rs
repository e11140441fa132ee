//! Reading the check file: finding directives (`FindFirstMatchingPrefix` and
//! `FindCheckType` in LLVM), parsing their patterns, and grouping CHECK-DAG /
//! CHECK-NOT patterns with the positive directive that follows them
//! (`FileCheck::readCheckFile`).

use std::collections::{BTreeSet, HashMap};

use memchr::memmem;

use crate::expr::{ExprParser, Format, NumericValue, Span, VarTables, parse_variable};
use crate::pattern::{
    CheckKind, CheckType, Pattern, PatternError, PatternOptions, StringValue, VarState,
};
use crate::source::{BufferId, Loc, Severity, SourceMgr};

/// A positive directive together with the CHECK-DAG / CHECK-NOT patterns
/// (indices into [`Program::dag_not`]) that precede it.
pub(crate) struct CheckString {
    pub(crate) pattern: Pattern,
    /// The prefix the directive was written with. LLVM 14 also uses it to
    /// describe this directive's CHECK-DAG / CHECK-NOT patterns.
    pub(crate) prefix: String,
    pub(crate) loc: Loc,
    pub(crate) dag_not: Vec<usize>,
}

/// A parsed check file.
pub(crate) struct Program {
    pub(crate) checks: Vec<CheckString>,
    pub(crate) dag_not: Vec<Pattern>,
    /// Numeric variable names by id, for scoping and diagnostics.
    pub(crate) numeric_names: Vec<String>,
    /// Variable values before matching starts (`-D` definitions).
    pub(crate) initial_vars: VarState,
}

/// How reading the check file failed; the diagnostics are already printed.
pub(crate) struct ReadError {
    pub(crate) exit_code: i32,
}

pub(crate) struct ReadOptions<'a> {
    pub(crate) prefixes: &'a [String],
    pub(crate) comment_prefixes: &'a [String],
    pub(crate) implicit_check_not: &'a [String],
    pub(crate) defines: &'a [String],
    pub(crate) pattern: PatternOptions,
    pub(crate) allow_unused_prefixes: bool,
    /// Whether the prefixes are FileCheck's default (`CHECK`), which lets a
    /// check file without directives pass when `--implicit-check-not` is set.
    pub(crate) default_prefixes: bool,
}

/// What a word starting with a prefix turned out to be.
#[derive(Clone, Copy, Debug)]
enum DirectiveKind {
    None,
    Comment,
    Check(CheckType),
    BadNot,
    BadCount,
}

/// The characters `StringRef::ltrim()` removes by default.
const LLVM_WHITESPACE: [char; 6] = [' ', '\t', '\n', '\u{b}', '\u{c}', '\r'];

fn is_part_of_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_'
}

/// Parses a decimal integer prefix like `StringRef::consumeInteger(10, i64)`.
fn consume_decimal(text: &str) -> Option<(i64, &str)> {
    let bytes = text.as_bytes();
    let sign_len = usize::from(bytes.first() == Some(&b'-'));
    let digits = bytes[sign_len..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        return None;
    }
    let end = sign_len + digits;
    let value = text[..end].parse::<i64>().ok()?;
    Some((value, &text[end..]))
}

/// LLVM's `FindCheckType`: classifies the text at `buffer`, which starts
/// with `prefix`. Returns the kind and the offset (from `buffer`'s start)
/// just after the directive's suffix, or `None` when LLVM returns an empty
/// "after suffix" string.
fn find_check_type(buffer: &str, prefix: &str, is_comment: bool) -> (DirectiveKind, Option<usize>) {
    if buffer.len() <= prefix.len() {
        return (DirectiveKind::None, None);
    }
    let mut rest = &buffer[prefix.len()..];
    let offset_of = |rest: &str| {
        let offset = buffer.len() - rest.len();
        // An empty remainder is what LLVM treats as "no suffix parsed".
        (!rest.is_empty()).then_some(offset)
    };

    if is_comment {
        if let Some(after) = rest.strip_prefix(':') {
            return (DirectiveKind::Comment, offset_of(after));
        }
        return (DirectiveKind::None, None);
    }

    let consume_modifiers = |mut rest: &str, mut ty: CheckType| -> (DirectiveKind, Option<usize>) {
        if let Some(after) = rest.strip_prefix(':') {
            return (DirectiveKind::Check(ty), offset_of(after));
        }
        let Some(after) = rest.strip_prefix('{') else {
            return (DirectiveKind::None, None);
        };
        rest = after;
        loop {
            rest = rest.trim_start_matches(LLVM_WHITESPACE);
            match rest.strip_prefix("LITERAL") {
                Some(after) => {
                    ty.literal = true;
                    rest = after;
                }
                None => return (DirectiveKind::None, offset_of(rest)),
            }
            rest = rest.trim_start_matches(LLVM_WHITESPACE);
            match rest.strip_prefix(',') {
                Some(after) => rest = after,
                None => break,
            }
        }
        match rest.strip_prefix("}:") {
            Some(after) => (DirectiveKind::Check(ty), offset_of(after)),
            None => (DirectiveKind::None, offset_of(rest)),
        }
    };

    if let Some(after) = rest.strip_prefix(':') {
        return (
            DirectiveKind::Check(CheckType::new(CheckKind::Plain)),
            offset_of(after),
        );
    }
    if rest.starts_with('{') {
        return consume_modifiers(rest, CheckType::new(CheckKind::Plain));
    }
    let Some(after) = rest.strip_prefix('-') else {
        return (DirectiveKind::None, None);
    };
    rest = after;

    if let Some(after) = rest.strip_prefix("COUNT-") {
        let Some((count, after_count)) = consume_decimal(after) else {
            return (DirectiveKind::BadCount, offset_of(after));
        };
        if count <= 0 || count > i64::from(i32::MAX) {
            return (DirectiveKind::BadCount, offset_of(after_count));
        }
        if !after_count.starts_with(':') && !after_count.starts_with('{') {
            return (DirectiveKind::BadCount, offset_of(after_count));
        }
        let mut ty = CheckType::new(CheckKind::Plain);
        ty.count = usize::try_from(count).unwrap_or(1);
        return consume_modifiers(after_count, ty);
    }

    const BAD_NOT_COMBOS: [&str; 8] = [
        "DAG-NOT:",
        "NOT-DAG:",
        "NEXT-NOT:",
        "NOT-NEXT:",
        "SAME-NOT:",
        "NOT-SAME:",
        "EMPTY-NOT:",
        "NOT-EMPTY:",
    ];
    if BAD_NOT_COMBOS.iter().any(|combo| rest.starts_with(combo)) {
        return (DirectiveKind::BadNot, offset_of(rest));
    }

    const SUFFIXES: [(&str, CheckKind); 6] = [
        ("NEXT", CheckKind::Next),
        ("SAME", CheckKind::Same),
        ("NOT", CheckKind::Not),
        ("DAG", CheckKind::Dag),
        ("LABEL", CheckKind::Label),
        ("EMPTY", CheckKind::Empty),
    ];
    for (suffix, kind) in SUFFIXES {
        if let Some(after) = rest.strip_prefix(suffix) {
            return consume_modifiers(after, CheckType::new(kind));
        }
    }
    (DirectiveKind::None, offset_of(rest))
}

/// Finds the earliest occurrence of any prefix, preferring the longest one
/// at the same position (LLVM's leftmost-longest prefix regex).
struct PrefixMatcher<'a> {
    /// `(prefix, is_comment, next occurrence at or after the last search)`.
    prefixes: Vec<(&'a str, bool, Option<usize>)>,
}

impl<'a> PrefixMatcher<'a> {
    fn new(check: &'a [String], comment: &'a [String], text: &str) -> Self {
        let first = |p: &str| memmem::find(text.as_bytes(), p.as_bytes());
        let mut prefixes: Vec<(&str, bool, Option<usize>)> = check
            .iter()
            .map(|p| (p.as_str(), false, first(p)))
            .chain(comment.iter().map(|p| (p.as_str(), true, first(p))))
            .collect();
        // Longest first so that ties at one position go to the longest.
        prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        PrefixMatcher { prefixes }
    }

    /// The next prefix occurrence at or after `from`.
    fn next(&mut self, text: &str, from: usize) -> Option<(usize, &'a str, bool)> {
        let mut best: Option<(usize, &'a str, bool)> = None;
        for (prefix, is_comment, cached) in &mut self.prefixes {
            if let Some(pos) = *cached
                && pos < from
            {
                *cached =
                    memmem::find(&text.as_bytes()[from..], prefix.as_bytes()).map(|p| p + from);
            }
            if let Some(pos) = *cached
                && best.is_none_or(|(best_pos, _, _)| pos < best_pos)
            {
                best = Some((pos, *prefix, *is_comment));
            }
        }
        best
    }
}

/// Prints one check-file error the way LLVM would.
fn report(sm: &SourceMgr, out: &mut String, error: &PatternError) {
    sm.print(out, error.loc, Severity::Error, &error.message, None);
    if error.trailing_blank_line {
        out.push('\n');
    }
}

fn pattern_error_exit_code(error: &PatternError) -> i32 {
    if error.exits_with_one { 1 } else { 2 }
}

/// LLVM's `defineCmdlineVariables`: `-D NAME=VALUE` and `-D #NAME=EXPR`.
/// Errors point into a synthetic `Global defines` buffer.
fn define_cmdline_variables(
    sm: &mut SourceMgr,
    out: &mut String,
    defines: &[String],
    tables: &mut VarTables,
    strings: &mut HashMap<String, StringValue>,
    numeric: &mut HashMap<usize, NumericValue>,
) -> bool {
    if defines.is_empty() {
        return true;
    }
    let (text, spans) = global_defines(defines);
    let buffer = sm.add("Global defines", text);
    let text = sm.text(buffer).to_string();
    let mut ok = true;
    for (start, len) in spans {
        let loc = Loc::new(buffer, start);
        let definition = &text[start..start + len];
        let defined = if definition.is_empty() {
            Err(DefineError::At(
                loc,
                "missing equal sign in global definition".into(),
            ))
        } else if let Some(expression) = definition.strip_prefix('#') {
            define_numeric(Span::new(expression, loc.advanced(1)), tables, numeric)
        } else {
            define_string(definition, loc, tables, strings)
        };
        match defined {
            Ok(()) => {}
            // Located errors go through `logAllUnhandledErrors` in LLVM,
            // which adds a blank line after each diagnostic.
            Err(DefineError::At(loc, message)) => {
                sm.print(out, loc, Severity::Error, &message, None);
                out.push('\n');
                ok = false;
            }
            Err(DefineError::Lines(lines)) => {
                out.push_str(&lines);
                ok = false;
            }
        }
    }
    ok
}

/// The text of LLVM's `Global defines` buffer, which diagnostics quote,
/// and where each definition stands in it (`(start, 0)` for one without
/// `=`). A numeric definition is shown as the `[[#...]]` block it is
/// parsed as.
fn global_defines(defines: &[String]) -> (String, Vec<(usize, usize)>) {
    let mut text = String::new();
    let mut spans = Vec::new();
    for (index, define) in defines.iter().enumerate() {
        let label = format!("Global define #{}: ", index + 1);
        let Some(eq) = define.find('=') else {
            spans.push((text.len(), 0));
            continue;
        };
        if define.starts_with('#') {
            text.push_str(&label);
            text.push_str(define);
            text.push_str(" (parsed as: [[");
            let mut parsed = define.clone();
            parsed.replace_range(eq..=eq, ":");
            spans.push((text.len(), parsed.len()));
            text.push_str(&parsed);
            text.push_str("]])\n");
        } else {
            text.push_str(&label);
            spans.push((text.len(), define.len()));
            text.push_str(define);
            text.push('\n');
        }
    }
    (text, spans)
}

/// Why one `-D` definition failed, as LLVM reports it.
enum DefineError {
    /// A diagnostic at a place in the `Global defines` buffer.
    At(Loc, String),
    /// Lines printed as they are, without a place.
    Lines(String),
}

/// `-D #NAME=EXPR`: the expression's value, given to the variable it
/// defines; `block` is the `NAME:EXPR` part of the parsed-as block.
fn define_numeric(
    block: Span<'_>,
    tables: &mut VarTables,
    numeric: &mut HashMap<usize, NumericValue>,
) -> Result<(), DefineError> {
    let mut parser = ExprParser {
        tables,
        line_number: None,
        depth: 0,
    };
    let (expression, defined) = parser
        .parse_block(block, false)
        .map_err(|e| DefineError::At(e.loc, e.message))?;
    let known: Vec<Option<NumericValue>> = (0..tables.numeric_vars.len())
        .map(|id| numeric.get(&id).copied())
        .collect();
    let value = match expression.ast.as_ref().map(|ast| ast.eval(&known)) {
        Some(Ok(value)) => value,
        Some(Err(crate::expr::EvalError::Undefined(names))) => {
            let lines = names
                .iter()
                .map(|(name, _)| format!("undefined variable: {name}\n"))
                .collect();
            return Err(DefineError::Lines(lines));
        }
        Some(Err(crate::expr::EvalError::Overflow)) => {
            return Err(DefineError::Lines("overflow error\n".into()));
        }
        None => {
            return Err(DefineError::Lines(
                "missing numeric expression in global definition\n".into(),
            ));
        }
    };
    if let Some(id) = defined {
        let value = NumericValue {
            value,
            input_range: None,
        };
        numeric.insert(id, value);
        tables
            .numeric_by_name
            .insert(tables.numeric_vars[id].name.clone(), id);
    }
    Ok(())
}

/// `-D NAME=VALUE` at `loc`: a string variable, unless a numeric one has
/// the name. An earlier definition of the name wins, as in LLVM.
fn define_string(
    definition: &str,
    loc: Loc,
    tables: &mut VarTables,
    strings: &mut HashMap<String, StringValue>,
) -> Result<(), DefineError> {
    let Some((name_text, value)) = definition.split_once('=') else {
        return Ok(());
    };
    let mut name = Span::new(name_text, loc);
    let var = parse_variable(&mut name).map_err(|e| DefineError::At(e.loc, e.message))?;
    if var.is_pseudo || !name.text.is_empty() {
        return Err(DefineError::At(
            loc,
            format!("invalid name in string variable definition '{name_text}'"),
        ));
    }
    if tables.numeric_by_name.contains_key(var.name.text) {
        return Err(DefineError::At(
            loc,
            format!(
                "numeric variable with name '{}' already exists",
                var.name.text
            ),
        ));
    }
    strings
        .entry(var.name.text.to_string())
        .or_insert_with(|| StringValue::Defined(value.to_string()));
    tables.defined_strings.insert(var.name.text.to_string());
    Ok(())
}

/// LLVM's `FileCheck::readCheckFile` on the canonicalized check file in
/// buffer `check_buffer`.
pub(crate) fn read_check_file(
    sm: &mut SourceMgr,
    check_buffer: BufferId,
    options: &ReadOptions<'_>,
    out: &mut String,
) -> Result<Program, ReadError> {
    let mut tables = VarTables::default();
    let mut strings = HashMap::new();
    let mut numeric_values = HashMap::new();
    if !define_cmdline_variables(
        sm,
        out,
        options.defines,
        &mut tables,
        &mut strings,
        &mut numeric_values,
    ) {
        return Err(ReadError { exit_code: 2 });
    }
    let line_var = tables.numeric_variable("@LINE", Format::UNSIGNED, None);
    tables.numeric_by_name.insert("@LINE".to_string(), line_var);

    let mut dag_not = implicit_check_nots(sm, out, options, &mut tables);
    let implicit: Vec<usize> = (0..dag_not.len()).collect();
    let text = sm.text(check_buffer).to_string();
    let mut scan = DirectiveScan {
        buffer: check_buffer,
        text: &text,
        matcher: PrefixMatcher::new(options.prefixes, options.comment_prefixes, &text),
        cursor: 0,
        line_number: 1,
    };
    let mut not_found: BTreeSet<&str> = options.prefixes.iter().map(String::as_str).collect();
    let distinct_prefixes = not_found.len();
    let mut checks: Vec<CheckString> = Vec::new();
    let mut pending: Vec<usize> = implicit.clone();
    while let Some(d) = scan.next_directive() {
        if !matches!(d.kind, DirectiveKind::Comment) {
            not_found.remove(d.prefix);
        }
        let ty = directive_type(sm, out, &scan, &d)?;
        let (pattern_loc, pattern_text) = scan.pattern_text(options.pattern);
        let Some(ty) = ty else { continue };
        let pattern = match Pattern::parse(
            pattern_text,
            ty,
            d.prefix,
            Some(scan.line_number),
            options.pattern,
            &mut tables,
        ) {
            Ok(pattern) => pattern,
            Err(error) => {
                report(sm, out, &error);
                return Err(ReadError {
                    exit_code: pattern_error_exit_code(&error),
                });
            }
        };
        let prefix_loc = Loc::new(check_buffer, d.pos);
        check_placement(
            sm,
            out,
            prefix_loc,
            d.prefix,
            ty,
            &pattern,
            checks.is_empty(),
        )?;
        if matches!(ty.kind, CheckKind::Dag | CheckKind::Not) {
            // Held until the positive directive they precede.
            dag_not.push(pattern);
            pending.push(dag_not.len() - 1);
            continue;
        }
        checks.push(CheckString {
            pattern,
            prefix: d.prefix.to_string(),
            loc: pattern_loc,
            dag_not: std::mem::replace(&mut pending, implicit.clone()),
        });
    }

    let no_prefix_found = not_found.len() == distinct_prefixes;
    let some_unused = !options.allow_unused_prefixes && !not_found.is_empty();
    if (no_prefix_found || some_unused)
        && (options.implicit_check_not.is_empty() || !options.default_prefixes)
    {
        let plural = if not_found.len() > 1 { "es" } else { "" };
        let listed: Vec<String> = not_found.iter().map(|p| format!("'{p}:'")).collect();
        out.push_str(&format!(
            "error: no check strings found with prefix{plural} {}\n",
            listed.join(", ")
        ));
        return Err(ReadError { exit_code: 2 });
    }

    // CHECK-DAG and CHECK-NOT patterns after the last positive directive
    // are checked up to the end of the input.
    if !pending.is_empty() {
        let first_prefix = options.prefixes.first().cloned().unwrap_or_default();
        let loc = Loc::new(check_buffer, text.len());
        checks.push(CheckString {
            pattern: Pattern::eof(loc, scan.line_number + 1),
            prefix: first_prefix,
            loc,
            dag_not: pending,
        });
    }

    let numeric_names: Vec<String> = tables.numeric_vars.iter().map(|v| v.name.clone()).collect();
    let numeric = (0..numeric_names.len())
        .map(|id| numeric_values.get(&id).copied())
        .collect();
    Ok(Program {
        checks,
        dag_not,
        numeric_names,
        initial_vars: VarState {
            strings,
            numeric,
            line_var,
        },
    })
}

/// The `--implicit-check-not` patterns, in order: CHECK-NOTs that come
/// before every positive directive.
fn implicit_check_nots(
    sm: &mut SourceMgr,
    out: &mut String,
    options: &ReadOptions<'_>,
    tables: &mut VarTables,
) -> Vec<Pattern> {
    let mut patterns = Vec::new();
    for text in options.implicit_check_not {
        // Like LLVM, show the pattern inside a fake command-line buffer.
        const OPTION_PREFIX: &str = "-implicit-check-not='";
        let buffer = sm.add("command line", format!("{OPTION_PREFIX}{text}'"));
        let span_text = &sm.text(buffer)[OPTION_PREFIX.len()..OPTION_PREFIX.len() + text.len()];
        let span = Span::new(span_text, Loc::new(buffer, OPTION_PREFIX.len()));
        let ty = CheckType::new(CheckKind::Not);
        match Pattern::parse(span, ty, "IMPLICIT-CHECK", None, options.pattern, tables) {
            Ok(pattern) => patterns.push(pattern),
            // LLVM prints the error but keeps going; its half-parsed pattern
            // can never match, so dropping it is equivalent.
            Err(error) => report(sm, out, &error),
        }
    }
    patterns
}

/// A directive found in the check file.
struct Directive<'p> {
    /// Where its prefix starts.
    pos: usize,
    prefix: &'p str,
    kind: DirectiveKind,
}

/// Reading a check file's directives in order, with the line number of
/// the last one found (for `@LINE`).
struct DirectiveScan<'t, 'p> {
    buffer: BufferId,
    text: &'t str,
    matcher: PrefixMatcher<'p>,
    /// Where the search goes on: after the last directive's suffix, then
    /// after its pattern.
    cursor: usize,
    line_number: usize,
}

impl<'t, 'p> DirectiveScan<'t, 'p> {
    /// The next prefix occurrence that forms a directive (not inside a
    /// word), with the cursor moved just after its suffix.
    fn next_directive(&mut self) -> Option<Directive<'p>> {
        let bytes = self.text.as_bytes();
        while self.cursor < bytes.len() {
            let (pos, prefix, is_comment) = self.matcher.next(self.text, self.cursor)?;
            self.line_number += memchr::memchr_iter(b'\n', &bytes[self.cursor..pos]).count();
            let preceded_by_word = pos > self.cursor && is_part_of_word(bytes[pos - 1]);
            if !preceded_by_word {
                let (kind, after) = find_check_type(&self.text[pos..], prefix, is_comment);
                if !matches!(kind, DirectiveKind::None) {
                    self.cursor = pos + after.unwrap_or(prefix.len());
                    return Some(Directive { pos, prefix, kind });
                }
            }
            // Skip the prefix and the rest of the word it starts.
            let mut skip = pos + prefix.len();
            while skip < bytes.len() && is_part_of_word(bytes[skip]) {
                skip += 1;
            }
            self.cursor = skip;
        }
        None
    }

    /// The directive's pattern: the rest of the line, minus leading
    /// whitespace unless whitespace is strict on whole lines. The cursor
    /// moves to the line's end.
    fn pattern_text(&mut self, opts: PatternOptions) -> (Loc, Span<'t>) {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut start = self.cursor;
        if !(opts.strict_whitespace && opts.match_full_lines) {
            while start < bytes.len() && matches!(bytes[start], b' ' | b'\t') {
                start += 1;
            }
        }
        let line_end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .map_or(bytes.len(), |p| start + p);
        self.cursor = line_end;
        let loc = Loc::new(self.buffer, start);
        (loc, Span::new(&text[start..line_end], loc))
    }
}

/// The check type of directive `d`: `None` for a comment; an error (already
/// printed) for a malformed `-NOT` or `-COUNT` suffix.
fn directive_type(
    sm: &SourceMgr,
    out: &mut String,
    scan: &DirectiveScan<'_, '_>,
    d: &Directive<'_>,
) -> Result<Option<CheckType>, ReadError> {
    let message = match d.kind {
        DirectiveKind::Check(ty) => return Ok(Some(ty)),
        DirectiveKind::Comment | DirectiveKind::None => return Ok(None),
        DirectiveKind::BadNot => format!("unsupported -NOT combo on prefix '{}'", d.prefix),
        DirectiveKind::BadCount => {
            format!(
                "invalid count in -COUNT specification on prefix '{}'",
                d.prefix
            )
        }
    };
    let at = Loc::new(scan.buffer, scan.cursor);
    sm.print(out, at, Severity::Error, &message, None);
    Err(ReadError { exit_code: 2 })
}

/// What LLVM refuses about where a directive stands: a CHECK-LABEL with
/// variables, and a CHECK-NEXT, -SAME or -EMPTY with no positive directive
/// before it (`first` is true when there is none).
fn check_placement(
    sm: &SourceMgr,
    out: &mut String,
    prefix_loc: Loc,
    prefix: &str,
    ty: CheckType,
    pattern: &Pattern,
    first: bool,
) -> Result<(), ReadError> {
    let message = if ty.kind == CheckKind::Label && pattern.has_variable() {
        format!("found '{prefix}-LABEL:' with variable definition or use")
    } else if matches!(
        ty.kind,
        CheckKind::Next | CheckKind::Same | CheckKind::Empty
    ) && first
    {
        let kind_name = match ty.kind {
            CheckKind::Next => "NEXT",
            CheckKind::Empty => "EMPTY",
            _ => "SAME",
        };
        format!("found '{prefix}-{kind_name}' without previous '{prefix}: line")
    } else {
        return Ok(());
    };
    sm.print(out, prefix_loc, Severity::Error, &message, None);
    Err(ReadError { exit_code: 2 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(buffer: &str) -> String {
        format!("{:?}", find_check_type(buffer, "CHECK", false))
    }

    #[test]
    fn directive_suffixes_are_recognized() {
        assert!(kind("CHECK: x").contains("Plain"));
        assert!(kind("CHECK-NEXT: x").contains("Next"));
        assert!(kind("CHECK-COUNT-3: x").contains("count: 3"));
        assert!(kind("CHECK{LITERAL}: x").contains("literal: true"));
        assert!(kind("CHECK-NOT-NEXT: x").starts_with("(BadNot"));
        assert!(kind("CHECK-COUNT-0: x").starts_with("(BadCount"));
        assert!(kind("CHECK-FOO: x").starts_with("(None"));
        assert!(kind("CHECK_NEXT: x").starts_with("(None"));
    }

    #[test]
    fn prefix_matcher_prefers_longest_at_same_position() {
        let check = vec!["A".to_string(), "A-B".to_string()];
        let comment = vec!["COM".to_string()];
        let mut matcher = PrefixMatcher::new(&check, &comment, "x A-B: y");
        let found = matcher
            .next("x A-B: y", 0)
            .map(|(pos, prefix, _)| (pos, prefix));
        assert_eq!(found, Some((2, "A-B")));
    }
}
