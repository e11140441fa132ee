//! Request accounting, the bound on requests in flight, the request
//! deadline, JSON error answers, tracing and panic handling.

use std::any::Any;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{DefaultOnRequest, DefaultOnResponse, MakeSpan, TraceLayer};
use tracing::Level;

use crate::AppState;
use crate::error::{ApiError, ErrorKind, json_error_response, kind_for_status};

/// Routes that are never shed nor counted in flight: a saturated service
/// still answers its health check and its metrics.
const EXEMPT: &[&str] = &["/healthz", "/metrics"];

/// Counts a request in flight while alive, even if the handler unwinds.
struct InFlight<'a>(&'a AppState);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.metrics().request_finished();
    }
}

/// Accounting around every route: bounds requests in flight (503
/// `overloaded` above `max_in_flight`), sets the request's deadline for
/// the queue and its jobs (`queue::with_deadline`), turns every error
/// answer into JSON, and records requests, latency and errors by kind.
pub async fn track(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    // Known methods only: a client must not grow the metrics with labels.
    let method: &'static str = match req.method().as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    let exempt = EXEMPT.contains(&route.as_str());
    let response = if exempt {
        next.run(req).await
    } else {
        match state.shared.in_flight.clone().try_acquire_owned() {
            Ok(permit) => {
                state.metrics().request_started();
                let _counted = InFlight(&state);
                let deadline = tokio::time::Instant::now() + state.config().request_timeout;
                let response = crate::queue::with_deadline(deadline, next.run(req)).await;
                drop(permit);
                response
            }
            Err(_) => crate::error_response(ApiError::overloaded(format!(
                "{} requests are already in flight (max_in_flight); retry later",
                state.config().max_in_flight
            ))),
        }
    };
    let response = json_errors(response, &state).await;
    let status = response.status();
    if let Some(kind) = response.extensions().get::<ErrorKind>() {
        state.metrics().record_error(kind.0);
        if status.is_server_error() {
            tracing::warn!(kind = kind.0, status = status.as_u16(), "error answer");
        } else {
            tracing::info!(kind = kind.0, status = status.as_u16(), "error answer");
        }
    }
    state
        .metrics()
        .record_request(&route, method, status.as_u16(), started.elapsed());
    response
}

/// Turns an error answer some layer produced without a JSON body (a time
/// limit, the body limit, an unknown route or method, an extractor's
/// rejection) into the JSON error form, keeping its status and headers.
async fn json_errors(response: Response, state: &AppState) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<ErrorKind>().is_some()
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let original = axum::body::to_bytes(body, 4096).await.ok();
    let original = original
        .as_deref()
        .map(String::from_utf8_lossy)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let (kind, default_message) = kind_for_status(status);
    let message = match status {
        StatusCode::REQUEST_TIMEOUT => format!(
            "the request took longer than its time limit of {} ms",
            state.config().request_timeout.as_millis()
        ),
        StatusCode::PAYLOAD_TOO_LARGE => {
            format!(
                "the request body is larger than the limit of {} bytes",
                state.config().max_body_bytes
            )
        }
        _ if !original.is_empty() => original,
        _ => default_message.to_string(),
    };
    let mut error = ApiError::new(status, kind, message);
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        error = error.with("limit", state.config().max_body_bytes);
    }
    let fresh = json_error_response(status, kind, error.body());
    let (fresh_parts, fresh_body) = fresh.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.extensions.extend(fresh_parts.extensions);
    Response::from_parts(parts, fresh_body)
}

/// The answer to a panic: 500 `internal`, in JSON.
pub fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response<Body> {
    let detail = panic_message(err.as_ref());
    tracing::error!(panic = %detail, "a request handler panicked");
    crate::error_response(ApiError::internal(format!(
        "internal error (a panic was caught: {detail})"
    )))
}

/// The text of a panic payload.
pub fn panic_message(err: &(dyn Any + Send)) -> String {
    if let Some(s) = err.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = err.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

/// A tracing span per request, carrying its request id.
#[derive(Clone, Copy, Debug)]
pub struct RequestSpan;

impl<B> MakeSpan<B> for RequestSpan {
    fn make_span(&mut self, req: &axum::http::Request<B>) -> tracing::Span {
        let id = req
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path())
    }
}

/// The tracing layer: a span per request, the response logged at INFO.
pub fn trace_layer() -> TraceLayer<
    SharedClassifier<ServerErrorsAsFailures>,
    RequestSpan,
    DefaultOnRequest,
    DefaultOnResponse,
> {
    TraceLayer::new_for_http()
        .make_span_with(RequestSpan)
        .on_request(DefaultOnRequest::new().level(Level::DEBUG))
        .on_response(
            DefaultOnResponse::new()
                .level(Level::INFO)
                .latency_unit(tower_http::LatencyUnit::Micros),
        )
}
