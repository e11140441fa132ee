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
/// for one-shot commands; see [`filter_directives`]).
pub fn init_logging(format: LogFormat, default_level: &str) {
    let directives = filter_directives(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    let filter = tracing_subscriber::EnvFilter::try_new(&directives).unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(filter_directives(None, default_level))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Libraries that log their internals at `info`, one line per step. salsa
/// logs every query it executes and every new revision: a session's load,
/// first run and three re-runs with no change of a generated module of
/// 100,000 instructions wrote some 167,000 lines, and the load and first
/// run took 1.8x to 2.1x a stateless run through `tessera serve`, against
/// 1.1x to 1.35x without those lines.
const CHATTY: &[&str] = &["salsa"];

/// The filter: `RUST_LOG` if set, else `default_level`, with each of
/// [`CHATTY`] kept to warnings unless the filter names it (so that
/// `RUST_LOG=salsa=info` still shows salsa's lines).
pub fn filter_directives(rust_log: Option<&str>, default_level: &str) -> String {
    let mut directives = match rust_log {
        Some(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => default_level.to_string(),
    };
    for target in CHATTY {
        let named = directives
            .split(',')
            .any(|d| d.trim().split(['=', '[', ':']).next() == Some(*target));
        if !named {
            directives.push_str(&format!(",{target}=warn"));
        }
    }
    directives
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

#[cfg(test)]
mod tests {
    use super::filter_directives;

    #[test]
    fn salsa_is_kept_to_warnings_unless_the_filter_names_it() {
        assert_eq!(filter_directives(None, "info"), "info,salsa=warn");
        assert_eq!(filter_directives(Some("  "), "warn"), "warn,salsa=warn");
        assert_eq!(
            filter_directives(Some("debug,tower_http=info"), "info"),
            "debug,tower_http=info,salsa=warn"
        );
        for named in ["salsa=info", "info,salsa::function=trace", "salsa[x]=debug"] {
            assert_eq!(filter_directives(Some(named), "info"), named);
        }
        // A target that only starts like it is another one.
        assert_eq!(
            filter_directives(Some("salsa_extra=info"), "info"),
            "salsa_extra=info,salsa=warn"
        );
        for d in [
            filter_directives(None, "info"),
            filter_directives(Some("debug"), "info"),
        ] {
            assert!(tracing_subscriber::EnvFilter::try_new(&d).is_ok(), "{d}");
        }
    }
}
