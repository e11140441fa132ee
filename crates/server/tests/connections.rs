//! Slow, idle and malformed clients over a real loopback socket, and
//! queueing under load: each gets the right answer (or its connection
//! closed) in time, and healthy clients are answered correctly meanwhile
//! and afterwards.

mod common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use server::Config;
use server::client::{Client, ClientResponse, read_response};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Reads until the server closes the connection; how long that took, or
/// `None` if it stayed open for `limit`.
fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream
        .set_read_timeout(Some(limit))
        .expect("a read timeout");
    let mut sink = Vec::new();
    match stream.read_to_end(&mut sink) {
        Ok(_) => Some(started.elapsed()),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
            Some(started.elapsed())
        }
        Err(_) => None,
    }
}

/// Posts `mlp_fwd` on a fresh connection and checks the stateless answer.
fn healthy_request(addr: SocketAddr) {
    let text = corpus("mlp_fwd");
    let want = expected(&text, "cpu").0;
    let mut c = Client::new(addr, TIMEOUT);
    let a = c
        .request(
            "POST",
            "/v1/layout-assignment",
            &[("content-type", "text/plain")],
            text.as_bytes(),
        )
        .expect("answered");
    assert_eq!(a.status, 200, "{}", a.text());
    let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
    assert_eq!(v["module"].as_str(), Some(&want[..]));
}

