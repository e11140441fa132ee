//! The routes and their handlers.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::changes::{Field, Fields};
use crate::error::ApiError;
use crate::queue::{JobError, job_error};
use crate::request::{
    BodyFormat, ModuleWire, PatchWire, ResponseForm, RunOptions, RunWire, SessionRunWire,
    TargetWire, body_format, hlo_text, query, wants_text,
};
use crate::sessions::{CompInfo, Session, SessionHandle, estimated_bytes, valid_id};

/// Every route.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/layout-assignment", post(stateless_run))
        .route(
            "/v1/modules/{id}",
            put(put_module)
                .patch(patch_module)
                .delete(delete_module)
                .get(get_module),
        )
        .route("/v1/modules/{id}/layout-assignment", post(session_run))
        .route("/v1/targets", get(targets))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .merge(crate::explore::routes())
        .fallback(not_found)
}

/// The answer to a pipeline error.
fn pipeline_error(e: driver::PipelineError) -> ApiError {
    match e {
        driver::PipelineError::Parse(p) => ApiError::parse(&p),
        driver::PipelineError::InvalidInput(problems) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_module",
            "the module parses but is not well formed",
        )
        .with(
            "problems",
            problems.into_iter().map(|p| p.located).collect::<Vec<_>>(),
        ),
        driver::PipelineError::Assign(e) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "assign_error",
            e.to_string(),
        ),
        driver::PipelineError::Relayout(e) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "relayout_error",
            e.to_string(),
        ),
        driver::PipelineError::Verify(problems) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "verify_error",
            "the output failed verification (a bug in Tessera; please report it)",
        )
        .with(
            "problems",
            problems.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ),
    }
}

/// An output text as a response body, without copying it: a session's
/// re-run shares the text its database keeps.
struct SharedText(std::sync::Arc<String>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A successful run's answer: JSON, or the HLO text alone.
fn run_answer(
    state: &AppState,
    out: driver::Output,
    text_only: bool,
    started: Instant,
    session: Option<SessionAnswer>,
    semantic: Option<Value>,
) -> Response {
    state.metrics().record_module(out.report.stats.instructions);
    if text_only {
        return (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            axum::body::Bytes::from_owner(SharedText(Arc::clone(out.shared_text()))),
        )
            .into_response();
    }
    let mut timings = match wire::timings_json(&out.report.timings) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    timings.insert("total".into(), json!(started.elapsed().as_micros() as u64));
    let mut session = session;
    let mut body = match session.as_mut().and_then(|s| s.changes.take()) {
        Some(fields) => fields,
        None => Fields::from([("module", Field::Text(Arc::clone(out.shared_text())))]),
    };
    // A changes answer carries its own report, without the sections the
    // client holds.
    if !body.contains_key("report") {
        body.insert("report", wire::report_json(&out.report).into());
    }
    body.insert("timings", Value::Object(timings).into());
    if let Some(s) = session {
        body.insert("run", json!(s.run).into());
        body.insert("recomputed_computations", json!(s.recomputed).into());
    }
    if let Some(s) = semantic {
        body.insert("semantic_check", s.into());
    }
    axum::Json(body).into_response()
}

/// What a session run adds to its answer.
struct SessionAnswer {
    /// The run's token.
    run: String,
    /// The computations whose steps ran again.
    recomputed: Vec<String>,
    /// With `response=changes`: the fields that replace `module`.
    changes: Option<Fields>,
}

/// Refuses `response=changes` where it cannot be answered: on the
/// stateless route (there is no earlier run) and with a text answer.
fn check_response_form(
    options: &RunOptions,
    headers: &HeaderMap,
    session: bool,
) -> Result<(), ApiError> {
    if options.response != ResponseForm::Changes {
        return if options.since.is_some() {
            Err(ApiError::invalid_request(
                "`since` goes with `response=changes`",
            ))
        } else {
            Ok(())
        };
    }
    if !session {
        return Err(ApiError::invalid_request(
            "`response=changes` needs a session (POST /v1/modules/{id}/layout-assignment): a stateless run has no earlier run to compare with",
        ));
    }
    if wants_text(headers) {
        return Err(ApiError::invalid_request(
            "`response=changes` answers JSON; do not ask for text/plain",
        ));
    }
    Ok(())
}

/// `POST /v1/layout-assignment`.
async fn stateless_run(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let format = body_format(
        &headers,
        &[BodyFormat::Text, BodyFormat::Json, BodyFormat::Yaml],
    )?;
    let from_query = query(&uri)?;
    let bytes = state.read_body(body).await?;
    let file_name = "request.hlo";
    let (text, options) = match format {
        BodyFormat::Text => (hlo_text(&bytes, file_name)?, from_query),
        _ => {
            let w: RunWire = state.decode_body(format, &bytes).await?;
            (w.module, from_query.overridden_by(w.target, w.options))
        }
    };
    check_response_form(&options, &headers, false)?;
    let opts = state.driver_options(&options, None).await?;
    let semantic = options
        .semantic()
        .then_some(state.config().semantic_max_elements);
    let (out, check) = state
        .run_blocking(move || {
            let out = driver::run(&text, file_name, &opts)?;
            // The input parsed once already; it parses again here only
            // when the check is asked for.
            let check = semantic.and_then(|max| {
                let before = hlo::parse_module(&text, file_name).ok()?;
                let after = out.module().ok()?;
                Some(crate::semantic::check_json(&before, &after, max))
            });
            Ok((out, check))
        })
        .await?
        .map_err(job_error)?
        .map_err(pipeline_error)?;
    Ok(run_answer(
        &state,
        out,
        wants_text(&headers),
        started,
        None,
        check,
    ))
}

fn check_id(id: &str) -> Result<(), ApiError> {
    if valid_id(id) {
        Ok(())
    } else {
        Err(ApiError::invalid_request(format!(
            "'{id}' is not a session id: use 1 to 128 characters from A-Z, a-z, 0-9, '.', '_' and '-'"
        )))
    }
}

/// The session named `id`, marked as just used; 404 when there is none.
fn session_handle(state: &AppState, id: &str) -> Result<SessionHandle, ApiError> {
    state
        .shared
        .sessions
        .get(id)
        .ok_or_else(|| session_not_found(id))
}

fn session_not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "session_not_found",
        format!("no session is named '{id}'"),
    )
    .with("id", id)
}

