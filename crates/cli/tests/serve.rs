//! `tessera serve` as a real process on a loopback port: graceful shutdown
//! on a real SIGTERM, JSON logs that carry request ids, a session's log
//! without its database's internals, and idle
//! connections beyond the process's file limit.
//!
//! The server is the `tessera` binary that cargo built for these tests. It
//! listens on `127.0.0.1:0` and announces the port it got on stdout. Every
//! wait has a deadline, and a server left running by a failed assertion is
//! killed when its guard drops, so a broken build fails these tests rather
//! than hanging them.

mod served;

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use served::*;
use server::client::{Client, read_response};

/// Sends SIGTERM through the `kill` command, without libc.
fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -TERM {}: {status}", child.id());
}

/// Waits for the process to exit, at most `limit`.
fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the server exits within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every stderr line, up to the pipe's end. Call once the process exited.
fn stderr_lines(served: &Served) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    loop {
        match served
            .stderr
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(l) => lines.push(l),
            Err(mpsc::RecvTimeoutError::Disconnected) => return lines,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("stderr ends once the server exited; so far: {lines:#?}")
            }
        }
    }
}

/// `tessera_http_requests_in_flight` from `GET /metrics`, on a connection
/// of its own that is closed again at once.
fn in_flight(addr: SocketAddr) -> u64 {
    let mut c = Client::new(addr, Duration::from_secs(10));
    let m = c
        .request("GET", "/metrics", &[], b"")
        .expect("metrics answer");
    assert_eq!(m.status, 200);
    m.text()
        .lines()
        .find_map(|l| l.strip_prefix("tessera_http_requests_in_flight "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("an in-flight gauge: {}", m.text()))
}

/// The output of a stateless run in this process, which the service must
/// give byte for byte, and its report without the timings (which differ
/// between runs).
fn stateless(text: &str) -> (String, serde_json::Value) {
    let spec = wire::resolve_target("cpu").expect("the cpu target");
    let out =
        driver::run(text, "request.hlo", &driver::Options::new(spec)).expect("the module runs");
    (
        out.text().to_string(),
        without_timings(wire::report_json(&out.report)),
    )
}

fn without_timings(mut report: serde_json::Value) -> serde_json::Value {
    if let Some(o) = report.as_object_mut() {
        o.remove("timings_us");
    }
    report
}

#[test]
fn sigterm_drains_the_request_in_flight_then_exits_0() {
    let mut served = serve(&[]);
    let addr = served.addr;
    // The largest corpus module, so that its run is still going on well
    // after the signal.
    let text = corpus("large_transformer_24_f32");
    let (want, want_report) = stateless(&text);

    // The head and half the body: the request is in flight, and it cannot
    // finish before the signal, whatever the machine's speed.
    let half = text.len() / 2;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connects");
    stream.set_read_timeout(Some(STEP)).expect("a read timeout");
    stream
        .set_write_timeout(Some(STEP))
        .expect("a write timeout");
    let head = format!(
        "POST /v1/layout-assignment HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nX-Request-Id: drained\r\n\r\n",
        text.len()
    );
    stream.write_all(head.as_bytes()).expect("writes the head");
    stream
        .write_all(&text.as_bytes()[..half])
        .expect("writes half the body");
    stream.flush().expect("flushes");
    let deadline = Instant::now() + Duration::from_secs(30);
    while in_flight(addr) < 1 {
        assert!(Instant::now() < deadline, "the request is in flight");
        std::thread::sleep(Duration::from_millis(10));
    }

    sigterm(&served.child);

    // The listener closes: new connections are refused (or, for one that
    // the kernel had already queued, closed unanswered). The signal is
    // handled asynchronously, so a probe may still be served at first.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut probe = Client::new(addr, Duration::from_secs(5));
        if probe.request("GET", "/healthz", &[], b"").is_err() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new connections are refused after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        matches!(served.child.try_wait(), Ok(None)),
        "the server waits for the request in flight"
    );

    // The rest of the body: the request completes with the full answer.
    stream
        .write_all(&text.as_bytes()[half..])
        .expect("writes the rest of the body");
    stream.flush().expect("flushes");
    let response =
        read_response(&mut BufReader::new(stream)).expect("the request in flight is answered");
    assert_eq!(
        response.status,
        200,
        "{}",
        response.text().chars().take(500).collect::<String>()
    );
    assert_eq!(response.header("x-request-id"), Some("drained"));
    let v: serde_json::Value = serde_json::from_slice(&response.body).expect("a JSON answer");
    assert!(
        v["module"].as_str() == Some(&want[..]),
        "the answer is the stateless run's output, byte for byte"
    );
    assert_eq!(
        without_timings(v["report"].clone()),
        want_report,
        "the report is the stateless run's"
    );

    let status = wait_exit(&mut served.child, STEP);
    assert_eq!(
        status.code(),
        Some(0),
        "a drained shutdown exits 0: {status}"
    );
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_err(),
        "nothing listens after the exit"
    );
    let log = stderr_lines(&served);
    assert!(
        log.iter().any(|l| l.contains("SIGTERM received")),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("draining requests in flight")),
        "{log:#?}"
    );
}

