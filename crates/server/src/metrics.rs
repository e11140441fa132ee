//! Counters for `GET /metrics`, written in the Prometheus text format by
//! hand.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Default)]
struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; LATENCY_BUCKETS.len()];
        }
        for (count, &le) in self.counts.iter_mut().zip(LATENCY_BUCKETS.iter()) {
            if seconds <= le {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum += seconds;
    }
}

#[derive(Default)]
struct Tables {
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    errors: BTreeMap<&'static str, u64>,
    closed: BTreeMap<&'static str, u64>,
}

/// The service's counters.
#[derive(Default)]
pub struct Metrics {
    tables: Mutex<Tables>,
    instructions: AtomicU64,
    modules: AtomicU64,
    evictions: AtomicU64,
    lookups: AtomicU64,
    in_flight: AtomicU64,
    connections: AtomicU64,
}

/// Gauges owned elsewhere, read when rendering.
pub struct Gauges {
    /// Sessions alive.
    pub sessions: usize,
    /// Module text bytes held by sessions.
    pub session_bytes: usize,
    /// Worker slots in use.
    pub workers_busy: usize,
    /// Worker slots in all.
    pub workers_max: usize,
    /// Requests waiting for a worker slot.
    pub queue_waiting: usize,
    /// Bytes of request bodies held.
    pub body_bytes: usize,
}

impl Metrics {
    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.tables
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records one answered request.
    pub fn record_request(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let mut t = self.tables();
        *t.requests
            .entry((route.to_string(), method.to_string(), status))
            .or_default() += 1;
        t.latency
            .entry(route.to_string())
            .or_default()
            .observe(elapsed.as_secs_f64());
    }

    /// Records one error answer.
    pub fn record_error(&self, kind: &'static str) {
        *self.tables().errors.entry(kind).or_default() += 1;
    }

    /// Records a module the pipeline processed.
    pub fn record_module(&self, instructions: usize) {
        self.instructions
            .fetch_add(instructions as u64, Ordering::Relaxed);
        self.modules.fetch_add(1, Ordering::Relaxed);
    }

