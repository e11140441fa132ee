//! The explorer and the layout pictures: `GET /` serves a page (plain
//! HTML, CSS and JavaScript, embedded in the binary, fetching nothing from
//! elsewhere) that runs the pipeline on a pasted or uploaded module and
//! shows its output, report, graphs and memory-order pictures through the
//! routes below.
//!
//! - `GET /v1/layout/draw?shape=S`: the SVG of `tessera layout draw`.
//! - `GET /v1/layout/explain?shape=S`: the JSON of `tessera layout explain
//!   --json`.
//! - `GET /example.hlo`: the page's example module.
//! - `POST /v1/graph?computation=NAME`: the SVG of one computation of the
//!   HLO module in the body (`tessera run-pass --svg`): copies red,
//!   bitcasts green, edges labelled with layouts.

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::queue::job_error;
use crate::request::hlo_text;

const INDEX_HTML: &str = include_str!("explorer/index.html");
const EXPLORER_JS: &str = include_str!("explorer/explorer.js");
const EXPLORER_CSS: &str = include_str!("explorer/explorer.css");
/// The explorer's example: XLA CPU's `entry_layout_colmajor` before layout
/// assignment (four copies on cpu), a bundled corpus module.
const EXAMPLE: &str =
    include_str!("../../../testdata/xla-cpu/entry_layout_colmajor/before_layout.hlo");

/// The explorer's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route(
            "/explorer.js",
            get(|| async { asset("text/javascript; charset=utf-8", EXPLORER_JS) }),
        )
        .route(
            "/explorer.css",
            get(|| async { asset("text/css; charset=utf-8", EXPLORER_CSS) }),
        )
        .route(
            "/example.hlo",
            get(|| async {
                asset(
                    "text/plain; charset=utf-8",
                    hlo::strip_leading_comment_lines(EXAMPLE),
                )
            }),
        )
        .route("/v1/layout/draw", get(draw))
        .route("/v1/layout/explain", get(explain))
        .route("/v1/graph", post(graph))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response();
    // The page loads nothing from elsewhere, and says so.
    r.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'",
        ),
    );
    r
}

/// `GET /`.
async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The query of the layout routes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapeQuery {
    shape: String,
}

fn shape_query(uri: &Uri) -> Result<String, ApiError> {
    let Query(q) = Query::<ShapeQuery>::try_from_uri(uri).map_err(|e| {
        ApiError::invalid_request(format!(
            "give the shape as ?shape=f32[3,5]{{1,0:T(2,2)}}: {}",
            e.body_text()
        ))
    })?;
    Ok(q.shape)
}

fn invalid_shape(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_shape", message)
}

/// `GET /v1/layout/draw?shape=S`.
async fn draw(uri: Uri) -> Result<Response, ApiError> {
    let shape = shape_query(&uri)?;
    let svg = wire::layout::draw_svg(&shape).map_err(invalid_shape)?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("image/svg+xml"),
        )],
        svg,
    )
        .into_response())
}

/// `GET /v1/layout/explain?shape=S`.
async fn explain(uri: Uri) -> Result<Response, ApiError> {
    let shape = shape_query(&uri)?;
    let v = wire::layout::explain_json(&shape).map_err(invalid_shape)?;
    Ok(axum::Json(v).into_response())
}

/// The query of `POST /v1/graph`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GraphQuery {
    computation: Option<String>,
}

/// `POST /v1/graph?computation=NAME` with HLO text.
async fn graph(State(state): State<AppState>, uri: Uri, body: Body) -> Result<Response, ApiError> {
    let Query(q) = Query::<GraphQuery>::try_from_uri(&uri).map_err(|e| {
        ApiError::invalid_request(format!("bad query parameters: {}", e.body_text()))
    })?;
    let bytes = state.read_body(body).await?;
    let text = hlo_text(&bytes, "request.hlo")?;
    let svg = state
        .run_blocking(move || {
            let module =
                hlo::parse_module(&text, "request.hlo").map_err(|e| ApiError::parse(&e))?;
            driver::picture(&module, q.computation.as_deref(), driver::PictureKind::Svg).map_err(
                |e| ApiError::new(StatusCode::NOT_FOUND, "unknown_computation", e.to_string()),
            )
        })
        .await?
        .map_err(job_error)??;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("image/svg+xml"),
        )],
        svg,
    )
        .into_response())
}