#[test]
fn json_logs_are_json_lines_that_carry_the_request_id() {
    let mut served = serve(&["--log-format", "json"]);
    let addr = served.addr;
    let text = corpus("mlp_fwd");
    let mut client = Client::new(addr, STEP);
    // No id is sent, so the server makes one up and must log that one.
    let a = client
        .request(
            "POST",
            "/v1/layout-assignment",
            &[("content-type", "text/plain")],
            text.as_bytes(),
        )
        .expect("answered");
    assert_eq!(a.status, 200, "{}", a.text());
    let id = a.header("x-request-id").expect("a request id").to_string();
    // A bad request: its error line must carry its own id.
    let b = client
        .request(
            "POST",
            "/v1/layout-assignment?target=nope",
            &[("content-type", "text/plain")],
            text.as_bytes(),
        )
        .expect("answered");
    assert_eq!(b.status, 400, "{}", b.text());
    let bad_id = b.header("x-request-id").expect("a request id").to_string();
    assert_ne!(id, bad_id);
    drop(client);

    sigterm(&served.child);
    let status = wait_exit(&mut served.child, STEP);
    assert_eq!(status.code(), Some(0), "{status}");

    let lines = stderr_lines(&served);
    assert!(!lines.is_empty(), "the service logs at info by default");
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {l}"));
            assert!(
                v.is_object() && v["level"].is_string() && v["fields"].is_object(),
                "a tracing JSON event: {l}"
            );
            v
        })
        .collect();
    // The span of the event, or any span around it, names the request.
    let of_request = |v: &serde_json::Value, id: &str| {
        v["span"]["request_id"] == id
            || v["spans"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["request_id"] == id))
    };
    let listening = events
        .iter()
        .find(|v| v["fields"]["message"] == "listening")
        .expect("the listening event");
    assert_eq!(listening["fields"]["addr"], addr.to_string());
    let finished: Vec<&serde_json::Value> = events.iter().filter(|v| of_request(v, &id)).collect();
    assert!(
        finished
            .iter()
            .any(|v| v["fields"]["message"] == "finished processing request"
                && v["fields"]["status"] == 200
                && v["span"]["path"] == "/v1/layout-assignment"
                && v["span"]["method"] == "POST"),
        "the response line carries the request id {id}: {lines:#?}"
    );
    assert!(
        events
            .iter()
            .any(|v| of_request(v, &bad_id) && v["fields"]["kind"] == "unknown_target"),
        "the error line carries the request id {bad_id}: {lines:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|v| of_request(v, &id) && of_request(v, &bad_id)),
        "no line mixes two requests"
    );
}

#[test]
fn a_session_logs_its_requests_not_its_queries() {
    // salsa logs each query it executes at info, the service's default
    // level: a session's load and first run of this module wrote 35 lines
    // of them beside the two requests' (one per query per computation:
    // some 167,000 for a module of 100,000 instructions).
    let mut served = serve(&[]);
    let text = corpus("mlp_fwd");
    let mut client = Client::new(served.addr, STEP);
    let put = client
        .request(
            "PUT",
            "/v1/modules/m",
            &[("content-type", "text/plain")],
            text.as_bytes(),
        )
        .expect("answered");
    assert_eq!(put.status, 201, "{}", put.text());
    let run = client
        .request(
            "POST",
            "/v1/modules/m/layout-assignment",
            &[("accept", "text/plain")],
            b"",
        )
        .expect("answered");
    assert_eq!(run.status, 200, "{}", run.text());
    drop(client);
    sigterm(&served.child);
    let status = wait_exit(&mut served.child, STEP);
    assert_eq!(status.code(), Some(0), "{status}");

    let lines = stderr_lines(&served);
    let finished: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("finished processing request"))
        .collect();
    assert_eq!(finished.len(), 2, "one line per request: {lines:#?}");
    assert!(
        !lines.iter().any(|l| l.contains("salsa")),
        "no line of salsa's: {lines:#?}"
    );
    assert!(lines.len() <= 10, "{lines:#?}");
}

#[test]
fn idle_connections_beyond_the_file_limit_do_not_stop_the_service() {
    // A file limit the service cannot raise: its connection cap is lowered
    // below it, and idle connections beyond it make room for new ones
    // instead of leaving nothing to accept with (before, 1,100 idle
    // connections against 1,024 files made /healthz time out).
    let files = 256;
    let served = serve_with_file_limit(files);
    let addr = served.addr;
    let idle: Vec<TcpStream> = (0..files + 100)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("connection {i}: {e}"))
        })
        .collect();
    let mut c = Client::new(addr, Duration::from_secs(30));
    let a = c
        .request("GET", "/healthz", &[], b"")
        .expect("the health check is answered");
    assert_eq!(a.status, 200);
    let text = corpus("mlp_fwd");
    let (want, _) = stateless(&text);
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
    let m = c
        .request("GET", "/metrics", &[], b"")
        .expect("answered")
        .text();
    let gauge = |name: &str| {
        m.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|r| r.trim().parse::<u64>().ok())
            })
            .unwrap_or_else(|| panic!("{name}: {m}"))
    };
    let open = gauge("tessera_connections_open ");
    assert!(
        open < files,
        "{open} connections open under a limit of {files} files"
    );
    assert!(
        gauge("tessera_connections_closed_total{reason=\"evicted\"} ") >= 100,
        "{m}"
    );
    drop(idle);
}