fn session_too_large(text_bytes: usize, computations: usize, max: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "session_too_large",
        format!(
            "a session of this module ({text_bytes} bytes of text, {computations} computations, an estimated {} bytes once run) would not fit in the session memory limit of {max} bytes (max_session_bytes)",
            estimated_bytes(text_bytes, computations)
        ),
    )
    .with("limit", max)
}

/// The JSON description of a session.
fn session_json(id: &str, s: &Session) -> Value {
    json!({
        "id": id,
        "module": s.module_name,
        "target": s.target.name,
        "computations": s.computations.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        "bytes": s.bytes,
        "memory_bytes": s.held_bytes(),
    })
}

/// Drops a session whose work panicked: its database may be half updated.
fn discard_after_panic(
    state: &AppState,
    id: &str,
    handle: &SessionHandle,
    e: JobError,
) -> ApiError {
    if matches!(e, JobError::Panic(_)) {
        state.shared.sessions.remove_if_same(id, handle);
    }
    let mut err = job_error(e);
    err.message.push_str("; the session was discarded");
    err
}

/// `PUT /v1/modules/{id}`: loads (or reloads) a session's module.
async fn put_module(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    let format = body_format(
        &headers,
        &[BodyFormat::Text, BodyFormat::Json, BodyFormat::Yaml],
    )?;
    let q = query(&uri)?;
    let o = &q.options;
    if o.expand_relayouts.is_some()
        || o.passes.is_some()
        || o.verify.is_some()
        || o.solver.is_some()
        || o.solver_time_limit.is_some()
    {
        return Err(ApiError::invalid_request(
            "PUT takes only the 'target' query parameter; give run options to POST /v1/modules/{id}/layout-assignment",
        ));
    }
    let bytes = state.read_body(body).await?;
    let file_name = format!("modules/{id}");
    let (text, target) = match format {
        BodyFormat::Text => (hlo_text(&bytes, &file_name)?, q.target),
        _ => {
            let w: ModuleWire = state.decode_body(format, &bytes).await?;
            (w.module, w.target.or(q.target))
        }
    };
    let target = state
        .resolve_target(&target.unwrap_or_else(|| TargetWire::Name("cpu".into())))
        .await?;
    let max = state.shared.sessions.max_bytes();
    // Its text alone may be too much already; its computations are
    // counted once it is read.
    if estimated_bytes(text.len(), 0) > max {
        return Err(session_too_large(text.len(), 0, max));
    }
    let existing = state.shared.sessions.get(&id);
    let created = existing.is_none();
    let handle: SessionHandle = existing.unwrap_or_else(|| Arc::new(tokio::sync::Mutex::new(None)));
    let mut guard = handle.clone().lock_owned().await;
    let job_id = id.clone();
    let job = state
        .run_blocking(move || {
            // Every module is checked before a session holds it, so that
            // a session never holds a malformed module. A new one in its
            // own database, whose parses and checks its first run then
            // reuses. One that exists apart from its database, which keeps
            // its module if the new one is refused and is then left with
            // nothing of it: a check in a database of its own, thrown
            // away, took 2.5 times as long on the 1e5 module.
            let mut s = match guard.take() {
                None => checked_session(&text, &file_name, target.clone(), max)?,
                Some(old) => {
                    let reloaded = match checked_apart(&text, &file_name, max) {
                        Ok(names) => reload(old, &names, &text, &file_name, target.clone(), max),
                        Err(e) => Err((Box::new(old), e)),
                    };
                    match reloaded {
                        Ok(s) => s,
                        Err((old, e)) => {
                            *guard = Some(*old);
                            return Err(e);
                        }
                    }
                }
            };
            s.target = target;
            s.file_name = file_name;
            s.refresh(text.len());
            let answer = session_json(&job_id, &s);
            let bytes = s.held_bytes();
            *guard = Some(s);
            Ok((answer, bytes))
        })
        .await?;
    let (answer, bytes) = match job {
        Ok(r) => r?,
        Err(e) => return Err(discard_after_panic(&state, &id, &handle, e)),
    };
    let evicted = state.shared.sessions.commit(&id, &handle, bytes);
    state.metrics().record_evictions(evicted);
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(answer)).into_response())
}

