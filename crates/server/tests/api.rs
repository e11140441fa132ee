//! The stateless routes and every error answer, in process through
//! `tower::ServiceExt::oneshot`.

mod common;

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::Request;
use common::*;
use serde_json::{Value, json};
use server::Config;

#[tokio::test]
async fn healthz_answers_ok_with_a_generated_request_id() {
    let (router, _) = app(Config::default());
    let a = call(&router, get("/healthz")).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json(), json!({ "status": "ok" }));
    let id = a.header("x-request-id").expect("a generated request id");
    assert!(!id.is_empty());
    let b = call(&router, get("/healthz")).await;
    assert_ne!(
        b.header("x-request-id"),
        Some(id),
        "each request gets its own id"
    );
}

#[tokio::test]
async fn a_client_request_id_is_echoed() {
    let (router, _) = app(Config::default());
    let req = Request::builder()
        .uri("/healthz")
        .header("x-request-id", "client-42")
        .body(Body::empty())
        .expect("request");
    let a = call(&router, req).await;
    assert_eq!(a.header("x-request-id"), Some("client-42"));
    // Error answers carry it too.
    let req = Request::builder()
        .uri("/nowhere")
        .header("x-request-id", "client-43")
        .body(Body::empty())
        .expect("request");
    let a = call(&router, req).await;
    a.error(404, "not_found");
    assert_eq!(a.header("x-request-id"), Some("client-43"));
}

#[tokio::test]
async fn targets_lists_the_built_ins_with_descriptions() {
    let (router, _) = app(Config::default());
    let a = call(&router, get("/v1/targets")).await;
    assert_eq!(a.status, 200);
    let list = a.json()["targets"].as_array().cloned().expect("a list");
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    let builtin: Vec<&str> = target::builtin_names().collect();
    assert_eq!(names.len(), builtin.len());
    for b in builtin {
        assert!(names.contains(&b), "{b} listed");
    }
    for t in &list {
        let name = t["name"].as_str().unwrap_or_default();
        let spec = target::load_builtin(name).expect("loads");
        assert_eq!(t["description"], spec.description.trim());
        assert!(!spec.description.trim().is_empty());
    }
}

#[tokio::test]
async fn openapi_document_describes_every_route_that_exists() {
    let (router, _) = app(Config::default());
    let a = call(&router, get("/openapi.json")).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    let doc = a.json();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    let paths = doc["paths"].as_object().expect("paths");
    let mut probed = 0;
    for (path, item) in paths {
        for method in ["get", "put", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            // A probe must reach a handler: never the 404 of an unknown
            // route nor a 405.
            let uri = path.replace("{id}", "probe");
            let a = call(
                &router,
                request(&method.to_uppercase(), &uri, Some("application/json"), "{}"),
            )
            .await;
            assert_ne!(a.status, 405, "{method} {path}");
            if a.status == 404 {
                assert_eq!(
                    a.json()["error"]["kind"],
                    "session_not_found",
                    "{method} {path} reaches its handler"
                );
            }
            probed += 1;
        }
    }
    assert_eq!(probed, 17, "seventeen operations are documented");
}

