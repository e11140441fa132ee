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
/// for one-shot commands), and with each of [`CHATTY`] capped at warnings
/// unless the filter names it (see [`chatty_cap`]).
pub fn init_logging(format: LogFormat, default_level: &str) {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer};
    let directives = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default_level.to_string());
    let filter = EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| EnvFilter::new(default_level))
        .and(chatty_cap(&directives));
    let layer = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry();
    match format {
        LogFormat::Text => registry.with(layer.with_filter(filter)).init(),
        LogFormat::Json => registry.with(layer.json().with_filter(filter)).init(),
    }
}

/// Libraries that log their internals at `info`, one line per step. salsa
/// logs every query it executes and every new revision: a session's load,
/// first run and three re-runs with no change of a generated module of
/// 100,000 instructions wrote some 167,000 lines, and the load and first
/// run took 1.8x to 2.1x a stateless run through `tessera serve`, against
/// 1.1x to 1.35x without those lines.
const CHATTY: &[&str] = &["salsa"];

/// A cap on the log filter: each of [`CHATTY`] at most at warnings, unless
/// the filter's `directives` name it (so that `RUST_LOG=salsa=info` still
/// shows salsa's lines); every other target as the filter says. A cap,
/// not a directive of its own, so that a filter of `error` or `off` keeps
/// salsa as quiet as the rest.
pub fn chatty_cap(directives: &str) -> tracing_subscriber::filter::Targets {
    use tracing_subscriber::filter::LevelFilter;
    let mut cap = tracing_subscriber::filter::Targets::new().with_default(LevelFilter::TRACE);
    for target in CHATTY {
        let named = directives
            .split(',')
            .any(|d| d.trim().split(['=', '[', ':']).next() == Some(*target));
        if !named {
            cap = cap.with_target(*target, LevelFilter::WARN);
        }
    }
    cap
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
    use tracing::Level;

    use super::chatty_cap;

    #[test]
    fn salsa_is_capped_at_warnings_unless_the_filter_names_it() {
        for directives in ["info", "debug,tower_http=info", "salsa_extra=info", "trace"] {
            let cap = chatty_cap(directives);
            assert!(
                !cap.would_enable("salsa::function::execute", &Level::INFO),
                "{directives}"
            );
            assert!(!cap.would_enable("salsa", &Level::DEBUG), "{directives}");
            assert!(
                cap.would_enable("salsa::runtime", &Level::WARN),
                "{directives}"
            );
            assert!(
                cap.would_enable("tower_http::trace", &Level::INFO),
                "{directives}"
            );
            assert!(cap.would_enable("server", &Level::TRACE), "{directives}");
        }
        for directives in [
            "salsa=info",
            "warn,salsa::function=trace",
            "salsa[x]=debug",
            "salsa",
        ] {
            let cap = chatty_cap(directives);
            assert!(
                cap.would_enable("salsa::function::execute", &Level::TRACE),
                "{directives}"
            );
        }
    }
}
