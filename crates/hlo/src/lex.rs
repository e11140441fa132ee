//! Byte-level scanning shared by the outline scan and the parser: trivia
//! (whitespace and comments), identifiers, integers, strings, and values
//! kept verbatim.
//!
//! Architecture invariant: nothing here recurses, so no input, however
//! deeply nested, can overflow the stack; nesting beyond
//! [`MAX_NESTING`] levels is an error.

// No panicking shortcuts outside tests: the parser reads text users send,
// and a panic must never be its answer. Set per module because Cargo
// cannot add lints to the workspace's for one crate.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use crate::diag::RawError;

/// The deepest bracket nesting the parser accepts.
pub const MAX_NESTING: usize = 256;

/// True for bytes that may continue an identifier: `[a-zA-Z0-9_.-]`.
#[inline]
pub(crate) fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

/// True for bytes that may start an identifier: `[a-zA-Z_]`.
#[inline]
pub(crate) fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Describes a byte for an error message: `'x'`, or "the end of the input".
pub(crate) fn describe(b: Option<u8>) -> String {
    match b {
        None => "the end of the input".to_string(),
        Some(b'\n' | b'\r') => "the end of the line".to_string(),
        Some(b) if b.is_ascii_graphic() || b == b' ' => format!("'{}'", b as char),
        Some(b) => format!("byte 0x{b:02x}"),
    }
}