#[tokio::test]
async fn every_status_a_probe_gets_is_documented_for_its_operation() {
    let (router, _) = app(Config::default());
    let doc: Value = serde_json::from_str(server::OPENAPI).expect("the document is JSON");
    let paths = doc["paths"].as_object().expect("paths");
    let bodies = [
        (Some("application/json"), "{}"),
        (Some("application/json"), "{\"module\": 1"),
        (Some("application/yaml"), "module: [x"),
        (Some("text/plain"), ""),
        (Some("text/plain"), "HloModule m"),
        (Some("image/png"), "x"),
        (None, ""),
    ];
    let mut probed = 0;
    for (path, item) in paths {
        let ids: &[&str] = if path.contains("{id}") {
            &["probe", "not%20an%20id", "x.y_z-1"]
        } else {
            &[""]
        };
        for method in ["get", "put", "post", "patch", "delete"] {
            let Some(op) = item.get(method) else { continue };
            let responses = op["responses"].as_object().expect("responses");
            for id in ids {
                let uri = path.replace("{id}", id);
                for (content_type, body) in bodies {
                    let a = call(
                        &router,
                        request(&method.to_uppercase(), &uri, content_type, body),
                    )
                    .await;
                    let status = a.status.as_str().to_string();
                    assert!(
                        responses.contains_key(&status),
                        "{method} {uri} with {content_type:?} {body:?} answered {status}, which the document does not list: {}",
                        String::from_utf8_lossy(&a.body)
                    );
                    probed += 1;
                }
            }
        }
    }
    assert!(probed > 100, "{probed}");
}

#[tokio::test]
async fn text_body_gives_the_library_output_and_report() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("content-type"), Some("application/json"));
    let v = a.json();
    let (module, report) = expected(&text, "cpu");
    assert_eq!(
        v["module"].as_str(),
        Some(module.as_str()),
        "byte for byte the library's output"
    );
    assert_eq!(
        without_timings(&v["report"]),
        without_timings(&report),
        "the report is wire::report_json"
    );
    let steps: Vec<&String> = v["report"]["timings_us"]
        .as_object()
        .expect("timings_us")
        .keys()
        .collect();
    let expected_steps: Vec<&String> = report["timings_us"]
        .as_object()
        .expect("timings_us")
        .keys()
        .collect();
    assert_eq!(steps, expected_steps);
    let timings = v["timings"].as_object().expect("timings");
    assert!(timings["total"].as_u64().is_some());
    for step in expected_steps {
        assert!(
            timings[step.as_str()].as_u64().is_some(),
            "timings has {step}"
        );
    }
}

#[tokio::test]
async fn json_body_with_target_and_options() {
    let (router, _) = app(Config::default());
    let text = corpus("softmax_axes");
    let body = json!({ "module": text, "target": "gpu", "options": { "passes": ["layout-assignment"], "expand_relayouts": false } });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["report"]["target"], "gpu");
    assert_eq!(v["report"]["passes"], json!(["layout-assignment"]));
    assert!(
        v["report"].get("relayout").is_none(),
        "relayout did not run"
    );
    let spec = std::sync::Arc::new(target::load_builtin("gpu").expect("gpu"));
    let mut opts = driver::Options::new(spec);
    opts.passes = vec![driver::PassName::LayoutAssignment];
    let out = driver::run(&text, "request.hlo", &opts).expect("runs");
    assert_eq!(v["module"].as_str(), Some(out.text()));
}

#[tokio::test]
async fn yaml_body_and_query_options() {
    let (router, _) = app(Config::default());
    let text = corpus("layernorm_fwd");
    let mut yaml = String::from("target: gpu\noptions:\n  verify: true\nmodule: |\n");
    for line in text.lines() {
        yaml.push_str("  ");
        yaml.push_str(line);
        yaml.push('\n');
    }
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/yaml"),
            yaml,
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let (module, _) = expected(&text, "gpu");
    assert_eq!(a.json()["module"].as_str(), Some(module.as_str()));

    let uri =
        "/v1/layout-assignment?target=gpu&passes=layout-assignment,relayout&expand_relayouts=true";
    let a = call(
        &router,
        request("POST", uri, Some("text/plain; charset=utf-8"), text.clone()),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["report"]["target"], "gpu");
    assert_eq!(
        v["report"]["passes"],
        json!(["layout-assignment", "relayout"])
    );
    let mut opts = driver::Options::new(std::sync::Arc::new(
        target::load_builtin("gpu").expect("gpu"),
    ));
    opts.expand_relayouts = true;
    let out = driver::run(&text, "request.hlo", &opts).expect("runs");
    assert_eq!(
        v["module"].as_str(),
        Some(out.text()),
        "expand_relayouts reaches the driver"
    );
    assert_eq!(
        without_timings(&v["report"]),
        without_timings(&wire::report_json(&out.report))
    );
}