    /// Records evicted sessions.
    pub fn record_evictions(&self, n: usize) {
        self.evictions.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Records a session run that had nothing to redo, answered on the
    /// request's own task (see `AppState::run_here`).
    pub fn record_lookup(&self) {
        self.lookups.fetch_add(1, Ordering::Relaxed);
    }

    /// Session runs answered as look-ups so far.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    /// A request started being handled.
    pub fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// A request finished being handled.
    pub fn request_finished(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection was accepted.
    pub fn connection_opened(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection ended; `reason` is set when the service closed it.
    pub fn connection_closed(&self, reason: Option<&'static str>) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
        if let Some(reason) = reason {
            *self.tables().closed.entry(reason).or_default() += 1;
        }
    }

    /// Connections open now.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections the service closed for `reason` (`idle_timeout`,
    /// `header_timeout`, `evicted`, `shutdown`).
    pub fn connections_closed(&self, reason: &str) -> u64 {
        self.tables().closed.get(reason).copied().unwrap_or(0)
    }

    /// Requests being handled now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// How many requests were answered on `route` with `status`.
    pub fn requests(&self, route: &str, status: u16) -> u64 {
        self.tables()
            .requests
            .iter()
            .filter(|((r, _, s), _)| r == route && *s == status)
            .map(|(_, n)| n)
            .sum()
    }

    /// The Prometheus text exposition.
    pub fn render(&self, gauges: &Gauges) -> String {
        let t = self.tables();
        let mut out = String::new();
        let w = &mut out;
        let _ = writeln!(
            w,
            "# HELP tessera_http_requests_total HTTP requests answered, by route, method and status."
        );
        let _ = writeln!(w, "# TYPE tessera_http_requests_total counter");
        for ((route, method, status), n) in &t.requests {
            let _ = writeln!(
                w,
                "tessera_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{status}\"}} {n}",
                escape(route),
                escape(method)
            );
        }
        let _ = writeln!(
            w,
            "# HELP tessera_http_request_duration_seconds Time from request to response head, by route."
        );
        let _ = writeln!(w, "# TYPE tessera_http_request_duration_seconds histogram");
        for (route, h) in &t.latency {
            let route = escape(route);
            for (i, le) in LATENCY_BUCKETS.iter().enumerate() {
                let n = h.counts.get(i).copied().unwrap_or(0);
                let _ = writeln!(
                    w,
                    "tessera_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                w,
                "tessera_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                w,
                "tessera_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                w,
                "tessera_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
        let _ = writeln!(
            w,
            "# HELP tessera_errors_total Error answers, by error kind."
        );
        let _ = writeln!(w, "# TYPE tessera_errors_total counter");
        for (kind, n) in &t.errors {
            let _ = writeln!(w, "tessera_errors_total{{kind=\"{kind}\"}} {n}");
        }
        let _ = writeln!(
            w,
            "# HELP tessera_connections_closed_total Connections the service closed, by reason."
        );
        let _ = writeln!(w, "# TYPE tessera_connections_closed_total counter");
        for (reason, n) in &t.closed {
            let _ = writeln!(
                w,
                "tessera_connections_closed_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let gauges_and_counters: [(&str, &str, &str, u64); 12] = [
            (
                "tessera_instructions_processed_total",
                "counter",
                "Instructions in the modules the pipeline produced.",
                self.instructions.load(Ordering::Relaxed),
            ),
            (
                "tessera_modules_processed_total",
                "counter",
                "Modules the pipeline produced.",
                self.modules.load(Ordering::Relaxed),
            ),
            (
                "tessera_sessions_active",
                "gauge",
                "Sessions alive.",
                gauges.sessions as u64,
            ),
            (
                "tessera_session_bytes",
                "gauge",
                "Memory held by sessions, as estimated, in bytes.",
                gauges.session_bytes as u64,
            ),
            (
                "tessera_sessions_evicted_total",
                "counter",
                "Sessions evicted to respect the session limits.",
                self.evictions.load(Ordering::Relaxed),
            ),
            (
                "tessera_session_lookups_total",
                "counter",
                "Session runs with nothing to redo, answered from what the last run made without a worker slot.",
                self.lookups(),
            ),
            (
                "tessera_http_requests_in_flight",
                "gauge",
                "Requests being handled (health and metrics excluded).",
                self.in_flight(),
            ),
            (
                "tessera_workers_busy",
                "gauge",
                "Worker slots running the pipeline.",
                gauges.workers_busy as u64,
            ),
            (
                "tessera_workers_max",
                "gauge",
                "Worker slots in all (max_concurrency).",
                gauges.workers_max as u64,
            ),
            (
                "tessera_queue_waiting",
                "gauge",
                "Requests waiting for a worker slot.",
                gauges.queue_waiting as u64,
            ),
            (
                "tessera_request_body_bytes",
                "gauge",
                "Bytes of request bodies held (max_body_memory).",
                gauges.body_bytes as u64,
            ),
            (
                "tessera_connections_open",
                "gauge",
                "Connections open.",
                self.connections(),
            ),
        ];
        for (name, kind, help, value) in gauges_and_counters {
            let _ = writeln!(w, "# HELP {name} {help}");
            let _ = writeln!(w, "# TYPE {name} {kind}");
            let _ = writeln!(w, "{name} {value}");
        }
        out
    }
}

/// Escapes a label value.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.record_request("/healthz", "GET", 200, Duration::from_millis(3));
        m.record_request("/healthz", "GET", 200, Duration::from_millis(300));
        let g = Gauges {
            sessions: 0,
            session_bytes: 0,
            workers_busy: 0,
            workers_max: 2,
            queue_waiting: 0,
            body_bytes: 0,
        };
        let text = m.render(&g);
        assert!(
            text.contains(
                "tessera_http_requests_total{route=\"/healthz\",method=\"GET\",status=\"200\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "tessera_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.001\"} 0"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "tessera_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.005\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "tessera_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.5\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("tessera_http_request_duration_seconds_count{route=\"/healthz\"} 2"),
            "{text}"
        );
    }
}
