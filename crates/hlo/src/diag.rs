//! Parse diagnostics: one error with its file, line and column, printed
//! the way compilers print them.
//!
//! Architecture invariant: the parser works with byte offsets only and
//! turns an offset into a line and a column once, when it fails; the happy
//! path never counts lines.

use std::fmt;

/// A parse failure: where it is and what was expected there.
///
/// `Display` prints `FILE:LINE:COL: error: MESSAGE`, then the source line
/// and a caret under the column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The file name given to the parser, as the user wrote it.
    pub file: String,
    /// The 1-based line.
    pub line: u32,
    /// The 1-based column, counted in characters (not bytes).
    pub col: u32,
    /// Byte offset of the error in the parsed text (in the module text when
    /// the error comes from [`crate::parse_module`]).
    pub offset: usize,
    /// What went wrong, phrased as what was expected.
    pub message: String,
    /// The text of the offending line, without its line break.
    pub source_line: String,
}

/// The name the design uses for a reported problem.
pub type Diagnostic = ParseError;

impl std::error::Error for ParseError {}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: error: {}",
            self.file, self.line, self.col, self.message
        )?;
        f.write_str("\n")?;
        f.write_str(&self.source_line)?;
        f.write_str("\n")?;
        // Keep tabs so that the caret lines up under tab-indented text.
        for c in self
            .source_line
            .chars()
            .take(self.col.saturating_sub(1) as usize)
        {
            f.write_str(if c == '\t' { "\t" } else { " " })?;
        }
        f.write_str("^")
    }
}

/// An error inside the parser: a byte offset into the text being parsed
/// and a message. Converted to a [`ParseError`] at the API boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawError {
    pub offset: usize,
    pub message: String,
}

impl RawError {
    pub(crate) fn new(offset: usize, message: impl Into<String>) -> RawError {
        RawError {
            offset,
            message: message.into(),
        }
    }
}

/// Where a piece of text starts in its file: its 1-based line and column
/// (the column in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Origin {
    pub line: u32,
    pub col: u32,
    /// Byte offset of the piece in the whole file.
    pub offset: usize,
}

impl Origin {
    pub(crate) const START: Origin = Origin {
        line: 1,
        col: 1,
        offset: 0,
    };
}

/// The line and column of byte `offset` in `text`, where `text` starts at
/// `origin`. Offsets past the end point just after the last character.
pub(crate) fn line_col(text: &[u8], offset: usize, origin: Origin) -> (u32, u32) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or_default();
    let newlines = memchr::memchr_iter(b'\n', before).count();
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    let chars = count_chars(before.get(line_start..).unwrap_or_default());
    let line = origin
        .line
        .saturating_add(u32::try_from(newlines).unwrap_or(u32::MAX));
    let col = if newlines == 0 {
        origin.col.saturating_add(chars)
    } else {
        chars.saturating_add(1)
    };
    (line, col)
}

