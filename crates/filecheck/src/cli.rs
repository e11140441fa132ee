//! The FileCheck command line: LLVM-compatible option spellings on top of
//! [`crate::check`].

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::{Options, check};

const HELP: &str = "\
USAGE: filecheck [OPTIONS] CHECK_FILE [--input FILE]

Checks that the input (standard input, or --input FILE) matches the CHECK
directives in CHECK_FILE, with the semantics of LLVM's FileCheck.

Exit status: 0 when the input matches, 1 when it does not, 2 for usage
errors (bad options, unreadable files, malformed check file, empty input).

OPTIONS (each also accepted with a single dash, and as --opt=value or
--opt value):
  --check-prefix=PREFIX        Directive prefix to use (repeatable; default CHECK)
  --check-prefixes=A,B         Comma-separated directive prefixes
  --comment-prefixes=A,B       Prefixes whose lines are ignored (default COM,RUN)
  --implicit-check-not=TEXT    Forbid TEXT between all positive matches (repeatable)
  --input-file=FILE, --input=FILE
                               Read the input from FILE instead of standard input
  --strict-whitespace          Do not collapse runs of spaces and tabs
  --match-full-lines           Positive patterns must match whole lines
  --allow-empty                Accept an empty input
  --allow-unused-prefixes      Do not require every prefix to be used
  --enable-var-scope           CHECK-LABEL forgets variables not starting with $
  --ignore-case                Match case-insensitively (ASCII)
  --allow-deprecated-dag-overlap
                               Let CHECK-DAG matches overlap
  -D NAME=VALUE, -D#NAME=EXPR  Define a string or numeric variable
  --dump-input=MODE, --dump-input-filter=KIND, --dump-input-context=N,
  --color, -v, -vv             Accepted for compatibility; no effect
  -h, --help                   Print this help
  --version                    Print the version
";

/// A usage error: message and the exit status 2.
struct UsageError(String);

/// Options that take a value.
const VALUE_OPTIONS: &[&str] = &[
    "check-prefix",
    "check-prefixes",
    "comment-prefixes",
    "implicit-check-not",
    "input-file",
    "input",
    "dump-input",
    "dump-input-filter",
    "dump-input-context",
    "dump-input-label-width",
];

/// Boolean flags; LLVM also accepts `--flag=true` / `--flag=false`.
const FLAG_OPTIONS: &[&str] = &[
    "strict-whitespace",
    "match-full-lines",
    "allow-empty",
    "allow-unused-prefixes",
    "enable-var-scope",
    "ignore-case",
    "allow-deprecated-dag-overlap",
    "v",
    "vv",
    "color",
];

#[derive(Default)]
struct Parsed {
    options: Options,
    prefixes: Vec<String>,
    comment_prefixes: Vec<String>,
    check_file: Option<String>,
    input_file: Option<String>,
    help: bool,
    version: bool,
}

fn parse_flag(name: &str, value: Option<&str>) -> Result<bool, UsageError> {
    match value {
        None | Some("true" | "TRUE" | "True" | "1") => Ok(true),
        Some("false" | "FALSE" | "False" | "0") => Ok(false),
        Some(other) => Err(UsageError(format!(
            "filecheck: invalid value '{other}' for option '--{name}'"
        ))),
    }
}

fn comma_list(value: &str) -> impl Iterator<Item = String> + '_ {
    value.split(',').map(str::to_string)
}