#[tokio::test]
async fn expand_relayouts_reaches_the_relayout_pass() {
    let (router, _) = app(Config::default());
    // A copy from a tiled to an untiled layout: expanded, it becomes
    // bitcast, transpose, bitcast and slice.
    let text = "HloModule expand, entry_computation_layout={(f32[3,200]{1,0:T(8,128)})->f32[3,200]{1,0}}\n\nENTRY %main (p: f32[3,200]) -> f32[3,200] {\n  %p = f32[3,200]{1,0:T(8,128)} parameter(0)\n  %x = f32[3,200]{1,0} copy(%p)\n  ROOT %n = f32[3,200]{1,0} negate(%x)\n}\n";
    let mut outputs = Vec::new();
    for expand in [false, true] {
        let uri =
            format!("/v1/layout-assignment?target=gpu&passes=relayout&expand_relayouts={expand}");
        let a = call(&router, request("POST", &uri, Some("text/plain"), text)).await;
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        let mut opts = driver::Options::new(std::sync::Arc::new(
            target::load_builtin("gpu").expect("gpu"),
        ));
        opts.passes = vec![driver::PassName::Relayout];
        opts.expand_relayouts = expand;
        let out = driver::run(text, "request.hlo", &opts).expect("runs");
        let module = a.json()["module"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_default();
        assert_eq!(module, out.text(), "expand_relayouts={expand}");
        outputs.push(module);
    }
    assert!(!outputs[0].contains("transpose("), "{}", outputs[0]);
    assert!(
        outputs[1].contains("transpose("),
        "expanded: {}",
        outputs[1]
    );
}

#[tokio::test]
async fn accept_text_plain_gives_the_hlo_alone() {
    let (router, _) = app(Config::default());
    let text = corpus("transpose_reshape_chain");
    let req = Request::builder()
        .method("POST")
        .uri("/v1/layout-assignment")
        .header("content-type", "text/plain")
        .header("accept", "text/plain")
        .body(Body::from(text.clone()))
        .expect("request");
    let a = call(&router, req).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(a.text(), expected(&text, "cpu").0);
}

#[tokio::test]
async fn inline_target_object() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    let inline = json!({ "name": "mini", "description": "row-major everything", "default_layout": "descending" });
    let body = json!({ "module": text, "target": inline });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["report"]["target"], "mini");

    let bad = json!({ "module": text, "target": { "name": "mini", "default_layout": "sideways" } });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            bad.to_string(),
        ),
    )
    .await;
    let e = a.error(400, "invalid_target");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("sideways")),
        "{e}"
    );

    let not_object = json!({ "module": text, "target": 7 });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            not_object.to_string(),
        ),
    )
    .await;
    a.error(400, "invalid_target");
}

#[tokio::test]
async fn malformed_hlo_is_400_with_line_and_col() {
    let (router, _) = app(Config::default());
    let text = testdata("errors/missing_equals.hlo");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    let e = a.error(400, "parse_error");
    assert_eq!(
        (e["line"].as_u64(), e["col"].as_u64()),
        (Some(7), Some(6)),
        "{e}"
    );
    assert_eq!(
        e["message"],
        "expected '=' after instruction name %x, found 'f'"
    );
    assert_eq!(e["source_line"], "  %x f32[] constant(0)");

    // Every malformed file of the corpus gets a located 400.
    for entry in std::fs::read_dir(testdata_dir().join("errors"))
        .expect("testdata/errors")
        .flatten()
    {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "hlo") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("readable");
        let a = call(
            &router,
            request("POST", "/v1/layout-assignment", Some("text/plain"), bytes),
        )
        .await;
        let e = a.error(400, "parse_error");
        assert!(
            e["line"].as_u64().is_some_and(|l| l >= 1) && e["col"].as_u64().is_some_and(|c| c >= 1),
            "{}: {e}",
            path.display()
        );
    }
}

