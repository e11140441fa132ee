//! Modules nested far deeper than any stack: 100,000 levels of calls, and
//! 10,000 of loops, conditionals and fusions. Every command that reads a
//! module (fmt, verify, run-pass with each of its outputs, verify
//! --layouts, check) must answer them without a stack frame per level (a
//! stack overflow aborts the process, and takes a server with it). The
//! `layout` commands read shapes, not modules.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use test_support::{Nesting, deep_module};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the tessera binary runs")
}

fn ok(args: &[&str]) -> Output {
    let out = tessera(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tessera {args:?}\nstderr: {}",
        &stderr[..stderr.len().min(2000)]
    );
    out
}

/// Runs the pipeline on `file` for `target`, checks the output with the
/// layout verifier, and returns the output text.
fn run_and_verify(file: &Path, target: &str) -> String {
    let dir = file.parent().expect("a directory");
    let out = dir.join(format!("{target}.out.hlo"));
    let (file, out_s) = (file.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    ok(&["run-pass", "--target", target, file, "-o", out_s]);
    let verified = ok(&["verify", "--layouts", "--target", target, out_s]);
    assert!(
        String::from_utf8_lossy(&verified.stderr).contains(": ok ("),
        "verify says ok"
    );
    std::fs::read_to_string(&out).expect("the output was written")
}

fn write_module(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-deep-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("in.hlo");
    std::fs::write(&file, text).expect("written");
    file
}

#[test]
fn a_call_chain_of_100000_levels_runs_through_every_command() {
    let depth = 100_000;
    let file = write_module("calls", &deep_module(depth, Nesting::Call));
    let dir = file.parent().expect("a directory");
    let path = |name: &str| dir.join(name).to_str().expect("utf-8").to_string();
    let input = path("in.hlo");
    let printed = ok(&["fmt", &input]);
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout)
            .matches(" call(")
            .count(),
        depth + 1
    );
    ok(&["verify", &input]);
    for target in ["cpu", "gpu", "tpu"] {
        // One run per target, each with other options, so that every
        // output a run can write is written once for the deep module.
        let out = path(&format!("{target}.out.hlo"));
        let extra: Vec<String> = match target {
            "cpu" => [
                "--report",
                &path("report.json"),
                "--dot",
                &path("main.dot"),
                "--svg",
                &path("main.svg"),
            ]
            .map(String::from)
            .to_vec(),
            "gpu" => vec!["--expand-relayouts".into()],
            _ => vec![
                "--draw-computation".into(),
                "c50000".into(),
                "--svg".into(),
                path("c50000.svg"),
            ],
        };
        let mut args = vec!["run-pass", "--target", target, &input, "-o", &out];
        args.extend(extra.iter().map(String::as_str));
        ok(&args);
        let verified = ok(&["verify", "--layouts", "--target", target, &out]);
        assert!(
            String::from_utf8_lossy(&verified.stderr).contains(": ok ("),
            "verify says ok"
        );
        let text = std::fs::read_to_string(&out).expect("the output was written");
        // Every level is still there, assigned: the innermost negate and
        // the outermost call.
        assert!(
            text.contains("ROOT %r0 = f32[4,8]{1,0"),
            "{target}: the innermost computation is assigned"
        );
        assert!(
            text.contains(&format!("to_apply=%c{}\n", depth - 1)),
            "{target}: the chain is whole"
        );
        assert_eq!(
            text.matches(" call(").count(),
            depth + 1,
            "{target}: one call per level"
        );
        // The reference evaluator runs both modules through every level.
        let checked = ok(&["check", &input, &out]);
        let said = String::from_utf8_lossy(&checked.stdout).to_string()
            + &String::from_utf8_lossy(&checked.stderr);
        assert!(
            said.contains("equivalent"),
            "{target}: {}",
            &said[..said.len().min(2000)]
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("report.json")).expect("a report"))
            .expect("JSON");
    assert!(report.is_object(), "{report}");
    for picture in ["main.dot", "main.svg", "c50000.svg"] {
        let drawn = std::fs::read_to_string(path(picture)).expect("a picture");
        assert!(drawn.contains("call"), "{picture} draws the call");
    }
    let asked = std::fs::read_to_string(path("c50000.svg")).expect("svg");
    assert!(
        asked.contains("computation c50000") && asked.contains("%r50000"),
        "the asked computation: {asked}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn deep_loops_conditionals_and_fusions_run() {
    for nesting in [Nesting::While, Nesting::Conditional, Nesting::Fusion] {
        let file = write_module(&format!("{nesting:?}"), &deep_module(10_000, nesting));
        for target in ["cpu", "tpu"] {
            let text = run_and_verify(&file, target);
            assert!(
                text.contains("ROOT %r0 = f32[4,8]{1,0"),
                "{nesting:?} on {target}"
            );
        }
        let _ = std::fs::remove_dir_all(file.parent().expect("a directory"));
    }
}