/// A new session holding `text`, checked in its database as a `PATCH` is
/// (see `put_module`). It keeps the parses and checks for its first run.
fn checked_session(
    text: &str,
    file_name: &str,
    target: Arc<target::TargetSpec>,
    max: usize,
) -> Result<Session, ApiError> {
    let mut s = Session::new(target.clone(), file_name.to_string());
    s.db.load(text, file_name, target).map_err(load_error)?;
    let computations = s.db.module().map_or(0, |m| m.computations(&s.db).len());
    if estimated_bytes(text.len(), computations) > max {
        return Err(session_too_large(text.len(), computations, max));
    }
    driver::check_loaded_input(&mut s.db).map_err(pipeline_error)?;
    Ok(s)
}

/// The names of the computations of `text`, once it is parsed and passes
/// the input check (see [`checked_session`]), apart from any database.
fn checked_apart(text: &str, file_name: &str, max: usize) -> Result<Vec<String>, ApiError> {
    let module = hlo::parse_module(text, file_name).map_err(|e| ApiError::parse(&e))?;
    let computations = module.computations.len();
    if estimated_bytes(text.len(), computations) > max {
        return Err(session_too_large(text.len(), computations, max));
    }
    driver::check_input(&module, text, file_name).map_err(pipeline_error)?;
    Ok(module.computations.iter().map(|c| c.name.clone()).collect())
}

/// The session that exists, with `text` (checked, with computations of
/// these `names`) loaded into its database, so that its next run redoes
/// only what changed. A load leaves behind in the database each
/// computation the new module does not name, with its values
/// ([`db::LeftBehind`]), and the session is charged for them. Once they
/// would outweigh the module, or put the session over the cap, the
/// session starts over in a new database instead.
fn reload(
    mut old: Session,
    names: &[String],
    text: &str,
    file_name: &str,
    target: Arc<target::TargetSpec>,
    max: usize,
) -> Result<Session, (Box<Session>, ApiError)> {
    let left = old.db.would_leave_behind(names.iter().map(String::as_str));
    let too_much = left.computations > names.len()
        || left.text_bytes > text.len()
        || estimated_bytes(
            text.len().saturating_add(left.text_bytes),
            names.len().saturating_add(left.computations),
        ) > max;
    // A load that fails changes nothing (it fails before it writes), and
    // the session keeps its module.
    if !too_much {
        return match old.db.load(text, file_name, target) {
            Ok(_) => Ok(old),
            Err(e) => Err((Box::new(old), load_error(e))),
        };
    }
    let mut fresh = Session::new(target.clone(), file_name.to_string());
    if let Err(e) = fresh.db.load(text, file_name, target) {
        return Err((Box::new(old), load_error(e)));
    }
    // The session's last answer still stands, for a client that asks what
    // changed since.
    fresh.last_answer = old.last_answer.take();
    Ok(fresh)
}