#[tokio::test]
async fn invalid_utf8_is_a_located_parse_error() {
    let (router, _) = app(Config::default());
    let mut bytes =
        b"HloModule m\n\nENTRY %main {\n  ROOT %x = f32[] constant(0)\xff\n}\n".to_vec();
    bytes.extend_from_slice(b"\n");
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), bytes),
    )
    .await;
    let e = a.error(400, "parse_error");
    assert_eq!(e["line"].as_u64(), Some(4), "{e}");
}

#[tokio::test]
async fn unknown_target_pass_and_parameters_are_400() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?target=tpu9",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    let e = a.error(400, "unknown_target");
    assert!(
        e["known"]
            .as_array()
            .is_some_and(|k| k.contains(&json!("cpu"))),
        "{e}"
    );
    // A path is not a target name: the service never reads its disk.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?target=targets/cpu.yaml",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "unknown_target");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?passes=layout-assignment,dce",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "unknown_pass");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?tagret=cpu",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    let e = a.error(400, "invalid_request");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("tagret")),
        "{e}"
    );
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?verify=perhaps",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "invalid_request");
}

#[tokio::test]
async fn malformed_json_and_yaml_bodies_are_400_with_position() {
    let (router, _) = app(Config::default());
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            "{\n  \"module\": \"x\",\n  oops\n}",
        ),
    )
    .await;
    let e = a.error(400, "invalid_request");
    assert_eq!(e["line"].as_u64(), Some(3), "{e}");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            r#"{"module": "x", "modle": 1}"#,
        ),
    )
    .await;
    let e = a.error(400, "invalid_request");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("modle")),
        "{e}"
    );
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            r#"{"target": "cpu"}"#,
        ),
    )
    .await;
    a.error(400, "invalid_request");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/yaml"),
            "module: x\noptions:\n  expand: true\n",
        ),
    )
    .await;
    let e = a.error(400, "invalid_request");
    assert!(e["line"].as_u64().is_some(), "{e}");
}

#[tokio::test]
async fn a_module_that_parses_but_cannot_be_assigned_is_422() {
    let (router, _) = app(Config::default());
    // A computation that calls itself: no layout assignment exists.
    let text = "HloModule rec\n\n%f (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %c = f32[] call(%p), to_apply=%f\n}\n\nENTRY %main (x: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n  ROOT %r = f32[] call(%x), to_apply=%f\n}\n";
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), text),
    )
    .await;
    let e = a.error(422, "assign_error");
    assert_eq!(
        e["message"],
        "the call graph has a cycle through computation f"
    );
}

#[tokio::test]
async fn a_module_that_parses_but_is_malformed_is_422_with_the_problems() {
    let (router, _) = app(Config::default());
    // An add of an f32 and an s32: well formed text, ill-typed HLO.
    let text = "HloModule bad\n\nENTRY %main (x: f32[4], y: s32[4]) -> f32[4] {\n  %x = f32[4] parameter(0)\n  %y = s32[4] parameter(1)\n  ROOT %a = f32[4] add(%x, %y)\n}\n";
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), text),
    )
    .await;
    let e = a.error(422, "invalid_module");
    let problems = e["problems"].as_array().expect("a list of problems");
    assert_eq!(problems.len(), 1, "{e}");
    assert!(
        problems[0]
            .as_str()
            .unwrap()
            .contains("instruction %a: operand element types f32 and s32 differ"),
        "{e}"
    );
}

#[tokio::test]
async fn unknown_content_type_is_415() {
    let (router, _) = app(Config::default());
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/xml"),
            "<hlo/>",
        ),
    )
    .await;
    let e = a.error(415, "unsupported_media_type");
    assert_eq!(
        e["accepted"],
        json!(["text/plain", "application/json", "application/yaml"])
    );
    let a = call(
        &router,
        request("PATCH", "/v1/modules/s", Some("text/plain"), "x"),
    )
    .await;
    a.error(415, "unsupported_media_type");
}