/// A position in a text, with the scanning primitives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cursor<'a> {
    pub text: &'a str,
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Cursor<'a> {
        Cursor {
            text,
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    #[inline]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    #[inline]
    pub(crate) fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    #[inline]
    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// The text between two offsets; empty if they are not valid (they
    /// always are: the scanners stop on ASCII bytes only).
    #[inline]
    pub(crate) fn slice(&self, start: usize, end: usize) -> &'a str {
        self.text.get(start..end).unwrap_or("")
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> RawError {
        RawError::new(self.pos, message)
    }

    /// An error about what should have followed the token that ends at
    /// `token_end`: reported at the cursor, or just after that token when
    /// the cursor has moved on to a later line.
    pub(crate) fn error_after(&self, token_end: usize, message: impl Into<String>) -> RawError {
        let gap = self.bytes.get(token_end..self.pos).unwrap_or_default();
        let at = if memchr::memchr(b'\n', gap).is_some() {
            token_end
        } else {
            self.pos
        };
        RawError::new(at, message)
    }

    /// Skips whitespace, `/* ... */` and `// ...` comments.
    #[inline]
    pub(crate) fn skip_trivia(&mut self) -> Result<(), RawError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') => match self.peek_at(1) {
                    Some(b'*') => self.skip_block_comment()?,
                    Some(b'/') => self.skip_line_comment(),
                    _ => return Ok(()),
                },
                _ => return Ok(()),
            }
        }
    }

    fn skip_block_comment(&mut self) -> Result<(), RawError> {
        let start = self.pos;
        let rest = self.bytes.get(self.pos + 2..).unwrap_or_default();
        match memchr::memmem::find(rest, b"*/") {
            Some(i) => {
                self.pos += 2 + i + 2;
                Ok(())
            }
            None => Err(RawError::new(
                start,
                "unterminated comment: expected '*/' to close this '/*'",
            )),
        }
    }

    fn skip_line_comment(&mut self) {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        self.pos = match memchr::memchr(b'\n', rest) {
            Some(i) => self.pos + i,
            None => self.bytes.len(),
        };
    }

    /// Consumes `byte` if it is next (no trivia skipped).
    #[inline]
    pub(crate) fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Moves past a `,` and the trivia around it. Without a comma after the
    /// trivia, leaves the cursor where it was and returns false.
    pub(crate) fn eat_comma(&mut self) -> Result<bool, RawError> {
        let save = self.pos;
        self.skip_trivia()?;
        if !self.eat(b',') {
            self.pos = save;
            return Ok(false);
        }
        self.skip_trivia()?;
        Ok(true)
    }

    /// Skips trivia, then consumes `byte` or fails with `expected {what}`.
    pub(crate) fn expect(
        &mut self,
        byte: u8,
        what: impl std::fmt::Display,
    ) -> Result<(), RawError> {
        self.skip_trivia()?;
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.error(format!("expected {what}, found {}", describe(self.peek()))))
        }
    }

    /// Reads the rest of a comma-separated list whose opening bracket was
    /// just read, up to and including `close`: `item` reads one element
    /// from where the last comma (or the bracket) left off, and trivia may
    /// stand before each comma and the close. `list` names the list in the
    /// message for a missing comma; it is formatted only then.
    pub(crate) fn list_until(
        &mut self,
        close: u8,
        list: impl std::fmt::Display,
        mut item: impl FnMut(&mut Self) -> Result<(), RawError>,
    ) -> Result<(), RawError> {
        self.skip_trivia()?;
        if self.eat(close) {
            return Ok(());
        }
        loop {
            item(self)?;
            self.skip_trivia()?;
            if self.eat(close) {
                return Ok(());
            }
            if !self.eat(b',') {
                let close = char::from(close);
                let found = describe(self.peek());
                return Err(self.error(format!(
                    "expected ',' or '{close}' in {list}, found {found}"
                )));
            }
        }
    }

    /// Reads the `=` that follows `what` (which ended at `end`) and the
    /// trivia around it; a missing `=` is reported just after `what`.
    pub(crate) fn equals_after(
        &mut self,
        end: usize,
        what: impl std::fmt::Display,
    ) -> Result<(), RawError> {
        self.skip_trivia()?;
        if !self.eat(b'=') {
            let found = describe(self.peek());
            return Err(self.error_after(end, format!("expected '=' after {what}, found {found}")));
        }
        self.skip_trivia()
    }

    /// Reads a `->` and the trivia around it; `what` says where it was
    /// expected, for the message when it is missing.
    pub(crate) fn arrow(&mut self, what: &str) -> Result<(), RawError> {
        self.skip_trivia()?;
        if !self
            .bytes
            .get(self.pos..)
            .is_some_and(|r| r.starts_with(b"->"))
        {
            let found = describe(self.peek());
            return Err(self.error(format!("expected '->' {what}, found {found}")));
        }
        self.pos += 2;
        self.skip_trivia()
    }

    /// Reads `execution_thread="..."` after a computation's `,` and returns
    /// the thread's name; `following` completes the message when the word
    /// is missing (where the `,` stands).
    pub(crate) fn execution_thread(
        &mut self,
        following: impl std::fmt::Display,
    ) -> Result<&'a str, RawError> {
        if !self.eat_word(b"execution_thread") {
            let found = describe(self.peek());
            return Err(self.error(format!(
                "expected 'execution_thread' after ','{following}, found {found}"
            )));
        }
        self.expect(b'=', "'=' after 'execution_thread'")?;
        self.skip_trivia()?;
        self.string()
    }

    /// Reads a name (see [`Cursor::name`]), or fails with `expected
    /// {what}`.
    pub(crate) fn expect_name(
        &mut self,
        what: impl std::fmt::Display,
    ) -> Result<&'a str, RawError> {
        match self.name() {
            Some(name) => Ok(name),
            None => {
                let found = describe(self.peek());
                Err(self.error(format!("expected {what}, found {found}")))
            }
        }
    }

    /// True when the identifier at the cursor is exactly `word`.
    #[inline]
    pub(crate) fn at_word(&self, word: &[u8]) -> bool {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        rest.starts_with(word) && !rest.get(word.len()).is_some_and(|&b| is_ident_continue(b))
    }

    /// Consumes `word` if the identifier at the cursor is exactly it.
    pub(crate) fn eat_word(&mut self, word: &[u8]) -> bool {
        if self.at_word(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    /// An identifier `[a-zA-Z_][a-zA-Z0-9_.-]*`, if one starts here.
    #[inline]
    pub(crate) fn ident(&mut self) -> Option<&'a str> {
        let start = self.pos;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        self.pos += 1;
        while self.peek().is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        Some(self.slice(start, self.pos))
    }

    /// A name: an identifier with an optional `%` sigil, which is dropped.
    #[inline]
    pub(crate) fn name(&mut self) -> Option<&'a str> {
        let save = self.pos;
        self.eat(b'%');
        let name = self.ident();
        if name.is_none() {
            self.pos = save;
        }
        name
    }

    /// A signed decimal integer. `what` names it in an error and is only
    /// formatted then: most integers parse, and a list's elements would
    /// otherwise each pay for a message.
    pub(crate) fn int(&mut self, what: impl std::fmt::Display) -> Result<i64, RawError> {
        let start = self.pos;
        let negative = self.eat(b'-');
        let digits = self.pos;
        let mut value: i64 = 0;
        let mut overflow = false;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            let d = i64::from(c - b'0');
            match value.checked_mul(10).and_then(|v| {
                if negative {
                    v.checked_sub(d)
                } else {
                    v.checked_add(d)
                }
            }) {
                Some(v) => value = v,
                None => overflow = true,
            }
            self.pos += 1;
        }
        if self.pos == digits {
            self.pos = start;
            return Err(self.error(format!("expected {what}, found {}", describe(self.peek()))));
        }
        if overflow {
            return Err(RawError::new(
                start,
                format!(
                    "integer {} does not fit in 64 bits",
                    self.slice(start, self.pos)
                ),
            ));
        }
        Ok(value)
    }

    /// A quoted string (`"..."` or `'...'`) starting at the cursor. Returns
    /// its content as written, escapes included, without the quotes.
    pub(crate) fn string(&mut self) -> Result<&'a str, RawError> {
        let start = self.pos;
        let Some(quote @ (b'"' | b'\'')) = self.peek() else {
            return Err(self.error(format!(
                "expected a quoted string, found {}",
                describe(self.peek())
            )));
        };
        let mut i = self.pos + 1;
        loop {
            let rest = self.bytes.get(i..).unwrap_or_default();
            match memchr::memchr2(quote, b'\\', rest) {
                Some(j) if rest.get(j) == Some(&b'\\') => i += j + 2,
                Some(j) => {
                    self.pos = i + j + 1;
                    return Ok(self.slice(start + 1, i + j));
                }
                None => break,
            }
        }
        Err(RawError::new(
            start,
            format!(
                "unterminated string: expected a closing {} for this one",
                describe(Some(quote))
            ),
        ))
    }

    /// Scans a value kept verbatim: balanced `{}`, `()` and `[]` groups and
    /// quoted strings, up to a `,`, whitespace or an unmatched closing
    /// bracket at nesting depth 0. Returns the exact text. `attr` names the
    /// attribute in errors.
    pub(crate) fn raw_value(&mut self, attr: &str) -> Result<&'a str, RawError> {
        let start = self.pos;
        let mut closers = [0u8; MAX_NESTING];
        let mut openers = [0usize; MAX_NESTING];
        let mut depth = 0usize;
        loop {
            let Some(b) = self.peek() else {
                if let (Some(&open), Some(&closer)) = (
                    openers.get(depth.wrapping_sub(1)),
                    closers.get(depth.wrapping_sub(1)),
                ) {
                    return Err(RawError::new(
                        open,
                        format!(
                            "expected {} to close this {} in attribute '{attr}'",
                            describe(Some(closer)),
                            describe(self.bytes.get(open).copied()),
                        ),
                    ));
                }
                break;
            };
            match b {
                b'"' | b'\'' => {
                    self.string()?;
                }
                b'{' | b'(' | b'[' => {
                    let (Some(closer), Some(opener)) =
                        (closers.get_mut(depth), openers.get_mut(depth))
                    else {
                        return Err(
                            self.error(format!("nesting is deeper than {MAX_NESTING} levels"))
                        );
                    };
                    *closer = match b {
                        b'{' => b'}',
                        b'(' => b')',
                        _ => b']',
                    };
                    *opener = self.pos;
                    depth += 1;
                    self.pos += 1;
                }
                b'}' | b')' | b']' => {
                    let Some(&closer) = closers.get(depth.wrapping_sub(1)) else {
                        break;
                    };
                    if closer != b {
                        return Err(self.error(format!(
                            "expected {} in attribute '{attr}', found {}",
                            describe(Some(closer)),
                            describe(Some(b))
                        )));
                    }
                    depth -= 1;
                    self.pos += 1;
                }
                b',' | b' ' | b'\t' | b'\r' | b'\n' if depth == 0 => break,
                b'/' if depth == 0 && matches!(self.peek_at(1), Some(b'*' | b'/')) => break,
                _ => {
                    // Runs of plain bytes (names, numbers, `=`) in one
                    // tight loop rather than one trip through the match
                    // each.
                    let mut i = self.pos + 1;
                    while self
                        .bytes
                        .get(i)
                        .is_some_and(|&b| !in_table(&RAW_SPECIAL, b))
                    {
                        i += 1;
                    }
                    self.pos = i;
                }
            }
        }
        if self.pos == start {
            return Err(self.error(format!(
                "expected a value for attribute '{attr}', found {}",
                describe(self.peek())
            )));
        }
        Ok(self.slice(start, self.pos))
    }

    /// From a `{` at the cursor, moves just past its matching `}`, skipping
    /// strings and comments. Returns false at the end of the input.
    pub(crate) fn skip_braced(&mut self) -> Result<bool, RawError> {
        self.skip_balanced(b'{', b'}')
    }

    /// From a `(` at the cursor, moves just past its matching `)`, skipping
    /// strings and comments. Returns false at the end of the input, or at a
    /// body's `{` before the parenthesis closed.
    pub(crate) fn skip_parens(&mut self) -> Result<bool, RawError> {
        self.skip_balanced(b'(', b')')
    }

    /// The walk behind `skip_braced` and `skip_parens`: from `open` at the
    /// cursor to just past its matching `close`.
    #[inline]
    fn skip_balanced(&mut self, open: u8, close: u8) -> Result<bool, RawError> {
        let braces = open == b'{';
        let mut depth = 0usize;
        while let Some(b) = self.peek() {
            match b {
                _ if b == open => {
                    depth += 1;
                    self.pos += 1;
                }
                _ if b == close => {
                    self.pos += 1;
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(true);
                    }
                }
                b'"' | b'\'' => {
                    self.string()?;
                }
                b'/' if matches!(self.peek_at(1), Some(b'*' | b'/')) => self.skip_trivia()?,
                // A body opening means the parenthesis was never closed.
                b'{' if !braces && depth == 1 && !self.brace_is_layout() => return Ok(false),
                // Inside braces only the bytes `next_interesting` looks for
                // matter, so it may jump over the rest.
                _ if braces => self.pos = next_interesting(self.bytes, self.pos + 1),
                _ => self.pos += 1,
            }
        }
        Ok(false)
    }

    /// XLA's layout lookahead: a `{` starts a layout only when an integer or
    /// `:` follows it.
    fn brace_is_layout(&self) -> bool {
        let mut c = *self;
        c.pos += 1;
        while matches!(c.peek(), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            c.pos += 1;
        }
        matches!(c.peek(), Some(b'0'..=b'9' | b':'))
    }

    /// Checks that the shape starting at the cursor nests at most
    /// [`MAX_NESTING`] levels, before the (recursive) shape parser runs.
    /// The scan stops where a shape cannot continue, so it is short: at a
    /// name, a string, or a `,`, line break, closing bracket or space (not
    /// followed by a layout's `{`) outside brackets.
    pub(crate) fn check_shape_nesting(&self) -> Result<(), RawError> {
        let mut depth = 0usize;
        let mut i = self.pos;
        while let Some(&b) = self.bytes.get(i) {
            match in_table(&SHAPE_CLASS, b) {
                0 => {}
                1 => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(RawError::new(
                            i,
                            format!("nesting is deeper than {MAX_NESTING} levels"),
                        ));
                    }
                }
                2 => {
                    if depth == 0 {
                        return Ok(());
                    }
                    depth -= 1;
                }
                3 => return Ok(()),
                4 if depth == 0 => return Ok(()),
                5 if depth == 0 => {
                    let mut j = i + 1;
                    while matches!(self.bytes.get(j), Some(b' ' | b'\t' | b'\r' | b'\n')) {
                        j += 1;
                    }
                    if self.bytes.get(j) != Some(&b'{') {
                        return Ok(());
                    }
                    i = j;
                    continue;
                }
                6 if self.bytes.get(i + 1) == Some(&b'*') => {
                    // A comment such as `/*index=5*/` inside a tuple shape.
                    let rest = self.bytes.get(i + 2..).unwrap_or_default();
                    match memchr::memmem::find(rest, b"*/") {
                        Some(k) => i += 2 + k + 2,
                        None => return Ok(()),
                    }
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }
}

