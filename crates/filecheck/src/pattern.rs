//! One check pattern: parsing (`Pattern::parsePattern` in LLVM) and matching
//! (`Pattern::match`).
//!
//! A pattern is either a fixed string (searched with `memchr::memmem`) or a
//! regex assembled from literal text, `{{regex}}` blocks and `[[...]]`
//! substitution blocks. Besides the Rust regex that is actually matched, the
//! parser keeps the text LLVM would have built for the same pattern, because
//! LLVM's "possible intended match" heuristic scores candidates against that
//! text and we want to point at the same place.

use std::collections::HashMap;

use memchr::memmem;

use crate::expr::{
    EvalError, ExprParser, Expression, Format, NumVarId, NumericValue, ParseError, Span, VarTables,
    parse_variable,
};
use crate::source::Loc;

/// The directive a pattern came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CheckKind {
    Plain,
    Next,
    Same,
    Not,
    Dag,
    Label,
    Empty,
    /// The implicit pattern matching the end of the input, added after
    /// trailing CHECK-DAG / CHECK-NOT directives.
    Eof,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckType {
    pub(crate) kind: CheckKind,
    /// `n` of `CHECK-COUNT-n`; 1 for everything else.
    pub(crate) count: usize,
    /// The `{LITERAL}` modifier: the pattern text is matched verbatim.
    pub(crate) literal: bool,
}

impl CheckType {
    pub(crate) fn new(kind: CheckKind) -> Self {
        CheckType {
            kind,
            count: 1,
            literal: false,
        }
    }

    /// LLVM's `FileCheckType::getDescription`, e.g. `CHECK-NEXT` or
    /// `CHECK-COUNT{LITERAL}`.
    pub(crate) fn description(&self, prefix: &str) -> String {
        let suffix = match self.kind {
            CheckKind::Plain if self.count > 1 => "-COUNT",
            CheckKind::Plain => "",
            CheckKind::Next => "-NEXT",
            CheckKind::Same => "-SAME",
            CheckKind::Not => "-NOT",
            CheckKind::Dag => "-DAG",
            CheckKind::Label => "-LABEL",
            CheckKind::Empty => "-EMPTY",
            CheckKind::Eof => return "implicit EOF".to_string(),
        };
        let modifiers = if self.literal { "{LITERAL}" } else { "" };
        format!("{prefix}{suffix}{modifiers}")
    }
}

/// The options that influence how a pattern is parsed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PatternOptions {
    pub(crate) strict_whitespace: bool,
    pub(crate) match_full_lines: bool,
    pub(crate) ignore_case: bool,
}

/// A check-file error found while parsing a pattern.
#[derive(Debug)]
pub(crate) struct PatternError {
    pub(crate) loc: Loc,
    pub(crate) message: String,
    /// LLVM prints errors that travel through `logAllUnhandledErrors` with
    /// an extra empty line after them.
    pub(crate) trailing_blank_line: bool,
    /// LLVM calls `exit(1)` for an unbalanced `]` inside `[[...]]`, so that
    /// one error has exit status 1 instead of 2.
    pub(crate) exits_with_one: bool,
}

impl PatternError {
    fn printed(loc: Loc, message: impl Into<String>) -> Self {
        PatternError {
            loc,
            message: message.into(),
            trailing_blank_line: false,
            exits_with_one: false,
        }
    }
}

impl From<ParseError> for PatternError {
    fn from(e: ParseError) -> Self {
        PatternError {
            loc: e.loc,
            message: e.message,
            trailing_blank_line: true,
            exits_with_one: false,
        }
    }
}

/// A value of a string variable: either captured from the input (kept as a
/// range to avoid copying) or given with `-D`.
#[derive(Clone, Debug)]
pub(crate) enum StringValue {
    Input { start: usize, end: usize },
    Defined(String),
}

/// Variable values while matching; LLVM keeps these in the pattern context.
pub(crate) struct VarState {
    pub(crate) strings: HashMap<String, StringValue>,
    pub(crate) numeric: Vec<Option<NumericValue>>,
    pub(crate) line_var: NumVarId,
}

impl VarState {
    fn string_value<'a>(&'a self, name: &str, input: &'a str) -> Option<&'a str> {
        match self.strings.get(name)? {
            StringValue::Input { start, end } => input.get(*start..*end),
            StringValue::Defined(text) => Some(text),
        }
    }

    /// `--enable-var-scope` at a CHECK-LABEL boundary: forget every variable
    /// whose name does not start with `$`.
    pub(crate) fn clear_local(&mut self, names: &[String]) {
        self.strings.retain(|name, _| name.starts_with('$'));
        for (value, name) in self.numeric.iter_mut().zip(names) {
            if !name.starts_with('$') {
                *value = None;
            }
        }
    }
}

/// The canonicalized input, plus an ASCII-lowercased copy when matching
/// ignores case (LLVM's case folding is ASCII only, so offsets agree).
pub(crate) struct Input<'a> {
    pub(crate) text: &'a str,
    pub(crate) lowered: Option<String>,
}