#[tokio::test]
async fn wrong_method_is_405_and_unknown_route_404() {
    let (router, _) = app(Config::default());
    let a = call(&router, get("/v1/layout-assignment")).await;
    a.error(405, "method_not_allowed");
    assert!(
        a.header("allow").is_some_and(|v| v.contains("POST")),
        "Allow is kept: {:?}",
        a.headers
    );
    let a = call(
        &router,
        request("POST", "/v1/targets", Some("application/json"), "{}"),
    )
    .await;
    a.error(405, "method_not_allowed");
    let a = call(&router, get("/v2/anything")).await;
    let e = a.error(404, "not_found");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("/v2/anything"))
    );
    // Invented methods are refused, and counted under one label.
    for m in ["BREW", "WHEN"] {
        call(&router, request(m, "/v1/layout-assignment", None, ""))
            .await
            .error(405, "method_not_allowed");
    }
    let text = call(&router, get("/metrics")).await.text();
    assert!(
        text.lines().any(|l| l == "tessera_http_requests_total{route=\"/v1/layout-assignment\",method=\"other\",status=\"405\"} 2"),
        "{text}"
    );
    assert!(!text.contains("BREW"));
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let config = Config {
        max_body_bytes: 1024,
        ..Config::default()
    };
    let (router, _) = app(config);
    let big = "x".repeat(4096);
    // With Content-Length: refused before the body is read.
    let req = Request::builder()
        .method("POST")
        .uri("/v1/layout-assignment")
        .header("content-type", "text/plain")
        .header("content-length", big.len())
        .body(Body::from(big.clone()))
        .expect("request");
    let e = call(&router, req).await.error(413, "payload_too_large");
    assert_eq!(e["limit"].as_u64(), Some(1024));
    // Without: refused while reading.
    let e = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            big.clone(),
        ),
    )
    .await
    .error(413, "payload_too_large");
    assert_eq!(e["limit"].as_u64(), Some(1024));
    let e = call(
        &router,
        request("PUT", "/v1/modules/a", Some("text/plain"), big),
    )
    .await
    .error(413, "payload_too_large");
    assert_eq!(e["limit"].as_u64(), Some(1024));
    // A body under the limit still goes through.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            "HloModule m\n",
        ),
    )
    .await;
    a.error(400, "parse_error");
}

/// A body that never yields while the sender lives: a client that stops
/// sending.
fn stalled() -> (
    http_body_util::channel::Sender<Bytes, std::convert::Infallible>,
    Body,
) {
    let (tx, body) = http_body_util::Channel::<Bytes, std::convert::Infallible>::new(1);
    (tx, Body::new(body))
}

