//! A call chain of 100,000 levels through every route that runs the
//! pipeline: a stateless run, and a session's first run, a re-run after
//! editing the innermost computation, and a re-run with no change. A
//! recursion per level would overflow a worker's stack and abort the
//! whole service.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use server::Config;
use test_support::{Nesting, deep_module};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_chain_of_100000_levels_runs_stateless_and_in_a_session() {
    let depth = 100_000;
    let text = deep_module(depth, Nesting::Call);
    // Debug builds are slow; the limit is not what this test is about.
    let (router, _) = app(Config { request_timeout: Duration::from_secs(900), ..Config::default() });

    let fresh = call(&router, request("POST", "/v1/layout-assignment?target=tpu", Some("text/plain"), text.clone())).await;
    assert_eq!(fresh.status, 200, "{}", String::from_utf8_lossy(&fresh.body[..fresh.body.len().min(2000)]));
    let fresh = fresh.json();
    let module = fresh["module"].as_str().expect("the module text");
    assert_eq!(module.matches(" call(").count(), depth + 1);

    let a = call(&router, request("PUT", "/v1/modules/deep?target=tpu", Some("text/plain"), text.clone())).await;
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    let first = call(&router, request("POST", "/v1/modules/deep/layout-assignment", None, "")).await;
    assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body[..first.body.len().min(2000)]));
    let first = first.json();
    assert_eq!(first["module"], fresh["module"], "a session answers as a stateless run");
    assert_eq!(first["recomputed_computations"].as_array().map(Vec::len), Some(depth + 2));

    // The innermost computation changes its body, not its signature: it
    // alone is assigned again, and no query chain follows the depth.
    let edited = "%c0 (x0: f32[4,8]) -> f32[4,8] {\n  %x0 = f32[4,8] parameter(0)\n  ROOT %r0 = f32[4,8] exponential(%x0)\n}";
    let patch = json!({ "computations": { "c0": edited } });
    let a = call(&router, request("PATCH", "/v1/modules/deep", Some("application/json"), patch.to_string())).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let after = call(&router, request("POST", "/v1/modules/deep/layout-assignment", None, "")).await;
    assert_eq!(after.status, 200, "{}", String::from_utf8_lossy(&after.body[..after.body.len().min(2000)]));
    let after = after.json();
    assert_eq!(after["recomputed_computations"], json!(["c0"]));
    assert!(after["module"].as_str().is_some_and(|m| m.contains("exponential(%x0)")));

    let again = call(&router, request("POST", "/v1/modules/deep/layout-assignment", None, "")).await.json();
    assert_eq!(again["recomputed_computations"], json!([]));
    assert_eq!(again["module"], after["module"]);
}
