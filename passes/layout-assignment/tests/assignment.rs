//! Layout assignment on small modules: XLA's own test facts (rows of the
//! table in the team's notes, cited per case) and every constraint kind,
//! as data in `testdata/layout-assignment/` (its README describes the
//! format).
//!
//! Each case `<case>.hlo.in` names its target in a `// TARGET:` line; the
//! runner runs the pass on it, the structural verifier, the
//! uses-before-definition check, the layout verifier, an equivalence check
//! by evaluation (unless the case says `// EVALUATE: no`), a determinism
//! check and the case's `// CHECK:` lines against the printed output, and
//! compares a summary with `<case>.expected`. `TESSERA_BLESS=1` (or
//! `UPDATE_EXPECT=1`) records the summaries anew after a reviewed change.

use std::path::{Path, PathBuf};

fn cases_dir() -> PathBuf {
    test_support::testdata_dir().join("layout-assignment")
}

/// One case file: its name (the file name without `.hlo.in`), its text,
/// and what its header says.
struct Case {
    name: String,
    path: PathBuf,
    text: String,
    target: String,
    evaluate: bool,
}

impl Case {
    fn read(path: &Path) -> Result<Case, String> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".hlo.in"))
            .ok_or_else(|| format!("{} is not a case file", path.display()))?
            .to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("unreadable: {e}"))?;
        let mut target = None;
        let mut evaluate = true;
        for line in text.lines().take_while(|l| l.starts_with("//")) {
            if let Some(t) = line.strip_prefix("// TARGET:") {
                target = Some(t.trim().to_string());
            } else if let Some(e) = line.strip_prefix("// EVALUATE:") {
                evaluate = match e.trim() {
                    "yes" => true,
                    "no" => false,
                    other => return Err(format!("EVALUATE is yes or no, not {other:?}")),
                };
            }
        }
        let target = target.ok_or("no `// TARGET:` line")?;
        Ok(Case {
            name,
            path: path.to_path_buf(),
            text,
            target,
            evaluate,
        })
    }

    fn expected_path(&self) -> PathBuf {
        self.path.with_file_name(format!("{}.expected", self.name))
    }
}

/// Every `*.hlo.in` in `testdata/layout-assignment/`, in name order.
fn case_paths() -> Vec<PathBuf> {
    let dir = cases_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display()))
        .flatten()
        .map(|entry| entry.path())
        .filter(|p| p.to_str().is_some_and(|p| p.ends_with(".hlo.in")))
        .collect();
    paths.sort();
    paths
}

/// A target of `testdata/layout-assignment/targets/` (`generic`,
/// `row-major-reduce`), or else a built-in one.
fn target(name: &str) -> Result<target::TargetSpec, String> {
    let file = cases_dir().join("targets").join(format!("{name}.yaml"));
    if file.exists() {
        target::load_file(&file)
    } else {
        target::load_builtin(name)
    }
    .map_err(|e| format!("target {name}: {e}"))
}

/// Runs the pass on the case and every check but the expectation's;
/// answers the summary to compare with it.
fn run_case(case: &Case) -> Result<String, String> {
    let spec = target(&case.target)?;
    let parse = || hlo::parse_module(&case.text, &case.path.display().to_string());
    let mut module = parse().map_err(|e| format!("does not parse: {e:?}"))?;
    let report =
        layout_assignment::run(&mut module, &spec).map_err(|e| format!("the pass failed: {e}"))?;
    let printed = hlo::print_module(&module);
    let structural = hlo::verify_module(&module);
    if !structural.is_empty() {
        return Err(format!("structural verifier: {structural:?}\n{printed}"));
    }
    let order = hlo::uses_before_definition(&module);
    if !order.is_empty() {
        return Err(format!("used before defined: {order:?}\n{printed}"));
    }
    let layout = layout_assignment::check_layouts(&module, Some(&spec));
    if !layout.is_empty() {
        let problems: Vec<String> = layout.iter().map(ToString::to_string).collect();
        return Err(format!("layout verifier:\n{}", problems.join("\n")));
    }
    // The output computes what the input computed, with its layouts real.
    // Custom calls and a few library ops cannot be evaluated; for those the
    // layout verifier above is the check.
    if case.evaluate {
        let before = parse().map_err(|e| format!("does not parse: {e:?}"))?;
        match interp::check_equivalent(&before, &module, &[1, 2], &interp::Limits::default()) {
            Ok(_)
            | Err(interp::EquivalenceError::Before {
                error: interp::EvalError::Unsupported { .. },
                ..
            }) => {}
            Err(e) => {
                return Err(format!(
                    "the output is not equivalent to the input:\n{e}\n{printed}"
                ));
            }
        }
    }
    // Deterministic: a second run on a fresh parse prints the same text.
    let mut again = parse().map_err(|e| format!("does not parse: {e:?}"))?;
    layout_assignment::run(&mut again, &spec).map_err(|e| format!("second run: {e}"))?;
    if hlo::print_module(&again) != printed {
        return Err("a second run prints another module".to_string());
    }
    if case.text.lines().any(|l| l.starts_with("// CHECK")) {
        filecheck::check(
            &case.text,
            &case.path.display().to_string(),
            &printed,
            "<output>",
            &filecheck::Options::default(),
        )
        .map_err(|f| format!("CHECK lines against the printed output:\n{f}"))?;
    }
    Ok(summary(&module, &report))
}