fn parse_args(args: &[String]) -> Result<Parsed, UsageError> {
    let mut parsed = Parsed::default();
    let mut positional = Vec::new();
    let mut index = 0;
    let mut only_positional = false;
    while index < args.len() {
        let arg = &args[index];
        index += 1;
        if only_positional || arg == "-" || !arg.starts_with('-') {
            positional.push(arg.clone());
            continue;
        }
        if arg == "--" {
            only_positional = true;
            continue;
        }
        let body = arg.strip_prefix("--").unwrap_or(&arg[1..]);
        // `-D` takes its value glued on (`-DNAME=VALUE`) or as the next word.
        if let Some(rest) = body.strip_prefix('D') {
            let value = if rest.is_empty() {
                let Some(next) = args.get(index) else {
                    return Err(UsageError(
                        "filecheck: option '-D' requires a value".to_string(),
                    ));
                };
                index += 1;
                next.clone()
            } else {
                rest.to_string()
            };
            parsed.options.defines.push(value);
            continue;
        }
        let (name, inline_value) = match body.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (body, None),
        };
        match name {
            "h" | "help" | "help-hidden" | "help-list" => {
                parsed.help = true;
                continue;
            }
            "version" => {
                parsed.version = true;
                continue;
            }
            _ => {}
        }
        if FLAG_OPTIONS.contains(&name) {
            let on = parse_flag(name, inline_value)?;
            match name {
                "strict-whitespace" => parsed.options.strict_whitespace = on,
                "match-full-lines" => parsed.options.match_full_lines = on,
                "allow-empty" => parsed.options.allow_empty = on,
                "allow-unused-prefixes" => parsed.options.allow_unused_prefixes = on,
                "enable-var-scope" => parsed.options.enable_var_scope = on,
                "ignore-case" => parsed.options.ignore_case = on,
                "allow-deprecated-dag-overlap" => parsed.options.allow_deprecated_dag_overlap = on,
                // Verbosity and colors only affect LLVM's extra output.
                _ => {}
            }
            continue;
        }
        if !VALUE_OPTIONS.contains(&name) {
            return Err(UsageError(format!(
                "filecheck: unknown option '{arg}' (see --help)"
            )));
        }
        let value = match inline_value {
            Some(value) => value.to_string(),
            None => {
                let Some(next) = args.get(index) else {
                    return Err(UsageError(format!(
                        "filecheck: option '{arg}' requires a value"
                    )));
                };
                index += 1;
                next.clone()
            }
        };
        match name {
            "check-prefix" | "check-prefixes" => parsed.prefixes.extend(comma_list(&value)),
            "comment-prefixes" => parsed.comment_prefixes.extend(comma_list(&value)),
            "implicit-check-not" => parsed.options.implicit_check_not.push(value),
            "input-file" | "input" => parsed.input_file = Some(value),
            "dump-input" => {
                if !matches!(value.as_str(), "help" | "always" | "fail" | "never") {
                    return Err(UsageError(format!(
                        "filecheck: invalid value '{value}' for --dump-input (expected help, always, fail or never)"
                    )));
                }
            }
            "dump-input-filter" => {
                if !matches!(
                    value.as_str(),
                    "all" | "annotation-full" | "annotation" | "error"
                ) {
                    return Err(UsageError(format!(
                        "filecheck: invalid value '{value}' for --dump-input-filter"
                    )));
                }
            }
            _ => {
                if value.parse::<u32>().is_err() {
                    return Err(UsageError(format!(
                        "filecheck: invalid number '{value}' for '--{name}'"
                    )));
                }
            }
        }
    }
    if positional.len() > 1 {
        return Err(UsageError(format!(
            "filecheck: too many positional arguments ({}); expected one check file",
            positional.join(" ")
        )));
    }
    parsed.check_file = positional.pop();
    if !parsed.prefixes.is_empty() {
        parsed.options.prefixes = std::mem::take(&mut parsed.prefixes);
    }
    if !parsed.comment_prefixes.is_empty() {
        parsed.options.comment_prefixes = std::mem::take(&mut parsed.comment_prefixes);
    }
    Ok(parsed)
}

/// An I/O error message without Rust's ` (os error N)` suffix, so it reads
/// like LLVM's `std::error_code::message()`.
fn io_message(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

fn resolve(path: &str, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(dir) => dir.join(path),
        None => PathBuf::from(path),
    }
}

