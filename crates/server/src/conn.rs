//! Connections: the accept loop, HTTP/1.1 through hyper, and what a
//! connection may cost while no request is being handled on it.
//!
//! `axum::serve` puts no bound on a connection that never completes a
//! request: half a request head held a connection open for minutes, idle
//! connections piled up to the file limit until nothing more could be
//! accepted, and a graceful shutdown waited for connections that had no
//! request at all. So the service runs its own accept loop:
//!
//! * Open connections are capped by `max_connections`, lowered to stay
//!   below the process's file limit. At the cap, the connection idle the
//!   longest is closed to make room; if every connection has a request in
//!   flight, new ones wait in the listener's backlog.
//! * A connection with no request in flight is closed `idle_timeout` after
//!   its last answer (or after it opened), and `header_read_timeout` after
//!   the first byte of a request head that has not been completed.
//! * On shutdown the listener closes, connections with no request in
//!   flight close at once, and the others close after their answer.
//! * hyper answers a request it cannot parse (a malformed head, too many
//!   or too large headers, a target too long) by itself; those answers are
//!   rewritten into the service's JSON error form on their way out.
//!
//! What a request may cost once it is being handled (its body, its time,
//! its CPU) is bounded by the layers and the queue, not here.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore, watch};
use tower::ServiceExt;

use crate::error::{ApiError, kind_for_status};
use crate::{AppState, Config};

/// File descriptors kept for everything but connections: the listener,
/// logs, the blocking pool's files, a config file being read.
const RESERVED_FILES: u64 = 64;

/// Raises the soft limit on open files to the hard limit where the
/// system allows it, and returns the soft limit in force. `tessera serve`
/// calls it at start, so that `max_connections` is not lowered below its
/// configured value on a system whose soft limit is small.
pub fn raise_file_limit() -> io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// `max_connections`, lowered to stay below the soft file limit.
fn connection_cap(config: &Config) -> usize {
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
    let room = usize::try_from(soft.saturating_sub(RESERVED_FILES).max(16)).unwrap_or(usize::MAX);
    config.max_connections.min(room)
}

/// Milliseconds since the tracker's epoch; 0 means "not set", so times
/// are stored plus one.
type Stamp = u64;

/// What the service knows of one connection.
struct ConnState {
    /// Requests on it that the service is handling (their answers not
    /// yet sent in full).
    busy: AtomicUsize,
    /// When it last became idle: opened, or its last answer sent.
    idle_since: AtomicU64,
    /// When the first byte of a request head arrived while it was idle
    /// (0: none).
    head_since: AtomicU64,
    /// Close at once (evicted at the cap, or shutdown gave up waiting).
    close_now: AtomicBool,
    /// Its state changed: its watcher looks again.
    wake: Notify,
}

/// The open connections of one `serve`.
struct Tracker {
    epoch: Instant,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
    next_id: AtomicU64,
}

impl Tracker {
    fn now(&self) -> Stamp {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnState>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self) -> (u64, Arc<ConnState>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(ConnState {
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(self.now()),
            head_since: AtomicU64::new(0),
            close_now: AtomicBool::new(false),
            wake: Notify::new(),
        });
        self.open().insert(id, conn.clone());
        (id, conn)
    }

    /// Asks the connection idle the longest to close: a silent one before
    /// one that began sending a request head, older before newer. False if
    /// none is idle.
    fn evict_one_idle(&self) -> bool {
        let open = self.open();
        let victim = open
            .iter()
            .filter(|(_, c)| {
                c.busy.load(Ordering::Acquire) == 0 && !c.close_now.load(Ordering::Relaxed)
            })
            .min_by_key(|(id, c)| {
                (
                    c.head_since.load(Ordering::Relaxed) != 0,
                    c.idle_since.load(Ordering::Relaxed),
                    **id,
                )
            })
            .map(|(_, c)| c);
        match victim {
            Some(c) => {
                c.close_now.store(true, Ordering::Relaxed);
                c.wake.notify_one();
                true
            }
            None => false,
        }
    }

    /// Asks every connection to close at once.
    fn close_all(&self) {
        for c in self.open().values() {
            c.close_now.store(true, Ordering::Relaxed);
            c.wake.notify_one();
        }
    }
}

/// Marks a request in flight on its connection until dropped: when its
/// answer has been sent whole, or when the request was abandoned.
struct Busy {
    conn: Arc<ConnState>,
    tracker: Arc<Tracker>,
}

impl Busy {
    fn new(conn: Arc<ConnState>, tracker: Arc<Tracker>) -> Busy {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        conn.head_since.store(0, Ordering::Relaxed);
        Busy { conn, tracker }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.conn.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.conn
                .idle_since
                .store(self.tracker.now(), Ordering::Relaxed);
            self.conn.wake.notify_one();
        }
    }
}