/// A load's error as an answer.
fn load_error(e: db::LoadError) -> ApiError {
    match e {
        db::LoadError::Parse(e) => ApiError::parse(&e),
        e => ApiError::invalid_request(e.to_string()),
    }
}

/// The computation name a computation's text declares, and whether it is
/// marked `ENTRY`.
fn declared_name(text: &str) -> (String, bool) {
    let t = text.trim_start();
    let (t, entry) = match t.strip_prefix("ENTRY") {
        Some(rest) if rest.starts_with(char::is_whitespace) => (rest.trim_start(), true),
        _ => (t, false),
    };
    let end = t
        .find(|c: char| c.is_whitespace() || c == '(' || c == '{')
        .unwrap_or(t.len());
    (t[..end].trim_start_matches('%').to_string(), entry)
}

/// `PATCH /v1/modules/{id}`: replaces whole computations.
async fn patch_module(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    let format = body_format(&headers, &[BodyFormat::Json, BodyFormat::Yaml])?;
    let bytes = state.read_body(body).await?;
    let patch: PatchWire = state.decode_body(format, &bytes).await?;
    if patch.computations.is_empty() {
        return Err(ApiError::invalid_request(
            "'computations' names no computation",
        ));
    }
    let handle = session_handle(&state, &id)?;
    let mut guard = handle.clone().lock_owned().await;
    let max = state.shared.sessions.max_bytes();
    let job_id = id.clone();
    let job = state
        .run_blocking(move || -> Result<(Value, usize), ApiError> {
            let Some(s) = guard.as_mut() else { return Err(session_not_found(&job_id)) };
            let mut replacements = Vec::with_capacity(patch.computations.len());
            let mut bytes = s.bytes;
            for (key, text) in patch.computations {
                let name = key.trim_start_matches('%').to_string();
                if replacements.iter().any(|(n, _): &(String, String)| *n == name) {
                    return Err(ApiError::invalid_request(format!("computation '{name}' is given twice"))
                        .with("computation", name));
                }
                let Some(info) = s.computations.iter().find(|c| c.name == name) else {
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "unknown_computation",
                        format!("the module has no computation named '{name}'"),
                    )
                    .with("computation", name));
                };
                let (declared, entry) = declared_name(&text);
                if declared != name || entry != info.entry {
                    let expected = if info.entry { format!("ENTRY %{name}") } else { format!("%{name}") };
                    return Err(ApiError::invalid_request(format!(
                        "the text given for '{name}' must be the whole computation, starting with '{expected}'"
                    ))
                    .with("computation", name));
                }
                bytes = bytes.saturating_sub(info.bytes) + text.len();
                replacements.push((name, text));
            }
            if s.charge_for(bytes) > max {
                return Err(session_too_large(bytes, s.computations.len(), max));
            }
            let previous: Vec<(String, String)> = replacements
                .iter()
                .map(|(name, _)| (name.clone(), s.db.computation_text(name).unwrap_or_default()))
                .collect();
            s.db.replace_computations(&replacements).map_err(|e| ApiError::invalid_request(e.to_string()))?;
            // An edit that leaves the module malformed is refused, and the
            // session keeps the module it had.
            if let Err(e) = driver::check_loaded_input(&mut s.db) {
                s.db.replace_computations(&previous).map_err(|e| ApiError::invalid_request(e.to_string()))?;
                return Err(pipeline_error(e));
            }
            for (name, text) in &replacements {
                if let Some(c) = s.computations.iter_mut().find(|c| &c.name == name) {
                    c.bytes = text.len();
                }
            }
            s.bytes = bytes;
            let mut answer = session_json(&job_id, s);
            if let Value::Object(m) = &mut answer {
                m.insert("replaced".into(), json!(replacements.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()));
            }
            Ok((answer, s.held_bytes()))
        })
        .await?;
    let (answer, bytes) = match job {
        Ok(r) => r?,
        Err(e) => return Err(discard_after_panic(&state, &id, &handle, e)),
    };
    let evicted = state.shared.sessions.commit(&id, &handle, bytes);
    state.metrics().record_evictions(evicted);
    Ok(axum::Json(answer).into_response())
}

