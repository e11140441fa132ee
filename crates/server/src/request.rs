//! What requests carry: body formats, the JSON/YAML request forms, query
//! options, and their conversion to pipeline options.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use target::TargetSpec;
use tokio::sync::OwnedSemaphorePermit;

use crate::AppState;
use crate::error::ApiError;
use crate::queue::job_error;
use crate::scan::{self, Excess, Limits};
use crate::semantic::Verify;

/// How a request body is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFormat {
    /// `text/plain` (or no content type): HLO text.
    Text,
    /// `application/json`.
    Json,
    /// `application/yaml` (also `application/x-yaml`, `text/yaml`).
    Yaml,
}

/// The body format from `Content-Type`; 415 for any other type.
pub fn body_format(headers: &HeaderMap, allowed: &[BodyFormat]) -> Result<BodyFormat, ApiError> {
    let format = match headers.get(header::CONTENT_TYPE) {
        None => BodyFormat::Text,
        Some(v) => {
            let v = v.to_str().unwrap_or("");
            let media = v
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "text/plain" => BodyFormat::Text,
                "application/json" => BodyFormat::Json,
                "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => {
                    BodyFormat::Yaml
                }
                _ => return Err(unsupported(v, allowed)),
            }
        }
    };
    if allowed.contains(&format) {
        Ok(format)
    } else {
        Err(unsupported(media_name(format), allowed))
    }
}

fn media_name(f: BodyFormat) -> &'static str {
    match f {
        BodyFormat::Text => "text/plain",
        BodyFormat::Json => "application/json",
        BodyFormat::Yaml => "application/yaml",
    }
}

fn unsupported(got: &str, allowed: &[BodyFormat]) -> ApiError {
    let names: Vec<&str> = allowed.iter().map(|&f| media_name(f)).collect();
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "content type '{got}' is not accepted here; send {}",
            names.join(", ")
        ),
    )
    .with("accepted", names)
}

