//! The explorer page, the layout pictures, the computation graph and
//! `verify=semantic`.

mod common;

use common::*;
use server::Config;

fn encode(shape: &str) -> String {
    shape
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c.to_string(),
            c => format!("%{:02X}", c as u32),
        })
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_are_embedded_and_self_contained() {
    let (router, _) = app(Config::default());
    let page = call(&router, get("/")).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let html = page.text();
    assert!(html.contains("<script src=\"/explorer.js\""), "{html}");
    // Nothing is fetched from elsewhere: every URL is the service's own.
    for asset in ["/", "/explorer.js", "/explorer.css"] {
        let a = call(&router, get(asset)).await;
        assert_eq!(a.status, 200, "{asset}");
        let text = a.text();
        assert!(
            !text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"),
            "{asset} refers elsewhere"
        );
        assert!(
            a.header("content-security-policy")
                .is_some_and(|c| c.starts_with("default-src 'self'")),
            "{asset}"
        );
    }
    let example = call(&router, get("/example.hlo")).await;
    assert!(
        example
            .text()
            .starts_with("HloModule jit_entry_layout_colmajor"),
        "{}",
        example.text()
    );
}

#[tokio::test]
async fn layout_draw_and_explain_answer_what_the_cli_prints() {
    let (router, _) = app(Config::default());
    let shape = "f32[3,5]{1,0:T(2,2)}";
    let a = call(
        &router,
        get(&format!("/v1/layout/draw?shape={}", encode(shape))),
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("image/svg+xml"));
    assert_eq!(
        a.text(),
        wire::layout::draw_svg(shape).expect("a valid shape")
    );
    // Element (2,3) lives in slot 17, and 9 slots are padding.
    assert!(a.text().contains("<title>(2,3) -> slot 17</title>"));
    let e = call(
        &router,
        get(&format!("/v1/layout/explain?shape={}", encode(shape))),
    )
    .await;
    assert_eq!(e.status, 200);
    let v = e.json();
    assert_eq!(v, wire::layout::explain_json(shape).expect("a valid shape"));
    assert_eq!(
        (
            v["storage_elements"].as_u64(),
            v["padding_elements"].as_u64()
        ),
        (Some(24), Some(9))
    );
}

#[tokio::test]
async fn bad_shapes_get_json_errors() {
    let (router, _) = app(Config::default());
    for route in ["draw", "explain"] {
        let e = call(
            &router,
            get(&format!("/v1/layout/{route}?shape={}", encode("f32[3,5"))),
        )
        .await
        .error(400, "invalid_shape");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains('^')),
            "a caret: {e}"
        );
        call(
            &router,
            get(&format!(
                "/v1/layout/{route}?shape={}",
                encode("f32[3,5]{1,0:T(0,2)}")
            )),
        )
        .await
        .error(400, "invalid_shape");
        call(
            &router,
            get(&format!(
                "/v1/layout/{route}?shape={}",
                encode("(f32[2], s32[])")
            )),
        )
        .await
        .error(400, "invalid_shape");
        call(&router, get(&format!("/v1/layout/{route}")))
            .await
            .error(400, "invalid_request");
        call(
            &router,
            get(&format!("/v1/layout/{route}?shape=f32[2]&colour=red")),
        )
        .await
        .error(400, "invalid_request");
    }
}

#[tokio::test]
async fn the_graph_of_a_computation_draws_copies_red() {
    let (router, _) = app(Config::default());
    let text = corpus("entry_layout_colmajor");
    let run = call(
        &router,
        request("POST", "/v1/layout-assignment", Some("text/plain"), text),
    )
    .await;
    let output = run.json()["module"].as_str().expect("module").to_string();
    assert!(output.contains(" copy("), "the cpu output has copies");
    let g = call(
        &router,
        request("POST", "/v1/graph", Some("text/plain"), output.clone()),
    )
    .await;
    assert_eq!(g.status, 200, "{}", g.text());
    assert_eq!(g.header("content-type"), Some("image/svg+xml"));
    let svg = g.text();
    assert!(
        svg.starts_with("<svg") && svg.contains("#c62828"),
        "copies are drawn red"
    );
    call(
        &router,
        request(
            "POST",
            "/v1/graph?computation=nope",
            Some("text/plain"),
            output,
        ),
    )
    .await
    .error(404, "unknown_computation");
    call(
        &router,
        request(
            "POST",
            "/v1/graph",
            Some("text/plain"),
            "HloModule broken\nENTRY",
        ),
    )
    .await
    .error(400, "parse_error");
}

#[tokio::test]
async fn verify_semantic_reports_the_check_on_both_routes() {
    let (router, _) = app(Config::default());
    let text = corpus("entry_layout_colmajor");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?verify=semantic",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let check = &a.json()["semantic_check"];
    assert_eq!(check["result"], "equivalent", "{check}");
    assert!(check["elements_compared"].as_u64().is_some_and(|n| n > 0));
    // Without it, no check.
    let plain = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    assert!(plain.json().get("semantic_check").is_none());
    // In a JSON body, and on a session.
    let body =
        serde_json::json!({ "module": text, "target": "tpu", "options": { "verify": "semantic" } });
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
    assert_eq!(a.json()["semantic_check"]["result"], "equivalent");
    let put = call(
        &router,
        request("PUT", "/v1/modules/s1", Some("text/plain"), text),
    )
    .await;
    assert_eq!(put.status, 201, "{}", put.text());
    let s = call(
        &router,
        request(
            "POST",
            "/v1/modules/s1/layout-assignment?verify=semantic",
            None,
            "",
        ),
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.text());
    assert_eq!(
        s.json()["semantic_check"]["result"],
        "equivalent",
        "{}",
        s.text()
    );
    call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?verify=maybe",
            Some("text/plain"),
            "HloModule m",
        ),
    )
    .await
    .error(400, "invalid_request");
}

#[tokio::test]
async fn verify_semantic_is_bounded_by_max_elements() {
    let (router, _) = app(Config {
        semantic_max_elements: 1000,
        ..Config::default()
    });
    let text = corpus("entry_layout_colmajor");
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?verify=semantic",
            Some("text/plain"),
            text,
        ),
    )
    .await;
    assert_eq!(a.status, 200);
    let check = &a.json()["semantic_check"];
    assert_eq!(check["result"], "not_checked", "{check}");
    assert_eq!(check["max_elements"], 1000);
    assert!(
        check["message"]
            .as_str()
            .is_some_and(|m| m.contains("too large to check")),
        "{check}"
    );
}
