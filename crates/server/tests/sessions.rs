//! Sessions: incremental runs on a persistent database, limits and
//! eviction, in process through `tower::ServiceExt::oneshot`.

mod common;

use common::*;
use serde_json::json;
use server::Config;

/// The module the session tests edit: twelve computations.
const MODULE: &str = "reductions_mixed";

#[tokio::test]
async fn patching_one_body_recomputes_exactly_that_computation() {
    let (router, _) = app(Config::default());
    let text = corpus(MODULE);

    let a = call(
        &router,
        request("PUT", "/v1/modules/s1", Some("text/plain"), text.clone()),
    )
    .await;
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    let computations: Vec<String> = v["computations"]
        .as_array()
        .expect("names")
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    assert!(computations.len() >= 4, "{computations:?}");
    assert_eq!(v["id"], "s1");
    assert_eq!(v["module"], "jit_reductions_mixed");
    assert_eq!(v["target"], "cpu");
    assert_eq!(v["bytes"].as_u64(), Some(text.len() as u64));

    // The first run assigns every computation.
    let a = call(
        &router,
        request("POST", "/v1/modules/s1/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let first = a.json();
    let all: Vec<String> = first["recomputed_computations"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    assert_eq!(all, computations);
    let (fresh_module, fresh_report) = expected(&text, "cpu");
    assert_eq!(first["module"].as_str(), Some(fresh_module.as_str()));
    assert_eq!(
        without_timings(&first["report"]),
        without_timings(&fresh_report)
    );

    // Nothing changed: nothing is recomputed.
    let a = call(
        &router,
        request("POST", "/v1/modules/s1/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["recomputed_computations"], json!([]));

    // Edit one body.
    let (old, new) = edited_region(&text);
    let patch = json!({ "computations": { "region_0.1": new } });
    let a = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/s1",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["replaced"], json!(["region_0.1"]));
    assert_eq!(
        v["bytes"].as_u64(),
        Some((text.len() - old.len() + new.len()) as u64)
    );

    let a = call(
        &router,
        request("POST", "/v1/modules/s1/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let after = a.json();
    assert_eq!(after["recomputed_computations"], json!(["region_0.1"]));

    // The session's answer is a fresh stateless run of the edited module,
    // byte for byte.
    let edited = text.replace(&old, &new);
    let fresh = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            edited.clone(),
        ),
    )
    .await;
    assert_eq!(fresh.status, 200);
    let fresh = fresh.json();
    assert_eq!(after["module"].as_str(), fresh["module"].as_str());
    assert!(
        after["module"]
            .as_str()
            .is_some_and(|m| m.contains("maximum(")),
        "the edit is in the output"
    );
    assert_eq!(
        without_timings(&after["report"]),
        without_timings(&fresh["report"])
    );
    assert_eq!(
        after["module"].as_str(),
        Some(expected(&edited, "cpu").0.as_str())
    );

    // A repeat call recomputes nothing, and answers the same.
    let a = call(
        &router,
        request("POST", "/v1/modules/s1/layout-assignment", None, ""),
    )
    .await;
    let repeat = a.json();
    assert_eq!(repeat["recomputed_computations"], json!([]));
    assert_eq!(repeat["module"], after["module"]);
}

#[tokio::test]
async fn session_runs_take_options_and_targets() {
    let (router, _) = app(Config::default());
    let text = corpus(MODULE);
    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/opts?target=gpu",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 201);
    assert_eq!(a.json()["target"], "gpu");
    let a = call(
        &router,
        request("POST", "/v1/modules/opts/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.json()["report"]["target"], "gpu");
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(&text, "gpu").0.as_str())
    );

    // A new target in the body: everything is recomputed for it.
    let body =
        json!({ "target": "cpu", "options": { "passes": ["layout-assignment", "relayout"] } });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/modules/opts/layout-assignment",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["report"]["target"], "cpu");
    assert_eq!(
        v["recomputed_computations"].as_array().map(Vec::len),
        Some(12)
    );
    assert_eq!(
        v["module"].as_str(),
        Some(expected(&text, "cpu").0.as_str())
    );

    // The target stays the session's: a run without one keeps cpu.
    let a = call(&router, request("GET", "/v1/modules/opts", None, "")).await;
    assert_eq!(a.json()["target"], "cpu");

    // Accept: text/plain.
    let req = axum::http::Request::builder()
        .method("POST")
        .uri("/v1/modules/opts/layout-assignment?target=cpu")
        .header("accept", "text/plain")
        .body(axum::body::Body::empty())
        .expect("request");
    let a = call(&router, req).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), expected(&text, "cpu").0);

    // YAML options.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/modules/opts/layout-assignment",
            Some("application/yaml"),
            "options:\n  passes: [layout-assignment]\n",
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["report"]["passes"], json!(["layout-assignment"]));

    // Errors.
    call(
        &router,
        request(
            "POST",
            "/v1/modules/opts/layout-assignment?target=nope",
            None,
            "",
        ),
    )
    .await
    .error(400, "unknown_target");
    call(
        &router,
        request(
            "POST",
            "/v1/modules/opts/layout-assignment",
            Some("text/plain"),
            "HloModule x",
        ),
    )
    .await
    .error(415, "unsupported_media_type");
    call(
        &router,
        request(
            "POST",
            "/v1/modules/opts/layout-assignment",
            Some("application/json"),
            "{\"module\": \"x\"}",
        ),
    )
    .await
    .error(400, "invalid_request");
    call(
        &router,
        request(
            "PUT",
            "/v1/modules/opts?passes=relayout",
            Some("text/plain"),
            text,
        ),
    )
    .await
    .error(400, "invalid_request");
}

#[tokio::test]
async fn put_accepts_json_and_replaces() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    let body = json!({ "module": text, "target": "cpu" });
    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/j",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    let a = call(
        &router,
        request("POST", "/v1/modules/j/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200);
    // Replacing the module with itself: 200, and nothing to recompute.
    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/j",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200);
    let a = call(
        &router,
        request("POST", "/v1/modules/j/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.json()["recomputed_computations"], json!([]));
    // Replacing it with another module: its answer.
    let other = corpus("softmax_axes");
    let a = call(
        &router,
        request("PUT", "/v1/modules/j", Some("text/plain"), other.clone()),
    )
    .await;
    assert_eq!(a.status, 200);
    run_session_expecting(&router, "j", &other).await;
}

#[tokio::test]
async fn unknown_sessions_are_404() {
    let (router, _) = app(Config::default());
    for (method, uri, ct, body) in [
        ("GET", "/v1/modules/nope", None, ""),
        ("DELETE", "/v1/modules/nope", None, ""),
        ("POST", "/v1/modules/nope/layout-assignment", None, ""),
        (
            "PATCH",
            "/v1/modules/nope",
            Some("application/json"),
            "{\"computations\": {\"a\": \"%a () -> f32[] {}\"}}",
        ),
    ] {
        let e = call(&router, request(method, uri, ct, body))
            .await
            .error(404, "session_not_found");
        assert_eq!(e["id"], "nope", "{method} {uri}");
    }
    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/bad%2Fid",
            Some("text/plain"),
            corpus("mlp_fwd"),
        ),
    )
    .await;
    a.error(400, "invalid_request");
}

#[tokio::test]
async fn delete_removes_a_session() {
    let (router, state) = app(Config::default());
    assert_eq!(
        call(
            &router,
            request(
                "PUT",
                "/v1/modules/d",
                Some("text/plain"),
                corpus("mlp_fwd")
            )
        )
        .await
        .status,
        201
    );
    assert_eq!(state.session_count(), 1);
    let a = call(&router, request("DELETE", "/v1/modules/d", None, "")).await;
    assert_eq!(a.status, 204);
    assert!(a.body.is_empty());
    assert_eq!(state.session_count(), 0);
    call(
        &router,
        request("POST", "/v1/modules/d/layout-assignment", None, ""),
    )
    .await
    .error(404, "session_not_found");
}

#[tokio::test]
async fn bad_patches_are_refused_and_change_nothing() {
    let (router, _) = app(Config::default());
    let text = corpus(MODULE);
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/p", Some("text/plain"), text.clone())
        )
        .await
        .status,
        201
    );
    assert_eq!(
        call(
            &router,
            request("POST", "/v1/modules/p/layout-assignment", None, "")
        )
        .await
        .status,
        200
    );
    let (_, new) = edited_region(&text);

    // One unknown name refuses the whole patch.
    let patch =
        json!({ "computations": { "region_0.1": new, "region_99": "%region_99 () -> f32[] {}" } });
    let e = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/p",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await
    .error(400, "unknown_computation");
    assert_eq!(e["computation"], "region_99");
    // A text that declares another computation.
    let patch = json!({ "computations": { "region_2.3": new } });
    call(
        &router,
        request(
            "PATCH",
            "/v1/modules/p",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await
    .error(400, "invalid_request");
    // The same computation twice (with and without `%`).
    let patch = json!({ "computations": { "region_0.1": new, "%region_0.1": new } });
    let e = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/p",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await
    .error(400, "invalid_request");
    assert_eq!(e["computation"], "region_0.1");
    // Empty, or not the expected form.
    call(
        &router,
        request(
            "PATCH",
            "/v1/modules/p",
            Some("application/json"),
            "{\"computations\": {}}",
        ),
    )
    .await
    .error(400, "invalid_request");
    call(
        &router,
        request(
            "PATCH",
            "/v1/modules/p",
            Some("application/json"),
            "{\"comps\": {}}",
        ),
    )
    .await
    .error(400, "invalid_request");

    let a = call(
        &router,
        request("POST", "/v1/modules/p/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(
        a.json()["recomputed_computations"],
        json!([]),
        "nothing was replaced"
    );

    // A YAML patch, and a `%` in the name, are fine.
    let mut yaml = String::from("computations:\n  \"%region_0.1\": |\n");
    for line in new.lines() {
        yaml.push_str("    ");
        yaml.push_str(line);
        yaml.push('\n');
    }
    let a = call(
        &router,
        request("PATCH", "/v1/modules/p", Some("application/yaml"), yaml),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let a = call(
        &router,
        request("POST", "/v1/modules/p/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.json()["recomputed_computations"], json!(["region_0.1"]));
}

#[tokio::test]
async fn a_malformed_patch_is_a_located_400_and_changes_nothing() {
    let (router, _) = app(Config::default());
    let text = corpus(MODULE);
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/m", Some("text/plain"), text.clone())
        )
        .await
        .status,
        201
    );
    let (old, _) = edited_region(&text);
    let broken = old.replace("ROOT %reduce_sum.5 = f32[]", "ROOT %reduce_sum.5 f32[]");
    let patch = json!({ "computations": { "region_0.1": broken } });
    let e = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/m",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await
    .error(400, "parse_error");
    // The ROOT line of region_0.1, in the module's own line numbers.
    let root_line = text
        .lines()
        .position(|l| l.contains("ROOT %reduce_sum.5 = f32[]"))
        .expect("the line")
        + 1;
    assert_eq!(e["line"].as_u64(), Some(root_line as u64), "{e}");
    assert_eq!(e["col"].as_u64(), Some(22), "{e}");
    assert_eq!(e["file"], "modules/m");
    // The session kept its module.
    let a = call(
        &router,
        request("POST", "/v1/modules/m/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(&text, "cpu").0.as_str())
    );
    // Putting the old text back is a no-op edit.
    let patch = json!({ "computations": { "region_0.1": old } });
    assert_eq!(
        call(
            &router,
            request(
                "PATCH",
                "/v1/modules/m",
                Some("application/json"),
                patch.to_string()
            )
        )
        .await
        .status,
        200
    );
    let a = call(
        &router,
        request("POST", "/v1/modules/m/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["recomputed_computations"], json!([]));
}

#[tokio::test]
async fn a_malformed_module_creates_no_session() {
    let (router, state) = app(Config::default());
    let e = call(
        &router,
        request(
            "PUT",
            "/v1/modules/x",
            Some("text/plain"),
            testdata("errors/missing_equals.hlo"),
        ),
    )
    .await
    .error(400, "parse_error");
    assert_eq!(
        (e["line"].as_u64(), e["col"].as_u64()),
        (Some(7), Some(6)),
        "{e}"
    );
    assert_eq!(state.session_count(), 0);
    call(&router, request("GET", "/v1/modules/x", None, ""))
        .await
        .error(404, "session_not_found");
    // And a malformed replacement keeps the old module.
    let text = corpus("mlp_fwd");
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/x", Some("text/plain"), text.clone())
        )
        .await
        .status,
        201
    );
    call(
        &router,
        request(
            "PUT",
            "/v1/modules/x",
            Some("text/plain"),
            testdata("errors/missing_equals.hlo"),
        ),
    )
    .await
    .error(400, "parse_error");
    let a = call(
        &router,
        request("POST", "/v1/modules/x/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(&text, "cpu").0.as_str())
    );
}

#[tokio::test]
async fn sessions_are_evicted_least_recently_used_first() {
    let (router, state) = app(Config {
        max_sessions: 2,
        ..Config::default()
    });
    let text = corpus("mlp_fwd");
    for id in ["a", "b"] {
        assert_eq!(
            call(
                &router,
                request(
                    "PUT",
                    &format!("/v1/modules/{id}"),
                    Some("text/plain"),
                    text.clone()
                )
            )
            .await
            .status,
            201
        );
    }
    // Touch "a": "b" becomes the least recently used.
    assert_eq!(
        call(
            &router,
            request("POST", "/v1/modules/a/layout-assignment", None, "")
        )
        .await
        .status,
        200
    );
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/c", Some("text/plain"), text)
        )
        .await
        .status,
        201
    );
    assert_eq!(state.session_count(), 2);
    call(&router, request("GET", "/v1/modules/b", None, ""))
        .await
        .error(404, "session_not_found");
    assert_eq!(
        call(&router, request("GET", "/v1/modules/a", None, ""))
            .await
            .status,
        200
    );
    assert_eq!(
        call(&router, request("GET", "/v1/modules/c", None, ""))
            .await
            .status,
        200
    );
    let m = call(&router, get("/metrics")).await.text();
    assert!(
        m.lines().any(|l| l == "tessera_sessions_evicted_total 1"),
        "{m}"
    );
    assert!(m.lines().any(|l| l == "tessera_sessions_active 2"), "{m}");
}

#[tokio::test]
async fn sessions_are_charged_what_they_hold_and_capped() {
    let small = corpus("mlp_fwd");
    let big = corpus("mlp_fwd_bwd");
    let charge = |t: &str| session_charge(t, 0, 0);
    assert!(
        charge(&small) > 4 * small.len(),
        "a session holds several times its text"
    );
    let cap = charge(&small) + charge(&big) - 1;
    let (router, state) = app(Config {
        max_session_bytes: cap,
        ..Config::default()
    });
    let put = |id: &str, text: &str| {
        request(
            "PUT",
            &format!("/v1/modules/{id}"),
            Some("text/plain"),
            text.to_string(),
        )
    };
    assert_eq!(call(&router, put("small", &small)).await.status, 201);
    // A new session is charged from its creation what it holds once run:
    // its check keeps its parses until then.
    let a = call(&router, get("/v1/modules/small")).await;
    assert_eq!(
        a.json()["memory_bytes"].as_u64(),
        Some(charge(&small) as u64)
    );
    assert_eq!(a.json()["bytes"].as_u64(), Some(small.len() as u64));
    let session_bytes = |m: &str, want: usize| {
        m.lines()
            .any(|l| l == format!("tessera_session_bytes {want}"))
    };
    let m = call(&router, get("/metrics")).await.text();
    assert!(session_bytes(&m, charge(&small)), "{m}");
    // Its run does not charge it more.
    assert_eq!(
        call(
            &router,
            request("POST", "/v1/modules/small/layout-assignment", None, "")
        )
        .await
        .status,
        200
    );
    assert_eq!(
        call(&router, get("/v1/modules/small")).await.json()["memory_bytes"].as_u64(),
        Some(charge(&small) as u64)
    );
    // Both would exceed the cap: creating the second evicts the least
    // recently used other session.
    assert_eq!(call(&router, put("big", &big)).await.status, 201);
    assert_eq!(state.session_count(), 1);
    call(&router, get("/v1/modules/small"))
        .await
        .error(404, "session_not_found");
    let m = call(&router, get("/metrics")).await.text();
    assert!(
        m.lines().any(|l| l == "tessera_sessions_evicted_total 1"),
        "{m}"
    );
    assert!(session_bytes(&m, charge(&big)), "{m}");
    // A module whose session would not fit on its own is refused.
    let (router, state) = app(Config {
        max_session_bytes: charge(&small) - 1,
        ..Config::default()
    });
    let e = call(&router, put("huge", &small))
        .await
        .error(413, "session_too_large");
    assert_eq!(e["limit"].as_u64(), Some(charge(&small) as u64 - 1));
    assert_eq!(state.session_count(), 0);
}

/// A session's database keeps every computation it was ever given: salsa
/// cannot delete an input. A `PUT` whose module drops computations of the
/// one before leaves them behind; the session is charged for them, and
/// starts over in a new database before they outweigh its module. Before
/// this, a client that put module after module into one session grew the
/// service's memory without bound, charged only for the last (see
/// `crates/cli/tests/serve_memory.rs`).
#[tokio::test]
async fn modules_put_one_after_another_are_charged_what_they_leave_behind() {
    let charge = session_charge;
    let (router, _) = app(Config::default());
    let put = |text: &str| request("PUT", "/v1/modules/x", Some("text/plain"), text.to_string());
    let run_and_memory = async |text: &str| {
        run_session_expecting(&router, "x", text).await;
        call(&router, get("/v1/modules/x")).await.json()["memory_bytes"].as_u64()
    };
    let first = corpus("mlp_fwd");
    let region_text = computation_text(&first, "region_1.4");
    assert_eq!(call(&router, put(&first)).await.status, 201);
    assert_eq!(
        run_and_memory(&first).await,
        Some(charge(&first, 0, 0) as u64)
    );
    // One region renamed: the session keeps its database, which holds the
    // old region too, and is charged for it.
    let renamed = first.replace("%region_1.4", "%region_9.9");
    assert_eq!(call(&router, put(&renamed)).await.status, 200);
    assert_eq!(
        run_and_memory(&renamed).await,
        Some(charge(&renamed, region_text.len(), 1) as u64)
    );
    // Every computation renamed: four left behind would outweigh three,
    // so the session starts over, charged for its module alone.
    let other = renamed
        .replace("%region_", "%other_")
        .replace("%main.6", "%main.7");
    assert_eq!(call(&router, put(&other)).await.status, 200);
    assert_eq!(
        run_and_memory(&other).await,
        Some(charge(&other, 0, 0) as u64)
    );
    // A refused module leaves nothing behind: it is checked apart.
    call(
        &router,
        put(&other.replacen(" parameter(0)", " parameter(0", 1)),
    )
    .await
    .error(400, "parse_error");
    assert_eq!(
        run_and_memory(&other).await,
        Some(charge(&other, 0, 0) as u64)
    );
}

/// A session whose database would go over `max_session_bytes` with what
/// a `PUT` leaves behind starts over, though what is left behind weighs
/// less than the module: its charge stays under the cap.
#[tokio::test]
async fn a_put_that_would_leave_the_session_over_the_cap_starts_it_over() {
    let first = corpus("mlp_fwd");
    let renamed = first.replace("%region_1.4", "%region_9.9");
    let alone = session_charge(&renamed, 0, 0);
    let kept = session_charge(&renamed, computation_text(&first, "region_1.4").len(), 1);
    assert!(kept > alone);
    let (router, _) = app(Config {
        max_session_bytes: (alone + kept) / 2,
        ..Config::default()
    });
    let put = |text: &str| request("PUT", "/v1/modules/x", Some("text/plain"), text.to_string());
    assert_eq!(call(&router, put(&first)).await.status, 201);
    run_session_expecting(&router, "x", &first).await;
    assert_eq!(call(&router, put(&renamed)).await.status, 200);
    run_session_expecting(&router, "x", &renamed).await;
    let a = call(&router, get("/v1/modules/x")).await;
    assert_eq!(a.json()["memory_bytes"].as_u64(), Some(alone as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_on_one_session_are_serialized() {
    let (router, _) = app(Config::default());
    let text = corpus(MODULE);
    assert_eq!(
        call(
            &router,
            request("PUT", "/v1/modules/c", Some("text/plain"), text.clone())
        )
        .await
        .status,
        201
    );
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            call(
                &router,
                request("POST", "/v1/modules/c/layout-assignment", None, ""),
            )
            .await
        }));
    }
    let mut recomputed_total = 0;
    let expected_module = expected(&text, "cpu").0;
    for t in tasks {
        let a = t.await.expect("the task ends");
        if a.status == 503 {
            a.error(503, "overloaded");
            continue;
        }
        assert_eq!(a.status, 200);
        let v = a.json();
        assert_eq!(v["module"].as_str(), Some(expected_module.as_str()));
        recomputed_total += v["recomputed_computations"].as_array().map_or(0, Vec::len);
    }
    // Whichever ran first assigned the twelve computations; the others
    // found them done.
    assert_eq!(recomputed_total, 12);
}

/// A run with nothing to redo is a look-up of what the last run made,
/// answered on the request's own task (counted in
/// `tessera_session_lookups_total`); a run whose options change what it
/// does, or one after an edit, redoes its work on a worker as before. Each
/// answers what a stateless run of the same text and options answers.
#[tokio::test]
async fn a_run_with_nothing_to_redo_is_a_lookup() {
    let (router, state) = app(Config::default());
    let text = corpus(MODULE);
    let run = |uri: &'static str| {
        let router = router.clone();
        async move {
            let a = call(&router, request("POST", uri, None, "")).await;
            assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
            a.json()
        }
    };
    let a = call(
        &router,
        request("PUT", "/v1/modules/look", Some("text/plain"), text.clone()),
    )
    .await;
    assert_eq!(a.status, 201);
    let (fresh, _) = expected(&text, "cpu");

    // The first run has everything to do.
    let v = run("/v1/modules/look/layout-assignment").await;
    assert_eq!(v["module"].as_str(), Some(fresh.as_str()));
    assert_eq!(state.metrics().lookups(), 0);

    // Nothing changed: a look-up, the same answer.
    let v = run("/v1/modules/look/layout-assignment").await;
    assert_eq!(v["module"].as_str(), Some(fresh.as_str()));
    assert_eq!(v["recomputed_computations"], json!([]));
    assert_eq!(state.metrics().lookups(), 1);

    // Other steps: redone, then looked up when asked again.
    let relayout_only = "/v1/modules/look/layout-assignment?passes=relayout";
    let v = run(relayout_only).await;
    assert_eq!(state.metrics().lookups(), 1);
    let again = run(relayout_only).await;
    assert_eq!(state.metrics().lookups(), 2);
    assert_eq!(again["module"], v["module"]);
    assert_eq!(v["report"]["passes"], json!(["relayout"]));
    assert_eq!(again["report"]["passes"], json!(["relayout"]));

    // Back to the default steps, then an edit: both redo their work.
    run("/v1/modules/look/layout-assignment").await;
    let (_, new) = edited_region(&text);
    let patch = json!({ "computations": { "region_0.1": new } });
    let a = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/look",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let edited = run("/v1/modules/look/layout-assignment").await;
    assert_eq!(state.metrics().lookups(), 2);
    assert_eq!(edited["recomputed_computations"], json!(["region_0.1"]));
    let looked_up = run("/v1/modules/look/layout-assignment").await;
    assert_eq!(looked_up["module"], edited["module"]);
    assert_eq!(state.metrics().lookups(), 3);

    let m = call(&router, request("GET", "/metrics", None, ""))
        .await
        .text();
    assert!(
        m.lines().any(|l| l == "tessera_session_lookups_total 3"),
        "{m}"
    );
}

/// A look-up needs no worker slot: with every slot held (a long run
/// elsewhere), a re-run with nothing to redo is answered at once, its
/// small JSON options body decoded where it is asked too (one over 16 KiB
/// is decoded on the pool, and waits), while a run that has work waits in
/// the queue, is refused when the queue's time runs out, and changes
/// nothing.
#[tokio::test]
async fn a_lookup_is_answered_while_every_worker_is_busy() {
    let config = Config {
        max_concurrency: 1,
        max_queue: 1,
        queue_timeout: std::time::Duration::from_millis(300),
        ..Config::default()
    };
    let (router, state) = app(config);
    let text = corpus(MODULE);
    let a = call(
        &router,
        request("PUT", "/v1/modules/busy", Some("text/plain"), text.clone()),
    )
    .await;
    assert_eq!(a.status, 201);
    let run = "/v1/modules/busy/layout-assignment";
    let first = call(&router, request("POST", run, None, "")).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );

    let slot = state.try_acquire_worker().expect("a free slot");
    let a = call(&router, request("POST", run, None, "")).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["module"], first.json()["module"]);
    let same = json!({ "options": { "passes": ["layout-assignment", "relayout"] } });
    let a = call(
        &router,
        request("POST", run, Some("application/json"), same.to_string()),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["module"], first.json()["module"]);
    assert_eq!(state.metrics().lookups(), 2);
    // The same options in a body over 16 KiB: decoding it is work for the
    // blocking pool, so it waits for the slot and is refused.
    let padded = format!("{same}{}", " ".repeat(17 << 10));
    let a = call(
        &router,
        request("POST", run, Some("application/json"), padded),
    )
    .await;
    a.error(503, "overloaded");
    assert_eq!(state.metrics().lookups(), 2);

    // Other steps are work: it waits for the slot, and is refused.
    let other = json!({ "options": { "passes": ["relayout"] } });
    let a = call(
        &router,
        request("POST", run, Some("application/json"), other.to_string()),
    )
    .await;
    a.error(503, "overloaded");
    // The refused run changed nothing: the session's run is still a
    // look-up.
    let a = call(&router, request("POST", run, None, "")).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(
        a.json()["report"]["passes"],
        first.json()["report"]["passes"]
    );
    assert_eq!(state.metrics().lookups(), 3);

    drop(slot);
    let a = call(
        &router,
        request("POST", run, Some("application/json"), other.to_string()),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.json()["report"]["passes"], json!(["relayout"]));
}