fn read_source(name: &str, stdin: &mut dyn Read, cwd: Option<&Path>) -> std::io::Result<String> {
    let bytes = if name == "-" {
        let mut bytes = Vec::new();
        stdin.read_to_end(&mut bytes)?;
        bytes
    } else {
        std::fs::read(resolve(name, cwd))?
    };
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        // Invalid UTF-8 is replaced with U+FFFD; see docs/filecheck.md.
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Full command-line entry: `args` WITHOUT the program name, e.g.
/// `["--check-prefix=FOO", "check.txt", "--input", "x"]`.
///
/// Reads the input from `stdin` unless `--input`/`--input-file` is given and
/// writes diagnostics (and `--help` / `--version` text) to `stderr`. Returns
/// the exit status: 0 match, 1 mismatch, 2 usage error (bad option,
/// unreadable file, malformed check file, empty input, ...).
pub fn run_cli(args: &[String], stdin: &mut dyn Read, stderr: &mut dyn Write) -> i32 {
    run_cli_in(args, stdin, stderr, None)
}

/// [`run_cli`] with relative file names (check file, `--input`) resolved
/// against `dir` instead of the process's working directory; diagnostics
/// still show the names as given. Used by the lit runner and by tests that
/// run in parallel threads.
pub fn run_cli_in_dir(
    args: &[String],
    stdin: &mut dyn Read,
    stderr: &mut dyn Write,
    dir: &Path,
) -> i32 {
    run_cli_in(args, stdin, stderr, Some(dir))
}

fn run_cli_in(
    args: &[String],
    stdin: &mut dyn Read,
    stderr: &mut dyn Write,
    cwd: Option<&Path>,
) -> i32 {
    let parsed = match parse_args(args) {
        Ok(parsed) => parsed,
        Err(UsageError(message)) => {
            let _ = writeln!(stderr, "{message}");
            return 2;
        }
    };
    if parsed.help {
        let _ = stderr.write_all(HELP.as_bytes());
        return 0;
    }
    if parsed.version {
        let _ = writeln!(
            stderr,
            "filecheck {} (LLVM FileCheck 14 compatible)",
            env!("CARGO_PKG_VERSION")
        );
        return 0;
    }
    let Some(check_file) = parsed.check_file else {
        let _ = writeln!(stderr, "<check-file> not specified");
        return 2;
    };
    let check_text = match read_source(&check_file, stdin, cwd) {
        Ok(text) => text,
        Err(e) => {
            let _ = writeln!(
                stderr,
                "Could not open check file '{check_file}': {}",
                io_message(&e)
            );
            return 2;
        }
    };
    let check_name = if check_file == "-" {
        "<stdin>"
    } else {
        check_file.as_str()
    };
    let input_file = parsed.input_file.unwrap_or_else(|| "-".to_string());
    let input_name = if input_file == "-" {
        "<stdin>".to_string()
    } else {
        input_file.clone()
    };

    // LLVM parses the check file before it opens the input, so check-file
    // errors win over input errors. Parse once with a placeholder input to
    // keep that order, then check the real input.
    let input = match read_source(&input_file, stdin, cwd) {
        Ok(text) => text,
        Err(e) => {
            if let Err(failure) = check(&check_text, check_name, "x", &input_name, &parsed.options)
                && failure.kind != crate::FailureKind::Mismatch
            {
                let _ = stderr.write_all(failure.diagnostics.as_bytes());
                return failure.exit_code();
            }
            let _ = writeln!(
                stderr,
                "Could not open input file '{input_name}': {}",
                io_message(&e)
            );
            return 2;
        }
    };
    match check(
        &check_text,
        check_name,
        &input,
        &input_name,
        &parsed.options,
    ) {
        Ok(()) => 0,
        Err(failure) => {
            let _ = stderr.write_all(failure.diagnostics.as_bytes());
            failure.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn option_spellings_are_equivalent() {
        for spelling in [
            args(&["--check-prefix=FOO", "c"]),
            args(&["-check-prefix=FOO", "c"]),
            args(&["--check-prefix", "FOO", "c"]),
            args(&["-check-prefixes", "FOO", "c"]),
        ] {
            let parsed = parse_args(&spelling).unwrap_or_else(|e| panic!("{}", e.0));
            assert_eq!(parsed.options.prefixes, vec!["FOO".to_string()]);
            assert_eq!(parsed.check_file.as_deref(), Some("c"));
        }
    }

    #[test]
    fn defines_and_lists() {
        let parsed = parse_args(&args(&[
            "-DX=1",
            "-D",
            "#N=2",
            "--check-prefixes=A,B",
            "--check-prefix=C",
            "c",
        ]))
        .unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(
            parsed.options.defines,
            vec!["X=1".to_string(), "#N=2".to_string()]
        );
        assert_eq!(
            parsed.options.prefixes,
            vec!["A".to_string(), "B".to_string(), "C".to_string()]
        );
    }

    #[test]
    fn run_cli_reports_exit_codes() {
        let dir = std::env::temp_dir().join(format!("filecheck-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let check_path = dir.join("check.txt");
        std::fs::write(&check_path, "CHECK: foo\n").unwrap_or_else(|e| panic!("{e}"));
        let check_arg = check_path.to_string_lossy().into_owned();
        let mut err = Vec::new();
        assert_eq!(
            run_cli(&args(&[&check_arg]), &mut "foo\n".as_bytes(), &mut err),
            0
        );
        assert_eq!(
            run_cli(&args(&[&check_arg]), &mut "bar\n".as_bytes(), &mut err),
            1
        );
        assert_eq!(
            run_cli(
                &args(&["--bogus", &check_arg]),
                &mut "".as_bytes(),
                &mut err
            ),
            2
        );
        assert_eq!(
            run_cli(
                &args(&[&check_arg, "--input", "/nonexistent/x"]),
                &mut "".as_bytes(),
                &mut err
            ),
            2
        );
        let mut help = Vec::new();
        assert_eq!(
            run_cli(&args(&["--help"]), &mut "".as_bytes(), &mut help),
            0
        );
        assert!(String::from_utf8_lossy(&help).contains("--check-prefix"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
