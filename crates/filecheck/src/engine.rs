//! Matching a parsed check file against the input: LLVM's
//! `FileCheck::checkInput` and `FileCheckString::Check` with its helpers
//! (`CheckDag`, `CheckNot`, `CheckNext`, `CheckSame`) and the diagnostics
//! they print (`PrintMatch`, `PrintNoMatch`, `printFuzzyMatch`).
//!
//! All positions are absolute byte offsets into the canonicalized input; a
//! "region" is a `(start, end)` pair standing for LLVM's `StringRef Buffer`.

use crate::checkfile::{CheckString, Program};
use crate::pattern::{CheckKind, Found, Input, MatchError, Pattern, VarState};
use crate::source::{BufferId, Loc, Severity, SourceMgr};

pub(crate) struct EngineOptions {
    pub(crate) enable_var_scope: bool,
    pub(crate) allow_deprecated_dag_overlap: bool,
}

pub(crate) struct Engine<'a> {
    sm: &'a SourceMgr,
    program: &'a Program,
    input: Input<'a>,
    input_buffer: BufferId,
    vars: VarState,
    options: EngineOptions,
    /// The diagnostics printed so far.
    pub(crate) out: String,
}

/// A half-open byte range of the input.
type Region = (usize, usize);

impl<'a> Engine<'a> {
    pub(crate) fn new(
        sm: &'a SourceMgr,
        program: &'a Program,
        input_buffer: BufferId,
        ignore_case: bool,
        options: EngineOptions,
    ) -> Self {
        let text = sm.text(input_buffer);
        let lowered = ignore_case.then(|| text.to_ascii_lowercase());
        let vars = VarState {
            strings: program.initial_vars.strings.clone(),
            numeric: program.initial_vars.numeric.clone(),
            line_var: program.initial_vars.line_var,
        };
        Engine {
            sm,
            program,
            input: Input { text, lowered },
            input_buffer,
            vars,
            options,
            out: String::new(),
        }
    }

    fn input_loc(&self, offset: usize) -> Loc {
        Loc::new(self.input_buffer, offset)
    }

    fn note(&mut self, offset: usize, message: &str, range: Option<Region>) {
        let loc = self.input_loc(offset);
        self.sm
            .print(&mut self.out, loc, Severity::Note, message, range);
    }

    fn error(&mut self, loc: Loc, message: &str) {
        self.sm
            .print(&mut self.out, loc, Severity::Error, message, None);
    }

    fn find(
        &mut self,
        pattern: &Pattern,
        region: Region,
    ) -> Result<Option<Found>, Vec<MatchError>> {
        pattern.find(&self.input, region.0, region.1, &mut self.vars)
    }

    /// Runs every check; returns whether all of them passed.
    pub(crate) fn check_input(&mut self) -> bool {
        let checks = &self.program.checks;
        let mut buffer: Region = (0, self.input.text.len());
        let mut failed = false;
        let (mut i, mut j) = (0usize, 0usize);
        loop {
            // Each CHECK-LABEL closes the region of the directives before it;
            // labels are located first, ignoring CHECK-DAG and CHECK-NOT.
            let mut region = buffer;
            if j < checks.len() {
                let label = &checks[j];
                if label.pattern.ty.kind != CheckKind::Label {
                    j += 1;
                    continue;
                }
                let Some((pos, len)) = self.check_string(label, buffer, true) else {
                    return false;
                };
                region = (buffer.0, pos + len);
                buffer = (pos + len, buffer.1);
                j += 1;
            }

            // The region before the first label keeps `-D` variables.
            if i != 0 && self.options.enable_var_scope {
                self.vars.clear_local(&self.program.numeric_names);
            }

            while i != j {
                let Some((pos, len)) = self.check_string(&checks[i], region, false) else {
                    failed = true;
                    i = j;
                    break;
                };
                region = (pos + len, region.1);
                i += 1;
            }

            if j == checks.len() {
                break;
            }
        }
        !failed
    }