/// `POST /v1/modules/{id}/layout-assignment`: runs the pipeline on the
/// session's module, recomputing only what changed.
async fn session_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    check_id(&id)?;
    let format = body_format(
        &headers,
        &[BodyFormat::Text, BodyFormat::Json, BodyFormat::Yaml],
    )?;
    let mut options = query(&uri)?;
    let bytes = state.read_body(body).await?;
    if !bytes.iter().all(u8::is_ascii_whitespace) {
        if format == BodyFormat::Text {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "the module is the session's: send run options as JSON or YAML (or as query parameters), not text",
            ));
        }
        let w: SessionRunWire = state.decode_body(format, &bytes).await?;
        options = options.overridden_by(w.target, w.options);
    }
    check_response_form(&options, &headers, true)?;
    let (changes, since) = (
        options.response == ResponseForm::Changes,
        options.since.clone(),
    );
    let handle = session_handle(&state, &id)?;
    let mut guard = handle.clone().lock_owned().await;
    let Some(current) = guard.as_ref().map(|s| s.target.clone()) else {
        return Err(session_not_found(&id));
    };
    let opts = state.driver_options(&options, Some(current)).await?;
    let semantic = options
        .semantic()
        .then_some(state.config().semantic_max_elements);
    let job_id = id.clone();
    let text_only = wants_text(&headers);
    // A run with nothing to redo only reads what the last run made: it is
    // answered here rather than on the blocking pool (see
    // `AppState::run_here`).
    let lookup = match guard.as_ref() {
        Some(s) => semantic.is_none() && driver::nothing_to_redo(&s.db, &opts),
        None => return Err(session_not_found(&id)),
    };
    let work = move || {
        let Some(s) = guard.as_mut() else {
            return Err(session_not_found(&job_id));
        };
        if *s.target != *opts.target {
            s.db.set_target(opts.target.clone())
                .map_err(|e| ApiError::internal(e.to_string()))?;
            s.target = opts.target.clone();
        }
        s.db.set_solver(opts.solver)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        s.db.clear_executions();
        let out = driver::run_loaded(&mut s.db, &opts);
        // A database run joins its reports when first asked for; a
        // JSON answer carries them, so they are joined here, on the
        // blocking pool, rather than where the answer is written.
        if let Ok(o) = &out
            && !text_only
        {
            let _ = o.report.assignment();
        }
        let recomputed = s.db.recomputed_computations();
        let answer = match &out {
            Ok(o) => Some(session_answer(s, o, recomputed, changes, since.as_deref())?),
            Err(_) => None,
        };
        let check = match (&out, semantic) {
            (Ok(o), Some(max)) => {
                let before =
                    s.db.parsed_module()
                        .map_err(|e| ApiError::internal(e.to_string()))?;
                // The input module was parsed again for the check: the
                // session does not keep parses between runs, nor is it
                // charged for them.
                s.db.release_intermediates(true);
                let after = o.module().map_err(|e| ApiError::internal(e.to_string()))?;
                Some(crate::semantic::check_json(&before, &after, max))
            }
            _ => None,
        };
        Ok((out, answer, s.held_bytes(), check))
    };
    let job = if lookup {
        state.run_here(work)
    } else {
        state.run_blocking(work).await?
    };
    let (out, answer, held, check) = match job {
        Ok(r) => r?,
        Err(e) => return Err(discard_after_panic(&state, &id, &handle, e)),
    };
    // The run filled the database: charge the session what it holds now.
    let evicted = state.shared.sessions.recharge(&id, &handle, held);
    state.metrics().record_evictions(evicted);
    let out = out.map_err(pipeline_error)?;
    Ok(run_answer(&state, out, text_only, started, answer, check))
}

