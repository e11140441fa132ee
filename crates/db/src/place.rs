//! Where each computation's text starts in the module's text: what error
//! messages cite. Kept out of salsa, which no query reads it from: an
//! edit that moves the computations after it does not touch their values.

/// A place in a text: 1-based line, 1-based column in characters, and
/// byte offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Start {
    /// The line.
    pub line: u32,
    /// The column, in characters.
    pub col: u32,
    /// The byte offset.
    pub offset: usize,
}

impl Start {
    /// The place just past `text`, read from this one.
    fn after(self, text: &str) -> Start {
        let mut at = self;
        for ch in text.chars() {
            if ch == '\n' {
                at.line += 1;
                at.col = 1;
            } else {
                at.col += 1;
            }
        }
        at.offset += text.len();
        at
    }
}

/// Where each computation starts: as loaded, and after edits of the
/// computations before it, from their texts and the text between
/// computations as loaded (the session's module is its header and
/// computations with what was between them).
#[derive(Clone, Debug, Default)]
pub(crate) struct Placement {
    starts: Vec<Start>,
    /// Per computation: the text between the end of the one before it and
    /// its start (empty for the first).
    gaps: Vec<Box<str>>,
    /// The first computation whose start an edit before it may have moved.
    stale_from: usize,
}

impl Placement {
    /// The placement of `outline`'s computations in `text`.
    pub(crate) fn of(text: &str, outline: &hlo::ModuleOutline) -> Placement {
        let spans: Vec<&hlo::Span> = outline.computations.iter().map(|c| &c.span).collect();
        let starts = spans
            .iter()
            .map(|s| Start {
                line: s.line,
                col: s.col,
                offset: s.start,
            })
            .collect();
        let gaps = spans
            .iter()
            .enumerate()
            .map(|(i, s)| match i.checked_sub(1).and_then(|p| spans.get(p)) {
                Some(before) => text.get(before.end..s.start).unwrap_or("").into(),
                None => "".into(),
            })
            .collect();
        Placement {
            starts,
            gaps,
            stale_from: spans.len(),
        }
    }

    /// Computation `i`'s text changed: those after it may have moved.
    pub(crate) fn edited(&mut self, i: usize) {
        self.stale_from = self.stale_from.min(i + 1);
    }

    /// Where computation `i` starts, the texts of the computations being
    /// `text_of`.
    pub(crate) fn start<'a>(&self, i: usize, text_of: impl Fn(usize) -> &'a str) -> Start {
        if i < self.stale_from {
            return self.starts.get(i).copied().unwrap_or_default();
        }
        let from = self.stale_from.saturating_sub(1);
        let mut at = self.starts.get(from).copied().unwrap_or_default();
        for j in from..i {
            at = at.after(text_of(j));
            at = at.after(self.gaps.get(j + 1).map_or("", |g| g));
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After an edit, the computations below it start where their texts
    /// put them in the edited module.
    #[test]
    fn starts_follow_edits_of_the_computations_before() {
        let text = "HloModule m\n\na {\n  x = f32[] parameter(0)\n}\n\nENTRY b {\n  y = f32[] parameter(0)\n}\n";
        let outline = hlo::outline(text, "m.hlo").unwrap();
        let mut p = Placement::of(text, &outline);
        let mut texts: Vec<String> = outline
            .computations
            .iter()
            .map(|c| c.span.text(text).to_string())
            .collect();
        assert_eq!(p.start(1, |j| &texts[j]).line, 7);
        texts[0] = "a {\n  x = f32[] parameter(0)\n  z = f32[] constant(1)\n}".into();
        p.edited(0);
        let edited = format!("HloModule m\n\n{}\n\n{}\n", texts[0], texts[1]);
        let again = hlo::outline(&edited, "m.hlo").unwrap();
        let want = &again.computations[1].span;
        let got = p.start(1, |j| &texts[j]);
        assert_eq!(
            (got.line, got.col, got.offset),
            (want.line, want.col, want.start)
        );
        assert_eq!(
            p.start(0, |j| &texts[j]).offset,
            outline.computations[0].span.start
        );
    }
}