/// A successful match, as absolute byte offsets into the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) pos: usize,
    pub(crate) len: usize,
}

/// Why matching could not even be attempted.
#[derive(Clone, Debug)]
pub(crate) enum MatchError {
    UndefinedVariable { name: String, loc: Loc },
    Overflow { loc: Loc },
    Unrepresentable { range: (usize, usize) },
    InvalidRegex { loc: Loc, message: String },
}

#[derive(Debug)]
enum SubstitutionKind {
    String(String),
    Numeric(Expression),
}

#[derive(Debug)]
struct Substitution {
    /// Byte offset in the regex template where the value is inserted.
    insert_at: usize,
    /// The block's text, as LLVM shows it in `with "..." equal to` notes.
    from_text: String,
    from_loc: Loc,
    kind: SubstitutionKind,
}

#[derive(Debug)]
enum CompiledRegex {
    Plain(regex::Regex),
    /// Only patterns that reuse a variable defined earlier on the same line
    /// need back-references, which the `regex` crate does not support.
    Backtracking(fancy_regex::Regex),
}

impl CompiledRegex {
    fn new(source: &str, backtracking: bool) -> Result<Self, String> {
        if backtracking {
            fancy_regex::Regex::new(source)
                .map(CompiledRegex::Backtracking)
                .map_err(|e| e.to_string())
        } else {
            regex::Regex::new(source)
                .map(CompiledRegex::Plain)
                .map_err(|e| regex_error_message(&e))
        }
    }
}

#[derive(Debug)]
struct RegexBody {
    template: String,
    llvm_text: String,
    substitutions: Vec<Substitution>,
    /// `(variable name, capture group name)` for `[[VAR:regex]]`.
    string_defs: Vec<(String, String)>,
    /// `(variable, capture group name, format)` for `[[#VAR:]]`.
    numeric_defs: Vec<(NumVarId, String, Format)>,
    backtracking: bool,
    ignore_case: bool,
    compiled: Option<CompiledRegex>,
    /// CHECK-EMPTY's regex consumes the newline before the empty line, but
    /// its match is reported as starting after it.
    match_start_skip: usize,
}

#[derive(Debug)]
struct FixedBody {
    /// The text to find, ASCII-lowercased when matching ignores case.
    text: String,
    finder: memmem::Finder<'static>,
    ignore_case: bool,
}

#[derive(Debug)]
enum Body {
    Eof,
    Fixed(Box<FixedBody>),
    Regex(Box<RegexBody>),
}

#[derive(Debug)]
pub(crate) struct Pattern {
    pub(crate) ty: CheckType,
    pub(crate) loc: Loc,
    pub(crate) line: Option<usize>,
    body: Body,
}

/// LLVM's `Regex::escape`: the POSIX ERE metacharacters.
fn llvm_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "()^$|*+?.[]\\{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// LLVM's `raw_ostream::write_escaped`.
pub(crate) fn write_escaped(out: &mut String, text: &str) {
    for &b in text.as_bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                out.push('\\');
                out.push(char::from(b'0' + ((b >> 6) & 7)));
                out.push(char::from(b'0' + ((b >> 3) & 7)));
                out.push(char::from(b'0' + (b & 7)));
            }
        }
    }
}

/// Reduces a `regex` crate error to its one-line reason, using POSIX's
/// wording for the common cases so messages read like LLVM's.
fn regex_error_message(error: &regex::Error) -> String {
    let text = error.to_string();
    let reason = text
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .unwrap_or(text.as_str())
        .trim()
        .to_string();
    let posix = match reason.as_str() {
        "unclosed group" | "unopened group" => "parentheses not balanced",
        "unclosed character class" => "brackets ([ ]) not balanced",
        "repetition operator missing expression" => "repetition-operator operand invalid",
        "invalid character class range, the start must be <= the end" => "invalid character range",
        "invalid repetition count range, the start must be <= the end"
        | "repetition quantifier expects a valid decimal" => "invalid repetition count(s)",
        "unclosed counted repetition" => "braces not balanced",
        "incomplete escape sequence, reached end of pattern prematurely" => {
            "trailing backslash (\\)"
        }
        _ => return reason,
    };
    posix.to_string()
}