    /// LLVM's `FileCheckString::Check`: returns the start and length of the
    /// directive's match (all `COUNT` repetitions) or `None` after printing
    /// why it failed.
    fn check_string(
        &mut self,
        check: &CheckString,
        buffer: Region,
        label_scan: bool,
    ) -> Option<(usize, usize)> {
        let mut last_pos = buffer.0;
        let mut not_strings: Vec<usize> = Vec::new();
        if !label_scan {
            last_pos = self.check_dag(check, buffer, &mut not_strings)?;
        }

        let pattern = &check.pattern;
        let mut last_match_end = last_pos;
        let mut first_match_pos = last_pos;
        for repetition in 1..=pattern.ty.count {
            let search = (last_match_end, buffer.1);
            let errors = match self.find(pattern, search) {
                Ok(Some(found)) => {
                    if repetition == 1 {
                        first_match_pos = found.pos;
                    }
                    last_match_end = found.pos + found.len;
                    continue;
                }
                // A plain miss has no errors to show.
                Ok(None) => Vec::new(),
                Err(errors) => errors,
            };
            let (prefix, loc) = (&check.prefix, check.loc);
            self.print_no_match(true, prefix, loc, pattern, repetition, search, errors);
            return None;
        }
        let match_len = last_match_end - first_match_pos;

        if !label_scan {
            let skipped = (last_pos, first_match_pos);
            if self.check_next(check, skipped) || self.check_same(check, skipped) {
                return None;
            }
            if self.check_not(&check.prefix, skipped, &not_strings) {
                return None;
            }
        }
        Some((first_match_pos, match_len))
    }

    /// LLVM's `CountNumNewlinesBetween`: `\n\r` and `\r\n` count once.
    /// Returns the count and the position just after the first newline.
    fn count_newlines(&self, region: Region) -> (usize, Option<usize>) {
        let bytes = &self.input.text.as_bytes()[region.0..region.1];
        let mut count = 0;
        let mut first = None;
        let mut i = 0;
        while let Some(p) = bytes[i..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let at = i + p;
            count += 1;
            let mut next = at + 1;
            if next < bytes.len()
                && matches!(bytes[next], b'\n' | b'\r')
                && bytes[next] != bytes[at]
            {
                next += 1;
            }
            if count == 1 {
                first = Some(region.0 + next);
            }
            i = next;
        }
        (count, first)
    }

    fn check_next(&mut self, check: &CheckString, skipped: Region) -> bool {
        let kind = check.pattern.ty.kind;
        if kind != CheckKind::Next && kind != CheckKind::Empty {
            return false;
        }
        let name = format!(
            "{}{}",
            check.prefix,
            if kind == CheckKind::Empty {
                "-EMPTY"
            } else {
                "-NEXT"
            }
        );
        let (newlines, first_newline) = self.count_newlines(skipped);
        if newlines == 0 {
            self.error(
                check.loc,
                &format!("{name}: is on the same line as previous match"),
            );
            self.note(skipped.1, "'next' match was here", None);
            self.note(skipped.0, "previous match ended here", None);
            return true;
        }
        if newlines != 1 {
            self.error(
                check.loc,
                &format!("{name}: is not on the line after the previous match"),
            );
            self.note(skipped.1, "'next' match was here", None);
            self.note(skipped.0, "previous match ended here", None);
            if let Some(first) = first_newline {
                self.note(
                    first,
                    "non-matching line after previous match is here",
                    None,
                );
            }
            return true;
        }
        false
    }

    fn check_same(&mut self, check: &CheckString, skipped: Region) -> bool {
        if check.pattern.ty.kind != CheckKind::Same {
            return false;
        }
        let (newlines, _) = self.count_newlines(skipped);
        if newlines != 0 {
            let message = format!(
                "{}-SAME: is not on the same line as the previous match",
                check.prefix
            );
            self.error(check.loc, &message);
            self.note(skipped.1, "'next' match was here", None);
            self.note(skipped.0, "previous match ended here", None);
            return true;
        }
        false
    }

    /// LLVM 14's `CheckNot`: reports every CHECK-NOT pattern found in
    /// `region`; returns whether any was.
    fn check_not(&mut self, prefix: &str, region: Region, not_strings: &[usize]) -> bool {
        let mut failed = false;
        for &index in not_strings {
            let pattern = &self.program.dag_not[index];
            match self.find(pattern, region) {
                Ok(None) => {}
                Ok(Some(found)) => {
                    self.print_excluded_match(prefix, pattern, found);
                    failed = true;
                }
                Err(errors) => {
                    self.print_no_match(false, prefix, pattern.loc, pattern, 1, region, errors);
                    failed = true;
                }
            }
        }
        failed
    }

