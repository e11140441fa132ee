//! The Tessera HTTP service: layout assignment over HTTP, on axum, tokio
//! and tower-http. `tessera serve` starts it; `docs/http-api.md` describes
//! the routes.
//!
//! The service is a thin shell over [`driver`]: a stateless route runs
//! [`driver::run`], and a session owns a [`db::Database`] on which
//! [`driver::run_in`] and [`driver::run_loaded`] recompute only what
//! changed.
//!
//! Architecture invariant: serde and HTTP types stay in this crate (and in
//! `wire`); the core crates never see them.
//!
//! Robustness: no request can make the process panic or grow without
//! bound. Connections are capped below the file limit and timed out while
//! idle or slow to send a head (`conn`); bodies are capped in size, in
//! memory over all requests and in upload rate (413, 503, 408); a JSON or
//! YAML body is checked for depth, values and alias expansion before it
//! is decoded (`scan`); every request has a time limit (408); CPU work
//! (decoding, pipeline runs) goes to the blocking pool through a bounded
//! number of worker slots behind a bounded queue with a wait deadline
//! (`queue`: 503 with `Retry-After` only when the queue is full or the
//! wait expires); sessions are capped in number and in estimated memory
//! with LRU eviction; and a panic anywhere is caught and answered with
//! 500.

// No panicking shortcuts outside tests: every request is a user's, and a panic
// must never be its answer. Set here because Cargo cannot add lints to
// the workspace's for one crate (the other crates follow the workspace).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::response::Response;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceBuilder;
use tower_http::request_id::{
    MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};

mod changes;
pub mod client;
pub mod config;
mod conn;
pub mod error;
mod explore;
pub mod log;
pub mod metrics;
mod middleware;
mod queue;
mod request;
mod routes;
mod scan;
mod semantic;
mod sessions;

pub use config::{Config, ConfigError};
pub use conn::{raise_file_limit, serve};
pub use error::ApiError;
pub use metrics::Metrics;
pub use sessions::estimated_bytes as estimated_session_bytes;

use queue::Workers;
use sessions::Sessions;

/// The OpenAPI 3 description served at `GET /openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// The service's shared state: configuration, counters, sessions, worker
/// slots and the built-in targets.
#[derive(Clone)]
pub struct AppState {
    shared: Arc<Shared>,
}

struct Shared {
    config: Config,
    metrics: Metrics,
    sessions: Sessions,
    workers: Workers,
    in_flight: Arc<Semaphore>,
    /// Bytes of request bodies held at once (`max_body_memory`).
    body_budget: Arc<Semaphore>,
    /// Request ids, shared with the connection layer's own answers.
    request_ids: RequestIds,
    targets: BTreeMap<String, Arc<target::TargetSpec>>,
}

impl AppState {
    /// A fresh service state.
    pub fn new(config: Config) -> AppState {
        let mut targets = BTreeMap::new();
        for name in target::builtin_names() {
            match target::load_builtin(name) {
                Ok(spec) => {
                    targets.insert(name.to_string(), Arc::new(spec));
                }
                Err(e) => {
                    tracing::error!(target_name = name, error = %e, "a built-in target does not load")
                }
            }
        }
        let shared = Shared {
            metrics: Metrics::default(),
            sessions: Sessions::new(config.max_sessions, config.max_session_bytes),
            workers: Workers::new(
                config.max_concurrency,
                config.max_queue,
                config.queue_timeout,
            ),
            in_flight: Arc::new(Semaphore::new(config.max_in_flight)),
            body_budget: Arc::new(Semaphore::new(
                config.max_body_memory.min(Semaphore::MAX_PERMITS),
            )),
            request_ids: RequestIds::new(),
            targets,
            config,
        };
        AppState {
            shared: Arc::new(shared),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// Sessions alive.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.len()
    }

    /// Takes a worker slot as a pipeline run does, or `None` when every
    /// slot is taken. Requests that need a slot while it is held wait in
    /// the queue; tests use this to saturate the service deterministically.
    pub fn try_acquire_worker(&self) -> Option<OwnedSemaphorePermit> {
        self.shared.workers.try_acquire()
    }

    /// Requests waiting in the queue for a worker slot.
    pub fn queue_len(&self) -> usize {
        self.shared.workers.waiting()
    }

    /// The Prometheus text of `GET /metrics`.
    pub fn render_metrics(&self) -> String {
        let (sessions, session_bytes) = self.shared.sessions.usage();
        let config = &self.shared.config;
        let gauges = metrics::Gauges {
            sessions,
            session_bytes,
            workers_busy: self.shared.workers.busy(),
            workers_max: config.max_concurrency,
            queue_waiting: self.shared.workers.waiting(),
            body_bytes: config
                .max_body_memory
                .saturating_sub(self.shared.body_budget.available_permits()),
        };
        self.shared.metrics.render(&gauges)
    }
}

/// Makes request ids: a per-process prefix and a counter.
#[derive(Clone)]
pub(crate) struct RequestIds {
    prefix: u32,
    next: Arc<AtomicU64>,
}

impl RequestIds {
    pub(crate) fn new() -> RequestIds {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() ^ (d.as_secs() as u32));
        RequestIds {
            prefix: nanos ^ std::process::id().rotate_left(16),
            next: Arc::new(AtomicU64::new(1)),
        }
    }
}

