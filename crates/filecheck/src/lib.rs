//! An implementation of LLVM's FileCheck, plus a lit-style RUN-line runner.
//!
//! [`check`] matches an input against a check file with the semantics of
//! LLVM 14's `FileCheck` (directives, patterns, variables, options) and
//! renders failures with LLVM's diagnostics. [`run_cli`] is the full
//! command-line tool, and [`lit`] runs the `RUN:` lines of golden tests.
//!
//! The differences from LLVM are listed in `docs/filecheck.md`; the main one
//! is that `{{...}}` regexes use the `regex` crate's syntax rather than POSIX
//! extended regular expressions.

mod checkfile;
mod cli;
mod engine;
mod expr;
pub mod lit;
mod pattern;
mod source;

pub use cli::{run_cli, run_cli_in_dir};

use checkfile::{ReadOptions, read_check_file};
use engine::{Engine, EngineOptions};
use pattern::PatternOptions;
use source::SourceMgr;

/// FileCheck's options; each field corresponds to the command-line option
/// of the same name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `--check-prefix` / `--check-prefixes`. Defaults to `["CHECK"]`.
    pub prefixes: Vec<String>,
    /// `--comment-prefixes`: directives on lines starting with these are
    /// ignored. Defaults to `["COM", "RUN"]`.
    pub comment_prefixes: Vec<String>,
    /// `--implicit-check-not`: patterns that must not occur anywhere between
    /// positive matches.
    pub implicit_check_not: Vec<String>,
    /// `--strict-whitespace`: do not collapse runs of spaces and tabs.
    pub strict_whitespace: bool,
    /// `--match-full-lines`: positive patterns must match whole lines.
    pub match_full_lines: bool,
    /// `--allow-empty`: accept an empty input.
    pub allow_empty: bool,
    /// `--allow-unused-prefixes`: do not require every prefix to be used.
    pub allow_unused_prefixes: bool,
    /// `-D`: `NAME=VALUE` string variables and `#NAME=EXPR` numeric ones.
    pub defines: Vec<String>,
    /// `--enable-var-scope`: CHECK-LABEL forgets variables not starting
    /// with `$`.
    pub enable_var_scope: bool,
    /// `--ignore-case`: ASCII case-insensitive matching.
    pub ignore_case: bool,
    /// `--allow-deprecated-dag-overlap`: let CHECK-DAG matches overlap.
    pub allow_deprecated_dag_overlap: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefixes: vec!["CHECK".to_string()],
            comment_prefixes: vec!["COM".to_string(), "RUN".to_string()],
            implicit_check_not: Vec::new(),
            strict_whitespace: false,
            match_full_lines: false,
            allow_empty: false,
            allow_unused_prefixes: false,
            defines: Vec::new(),
            enable_var_scope: false,
            ignore_case: false,
            allow_deprecated_dag_overlap: false,
        }
    }
}

/// Why [`check`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// Invalid options: a bad prefix or `-D` definition.
    InvalidOptions,
    /// The check file is malformed (or has no directives).
    InvalidCheckFile,
    /// The input is empty and `allow_empty` is off.
    EmptyInput,
    /// The input does not match the check file.
    Mismatch,
}

/// A failed check. Its `Display` is the LLVM-style diagnostic text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{diagnostics}")]
pub struct Failure {
    pub kind: FailureKind,
    /// What LLVM's FileCheck would print on stderr (without the input dump).
    pub diagnostics: String,
    exit_code: i32,
}

impl Failure {
    fn new(kind: FailureKind, diagnostics: String, exit_code: i32) -> Self {
        Failure {
            kind,
            diagnostics,
            exit_code,
        }
    }

    /// The exit status LLVM's FileCheck uses for this failure: 1 for a
    /// mismatch, 2 for everything else (with LLVM's one exception of an
    /// unbalanced `]` in a `[[...]]` block, which exits with 1).
    pub fn exit_code(&self) -> i32 {
        self.exit_code
    }
}

/// LLVM's `FileCheck::CanonicalizeFile`: drops the `\r` of `\r\n` and, unless
/// `strict_whitespace`, turns each run of spaces and tabs into one space.
fn canonicalize(text: &str, strict_whitespace: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        if strict_whitespace || (b != b' ' && b != b'\t') {
            out.push(b);
            i += 1;
            continue;
        }
        out.push(b' ');
        i += 1;
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
            i += 1;
        }
    }
    // Only ASCII bytes were removed or replaced, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// LLVM's `ValidateCheckPrefixes`.
fn validate_prefixes(options: &Options) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for (kind, prefixes) in [
        ("check", &options.prefixes),
        ("comment", &options.comment_prefixes),
    ] {
        for prefix in prefixes {
            if prefix.is_empty() {
                return Err(format!(
                    "error: supplied {kind} prefix must not be the empty string\n"
                ));
            }
            if !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(format!(
                    "error: supplied {kind} prefix must start with a letter and contain only alphanumeric characters, hyphens, and underscores: '{prefix}'\n"
                ));
            }
            if !seen.insert(prefix.as_str()) {
                return Err(format!(
                    "error: supplied {kind} prefix must be unique among check and comment prefixes: '{prefix}'\n"
                ));
            }
        }
    }
    Ok(())
}

