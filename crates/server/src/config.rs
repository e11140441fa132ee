//! The service's limits and timeouts, and their YAML form (`--config
//! serve.yaml`).
//!
//! Every key is optional; a missing key keeps its default. An unknown key
//! is an error that names the file, line and column. `docs/http-api.md`
//! lists every key with its default and what a client sees beyond it.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// The deepest nesting `max_body_nesting` may allow: serde_yaml refuses
/// deeper documents itself.
pub const MAX_BODY_NESTING: usize = 128;

/// The service's limits and timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The largest request body accepted, in bytes; larger ones get 413.
    /// A JSON or YAML body may also expand to at most this many bytes of
    /// strings (YAML aliases repeat what they name).
    pub max_body_bytes: usize,
    /// The bytes of request bodies held in memory at once, over all
    /// requests. A request whose body does not fit gets 503.
    pub max_body_memory: usize,
    /// How deep arrays and objects of a JSON or YAML body may nest; deeper
    /// bodies get 400 before they are decoded. At most [`MAX_BODY_NESTING`].
    pub max_body_nesting: usize,
    /// How many values (scalars, arrays, objects, with YAML aliases
    /// expanded) a JSON or YAML body may hold; more get 413.
    pub max_body_nodes: usize,
    /// The slowest upload accepted after `body_grace`, in bytes per
    /// second on average since the body began; a slower one gets 408.
    /// 0 turns the check off.
    pub min_body_rate: usize,
    /// How long a body may take before `min_body_rate` applies.
    pub body_grace: Duration,
    /// The time limit of one request, from its head to its answer, body
    /// upload included; a request over it gets 408.
    pub request_timeout: Duration,
    /// How long a client may take to send a request head once it sent its
    /// first byte; slower connections are closed.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request on it (kept
    /// alive between requests, or opened and silent); then it is closed.
    pub idle_timeout: Duration,
    /// The most header fields a request may have; more get 431.
    pub max_headers: usize,
    /// The largest request head (request line and headers), in bytes;
    /// larger ones get 431.
    pub max_header_bytes: usize,
    /// Connections open at once. The service lowers it to stay below the
    /// process's file limit. When it is reached, the connection idle the
    /// longest is closed for a new one; if none is idle, new connections
    /// wait to be accepted.
    pub max_connections: usize,
    /// CPU work (pipeline runs, module loads, body decoding) executing at
    /// once on the blocking pool.
    pub max_concurrency: usize,
    /// Requests waiting for a worker slot. A request that finds the queue
    /// full gets 503 with `Retry-After`. 0 means no queue: 503 whenever
    /// every slot is taken.
    pub max_queue: usize,
    /// How long a request waits in the queue for a worker slot before it
    /// gets 503 with `Retry-After`.
    pub queue_timeout: Duration,
    /// Requests being handled at once, uploads included. Above it a
    /// request gets 503. `/healthz` and `/metrics` are not counted.
    pub max_in_flight: usize,
    /// Sessions kept at once; a new one evicts the least recently used.
    pub max_sessions: usize,
    /// The memory all sessions may hold together, in bytes, as estimated
    /// from what each session's database holds (`sessions.rs`); a new or
    /// grown session evicts the least recently used others until it fits.
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
            max_body_memory: 1 << 30,
            max_body_nesting: 64,
            max_body_nodes: 100_000,
            min_body_rate: 16 << 10,
            body_grace: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_headers: 100,
            max_header_bytes: 64 << 10,
            max_connections: 1024,
            max_concurrency: cpus,
            max_queue: 128,
            queue_timeout: Duration::from_secs(10),
            max_in_flight: 512,
            max_sessions: 64,
            max_session_bytes: 1 << 30,
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
    max_body_memory: Option<usize>,
    max_body_nesting: Option<usize>,
    max_body_nodes: Option<usize>,
    min_body_rate: Option<usize>,
    body_grace_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
    header_read_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    max_headers: Option<usize>,
    max_header_bytes: Option<usize>,
    max_connections: Option<usize>,
    max_concurrency: Option<usize>,
    max_queue: Option<usize>,
    queue_timeout_ms: Option<u64>,
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
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        Config::from_yaml(&text, &path.display().to_string())
    }

    /// Parses a configuration; `file` names it in errors.
    pub fn from_yaml(text: &str, file: &str) -> Result<Config, ConfigError> {
        // An empty file (or one holding only comments) is the defaults.
        let wire: ConfigFile = if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            ConfigFile::default()
        } else {
            serde_yaml::from_str(text).map_err(|e| {
                let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
                let message = e.to_string();
                let message = match message.rfind(" at line ") {
                    Some(at) => message[..at].to_string(),
                    None => message,
                };
                ConfigError::Invalid {
                    file: file.to_string(),
                    line,
                    column,
                    message,
                }
            })?
        };
        let d = Config::default();
        let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
        let config = Config {
            max_body_bytes: wire.max_body_bytes.unwrap_or(d.max_body_bytes),
            max_body_memory: wire.max_body_memory.unwrap_or(d.max_body_memory),
            max_body_nesting: wire.max_body_nesting.unwrap_or(d.max_body_nesting),
            max_body_nodes: wire.max_body_nodes.unwrap_or(d.max_body_nodes),
            min_body_rate: wire.min_body_rate.unwrap_or(d.min_body_rate),
            body_grace: ms(wire.body_grace_ms, d.body_grace),
            request_timeout: ms(wire.request_timeout_ms, d.request_timeout),
            header_read_timeout: ms(wire.header_read_timeout_ms, d.header_read_timeout),
            idle_timeout: ms(wire.idle_timeout_ms, d.idle_timeout),
            max_headers: wire.max_headers.unwrap_or(d.max_headers),
            max_header_bytes: wire.max_header_bytes.unwrap_or(d.max_header_bytes),
            max_connections: wire.max_connections.unwrap_or(d.max_connections),
            max_concurrency: wire.max_concurrency.unwrap_or(d.max_concurrency),
            max_queue: wire.max_queue.unwrap_or(d.max_queue),
            queue_timeout: ms(wire.queue_timeout_ms, d.queue_timeout),
            max_in_flight: wire.max_in_flight.unwrap_or(d.max_in_flight),
            max_sessions: wire.max_sessions.unwrap_or(d.max_sessions),
            max_session_bytes: wire.max_session_bytes.unwrap_or(d.max_session_bytes),
            shutdown_grace: ms(wire.shutdown_grace_ms, d.shutdown_grace),
            semantic_max_elements: wire
                .semantic_max_elements
                .unwrap_or(d.semantic_max_elements),
        };
        let invalid = |key: &str, message: String| {
            let (line, column) = locate_key(text, key);
            ConfigError::Invalid {
                file: file.to_string(),
                line,
                column,
                message,
            }
        };
        // Limits of 0 would refuse everything or never time out. The queue
        // may be empty (shed at once), and the body rate check may be off.
        for (key, zero) in [
            ("max_body_bytes", config.max_body_bytes == 0),
            ("max_body_memory", config.max_body_memory == 0),
            ("max_body_nesting", config.max_body_nesting == 0),
            ("max_body_nodes", config.max_body_nodes == 0),
            ("request_timeout_ms", config.request_timeout.is_zero()),
            (
                "header_read_timeout_ms",
                config.header_read_timeout.is_zero(),
            ),
            ("idle_timeout_ms", config.idle_timeout.is_zero()),
            ("max_headers", config.max_headers == 0),
            ("max_header_bytes", config.max_header_bytes == 0),
            ("max_connections", config.max_connections == 0),
            ("max_concurrency", config.max_concurrency == 0),
            ("queue_timeout_ms", config.queue_timeout.is_zero()),
            ("max_in_flight", config.max_in_flight == 0),
            ("max_sessions", config.max_sessions == 0),
            ("max_session_bytes", config.max_session_bytes == 0),
        ] {
            if zero {
                return Err(invalid(key, format!("{key} must be at least 1")));
            }
        }
        if config.max_body_nesting > MAX_BODY_NESTING {
            return Err(invalid(
                "max_body_nesting",
                format!("max_body_nesting must be at most {MAX_BODY_NESTING}"),
            ));
        }
        Ok(config)
    }
}