/// Waits until `done` holds: the service counts a closed connection just
/// after the socket closes.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f)
        .await
        .expect("the client thread ends")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_head_is_closed_after_the_header_read_timeout() {
    let config = Config {
        header_read_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let mut running = start(config).await;
    let addr = running.addr;
    let waited = blocking(move || {
        let mut s = TcpStream::connect(addr).expect("connects");
        s.write_all(b"POST /v1/layout-assignment HTTP/1.1\r\nHost: x\r\nContent-Le")
            .expect("writes");
        closed_within(&mut s, Duration::from_secs(30))
    })
    .await
    .expect("the server closed the connection");
    assert!(
        waited >= Duration::from_millis(250),
        "not before the timeout: {waited:?}"
    );
    eventually("one connection closed by the header timeout", || {
        running.state.metrics().connections_closed("header_timeout") == 1
    })
    .await;
    // A head sent in pieces within the timeout is served.
    blocking(move || {
        let mut s = TcpStream::connect(addr).expect("connects");
        s.write_all(b"GET /healthz HTTP/1.1\r\n").expect("writes");
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(b"Host: x\r\n\r\n").expect("writes");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        let a = read_response(&mut BufReader::new(s)).expect("answered");
        assert_eq!(a.status, 200);
        healthy_request(addr);
    })
    .await;
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let config = Config {
        idle_timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let mut running = start(config).await;
    let addr = running.addr;
    let (silent, kept_alive) = blocking(move || {
        // Opened and silent.
        let mut silent = TcpStream::connect(addr).expect("connects");
        // Kept alive after an answer.
        let mut kept = TcpStream::connect(addr).expect("connects");
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("writes");
        kept.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        let mut r = BufReader::new(kept.try_clone().expect("clones"));
        assert_eq!(read_response(&mut r).expect("answered").status, 200);
        (
            closed_within(&mut silent, Duration::from_secs(30)),
            closed_within(&mut kept, Duration::from_secs(30)),
        )
    })
    .await;
    assert!(
        silent.is_some_and(|w| w >= Duration::from_millis(250)),
        "{silent:?}"
    );
    assert!(kept_alive.is_some(), "the kept-alive connection was closed");
    eventually("two connections closed by the idle timeout", || {
        running.state.metrics().connections_closed("idle_timeout") == 2
    })
    .await;
    blocking(move || healthy_request(addr)).await;
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_idle_connections_make_room() {
    // Idle connections never time out here: only the cap can close them.
    let config = Config {
        max_connections: 8,
        idle_timeout: Duration::from_secs(600),
        ..Config::default()
    };
    let mut running = start(config).await;
    let (addr, state) = (running.addr, running.state.clone());
    // A request in flight (half its body sent) on one connection: it must
    // never be the one closed.
    let text = corpus("cond_switch");
    let want = expected(&text, "cpu").0;
    let half = text.len() / 2;
    let mut busy = TcpStream::connect(addr).expect("connects");
    let head = format!(
        "POST /v1/layout-assignment HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    busy.write_all(head.as_bytes()).expect("writes");
    busy.write_all(&text.as_bytes()[..half]).expect("writes");
    let deadline = Instant::now() + Duration::from_secs(10);
    while state.metrics().in_flight() < 1 {
        assert!(Instant::now() < deadline, "the request is in flight");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Far more idle connections than the cap; the process's file limit is
    // what the cap protects, and 40 stays well below it.
    let idle: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(addr).expect("connects"))
        .collect();
    let sampler = {
        let state = state.clone();
        tokio::spawn(async move {
            let mut most = 0;
            for _ in 0..200 {
                most = most.max(state.metrics().connections());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            most
        })
    };
    // A health check is still answered, on a fresh connection.
    let health = blocking(move || {
        let mut c = Client::new(addr, TIMEOUT);
        c.request("GET", "/healthz", &[], b"").expect("answered")
    })
    .await;
    assert_eq!(health.status, 200);
    assert!(
        sampler.await.expect("the sampler ends") <= 8,
        "never more open than the cap"
    );
    assert!(
        state.metrics().connections_closed("evicted") >= 32,
        "{}",
        state.metrics().connections_closed("evicted")
    );
    // The request in flight completes.
    let answer = blocking(move || {
        busy.write_all(&text.as_bytes()[half..])
            .expect("writes the rest");
        busy.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        read_response(&mut BufReader::new(busy))
    })
    .await
    .expect("answered");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let v: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    assert_eq!(v["module"].as_str(), Some(&want[..]));
    drop(idle);
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_get_408_and_do_not_starve_other_requests() {
    let config = Config {
        min_body_rate: 1000,
        body_grace: Duration::from_millis(300),
        ..Config::default()
    };
    let mut running = start(config).await;
    let (addr, state) = (running.addr, running.state.clone());
    // 64 uploads of 10 kB, a byte every 50 ms (20 bytes/s).
    let slow: Vec<_> = (0..64)
        .map(|_| {
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connects");
                let head = "POST /v1/layout-assignment HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 10000\r\n\r\n";
                s.write_all(head.as_bytes()).await.expect("writes the head");
                let started = Instant::now();
                let mut answer = Vec::new();
                for _ in 0..10_000 {
                    if s.write_all(b"x").await.is_err() {
                        break;
                    }
                    let mut buf = [0u8; 4096];
                    match tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
                        Err(_) => {}
                    }
                }
                let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
                (answer, started.elapsed())
            })
        })
        .collect();
    // Meanwhile, healthy requests are answered, not refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    while state.metrics().in_flight() < 64 {
        assert!(
            Instant::now() < deadline,
            "the slow uploads are in flight: {}",
            state.metrics().in_flight()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    blocking(move || {
        for _ in 0..4 {
            healthy_request(addr);
        }
    })
    .await;
    for upload in slow {
        let (answer, took) = upload.await.expect("the upload ends");
        let a = read_response(&mut BufReader::new(&answer[..])).expect("an answer");
        assert_eq!(a.status, 408, "{}", a.text());
        let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
        assert_eq!(v["error"]["kind"], "timeout");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("min_body_rate")),
            "{v}"
        );
        assert!(took < Duration::from_secs(30), "{took:?}");
    }
    assert_eq!(state.metrics().requests("/v1/layout-assignment", 503), 0);
    assert_eq!(state.metrics().requests("/v1/layout-assignment", 408), 64);
    blocking(move || healthy_request(addr)).await;
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_beyond_max_body_memory_get_503_with_retry_after() {
    let config = Config {
        max_body_memory: 64 << 10,
        ..Config::default()
    };
    let mut running = start(config).await;
    let addr = running.addr;
    // A body of 60 KiB declared and not yet sent holds its share.
    let mut held = TcpStream::connect(addr).expect("connects");
    let head = format!(
        "POST /v1/layout-assignment HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        60 << 10
    );
    held.write_all(head.as_bytes()).expect("writes");
    let deadline = Instant::now() + Duration::from_secs(10);
    while running
        .state
        .render_metrics()
        .lines()
        .all(|l| l != format!("tessera_request_body_bytes {}", 60 << 10))
    {
        assert!(Instant::now() < deadline, "the body's share is held");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let text = corpus("mlp_fwd");
    assert!(text.len() > 4 << 10);
    let refused: ClientResponse = blocking(move || {
        let mut c = Client::new(addr, TIMEOUT);
        c.request(
            "POST",
            "/v1/layout-assignment",
            &[("content-type", "text/plain")],
            text.as_bytes(),
        )
        .expect("answered")
    })
    .await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        refused.text().contains("max_body_memory"),
        "{}",
        refused.text()
    );
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    while running
        .state
        .render_metrics()
        .lines()
        .all(|l| l != "tessera_request_body_bytes 0")
    {
        assert!(Instant::now() < deadline, "the share comes back");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    blocking(move || healthy_request(addr)).await;
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_connections_with_no_request_at_once() {
    let mut running = start(Config {
        shutdown_grace: Duration::from_secs(30),
        ..Config::default()
    })
    .await;
    let addr = running.addr;
    let mut half_head = TcpStream::connect(addr).expect("connects");
    half_head
        .write_all(b"GET /healthz HTTP/1.1\r\nHo")
        .expect("writes");
    let silent = TcpStream::connect(addr).expect("connects");
    let kept = blocking(move || {
        let mut c = TcpStream::connect(addr).expect("connects");
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("writes");
        c.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        assert_eq!(
            read_response(&mut BufReader::new(c.try_clone().expect("clones")))
                .expect("answered")
                .status,
            200
        );
        c
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.state.metrics().connections() < 3 {
        assert!(Instant::now() < deadline, "three connections are open");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stopped_at = Instant::now();
    running.shut_down();
    let done = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
    assert!(matches!(done, Ok(Ok(Ok(())))), "serve returns: {done:?}");
    let waited = stopped_at.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "not the 30 s grace: {waited:?}"
    );
    assert_eq!(running.state.metrics().connections(), 0);
    assert_eq!(running.state.metrics().connections_closed("shutdown"), 3);
    drop((half_head, silent, kept));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_hyper_refuses_are_answered_in_json() {
    let mut running = start(Config::default()).await;
    let addr = running.addr;
    let answers = blocking(move || {
        let send = |raw: Vec<u8>| {
            let mut s = TcpStream::connect(addr).expect("connects");
            s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
            // The server may answer and close before the whole head is sent.
            let _ = s.write_all(&raw);
            read_response(&mut BufReader::new(s)).expect("an answer")
        };
        let mut many = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
        for i in 0..5000 {
            many.push_str(&format!("x-header-{i}: {i}\r\n"));
        }
        many.push_str("\r\n");
        let huge = format!(
            "GET /healthz HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "b".repeat(100 << 10)
        );
        let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(100 << 10));
        vec![
            send(many.into_bytes()),
            send(huge.into_bytes()),
            send(long.into_bytes()),
            send(b"\x16\x03\x01 not http\r\n\r\n".to_vec()),
        ]
    })
    .await;
    let want = [
        (431, "headers_too_large"),
        (431, "headers_too_large"),
        (431, "headers_too_large"),
        (400, "invalid_request"),
    ];
    for (a, (status, kind)) in answers.iter().zip(want) {
        assert_eq!(a.status, status, "{}", a.text());
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(a.header("connection"), Some("close"));
        assert!(a.header("x-request-id").is_some_and(|id| !id.is_empty()));
        let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
        assert_eq!(v["error"]["kind"], kind, "{v}");
    }
    let m = running.state.render_metrics();
    assert!(
        m.lines()
            .any(|l| l == "tessera_errors_total{kind=\"headers_too_large\"} 3"),
        "{m}"
    );
    assert!(
        m.lines().any(|l| l
            == "tessera_http_requests_total{route=\"unparsed\",method=\"other\",status=\"431\"} 3"),
        "{m}"
    );
    blocking(move || healthy_request(addr)).await;
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_on_two_workers_queue_without_errors() {
    let config = Config {
        max_concurrency: 2,
        ..Config::default()
    };
    let mut running = start(config).await;
    let (addr, state) = (running.addr, running.state.clone());
    let healthy = healthy_modules();
    let counts = blocking(move || {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let healthy = healthy.clone();
                std::thread::spawn(move || {
                    let mut c = Client::new(addr, TIMEOUT);
                    for i in 0..12 {
                        let (text, want) = &healthy[(t + i) % healthy.len()];
                        let a = c
                            .request(
                                "POST",
                                "/v1/layout-assignment",
                                &[("content-type", "text/plain")],
                                text.as_bytes(),
                            )
                            .expect("answered");
                        assert_eq!(a.status, 200, "client {t}, request {i}: {}", a.text());
                        let v: serde_json::Value = serde_json::from_slice(&a.body).expect("JSON");
                        assert_eq!(v["module"].as_str(), Some(&want[..]));
                    }
                    12
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("every request answered"))
            .sum::<usize>()
    })
    .await;
    assert_eq!(counts, 96);
    assert_eq!(state.metrics().requests("/v1/layout-assignment", 200), 96);
    assert_eq!(state.metrics().requests("/v1/layout-assignment", 503), 0);
    running.shut_down();
    let _ = tokio::time::timeout(Duration::from_secs(10), &mut running.task).await;
}
