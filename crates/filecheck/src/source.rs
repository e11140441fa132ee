//! Named text buffers and LLVM `SourceMgr`-style diagnostic rendering.
//!
//! Every diagnostic FileCheck prints points into one of a few buffers: the
//! (canonicalized) check file, the (canonicalized) input, a synthetic
//! `command line` buffer per `--implicit-check-not` pattern, and a synthetic
//! `Global defines` buffer for `-D` definitions. Positions are byte offsets,
//! and the rendering below reproduces `llvm::SMDiagnostic::print` byte for
//! byte (without colors) so that our output can be compared with LLVM's.

use std::fmt::Write as _;

/// Index of a buffer inside a [`SourceMgr`].
pub(crate) type BufferId = usize;

/// A position inside one of the buffers of a [`SourceMgr`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) buffer: BufferId,
    pub(crate) offset: usize,
}

impl Loc {
    pub(crate) fn new(buffer: BufferId, offset: usize) -> Self {
        Loc { buffer, offset }
    }

    /// The location `delta` bytes further into the same buffer.
    pub(crate) fn advanced(self, delta: usize) -> Self {
        Loc {
            buffer: self.buffer,
            offset: self.offset + delta,
        }
    }
}

/// The severity word LLVM prints after the location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Severity {
    Error,
    Note,
}

impl Severity {
    fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Note => "note",
        }
    }
}

struct Buffer {
    name: String,
    text: String,
}

/// Owns the buffers diagnostics refer to.
#[derive(Default)]
pub(crate) struct SourceMgr {
    buffers: Vec<Buffer>,
}

/// LLVM expands tabs in quoted source lines to multiples of this width.
const TAB_STOP: usize = 8;

impl SourceMgr {
    pub(crate) fn add(&mut self, name: impl Into<String>, text: String) -> BufferId {
        self.buffers.push(Buffer {
            name: name.into(),
            text,
        });
        self.buffers.len() - 1
    }

    pub(crate) fn text(&self, id: BufferId) -> &str {
        &self.buffers[id].text
    }

    /// Appends one diagnostic to `out`, formatted like LLVM's
    /// `SourceMgr::PrintMessage`: `name:line:col: severity: message`, then the
    /// quoted source line and a caret line. `range` (absolute byte offsets in
    /// the same buffer) is underlined with `~` where it intersects the line.
    pub(crate) fn print(
        &self,
        out: &mut String,
        loc: Loc,
        severity: Severity,
        message: &str,
        range: Option<(usize, usize)>,
    ) {
        let buffer = &self.buffers[loc.buffer];
        let bytes = buffer.text.as_bytes();
        let offset = loc.offset.min(bytes.len());

        // The quoted line is delimited by '\n' or '\r' on both sides, exactly
        // as SourceMgr::GetMessage scans for it.
        let line_start = bytes[..offset]
            .iter()
            .rposition(|&b| b == b'\n' || b == b'\r')
            .map_or(0, |p| p + 1);
        let line_end = bytes[offset..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .map_or(bytes.len(), |p| offset + p);
        // Line numbers count '\n' only, like SourceMgr's line cache.
        let line_number = 1 + memchr::memchr_iter(b'\n', &bytes[..offset]).count();
        let column = offset - line_start;

        let _ = writeln!(
            out,
            "{}:{}:{}: {}: {}",
            buffer.name,
            line_number,
            column + 1,
            severity.label(),
            message
        );

        let line = &bytes[line_start..line_end];
        // LLVM gives up on carets for lines with non-ASCII bytes because its
        // columns are byte based; it still quotes the line.
        if line.iter().any(|&b| b >= 0x80) {
            print_source_line(out, line);
            return;
        }

        let mut caret_line = vec![b' '; line.len() + 1];
        if let Some((range_start, range_end)) = range {
            // Only the part of the range on this line is underlined.
            if range_start <= line_end && range_end >= line_start {
                let from = range_start.max(line_start) - line_start;
                let to = (range_end.min(line_end) - line_start).min(caret_line.len());
                for slot in caret_line.iter_mut().take(to).skip(from) {
                    *slot = b'~';
                }
            }
        }
        let caret_column = column.min(line.len());
        caret_line[caret_column] = b'^';
        while caret_line.last() == Some(&b' ') {
            caret_line.pop();
        }

        print_source_line(out, line);
        // The caret line mirrors the tab expansion of the quoted line.
        let mut out_column = 0;
        for (index, &mark) in caret_line.iter().enumerate() {
            if line.get(index) != Some(&b'\t') {
                out.push(char::from(mark));
                out_column += 1;
                continue;
            }
            loop {
                out.push(char::from(mark));
                out_column += 1;
                if out_column % TAB_STOP == 0 {
                    break;
                }
            }
        }
        out.push('\n');
    }
}

/// Quotes one source line, expanding tabs to the next multiple of eight
/// columns as LLVM does.
fn print_source_line(out: &mut String, line: &[u8]) {
    let mut out_column = 0;
    let mut rest = line;
    while let Some(tab) = rest.iter().position(|&b| b == b'\t') {
        out.push_str(&String::from_utf8_lossy(&rest[..tab]));
        out_column += tab;
        loop {
            out.push(' ');
            out_column += 1;
            if out_column % TAB_STOP == 0 {
                break;
            }
        }
        rest = &rest[tab + 1..];
    }
    out.push_str(&String::from_utf8_lossy(rest));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, offset: usize, range: Option<(usize, usize)>) -> String {
        let mut sm = SourceMgr::default();
        let id = sm.add("f.txt", text.to_string());
        let mut out = String::new();
        sm.print(&mut out, Loc::new(id, offset), Severity::Note, "msg", range);
        out
    }

    #[test]
    fn caret_points_at_the_column() {
        assert_eq!(
            render("abc\ndef\n", 5, None),
            "f.txt:2:2: note: msg\ndef\n ^\n"
        );
    }

    #[test]
    fn range_is_underlined_and_clipped_to_the_line() {
        assert_eq!(
            render("abc\ndef\n", 4, Some((4, 20))),
            "f.txt:2:1: note: msg\ndef\n^~~\n"
        );
    }

    #[test]
    fn end_of_buffer_quotes_an_empty_line() {
        assert_eq!(render("abc\n", 4, None), "f.txt:2:1: note: msg\n\n^\n");
    }

    #[test]
    fn tabs_are_expanded_in_both_lines() {
        assert_eq!(
            render("\tx\n", 1, None),
            "f.txt:1:2: note: msg\n        x\n        ^\n"
        );
    }

    #[test]
    fn non_ascii_lines_have_no_caret() {
        assert_eq!(render("é x\n", 3, None), "f.txt:1:4: note: msg\né x\n");
    }
}
