//! Runs every conformance case through LLVM's FileCheck and through ours and
//! reports where they disagree with each other or with the recorded verdict.
//!
//! ```text
//! cargo run -p filecheck --example compare_llvm            # compare
//! cargo run -p filecheck --example compare_llvm -- --bless # record LLVM's verdicts
//! ```
//!
//! With `--random N [--seed S]` it instead generates `N` random check
//! files and inputs from fragments of FileCheck syntax (a differential fuzz
//! test) and compares the two implementations on them; exit statuses must
//! agree, diagnostic differences are listed.
//!
//! The LLVM binary is `$LLVM_FILECHECK`, or `/usr/lib/llvm-14/bin/FileCheck`.
//! Cases marked `STDERR-INEXACT` (a documented difference in diagnostic
//! wording) are compared on exit status only, and `--bless` records no
//! `--- stderr` section for them.

#[path = "../tests/support/casefile.rs"]
mod casefile;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

const DEFAULT_LLVM: &str = "/usr/lib/llvm-14/bin/FileCheck";

struct Outcome {
    exit: i32,
    stderr: String,
}

fn run_llvm(llvm: &Path, args: &[String], input: &str, dir: &Path) -> Result<Outcome, String> {
    let mut child = Command::new(llvm)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", llvm.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A FileCheck that fails early may close its stdin; that is fine.
        let _ = stdin.write_all(input.as_bytes());
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let exit = output
        .status
        .code()
        .ok_or_else(|| format!("LLVM FileCheck died: {}", output.status))?;
    let stderr = casefile::normalize_llvm_stderr(&String::from_utf8_lossy(&output.stderr));
    Ok(Outcome { exit, stderr })
}

fn run_ours(args: &[String], input: &str, dir: &Path) -> Outcome {
    let mut stderr = Vec::new();
    let exit = filecheck::run_cli_in_dir(args, &mut input.as_bytes(), &mut stderr, dir);
    Outcome {
        exit,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

fn llvm_version(llvm: &Path) -> String {
    match Command::new(llvm).arg("--version").output() {
        Ok(output) => {
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            text.lines()
                .map(str::trim)
                .find(|l| l.contains("version"))
                .unwrap_or("unknown")
                .to_string()
        }
        Err(e) => format!("unavailable ({e})"),
    }
}

/// A small deterministic generator (64-bit LCG), so random runs reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next() % items.len()]
    }
}

