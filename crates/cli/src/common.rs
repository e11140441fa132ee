//! Helpers shared by the subcommands: logging setup and error reporting.

use std::process::ExitCode;

/// Runs a command's body over the process's standard output and error,
/// locked; the body returns the exit status.
pub fn on_std_streams(
    body: impl FnOnce(&mut dyn std::io::Write, &mut dyn std::io::Write) -> u8,
) -> ExitCode {
    ExitCode::from(body(
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    ))
}

/// How log lines on stderr are formatted.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Sends tracing output to stderr, filtered by `RUST_LOG` (default:
/// `default_level`: `info` for the service, which logs each request, `warn`
/// for one-shot commands), with salsa's per-query lines capped (see
/// `server::log`).
pub fn init_logging(format: LogFormat, default_level: &str) {
    // Only the first subscriber of a process counts; `main` installs one.
    let _ = server::log::init(
        matches!(format, LogFormat::Json),
        default_level,
        std::io::stderr,
    );
}

/// Prints `error: message` on stderr and returns exit status 1.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}

/// The one line an error is reported as: a located one (`FILE:LINE:COL:
/// error: ...`, such as a target file's) as it is, anything else after
/// `error: `, so that no line says `error:` twice.
pub fn error_line(message: impl std::fmt::Display, located: bool) -> String {
    if located {
        message.to_string()
    } else {
        format!("error: {message}")
    }
}

/// Reads a file, or standard input for `-`. Returns the name to show in
/// messages and the bytes.
pub fn read_input(file: &str) -> Result<(String, Vec<u8>), String> {
    if file == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|e| format!("<stdin>: error: cannot read standard input: {e}"))?;
        Ok(("<stdin>".to_string(), bytes))
    } else {
        let bytes =
            std::fs::read(file).map_err(|e| format!("{file}: error: cannot read the file: {e}"))?;
        Ok((file.to_string(), bytes))
    }
}

/// Reads an HLO text file (or stdin for `-`) as UTF-8. On failure prints a
/// located error (invalid UTF-8 included) and gives the exit status.
pub fn read_text(file: &std::path::Path) -> Result<(String, String), ExitCode> {
    let (label, bytes) = read_input(&file.display().to_string()).map_err(|m| {
        eprintln!("{m}");
        ExitCode::from(1)
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok((text, label)),
        Err(e) => {
            // The parser reports where the bad byte is.
            match hlo::parse_module_bytes(e.as_bytes(), &label) {
                Err(err) => eprintln!("{err}"),
                Ok(_) => eprintln!("{label}: error: the file is not UTF-8"),
            }
            Err(ExitCode::from(1))
        }
    }
}