/// What a successful run of session `s` adds to its answer `o`, with the
/// changes since run `since` when `changes`; the session remembers the
/// run.
fn session_answer(
    s: &mut Session,
    o: &driver::Output,
    recomputed: Vec<String>,
    changes: bool,
    since: Option<&str>,
) -> Result<SessionAnswer, ApiError> {
    let run = crate::changes::new_run_token();
    let (fields, rendered) = if changes {
        let (fields, rendered) =
            crate::changes::changes_fields(o, &run, since, s.last_answer.as_ref())
                .map_err(|e| ApiError::internal(e.to_string()))?;
        (Some(fields), Some(rendered))
    } else {
        let kept = s
            .last_answer
            .take()
            .and_then(crate::changes::LastAnswer::into_rendered);
        (None, kept)
    };
    s.last_answer = Some(crate::changes::remember(run.clone(), o, rendered));
    Ok(SessionAnswer {
        run,
        recomputed,
        changes: fields,
    })
}

/// `GET /v1/modules/{id}`.
async fn get_module(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    let handle = session_handle(&state, &id)?;
    let guard = handle.lock().await;
    let s = guard.as_ref().ok_or_else(|| session_not_found(&id))?;
    Ok(axum::Json(session_json(&id, s)).into_response())
}

/// `DELETE /v1/modules/{id}`.
async fn delete_module(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_id(&id)?;
    if state.shared.sessions.remove(&id) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(session_not_found(&id))
    }
}

/// `GET /v1/targets`.
async fn targets(State(state): State<AppState>) -> Response {
    let list: Vec<Value> = state
        .shared
        .targets
        .iter()
        .map(|(name, spec)| json!({ "name": name, "description": spec.description.trim() }))
        .collect();
    axum::Json(json!({ "targets": list })).into_response()
}

/// `GET /healthz`.
async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// `GET /metrics`.
async fn metrics(State(state): State<AppState>) -> Response {
    let text = state.render_metrics();
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

/// `GET /openapi.json`.
async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        crate::OPENAPI,
    )
        .into_response()
}

/// Any other path.
async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route for {method} {}", uri.path()),
    )
}

impl Session {
    /// An empty session.
    fn new(target: Arc<target::TargetSpec>, file_name: String) -> Session {
        Session {
            db: db::Database::default(),
            target,
            file_name,
            module_name: String::new(),
            computations: Vec::new(),
            bytes: 0,
            last_answer: None,
        }
    }

    /// Re-reads the module's name and computations after a load.
    fn refresh(&mut self, bytes: usize) {
        self.bytes = bytes;
        self.computations.clear();
        if let Some(m) = self.db.module() {
            self.module_name = m.header(&self.db).name.clone();
            let entry = m.entry(&self.db) as usize;
            for (i, c) in m.computations(&self.db).iter().enumerate() {
                self.computations.push(CompInfo {
                    name: c.name(&self.db).clone(),
                    bytes: c.text(&self.db).len(),
                    entry: i == entry,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job that panics, indexing past the end of an empty list.
    fn index_out_of_bounds() -> u8 {
        let v: Vec<u8> = Vec::new();
        let i = v.len() + 1;
        v[i]
    }

    /// `job` panicked, and its answer is a 500 `internal` naming the panic.
    fn assert_answered_as_a_panic(job: Result<u8, JobError>) {
        let err = match job {
            Ok(_) => panic!("the job panicked"),
            Err(e) => job_error(e),
        };
        assert_eq!(err.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(err.kind, "internal");
        assert!(
            err.message.contains("index out of bounds"),
            "{}",
            err.message
        );
    }

    #[tokio::test]
    async fn a_panic_on_the_blocking_pool_becomes_a_500_and_frees_the_slot() {
        let state = AppState::new(crate::Config {
            max_concurrency: 1,
            ..crate::Config::default()
        });
        let job = state
            .run_blocking(index_out_of_bounds)
            .await
            .map_err(|e| e.message)
            .expect("a slot was free");
        assert_answered_as_a_panic(job);
        // The slot came back.
        assert!(state.try_acquire_worker().is_some());
    }

    /// A look-up runs on the request's task, and its panic is answered as
    /// one on the pool is: a 500, the process still up.
    #[tokio::test]
    async fn a_panic_in_a_lookup_becomes_a_500() {
        let state = AppState::new(crate::Config::default());
        assert_answered_as_a_panic(state.run_here(index_out_of_bounds));
        assert_eq!(state.metrics().lookups(), 1);
    }
}
