//! Numeric substitution blocks: `[[#%x,VAR:]]`, `[[#VAR+1]]`, `[[#add(A,B)]]`,
//! `[[#@LINE]]` and the legacy `[[@LINE+1]]`.
//!
//! The parser follows LLVM's `Pattern::parseNumericSubstitutionBlock` and its
//! helpers closely, including the exact error messages and the locations they
//! point at, because those messages are part of FileCheck's observable output.
//! Values are kept as `i128` and every operation is range checked against
//! LLVM 14's 64-bit value space (`i64::MIN ..= u64::MAX`).

use std::collections::{HashMap, HashSet};

use crate::source::Loc;

/// Identifies a numeric variable in [`VarTables::numeric_vars`].
pub(crate) type NumVarId = usize;

/// How a numeric value is printed and matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FormatKind {
    NoFormat,
    Unsigned,
    Signed,
    HexUpper,
    HexLower,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    pub(crate) kind: FormatKind,
    pub(crate) precision: usize,
    pub(crate) alternate: bool,
}

impl PartialEq for Format {
    /// LLVM's `ExpressionFormat::operator==`: a format without a kind equals
    /// nothing, not even itself.
    fn eq(&self, other: &Self) -> bool {
        self.kind != FormatKind::NoFormat
            && self.kind == other.kind
            && self.precision == other.precision
            && self.alternate == other.alternate
    }
}

/// The smallest and largest values LLVM 14 can represent (int64 or uint64).
const MIN_VALUE: i128 = i64::MIN as i128;
const MAX_VALUE: i128 = u64::MAX as i128;

impl Format {
    pub(crate) const NONE: Format = Format {
        kind: FormatKind::NoFormat,
        precision: 0,
        alternate: false,
    };
    pub(crate) const UNSIGNED: Format = Format {
        kind: FormatKind::Unsigned,
        precision: 0,
        alternate: false,
    };

    fn is_set(self) -> bool {
        self.kind != FormatKind::NoFormat
    }

    fn spec(self) -> &'static str {
        match self.kind {
            FormatKind::NoFormat => "<none>",
            FormatKind::Unsigned => "%u",
            FormatKind::Signed => "%d",
            FormatKind::HexUpper => "%X",
            FormatKind::HexLower => "%x",
        }
    }

    /// The regex matching any value in this format, in both the Rust dialect
    /// (used for matching) and LLVM's (used only for fuzzy-match scoring);
    /// the two happen to be spelled identically.
    pub(crate) fn wildcard_regex(self) -> String {
        let prefix = if self.alternate { "0x" } else { "" };
        let (digits, first_digit) = match self.kind {
            FormatKind::Signed => ("[0-9]", "-?([1-9][0-9]*)?"),
            FormatKind::HexUpper => ("[0-9A-F]", "([1-9A-F][0-9A-F]*)?"),
            FormatKind::HexLower => ("[0-9a-f]", "([1-9a-f][0-9a-f]*)?"),
            FormatKind::Unsigned | FormatKind::NoFormat => ("[0-9]", "([1-9][0-9]*)?"),
        };
        if self.precision > 0 {
            return format!("{prefix}{first_digit}{digits}{{{}}}", self.precision);
        }
        match self.kind {
            FormatKind::Signed => "-?[0-9]+".to_string(),
            _ => format!("{prefix}{digits}+"),
        }
    }

    /// Renders `value` the way it must appear in the input.
    pub(crate) fn matching_string(self, value: i128) -> Result<String, EvalError> {
        let negative = value < 0;
        match self.kind {
            FormatKind::Signed if value > i64::MAX as i128 => return Err(EvalError::Overflow),
            FormatKind::Signed => {}
            _ if negative => return Err(EvalError::Overflow),
            _ => {}
        }
        let magnitude = value.unsigned_abs();
        let digits = match self.kind {
            FormatKind::HexUpper => format!("{magnitude:X}"),
            FormatKind::HexLower => format!("{magnitude:x}"),
            _ => magnitude.to_string(),
        };
        let sign = if negative { "-" } else { "" };
        let prefix = if self.alternate { "0x" } else { "" };
        let zeros = "0".repeat(self.precision.saturating_sub(digits.len()));
        Ok(format!("{sign}{prefix}{zeros}{digits}"))
    }

    /// Parses text matched by [`Format::wildcard_regex`] back into a value.
    pub(crate) fn parse_value(self, text: &str) -> Option<i128> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let hex = matches!(self.kind, FormatKind::HexUpper | FormatKind::HexLower);
        let rest = if hex && self.alternate {
            rest.strip_prefix("0x").unwrap_or(rest)
        } else {
            rest
        };
        let magnitude = i128::from_str_radix(rest, if hex { 16 } else { 10 }).ok()?;
        let value = if negative { -magnitude } else { magnitude };
        (MIN_VALUE..=MAX_VALUE).contains(&value).then_some(value)
    }
}