#[tokio::test]
async fn a_request_over_its_time_limit_is_408() {
    let config = Config {
        request_timeout: Duration::from_millis(200),
        ..Config::default()
    };
    let (router, _) = app(config);
    let started = std::time::Instant::now();
    let (_sender, body) = stalled();
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), body),
    )
    .await;
    let e = a.error(408, "timeout");
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains("200 ms")),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_module_over_its_time_limit_is_408_and_the_service_recovers() {
    let config = Config {
        request_timeout: Duration::from_millis(1),
        ..Config::default()
    };
    let (router, state) = app(config);
    let text = corpus("large_transformer_24_f32");
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), text),
    )
    .await;
    a.error(408, "timeout");
    // The abandoned run keeps its worker slot until it ends; then the slots
    // are all free again.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while state
        .render_metrics()
        .lines()
        .all(|l| l != "tessera_workers_busy 0")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker slot is released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_service_queues_and_answers_503_only_when_the_queue_is_full_or_the_wait_expires() {
    let config = Config {
        max_concurrency: 1,
        max_queue: 1,
        queue_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let (router, state) = app(config);
    let text = corpus("mlp_fwd");
    let want = expected(&text, "cpu").0;
    let slot = state.try_acquire_worker().expect("a free slot");
    // With every slot taken, a request waits in the queue.
    let queued = {
        let (router, text) = (router.clone(), text.clone());
        tokio::spawn(async move {
            call(
                &router,
                request("POST", "/v1/layout-assignment", Some("text/plain"), text),
            )
            .await
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state.queue_len() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the request waits in the queue"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The queue holds one: the next request is refused at once.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    let e = a.error(503, "overloaded");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_queue")),
        "{e}"
    );
    assert_eq!(a.header("retry-after"), Some("1"));
    // Health and metrics still answer.
    assert_eq!(call(&router, get("/healthz")).await.status, 200);
    assert!(
        call(&router, get("/metrics"))
            .await
            .text()
            .lines()
            .any(|l| l == "tessera_queue_waiting 1")
    );
    // A slot frees: the queued request gets its answer.
    drop(slot);
    let a = queued.await.expect("the queued request ends");
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["module"].as_str(), Some(&want[..]));
    // A request that waits longer than queue_timeout is refused.
    let slot = state.try_acquire_worker().expect("a free slot");
    let started = std::time::Instant::now();
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    let e = a.error(503, "overloaded");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("queue_timeout")),
        "{e}"
    );
    assert_eq!(a.header("retry-after"), Some("1"));
    assert!(started.elapsed() >= Duration::from_millis(300));
    drop(slot);
    let a = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), text),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(state.queue_len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_in_flight_answer_503() {
    let config = Config {
        max_in_flight: 1,
        ..Config::default()
    };
    let (router, state) = app(config);
    let stalled = {
        let router = router.clone();
        let (sender, body) = stalled();
        tokio::spawn(async move {
            let _sender = sender;
            call(
                &router,
                request("POST", "/v1/layout-assignment", Some("text/plain"), body),
            )
            .await
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state.metrics().in_flight() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled request is in flight"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            corpus("mlp_fwd"),
        ),
    )
    .await;
    let e = a.error(503, "overloaded");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("max_in_flight")),
        "{e}"
    );
    assert_eq!(
        call(&router, get("/healthz")).await.status,
        200,
        "health is never shed"
    );
    assert_eq!(
        call(&router, get("/metrics")).await.status,
        200,
        "metrics are never shed"
    );
    stalled.abort();
    let _ = stalled.await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state.metrics().in_flight() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the aborted request left"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            corpus("mlp_fwd"),
        ),
    )
    .await;
    assert_eq!(a.status, 200);
}