/// Rewrites a regex fragment where POSIX extended regexes (LLVM's dialect)
/// and the `regex` crate disagree on syntax that check files commonly use:
///
/// * a negated bracket expression never matches a newline under POSIX's
///   `REG_NEWLINE` (LLVM's mode), so `[^abc]` becomes `[[^abc]&&[^\n]]`;
/// * a `{` that does not start a bound (is not followed by a digit) is a
///   literal in POSIX, so it becomes `\{`.
///
/// Everything else is passed through unchanged.
fn posix_to_rust(regex: &str) -> String {
    let bytes = regex.as_bytes();
    let mut out = String::with_capacity(regex.len() + 8);
    // One entry per open bracket: whether it was rewritten.
    let mut open: Vec<bool> = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => {
                // Skip the escaped character, whatever its UTF-8 length.
                let escaped_len = regex[i + 1..].chars().next().map_or(0, char::len_utf8);
                i += 1 + escaped_len;
                continue;
            }
            b'[' => {
                let negated = bytes.get(i + 1) == Some(&b'^');
                if negated {
                    out.push_str(&regex[copied..i]);
                    out.push_str("[[^");
                    i += 2;
                    copied = i;
                } else {
                    i += 1;
                }
                open.push(negated);
                // A `]` right after the opening bracket is a literal.
                if bytes.get(i) == Some(&b']') {
                    i += 1;
                }
                continue;
            }
            b']' if !open.is_empty() => {
                let was_negated = open.pop() == Some(true);
                if was_negated {
                    out.push_str(&regex[copied..=i]);
                    out.push_str("&&[^\\n]]");
                    copied = i + 1;
                }
            }
            b'{' if open.is_empty() && !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                out.push_str(&regex[copied..i]);
                out.push_str("\\{");
                copied = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&regex[copied.min(regex.len())..]);
    out
}

/// Checks one user-written regex fragment and returns its number of capture
/// groups (LLVM counts them to number its own groups).
fn validate_regex(fragment: &str, loc: Loc) -> Result<usize, PatternError> {
    if fragment.is_empty() {
        // POSIX rejects an empty regex and LLVM reports it this way.
        return Err(PatternError::printed(
            loc,
            "invalid regex: empty (sub)expression",
        ));
    }
    match regex::Regex::new(fragment) {
        Ok(re) => Ok(re.captures_len() - 1),
        Err(e) => Err(PatternError::printed(
            loc,
            format!("invalid regex: {}", regex_error_message(&e)),
        )),
    }
}

/// LLVM's `Pattern::FindRegexVarEnd`: the offset of the `]]` that closes a
/// substitution block, skipping nested brackets and escapes.
fn find_regex_var_end(s: Span<'_>) -> Result<Option<usize>, PatternError> {
    let bytes = s.text.as_bytes();
    let mut offset = 0;
    let mut depth = 0usize;
    while offset < bytes.len() {
        if bytes[offset..].starts_with(b"]]") && depth == 0 {
            return Ok(Some(offset));
        }
        match bytes[offset] {
            b'\\' => {
                offset += 2;
                continue;
            }
            b'[' => depth += 1,
            b']' => {
                if depth == 0 {
                    return Err(PatternError {
                        loc: s.loc.advanced(offset),
                        message: "missing closing \"]\" for regex variable".to_string(),
                        trailing_blank_line: false,
                        exits_with_one: true,
                    });
                }
                depth -= 1;
            }
            _ => {}
        }
        offset += 1;
    }
    Ok(None)
}

/// LLVM only allows back-references to the first 20 capture groups.
const BACKREF_LIMIT: usize = 20;

/// Builds the Rust regex and LLVM's regex text side by side.
struct RegexBuilder {
    body: RegexBody,
    /// LLVM's running capture-group number (1-based).
    llvm_paren: usize,
    /// Capture group of each variable defined so far on this line, as
    /// `(name, rust group name, llvm group number)`.
    defined_here: Vec<(String, String, usize)>,
    next_group: usize,
}

impl RegexBuilder {
    fn new_group_name(&mut self) -> String {
        let name = format!("fcv{}", self.next_group);
        self.next_group += 1;
        name
    }
}

/// What one `[[...]]` block says, as
/// [`Pattern::parse_substitution_block`] reads it.
struct Block<'s> {
    /// The block's text: after `#` for a numeric block, after `NAME:` for
    /// a string definition.
    match_str: Span<'s>,
    is_numeric: bool,
    is_definition: bool,
    /// Whether the block's value is only known when matching: a use.
    substitution_needed: bool,
    /// `[[@LINE...]]` without `#`.
    is_legacy_line_expr: bool,
    /// The variable a definition defines.
    def_name: String,
    /// The string variable a use reads.
    subst_name: Option<Span<'s>>,
    /// What the block matches, as written (POSIX), with where.
    match_regex: Option<(String, Loc)>,
    /// A numeric block's expression.
    expression: Option<Expression>,
    /// The numeric variable a numeric definition defines.
    defined_numeric: Option<NumVarId>,
}

