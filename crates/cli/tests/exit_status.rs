//! Exit statuses of the `tessera` binary. Bad input, usage mistakes
//! included, exits with 1 and a message on stderr; `--help` and `--version`
//! exit with 0; `tessera filecheck` keeps LLVM FileCheck's 2 for usage
//! errors. Golden files cannot tell 1 from 2 (`not` accepts any failure),
//! so the exact codes are asserted here.

use std::process::{Command, Output, Stdio};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the tessera binary runs")
}

/// Asserts the exit status and that stderr contains `message`.
fn expect(args: &[&str], status: i32, message: &str) {
    let out = tessera(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(status),
        "tessera {args:?}\nstderr: {stderr}"
    );
    assert!(
        stderr.contains(message),
        "tessera {args:?}: stderr lacks {message:?}\nstderr: {stderr}"
    );
}

#[test]
fn usage_errors_exit_with_one() {
    expect(
        &["layout", "explain"],
        1,
        "the following required arguments were not provided",
    );
    expect(&["layout", "bitcast", "f32[3]{0}"], 1, "<TO>");
    expect(&["layout", "draw", "f32[3,5]{1,0}"], 1, "--output");
    expect(
        &["fmt", "--no-such-flag"],
        1,
        "unexpected argument '--no-such-flag'",
    );
    expect(
        &["no-such-command"],
        1,
        "unrecognized subcommand 'no-such-command'",
    );
    expect(
        &["--log-format", "json", "layout", "explain"],
        1,
        "required arguments",
    );
    expect(&[], 1, "Usage: tessera");
}

#[test]
fn invalid_input_exits_with_one() {
    expect(
        &["layout", "explain", "f32[3,5]{1,0:T(-1,2)}"],
        1,
        "tile 0 entry 0 is -1; tile sizes must be positive or '*'",
    );
    expect(
        &["layout", "explain", "f32[3,5]{1,0:T(0,2)}"],
        1,
        "tile sizes must be positive or '*'",
    );
}

#[test]
fn help_and_version_exit_with_zero() {
    for args in [
        &["--help"][..],
        &["--version"],
        &["layout", "explain", "--help"],
    ] {
        let out = tessera(args);
        assert_eq!(out.status.code(), Some(0), "tessera {args:?}");
        assert!(!out.stdout.is_empty(), "tessera {args:?} prints to stdout");
    }
}

#[test]
fn filecheck_usage_errors_keep_llvm_status_two() {
    // No check file, and an unknown option: LLVM's FileCheck exits 2.
    expect(&["filecheck"], 2, "");
    expect(&["filecheck", "--no-such-option", "x.txt"], 2, "");
    // A usage error clap itself reports for the filecheck subcommand.
    expect(
        &["--log-format", "nonsense", "filecheck", "x.txt"],
        2,
        "invalid value 'nonsense'",
    );
}

/// `tessera check`: 0 equivalent, 1 different, 2 usage error or no
/// verdict.
#[test]
fn check_exit_statuses() {
    let t = |f: &str| format!("{}/../../testdata/check/{f}", env!("CARGO_MANIFEST_DIR"));
    let before = t("transpose.hlo");
    let run = |after: &str, extra: &[&str]| {
        let mut args = vec!["check", before.as_str(), after];
        args.extend_from_slice(extra);
        tessera(&args)
    };
    let out = run(&t("transpose_bitcast.hlo"), &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("equivalent on 3 seed(s)"));
    for (after, named) in [
        (
            "wrong_bitcast.hlo",
            "first difference: %t = f32[8,4]{1,0} bitcast",
        ),
        ("wrong_copy.hlo", "it reads %c = f32[8,4]{0,1} copy"),
    ] {
        let out = run(&t(after), &["--seeds", "1"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{after}: {stdout}");
        assert!(stdout.contains(named), "{after}: {stdout}");
    }
    // Usage errors, and checks that cannot be done.
    expect(
        &["check", &before],
        2,
        "required arguments were not provided",
    );
    expect(&["check", &before, &before, "--seeds", "0"], 2, "--seeds");
    expect(&["check", &before, &before, "--atol=-1"], 2, "non-negative");
    expect(
        &["check", &before, "/no/such/file.hlo"],
        2,
        "cannot read the file",
    );
    expect(
        &["check", &before, &before, "--max-elements", "10"],
        2,
        "too large to check",
    );
}