/// Characters in a byte slice that may end in the middle of a character:
/// every byte that does not continue a UTF-8 sequence starts one.
fn count_chars(bytes: &[u8]) -> u32 {
    let n = bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The text of the line holding byte `offset`, without its line break.
pub(crate) fn source_line(text: &[u8], offset: usize) -> String {
    let offset = offset.min(text.len());
    let start = memchr::memrchr(b'\n', text.get(..offset).unwrap_or_default()).map_or(0, |i| i + 1);
    let end = memchr::memchr(b'\n', text.get(offset..).unwrap_or_default())
        .map_or(text.len(), |i| offset + i);
    let line = text.get(start..end).unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

/// Builds the public error for a failure at byte `err.offset` of `text`,
/// a piece of a file that starts at `origin`.
pub(crate) fn make_error(text: &[u8], err: RawError, origin: Origin, file: &str) -> ParseError {
    let (line, col) = line_col(text, err.offset, origin);
    let mut source = source_line(text, err.offset);
    // The piece starts in the middle of its first line: pad so that the
    // caret still lines up.
    if line == origin.line && origin.col > 1 {
        let mut padded = " ".repeat(origin.col as usize - 1);
        padded.push_str(&source);
        source = padded;
    }
    ParseError {
        file: file.to_string(),
        line,
        col,
        offset: origin.offset.saturating_add(err.offset.min(text.len())),
        message: err.message,
        source_line: source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_count_characters() {
        let text = "ab\nçd x\n";
        assert_eq!(line_col(text.as_bytes(), 0, Origin::START), (1, 1));
        assert_eq!(line_col(text.as_bytes(), 3, Origin::START), (2, 1));
        // 'x' is byte 7 but character 4 of line 2.
        assert_eq!(line_col(text.as_bytes(), 7, Origin::START), (2, 4));
        let origin = Origin {
            line: 10,
            col: 5,
            offset: 100,
        };
        assert_eq!(line_col(text.as_bytes(), 1, origin), (10, 6));
        assert_eq!(line_col(text.as_bytes(), 4, origin), (11, 2));
    }

    #[test]
    fn display_has_caret_under_column() {
        let text = "HloModule m\n\tfoo bar\n";
        let e = make_error(
            text.as_bytes(),
            RawError::new(17, "expected x"),
            Origin::START,
            "f.hlo",
        );
        assert_eq!(
            e.to_string(),
            "f.hlo:2:6: error: expected x\n\tfoo bar\n\t    ^"
        );
    }
}

/// The 1-based line and column where `computation`'s header (with
/// `instruction` `None`) or the definition of `instruction` in it starts in
/// module `text`, found by name: a header is a line starting with
/// `%name` or `ENTRY %name`; a definition is a line of its body starting
/// (after indentation and `ROOT`) with `%name` and then ` ` or `=`. The
/// column counts characters.
pub fn find_definition(
    text: &str,
    computation: &str,
    instruction: Option<&str>,
) -> Option<(usize, usize)> {
    let names = |line: &str, name: &str| -> bool {
        let rest = line.strip_prefix('%').unwrap_or(line);
        rest.strip_prefix(name)
            .is_some_and(|after| after.is_empty() || after.starts_with([' ', '=', '(', '{', '\t']))
    };
    let column = |line: &str, at: &str| line[..line.len() - at.len()].chars().count() + 1;
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        if !inside {
            let header = line.strip_prefix("ENTRY ").unwrap_or(line);
            if line.starts_with(['%', 'E']) && names(header, computation) {
                match instruction {
                    None => return Some((i + 1, column(line, header))),
                    Some(_) => inside = true,
                }
            }
            continue;
        }
        let body = line.trim_start();
        if body.starts_with('}') {
            return None;
        }
        let def = body.strip_prefix("ROOT ").map_or(body, str::trim_start);
        if instruction.is_some_and(|inst| names(def, inst)) {
            return Some((i + 1, column(line, def)));
        }
    }
    None
}

#[cfg(test)]
mod locate_tests {
    use super::find_definition;

    const TEXT: &str = "HloModule m\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n  ROOT %a2 = f32[4]{0} negate(%p)\n}\n";

    #[test]
    fn finds_definitions_and_headers_by_name() {
        assert_eq!(find_definition(TEXT, "add", Some("b")), Some((5, 3)));
        assert_eq!(find_definition(TEXT, "add", Some("s")), Some((6, 8)));
        assert_eq!(find_definition(TEXT, "main", Some("a2")), Some((11, 8)));
        assert_eq!(find_definition(TEXT, "main", None), Some((9, 7)));
        assert_eq!(find_definition(TEXT, "add", None), Some((3, 1)));
        // A name that is only a prefix of another, or in another computation.
        assert_eq!(find_definition(TEXT, "main", Some("a")), None);
        assert_eq!(find_definition(TEXT, "nope", Some("a")), None);
    }
}