/// True when the client asked for HLO text alone (`Accept: text/plain`
/// and not JSON).
pub fn wants_text(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let types: Vec<String> = accept
        .split(',')
        .map(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    types.iter().any(|t| t == "text/plain") && !types.iter().any(|t| t == "application/json")
}

/// A request body read whole. It holds its share of `max_body_memory`
/// until it is dropped, so a handler keeps it for as long as it keeps the
/// bytes (or what it decoded from them).
pub struct Received {
    bytes: Bytes,
    _budget: Option<OwnedSemaphorePermit>,
}

impl std::ops::Deref for Received {
    type Target = Bytes;
    fn deref(&self) -> &Bytes {
        &self.bytes
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body is larger than the limit of {limit} bytes"),
    )
    .with("limit", limit)
}

impl AppState {
    /// Takes `n` more bytes of `max_body_memory` for a body, or 503.
    fn reserve_body(
        &self,
        n: usize,
        held: &mut Option<OwnedSemaphorePermit>,
    ) -> Result<(), ApiError> {
        if n == 0 {
            return Ok(());
        }
        let budget = &self.shared.body_budget;
        let permit = u32::try_from(n).ok().and_then(|n| budget.clone().try_acquire_many_owned(n).ok()).ok_or_else(|| {
            ApiError::overloaded(format!(
                "request bodies already fill the {} bytes they may hold in memory at once (max_body_memory); retry later",
                self.config().max_body_memory
            ))
        })?;
        match held {
            Some(h) => h.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    }

    /// Reads the whole body: at most `max_body_bytes` (413 beyond), within
    /// `max_body_memory` over all requests (503 beyond), and no slower
    /// than `min_body_rate` on average once `body_grace` has passed (408
    /// otherwise), so that a client trickling its body a byte at a time
    /// holds nothing for long.
    pub(crate) async fn read_body(&self, body: Body) -> Result<Received, ApiError> {
        let config = self.config();
        let limit = config.max_body_bytes;
        let started = Instant::now();
        let mut body = body;
        let mut held = None;
        // A declared length is reserved whole at once, so a body that
        // cannot fit is refused before any of it is read.
        let declared = axum::body::HttpBody::size_hint(&body)
            .exact()
            .and_then(|n| usize::try_from(n).ok());
        if let Some(n) = declared {
            if n > limit {
                return Err(too_large(limit));
            }
            self.reserve_body(n, &mut held)?;
        }
        let mut reserved = declared.unwrap_or(0);
        // One buffer of the declared size, so that a large body is held
        // once rather than as chunks and then their concatenation.
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut whole: Vec<u8> = Vec::with_capacity(declared.unwrap_or(0));
        let mut received = 0usize;
        loop {
            let next = body.frame();
            let frame = if config.min_body_rate == 0 {
                next.await
            } else {
                // The time by which `received` bytes were due.
                let due = started
                    + config.body_grace
                    + Duration::from_secs_f64(received as f64 / config.min_body_rate as f64);
                match tokio::time::timeout_at(due.into(), next).await {
                    Ok(frame) => frame,
                    Err(_) => return Err(too_slow(received, started.elapsed(), config)),
                }
            };
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|e| body_error(&e, limit))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            received += data.len();
            if received > limit {
                return Err(too_large(limit));
            }
            if received > reserved {
                self.reserve_body(received - reserved, &mut held)?;
                reserved = received;
            }
            if whole.capacity() > 0 {
                whole.extend_from_slice(&data);
            } else {
                chunks.push(data);
            }
        }
        let bytes = match chunks.len() {
            _ if whole.capacity() > 0 => Bytes::from(whole),
            0 => Bytes::new(),
            1 => chunks.pop().unwrap_or_default(),
            _ => Bytes::from(chunks.concat()),
        };
        Ok(Received {
            bytes,
            _budget: held,
        })
    }
}

fn too_slow(received: usize, elapsed: Duration, config: &crate::Config) -> ApiError {
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "timeout",
        format!(
            "the body arrived too slowly: {received} bytes in {} ms, below {} bytes/s after the first {} ms (min_body_rate, body_grace_ms)",
            elapsed.as_millis(),
            config.min_body_rate,
            config.body_grace.as_millis()
        ),
    )
}

/// The answer to a body that failed to arrive.
fn body_error(e: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return too_large(limit);
        }
        source = s.source();
    }
    ApiError::invalid_request(format!("the request body could not be read: {e}"))
}

/// A target: a built-in name or an inline spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum TargetWire {
    /// A built-in target's name.
    Name(String),
    /// A whole target spec, in the form of a target YAML file.
    Inline(serde_json::Value),
}

/// Pipeline options, in a JSON or YAML body.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptionsWire {
    /// Make relayouts explicit.
    pub expand_relayouts: Option<bool>,
    /// The passes to run, in pipeline order.
    pub passes: Option<Vec<String>>,
    /// Verify the output (`true`, `false` or `"semantic"`).
    pub verify: Option<Verify>,
    /// The solver: `heuristic` (default) or `exact`.
    pub solver: Option<String>,
    /// The exact solver's time per computation, in seconds.
    pub solver_time_limit: Option<f64>,
}

/// `POST /v1/layout-assignment` with a JSON or YAML body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunWire {
    /// The module's HLO text.
    pub module: String,
    /// The target (default `cpu`).
    pub target: Option<TargetWire>,
    /// The options.
    #[serde(default)]
    pub options: OptionsWire,
}

/// `PUT /v1/modules/{id}` with a JSON or YAML body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleWire {
    /// The module's HLO text.
    pub module: String,
    /// The target (default `cpu`).
    pub target: Option<TargetWire>,
}

/// `POST /v1/modules/{id}/layout-assignment` with a JSON or YAML body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRunWire {
    /// The target (default: the session's).
    pub target: Option<TargetWire>,
    /// The options.
    #[serde(default)]
    pub options: OptionsWire,
}