/// The entry of a 256-entry byte table for byte `b`.
#[inline(always)]
#[allow(clippy::indexing_slicing)] // A byte indexes 256 entries: never out of range.
fn in_table<T: Copy>(table: &[T; 256], b: u8) -> T {
    table[usize::from(b)]
}

/// Byte classes for [`Cursor::check_shape_nesting`]: 1 opens, 2 closes,
/// 3 ends a shape anywhere, 4 ends it outside brackets, 5 is a space, 6 a
/// slash.
#[allow(clippy::indexing_slicing)] // Bytes index 256 entries.
static SHAPE_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'(' as usize] = 1;
    t[b'[' as usize] = 1;
    t[b'{' as usize] = 1;
    t[b')' as usize] = 2;
    t[b']' as usize] = 2;
    t[b'}' as usize] = 2;
    t[b'%' as usize] = 3;
    t[b'"' as usize] = 3;
    t[b'\'' as usize] = 3;
    t[b',' as usize] = 4;
    t[b'\n' as usize] = 4;
    t[b' ' as usize] = 5;
    t[b'\t' as usize] = 5;
    t[b'\r' as usize] = 5;
    t[b'/' as usize] = 6;
    t
};

/// The offset of the first byte at or after `i` that the brace skipper
/// must look at (`{`, `}`, `"`, `'`, `/`), or the length. Eight bytes at a
/// time: a word has a byte equal to `b` when `(w ^ b*0x01..01) - 0x01..01`
/// sets the high bit of a byte that was zero; the lowest such byte is exact.
#[inline]
fn next_interesting(bytes: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    #[inline(always)]
    fn has(w: u64, b: u8) -> u64 {
        let x = w ^ (LO * u64::from(b));
        x.wrapping_sub(LO) & !x & HI
    }
    while let Some(chunk) = bytes.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let m = has(w, b'{') | has(w, b'}') | has(w, b'"') | has(w, b'\'') | has(w, b'/');
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if in_table(&INTERESTING, b) {
            return i;
        }
        i += 1;
    }
    bytes.len()
}