/// Why a numeric expression could not be evaluated.
#[derive(Clone, Debug)]
pub(crate) enum EvalError {
    /// A variable without a value; LLVM reports each at the variable's name.
    Undefined(Vec<(String, Loc)>),
    Overflow,
}

impl EvalError {
    fn join(self, other: EvalError) -> EvalError {
        match (self, other) {
            (EvalError::Undefined(mut a), EvalError::Undefined(b)) => {
                a.extend(b);
                EvalError::Undefined(a)
            }
            (EvalError::Undefined(a), EvalError::Overflow)
            | (EvalError::Overflow, EvalError::Undefined(a)) => EvalError::Undefined(a),
            (EvalError::Overflow, EvalError::Overflow) => EvalError::Overflow,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

impl BinaryOp {
    fn apply(self, lhs: i128, rhs: i128) -> Result<i128, EvalError> {
        let result = match self {
            BinaryOp::Add => lhs + rhs,
            BinaryOp::Sub => lhs - rhs,
            BinaryOp::Mul => lhs.checked_mul(rhs).ok_or(EvalError::Overflow)?,
            BinaryOp::Div if rhs == 0 => return Err(EvalError::Overflow),
            BinaryOp::Div => lhs / rhs,
            BinaryOp::Max => lhs.max(rhs),
            BinaryOp::Min => lhs.min(rhs),
        };
        if (MIN_VALUE..=MAX_VALUE).contains(&result) {
            Ok(result)
        } else {
            Err(EvalError::Overflow)
        }
    }
}

/// A parsed numeric expression. `text` is the source spelling LLVM uses
/// when it reports format conflicts.
#[derive(Clone, Debug)]
pub(crate) enum Ast {
    Literal {
        value: i128,
        text: String,
    },
    Variable {
        id: NumVarId,
        name: String,
        loc: Loc,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Ast>,
        rhs: Box<Ast>,
        text: String,
        loc: Loc,
    },
}

impl Ast {
    fn text(&self) -> &str {
        match self {
            Ast::Literal { text, .. } | Ast::Binary { text, .. } => text,
            Ast::Variable { name, .. } => name,
        }
    }

    pub(crate) fn eval(&self, values: &[Option<NumericValue>]) -> Result<i128, EvalError> {
        match self {
            Ast::Literal { value, .. } => Ok(*value),
            Ast::Variable { id, name, loc } => match values.get(*id).copied().flatten() {
                Some(value) => Ok(value.value),
                None => Err(EvalError::Undefined(vec![(name.clone(), *loc)])),
            },
            Ast::Binary { op, lhs, rhs, .. } => match (lhs.eval(values), rhs.eval(values)) {
                (Ok(l), Ok(r)) => op.apply(l, r),
                (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
                (Err(a), Err(b)) => Err(a.join(b)),
            },
        }
    }

    fn implicit_format(&self, vars: &[NumericVariable]) -> Result<Format, ParseError> {
        match self {
            Ast::Literal { .. } => Ok(Format::NONE),
            Ast::Variable { id, .. } => Ok(vars.get(*id).map_or(Format::UNSIGNED, |v| v.format)),
            Ast::Binary { lhs, rhs, loc, .. } => {
                let left = lhs.implicit_format(vars);
                let right = rhs.implicit_format(vars);
                let (left, right) = match (left, right) {
                    (Ok(l), Ok(r)) => (l, r),
                    (Err(e), _) | (_, Err(e)) => return Err(e),
                };
                if left.is_set() && right.is_set() && left != right {
                    // LLVM attaches this error to the start of the whole
                    // binary expression.
                    return Err(ParseError {
                        loc: *loc,
                        message: format!(
                            "implicit format conflict between '{}' ({}) and '{}' ({}), need an explicit format specifier",
                            lhs.text(),
                            left.spec(),
                            rhs.text(),
                            right.spec()
                        ),
                    });
                }
                Ok(if left.is_set() { left } else { right })
            }
        }
    }
}

/// The value of a numeric variable and, when it was captured from the
/// input, the input range it came from (for "captured var" notes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NumericValue {
    pub(crate) value: i128,
    pub(crate) input_range: Option<(usize, usize)>,
}

#[derive(Clone, Debug)]
pub(crate) struct NumericVariable {
    pub(crate) name: String,
    pub(crate) format: Format,
    /// The check-file line of the directive defining the variable, used to
    /// reject uses in the same directive.
    pub(crate) def_line: Option<usize>,
}

/// Parse-time symbol tables, mirroring LLVM's `FileCheckPatternContext`.
#[derive(Default)]
pub(crate) struct VarTables {
    pub(crate) numeric_vars: Vec<NumericVariable>,
    /// `GlobalNumericVariableTable`: numeric names seen so far.
    pub(crate) numeric_by_name: HashMap<String, NumVarId>,
    /// `DefinedVariableTable`: string variables defined so far.
    pub(crate) defined_strings: HashSet<String>,
}

impl VarTables {
    pub(crate) fn numeric_variable(
        &mut self,
        name: &str,
        format: Format,
        def_line: Option<usize>,
    ) -> NumVarId {
        self.numeric_vars.push(NumericVariable {
            name: name.to_string(),
            format,
            def_line,
        });
        self.numeric_vars.len() - 1
    }
}

/// A numeric substitution block after parsing.
#[derive(Clone, Debug)]
pub(crate) struct Expression {
    pub(crate) ast: Option<Ast>,
    pub(crate) format: Format,
}

/// A parse error: message plus the location LLVM reports it at.
#[derive(Debug)]
pub(crate) struct ParseError {
    pub(crate) loc: Loc,
    pub(crate) message: String,
}

fn err<T>(loc: Loc, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        loc,
        message: message.into(),
    })
}

/// Horizontal whitespace as FileCheck's expression parser understands it.
const SPACE_CHARS: &[char] = &[' ', '\t'];

/// A cursor over part of a buffer that remembers where it is, so errors can
/// point at the exact byte LLVM points at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span<'a> {
    pub(crate) text: &'a str,
    pub(crate) loc: Loc,
}