#[tokio::test]
async fn metrics_count_requests_latency_errors_instructions_and_sessions() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 200);
    let instructions = a.json()["report"]["stats"]["instructions"]
        .as_u64()
        .expect("a count");
    call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            "HloModule",
        ),
    )
    .await
    .error(400, "parse_error");
    call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?target=nope",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await
    .error(400, "unknown_target");
    call(&router, get("/nowhere")).await.error(404, "not_found");
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/m1", Some("text/plain"), text)
        )
        .await
        .status,
        201
    );

    let a = call(&router, get("/metrics")).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let m = a.text();
    let has = |line: &str| m.lines().any(|l| l == line);
    assert!(
        has(
            "tessera_http_requests_total{route=\"/v1/layout-assignment\",method=\"POST\",status=\"200\"} 1"
        ),
        "{m}"
    );
    assert!(
        has(
            "tessera_http_requests_total{route=\"/v1/layout-assignment\",method=\"POST\",status=\"400\"} 2"
        ),
        "{m}"
    );
    assert!(
        has("tessera_http_requests_total{route=\"unmatched\",method=\"GET\",status=\"404\"} 1"),
        "{m}"
    );
    assert!(
        has(
            "tessera_http_requests_total{route=\"/v1/modules/{id}\",method=\"PUT\",status=\"201\"} 1"
        ),
        "{m}"
    );
    assert!(
        has("tessera_http_request_duration_seconds_count{route=\"/v1/layout-assignment\"} 3"),
        "{m}"
    );
    assert!(
        has(
            "tessera_http_request_duration_seconds_bucket{route=\"/v1/layout-assignment\",le=\"+Inf\"} 3"
        ),
        "{m}"
    );
    assert!(has("tessera_errors_total{kind=\"parse_error\"} 1"), "{m}");
    assert!(
        has("tessera_errors_total{kind=\"unknown_target\"} 1"),
        "{m}"
    );
    assert!(has("tessera_errors_total{kind=\"not_found\"} 1"), "{m}");
    assert!(
        has(&format!(
            "tessera_instructions_processed_total {instructions}"
        )),
        "{m}"
    );
    assert!(has("tessera_sessions_active 1"), "{m}");
    assert!(has("tessera_http_requests_in_flight 0"), "{m}");
    assert!(m.contains("# TYPE tessera_http_request_duration_seconds histogram"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_bad_requests_leaves_the_service_healthy() {
    // Enough worker slots and room in flight for every request of the storm
    // at once, so that nothing is shed: each request must then get exactly
    // its own answer, and a healthy one that failed would be a real bug.
    let config = Config {
        max_body_bytes: 64 * 1024,
        max_concurrency: 160,
        max_in_flight: 160,
        ..Config::default()
    };
    let (router, state) = app(config);
    let oversized = "y".repeat(200 * 1024);
    let malformed = testdata("errors/missing_equals.hlo");
    // Healthy modules with their stateless answers, computed beforehand.
    let healthy = healthy_modules();
    // Every seventh request is healthy, so they run among the bad ones
    // rather than after them: 140 requests, 20 of them healthy.
    let mut tasks = Vec::new();
    for i in 0..140usize {
        let router = router.clone();
        let (oversized, malformed, healthy) =
            (oversized.clone(), malformed.clone(), healthy.clone());
        tasks.push(tokio::spawn(async move {
            let (req, want_status, want_kind) = match i % 7 {
                0 => (
                    request(
                        "POST",
                        "/v1/layout-assignment",
                        Some("text/plain"),
                        oversized,
                    ),
                    413,
                    "payload_too_large",
                ),
                1 => (
                    request(
                        "POST",
                        "/v1/layout-assignment",
                        Some("text/plain"),
                        malformed,
                    ),
                    400,
                    "parse_error",
                ),
                2 => (
                    request(
                        "POST",
                        "/v1/layout-assignment",
                        Some("application/json"),
                        "{\"module\": 1",
                    ),
                    400,
                    "invalid_request",
                ),
                3 => (
                    request(
                        "POST",
                        "/v1/layout-assignment",
                        Some("image/png"),
                        "\u{89}PNG",
                    ),
                    415,
                    "unsupported_media_type",
                ),
                4 => (
                    request(
                        "PATCH",
                        "/v1/modules/ghost",
                        Some("application/json"),
                        "{\"computations\": {\"a\": \"b\"}}",
                    ),
                    404,
                    "session_not_found",
                ),
                5 => (
                    request(
                        "POST",
                        "/v1/layout-assignment",
                        Some("text/plain"),
                        vec![0xffu8, 0xfe, 0x00, 0x41],
                    ),
                    400,
                    "parse_error",
                ),
                _ => {
                    let (text, want) = &healthy[(i / 7) % healthy.len()];
                    let a = call(
                        &router,
                        request(
                            "POST",
                            "/v1/layout-assignment",
                            Some("text/plain"),
                            text.clone(),
                        ),
                    )
                    .await;
                    assert_eq!(
                        a.status,
                        200,
                        "healthy request {i} during the storm: {}",
                        String::from_utf8_lossy(&a.body)
                    );
                    assert_eq!(
                        a.json()["module"].as_str(),
                        Some(&want[..]),
                        "healthy request {i} gets the stateless answer"
                    );
                    return 200;
                }
            };
            call(&router, req).await.error(want_status, want_kind);
            want_status
        }));
    }
    let mut seen = std::collections::BTreeMap::new();
    for t in tasks {
        // A failed assertion inside a task surfaces here as a panic.
        let status = t.await.expect("the request got its expected answer");
        *seen.entry(status).or_insert(0) += 1;
    }
    assert_eq!(
        seen,
        [(200, 20), (400, 60), (404, 20), (413, 20), (415, 20)]
            .into_iter()
            .collect(),
        "{seen:?}"
    );
    // And afterwards, too.
    for (text, want) in healthy.iter() {
        let a = call(
            &router,
            request(
                "POST",
                "/v1/layout-assignment",
                Some("text/plain"),
                text.clone(),
            ),
        )
        .await;
        assert_eq!(a.status, 200);
        assert_eq!(a.json()["module"].as_str(), Some(&want[..]));
    }
    assert_eq!(state.metrics().in_flight(), 0);
    assert_eq!(state.session_count(), 0, "no bad request created a session");
    let m = state.render_metrics();
    assert!(m.lines().any(|l| l == "tessera_http_requests_total{route=\"/v1/layout-assignment\",method=\"POST\",status=\"200\"} 23"), "{m}");
    let v: Value = call(&router, get("/healthz")).await.json();
    assert_eq!(v["status"], "ok");
}

#[tokio::test]
async fn every_corpus_module_runs_through_the_service() {
    let (router, _) = app(Config::default());
    for name in corpus_names() {
        if name.starts_with("large_") {
            continue;
        }
        let text = corpus(&name);
        let a = call(
            &router,
            request(
                "POST",
                "/v1/layout-assignment",
                Some("text/plain"),
                text.clone(),
            ),
        )
        .await;
        assert_eq!(
            a.status,
            200,
            "{name}: {}",
            String::from_utf8_lossy(&a.body)
        );
        assert_eq!(
            a.json()["module"].as_str(),
            Some(expected(&text, "cpu").0.as_str()),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_solver_is_an_option_and_its_optimality_is_reported() {
    let (router, _) = app(Config::default());
    let text = corpus("transpose_reshape_chain");
    // The heuristic: a cost, no bound.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?target=tpu",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let heuristic = a.json()["report"]["layout_assignment"]["optimality"].clone();
    assert!(
        heuristic["cost"].as_u64().is_some() && heuristic["lower_bound"].is_null(),
        "{heuristic}"
    );
    // The exact solver, in a JSON body: a bound, proven, no dearer, and
    // the output the library gives.
    let body = json!({ "module": text, "target": "tpu", "options": { "solver": "exact", "solver_time_limit": 5 } });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    let exact = &v["report"]["layout_assignment"]["optimality"];
    let (cost, lower) = (
        exact["cost"].as_u64().unwrap(),
        exact["lower_bound"].as_u64().unwrap(),
    );
    assert!(
        lower <= cost && cost < heuristic["cost"].as_u64().unwrap(),
        "{exact} against {heuristic}"
    );
    assert_eq!(exact["proven_optimal_computations"], exact["computations"]);
    let mut opts = driver::Options::new(std::sync::Arc::new(
        target::load_builtin("tpu").expect("tpu"),
    ));
    opts.solver = driver::SolverOptions::exact();
    let out = driver::run(&text, "request.hlo", &opts).expect("runs");
    assert_eq!(v["module"].as_str(), Some(out.text()));
    // Bad values are 400s.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?solver=ilp",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "unknown_solver");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?solver=exact&solver_time_limit=3600",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "invalid_request");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?solver=exact&solver_time_limit=0",
            Some("text/plain"),
            text,
        ),
    )
    .await;
    a.error(400, "invalid_request");
}