/// Bytes the brace skipper must look at.
#[allow(clippy::indexing_slicing)] // Bytes index 256 entries.
static INTERESTING: [bool; 256] = {
    let mut t = [false; 256];
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b'"' as usize] = true;
    t[b'\'' as usize] = true;
    t[b'/' as usize] = true;
    t
};

/// The bytes `Cursor::raw_value` must look at: quotes, brackets, the
/// separators that end a value at depth 0, and `/` (a comment may start).
#[allow(clippy::indexing_slicing)] // Bytes index 256 entries.
static RAW_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let special = b"\"'{}()[], \t\r\n/";
    let mut k = 0;
    while k < special.len() {
        t[special[k] as usize] = true;
        k += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    fn cur(s: &str) -> Cursor<'_> {
        Cursor::new(s)
    }

    #[test]
    fn trivia_skips_both_comment_kinds() {
        let mut c = cur("  /* a */ // b\n\t x");
        c.skip_trivia().unwrap();
        assert_eq!(c.peek(), Some(b'x'));
        let mut c = cur("  /* never closed");
        let e = c.skip_trivia().unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(e.message.contains("unterminated comment"));
        // A lone slash is not trivia.
        let mut c = cur(" / x");
        c.skip_trivia().unwrap();
        assert_eq!(c.peek(), Some(b'/'));
    }

    #[test]
    fn identifiers_and_names() {
        let mut c = cur("%get-tuple-element.3 rest");
        assert_eq!(c.name(), Some("get-tuple-element.3"));
        assert_eq!(c.pos, 20);
        let mut c = cur("_a.b-c=");
        assert_eq!(c.ident(), Some("_a.b-c"));
        let mut c = cur("%1x");
        assert_eq!(c.name(), None);
        assert_eq!(c.pos, 0);
        assert!(cur("ROOT %x").at_word(b"ROOT"));
        assert!(!cur("ROOTS").at_word(b"ROOT"));
    }

    #[test]
    fn integers() {
        assert_eq!(cur("-42,").int("n").unwrap(), -42);
        assert_eq!(cur("9223372036854775807").int("n").unwrap(), i64::MAX);
        assert_eq!(cur("-9223372036854775808").int("n").unwrap(), i64::MIN);
        let e = cur("9223372036854775808").int("an index").unwrap_err();
        assert_eq!(
            e.message,
            "integer 9223372036854775808 does not fit in 64 bits"
        );
        let e = cur("x").int("an index").unwrap_err();
        assert_eq!(e.message, "expected an index, found 'x'");
    }

    #[test]
    fn strings_keep_escapes() {
        let mut c = cur(r#""a\"b\\" tail"#);
        assert_eq!(c.string().unwrap(), r#"a\"b\\"#);
        assert_eq!(c.peek(), Some(b' '));
        let mut c = cur(r"'it\'s'");
        assert_eq!(c.string().unwrap(), r"it\'s");
        let e = cur(r#"  "open"#).string().unwrap_err();
        assert_eq!(e.offset, 0);
        let mut c = cur(r#"x "open\"#);
        c.pos = 2;
        assert!(
            c.string()
                .unwrap_err()
                .message
                .contains("unterminated string")
        );
    }

    #[test]
    fn raw_values_are_balanced_and_string_aware() {
        let mut c = cur(r#"{op_name="a}b," x={1}}, next"#);
        assert_eq!(
            c.raw_value("metadata").unwrap(),
            r#"{op_name="a}b," x={1}}"#
        );
        assert_eq!(c.peek(), Some(b','));
        let mut c = cur("[2,2]<=[4], x");
        assert_eq!(c.raw_value("replica_groups").unwrap(), "[2,2]<=[4]");
        let mut c = cur("kLoop\n");
        assert_eq!(c.raw_value("kind").unwrap(), "kLoop");
        let mut c = cur("{a)");
        assert_eq!(
            c.raw_value("x").unwrap_err().message,
            "expected '}' in attribute 'x', found ')'"
        );
        let mut c = cur("{(");
        let e = c.raw_value("metadata").unwrap_err();
        assert_eq!(
            (e.offset, e.message.as_str()),
            (1, "expected ')' to close this '(' in attribute 'metadata'")
        );
        let mut c = cur(", x");
        assert!(
            c.raw_value("kind")
                .unwrap_err()
                .message
                .starts_with("expected a value for attribute 'kind'")
        );
        let deep = "{".repeat(MAX_NESTING + 1);
        let e = cur(&deep).raw_value("x").unwrap_err();
        assert_eq!(e.offset, MAX_NESTING);
        assert!(e.message.contains("nesting is deeper"));
    }

    #[test]
    fn next_interesting_finds_the_first_special_byte() {
        let specials = [b'{', b'}', b'"', b'\'', b'/'];
        for len in 0..40 {
            for at in 0..=len {
                for &sp in &specials {
                    let mut v = vec![b'a'; len];
                    // Bytes next to the specials' values must not match.
                    for (k, x) in v.iter_mut().enumerate() {
                        *x = [b'|', b'~', b'!', b'#', b'.', b'0', 0x80, 0xff][k % 8];
                    }
                    if at < len {
                        v[at] = sp;
                    }
                    assert_eq!(next_interesting(&v, 0), at, "len {len} at {at} byte {sp}");
                }
            }
        }
    }

    #[test]
    fn braced_skips_strings_and_comments() {
        let mut c = cur("{ a=\"}\" /* } */ // }\n {b} } tail");
        assert!(c.skip_braced().unwrap());
        assert_eq!(c.slice(c.pos, c.bytes.len()), " tail");
        let mut c = cur("{ {");
        assert!(!c.skip_braced().unwrap());
    }

    #[test]
    fn shape_nesting_check() {
        // Comments and spaces before a layout do not hide nesting.
        let hidden = format!("(/*=*/{}f32[]", "(".repeat(MAX_NESTING));
        assert!(cur(&hidden).check_shape_nesting().is_err());
        let spaced = format!("f32[2] {{0:{}", "P(f32[2] {0:".repeat(MAX_NESTING / 2));
        assert!(cur(&spaced).check_shape_nesting().is_err());
        let deep = format!("{}f32[]", "(".repeat(MAX_NESTING + 1));
        assert!(cur(&deep).check_shape_nesting().is_err());
        let ok = format!(
            "{}f32[]{} %x",
            "(".repeat(MAX_NESTING - 1),
            ")".repeat(MAX_NESTING - 1)
        );
        assert!(cur(&ok).check_shape_nesting().is_ok());
    }
}