impl<'s> Block<'s> {
    /// The block at the start of `pattern` (which begins with `[[`), which
    /// `pattern` then moves past.
    fn read(pattern: &mut Span<'s>) -> Result<Block<'s>, PatternError> {
        let block_loc = pattern.loc;
        let mut unparsed = *pattern;
        unparsed.drop_front(2);
        let end = find_regex_var_end(unparsed)?;
        let Some(end) = end else {
            return Err(PatternError::printed(
                block_loc,
                "Invalid substitution block, no ]] found",
            ));
        };
        let mut match_str = Span::new(&unparsed.text[..end], unparsed.loc);
        let is_numeric = match_str.text.starts_with('#');
        if is_numeric {
            match_str.drop_front(1);
        }
        pattern.drop_front(2 + end + 2);
        Ok(Block {
            match_str,
            is_numeric,
            is_definition: false,
            substitution_needed: false,
            is_legacy_line_expr: false,
            def_name: String::new(),
            subst_name: None,
            match_regex: None,
            expression: None,
            defined_numeric: None,
        })
    }

    /// A block without `#`: a string variable's definition or use, or a
    /// legacy `@LINE` expression, which is numeric after all.
    fn string_variable(&mut self, tables: &VarTables) -> Result<(), PatternError> {
        let match_str = &mut self.match_str;
        let var_end = match_str.text.find(':');
        let name_part = &match_str.text[..var_end.unwrap_or(match_str.text.len())];
        if let Some(space) = name_part.find([' ', '\t']) {
            return Err(PatternError::printed(
                match_str.loc.advanced(space),
                "unexpected whitespace",
            ));
        }
        let original = *match_str;
        let var = parse_variable(match_str)?;
        self.is_definition = var_end.is_some();
        self.substitution_needed = !self.is_definition;
        if self.is_definition {
            if var.is_pseudo || !match_str.text.starts_with(':') {
                return Err(PatternError::printed(
                    var.name.loc,
                    "invalid name in string variable definition",
                ));
            }
            match_str.drop_front(1);
            if tables.numeric_by_name.contains_key(var.name.text) {
                return Err(PatternError::printed(
                    var.name.loc,
                    format!(
                        "numeric variable with name '{}' already exists",
                        var.name.text
                    ),
                ));
            }
            self.def_name = var.name.text.to_string();
            self.match_regex = Some((match_str.text.to_string(), match_str.loc));
        } else if var.is_pseudo {
            *match_str = original;
            self.is_legacy_line_expr = true;
            self.is_numeric = true;
        } else {
            if !match_str.text.is_empty() {
                return Err(PatternError::printed(
                    var.name.loc,
                    "invalid name in string variable use",
                ));
            }
            self.subst_name = Some(var.name);
        }
        Ok(())
    }

    /// A numeric block: its expression, and the variable it defines if
    /// any. Without an expression to compute, it matches its format's
    /// wildcard.
    fn numeric(&mut self, line: Option<usize>, tables: &mut VarTables) -> Result<(), PatternError> {
        let mut parser = ExprParser {
            tables,
            line_number: line,
            depth: 0,
        };
        let (parsed, defined) = parser.parse_block(self.match_str, self.is_legacy_line_expr)?;
        self.substitution_needed = parsed.ast.is_some();
        if let Some(id) = defined {
            self.is_definition = true;
            self.def_name = tables.numeric_vars[id].name.clone();
            self.defined_numeric = Some(id);
        }
        if !self.substitution_needed {
            self.match_regex = Some((parsed.format.wildcard_regex(), self.match_str.loc));
        }
        self.expression = Some(parsed);
        Ok(())
    }
}

impl Pattern {
    pub(crate) fn eof(loc: Loc, line: usize) -> Self {
        Pattern {
            ty: CheckType::new(CheckKind::Eof),
            loc,
            line: Some(line),
            body: Body::Eof,
        }
    }

    fn fixed(ty: CheckType, loc: Loc, line: Option<usize>, text: &str, ignore_case: bool) -> Self {
        let text = if ignore_case {
            text.to_ascii_lowercase()
        } else {
            text.to_string()
        };
        let finder = memmem::Finder::new(text.as_bytes()).into_owned();
        Pattern {
            ty,
            loc,
            line,
            body: Body::Fixed(Box::new(FixedBody {
                text,
                finder,
                ignore_case,
            })),
        }
    }

    /// Whether the pattern defines or uses variables (CHECK-LABEL may not).
    pub(crate) fn has_variable(&self) -> bool {
        match &self.body {
            Body::Regex(body) => !body.substitutions.is_empty() || !body.string_defs.is_empty(),
            _ => false,
        }
    }

