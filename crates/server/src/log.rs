//! The service's log as `tessera serve` sets it up: one subscriber, filtered
//! by `RUST_LOG` (or a default level), with the libraries that log their
//! internals at `info` capped at warnings unless the filter names them.
//! The load test and the session benchmark install the same one, writing to
//! a sink, so that they measure the service as it runs.

use tracing_subscriber::filter::{FilterExt, LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::{SubscriberInitExt, TryInitError};
use tracing_subscriber::{EnvFilter, Layer};

/// Libraries that log their internals at `info`, one line per step. salsa
/// logs every query it executes and every new revision: a session's load,
/// first run and three re-runs with no change of a generated module of
/// 100,000 instructions wrote some 167,000 lines, and the load and first
/// run took 1.8x to 2.1x a stateless run through `tessera serve`, against
/// 1.1x to 1.35x without those lines.
pub const CHATTY: &[&str] = &["salsa"];

/// Installs the process's subscriber: lines (or JSON objects, with `json`)
/// to `writer`, filtered by `RUST_LOG` if set and else by `default_level`,
/// and capped by [`chatty_cap`]. Fails if the process has one already.
pub fn init<W>(json: bool, default_level: &str, writer: W) -> Result<(), TryInitError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let directives = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default_level.to_string());
    let filter = EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| EnvFilter::new(default_level))
        .and(chatty_cap(&directives));
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    let registry = tracing_subscriber::registry();
    if json {
        registry.with(layer.json().with_filter(filter)).try_init()
    } else {
        registry.with(layer.with_filter(filter)).try_init()
    }
}

/// A cap on the log filter: each of [`CHATTY`] at most at warnings, unless
/// the filter's `directives` name it (so that `RUST_LOG=salsa=info` still
/// shows salsa's lines); every other target as the filter says. A cap,
/// not a directive of its own, so that a filter of `error` or `off` keeps
/// salsa as quiet as the rest.
pub fn chatty_cap(directives: &str) -> Targets {
    let mut cap = Targets::new().with_default(LevelFilter::TRACE);
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
