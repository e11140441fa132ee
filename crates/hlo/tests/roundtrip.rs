//! Every `.hlo` under `testdata/xla-cpu/` (real XLA CPU dumps) must
//! survive parse → print byte for byte, reparse to an equal module, print
//! idempotently and verify clean.

use std::path::{Path, PathBuf};

use hlo::{diff_modules, outline, parse_computation, parse_module, print_module, verify_module};

fn corpus_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).expect("testdata/xla-cpu exists") {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "hlo") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn corpus_is_present() {
    let files = corpus_files();
    // 22 modules: before and after for all, optimized for all but the
    // 15.7 MB large_transformer_24_f32.
    assert_eq!(files.len(), 65, "{files:?}");
}

#[test]
fn corpus_round_trips_byte_for_byte() {
    let mut failures = Vec::new();
    for path in corpus_files() {
        let name = path.display().to_string();
        let raw = std::fs::read_to_string(&path).unwrap();
        let text = hlo::strip_leading_comment_lines(&raw);
        let module = match parse_module(text, &name) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{e}"));
                continue;
            }
        };
        let printed = print_module(&module);
        if printed != text {
            let line = printed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or(0, |i| i + 1);
            failures.push(format!(
                "{name}: printed text differs from the input at line {line}"
            ));
            continue;
        }
        let again = parse_module(&printed, &name).expect("printed text parses");
        if let Some(d) = diff_modules(&module, &again) {
            failures.push(format!("{name}: reparse differs: {d}"));
        }
        if print_module(&again) != printed {
            failures.push(format!("{name}: printing is not idempotent"));
        }
        let problems = verify_module(&module);
        if !problems.is_empty() {
            failures.push(format!(
                "{name}: {} verifier errors, first: {}",
                problems.len(),
                problems[0]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `parse_module` is the outline plus `parse_computation` per span: doing
/// the two by hand gives the same computations.
#[test]
fn module_equals_outline_plus_computations() {
    for path in corpus_files()
        .into_iter()
        .filter(|p| p.ends_with("optimized.hlo"))
        .take(4)
    {
        let text = std::fs::read_to_string(&path).unwrap();
        let module = parse_module(&text, "t").unwrap();
        let o = outline(&text, "t").unwrap();
        assert_eq!(o.computations.len(), module.computations.len());
        assert_eq!(o.entry, module.entry.index());
        let ids = |name: &str| module.find_computation(name);
        for (c, parsed) in o.computations.iter().zip(&module.computations) {
            assert_eq!(c.name, parsed.name);
            let alone = parse_computation(c.span.text(&text), &c.span, &ids, "t").unwrap();
            let mut a = module.clone();
            let index = module.find_computation(&c.name).unwrap();
            *a.computation_mut(index) = alone;
            assert_eq!(diff_modules(&module, &a), None, "{}", c.name);
        }
    }
}

/// Leading `//` lines (the RUN lines of golden tests) are dropped by the
/// printer, so formatting a file with them gives the file without them.
#[test]
fn leading_comment_lines_are_dropped() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/xla-cpu/pad_ops/before_layout.hlo");
    let file = std::fs::read_to_string(path).unwrap();
    // The file carries its own RUN lines; start from the module alone.
    let text = hlo::strip_leading_comment_lines(&file).to_string();
    let with_run = format!("// RUN: tessera fmt %s | FileCheck %s\n// CHECK: HloModule\n\n{text}");
    assert_eq!(hlo::strip_leading_comment_lines(&with_run), text);
    let module = parse_module(&with_run, "t").unwrap();
    assert_eq!(print_module(&module), text);
}

/// Hand-written text that is not canonical becomes canonical after one
/// format, and stays so.
#[test]
fn formatting_is_idempotent_on_non_canonical_text() {
    let text = "// a comment\nHloModule m\n\
        ENTRY main.1 {\n\
          p = f32[4,6] parameter(0), metadata={op_name=\"p\"}\n\
          /* block */ s = f32[2,3]{1,0} slice(f32[4,6] p), metadata={op_name=\"s\"}, slice={[0:4:2],[0:3]}\n\
          k = f32[] constant( 1 )\n\
          ROOT t = (f32[2,3], f32[]) tuple(s, k), control-predecessors={p}\n\
        }\n";
    let once = print_module(&parse_module(text, "t").unwrap());
    let twice = print_module(&parse_module(&once, "t").unwrap());
    assert_eq!(once, twice);
    assert_eq!(
        once,
        "HloModule m, entry_computation_layout={(f32[4,6])->(f32[2,3], f32[])}\n\n\
         ENTRY %main.1 (p: f32[4,6]) -> (f32[2,3], f32[]) {\n  \
           %p = f32[4,6] parameter(0), metadata={op_name=\"p\"}\n  \
           %s = f32[2,3]{1,0} slice(%p), slice={[0:4:2], [0:3:1]}, metadata={op_name=\"s\"}\n  \
           %k = f32[] constant(1)\n  \
           ROOT %t = (f32[2,3], f32[]) tuple(%s, %k), control-predecessors={%p}\n\
         }\n\n"
    );
}