/// The service hyper calls for each request on a connection: the router,
/// with the request marked busy until its answer is sent.
#[derive(Clone)]
struct ConnService {
    router: Router,
    conn: Arc<ConnState>,
    tracker: Arc<Tracker>,
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let busy = Busy::new(self.conn.clone(), self.tracker.clone());
        let router = self.router.clone();
        Box::pin(async move {
            let response = router.oneshot(req).await?;
            // The answer's body carries the mark: it is dropped when hyper
            // has taken the last of it.
            Ok(response.map(move |body| {
                Body::new(body.map_frame(move |frame| {
                    let _ = &busy;
                    frame
                }))
            }))
        })
    }
}

/// The socket of a connection, watched: the first byte of a request head
/// starts the header timer, and an error answer written by hyper itself
/// is replaced by the JSON form.
struct Watched {
    stream: TcpStream,
    conn: Arc<ConnState>,
    tracker: Arc<Tracker>,
    state: AppState,
    /// A replacement answer being written, and how many bytes of hyper's
    /// own answer it stands for.
    replacement: Option<(Vec<u8>, usize, usize)>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before
            && self.conn.busy.load(Ordering::Acquire) == 0
            && self.conn.head_since.load(Ordering::Relaxed) == 0
        {
            self.conn
                .head_since
                .store(self.tracker.now(), Ordering::Relaxed);
            self.conn.wake.notify_one();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.replacement.is_none()
            && self.conn.busy.load(Ordering::Acquire) == 0
            && let Some(status) = hyper_error_status(buf)
        {
            let answer = json_answer(&self.state, status);
            self.replacement = Some((answer, 0, buf.len()));
        }
        let this = &mut *self;
        if let Some((answer, written, stands_for)) = &mut this.replacement {
            while *written < answer.len() {
                let rest = answer.get(*written..).unwrap_or_default();
                let n = ready!(Pin::new(&mut this.stream).poll_write(cx, rest))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            let n = (*stands_for).min(buf.len());
            this.replacement = None;
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    /// hyper writes an answer's head and its body as separate slices, so
    /// that a large body goes to the socket without being copied into
    /// hyper's buffer first (a 1.2 MB text answer was copied whole on each
    /// run). An error answer of hyper's own is a head with no body, in the
    /// first slice: `poll_write` recognizes and replaces it there.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        if self.replacement.is_some()
            || (self.conn.busy.load(Ordering::Acquire) == 0 && hyper_error_status(first).is_some())
        {
            return self.poll_write(cx, first);
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The status of an error answer hyper wrote by itself: a whole head with
/// a 4xx or 5xx status and no `x-request-id` (every answer of the service
/// has one), at the start of what it writes while no request is in flight
/// on the connection.
fn hyper_error_status(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| buf.strip_prefix(b"HTTP/1.0 "))?;
    let status = StatusCode::from_bytes(rest.get(..3)?).ok()?;
    if !(status.is_client_error() || status.is_server_error()) {
        return None;
    }
    let end = memchr::memmem::find(buf, b"\r\n\r\n")?;
    let head = buf.get(..end)?.to_ascii_lowercase();
    if memchr::memmem::find(&head, b"\nx-request-id:").is_some() {
        return None;
    }
    Some(status)
}

/// The JSON answer standing for hyper's own error answer.
fn json_answer(state: &AppState, status: StatusCode) -> Vec<u8> {
    let config = state.config();
    let error = match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => ApiError::new(
            status,
            "headers_too_large",
            format!(
                "the request head has more than {} header fields or more than {} bytes (max_headers, max_header_bytes)",
                config.max_headers, config.max_header_bytes
            ),
        )
        .with("max_headers", config.max_headers)
        .with("max_header_bytes", config.max_header_bytes),
        StatusCode::URI_TOO_LONG => ApiError::new(status, "uri_too_long", "the request target is too long"),
        StatusCode::BAD_REQUEST => ApiError::invalid_request("the request is not valid HTTP/1.1 (a malformed request line or header)"),
        _ => {
            let (kind, message) = kind_for_status(status);
            ApiError::new(status, kind, message)
        }
    };
    let body = serde_json::to_string(&error.body()).unwrap_or_default();
    let id = state.shared.request_ids.next_id();
    tracing::info!(request_id = %id, kind = error.kind, status = status.as_u16(), "error answer to a request that did not parse");
    state.metrics().record_error(error.kind);
    state
        .metrics()
        .record_request("unparsed", "other", status.as_u16(), Duration::ZERO);
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-request-id: {id}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

impl ConnState {
    /// When the connection must be closed if nothing changes, by the
    /// tracker's clock; `None` while a request is in flight.
    fn deadline(&self, config: &Config) -> Option<(Stamp, &'static str)> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
        }
        let head = self.head_since.load(Ordering::Relaxed);
        if head != 0 {
            return Some((
                head.saturating_add(millis(config.header_read_timeout)),
                "header_timeout",
            ));
        }
        Some((
            self.idle_since
                .load(Ordering::Relaxed)
                .saturating_add(millis(config.idle_timeout)),
            "idle_timeout",
        ))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Serves on `listener` until `shutdown` completes, then stops accepting
/// connections, closes those with no request in flight, and drains the
/// others, waiting at most the configured shutdown grace.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let config = state.config().clone();
    let cap = connection_cap(&config);
    if cap < config.max_connections {
        tracing::warn!(
            max_connections = config.max_connections,
            cap,
            "max_connections lowered to stay below the file limit"
        );
    }
    let tracker = Arc::new(Tracker {
        epoch: Instant::now(),
        open: Mutex::default(),
        next_id: AtomicU64::new(0),
    });
    let permits = Arc::new(Semaphore::new(cap));
    let router = crate::router(state.clone());
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(true)
        .max_header_size(config.max_header_bytes)
        .writev(true)
        .header_read_timeout(None);
    if config.max_headers != 100 {
        // hyper's default; setting it moves the header array to the heap.
        http.max_headers(config.max_headers);
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // At the cap, a connection waiting to be served makes the one idle
        // the longest give way. The file it holds meanwhile is one of the
        // reserved ones.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                tracker.evict_one_idle();
                tokio::select! {
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, conn) = tracker.add();
        state.metrics().connection_opened();
        let task = Connection {
            io: Watched {
                stream,
                conn: conn.clone(),
                tracker: tracker.clone(),
                state: state.clone(),
                replacement: None,
            },
            service: ConnService {
                router: router.clone(),
                conn: conn.clone(),
                tracker: tracker.clone(),
            },
            conn,
            tracker: tracker.clone(),
            stop: stop_rx.clone(),
        };
        let (http, state, tracker) = (http.clone(), state.clone(), tracker.clone());
        tokio::spawn(async move {
            let reason = task.run(&http, &state.shared.config).await;
            tracker.open().remove(&id);
            state.metrics().connection_closed(reason);
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!("shutting down: no new connections; draining requests in flight");
    let _ = stop_tx.send(true);
    drop(stop_rx);
    let grace = config.shutdown_grace;
    if tokio::time::timeout(grace, stop_tx.closed()).await.is_err() {
        tracing::warn!(
            grace_ms = millis(grace),
            "requests still in flight after the shutdown grace; closing their connections"
        );
        tracker.close_all();
        // Their tasks end at the next poll; a moment is plenty.
        let _ = tokio::time::timeout(Duration::from_secs(1), stop_tx.closed()).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Waits out an accept error. Running out of files (or memory) must not
/// turn the accept loop into a busy loop; a connection that went away
/// before it was accepted needs no pause.
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) {
        return;
    }
    tracing::warn!(error = %e, "accept failed; pausing");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// One connection and its watcher.
struct Connection {
    io: Watched,
    service: ConnService,
    conn: Arc<ConnState>,
    tracker: Arc<Tracker>,
    stop: watch::Receiver<bool>,
}

impl Connection {
    /// Serves the connection until it ends; returns why the service closed
    /// it, if it did.
    async fn run(
        self,
        http: &hyper::server::conn::http1::Builder,
        config: &Config,
    ) -> Option<&'static str> {
        let Connection {
            io,
            service,
            conn,
            tracker,
            mut stop,
        } = self;
        let served = http.serve_connection(TokioIo::new(io), service);
        let mut served = std::pin::pin!(served);
        let mut stopping = false;
        loop {
            if conn.close_now.load(Ordering::Relaxed) {
                return Some(if stopping { "shutdown" } else { "evicted" });
            }
            let deadline = conn.deadline(config);
            let sleep = async {
                match deadline {
                    Some((at, _)) => {
                        let now = tracker.now();
                        tokio::time::sleep(Duration::from_millis(at.saturating_sub(now))).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                result = served.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return None;
                }
                () = sleep => {
                    if let Some((at, reason)) = conn.deadline(config)
                        && at <= tracker.now()
                    {
                        return Some(reason);
                    }
                }
                () = conn.wake.notified() => {}
                changed = stop.changed(), if !stopping => {
                    stopping = true;
                    if changed.is_err() || conn.busy.load(Ordering::Acquire) == 0 {
                        return Some("shutdown");
                    }
                    // Close after the answer in flight.
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyper_error_answers_are_recognized_and_the_service_answers_are_not() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nx-request-id: a-1\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(hyper_error_status(ours), None);
        let hypers = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        assert_eq!(
            hyper_error_status(hypers),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error_status(ok), None);
        // A body that happens to look like a head is not at the start.
        assert_eq!(
            hyper_error_status(b"{\"x\": 1}HTTP/1.1 400 Bad Request\r\n\r\n"),
            None
        );
        // Only a whole head.
        assert_eq!(
            hyper_error_status(b"HTTP/1.1 400 Bad Request\r\ncontent-"),
            None
        );
    }

    #[test]
    fn the_connection_cap_stays_below_the_file_limit() {
        let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
        let config = Config {
            max_connections: usize::MAX,
            ..Config::default()
        };
        let cap = connection_cap(&config) as u64;
        assert!(cap < soft, "{cap} < {soft}");
        assert_eq!(
            connection_cap(&Config {
                max_connections: 5,
                ..Config::default()
            }),
            5
        );
    }
}