    /// Parses the text after a directive. `text` is the rest of the line,
    /// already stripped of leading whitespace.
    pub(crate) fn parse(
        text: Span<'_>,
        ty: CheckType,
        prefix: &str,
        line: Option<usize>,
        options: PatternOptions,
        tables: &mut VarTables,
    ) -> Result<Pattern, PatternError> {
        let full_lines = options.match_full_lines && ty.kind != CheckKind::Not;
        let loc = text.loc;
        let mut pattern = text;
        if !(options.strict_whitespace && options.match_full_lines) {
            pattern.text = pattern.text.trim_end_matches([' ', '\t']);
        }

        if pattern.text.is_empty() && ty.kind != CheckKind::Empty {
            return Err(PatternError::printed(
                loc,
                format!("found empty check string with prefix '{prefix}:'"),
            ));
        }
        if !pattern.text.is_empty() && ty.kind == CheckKind::Empty {
            return Err(PatternError::printed(
                loc,
                format!("found non-empty check string for empty check with prefix '{prefix}:'"),
            ));
        }

        let mut builder = RegexBuilder {
            body: RegexBody {
                template: String::new(),
                llvm_text: String::new(),
                substitutions: Vec::new(),
                string_defs: Vec::new(),
                numeric_defs: Vec::new(),
                backtracking: false,
                ignore_case: options.ignore_case,
                compiled: None,
                match_start_skip: 0,
            },
            llvm_paren: 1,
            defined_here: Vec::new(),
            next_group: 0,
        };

        if ty.kind == CheckKind::Empty {
            builder.body.template.push_str("\\n$");
            builder.body.llvm_text.push_str("(\n$)");
            builder.body.match_start_skip = 1;
            return Self::finish(ty, loc, line, builder.body);
        }
        if ty.literal {
            return Ok(Self::fixed(
                ty,
                loc,
                line,
                pattern.text,
                options.ignore_case,
            ));
        }
        if !full_lines
            && (pattern.text.len() < 2
                || (!pattern.text.contains("{{") && !pattern.text.contains("[[")))
        {
            return Ok(Self::fixed(
                ty,
                loc,
                line,
                pattern.text,
                options.ignore_case,
            ));
        }

        if full_lines {
            builder.body.template.push('^');
            builder.body.llvm_text.push('^');
            if !options.strict_whitespace {
                builder.body.template.push_str(" *");
                builder.body.llvm_text.push_str(" *");
            }
        }

        while !pattern.text.is_empty() {
            if pattern.text.starts_with("{{") {
                Self::parse_regex_block(&mut builder, &mut pattern)?;
                continue;
            }
            if pattern.text.starts_with("[[") && !pattern.text.starts_with("[[[") {
                Self::parse_substitution_block(&mut builder, &mut pattern, line, tables)?;
                continue;
            }
            // Literal text up to the next block, searching after the first
            // character so a lone leading `[` of `[[[` stays literal.
            let first_len = pattern.text.chars().next().map_or(1, char::len_utf8);
            let rest = &pattern.text[first_len..];
            let next_block = [rest.find("{{"), rest.find("[[")]
                .into_iter()
                .flatten()
                .min()
                .map_or(pattern.text.len(), |p| p + first_len);
            let literal = &pattern.text[..next_block];
            builder.body.template.push_str(&regex::escape(literal));
            builder.body.llvm_text.push_str(&llvm_escape(literal));
            pattern.drop_front(next_block);
        }

        if full_lines {
            if !options.strict_whitespace {
                builder.body.template.push_str(" *");
                builder.body.llvm_text.push_str(" *");
            }
            builder.body.template.push('$');
            builder.body.llvm_text.push('$');
        }
        Self::finish(ty, loc, line, builder.body)
    }

    fn finish(
        ty: CheckType,
        loc: Loc,
        line: Option<usize>,
        mut body: RegexBody,
    ) -> Result<Pattern, PatternError> {
        if body.substitutions.is_empty() {
            let source = regex_source(&body.template, body.ignore_case);
            let compiled = CompiledRegex::new(&source, body.backtracking).map_err(|message| {
                PatternError::printed(loc, format!("invalid regex: {message}"))
            })?;
            body.compiled = Some(compiled);
        }
        Ok(Pattern {
            ty,
            loc,
            line,
            body: Body::Regex(Box::new(body)),
        })
    }

    fn parse_regex_block(
        builder: &mut RegexBuilder,
        pattern: &mut Span<'_>,
    ) -> Result<(), PatternError> {
        let Some(end) = pattern.text.find("}}") else {
            return Err(PatternError::printed(
                pattern.loc,
                "found start of regex string with no end '}}'",
            ));
        };
        // LLVM 14 always parenthesizes the block (so `a{{b|c}}d` means
        // `a(b|c)d`), which also shifts its capture-group numbering.
        let fragment = &pattern.text[2..end];
        let fragment_loc = pattern.loc.advanced(2);
        let groups = validate_regex(&posix_to_rust(fragment), fragment_loc)?;
        builder.body.llvm_text.push('(');
        builder.body.llvm_text.push_str(fragment);
        builder.body.llvm_text.push(')');
        builder.llvm_paren += 1 + groups;
        builder.body.template.push_str("(?:");
        builder.body.template.push_str(&posix_to_rust(fragment));
        builder.body.template.push(')');
        pattern.drop_front(end + 2);
        Ok(())
    }

    /// A `[[...]]` block at the start of `pattern`: a string variable's
    /// definition (`[[NAME:regex]]`) or use (`[[NAME]]`), or a numeric
    /// one (`[[#...]]`, and the legacy `[[@LINE+1]]`). Adds what it
    /// matches to the regex, and what it substitutes once variables are
    /// known.
    fn parse_substitution_block(
        builder: &mut RegexBuilder,
        pattern: &mut Span<'_>,
        line: Option<usize>,
        tables: &mut VarTables,
    ) -> Result<(), PatternError> {
        let mut block = Block::read(pattern)?;
        if !block.is_numeric {
            block.string_variable(tables)?;
        }
        if block.is_numeric {
            block.numeric(line, tables)?;
        }
        let insert_at = if block.is_definition {
            Self::open_definition(builder, &block, tables)
        } else {
            builder.body.template.len()
        };
        if let Some((regex_text, regex_loc)) =
            block.match_regex.take().filter(|(t, _)| !t.is_empty())
        {
            let translated = posix_to_rust(&regex_text);
            builder.llvm_paren += validate_regex(&translated, regex_loc)?;
            builder.body.template.push_str(&translated);
            builder.body.llvm_text.push_str(&regex_text);
        }
        if block.is_definition {
            builder.body.template.push(')');
            builder.body.llvm_text.push(')');
        }
        if block.substitution_needed {
            Self::substitute(builder, block, insert_at)?;
        }
        Ok(())
    }

