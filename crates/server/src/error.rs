//! Error answers: every one is JSON `{"error": {"kind", "message", ...}}`
//! with a 4xx or 5xx status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// The kind of an error answer, as its `error.kind` says. Recorded as a
/// response extension so that the metrics count errors by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorKind(pub &'static str);

/// An error answer.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable kind, such as `parse_error`.
    pub kind: &'static str,
    /// A sentence for people.
    pub message: String,
    /// Further fields of the `error` object (`line`, `col`, ...).
    pub extra: Map<String, Value>,
    /// Seconds for the `Retry-After` header of a 503.
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// An error without extra fields.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            extra: Map::new(),
            retry_after: None,
        }
    }

    /// 503 `overloaded`, with `Retry-After: 1`: the service is busy now,
    /// not broken, and a second later is a fair time to try again.
    pub fn overloaded(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", message)
        }
    }

    /// Adds a field to the `error` object.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ApiError {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// 400 `invalid_request`.
    pub fn invalid_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut error = Map::new();
        error.insert("kind".into(), json!(self.kind));
        error.insert("message".into(), json!(self.message));
        for (k, v) in &self.extra {
            error.insert(k.clone(), v.clone());
        }
        json!({ "error": error })
    }

    /// A parse error of a module, located.
    pub fn parse(e: &hlo::ParseError) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "parse_error", e.message.clone())
            .with("file", e.file.clone())
            .with("line", e.line)
            .with("col", e.col)
            .with("source_line", e.source_line.clone())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_error_response(self.status, self.kind, self.body());
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// A JSON error response carrying its [`ErrorKind`].
pub fn json_error_response(status: StatusCode, kind: &'static str, body: Value) -> Response {
    let text = serde_json::to_string(&body)
        .unwrap_or_else(|_| String::from("{\"error\":{\"kind\":\"internal\"}}"));
    let mut response = (status, text).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.extensions_mut().insert(ErrorKind(kind));
    response
}

/// The kind and message of an error status that some layer produced
/// without a JSON body (a timeout, a body over the limit, a route or
/// method that does not exist).
pub fn kind_for_status(status: StatusCode) -> (&'static str, &'static str) {
    match status {
        StatusCode::NOT_FOUND => ("not_found", "no route matches this path"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this route does not accept this method",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            "payload_too_large",
            "the request body is larger than the limit",
        ),
        StatusCode::REQUEST_TIMEOUT => ("timeout", "the request took longer than its time limit"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "this content type is not accepted",
        ),
        StatusCode::SERVICE_UNAVAILABLE => ("overloaded", "the service is saturated; retry later"),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => {
            ("headers_too_large", "the request head is too large")
        }
        StatusCode::URI_TOO_LONG => ("uri_too_long", "the request target is too long"),
        StatusCode::INTERNAL_SERVER_ERROR => ("internal", "internal error"),
        s if s.is_client_error() => ("invalid_request", "the request is invalid"),
        _ => ("internal", "internal error"),
    }
}
