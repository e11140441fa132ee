//! Hostile JSON and YAML bodies, in process: each is refused with the right
//! status before the request's deadline, and the service answers healthy
//! requests correctly afterwards. (Their memory is measured on the real
//! `tessera serve` process in `crates/cli/tests/serve_memory.rs`.)

mod common;

use std::time::Duration;

use common::*;
use server::Config;

/// A deadline the old decoder missed by far: a refusal that came after it
/// would be a 408, not the status these tests expect.
const DEADLINE: Duration = Duration::from_secs(20);

fn config() -> Config {
    Config {
        request_timeout: DEADLINE,
        ..Config::default()
    }
}

/// `key: &a <8 MiB>` and 249 more keys `*a`: 2 GiB once expanded.
fn anchored_string_repeated(prefix: &str, indent: &str, entry: impl Fn(usize) -> String) -> String {
    let mut yaml = String::from(prefix);
    yaml.push_str(indent);
    yaml.push_str(&entry(0));
    yaml.push_str(" &a ");
    yaml.push_str(&"x".repeat(8 << 20));
    yaml.push('\n');
    for k in 1..250 {
        yaml.push_str(indent);
        yaml.push_str(&entry(k));
        yaml.push_str(" *a\n");
    }
    yaml
}

/// The healthy requests that must still get their stateless answer.
async fn healthy_still_answered(router: &axum::Router) {
    for (text, want) in healthy_modules().iter() {
        let a = call(
            router,
            request(
                "POST",
                "/v1/layout-assignment",
                Some("text/plain"),
                text.clone(),
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        assert_eq!(a.json()["module"].as_str(), Some(&want[..]));
    }
    let text = corpus("mlp_fwd");
    let yaml = format!(
        "module: |\n{}",
        text.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let a = call(
        router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/yaml"),
            yaml,
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(&text, "cpu").0.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_string_repeated_by_aliases_is_refused_with_413() {
    let (router, state) = app(config());
    let bodies = [
        (
            "POST",
            "/v1/layout-assignment",
            anchored_string_repeated("module: x\ntarget:\n", "  ", |k| format!("k{k}:")),
        ),
        (
            "POST",
            "/v1/layout-assignment",
            anchored_string_repeated("module: x\noptions:\n  passes:\n", "    ", |_| "-".into()),
        ),
        (
            "PUT",
            "/v1/modules/s",
            anchored_string_repeated("module: x\ntarget:\n", "  ", |k| format!("k{k}:")),
        ),
        // The session does not exist: the body is refused before that.
        (
            "PATCH",
            "/v1/modules/ghost",
            anchored_string_repeated("computations:\n", "  ", |k| format!("c{k}:")),
        ),
    ];
    for (method, uri, yaml) in bodies {
        assert!(yaml.len() > 8 << 20 && yaml.len() < 9 << 20);
        let started = std::time::Instant::now();
        let a = call(
            &router,
            request(method, uri, Some("application/yaml"), yaml),
        )
        .await;
        let e = a.error(413, "payload_too_large");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains("aliases")),
            "{method} {uri}: {e}"
        );
        assert_eq!(e["limit"].as_u64(), Some(64 << 20));
        assert!(started.elapsed() < DEADLINE);
    }
    assert_eq!(state.session_count(), 0);
    healthy_still_answered(&router).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliases_within_the_limits_still_decode() {
    let (router, _) = app(config());
    let text = corpus("softmax_axes");
    let module = text.lines().map(|l| format!("  {l}\n")).collect::<String>();
    // An anchor named and used once: legitimate YAML, well within bounds.
    let yaml =
        format!("module: &m |\n{module}options:\n  passes: &p [layout-assignment]\ntarget: gpu\n");
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
    let mut opts = driver::Options::new(std::sync::Arc::new(
        target::load_builtin("gpu").expect("gpu"),
    ));
    opts.passes = vec![driver::PassName::LayoutAssignment];
    let want = driver::run(&text, "request.hlo", &opts)
        .expect("runs")
        .text()
        .to_string();
    assert_eq!(a.json()["module"].as_str(), Some(&want[..]));
    // A patch whose two computations share one text through an alias.
    let a = call(
        &router,
        request(
            "PUT",
            "/v1/modules/p",
            Some("text/plain"),
            corpus("reductions_mixed"),
        ),
    )
    .await;
    assert_eq!(a.status, 201);
    let yaml = "computations:\n  \"%nope\": &t \"%nope () -> f32[] { ROOT %c = f32[] constant(0) }\"\n  \"%nope2\": *t\n";
    let a = call(
        &router,
        request("PATCH", "/v1/modules/p", Some("application/yaml"), yaml),
    )
    .await;
    // Decoded: the patch is judged on its content (unknown computations).
    a.error(400, "unknown_computation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_nesting_is_refused_with_400_before_the_deadline() {
    let (router, state) = app(config());
    let flow = |n: usize| format!("module: x\ntarget: {}{}", "[".repeat(n), "]".repeat(n));
    let block = |n: usize| {
        let mut y = String::from("module: x\ntarget:\n");
        for i in 1..n {
            y.push_str(&" ".repeat(i));
            y.push_str("k:\n");
        }
        y
    };
    let json = |n: usize| {
        format!(
            "{{\"module\": \"x\", \"target\": {}{}}}",
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    let bodies = [
        // 100 KB: 3.9 s in serde_yaml's loader (release build), 17 s here.
        ("application/yaml", flow(50_000)),
        // 1 MB: minutes.
        ("application/yaml", flow(500_000)),
        ("application/yaml", block(500)),
        ("application/json", json(500_000)),
    ];
    for (content_type, body) in bodies {
        let started = std::time::Instant::now();
        let a = call(
            &router,
            request("POST", "/v1/layout-assignment", Some(content_type), body),
        )
        .await;
        let e = a.error(400, "invalid_request");
        let m = e["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("nests deeper than 64") || m.contains("recursion limit"),
            "{content_type}: {e}"
        );
        assert!(started.elapsed() < DEADLINE);
    }
    // The same refusal for a session's run options.
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
    let body = format!("options: {}{}", "{a: ".repeat(1000), "}".repeat(1000));
    call(
        &router,
        request(
            "POST",
            "/v1/modules/d/layout-assignment",
            Some("application/yaml"),
            body,
        ),
    )
    .await
    .error(400, "invalid_request");
    assert_eq!(state.metrics().in_flight(), 0);
    healthy_still_answered(&router).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_with_too_many_values_is_refused_with_413() {
    let (router, _) = app(Config {
        max_body_nodes: 1000,
        ..config()
    });
    let json = format!(
        "{{\"module\": \"x\", \"target\": {{\"rules\": [{}0]}}}}",
        "0,".repeat(5000)
    );
    let e = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            json,
        ),
    )
    .await
    .error(413, "payload_too_large");
    assert_eq!(e["limit"].as_u64(), Some(1000));
    let yaml = format!("module: x\ntarget:\n  rules:\n{}", "  - 0\n".repeat(5000));
    call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/yaml"),
            yaml,
        ),
    )
    .await
    .error(413, "payload_too_large");
    // A billion laughs, nine levels of ten: refused by its node count
    // long before it is expanded.
    let mut yaml = String::from("module: x\ntarget:\n  a0: &a0 [lol]\n");
    for i in 1..10 {
        yaml.push_str(&format!(
            "  a{i}: &a{i} [{}]\n",
            vec![format!("*a{}", i - 1); 10].join(", ")
        ));
    }
    call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/yaml"),
            yaml,
        ),
    )
    .await
    .error(413, "payload_too_large");
    healthy_still_answered(&router).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_target_is_decoded_and_loaded_off_the_async_runtime() {
    // One worker slot, held: loading an inline target needs it, so the
    // request waits in the queue instead of loading it on the async
    // runtime. (The JSON body around it, under 16 KiB, is decoded on the
    // request's task: see `sessions.rs`'s
    // `a_lookup_is_answered_while_every_worker_is_busy`.)
    let (router, state) = app(Config {
        max_concurrency: 1,
        ..config()
    });
    let slot = state.try_acquire_worker().expect("a free slot");
    let spec = std::fs::read_to_string(testdata_dir().join("../targets/gpu.yaml"))
        .expect("targets/gpu.yaml");
    let inline: serde_json::Value = serde_yaml::from_str(&spec).expect("the target is YAML");
    let text = corpus("mlp_fwd");
    let body = serde_json::json!({ "module": text, "target": inline }).to_string();
    let pending = {
        let router = router.clone();
        tokio::spawn(async move {
            call(
                &router,
                request(
                    "POST",
                    "/v1/layout-assignment",
                    Some("application/json"),
                    body,
                ),
            )
            .await
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state.queue_len() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the decode waits for a worker slot"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!pending.is_finished());
    drop(slot);
    let a = pending.await.expect("the request ends");
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(
        a.json()["module"].as_str(),
        Some(expected(&text, "gpu").0.as_str())
    );
}