    /// Opens the capture group a definition matches into, and records the
    /// variable it defines. Returns where a substitution would go.
    fn open_definition(
        builder: &mut RegexBuilder,
        block: &Block<'_>,
        tables: &mut VarTables,
    ) -> usize {
        let def_name = &block.def_name;
        let group_name = builder.new_group_name();
        builder.body.template.push_str("(?P<");
        builder.body.template.push_str(&group_name);
        builder.body.template.push('>');
        builder.body.llvm_text.push('(');
        let insert_at = builder.body.template.len();
        let llvm_group = builder.llvm_paren;
        if let (Some(id), Some(expr)) = (block.defined_numeric, &block.expression) {
            builder
                .body
                .numeric_defs
                .retain(|(existing, _, _)| *existing != id);
            builder
                .body
                .numeric_defs
                .push((id, group_name.clone(), expr.format));
            tables.numeric_by_name.insert(def_name.clone(), id);
        } else {
            builder
                .body
                .string_defs
                .retain(|(existing, _)| existing != def_name);
            builder
                .body
                .string_defs
                .push((def_name.clone(), group_name.clone()));
            builder
                .defined_here
                .retain(|(existing, _, _)| existing != def_name);
            builder
                .defined_here
                .push((def_name.clone(), group_name.clone(), llvm_group));
            tables.defined_strings.insert(def_name.clone());
        }
        builder.llvm_paren += 1;
        insert_at
    }

    /// What a use of a variable matches: a back-reference to a string
    /// variable defined earlier on the same line, else a substitution at
    /// `insert_at` once the variable's value is known.
    fn substitute(
        builder: &mut RegexBuilder,
        block: Block<'_>,
        insert_at: usize,
    ) -> Result<(), PatternError> {
        let same_line_def = match (&block.expression, block.subst_name) {
            (None, Some(name)) => builder
                .defined_here
                .iter()
                .find(|(existing, _, _)| existing == name.text)
                .cloned(),
            _ => None,
        };
        if let (Some((_, group, llvm_group)), Some(name)) = (same_line_def, block.subst_name) {
            if !(1..=BACKREF_LIMIT).contains(&llvm_group) {
                return Err(PatternError::printed(
                    name.loc,
                    format!("Can't back-reference more than {BACKREF_LIMIT} variables"),
                ));
            }
            builder.body.template.push_str("\\k<");
            builder.body.template.push_str(&group);
            builder.body.template.push('>');
            if llvm_group <= 9 {
                builder.body.llvm_text.push('\\');
                builder.body.llvm_text.push_str(&llvm_group.to_string());
            } else {
                builder
                    .body
                    .llvm_text
                    .push_str(&format!("\\g{{{llvm_group}}}"));
            }
            builder.body.backtracking = true;
        } else if let Some(expr) = block.expression {
            builder.body.substitutions.push(Substitution {
                insert_at,
                from_text: block.match_str.text.to_string(),
                from_loc: block.match_str.loc,
                kind: SubstitutionKind::Numeric(expr),
            });
        } else if let Some(name) = block.subst_name {
            builder.body.substitutions.push(Substitution {
                insert_at,
                from_text: name.text.to_string(),
                from_loc: name.loc,
                kind: SubstitutionKind::String(name.text.to_string()),
            });
        }
        Ok(())
    }