/// `PATCH /v1/modules/{id}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchWire {
    /// Computation name (without `%`) to its new text, a whole computation
    /// as it appears in a module.
    pub computations: std::collections::BTreeMap<String, String>,
}

/// Options as query parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryWire {
    /// A built-in target's name.
    pub target: Option<String>,
    /// Make relayouts explicit.
    pub expand_relayouts: Option<bool>,
    /// Comma-separated pass names.
    pub passes: Option<String>,
    /// Verify the output (`true`, `false` or `semantic`).
    pub verify: Option<Verify>,
    /// The solver: `heuristic` or `exact`.
    pub solver: Option<String>,
    /// The exact solver's time per computation, in seconds.
    pub solver_time_limit: Option<f64>,
    /// A session run's answer: the whole module (`full`, the default) or
    /// only what changed since a run (`changes`).
    pub response: Option<ResponseForm>,
    /// With `response=changes`: the run (its `run` token) the client
    /// holds the answer of.
    pub since: Option<String>,
}

/// What a run answers with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseForm {
    /// The whole output module.
    #[default]
    Full,
    /// The header, the entry layout and only the computations whose
    /// output text changed since the run named by `since`.
    Changes,
}

/// Options as the pipeline needs them, from wherever they came.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// The target, if given.
    pub target: Option<TargetWire>,
    /// The rest.
    pub options: OptionsWire,
    /// The answer's form (query parameters only).
    pub response: ResponseForm,
    /// The run the client holds, for `response=changes`.
    pub since: Option<String>,
}

/// The query parameters (400 on an unknown one or a bad value).
pub fn query(uri: &Uri) -> Result<RunOptions, ApiError> {
    let Query(q) = Query::<QueryWire>::try_from_uri(uri).map_err(|e| {
        ApiError::invalid_request(format!("bad query parameters: {}", e.body_text()))
    })?;
    let passes = q.passes.map(|p| {
        p.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    });
    Ok(RunOptions {
        target: q.target.map(TargetWire::Name),
        options: OptionsWire {
            expand_relayouts: q.expand_relayouts,
            passes,
            verify: q.verify,
            solver: q.solver,
            solver_time_limit: q.solver_time_limit,
        },
        response: q.response.unwrap_or_default(),
        since: q.since,
    })
}

impl RunOptions {
    /// True when the answer must carry the semantic check.
    pub fn semantic(&self) -> bool {
        self.options.verify == Some(Verify::Semantic)
    }

    /// Fields given in `over` replace those here.
    pub fn overridden_by(mut self, target: Option<TargetWire>, over: OptionsWire) -> RunOptions {
        if target.is_some() {
            self.target = target;
        }
        if over.expand_relayouts.is_some() {
            self.options.expand_relayouts = over.expand_relayouts;
        }
        if over.passes.is_some() {
            self.options.passes = over.passes;
        }
        if over.verify.is_some() {
            self.options.verify = over.verify;
        }
        if over.solver.is_some() {
            self.options.solver = over.solver;
        }
        if over.solver_time_limit.is_some() {
            self.options.solver_time_limit = over.solver_time_limit;
        }
        self
    }
}

/// Checks a JSON or YAML body's structure within `limits` (see
/// [`crate::scan`]), then deserializes it. Errors are 400
/// `invalid_request` with the line and column, or 413 for a body that
/// holds or expands to too much.
pub fn decode<T: DeserializeOwned>(
    format: BodyFormat,
    bytes: &[u8],
    limits: Limits,
) -> Result<T, ApiError> {
    match format {
        BodyFormat::Json => {
            scan::check_json(bytes, limits).map_err(|e| excess(e, "JSON", limits))?;
            serde_json::from_slice(bytes).map_err(|e| {
                ApiError::invalid_request(format!("the JSON body is invalid: {e}"))
                    .with("line", e.line())
                    .with("col", e.column())
            })
        }
        BodyFormat::Yaml => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                ApiError::invalid_request(format!("the YAML body is not UTF-8: {e}"))
            })?;
            scan::check_yaml(text, limits).map_err(|e| excess(e, "YAML", limits))?;
            serde_yaml::from_str(text).map_err(|e| {
                let mut err = ApiError::invalid_request(format!("the YAML body is invalid: {e}"));
                if let Some(l) = e.location() {
                    err = err.with("line", l.line()).with("col", l.column());
                }
                err
            })
        }
        BodyFormat::Text => Err(ApiError::invalid_request("expected a JSON or YAML body")),
    }
}