/// The command-line checks LLVM's driver applies to `-D` before parsing.
fn validate_defines(defines: &[String]) -> Result<(), String> {
    let mut message = String::new();
    for define in defines {
        match define.find('=') {
            None => message.push_str(&format!(
                "Missing equal sign in command-line definition '-D{define}'\n"
            )),
            Some(0) => message.push_str(&format!(
                "Missing variable name in command-line definition '-D{define}'\n"
            )),
            Some(_) => {}
        }
    }
    if message.is_empty() {
        Ok(())
    } else {
        Err(message)
    }
}

/// Checks `input` against the directives in `check_text`.
///
/// `check_name` and `input_name` are the file names shown in diagnostics
/// (LLVM shows `<stdin>` for standard input). On failure the returned
/// [`Failure`] displays exactly what LLVM's FileCheck would print, minus its
/// `--dump-input` annotation dump.
///
/// ```
/// use filecheck::{check, FailureKind, Options};
///
/// let checks = "CHECK: hello\nCHECK-NEXT: world\n";
/// assert!(check(checks, "t.check", "hello\nworld\n", "<stdin>", &Options::default()).is_ok());
///
/// let failure = check(checks, "t.check", "hello\n\nworld\n", "<stdin>", &Options::default())
///     .unwrap_err();
/// assert_eq!(failure.kind, FailureKind::Mismatch);
/// assert!(failure.to_string().starts_with(
///     "t.check:2:13: error: CHECK-NEXT: is not on the line after the previous match"
/// ));
/// ```
pub fn check(
    check_text: &str,
    check_name: &str,
    input: &str,
    input_name: &str,
    opts: &Options,
) -> Result<(), Failure> {
    validate_defines(&opts.defines).map_err(|m| Failure::new(FailureKind::InvalidOptions, m, 2))?;
    validate_prefixes(opts).map_err(|m| Failure::new(FailureKind::InvalidOptions, m, 2))?;

    let mut sm = SourceMgr::default();
    let mut out = String::new();
    let check_buffer = sm.add(check_name, canonicalize(check_text, opts.strict_whitespace));
    let read_options = ReadOptions {
        prefixes: &opts.prefixes,
        comment_prefixes: &opts.comment_prefixes,
        implicit_check_not: &opts.implicit_check_not,
        defines: &opts.defines,
        pattern: PatternOptions {
            strict_whitespace: opts.strict_whitespace,
            match_full_lines: opts.match_full_lines,
            ignore_case: opts.ignore_case,
        },
        allow_unused_prefixes: opts.allow_unused_prefixes,
        default_prefixes: opts.prefixes.len() == 1 && opts.prefixes[0] == "CHECK",
    };
    let program = match read_check_file(&mut sm, check_buffer, &read_options, &mut out) {
        Ok(program) => program,
        Err(error) => {
            return Err(Failure::new(
                FailureKind::InvalidCheckFile,
                out,
                error.exit_code,
            ));
        }
    };

    if input.is_empty() && !opts.allow_empty {
        out.push_str(&format!("FileCheck error: '{input_name}' is empty.\n"));
        return Err(Failure::new(FailureKind::EmptyInput, out, 2));
    }

    let input_buffer = sm.add(input_name, canonicalize(input, opts.strict_whitespace));
    let engine_options = EngineOptions {
        enable_var_scope: opts.enable_var_scope,
        allow_deprecated_dag_overlap: opts.allow_deprecated_dag_overlap,
    };
    let mut engine = Engine::new(
        &sm,
        &program,
        input_buffer,
        opts.ignore_case,
        engine_options,
    );
    let passed = engine.check_input();
    out.push_str(&engine.out);
    if passed {
        Ok(())
    } else {
        Err(Failure::new(FailureKind::Mismatch, out, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalize_collapses_horizontal_whitespace() {
        assert_eq!(canonicalize("a \t b\r\nc\t", false), "a b\nc ");
        assert_eq!(canonicalize("a \t b\r\n", true), "a \t b\n");
        assert_eq!(canonicalize("a\rb", false), "a\rb");
    }

    #[test]
    fn passing_check_returns_ok() {
        assert_eq!(
            check("CHECK: foo\n", "c", "foo\n", "<stdin>", &Options::default()),
            Ok(())
        );
    }

    #[test]
    fn failure_exit_codes() {
        let opts = Options::default();
        let mismatch = check("CHECK: foo\n", "c", "bar\n", "<stdin>", &opts).err();
        assert_eq!(
            mismatch.map(|f| (f.kind, f.exit_code())),
            Some((FailureKind::Mismatch, 1))
        );
        let empty = check("CHECK: foo\n", "c", "", "<stdin>", &opts).err();
        assert_eq!(
            empty.map(|f| (f.kind, f.exit_code())),
            Some((FailureKind::EmptyInput, 2))
        );
        let malformed = check("CHECK-NEXT: foo\n", "c", "foo\n", "<stdin>", &opts).err();
        assert_eq!(
            malformed.map(|f| (f.kind, f.exit_code())),
            Some((FailureKind::InvalidCheckFile, 2))
        );
    }
}