    /// LLVM's `Pattern::match` on `input[start..end]`. The slice is matched
    /// on its own, so `^` and `$` also match at its ends, as in LLVM.
    pub(crate) fn find(
        &self,
        input: &Input<'_>,
        start: usize,
        end: usize,
        vars: &mut VarState,
    ) -> Result<Option<Found>, Vec<MatchError>> {
        let body = match &self.body {
            Body::Eof => return Ok(Some(Found { pos: end, len: 0 })),
            Body::Fixed(fixed) => {
                let haystack = match (&input.lowered, fixed.ignore_case) {
                    (Some(lowered), true) => lowered.as_bytes(),
                    _ => input.text.as_bytes(),
                };
                let Some(haystack) = haystack.get(start..end) else {
                    return Ok(None);
                };
                let found = fixed.finder.find(haystack);
                return Ok(found.map(|pos| Found {
                    pos: start + pos,
                    len: fixed.text.len(),
                }));
            }
            Body::Regex(body) => body,
        };

        let substituted;
        let compiled = match &body.compiled {
            Some(compiled) => compiled,
            None => {
                if let Some(line) = self.line
                    && let Some(slot) = vars.numeric.get_mut(vars.line_var)
                {
                    *slot = Some(NumericValue {
                        value: line as i128,
                        input_range: None,
                    });
                }
                let source = self.substituted_source(body, input.text, vars)?;
                substituted =
                    CompiledRegex::new(&source, body.backtracking).map_err(|message| {
                        vec![MatchError::InvalidRegex {
                            loc: self.loc,
                            message,
                        }]
                    })?;
                &substituted
            }
        };

        let Some(haystack) = input.text.get(start..end) else {
            return Ok(None);
        };
        let needs_captures = !body.string_defs.is_empty() || !body.numeric_defs.is_empty();
        let whole = match compiled {
            CompiledRegex::Plain(re) if !needs_captures => match re.find(haystack) {
                Some(m) => (m.start(), m.end()),
                None => return Ok(None),
            },
            CompiledRegex::Plain(re) => {
                let Some(caps) = re.captures(haystack) else {
                    return Ok(None);
                };
                let group = |name: &str| caps.name(name).map(|m| (m.start(), m.end()));
                record_captures(body, start, haystack, vars, group)?;
                caps.get(0).map_or((0, 0), |m| (m.start(), m.end()))
            }
            CompiledRegex::Backtracking(re) => {
                // A backtracking limit error is treated like no match.
                let Ok(Some(caps)) = re.captures(haystack) else {
                    return Ok(None);
                };
                let group = |name: &str| caps.name(name).map(|m| (m.start(), m.end()));
                record_captures(body, start, haystack, vars, group)?;
                caps.get(0).map_or((0, 0), |m| (m.start(), m.end()))
            }
        };

        let skip = body.match_start_skip.min(whole.1 - whole.0);
        Ok(Some(Found {
            pos: start + whole.0 + skip,
            len: whole.1 - whole.0 - skip,
        }))
    }