/// The answer to a body refused by its structure.
fn excess(e: Excess, what: &str, limits: Limits) -> ApiError {
    match e {
        Excess::TooDeep => ApiError::invalid_request(format!(
            "the {what} body nests deeper than {} levels (max_body_nesting)",
            limits.max_nesting
        ))
        .with("limit", limits.max_nesting),
        Excess::TooManyNodes => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the {what} body holds more than {} values, aliases expanded (max_body_nodes)", limits.max_nodes),
        )
        .with("limit", limits.max_nodes),
        Excess::TooManyBytes => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the {what} body expands to more than {} bytes of strings through its aliases (max_body_bytes)",
                limits.max_expanded_bytes
            ),
        )
        .with("limit", limits.max_expanded_bytes),
        Excess::RecursiveAlias => ApiError::invalid_request(format!("the {what} body has an alias inside the node it names")),
        Excess::Invalid { message, line, col } => {
            ApiError::invalid_request(format!("the {what} body is invalid: {message}")).with("line", line).with("col", col)
        }
    }
}

/// The longest JSON body decoded on the request's own task rather than on
/// the blocking pool (see [`AppState::decode_body`]): a patch of a few
/// computations, a run's options.
pub(crate) const DECODE_HERE_BYTES: usize = 16 << 10;

impl AppState {
    /// What a JSON or YAML body may hold.
    pub(crate) fn body_limits(&self) -> Limits {
        let c = self.config();
        Limits {
            max_nesting: c.max_body_nesting,
            max_nodes: c.max_body_nodes,
            max_expanded_bytes: c.max_body_bytes,
        }
    }

    /// [`decode`] on the blocking pool, through the worker queue: a large
    /// body takes CPU time, which the async runtime must not spend. A small
    /// JSON body (at most [`DECODE_HERE_BYTES`]) is decoded on the
    /// request's own task: its cost follows its length, and is less than
    /// handing it to the pool and back (two thread wake-ups, some 45 µs).
    /// Not YAML, whose aliases can make a small body expand to the limits'
    /// bound.
    pub(crate) async fn decode_body<T: DeserializeOwned + Send + 'static>(
        &self,
        format: BodyFormat,
        body: &Received,
    ) -> Result<T, ApiError> {
        let limits = self.body_limits();
        if format == BodyFormat::Json && body.bytes.len() <= DECODE_HERE_BYTES {
            return decode(format, &body.bytes, limits);
        }
        let bytes = body.bytes.clone();
        self.run_blocking(move || decode(format, &bytes, limits))
            .await?
            .map_err(job_error)?
    }
}

/// A text body as UTF-8 HLO; a bad byte is a located parse error.
pub fn hlo_text(bytes: &Bytes, file_name: &str) -> Result<String, ApiError> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(s.to_string()),
        Err(_) => match hlo::parse_module_bytes(bytes, file_name) {
            Err(e) => Err(ApiError::parse(&e)),
            Ok(_) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "parse_error",
                "the module is not UTF-8",
            )),
        },
    }
}

impl AppState {
    /// Resolves a target: a built-in name or an inline spec. Names of
    /// files are not accepted: a client must not make the service read
    /// its disk. An inline spec is loaded on the blocking pool.
    pub async fn resolve_target(&self, t: &TargetWire) -> Result<Arc<TargetSpec>, ApiError> {
        if let TargetWire::Inline(value) = t {
            let value = value.clone();
            return self
                .run_blocking(move || load_inline(&value))
                .await?
                .map_err(job_error)?;
        }
        self.resolve_named(t)
    }