    /// LLVM's `CheckDag`: matches the CHECK-DAG groups before a directive,
    /// checking the CHECK-NOTs between groups. Returns where the directive's
    /// own search starts.
    fn check_dag(
        &mut self,
        check: &CheckString,
        buffer: Region,
        not_strings: &mut Vec<usize>,
    ) -> Option<usize> {
        if check.dag_not.is_empty() {
            return Some(buffer.0);
        }
        let mut start_pos = buffer.0;
        // Sorted, non-overlapping match ranges of the current DAG group.
        let mut ranges: Vec<Region> = Vec::new();

        for (position, &index) in check.dag_not.iter().enumerate() {
            let pattern = &self.program.dag_not[index];
            if pattern.ty.kind == CheckKind::Not {
                not_strings.push(index);
                continue;
            }

            // Where to search next: after any earlier match this one overlaps.
            let mut match_pos = start_pos;
            let mut next_range = 0usize;
            loop {
                let search = (match_pos, buffer.1);
                // A plain miss has no errors to show.
                let result = self
                    .find(pattern, search)
                    .and_then(|f| f.ok_or_else(Vec::new));
                let found = match result {
                    Ok(found) => found,
                    Err(errors) => {
                        let (prefix, loc) = (&check.prefix, pattern.loc);
                        self.print_no_match(true, prefix, loc, pattern, 1, search, errors);
                        return None;
                    }
                };
                let current = (found.pos, found.pos + found.len);
                if self.options.allow_deprecated_dag_overlap {
                    match ranges.first_mut() {
                        None => ranges.push(current),
                        Some(block) => {
                            block.0 = block.0.min(current.0);
                            block.1 = block.1.max(current.1);
                        }
                    }
                    break;
                }
                // Find the first earlier match this one could overlap.
                let mut overlap = false;
                while next_range < ranges.len() {
                    let old = ranges[next_range];
                    if current.0 < old.1 {
                        overlap = old.0 < current.1;
                        break;
                    }
                    next_range += 1;
                }
                if !overlap {
                    ranges.insert(next_range, current);
                    break;
                }
                // Retry after the overlapped match.
                match_pos = ranges[next_range].1;
                next_range += 1;
            }

            // At the end of a DAG group, check the CHECK-NOTs before it.
            let group_ends = check
                .dag_not
                .get(position + 1)
                .is_none_or(|&next| self.program.dag_not[next].ty.kind == CheckKind::Not);
            if group_ends {
                let (Some(&first), Some(&last)) = (ranges.first(), ranges.last()) else {
                    continue;
                };
                if !not_strings.is_empty() {
                    if self.check_not(
                        &check.prefix,
                        (start_pos, first.0.max(start_pos)),
                        not_strings,
                    ) {
                        return None;
                    }
                    not_strings.clear();
                }
                start_pos = last.1;
                ranges.clear();
            }
        }
        Some(start_pos)
    }

    /// LLVM's `PrintMatch` for a CHECK-NOT pattern that matched.
    fn print_excluded_match(&mut self, prefix: &str, pattern: &Pattern, found: Found) {
        let message = format!(
            "{}: excluded string found in input",
            pattern.ty.description(prefix)
        );
        self.error(pattern.loc, &message);
        let range = (found.pos, found.pos + found.len);
        self.note(found.pos, "found here", Some(range));
        for note in pattern.substitution_notes(self.input.text, &self.vars) {
            self.note(found.pos, &note, None);
        }
        for (name, range) in pattern.captured_vars(&self.vars, &self.program.numeric_names) {
            self.note(range.0, &format!("captured var \"{name}\""), Some(range));
        }
    }

