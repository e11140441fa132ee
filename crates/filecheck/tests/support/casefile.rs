//! The conformance case format, shared by the `conformance` test and the
//! `compare_llvm` example.
//!
//! A case file starts with header lines, then has sections introduced by a
//! line that is exactly `--- check`, `--- input` or `--- stderr`:
//!
//! ```text
//! # A comment explaining what the case covers.
//! ARGS: --check-prefix=FOO --strict-whitespace
//! EXIT: 1
//! STDERR-CONTAINS: expected string not found
//! INPUT-NO-EOL
//! --- check
//! FOO: bar
//! --- input
//! baz
//! --- stderr
//! check.txt:1:6: error: FOO: expected string not found in input
//! ...
//! ```
//!
//! * `ARGS` are FileCheck options, split like a shell would (single and
//!   double quotes group words). The check file is always passed as
//!   `check.txt` and the input on standard input; the input is also written
//!   to `input.txt` for cases that use `--input-file=input.txt`.
//! * `EXIT` is the exit status LLVM's FileCheck gives (recorded with
//!   `cargo run --example compare_llvm -- --bless`).
//! * `STDERR-CONTAINS` (repeatable) must appear in the diagnostics.
//! * `INPUT-NO-EOL` / `CHECK-NO-EOL` drop the final newline of a section.
//! * `STDERR-INEXACT` marks a case whose diagnostic wording knowingly
//!   differs from LLVM's (the reason is in a `#` comment).
//! * `--- stderr`, when present, is LLVM's exact stderr with
//!   `--dump-input=never` (minus its `FileCheck command line:` line).

#![allow(dead_code)]

use std::path::Path;

/// One parsed case file.
#[derive(Debug, Clone, Default)]
pub struct Case {
    pub header: Vec<String>,
    pub args: Vec<String>,
    pub exit: Option<i32>,
    pub stderr_contains: Vec<String>,
    pub check: String,
    pub input: String,
    pub stderr: Option<String>,
}

/// Splits an `ARGS` line into words with shell-like quoting.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(other) => current.push(other),
                        None => return Err(format!("unterminated quote in `{line}`")),
                    }
                }
            }
            other => {
                in_word = true;
                current.push(other);
            }
        }
    }
    if in_word {
        words.push(current);
    }
    Ok(words)
}

fn is_section_marker(line: &str) -> bool {
    matches!(line, "--- check" | "--- input" | "--- stderr")
}

/// Parses a case file.
pub fn parse(text: &str) -> Result<Case, String> {
    let mut case = Case::default();
    let mut input_no_eol = false;
    let mut check_no_eol = false;
    let mut lines = text.split_inclusive('\n').peekable();

    while let Some(line) = lines.peek() {
        let trimmed = line.trim_end_matches('\n');
        if is_section_marker(trimmed) {
            break;
        }
        lines.next();
        case.header.push(trimmed.to_string());
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(args) = trimmed.strip_prefix("ARGS:") {
            case.args = split_words(args.trim())?;
        } else if let Some(exit) = trimmed.strip_prefix("EXIT:") {
            case.exit = Some(
                exit.trim()
                    .parse()
                    .map_err(|e| format!("bad EXIT `{exit}`: {e}"))?,
            );
        } else if let Some(text) = trimmed.strip_prefix("STDERR-CONTAINS:") {
            case.stderr_contains.push(text.trim().to_string());
        } else if trimmed == "INPUT-NO-EOL" {
            input_no_eol = true;
        } else if trimmed == "CHECK-NO-EOL" {
            check_no_eol = true;
        } else if trimmed == "STDERR-INEXACT" {
            // Our wording differs from LLVM's on purpose; see the case's
            // comment. Only the exit status and STDERR-CONTAINS are checked.
        } else {
            return Err(format!("unknown header line `{trimmed}`"));
        }
    }

    let mut current: Option<&str> = None;
    let mut body = String::new();
    let mut seen = Vec::new();
    let flush = |name: Option<&str>, body: &mut String, case: &mut Case| -> Result<(), String> {
        let text = std::mem::take(body);
        match name {
            Some("check") => case.check = text,
            Some("input") => case.input = text,
            Some("stderr") => case.stderr = Some(text),
            Some(other) => return Err(format!("unknown section `{other}`")),
            None => {}
        }
        Ok(())
    };
    for line in lines {
        let trimmed = line.trim_end_matches('\n');
        if is_section_marker(trimmed) {
            flush(current, &mut body, &mut case)?;
            let name = &trimmed[4..];
            if seen.contains(&name) {
                return Err(format!("duplicate section `{name}`"));
            }
            seen.push(name);
            current = Some(name);
            continue;
        }
        body.push_str(line);
    }
    flush(current, &mut body, &mut case)?;
    if !seen.contains(&"check") {
        return Err("missing `--- check` section".to_string());
    }
    if input_no_eol && case.input.ends_with('\n') {
        case.input.pop();
    }
    if check_no_eol && case.check.ends_with('\n') {
        case.check.pop();
    }
    Ok(case)
}

/// Renders a case back to text, replacing the recorded verdict.
pub fn render(case: &Case, exit: i32, stderr: &str) -> String {
    let mut out = String::new();
    let mut wrote_exit = false;
    for line in &case.header {
        if line.starts_with("EXIT:") {
            out.push_str(&format!("EXIT: {exit}\n"));
            wrote_exit = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !wrote_exit {
        out.push_str(&format!("EXIT: {exit}\n"));
    }
    out.push_str("--- check\n");
    out.push_str(&case.check);
    if !case.check.ends_with('\n') && !case.check.is_empty() {
        out.push('\n');
    }
    out.push_str("--- input\n");
    out.push_str(&case.input);
    if !case.input.ends_with('\n') && !case.input.is_empty() {
        out.push('\n');
    }
    if !stderr.is_empty() {
        out.push_str("--- stderr\n");
        out.push_str(stderr);
        if !stderr.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// Drops the line LLVM adds after some errors to echo its own command line,
/// which names the LLVM binary and so cannot be reproduced.
pub fn normalize_llvm_stderr(stderr: &str) -> String {
    stderr
        .split_inclusive('\n')
        .filter(|line| !line.starts_with("FileCheck command line:"))
        .collect()
}

/// Writes the case's files into `dir` and returns the full argument list.
pub fn prepare(case: &Case, dir: &Path) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("check.txt"), &case.check)?;
    std::fs::write(dir.join("input.txt"), &case.input)?;
    let mut args = case.args.clone();
    args.push("check.txt".to_string());
    args.push("--dump-input=never".to_string());
    Ok(args)
}