    /// The regex with every substitution's current value inserted.
    fn substituted_source(
        &self,
        body: &RegexBody,
        input: &str,
        vars: &VarState,
    ) -> Result<String, Vec<MatchError>> {
        let mut source = String::with_capacity(body.template.len() + 16);
        let mut errors = Vec::new();
        let mut copied = 0;
        for substitution in &body.substitutions {
            source.push_str(&body.template[copied..substitution.insert_at]);
            copied = substitution.insert_at;
            match substitution_value(substitution, input, vars) {
                Ok(value) => match &substitution.kind {
                    SubstitutionKind::String(_) => source.push_str(&regex::escape(&value)),
                    SubstitutionKind::Numeric(_) => source.push_str(&value),
                },
                Err(error) => errors.extend(error),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        source.push_str(&body.template[copied..]);
        Ok(regex_source(&source, body.ignore_case))
    }

    /// LLVM's `printSubstitutions`: one `with "X" equal to "value"` line per
    /// substitution whose value is known.
    pub(crate) fn substitution_notes(&self, input: &str, vars: &VarState) -> Vec<String> {
        let Body::Regex(body) = &self.body else {
            return Vec::new();
        };
        let mut notes = Vec::new();
        for substitution in &body.substitutions {
            let Ok(value) = substitution_value(substitution, input, vars) else {
                continue;
            };
            let shown = match &substitution.kind {
                SubstitutionKind::String(_) => llvm_escape(&value),
                SubstitutionKind::Numeric(_) => value,
            };
            let mut note = String::from("with \"");
            write_escaped(&mut note, &substitution.from_text);
            note.push_str("\" equal to \"");
            write_escaped(&mut note, &shown);
            note.push('"');
            notes.push(note);
        }
        notes
    }

    /// LLVM's `printVariableDefs`: the variables this pattern captured, with
    /// their input ranges, in input order.
    pub(crate) fn captured_vars(
        &self,
        vars: &VarState,
        numeric_names: &[String],
    ) -> Vec<(String, (usize, usize))> {
        let Body::Regex(body) = &self.body else {
            return Vec::new();
        };
        let mut captured = Vec::new();
        for (name, _) in &body.string_defs {
            if let Some(StringValue::Input { start, end }) = vars.strings.get(name) {
                captured.push((name.clone(), (*start, *end)));
            }
        }
        for (id, _, _) in &body.numeric_defs {
            let range = vars
                .numeric
                .get(*id)
                .copied()
                .flatten()
                .and_then(|v| v.input_range);
            if let (Some(range), Some(name)) = (range, numeric_names.get(*id)) {
                captured.push((name.clone(), range));
            }
        }
        captured.sort_by_key(|(_, (start, _))| *start);
        captured
    }

    /// LLVM's `Pattern::computeMatchDistance` input: the fixed string, or the
    /// regex text LLVM would have built.
    pub(crate) fn example_text(&self) -> &str {
        match &self.body {
            Body::Eof => "",
            Body::Fixed(fixed) => &fixed.text,
            Body::Regex(body) => &body.llvm_text,
        }
    }

    /// Lengths of the fixed string and of LLVM's regex text, for the size
    /// guard of the fuzzy-match search.
    pub(crate) fn example_sizes(&self) -> (usize, usize) {
        match &self.body {
            Body::Eof => (0, 0),
            Body::Fixed(fixed) => (fixed.text.len(), 0),
            Body::Regex(body) => (0, body.llvm_text.len()),
        }
    }
}

/// Stores the values a successful match captured into the variables the
/// pattern defines. `group` returns a named group's range in `haystack`,
/// which starts at input offset `start`.
fn record_captures(
    body: &RegexBody,
    start: usize,
    haystack: &str,
    vars: &mut VarState,
    group: impl Fn(&str) -> Option<(usize, usize)>,
) -> Result<(), Vec<MatchError>> {
    for (name, group_name) in &body.string_defs {
        let Some((s, e)) = group(group_name) else {
            continue;
        };
        let value = StringValue::Input {
            start: start + s,
            end: start + e,
        };
        // Reuse the existing entry so that re-matching does not allocate.
        match vars.strings.get_mut(name) {
            Some(slot) => *slot = value,
            None => {
                vars.strings.insert(name.clone(), value);
            }
        }
    }
    for (id, group_name, format) in &body.numeric_defs {
        let Some((s, e)) = group(group_name) else {
            continue;
        };
        let range = (start + s, start + e);
        let Some(value) = haystack.get(s..e).and_then(|text| format.parse_value(text)) else {
            return Err(vec![MatchError::Unrepresentable { range }]);
        };
        if let Some(slot) = vars.numeric.get_mut(*id) {
            *slot = Some(NumericValue {
                value,
                input_range: Some(range),
            });
        }
    }
    Ok(())
}

/// Prepends the flags every FileCheck regex uses: `^`/`$` match at line
/// boundaries (POSIX `REG_NEWLINE`), plus case folding when requested.
fn regex_source(template: &str, ignore_case: bool) -> String {
    let flags = if ignore_case { "(?mi)" } else { "(?m)" };
    let mut source = String::with_capacity(flags.len() + template.len());
    source.push_str(flags);
    source.push_str(template);
    source
}

fn substitution_value(
    substitution: &Substitution,
    input: &str,
    vars: &VarState,
) -> Result<String, Vec<MatchError>> {
    match &substitution.kind {
        SubstitutionKind::String(name) => match vars.string_value(name, input) {
            Some(value) => Ok(value.to_string()),
            None => Err(vec![MatchError::UndefinedVariable {
                name: name.clone(),
                loc: substitution.from_loc,
            }]),
        },
        SubstitutionKind::Numeric(expression) => {
            let Some(ast) = &expression.ast else {
                return Ok(String::new());
            };
            let overflow = || {
                vec![MatchError::Overflow {
                    loc: substitution.from_loc,
                }]
            };
            match ast.eval(&vars.numeric) {
                Ok(value) => expression
                    .format
                    .matching_string(value)
                    .map_err(|_| overflow()),
                Err(EvalError::Overflow) => Err(overflow()),
                Err(EvalError::Undefined(names)) => Err(names
                    .into_iter()
                    .map(|(name, loc)| MatchError::UndefinedVariable { name, loc })
                    .collect()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negated_classes_exclude_newlines() {
        assert_eq!(posix_to_rust("a[^,]*b"), "a[[^,]&&[^\\n]]*b");
        assert_eq!(posix_to_rust("[^]x]"), "[[^]x]&&[^\\n]]");
        assert_eq!(posix_to_rust("[a^]\\[^"), "[a^]\\[^");
        assert_eq!(posix_to_rust("[^[:alpha:]]"), "[[^[:alpha:]]&&[^\\n]]");
    }

    #[test]
    fn lone_braces_are_literal() {
        assert_eq!(posix_to_rust("{a|b"), "\\{a|b");
        assert_eq!(posix_to_rust("a{2}{x"), "a{2}\\{x");
        assert_eq!(posix_to_rust("[{]\\{"), "[{]\\{");
        assert_eq!(posix_to_rust("\\é{"), "\\é\\{");
    }

    #[test]
    fn negated_class_rewrite_still_compiles() {
        for source in ["[^-a]", "[^a-]", "x[^]]y", "[^\\]]"] {
            let rewritten = posix_to_rust(source);
            assert!(
                regex::Regex::new(&rewritten).is_ok(),
                "{source} -> {rewritten}"
            );
            let re = regex::Regex::new(&rewritten).unwrap_or_else(|e| panic!("{e}"));
            assert!(!re.is_match("\n"), "{rewritten} matched a newline");
        }
    }

    #[test]
    fn write_escaped_matches_llvm() {
        let mut out = String::new();
        write_escaped(&mut out, "a\"b\\c\td\u{1}");
        assert_eq!(out, "a\\\"b\\\\c\\td\\001");
    }

    #[test]
    fn llvm_escape_covers_posix_metacharacters() {
        assert_eq!(
            llvm_escape("a.b(c)[d]{e}|*+?^$\\"),
            "a\\.b\\(c\\)\\[d\\]\\{e\\}\\|\\*\\+\\?\\^\\$\\\\"
        );
    }
}
