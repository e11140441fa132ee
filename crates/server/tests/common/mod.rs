//! Helpers shared by the service tests: the corpus, in-process calls and
//! answer checks.
#![allow(dead_code)]

use std::path::PathBuf;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use server::{AppState, Config};
use tower::ServiceExt;

/// The repository's `testdata/` directory.
pub fn testdata_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// A file under `testdata/`.
pub fn testdata(rel: &str) -> String {
    let path = testdata_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A corpus module: `testdata/xla-cpu/NAME/before_layout.hlo`.
pub fn corpus(name: &str) -> String {
    testdata(&format!("xla-cpu/{name}/before_layout.hlo"))
}

/// Every corpus module's name.
pub fn corpus_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(testdata_dir().join("xla-cpu"))
        .expect("testdata/xla-cpu")
        .flatten()
        .filter(|e| e.path().join("before_layout.hlo").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A service with `config`.
pub fn app(config: Config) -> (Router, AppState) {
    let state = AppState::new(config);
    (server::router(state.clone()), state)
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "the body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).expect("UTF-8 body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts an error answer of this status and kind in the JSON error
    /// form, and returns the `error` object.
    #[track_caller]
    pub fn error(&self, status: u16, kind: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "status; body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "an error answer is JSON"
        );
        let v = self.json();
        let e = v
            .get("error")
            .cloned()
            .unwrap_or_else(|| panic!("no 'error' object: {v}"));
        assert_eq!(e["kind"], kind, "kind; error: {e}");
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "a message: {e}"
        );
        e
    }
}

/// Sends a request through the router in process.
pub async fn call(router: &Router, req: Request<Body>) -> Answer {
    let response = router
        .clone()
        .oneshot(req)
        .await
        .expect("the router is infallible");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a readable body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// A request with a body and a content type.
pub fn request(
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: impl Into<Body>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    b.body(body.into()).expect("a valid request")
}

/// A request without a body.
pub fn get(uri: &str) -> Request<Body> {
    request("GET", uri, None, Body::empty())
}

/// A report without its timings, which differ between runs.
pub fn without_timings(report: &Value) -> Value {
    let mut r = report.clone();
    if let Some(o) = r.as_object_mut() {
        o.remove("timings_us");
    }
    r
}

/// Runs session `id` (CPU target) and checks that its output is the
/// stateless output of `text`; returns the answer.
pub async fn run_session_expecting(router: &Router, id: &str, text: &str) -> Answer {
    let a = call(
        router,
        request(
            "POST",
            &format!("/v1/modules/{id}/layout-assignment"),
            None,
            "",
        ),
    )
    .await;
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(text, "cpu").0.as_str()),
        "session {id}"
    );
    a
}

/// What a session of module `text` is charged, with `extra_bytes` of
/// text and `extra` computations that earlier modules left behind.
pub fn session_charge(text: &str, extra_bytes: usize, extra: usize) -> usize {
    let computations = hlo::outline(text, "m.hlo")
        .expect("outlines")
        .computations
        .len();
    server::estimated_session_bytes(text.len() + extra_bytes, computations + extra)
}

/// The text of computation `name` (without `%`) of module `text`, as a
/// session holds it.
pub fn computation_text<'a>(text: &'a str, name: &str) -> &'a str {
    let outline = hlo::outline(text, "m.hlo").expect("outlines");
    let c = outline
        .computations
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("the module has no computation {name}"));
    c.span.text(text)
}

/// The expected answer of a stateless run: what the library gives.
pub fn expected(text: &str, target: &str) -> (String, Value) {
    let spec = target::load_builtin(target).expect("a built-in target");
    let opts = driver::Options::new(std::sync::Arc::new(spec));
    let out = driver::run(text, "request.hlo", &opts).expect("the corpus module runs");
    (out.text().to_string(), wire::report_json(&out.report))
}

/// Healthy corpus modules with their stateless answers (CPU target), for
/// storms that mix them with bad requests.
pub fn healthy_modules() -> std::sync::Arc<Vec<(String, String)>> {
    let healthy = ["mlp_fwd", "cond_switch", "sort_ops"]
        .iter()
        .map(|name| {
            let text = corpus(name);
            let want = expected(&text, "cpu").0;
            (text, want)
        })
        .collect();
    std::sync::Arc::new(healthy)
}

/// A service on a loopback port, in this process.
pub struct Running {
    pub addr: std::net::SocketAddr,
    pub state: AppState,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Starts the service with `config` on a loopback port.
pub async fn start(config: Config) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("an address");
    let state = AppState::new(config);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server::serve(listener, state.clone(), async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        state,
        stop: Some(tx),
        task,
    }
}

impl Running {
    /// Begins the shutdown.
    pub fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// `region_0.1` with `add` turned into `maximum`: its body changes, its
/// signature does not.
pub fn edited_region(module: &str) -> (String, String) {
    let start = module
        .find("%region_0.1 (")
        .expect("region_0.1 is in the module");
    let end = start + module[start..].find("\n}\n").expect("its closing brace") + 2;
    let old = &module[start..end];
    let new = old.replace(
        "add(%reduce_sum.3, %reduce_sum.4)",
        "maximum(%reduce_sum.3, %reduce_sum.4)",
    );
    assert_ne!(old, new, "the edit changes the body");
    (old.to_string(), new)
}