impl<'a> Span<'a> {
    pub(crate) fn new(text: &'a str, loc: Loc) -> Self {
        Span { text, loc }
    }

    fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    pub(crate) fn drop_front(&mut self, n: usize) {
        let n = n.min(self.text.len());
        self.text = &self.text[n..];
        self.loc = self.loc.advanced(n);
    }

    fn take_front(&self, n: usize) -> Span<'a> {
        Span {
            text: &self.text[..n.min(self.text.len())],
            loc: self.loc,
        }
    }

    fn ltrim(&mut self) {
        let trimmed = self.text.trim_start_matches(SPACE_CHARS);
        self.drop_front(self.text.len() - trimmed.len());
    }

    fn rtrim(&mut self) {
        self.text = self.text.trim_end_matches(SPACE_CHARS);
    }

    fn consume(&mut self, prefix: &str) -> bool {
        if self.text.starts_with(prefix) {
            self.drop_front(prefix.len());
            true
        } else {
            false
        }
    }

    fn starts_with(&self, prefix: &str) -> bool {
        self.text.starts_with(prefix)
    }

    fn pop_front(&mut self) -> Option<char> {
        let c = self.text.chars().next()?;
        self.drop_front(c.len_utf8());
        Some(c)
    }
}

/// The result of [`parse_variable`]: the name and whether it is a pseudo
/// variable (`@LINE`).
pub(crate) struct VariableName<'a> {
    pub(crate) name: Span<'a>,
    pub(crate) is_pseudo: bool,
}

fn is_valid_var_name_start(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphabetic()
}

