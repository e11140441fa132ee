//! `cargo xtask client-test`: runs the Python example of
//! `docs/clients.md` (standard library only) against `tessera serve` with
//! a module from `testdata/`, and checks what it prints.

use std::process::{Command, ExitCode};

use anyhow::{Context, ensure};

/// Arguments of `cargo xtask client-test`.
#[derive(clap::Args)]
pub struct Args {
    /// The Python interpreter.
    #[arg(long, default_value = "python3")]
    python: String,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::root();
    let (_service, base) = crate::browser_test::start_service(&root)?;
    let script = root.join("docs/clients/tessera_client.py");
    let module = root.join("testdata/xla-cpu/entry_layout_colmajor/before_layout.hlo");
    let run = |extra: &[&str]| -> anyhow::Result<(bool, String, String)> {
        let out = Command::new(&args.python)
            .arg(&script)
            .args(["--url", &base])
            .args(extra)
            .output()
            .with_context(|| format!("cannot run {}", args.python))?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    let mut passed = 0;
    let (ok, stdout, stderr) = run(&[
        "--hlo",
        &module.display().to_string(),
        "--target",
        "cpu",
        "--semantic",
    ])?;
    ensure!(ok, "the example failed: {stderr}");
    for want in [
        "HloModule jit_entry_layout_colmajor",
        "jit_entry_layout_colmajor on cpu: ",
        " 4 copies",
        "  copy %",
        "semantic check: equivalent",
        "total ",
    ] {
        ensure!(
            stdout.contains(want),
            "the example's output lacks {want:?}:\n{stdout}"
        );
        passed += 1;
    }
    println!("{stdout}");
    // An error answer becomes a message and exit status 1.
    let broken =
        std::env::temp_dir().join(format!("tessera-client-test-{}.hlo", std::process::id()));
    std::fs::write(&broken, "HloModule broken\nENTRY %main {\n")?;
    let (ok, _, stderr) = run(&["--hlo", &broken.display().to_string()])?;
    let _ = std::fs::remove_file(&broken);
    ensure!(
        !ok && stderr.contains("error: 400 parse_error"),
        "a malformed module should fail with 400 parse_error: {stderr}"
    );
    passed += 1;
    println!("{passed} passed, 0 failed");
    Ok(ExitCode::SUCCESS)
}
