//! Sessions and restarts: a restarted service has lost its sessions, and
//! `server::client::SessionClient` puts its own back (the module, then its
//! patches) and repeats the request, over a real loopback socket.

mod common;

use std::time::Duration;

use common::*;
use server::Config;
use server::client::{Client, SessionClient};

const TIMEOUT: Duration = Duration::from_secs(60);

fn json(a: &server::client::ClientResponse) -> serde_json::Value {
    serde_json::from_slice(&a.body).unwrap_or_else(|e| panic!("JSON ({e}): {}", a.text()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_client_restores_its_session_after_a_restart() {
    let first = start(Config::default()).await;
    let addr = first.addr;
    let module = corpus("reductions_mixed");
    let (old, new) = edited_region(&module);
    let edited = module.replace(&old, &new);
    let want = expected(&edited, "cpu").0;

    // Load, patch and run on the first server.
    let mut session = {
        let (module, new) = (module.clone(), new.clone());
        tokio::task::spawn_blocking(move || {
            let mut s = SessionClient::new(
                Client::new(addr, TIMEOUT),
                "restartable",
                &module,
                Some("cpu"),
            );
            assert_eq!(s.load().expect("answered").status, 201);
            assert_eq!(
                s.patch(&[("region_0.1", &new)]).expect("answered").status,
                200
            );
            s
        })
        .await
        .expect("the client ends")
    };
    let (a, session_back) = tokio::task::spawn_blocking(move || {
        let a = session.run("").expect("answered");
        (a, session)
    })
    .await
    .expect("the client ends");
    session = session_back;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(json(&a)["module"].as_str(), Some(&want[..]));
    assert_eq!(session.restores(), 0);

    // A restart on the same address: the new service has no session.
    let mut first = first;
    first.shut_down();
    let done = tokio::time::timeout(Duration::from_secs(30), &mut first.task).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "the first server stops: {done:?}"
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("the same address again");
    let state = server::AppState::new(Config::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let second = tokio::spawn(server::serve(listener, state.clone(), async move {
        let _ = rx.await;
    }));

    // The next run restores the session (module, then patch) and answers
    // what the first server would have.
    let (a, session) = tokio::task::spawn_blocking(move || {
        let a = session.run("").expect("answered");
        (a, session)
    })
    .await
    .expect("the client ends");
    assert_eq!(a.status, 200, "{}", a.text());
    let v = json(&a);
    assert_eq!(
        v["module"].as_str(),
        Some(&want[..]),
        "the restored session holds the patched module"
    );
    assert_eq!(
        v["recomputed_computations"].as_array().map(Vec::len),
        Some(12),
        "a fresh database computes everything"
    );
    assert_eq!(session.restores(), 1);
    assert_eq!(
        state
            .metrics()
            .requests("/v1/modules/{id}/layout-assignment", 404),
        1
    );
    assert_eq!(
        state.metrics().requests("/v1/modules/{id}", 200),
        1,
        "one re-PATCH"
    );

    // An eviction (here a DELETE) is restored the same way, and a patch
    // that finds no session restores it before it applies.
    let mut session = session;
    let mut c = Client::new(addr, TIMEOUT);
    let (a, session) = tokio::task::spawn_blocking(move || {
        assert_eq!(
            c.request("DELETE", "/v1/modules/restartable", &[], b"")
                .expect("answered")
                .status,
            204
        );
        let p = session.patch(&[("region_0.1", &old)]).expect("answered");
        assert_eq!(p.status, 200, "{}", p.text());
        let a = session.run("").expect("answered");
        (a, session)
    })
    .await
    .expect("the client ends");
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        json(&a)["module"].as_str(),
        Some(expected(&module, "cpu").0.as_str()),
        "the patch back to the original"
    );
    assert_eq!(session.restores(), 2);

    let _ = tx.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), second).await;
}

/// `SessionClient::run_changes` over a socket: the held output is the
/// stateless text after each run, an edit sends only what changed, and a
/// lost session (here a DELETE) is restored and answered in full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_client_patches_its_held_output_with_changes() {
    let mut server = start(Config::default()).await;
    let addr = server.addr;
    let module = corpus("reductions_mixed");
    let (old, new) = edited_region(&module);
    let edited = module.replace(&old, &new);
    let (want_before, want_after) = (expected(&module, "cpu").0, expected(&edited, "cpu").0);
    tokio::task::spawn_blocking(move || {
        let mut s = SessionClient::new(Client::new(addr, TIMEOUT), "held", &module, Some("cpu"));
        let mut held = server::client::HeldOutput::default();
        assert_eq!(s.load().expect("answered").status, 201);
        let a = s.run_changes("", &mut held).expect("answered");
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(held.text(), want_before);

        assert_eq!(
            s.patch(&[("region_0.1", &new)]).expect("answered").status,
            200
        );
        let a = s.run_changes("", &mut held).expect("answered");
        assert_eq!(a.status, 200, "{}", a.text());
        let changed = json(&a)["changed"].clone();
        assert_eq!(
            changed
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["region_0.1".to_string()])
        );
        assert_eq!(held.text(), want_after);

        let mut c = Client::new(addr, TIMEOUT);
        let d = c
            .request("DELETE", "/v1/modules/held", &[], b"")
            .expect("answered");
        assert_eq!(d.status, 204);
        let a = s.run_changes("", &mut held).expect("answered");
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(
            json(&a)["since"],
            serde_json::Value::Null,
            "a restored session starts over"
        );
        assert_eq!(held.text(), want_after);
        assert_eq!(s.restores(), 1);
    })
    .await
    .expect("the client ends");
    server.shut_down();
}