    fn resolve_named(&self, t: &TargetWire) -> Result<Arc<TargetSpec>, ApiError> {
        match t {
            TargetWire::Name(name) => self.shared.targets.get(name).cloned().ok_or_else(|| {
                let known: Vec<&str> = self.shared.targets.keys().map(String::as_str).collect();
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unknown_target",
                    format!(
                        "unknown target '{name}'; the built-in targets are {}, or send an inline target object",
                        known.join(", ")
                    ),
                )
                .with("known", known)
            }),
            TargetWire::Inline(value) => load_inline(value),
        }
    }

    /// The pipeline options for a request; `fallback` is the target when
    /// the request names none.
    pub async fn driver_options(
        &self,
        o: &RunOptions,
        fallback: Option<Arc<TargetSpec>>,
    ) -> Result<driver::Options, ApiError> {
        let target = match (&o.target, fallback) {
            (Some(t), _) => self.resolve_target(t).await?,
            (None, Some(t)) => t,
            (None, None) => self.resolve_named(&TargetWire::Name("cpu".into()))?,
        };
        let mut opts = driver::Options::new(target);
        if let Some(v) = o.options.verify {
            opts.verify = v != Verify::Off;
        }
        if let Some(names) = &o.options.passes {
            let mut passes = Vec::with_capacity(names.len());
            for name in names {
                match driver::PassName::from_name(name) {
                    Some(p) => passes.push(p),
                    None => {
                        let known: Vec<&str> =
                            driver::PassName::all().iter().map(|p| p.name()).collect();
                        return Err(ApiError::new(
                            StatusCode::BAD_REQUEST,
                            "unknown_pass",
                            format!("unknown pass '{name}'; the passes are {}", known.join(", ")),
                        )
                        .with("known", known));
                    }
                }
            }
            opts.passes = passes;
        }
        opts.expand_relayouts = o.options.expand_relayouts.unwrap_or(false);
        if let Some(name) = &o.options.solver {
            opts.solver.kind = driver::SolverKind::from_name(name).ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unknown_solver",
                    format!("unknown solver '{name}'; the solvers are heuristic, exact"),
                )
                .with("known", ["heuristic", "exact"])
            })?;
        }
        if let Some(secs) = o.options.solver_time_limit {
            // The exact solver's time is per computation; a limit beyond the
            // request's own timeout would let one request hold a core for
            // longer than any client waits.
            let most = self.config().request_timeout;
            match std::time::Duration::try_from_secs_f64(secs) {
                Ok(limit) if limit > std::time::Duration::ZERO && limit <= most => {
                    opts.solver.time_limit = limit
                }
                _ => {
                    return Err(ApiError::invalid_request(format!(
                        "solver_time_limit must be a positive number of seconds, at most the request timeout ({} s), not {secs}",
                        most.as_secs_f64()
                    )));
                }
            }
        } else {
            opts.solver.time_limit = opts.solver.time_limit.min(self.config().request_timeout);
        }
        Ok(opts)
    }
}

/// Loads an inline target object as the target loader reads a file.
fn load_inline(value: &serde_json::Value) -> Result<Arc<TargetSpec>, ApiError> {
    if !value.is_object() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "a target is a built-in name or an object in the form of a target YAML file",
        ));
    }
    // JSON is YAML: the target loader reads the object as it would read a
    // file. The object passed the body's structural limits, so its text is
    // within a small multiple of them.
    let text =
        serde_json::to_string_pretty(value).map_err(|e| ApiError::internal(e.to_string()))?;
    target::load_str(&text, "<inline target>")
        .map(Arc::new)
        .map_err(|e| {
            let message = match &e {
                target::LoadError::Yaml { message, .. } => message.clone(),
                other => other.to_string(),
            };
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_target",
                format!("the inline target is invalid: {message}"),
            )
        })
}