    /// LLVM's `PrintNoMatch`. Nothing is printed for a CHECK-NOT that did not
    /// match unless its pattern could not be evaluated.
    #[allow(clippy::too_many_arguments)]
    fn print_no_match(
        &mut self,
        expected: bool,
        prefix: &str,
        loc: Loc,
        pattern: &Pattern,
        repetition: usize,
        search: Region,
        errors: Vec<MatchError>,
    ) {
        let has_pattern_error = !errors.is_empty();
        if !expected && !has_pattern_error {
            return;
        }
        for error in errors {
            match error {
                MatchError::UndefinedVariable { name, loc } => {
                    self.error(loc, &format!("undefined variable: {name}"));
                }
                MatchError::Overflow { loc } => {
                    self.error(
                        loc,
                        "unable to substitute variable or numeric expression: overflow error",
                    );
                }
                MatchError::Unrepresentable { range } => {
                    let loc = self.input_loc(range.0);
                    self.error(loc, "unable to represent numeric value");
                }
                MatchError::InvalidRegex { loc, message } => {
                    self.error(loc, &format!("invalid regex: {message}"));
                }
            }
        }
        if !has_pattern_error {
            let mut message = format!(
                "{}: expected string not found in input",
                pattern.ty.description(prefix)
            );
            if pattern.ty.count > 1 {
                message.push_str(&format!(" ({repetition} out of {})", pattern.ty.count));
            }
            self.error(loc, &message);
            self.note(search.0, "scanning from here", None);
        }
        for note in pattern.substitution_notes(self.input.text, &self.vars) {
            self.note(search.0, &note, None);
        }
        if expected {
            self.print_fuzzy_match(pattern, search);
        }
    }

    /// LLVM's `printFuzzyMatch`: points at the input position (within 4 KiB)
    /// that is closest, by edit distance, to the pattern text.
    fn print_fuzzy_match(&mut self, pattern: &Pattern, search: Region) {
        let buffer = &self.input.text.as_bytes()[search.0..search.1];
        let example = pattern.example_text().as_bytes();
        // A pattern made only of substitutions has no text to compare with:
        // LLVM then reads the distance of two empty strings from an
        // uninitialized slot (`ComputeEditDistance` never sets `Row[0]`), so
        // its note is arbitrary. We use the true distance, 0, which gives the
        // answer LLVM usually prints: the first non-blank character.
        let (fixed_len, regex_len) = pattern.example_sizes();
        let limit = buffer.len().min(4096);
        // LLVM skips this quadratic search for very long patterns.
        if 4096 * 2048 < limit.saturating_mul(fixed_len.max(regex_len)) {
            return;
        }
        let mut lines_forward = 0usize;
        let mut best: Option<usize> = None;
        let mut best_quality = 0.0f64;
        let mut row = Vec::with_capacity(example.len() + 1);
        for i in 0..limit {
            if buffer[i] == b'\n' {
                lines_forward += 1;
            }
            if buffer[i] == b' ' || buffer[i] == b'\t' {
                continue;
            }
            let prefix_len = example.len().min(buffer.len() - i);
            let candidate = &buffer[i..i + prefix_len];
            let candidate = candidate
                .iter()
                .position(|&b| b == b'\n')
                .map_or(candidate, |p| &candidate[..p]);
            let distance = edit_distance(candidate, example, &mut row);
            let quality = distance as f64 + lines_forward as f64 / 100.0;
            if best.is_none() || quality < best_quality {
                best = Some(i);
                best_quality = quality;
            }
        }
        if let Some(best) = best.filter(|&b| b != 0)
            && best_quality < 50.0
        {
            self.note(search.0 + best, "possible intended match here", None);
        }
    }
}

/// Levenshtein distance, as `llvm::ComputeEditDistance` with replacements.
fn edit_distance(from: &[u8], to: &[u8], row: &mut Vec<usize>) -> usize {
    row.clear();
    row.extend(0..=to.len());
    for (y, &from_byte) in from.iter().enumerate() {
        let mut previous = row[0];
        row[0] = y + 1;
        for x in 1..=to.len() {
            let old = row[x];
            let replace = previous + usize::from(from_byte != to[x - 1]);
            row[x] = replace.min(row[x - 1].min(row[x]) + 1);
            previous = old;
        }
    }
    row[to.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_is_levenshtein() {
        let mut row = Vec::new();
        assert_eq!(edit_distance(b"kitten", b"sitting", &mut row), 3);
        assert_eq!(edit_distance(b"", b"abc", &mut row), 3);
        assert_eq!(edit_distance(b"abc", b"abc", &mut row), 0);
    }
}
