//! A call chain of 100,000 levels through every route that takes a
//! module: a stateless run with the semantic check, the graph of a
//! computation, and a session's creation, read-back, first run, a re-run
//! with the semantic check after editing the innermost computation, a
//! re-run with no change, and its deletion. A recursion per level would
//! overflow a worker's stack and abort the whole service. (The layout
//! routes, explain and draw, take shapes, not modules.)

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use server::Config;
use test_support::{Nesting, deep_module};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_chain_of_100000_levels_runs_through_every_route() {
    let depth = 100_000;
    let text = deep_module(depth, Nesting::Call);
    // Debug builds are slow; the limit is not what this test is about.
    // The semantic check must cover the whole chain: 2 instructions of 32
    // elements per level.
    // A session of 100,002 computations is charged about 1.3 GB, over
    // the default budget of 1 GiB.
    let config = Config {
        request_timeout: Duration::from_secs(900),
        semantic_max_elements: 1 << 24,
        max_session_bytes: 4 << 30,
        ..Config::default()
    };
    let (router, _) = app(config);

    let uri = "/v1/layout-assignment?target=tpu&verify=semantic";
    let fresh = call(
        &router,
        request("POST", uri, Some("text/plain"), text.clone()),
    )
    .await;
    assert_eq!(
        fresh.status,
        200,
        "{}",
        String::from_utf8_lossy(&fresh.body[..fresh.body.len().min(2000)])
    );
    let fresh = fresh.json();
    let module = fresh["module"].as_str().expect("the module text");
    assert_eq!(module.matches(" call(").count(), depth + 1);
    assert_eq!(
        fresh["semantic_check"]["result"], "equivalent",
        "{}",
        fresh["semantic_check"]
    );

    for (uri, name) in [
        ("/v1/graph", "main"),
        ("/v1/graph?computation=c50000", "c50000"),
    ] {
        let svg = call(
            &router,
            request("POST", uri, Some("text/plain"), text.clone()),
        )
        .await;
        assert_eq!(
            svg.status,
            200,
            "{uri}: {}",
            String::from_utf8_lossy(&svg.body[..svg.body.len().min(2000)])
        );
        assert!(
            svg.text().contains(&format!("computation {name}")),
            "{uri} draws {name}"
        );
    }

    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/deep?target=tpu",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    let session = call(&router, get("/v1/modules/deep")).await;
    assert_eq!(
        session.status,
        200,
        "{}",
        String::from_utf8_lossy(&session.body[..session.body.len().min(2000)])
    );
    let first = call(
        &router,
        request("POST", "/v1/modules/deep/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body[..first.body.len().min(2000)])
    );
    let first = first.json();
    assert_eq!(
        first["module"], fresh["module"],
        "a session answers as a stateless run"
    );
    assert_eq!(
        first["recomputed_computations"].as_array().map(Vec::len),
        Some(depth + 2)
    );

    // The innermost computation changes its body, not its signature: it
    // alone is assigned again, and no query chain follows the depth.
    let edited = "%c0 (x0: f32[4,8]) -> f32[4,8] {\n  %x0 = f32[4,8] parameter(0)\n  ROOT %r0 = f32[4,8] exponential(%x0)\n}";
    let patch = json!({ "computations": { "c0": edited } });
    let a = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/deep",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let after = call(
        &router,
        request(
            "POST",
            "/v1/modules/deep/layout-assignment?verify=semantic",
            None,
            "",
        ),
    )
    .await;
    assert_eq!(
        after.status,
        200,
        "{}",
        String::from_utf8_lossy(&after.body[..after.body.len().min(2000)])
    );
    let after = after.json();
    assert_eq!(after["recomputed_computations"], json!(["c0"]));
    assert!(
        after["module"]
            .as_str()
            .is_some_and(|m| m.contains("exponential(%x0)"))
    );
    assert_eq!(
        after["semantic_check"]["result"], "equivalent",
        "{}",
        after["semantic_check"]
    );

    let again = call(
        &router,
        request("POST", "/v1/modules/deep/layout-assignment", None, ""),
    )
    .await
    .json();
    assert_eq!(again["recomputed_computations"], json!([]));
    assert_eq!(again["module"], after["module"]);

    let gone = call(&router, request("DELETE", "/v1/modules/deep", None, "")).await;
    assert_eq!(gone.status, 204);
}