/// LLVM's `Pattern::parseVariable`: consumes `[$@]?[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn parse_variable<'a>(s: &mut Span<'a>) -> Result<VariableName<'a>, ParseError> {
    if s.is_empty() {
        return err(s.loc, "empty variable name");
    }
    let bytes = s.text.as_bytes();
    let is_pseudo = bytes[0] == b'@';
    let mut i = 0;
    if bytes[0] == b'$' || is_pseudo {
        i += 1;
    }
    if i == bytes.len() {
        let kind = if is_pseudo { "pseudo " } else { "global " };
        return err(s.loc.advanced(i), format!("empty {kind}variable name"));
    }
    if !is_valid_var_name_start(bytes[i]) {
        return err(s.loc, "invalid variable name");
    }
    i += 1;
    while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric()) {
        i += 1;
    }
    let name = s.take_front(i);
    s.drop_front(i);
    Ok(VariableName { name, is_pseudo })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AllowedOperand {
    LineVar,
    LegacyLiteral,
    Any,
}

/// Parses an integer prefix like LLVM's `StringRef::consumeInteger`; radix 0
/// auto-detects `0x`, `0b`, `0o` and a leading `0` (octal).
fn consume_unsigned(s: &mut Span<'_>, radix: u32) -> Option<u128> {
    let mut radix = radix;
    let mut skip = 0;
    if radix == 0 {
        let t = s.text.as_bytes();
        if t.len() > 2 && t[0] == b'0' && (t[1] == b'x' || t[1] == b'X') && t[2].is_ascii_hexdigit()
        {
            radix = 16;
            skip = 2;
        } else if t.len() > 2
            && t[0] == b'0'
            && (t[1] == b'b' || t[1] == b'B')
            && matches!(t[2], b'0' | b'1')
        {
            radix = 2;
            skip = 2;
        } else if t.len() > 2
            && t[0] == b'0'
            && (t[1] == b'o' || t[1] == b'O')
            && matches!(t[2], b'0'..=b'7')
        {
            radix = 8;
            skip = 2;
        } else if t.len() > 1 && t[0] == b'0' && t[1].is_ascii_digit() {
            radix = 8;
            skip = 1;
        } else {
            radix = 10;
        }
    }
    let digits = &s.text[skip..];
    let len = digits
        .bytes()
        .take_while(|b| char::from(*b).is_digit(radix))
        .count();
    if len == 0 {
        return None;
    }
    let value = u128::from_str_radix(&digits[..len], radix).ok()?;
    if value > u64::MAX as u128 {
        return None;
    }
    s.drop_front(skip + len);
    Some(value)
}

/// The state a numeric-block parse needs: symbol tables and the line of the
/// directive being parsed (`None` for `-D` definitions).
pub(crate) struct ExprParser<'t> {
    pub(crate) tables: &'t mut VarTables,
    pub(crate) line_number: Option<usize>,
    /// Current nesting of parentheses and calls; bounded so a hostile check
    /// file cannot overflow the stack.
    pub(crate) depth: usize,
}

/// How deeply parentheses and calls may nest in a numeric expression.
const MAX_NESTING: usize = 64;

