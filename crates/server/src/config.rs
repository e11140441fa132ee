//! The service's limits and timeouts, and their YAML form (`--config
//! serve.yaml`).
//!
//! Every key is optional; a missing key keeps its default. An unknown key
//! is an error that names the file, line and column.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// The service's limits and timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// The time limit of one request, body upload included; a request over
    /// it gets 408.
    pub request_timeout: Duration,
    /// Pipeline runs (and module loads) executing at once on the blocking
    /// pool. A request that finds every slot taken gets 503 at once.
    pub max_concurrency: usize,
    /// Requests being handled at once (reading the body, waiting for a
    /// session, computing). Above it a request gets 503. `/healthz` and
    /// `/metrics` are not counted.
    pub max_in_flight: usize,
    /// Sessions kept at once; a new one evicts the least recently used.
    pub max_sessions: usize,
    /// Total module text held by all sessions, in bytes; a new or grown
    /// session evicts the least recently used others until it fits.
    pub max_session_bytes: usize,
    /// How long shutdown waits for in-flight requests before exiting anyway.
    pub shutdown_grace: Duration,
    /// `verify=semantic` evaluates only modules whose instructions produce
    /// at most this many elements (each counted once), and stops after 64
    /// work units per element allowed; larger ones are reported
    /// `not_checked`.
    pub semantic_max_elements: u64,
}

impl Default for Config {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        Config {
            max_body_bytes: 64 << 20,
            request_timeout: Duration::from_secs(30),
            max_concurrency: cpus,
            max_in_flight: 64,
            max_sessions: 64,
            max_session_bytes: 256 << 20,
            shutdown_grace: Duration::from_secs(30),
            semantic_max_elements: 1 << 22,
        }
    }
}

/// The YAML form of [`Config`].
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    max_body_bytes: Option<usize>,
    request_timeout_ms: Option<u64>,
    max_concurrency: Option<usize>,
    max_in_flight: Option<usize>,
    max_sessions: Option<usize>,
    max_session_bytes: Option<usize>,
    shutdown_grace_ms: Option<u64>,
    semantic_max_elements: Option<u64>,
}

/// Why a configuration could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: error: {message}")]
    Io {
        /// The file.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// The YAML is malformed, has an unknown key or a bad value.
    #[error("{file}:{line}:{column}: error: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// The 1-based line.
        line: usize,
        /// The 1-based column.
        column: usize,
        /// What went wrong.
        message: String,
    },
}

impl Config {
    /// Reads a configuration file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Io { file: path.display().to_string(), message: e.to_string() })?;
        Config::from_yaml(&text, &path.display().to_string())
    }

    /// Parses a configuration; `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Config, ConfigError> {
        // An empty file (or one holding only comments) is the defaults.
        let wire: ConfigFile = if text.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
            ConfigFile::default()
        } else {
            serde_yaml::from_str(text).map_err(|e| {
                let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
                let message = e.to_string();
                let message = match message.rfind(" at line ") {
                    Some(at) => message[..at].to_string(),
                    None => message,
                };
                ConfigError::Invalid { file: file.to_string(), line, column, message }
            })?
        };
        let d = Config::default();
        let config = Config {
            max_body_bytes: wire.max_body_bytes.unwrap_or(d.max_body_bytes),
            request_timeout: wire.request_timeout_ms.map_or(d.request_timeout, Duration::from_millis),
            max_concurrency: wire.max_concurrency.unwrap_or(d.max_concurrency),
            max_in_flight: wire.max_in_flight.unwrap_or(d.max_in_flight),
            max_sessions: wire.max_sessions.unwrap_or(d.max_sessions),
            max_session_bytes: wire.max_session_bytes.unwrap_or(d.max_session_bytes),
            shutdown_grace: wire.shutdown_grace_ms.map_or(d.shutdown_grace, Duration::from_millis),
            semantic_max_elements: wire.semantic_max_elements.unwrap_or(d.semantic_max_elements),
        };
        for (key, zero) in [
            ("max_body_bytes", config.max_body_bytes == 0),
            ("request_timeout_ms", config.request_timeout.is_zero()),
            ("max_concurrency", config.max_concurrency == 0),
            ("max_in_flight", config.max_in_flight == 0),
            ("max_sessions", config.max_sessions == 0),
            ("max_session_bytes", config.max_session_bytes == 0),
        ] {
            if zero {
                let (line, column) = locate_key(text, key);
                return Err(ConfigError::Invalid {
                    file: file.to_string(),
                    line,
                    column,
                    message: format!("{key} must be at least 1"),
                });
            }
        }
        Ok(config)
    }
}

/// The line and column of a top-level `key:` in `text`, or 1:1.
fn locate_key(text: &str, key: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':')) {
            return (i + 1, line.len() - trimmed.len() + 1);
        }
    }
    (1, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_override_defaults() {
        let c = Config::from_yaml("max_body_bytes: 1024\nrequest_timeout_ms: 250\nmax_sessions: 3\n", "s.yaml");
        let c = c.expect("valid config");
        assert_eq!(c.max_body_bytes, 1024);
        assert_eq!(c.request_timeout, Duration::from_millis(250));
        assert_eq!(c.max_sessions, 3);
        assert_eq!(c.max_in_flight, Config::default().max_in_flight);
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(Config::from_yaml("# nothing\n\n", "s.yaml"), Ok(Config::default()));
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let err = Config::from_yaml("max_sessions: 3\nmax_sesions: 4\n", "serve.yaml").expect_err("unknown key");
        let text = err.to_string();
        assert!(text.starts_with("serve.yaml:2:1: error: unknown field `max_sesions`"), "{text}");
    }

    #[test]
    fn bad_value_is_located() {
        let err = Config::from_yaml("max_sessions: 3\nmax_in_flight: many\n", "serve.yaml").expect_err("bad value");
        assert!(err.to_string().starts_with("serve.yaml:2:"), "{err}");
    }

    #[test]
    fn zero_limit_is_rejected() {
        let err = Config::from_yaml("max_sessions: 3\nmax_concurrency: 0\n", "serve.yaml").expect_err("zero");
        assert_eq!(err.to_string(), "serve.yaml:2:1: error: max_concurrency must be at least 1");
    }
}