impl RequestIds {
    /// The next id.
    pub(crate) fn next_id(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{:08x}-{n:06}", self.prefix)
    }
}

impl MakeRequestId for RequestIds {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        HeaderValue::from_str(&self.next_id())
            .ok()
            .map(RequestId::new)
    }
}

/// The service: every route with its layers.
///
/// From the outside in: a request id (`x-request-id`, kept if the client
/// sent one) set and echoed, a tracing span per request, accounting and
/// load shedding (`middleware::track`, which also turns any error answer
/// into JSON), panic catching, the time limit, and the body limit.
pub fn router(state: AppState) -> Router {
    layered(routes::routes(), state)
}

/// `routes` with every layer of the service.
fn layered(routes: Router<AppState>, state: AppState) -> Router {
    let config = state.config().clone();
    let layers = ServiceBuilder::new()
        .layer(SetRequestIdLayer::x_request_id(
            state.shared.request_ids.clone(),
        ))
        .layer(middleware::trace_layer())
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            middleware::track,
        ))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            middleware::panic_response,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            config.max_body_bytes,
        ));
    routes.layer(layers).with_state(state)
}

/// Blocking threads the runtime keeps beyond the worker slots: for a
/// thread still finishing the job whose slot it gave back, and for any
/// blocking call of tokio's own.
const SPARE_BLOCKING_THREADS: usize = 2;

/// The async runtime to serve `config` on: tokio's multi-threaded one,
/// whose blocking pool (where the pipeline runs, one job per worker slot)
/// holds at most `max_concurrency` threads and a spare few. tokio's default
/// is 512, and a job gives back its slot before its thread is idle, so the
/// next job often started a new thread (forty jobs spawned at once ran
/// on 39 threads). Each thread that runs the pipeline keeps its
/// allocator's freed memory for a while (see the `allocator` crate), and
/// since a small module runs on the worker's own thread (`driver::run`),
/// that memory is the worker's.
pub fn runtime(config: &Config) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(config.max_concurrency.max(1) + SPARE_BLOCKING_THREADS)
        .build()
}

/// A future that completes on ctrl-c (SIGINT) or SIGTERM.
///
/// On Unix the signal handlers are installed when this function is called,
/// not when the future is first polled. Until a handler is installed,
/// SIGTERM kills the process at once, so `tessera serve` calls this before
/// it announces its address: from then on a SIGTERM always drains. It must
/// be called within a tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        if let Err(e) = &interrupt {
            tracing::warn!(error = %e, "cannot handle SIGINT; ctrl-c will not shut down gracefully");
        }
        if let Err(e) = &terminate {
            tracing::warn!(error = %e, "cannot handle SIGTERM; it will not shut down gracefully");
        }
        async move {
            // A signal that could not be handled never completes its branch.
            let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wait(interrupt) => tracing::info!("SIGINT received"),
                () = wait(terminate) => tracing::info!("SIGTERM received"),
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A response answered through an error.
pub(crate) fn error_response(e: ApiError) -> Response {
    axum::response::IntoResponse::into_response(e)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_blocking_pool_holds_the_worker_slots_and_a_spare_few() {
        let config = Config {
            max_concurrency: 2,
            ..Config::default()
        };
        let runtime = super::runtime(&config).expect("a runtime");
        let threads = runtime.block_on(async {
            let jobs: Vec<_> = (0..40)
                .map(|_| {
                    tokio::task::spawn_blocking(|| {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        format!("{:?}", std::thread::current().id())
                    })
                })
                .collect();
            let mut seen = std::collections::BTreeSet::new();
            for job in jobs {
                seen.insert(job.await.expect("a blocking job"));
            }
            seen.len()
        });
        // Forty jobs at once would take forty threads without the cap.
        assert!(
            (1..=2 + super::SPARE_BLOCKING_THREADS).contains(&threads),
            "{threads} blocking threads"
        );
    }

    use super::*;
    use axum::body::Body;
    use axum::routing::get;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_is_answered_500_in_json_and_counted() {
        let state = AppState::new(Config::default());
        let routes = Router::new().route(
            "/boom",
            get(|| async {
                let v: Vec<u8> = Vec::new();
                // An out-of-bounds index: a bug, as a panic would be.
                let i = v.len() + 3;
                v[i].to_string()
            }),
        );
        let app = layered(routes, state.clone());
        let req = Request::builder()
            .uri("/boom")
            .body(Body::empty())
            .expect("request");
        let response = app.oneshot(req).await.expect("infallible");
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(response.headers().get("x-request-id").is_some());
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(v["error"]["kind"], "internal");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("index out of bounds")),
            "{v}"
        );
        assert_eq!(state.metrics().requests("/boom", 500), 1);
        assert_eq!(state.metrics().in_flight(), 0);
        assert!(
            state
                .render_metrics()
                .lines()
                .any(|l| l == "tessera_errors_total{kind=\"internal\"} 1")
        );
    }
}