impl ExprParser<'_> {
    fn parse_numeric_variable_use(
        &mut self,
        name: Span<'_>,
        is_pseudo: bool,
    ) -> Result<Ast, ParseError> {
        if is_pseudo && name.text != "@LINE" {
            return err(
                name.loc,
                format!("invalid pseudo numeric variable '{}'", name.text),
            );
        }
        // A use of a not-yet-defined variable creates it, like LLVM does, so
        // that a later definition shares the same variable.
        let id = match self.tables.numeric_by_name.get(name.text) {
            Some(&id) => id,
            None => {
                let id = self
                    .tables
                    .numeric_variable(name.text, Format::UNSIGNED, None);
                self.tables
                    .numeric_by_name
                    .insert(name.text.to_string(), id);
                id
            }
        };
        let def_line = self.tables.numeric_vars[id].def_line;
        if let (Some(def_line), Some(line)) = (def_line, self.line_number)
            && def_line == line
        {
            return err(
                name.loc,
                format!(
                    "numeric variable '{}' defined earlier in the same CHECK directive",
                    name.text
                ),
            );
        }
        Ok(Ast::Variable {
            id,
            name: name.text.to_string(),
            loc: name.loc,
        })
    }

    fn parse_numeric_operand(
        &mut self,
        expr: &mut Span<'_>,
        allowed: AllowedOperand,
        maybe_invalid_constraint: bool,
    ) -> Result<Ast, ParseError> {
        if expr.starts_with("(") {
            if allowed != AllowedOperand::Any {
                return err(expr.loc, "parenthesized expression not permitted here");
            }
            return self.parse_paren_expr(expr);
        }
        if matches!(allowed, AllowedOperand::LineVar | AllowedOperand::Any) {
            let mut probe = *expr;
            match parse_variable(&mut probe) {
                Ok(var) => {
                    *expr = probe;
                    let mut after = *expr;
                    after.ltrim();
                    if after.starts_with("(") {
                        if allowed != AllowedOperand::Any {
                            return err(var.name.loc, "unexpected function call");
                        }
                        return self.parse_call_expr(expr, var.name);
                    }
                    return self.parse_numeric_variable_use(var.name, var.is_pseudo);
                }
                Err(e) if allowed == AllowedOperand::LineVar => return Err(e),
                Err(_) => {}
            }
        }
        // Otherwise it must be a literal; unsigned first, then signed.
        let saved = *expr;
        let radix = if allowed == AllowedOperand::LegacyLiteral {
            10
        } else {
            0
        };
        if let Some(value) = consume_unsigned(expr, radix) {
            let text = &saved.text[..saved.text.len() - expr.text.len()];
            return Ok(Ast::Literal {
                value: value as i128,
                text: text.to_string(),
            });
        }
        *expr = saved;
        if allowed == AllowedOperand::Any && expr.starts_with("-") {
            let mut rest = *expr;
            rest.drop_front(1);
            if let Some(value) = consume_unsigned(&mut rest, 0)
                && value <= (i64::MAX as u128) + 1
            {
                *expr = rest;
                let text = &saved.text[..saved.text.len() - expr.text.len()];
                return Ok(Ast::Literal {
                    value: -(value as i128),
                    text: text.to_string(),
                });
            }
        }
        let constraint = if maybe_invalid_constraint {
            "matching constraint or "
        } else {
            ""
        };
        err(expr.loc, format!("invalid {constraint}operand format"))
    }

    fn parse_paren_expr(&mut self, expr: &mut Span<'_>) -> Result<Ast, ParseError> {
        if self.depth >= MAX_NESTING {
            return err(expr.loc, "numeric expression nested too deeply");
        }
        self.depth += 1;
        let result = self.parse_paren_expr_inner(expr);
        self.depth -= 1;
        result
    }

    fn parse_paren_expr_inner(&mut self, expr: &mut Span<'_>) -> Result<Ast, ParseError> {
        expr.ltrim();
        expr.consume("(");
        expr.ltrim();
        if expr.is_empty() {
            return err(expr.loc, "missing operand in expression");
        }
        let mut sub = self.parse_numeric_operand(expr, AllowedOperand::Any, false)?;
        expr.ltrim();
        while !expr.is_empty() && !expr.starts_with(")") {
            let outer = *expr;
            sub = self.parse_binop(outer, expr, sub, false)?;
            expr.ltrim();
        }
        if !expr.consume(")") {
            return err(expr.loc, "missing ')' at end of nested expression");
        }
        Ok(sub)
    }

    fn parse_binop(
        &mut self,
        outer: Span<'_>,
        remaining: &mut Span<'_>,
        lhs: Ast,
        is_legacy_line_expr: bool,
    ) -> Result<Ast, ParseError> {
        remaining.ltrim();
        if remaining.is_empty() {
            return Ok(lhs);
        }
        let op_loc = remaining.loc;
        let op = match remaining.pop_front() {
            Some('+') => BinaryOp::Add,
            Some('-') => BinaryOp::Sub,
            other => {
                let shown = other.map(String::from).unwrap_or_default();
                return err(op_loc, format!("unsupported operation '{shown}'"));
            }
        };
        remaining.ltrim();
        if remaining.is_empty() {
            return err(remaining.loc, "missing operand in expression");
        }
        let allowed = if is_legacy_line_expr {
            AllowedOperand::LegacyLiteral
        } else {
            AllowedOperand::Any
        };
        let rhs = self.parse_numeric_operand(remaining, allowed, false)?;
        let text = outer.text[..outer.text.len() - remaining.text.len()].to_string();
        Ok(Ast::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
            text,
            loc: outer.loc,
        })
    }

    fn parse_call_expr(&mut self, expr: &mut Span<'_>, func: Span<'_>) -> Result<Ast, ParseError> {
        if self.depth >= MAX_NESTING {
            return err(func.loc, "numeric expression nested too deeply");
        }
        self.depth += 1;
        let result = self.parse_call_expr_inner(expr, func);
        self.depth -= 1;
        result
    }

    fn parse_call_expr_inner(
        &mut self,
        expr: &mut Span<'_>,
        func: Span<'_>,
    ) -> Result<Ast, ParseError> {
        expr.ltrim();
        let op = match func.text {
            "add" => BinaryOp::Add,
            "div" => BinaryOp::Div,
            "max" => BinaryOp::Max,
            "min" => BinaryOp::Min,
            "mul" => BinaryOp::Mul,
            "sub" => BinaryOp::Sub,
            _ => {
                return err(
                    func.loc,
                    format!("call to undefined function '{}'", func.text),
                );
            }
        };
        expr.consume("(");
        expr.ltrim();
        let mut args = Vec::new();
        while !expr.is_empty() && !expr.starts_with(")") {
            if expr.starts_with(",") {
                return err(expr.loc, "missing argument");
            }
            let outer = *expr;
            let mut arg = self.parse_numeric_operand(expr, AllowedOperand::Any, false)?;
            while !expr.is_empty() {
                expr.ltrim();
                if expr.starts_with(",") || expr.starts_with(")") {
                    break;
                }
                arg = self.parse_binop(outer, expr, arg, false)?;
            }
            args.push(arg);
            expr.ltrim();
            if !expr.consume(",") {
                break;
            }
            expr.ltrim();
            if expr.starts_with(")") {
                return err(expr.loc, "missing argument");
            }
        }
        if !expr.consume(")") {
            return err(expr.loc, "missing ')' at end of call expression");
        }
        let count = args.len();
        if count == 2 {
            let rhs = args.pop();
            let lhs = args.pop();
            if let (Some(lhs), Some(rhs)) = (lhs, rhs) {
                let text = func.text.to_string();
                return Ok(Ast::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                    text,
                    loc: func.loc,
                });
            }
        }
        err(
            func.loc,
            format!(
                "function '{}' takes 2 arguments but {count} given",
                func.text
            ),
        )
    }

    fn parse_numeric_variable_definition(
        &mut self,
        def: &mut Span<'_>,
        format: Format,
    ) -> Result<NumVarId, ParseError> {
        let var = parse_variable(def)?;
        let name = var.name;
        if var.is_pseudo {
            return err(
                name.loc,
                "definition of pseudo numeric variable unsupported",
            );
        }
        if self.tables.defined_strings.contains(name.text) {
            return err(
                name.loc,
                format!("string variable with name '{}' already exists", name.text),
            );
        }
        def.ltrim();
        if !def.is_empty() {
            return err(def.loc, "unexpected characters after numeric variable name");
        }
        match self.tables.numeric_by_name.get(name.text) {
            Some(&id) => {
                if self.tables.numeric_vars[id].format != format {
                    return err(
                        def.loc,
                        "format different from previous variable definition",
                    );
                }
                Ok(id)
            }
            None => Ok(self
                .tables
                .numeric_variable(name.text, format, self.line_number)),
        }
    }

    /// Parses the text of a numeric substitution block (after the `#`).
    /// Returns the expression and the variable it defines, if any.
    pub(crate) fn parse_block(
        &mut self,
        block: Span<'_>,
        is_legacy_line_expr: bool,
    ) -> Result<(Expression, Option<NumVarId>), ParseError> {
        let mut expr = block;
        let mut explicit = Format::NONE;
        let mut precision = 0usize;

        // Format specifier, e.g. `%.8X,`; a comma inside a call is an
        // argument separator instead.
        let format_end = expr.text.find(',');
        let function_start = expr.text.find('(').unwrap_or(usize::MAX);
        if let Some(format_end) = format_end.filter(|&end| end < function_start) {
            let mut spec = expr.take_front(format_end);
            expr.drop_front(format_end + 1);
            spec.ltrim();
            spec.rtrim();
            if !spec.consume("%") {
                return err(
                    spec.loc,
                    "invalid matching format specification in expression",
                );
            }
            let alternate_loc = spec.loc;
            let alternate = spec.consume("#");
            if spec.consume(".") {
                match consume_unsigned(&mut spec, 10) {
                    Some(p) => precision = usize::try_from(p).unwrap_or(usize::MAX),
                    None => return err(spec.loc, "invalid precision in format specifier"),
                }
            }
            if !spec.is_empty() {
                let kind_loc = spec.loc;
                let kind = match spec.pop_front() {
                    Some('u') => FormatKind::Unsigned,
                    Some('d') => FormatKind::Signed,
                    Some('x') => FormatKind::HexLower,
                    Some('X') => FormatKind::HexUpper,
                    _ => return err(kind_loc, "invalid format specifier in expression"),
                };
                let is_hex = matches!(kind, FormatKind::HexLower | FormatKind::HexUpper);
                explicit = Format {
                    kind,
                    precision,
                    alternate: alternate && is_hex,
                };
            }
            let is_hex = matches!(explicit.kind, FormatKind::HexLower | FormatKind::HexUpper);
            if alternate && !is_hex {
                return err(
                    alternate_loc,
                    "alternate form only supported for hex values",
                );
            }
            spec.ltrim();
            if !spec.is_empty() {
                return err(
                    spec.loc,
                    "invalid matching format specification in expression",
                );
            }
        }

        // Variable definition, e.g. `VAR:`.
        let mut def_span = None;
        if let Some(def_end) = expr.text.find(':') {
            def_span = Some(expr.take_front(def_end));
            expr.drop_front(def_end + 1);
        }

        expr.ltrim();
        let has_constraint = expr.consume("==");
        expr.ltrim();
        let mut ast = None;
        if expr.is_empty() {
            if has_constraint {
                return err(
                    expr.loc,
                    "empty numeric expression should not have a constraint",
                );
            }
        } else {
            expr.rtrim();
            let outer = expr;
            let allowed = if is_legacy_line_expr {
                AllowedOperand::LineVar
            } else {
                AllowedOperand::Any
            };
            let mut parsed = self.parse_numeric_operand(&mut expr, allowed, !has_constraint)?;
            while !expr.is_empty() {
                parsed = self.parse_binop(outer, &mut expr, parsed, is_legacy_line_expr)?;
                if is_legacy_line_expr && !expr.is_empty() {
                    return err(
                        expr.loc,
                        format!("unexpected characters at end of expression '{}'", expr.text),
                    );
                }
            }
            ast = Some(parsed);
        }

        let mut format = explicit;
        if !format.is_set()
            && let Some(ast) = &ast
        {
            format = ast.implicit_format(&self.tables.numeric_vars)?;
        }
        if !format.is_set() {
            format = Format {
                kind: FormatKind::Unsigned,
                precision,
                alternate: false,
            };
        }

        let mut defined = None;
        if let Some(mut def) = def_span {
            def.ltrim();
            defined = Some(self.parse_numeric_variable_definition(&mut def, format)?);
        }
        Ok((Expression { ast, format }, defined))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Expression, Option<NumVarId>), String> {
        let mut tables = VarTables::default();
        let mut parser = ExprParser {
            tables: &mut tables,
            line_number: Some(1),
            depth: 0,
        };
        parser
            .parse_block(Span::new(text, Loc::new(0, 0)), false)
            .map_err(|e| e.message)
    }

    #[test]
    fn formats_render_like_printf() {
        let hex = Format {
            kind: FormatKind::HexLower,
            precision: 4,
            alternate: true,
        };
        assert_eq!(hex.matching_string(31).ok(), Some("0x001f".to_string()));
        assert!(Format::UNSIGNED.matching_string(-1).is_err());
        let signed = Format {
            kind: FormatKind::Signed,
            precision: 0,
            alternate: false,
        };
        assert_eq!(signed.matching_string(-12).ok(), Some("-12".to_string()));
    }

    #[test]
    fn expressions_evaluate() {
        let (expr, def) = parse("add(2, 3) + 0x10").unwrap_or_else(|e| panic!("{e}"));
        assert!(def.is_none());
        let value = expr.ast.map(|a| a.eval(&[]).ok());
        assert_eq!(value, Some(Some(21)));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(
            parse(&deep).err().as_deref(),
            Some("numeric expression nested too deeply")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(
            parse("%z,N:").err().as_deref(),
            Some("invalid format specifier in expression")
        );
        assert_eq!(
            parse("N +").err().as_deref(),
            Some("missing operand in expression")
        );
        assert_eq!(
            parse("foo(1,2)").err().as_deref(),
            Some("call to undefined function 'foo'")
        );
        assert_eq!(
            parse("1 * 2").err().as_deref(),
            Some("unsupported operation '*'")
        );
    }
}
