//! `cargo xtask openapi [--install]`: validates the service's OpenAPI
//! document (`crates/server/src/openapi.json`, served at `/openapi.json`)
//! with `openapi-spec-validator`, the reference validator of OpenAPI 3.0
//! documents (Python, from PyPI). CI installs it and runs this command.
//!
//! So that a validator which accepts everything cannot pass for one that
//! checks, the command first gives it a copy of the document broken the
//! way the document once was (a `description` in a Media Type Object) and
//! requires a refusal.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

/// The validator's version, pinned so that CI checks the same rules.
const VALIDATOR: &str = "openapi-spec-validator==0.9.0";

/// Arguments of `cargo xtask openapi`.
#[derive(clap::Args)]
pub struct Args {
    /// Install the validator with pip first.
    #[arg(long)]
    install: bool,
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs the validator on `path`: true if the document is valid.
fn validate(path: &Path) -> anyhow::Result<(bool, String)> {
    let out = Command::new(python())
        .args(["-m", "openapi_spec_validator"])
        .arg(path)
        .output()
        .with_context(|| format!("running {} -m openapi_spec_validator", python()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() && text.contains("No module named openapi_spec_validator") {
        bail!(
            "the validator is not installed: run `cargo xtask openapi --install` (pip install {VALIDATOR})"
        );
    }
    Ok((out.status.success(), text))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.install {
        let status = Command::new(python())
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                VALIDATOR,
            ])
            .status()
            .context("running pip")?;
        if !status.success() {
            bail!("pip install {VALIDATOR} failed");
        }
    }
    let doc_path = crate::root().join("crates/server/src/openapi.json");
    let text = std::fs::read_to_string(&doc_path)
        .with_context(|| format!("reading {}", doc_path.display()))?;
    if text != server::OPENAPI {
        bail!(
            "{} is not the document the service serves",
            doc_path.display()
        );
    }

    // The validator must refuse a broken copy.
    let mut broken: serde_json::Value =
        serde_json::from_str(&text).context("the document is JSON")?;
    let media = broken
        .pointer_mut("/paths/~1v1~1layout-assignment/post/requestBody/content/text~1plain")
        .and_then(serde_json::Value::as_object_mut)
        .context("the document describes POST /v1/layout-assignment with a text/plain body")?;
    media.insert("description".into(), "not allowed here".into());
    let dir = crate::root().join("target/xtask-openapi");
    std::fs::create_dir_all(&dir)?;
    let broken_path = dir.join("broken.json");
    std::fs::write(&broken_path, serde_json::to_string_pretty(&broken)?)?;
    let (valid, _) = validate(&broken_path)?;
    if valid {
        bail!(
            "the validator accepted a document with a description in a Media Type Object; it is not checking"
        );
    }

    let (valid, report) = validate(&doc_path)?;
    print!("{report}");
    if valid {
        println!(
            "openapi: {} is a valid OpenAPI 3.0 document",
            doc_path.display()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("openapi: {} is invalid", doc_path.display());
        Ok(ExitCode::from(1))
    }
}