/// Every instruction as `name: shape opcode`, per computation, then the
/// copies with their cause, then the filled AUTO entry layouts.
fn summary(module: &hlo::Module, report: &layout_assignment::Report) -> String {
    let mut out = String::new();
    for comp in &module.computations {
        out.push_str(&format!("{}:\n", comp.name));
        for (id, inst) in comp.instructions() {
            let root = if comp.root() == Some(id) { "ROOT " } else { "" };
            let operands: Vec<String> = inst
                .operands()
                .iter()
                .map(|&o| comp.inst(o).name.clone())
                .collect();
            out.push_str(&format!(
                "  {root}{} = {} {}({})\n",
                inst.name,
                inst.shape,
                inst.opcode_name(),
                operands.join(", ")
            ));
        }
    }
    for c in &report.copies {
        out.push_str(&format!(
            "copy {}: {} {} -> {} ({} bytes, {})\n",
            c.name,
            c.value,
            c.from,
            c.to,
            c.bytes,
            c.cause.name()
        ));
    }
    for f in &report.filled {
        out.push_str(&format!("filled {}: {}\n", f.position, f.layout));
    }
    out
}

/// Whether to record summaries instead of comparing them.
fn blessing() -> bool {
    ["TESSERA_BLESS", "UPDATE_EXPECT"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Compares a case's summary with its expectation (`None`: no file).
/// Blessing answers the text to write instead of failing.
fn compare(actual: &str, expected: Option<&str>, bless: bool) -> Result<Option<String>, String> {
    match expected {
        Some(expected) if expected == actual => Ok(None),
        _ if bless => Ok(Some(actual.to_string())),
        None => Err(format!(
            "no expectation; TESSERA_BLESS=1 records this summary:\n{actual}"
        )),
        Some(expected) => {
            let mut diff = String::new();
            let (e, a): (Vec<&str>, Vec<&str>) =
                (expected.lines().collect(), actual.lines().collect());
            for i in 0..e.len().max(a.len()) {
                let (el, al) = (e.get(i), a.get(i));
                if el != al {
                    diff.push_str(&format!(
                        "line {}:\n  expected: {}\n  actual:   {}\n",
                        i + 1,
                        el.unwrap_or(&"<none>"),
                        al.unwrap_or(&"<none>")
                    ));
                }
            }
            if diff.is_empty() {
                diff.push_str("(they differ in line ends only)\n");
            }
            Err(format!(
                "the summary differs from its expectation\n{diff}\nactual summary:\n{actual}"
            ))
        }
    }
}

/// One case from start to end: `Err` is the report of what failed.
fn check_case(path: &Path, bless: bool) -> Result<(), String> {
    let case = Case::read(path)?;
    // A panic in the pass is this case's failure, not the end of the run.
    let actual = std::panic::catch_unwind(|| run_case(&case))
        .unwrap_or_else(|_| Err("panicked (the message is above)".to_string()))?;
    let expected_path = case.expected_path();
    let expected = std::fs::read_to_string(&expected_path).ok();
    if let Some(text) = compare(&actual, expected.as_deref(), bless)? {
        std::fs::write(&expected_path, text)
            .map_err(|e| format!("{}: {e}", expected_path.display()))?;
        eprintln!("blessed {}", expected_path.display());
    }
    Ok(())
}

#[test]
fn every_case_matches_its_expectation() {
    let paths = case_paths();
    assert!(
        !paths.is_empty(),
        "no case files in {}",
        cases_dir().display()
    );
    let bless = blessing();
    let mut failures = Vec::new();
    for path in &paths {
        if let Err(e) = check_case(path, bless) {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            failures.push(format!("{name}: {e}"));
        }
    }
    // An expectation whose case is gone is stale.
    for entry in std::fs::read_dir(cases_dir()).expect("readable").flatten() {
        let p = entry.path();
        if let Some(stem) = p.to_str().and_then(|s| s.strip_suffix(".expected"))
            && !Path::new(&format!("{stem}.hlo.in")).exists()
        {
            failures.push(format!("{}: an expectation without a case", p.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n\n")
    );
}

/// The runner fails on a summary one line away from its expectation, and
/// on a case without one.
#[test]
fn a_changed_or_missing_expectation_fails() {
    let path = cases_dir().join("mismatched_entry_parameter_gets_one_copy.hlo.in");
    let case = Case::read(&path).unwrap();
    let actual = run_case(&case).unwrap();
    let expected = std::fs::read_to_string(case.expected_path()).unwrap();
    assert_eq!(compare(&actual, Some(&expected), false), Ok(None));
    let edited = expected.replacen("2016 bytes", "2017 bytes", 1);
    assert_ne!(edited, expected);
    let err = compare(&actual, Some(&edited), false).unwrap_err();
    assert!(err.contains("expected: copy p1.copy"), "{err}");
    assert!(compare(&actual, None, false).is_err());
    assert_eq!(
        compare(&actual, Some(&edited), true),
        Ok(Some(actual.clone()))
    );
}

/// The same instructions in another order get the same layouts and copy
/// bytes.
#[test]
fn the_result_does_not_depend_on_instruction_order() {
    let spec = target("generic").unwrap();
    let layouts = |case: &str| {
        let path = cases_dir().join(format!("{case}.hlo.in"));
        let text = std::fs::read_to_string(&path).unwrap();
        let mut module = hlo::parse_module(&text, "t.hlo").unwrap();
        let report = layout_assignment::run(&mut module, &spec).unwrap();
        let comp = module.entry_computation();
        let mut v: Vec<String> = comp
            .instructions()
            .map(|(_, i)| format!("{}: {}", i.name, i.shape))
            .collect();
        v.sort();
        (v, report.copy_bytes())
    };
    assert_eq!(
        layouts("the_result_does_not_depend_on_instruction_order_a"),
        layouts("the_result_does_not_depend_on_instruction_order_b")
    );
}
