//! The service over a real loopback socket: HTTP/1.1 from a plain
//! `TcpStream`, a storm of bad requests, and graceful shutdown.

mod common;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use server::Config;
use server::client::{Client, read_response};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_over_loopback_and_survives_a_storm() {
    // Worker slots for every thread at once, so that nothing is shed: each
    // request must get exactly its own answer.
    let config = Config {
        max_body_bytes: 64 * 1024,
        max_concurrency: 16,
        ..Config::default()
    };
    let mut running = start(config).await;
    let addr = running.addr;
    // Healthy modules with their stateless answers, computed beforehand.
    let healthy = healthy_modules();

    let storm = {
        let healthy = healthy.clone();
        tokio::task::spawn_blocking(move || {
            let malformed = testdata("errors/missing_equals.hlo");
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let (malformed, healthy) = (malformed.clone(), healthy.clone());
                    std::thread::spawn(move || {
                        let mut statuses = Vec::new();
                        let mut healthy_answered = 0;
                        let mut client = Client::new(addr, TIMEOUT);
                        // Healthy requests go on a kept-alive connection of
                        // their own, in between the bad ones of this thread
                        // while the other threads storm.
                        let mut good = Client::new(addr, TIMEOUT);
                        let oversized = vec![b'z'; 1 << 20];
                        for i in 0..12 {
                            if i % 3 == 1 {
                                let (text, want) = &healthy[(t + i) % healthy.len()];
                                let a = good
                                    .request("POST", "/v1/layout-assignment", &[("content-type", "text/plain")], text.as_bytes())
                                    .unwrap_or_else(|e| panic!("thread {t}: a healthy request during the storm is answered: {e}"));
                                assert_eq!(a.status, 200, "thread {t}, healthy request {i}: {}", a.text());
                                let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
                                assert_eq!(v["module"].as_str(), Some(&want[..]), "thread {t}: the stateless answer");
                                healthy_answered += 1;
                            }
                            let kind = (t + i) % 5;
                            let r = match kind {
                                0 => client.request("POST", "/v1/layout-assignment", &[("content-type", "text/plain")], malformed.as_bytes()),
                                1 => client.request("POST", "/v1/layout-assignment", &[("content-type", "text/plain")], &oversized),
                                2 => client.request("POST", "/v1/layout-assignment", &[("content-type", "application/json")], b"{\"module\":"),
                                3 => client.request("PUT", "/v1/modules/storm", &[("content-type", "text/csv")], b"a,b"),
                                _ => {
                                    // Not HTTP at all, on its own connection.
                                    let mut s = TcpStream::connect(addr).expect("connects");
                                    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
                                    let _ = s.write_all(b"\x16\x03\x01 garbage that is not HTTP\r\n\r\n");
                                    let mut r = BufReader::new(s);
                                    read_response(&mut r)
                                }
                            };
                            let status = match r {
                                Ok(resp) => {
                                    // Every answer is the service's JSON, even the one
                                    // to a request line hyper could not parse.
                                    assert_eq!(resp.header("content-type"), Some("application/json"), "{}", resp.text());
                                    assert!(resp.header("x-request-id").is_some_and(|id| !id.is_empty()), "{:?}", resp.headers);
                                    resp.status
                                }
                                // The server may answer 413 and close before an
                                // oversized body is written whole.
                                Err(_) if kind == 1 => 0,
                                Err(e) => panic!("thread {t}: request kind {kind} got no answer: {e}"),
                            };
                            let want: &[u16] = match kind {
                                0 | 2 | 4 => &[400],
                                1 => &[413, 0],
                                _ => &[415],
                            };
                            assert!(want.contains(&status), "thread {t}, request kind {kind}: {status}, expected {want:?}");
                            statuses.push(status);
                        }
                        (statuses, healthy_answered)
                    })
                })
                .collect();
            let mut statuses = Vec::new();
            let mut healthy_answered = 0;
            for t in threads {
                // A failed assertion in a thread surfaces here.
                let (s, h) = t.join().expect("a storm thread got its expected answers");
                statuses.extend(s);
                healthy_answered += h;
            }
            (statuses, healthy_answered)
        })
        .await
        .expect("the storm ends")
    };
    let (storm, healthy_answered) = storm;
    assert_eq!(storm.len(), 96);
    assert_eq!(
        healthy_answered, 32,
        "every healthy request in the storm was answered correctly"
    );
    assert!(storm.contains(&415) && storm.contains(&400), "{storm:?}");
    assert!(storm.iter().any(|&s| s == 413 || s == 0), "{storm:?}");

    // Healthy requests afterwards, on fresh and kept-alive connections.
    let state = running.state.clone();
    let after = healthy.clone();
    let answers = tokio::task::spawn_blocking(move || {
        let mut client = Client::new(addr, TIMEOUT);
        let mut out = Vec::new();
        for (text, _) in after.iter() {
            out.push(
                client
                    .request(
                        "POST",
                        "/v1/layout-assignment",
                        &[("content-type", "text/plain")],
                        text.as_bytes(),
                    )
                    .expect("answered"),
            );
        }
        out.push(
            client
                .request(
                    "GET",
                    "/healthz",
                    &[("x-request-id", "after-the-storm")],
                    b"",
                )
                .expect("answered"),
        );
        out
    })
    .await
    .expect("the client ends");
    for (a, (_, want)) in answers.iter().zip(healthy.iter()) {
        assert_eq!(a.status, 200, "{}", a.text());
        let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
        assert_eq!(v["module"].as_str(), Some(&want[..]));
        assert!(a.header("x-request-id").is_some_and(|id| !id.is_empty()));
    }
    assert_eq!(answers[3].status, 200);
    assert_eq!(answers[3].header("x-request-id"), Some("after-the-storm"));
    assert_eq!(state.metrics().in_flight(), 0);

    if let Some(stop) = running.stop.take() {
        let _ = stop.send(());
    }
    let done = tokio::time::timeout(Duration::from_secs(30), &mut running.task).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "the server stops cleanly: {done:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_drains_requests_in_flight() {
    let mut running = start(Config::default()).await;
    let addr = running.addr;
    let text = corpus("cond_switch");
    let want = expected(&text, "cpu").0;
    let half = text.len() / 2;

    // Send the head and half the body, then stop.
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    let head = format!(
        "POST /v1/layout-assignment HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    stream.write_all(head.as_bytes()).expect("writes");
    stream.write_all(&text.as_bytes()[..half]).expect("writes");
    stream.flush().expect("flushes");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.state.metrics().in_flight() < 1 {
        assert!(Instant::now() < deadline, "the request is in flight");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Shut down while it is in flight.
    if let Some(stop) = running.stop.take() {
        let _ = stop.send(());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !running.task.is_finished(),
        "the server waits for the request in flight"
    );
    // New connections are no longer accepted.
    let refused = tokio::task::spawn_blocking(move || {
        let mut c = Client::new(addr, Duration::from_secs(5));
        c.request("GET", "/healthz", &[], b"").is_err()
    })
    .await
    .expect("the probe ends");
    assert!(
        refused,
        "a new connection is not served after shutdown began"
    );

    // The rest of the body: the request completes normally.
    let response = tokio::task::spawn_blocking(move || {
        stream
            .write_all(&text.as_bytes()[half..])
            .expect("writes the rest");
        let mut r = BufReader::new(stream);
        read_response(&mut r)
    })
    .await
    .expect("the client ends")
    .expect("an answer");
    assert_eq!(response.status, 200, "{}", response.text());
    let v: serde_json::Value = serde_json::from_slice(&response.body).expect("JSON");
    assert_eq!(v["module"].as_str(), Some(&want[..]));

    let done = tokio::time::timeout(Duration::from_secs(30), &mut running.task).await;
    assert!(
        matches!(done, Ok(Ok(Ok(())))),
        "the server stops after draining: {done:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_on_a_stuck_request_after_the_grace() {
    let grace = Duration::from_millis(300);
    let mut running = start(Config {
        shutdown_grace: grace,
        ..Config::default()
    })
    .await;
    let addr = running.addr;
    // A client that sends half its body and then nothing.
    let mut stream = TcpStream::connect(addr).expect("connects");
    stream
        .write_all(format!("POST /v1/layout-assignment HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 100\r\n\r\nHloModule").as_bytes())
        .expect("writes");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.state.metrics().in_flight() < 1 {
        assert!(Instant::now() < deadline, "the request is in flight");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stopped_at = Instant::now();
    if let Some(stop) = running.stop.take() {
        let _ = stop.send(());
    }
    let done = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
    let waited = stopped_at.elapsed();
    assert!(matches!(done, Ok(Ok(Ok(())))), "serve returns: {done:?}");
    assert!(waited >= grace, "it waited the grace: {waited:?}");
    assert!(
        waited < Duration::from_secs(5),
        "and not much longer: {waited:?}"
    );
    drop(stream);
}