/// Writes `count` random cases (without recorded verdicts) into `dir`.
fn write_random_cases(dir: &Path, count: usize, seed: u64) -> std::io::Result<()> {
    const KINDS: &[&str] = &[
        "CHECK",
        "CHECK-NEXT",
        "CHECK-SAME",
        "CHECK-NOT",
        "CHECK-DAG",
        "CHECK-LABEL",
        "CHECK-EMPTY",
        "CHECK-COUNT-2",
        "CHECK-COUNT-1",
        "CHECK{LITERAL}",
        "COM",
        "CHECK-NOT",
        "CHECK-DAG",
        "FOO",
        "FOO-NEXT",
    ];
    const PATTERNS: &[&str] = &[
        "a",
        "b",
        "ab",
        "c{{[0-9]+}}",
        "{{a|b}}",
        "{{[^a]*}}",
        "{{.}}",
        "[[V:[a-z]+]]",
        "[[V]]",
        "[[U:c[0-9]]]",
        "[[U]]",
        "[[$G:a]]",
        "[[$G]]",
        "[[#N:]]",
        "[[#N+1]]",
        "[[#%x,H:]]",
        "[[#%x,H+1]]",
        "[[#@LINE]]",
        "[[@LINE-1]]",
        "{",
        "}",
        "{{",
        "[[",
        "]]",
        "{ a }",
        "[a]",
        "(",
        ".",
        "*",
        "{{^}}",
        "{{$}}",
        "\t",
        "  ",
        "[[V:a]][[V]]",
        "[[#N]]",
        "0x1f",
        "42",
        "-7",
        "[[#%d,S:]]",
        "[[#S-1]]",
        "{{[0-9]}}}",
    ];
    const LABELS: &[&str] = &["a", "b", "foo", "x", "c1"];
    const SEPARATORS: &[&str] = &[": ", ":", ":  ", ":\t"];
    const LEADERS: &[&str] = &["", "// ", "; ", "  "];
    const INPUT: &[&str] = &[
        "a", "b", "ab", "c1", "c22", "x", "foo", "{", "}", "[", "]", "(", ")", ".", "*", "\t", " ",
        "  ", "0x1f", "42", "-7",
    ];
    const OPTIONS: &[&str] = &[
        "",
        "--strict-whitespace",
        "--match-full-lines",
        "--implicit-check-not=x",
        "--implicit-check-not=b",
        "--enable-var-scope",
        "--ignore-case",
        "--match-full-lines --strict-whitespace",
        "--allow-empty",
        "--check-prefixes=CHECK,FOO",
        "--check-prefix=FOO --allow-unused-prefixes",
        "-DV=a",
        "-D#N=1",
        "--allow-deprecated-dag-overlap",
        "--enable-var-scope -DV=ab -D$G=a",
        "--check-prefixes=CHECK,FOO --allow-unused-prefixes",
    ];
    std::fs::create_dir_all(dir)?;
    let mut rng = Lcg(seed);
    for index in 0..count {
        let mut check = String::new();
        for _ in 0..1 + rng.next() % 6 {
            let kind = rng.pick(KINDS);
            if kind == "CHECK-EMPTY" {
                check.push_str("CHECK-EMPTY:");
                check.push_str(rng.pick(&["", "", " ", " x"]));
            } else {
                check.push_str(rng.pick(LEADERS));
                check.push_str(kind);
                check.push_str(rng.pick(SEPARATORS));
                if kind == "CHECK-LABEL" && !rng.next().is_multiple_of(5) {
                    check.push_str(rng.pick(LABELS));
                } else {
                    for _ in 0..1 + rng.next() % 3 {
                        check.push_str(rng.pick(PATTERNS));
                    }
                }
            }
            check.push('\n');
        }
        let eol = rng.pick(&["\n", "\n", "\n", "\r\n"]);
        let lines: Vec<String> = (0..rng.next() % 8)
            .map(|_| (0..rng.next() % 6).map(|_| rng.pick(INPUT)).collect())
            .collect();
        let mut input = lines.join(eol);
        let mut header = format!(
            "# random case {index} of seed {seed}\nARGS: {}\n",
            rng.pick(OPTIONS)
        );
        if !lines.is_empty() {
            if rng.next().is_multiple_of(7) {
                // The case format stores the section with a newline; the
                // header drops it again.
                header.push_str("INPUT-NO-EOL\n");
            }
            input.push_str(eol);
        }
        let text = format!("{header}--- check\n{check}--- input\n{input}");
        std::fs::write(dir.join(format!("r{index:05}.case")), text)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut bless = false;
    let mut cases_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut random: Option<usize> = None;
    let mut seed = 1u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bless" => bless = true,
            "--random" => random = args.next().and_then(|n| n.parse().ok()),
            "--seed" => seed = args.next().and_then(|n| n.parse().ok()).unwrap_or(seed),
            _ => cases_dir = PathBuf::from(arg),
        }
    }
    let random_dir = std::env::temp_dir().join(format!("filecheck-random-{}", std::process::id()));
    if let Some(count) = random {
        if bless {
            eprintln!("--bless and --random do not mix");
            return ExitCode::from(2);
        }
        if let Err(e) = write_random_cases(&random_dir, count, seed) {
            eprintln!("cannot write random cases: {e}");
            return ExitCode::from(2);
        }
        println!("random cases: {count}, seed {seed}");
        cases_dir = random_dir.clone();
    }
    let llvm = std::env::var_os("LLVM_FILECHECK")
        .map_or_else(|| PathBuf::from(DEFAULT_LLVM), PathBuf::from);
    println!(
        "LLVM FileCheck: {} ({})",
        llvm.display(),
        llvm_version(&llvm)
    );

    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&cases_dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "case"))
            .collect(),
        Err(e) => {
            eprintln!("cannot read {}: {e}", cases_dir.display());
            return ExitCode::from(2);
        }
    };
    paths.sort();

    let scratch = std::env::temp_dir().join(format!("filecheck-compare-{}", std::process::id()));
    let mut problems = Vec::new();
    let mut exit_agree = 0;
    let mut diag_identical = 0;
    let mut inexact = Vec::new();
    // Random mode only: the full story of each case whose diagnostics differ.
    let mut differing: Vec<String> = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let contents = match std::fs::read_to_string(path) {
            Ok(contents) => contents,
            Err(e) => {
                problems.push(format!("{name}: unreadable: {e}"));
                continue;
            }
        };
        let case = match casefile::parse(&contents) {
            Ok(case) => case,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let dir = scratch.join(index.to_string());
        let args = match casefile::prepare(&case, &dir) {
            Ok(args) => args,
            Err(e) => {
                problems.push(format!("{name}: cannot write files: {e}"));
                continue;
            }
        };
        let llvm_outcome = match run_llvm(&llvm, &args, &case.input, &dir) {
            Ok(outcome) => outcome,
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                continue;
            }
        };
        let ours = run_ours(&args, &case.input, &dir);
        let is_inexact = case.header.iter().any(|l| l.trim() == "STDERR-INEXACT");

        if bless {
            let stderr = if is_inexact {
                ""
            } else {
                llvm_outcome.stderr.as_str()
            };
            let rendered = casefile::render(&case, llvm_outcome.exit, stderr);
            if rendered != contents {
                if let Err(e) = std::fs::write(path, rendered) {
                    problems.push(format!("{name}: cannot bless: {e}"));
                }
                println!("blessed {name} (LLVM exit {})", llvm_outcome.exit);
            }
        } else if random.is_none() {
            match case.exit {
                Some(recorded) if recorded != llvm_outcome.exit => problems.push(format!(
                    "{name}: recorded exit {recorded}, but LLVM exits {}",
                    llvm_outcome.exit
                )),
                None => problems.push(format!(
                    "{name}: no recorded exit (LLVM exits {})",
                    llvm_outcome.exit
                )),
                _ => {}
            }
            if let Some(recorded) = &case.stderr
                && *recorded != llvm_outcome.stderr
            {
                problems.push(format!("{name}: recorded stderr differs from LLVM's"));
            }
        }
        for needle in &case.stderr_contains {
            if !llvm_outcome.stderr.contains(needle.as_str()) {
                problems.push(format!(
                    "{name}: LLVM's stderr lacks STDERR-CONTAINS `{needle}`"
                ));
            }
        }

        if ours.exit == llvm_outcome.exit {
            exit_agree += 1;
        } else {
            problems.push(format!(
                "{name}: we exit {}, LLVM exits {}\n--- LLVM stderr\n{}--- our stderr\n{}",
                ours.exit, llvm_outcome.exit, llvm_outcome.stderr, ours.stderr
            ));
        }
        if ours.stderr == llvm_outcome.stderr {
            diag_identical += 1;
        } else if is_inexact {
            inexact.push(name.clone());
        } else if random.is_some() {
            inexact.push(name.clone());
            differing.push(format!(
                "{name}:\n--- check file\n{}--- input\n{}\n--- LLVM stderr\n{}--- our stderr\n{}",
                case.check, case.input, llvm_outcome.stderr, ours.stderr
            ));
        } else {
            problems.push(format!(
                "{name}: diagnostics differ\n--- LLVM stderr\n{}--- our stderr\n{}",
                llvm_outcome.stderr, ours.stderr
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if random.is_some() {
        let _ = std::fs::remove_dir_all(&random_dir);
    }

    let total = paths.len();
    println!("cases: {total}");
    println!("exit status, ours == LLVM: {exit_agree}/{total}");
    println!("diagnostics byte-identical to LLVM (--dump-input=never): {diag_identical}/{total}");
    if random.is_some() {
        // Random cases carry no record of known differences, so differing
        // diagnostics are listed for inspection without failing the run.
        if !inexact.is_empty() {
            println!("diagnostics differ in: {}", inexact.join(", "));
            for story in &differing {
                println!("* {story}");
            }
        }
    } else if !inexact.is_empty() {
        println!(
            "known diagnostic wording differences (STDERR-INEXACT): {}",
            inexact.join(", ")
        );
    }
    if problems.is_empty() {
        println!("disagreements: none");
        ExitCode::SUCCESS
    } else {
        println!("disagreements: {}", problems.len());
        for problem in &problems {
            println!("- {problem}");
        }
        ExitCode::FAILURE
    }
}