/// The line and column of a top-level `key:` in `text`, or 1:1.
fn locate_key(text: &str, key: &str) -> (usize, usize) {
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed
            .strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with(':'))
        {
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
        let c = Config::from_yaml(
            "max_body_bytes: 1024\nrequest_timeout_ms: 250\nmax_sessions: 3\n",
            "s.yaml",
        );
        let c = c.expect("valid config");
        assert_eq!(c.max_body_bytes, 1024);
        assert_eq!(c.request_timeout, Duration::from_millis(250));
        assert_eq!(c.max_sessions, 3);
        assert_eq!(c.max_in_flight, Config::default().max_in_flight);
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(
            Config::from_yaml("# nothing\n\n", "s.yaml"),
            Ok(Config::default())
        );
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let err = Config::from_yaml("max_sessions: 3\nmax_sesions: 4\n", "serve.yaml")
            .expect_err("unknown key");
        let text = err.to_string();
        assert!(
            text.starts_with("serve.yaml:2:1: error: unknown field `max_sesions`"),
            "{text}"
        );
    }

    #[test]
    fn bad_value_is_located() {
        let err = Config::from_yaml("max_sessions: 3\nmax_in_flight: many\n", "serve.yaml")
            .expect_err("bad value");
        assert!(err.to_string().starts_with("serve.yaml:2:"), "{err}");
    }

    #[test]
    fn zero_limit_is_rejected() {
        let err = Config::from_yaml("max_sessions: 3\nmax_concurrency: 0\n", "serve.yaml")
            .expect_err("zero");
        assert_eq!(
            err.to_string(),
            "serve.yaml:2:1: error: max_concurrency must be at least 1"
        );
    }

    #[test]
    fn every_limit_and_timeout_has_a_key() {
        let text = "max_body_bytes: 1\nmax_body_memory: 2\nmax_body_nesting: 3\nmax_body_nodes: 4\nmin_body_rate: 5\n\
                    body_grace_ms: 6\nrequest_timeout_ms: 7\nheader_read_timeout_ms: 8\nidle_timeout_ms: 9\nmax_headers: 10\n\
                    max_header_bytes: 11\nmax_connections: 12\nmax_concurrency: 13\nmax_queue: 14\nqueue_timeout_ms: 15\n\
                    max_in_flight: 16\nmax_sessions: 17\nmax_session_bytes: 18\nshutdown_grace_ms: 19\nsemantic_max_elements: 20\n";
        let c = Config::from_yaml(text, "s.yaml").expect("valid config");
        let ms = Duration::from_millis;
        let want = Config {
            max_body_bytes: 1,
            max_body_memory: 2,
            max_body_nesting: 3,
            max_body_nodes: 4,
            min_body_rate: 5,
            body_grace: ms(6),
            request_timeout: ms(7),
            header_read_timeout: ms(8),
            idle_timeout: ms(9),
            max_headers: 10,
            max_header_bytes: 11,
            max_connections: 12,
            max_concurrency: 13,
            max_queue: 14,
            queue_timeout: ms(15),
            max_in_flight: 16,
            max_sessions: 17,
            max_session_bytes: 18,
            shutdown_grace: ms(19),
            semantic_max_elements: 20,
        };
        assert_eq!(c, want);
    }

    #[test]
    fn no_queue_and_no_rate_check_are_allowed_and_nesting_is_capped() {
        let c =
            Config::from_yaml("max_queue: 0\nmin_body_rate: 0\n", "s.yaml").expect("valid config");
        assert_eq!((c.max_queue, c.min_body_rate), (0, 0));
        let err = Config::from_yaml("max_body_nesting: 129\n", "serve.yaml").expect_err("too deep");
        assert_eq!(
            err.to_string(),
            "serve.yaml:1:1: error: max_body_nesting must be at most 128"
        );
        let err = Config::from_yaml("idle_timeout_ms: 0\n", "serve.yaml").expect_err("zero");
        assert_eq!(
            err.to_string(),
            "serve.yaml:1:1: error: idle_timeout_ms must be at least 1"
        );
    }
}
