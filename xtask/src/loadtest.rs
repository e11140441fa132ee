//! `cargo xtask loadtest`: the HTTP service under load, on loopback.
//!
//! Three scenarios (`--scenario`, default `all`: the first two):
//!
//! * `queue`: N clients (default 8) post the small corpus modules
//!   (`testdata/xla-cpu/*/before_layout.hlo` but the large transformer,
//!   round robin) to `POST /v1/layout-assignment` against a service with
//!   its default limits: `max_concurrency` = the number of CPUs, so most
//!   requests wait in the queue. It reports throughput, latency
//!   percentiles and errors; the goal is no error and a p99 within ten
//!   times the p50 (the exit status is 1 otherwise).
//! * `slow-clients`: healthy clients post small modules for a while
//!   (`--duration`) while slow clients attack: uploads that send a byte
//!   every 100 ms, connections that send half a request head, and idle
//!   connections. It reports what each got and when, and the healthy
//!   clients' latency and errors (the exit status is 1 unless every slow
//!   upload got 408, every other attacker was closed, and no healthy
//!   request failed).
//! * `corpus`: every corpus module, the large one included, with one
//!   worker slot per client, so that it measures latency under load
//!   rather than queueing (the figures of `docs/http-api.md`'s table).
//!
//! The server runs in process on a loopback port unless `--addr` names
//! one. The clients speak HTTP/1.1 over plain `TcpStream`s with
//! keep-alive (`server::client`).
//!
//! The load test only ever talks to loopback: `--addr` must be in
//! 127.0.0.0/8 or `::1`, or a host name (such as `localhost`) whose every
//! address is. A load generator pointed at another machine is a denial of
//! service, so it is refused before any connection is made.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Which load to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// `queue`, then `slow-clients`.
    All,
    /// Small modules from N clients against the default limits.
    Queue,
    /// Healthy clients among slow uploads, half-sent heads and idle
    /// connections.
    SlowClients,
    /// Every corpus module, one worker slot per client.
    Corpus,
}

/// Arguments of `cargo xtask loadtest`.
#[derive(clap::Args)]
pub struct Args {
    /// The scenario.
    #[arg(long, value_enum, default_value_t = Scenario::All)]
    scenario: Scenario,
    /// Concurrent clients, each on its own kept-alive connection (default:
    /// 8; 4 for `corpus`).
    #[arg(long)]
    clients: Option<usize>,
    /// Requests in all (default: 800; 200 for `corpus`).
    #[arg(long)]
    requests: Option<usize>,
    /// How long the `slow-clients` scenario lasts, in seconds.
    #[arg(long, default_value_t = 8)]
    duration: u64,
    /// A running server to load instead of an in-process one, as
    /// `HOST:PORT`. Loopback only: 127.0.0.0/8, `[::1]` or `localhost`.
    /// Not for `slow-clients`, which sets the server's timeouts.
    #[arg(long)]
    addr: Option<String>,
    /// The process id of the server at `--addr`, to read its peak memory.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Stop after this many seconds even if requests remain (they count as
    /// errors).
    #[arg(long, default_value_t = 600)]
    time_limit: u64,
    /// The target every request names.
    #[arg(long, default_value = "cpu")]
    target: String,
    /// Leave out modules whose directory name contains this (repeatable;
    /// `queue` and `slow-clients` leave out `large` unless this is given).
    #[arg(long)]
    exclude: Vec<String>,
}

/// One answered request.
struct Sample {
    module: usize,
    latency: Duration,
    status: u16,
    ok: bool,
}

/// Runs the load test.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.clients == Some(0) || args.requests == Some(0) || args.duration == 0 {
        bail!("--clients, --requests and --duration must be at least 1");
    }
    // Checked first, so that a wrong address costs nothing.
    let given = args.addr.as_deref().map(loopback_addr).transpose()?;
    if given.is_some() && args.scenario == Scenario::SlowClients {
        bail!(
            "--scenario slow-clients runs its own server (it sets the timeouts); leave out --addr"
        );
    }
    // Each client is a connection, and the in-process server holds the
    // other end: raise the file limit as `tessera serve` does.
    let _ = server::raise_file_limit();
    let mut failed = false;
    let scenarios: &[Scenario] = match args.scenario {
        Scenario::All if given.is_some() => &[Scenario::Queue],
        Scenario::All => &[Scenario::Queue, Scenario::SlowClients],
        ref one => std::slice::from_ref(one),
    };
    for (i, &scenario) in scenarios.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let ok = match scenario {
            Scenario::Queue | Scenario::Corpus => hammer(&args, scenario, given)?,
            Scenario::SlowClients => slow_clients(&args)?,
            Scenario::All => unreachable!("expanded above"),
        };
        failed |= !ok;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The modules a scenario posts.
fn modules_for(args: &Args, scenario: Scenario) -> anyhow::Result<Arc<Vec<(String, String)>>> {
    let default_exclude = vec!["large".to_string()];
    let exclude = if args.exclude.is_empty() && scenario != Scenario::Corpus {
        &default_exclude
    } else {
        &args.exclude
    };
    let modules = corpus(exclude)?;
    if modules.is_empty() {
        bail!("no module under testdata/xla-cpu matches");
    }
    Ok(Arc::new(modules))
}

/// The `queue` and `corpus` scenarios: N clients post the modules round
/// robin for M requests in all. True if the goals were met.
fn hammer(args: &Args, scenario: Scenario, given: Option<SocketAddr>) -> anyhow::Result<bool> {
    let clients = args
        .clients
        .unwrap_or(if scenario == Scenario::Corpus { 4 } else { 8 });
    let requests = args.requests.unwrap_or(if scenario == Scenario::Corpus {
        200
    } else {
        800
    });
    let modules = modules_for(args, scenario)?;

    // The server: in process on a loopback port, or the one given.
    let mut in_process = None;
    let mut limits = String::from("its own limits");
    let addr = match given {
        Some(a) => a,
        None => {
            let config = if scenario == Scenario::Corpus {
                // Every client may run at once: latency under load, not
                // queueing.
                server::Config {
                    max_concurrency: clients,
                    max_in_flight: clients.max(64),
                    ..server::Config::default()
                }
            } else {
                server::Config::default()
            };
            limits = format!(
                "max_concurrency {}, max_queue {}, queue_timeout {} ms",
                config.max_concurrency,
                config.max_queue,
                config.queue_timeout.as_millis()
            );
            let (addr, stop, thread) = start_server(config)?;
            in_process = Some((stop, thread));
            addr
        }
    };
    let path = format!("/v1/layout-assignment?target={}", args.target);
    println!(
        "scenario:     {} ({clients} clients, {requests} requests, {} modules of {:.1} MiB, server {addr}{}, {limits})",
        if scenario == Scenario::Corpus {
            "corpus"
        } else {
            "queue"
        },
        modules.len(),
        modules.iter().map(|(_, t)| t.len()).sum::<usize>() as f64 / (1 << 20) as f64,
        if in_process.is_some() {
            " in process"
        } else {
            ""
        },
    );
    let (samples, wall) = post_round_robin(
        addr,
        &modules,
        &path,
        clients,
        requests,
        Duration::from_secs(args.time_limit),
    );

    let server_hwm = match (in_process.is_some(), args.server_pid) {
        (true, _) => vm_hwm("/proc/self/status"),
        (false, Some(pid)) => vm_hwm(&format!("/proc/{pid}/status")),
        (false, None) => None,
    };
    if let Some((stop, thread)) = in_process {
        let _ = stop.send(());
        let _ = thread.join();
    }

    let done = samples.len();
    let errors = samples.iter().filter(|s| !s.ok).count() + requests.saturating_sub(done);
    let shed = samples.iter().filter(|s| s.status == 503).count();
    let mut all: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    all.sort();
    let bytes: usize = samples.iter().map(|s| modules[s.module].1.len()).sum();
    let (p50, p99) = (percentile(&all, 50.0), percentile(&all, 99.0));
    println!(
        "profile:      {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!(
        "requests:     {done} of {requests} in {:.2} s",
        wall.as_secs_f64()
    );
    println!(
        "throughput:   {:.1} requests/s, {:.2} MiB/s of HLO in",
        done as f64 / wall.as_secs_f64(),
        bytes as f64 / (1 << 20) as f64 / wall.as_secs_f64()
    );
    println!(
        "latency:      p50 {}  p99 {}  max {}",
        ms(p50),
        ms(p99),
        ms(all.last().copied())
    );
    println!("errors:       {errors} ({shed} answered 503)");
    let mut ok = errors == 0;
    if scenario == Scenario::Queue {
        let ratio = match (p50, p99) {
            (Some(a), Some(b)) if !a.is_zero() => b.as_secs_f64() / a.as_secs_f64(),
            _ => f64::INFINITY,
        };
        let met = ratio <= 10.0;
        println!(
            "p99 / p50:    {ratio:.1} (goal: at most 10; {})",
            if met { "met" } else { "MISSED" }
        );
        ok &= met;
    }
    match server_hwm {
        Some(kib) => println!(
            "peak RSS:     {:.1} MiB (VmHWM of the {})",
            kib as f64 / 1024.0,
            if given.is_none() {
                "loadtest process, server included"
            } else {
                "server process"
            }
        ),
        None => println!("peak RSS:     not measured (give --server-pid for a server at --addr)"),
    }
    println!("per module:   requests, p50, max");
    let mut by_module: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for s in &samples {
        by_module
            .entry(modules[s.module].0.as_str())
            .or_default()
            .push(s.latency);
    }
    for (name, mut l) in by_module {
        l.sort();
        println!(
            "  {name:<28} {:>5} {:>10} {:>10}",
            l.len(),
            ms(percentile(&l, 50.0)),
            ms(l.last().copied())
        );
    }
    Ok(ok)
}

/// `clients` threads post `modules` round robin until `total` requests
/// were sent or `limit` passed.
fn post_round_robin(
    addr: SocketAddr,
    modules: &Arc<Vec<(String, String)>>,
    path: &str,
    clients: usize,
    total: usize,
    limit: Duration,
) -> (Vec<Sample>, Duration) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + limit;
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (next, modules, path) = (next.clone(), modules.clone(), path.to_string());
            std::thread::spawn(move || {
                let mut client = server::client::Client::new(addr, Duration::from_secs(120));
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || Instant::now() >= deadline {
                        break;
                    }
                    samples.push(post_one(&mut client, &path, &modules, i % modules.len()));
                }
                samples
            })
        })
        .collect();
    let mut samples = Vec::new();
    for t in threads {
        match t.join() {
            Ok(s) => samples.extend(s),
            Err(_) => eprintln!("loadtest: a client thread panicked"),
        }
    }
    (samples, started.elapsed())
}

/// Posts module `m` and checks the answer is a JSON result.
fn post_one(
    client: &mut server::client::Client,
    path: &str,
    modules: &[(String, String)],
    m: usize,
) -> Sample {
    let t = Instant::now();
    let r = client.request(
        "POST",
        path,
        &[("content-type", "text/plain")],
        modules[m].1.as_bytes(),
    );
    let latency = t.elapsed();
    let (ok, status) = match &r {
        Ok(resp) => (
            resp.status == 200 && resp.body.starts_with(b"{\"module\":"),
            resp.status,
        ),
        Err(_) => (false, 0),
    };
    if !ok {
        let why = match r {
            Ok(resp) => format!(
                "{} {}",
                resp.status,
                resp.text().chars().take(300).collect::<String>()
            ),
            Err(e) => e.to_string(),
        };
        eprintln!("loadtest: {} failed: {why}", modules[m].0);
    }
    Sample {
        module: m,
        latency,
        status,
        ok,
    }
}

/// What the slow clients of the `slow-clients` scenario are.
const SLOW_UPLOADS: usize = 64;
const HALF_HEADS: usize = 64;
const IDLE: usize = 256;

/// The `slow-clients` scenario. True if every attacker got what the
/// limits promise and no healthy request failed.
fn slow_clients(args: &Args) -> anyhow::Result<bool> {
    let clients = args.clients.unwrap_or(8);
    let modules = modules_for(args, Scenario::SlowClients)?;
    let run_for = Duration::from_secs(args.duration);
    // Short timeouts, so that every attacker meets its limit within the
    // run; the defaults are longer (docs/http-api.md).
    let config = server::Config {
        header_read_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(4),
        body_grace: Duration::from_secs(2),
        ..server::Config::default()
    };
    println!(
        "scenario:     slow clients ({SLOW_UPLOADS} uploads of a byte every 100 ms, {HALF_HEADS} half-sent heads, {IDLE} idle connections) \
         among {clients} healthy clients, for {} s; header_read_timeout {} ms, idle_timeout {} ms, min_body_rate {} bytes/s after {} ms",
        run_for.as_secs(),
        config.header_read_timeout.as_millis(),
        config.idle_timeout.as_millis(),
        config.min_body_rate,
        config.body_grace.as_millis()
    );
    let (addr, stop, server) = start_server(config)?;
    let started = Instant::now();
    let end = started + run_for;

    let uploads: Vec<_> = (0..SLOW_UPLOADS)
        .map(|_| std::thread::spawn(move || slow_upload(addr, end)))
        .collect();
    let heads: Vec<_> = (0..HALF_HEADS)
        .map(|_| std::thread::spawn(move || half_head(addr, end)))
        .collect();
    let idle = std::thread::spawn(move || idle_connections(addr, end));
    // The healthy clients, for as long as the attack lasts.
    let path = format!("/v1/layout-assignment?target={}", args.target);
    let healthy: Vec<_> = (0..clients)
        .map(|c| {
            let (modules, path) = (modules.clone(), path.clone());
            std::thread::spawn(move || {
                let mut client = server::client::Client::new(addr, Duration::from_secs(120));
                let mut samples = Vec::new();
                let mut i = c;
                while Instant::now() < end {
                    samples.push(post_one(&mut client, &path, &modules, i % modules.len()));
                    i += clients;
                }
                samples
            })
        })
        .collect();
    let join = |h: std::thread::JoinHandle<Outcome>| {
        h.join().unwrap_or(Outcome {
            status: None,
            after: None,
        })
    };
    let uploads: Vec<Outcome> = uploads.into_iter().map(join).collect();
    let heads: Vec<Outcome> = heads.into_iter().map(join).collect();
    let idle = idle.join().unwrap_or_default();
    let mut samples = Vec::new();
    for h in healthy {
        samples.extend(h.join().unwrap_or_default());
    }
    let _ = stop.send(());
    let _ = server.join();

    let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    latencies.sort();
    let errors = samples.iter().filter(|s| !s.ok).count();
    println!(
        "healthy:      {} requests, {errors} errors, p50 {}  p99 {}  max {}",
        samples.len(),
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied())
    );
    let answered_408 = uploads.iter().filter(|o| o.status == Some(408)).count();
    println!(
        "slow uploads: {answered_408} of {SLOW_UPLOADS} answered 408, after {}",
        when(&uploads)
    );
    let heads_closed = heads.iter().filter(|o| o.after.is_some()).count();
    println!(
        "half heads:   {heads_closed} of {HALF_HEADS} closed by the server, after {}",
        when(&heads)
    );
    let idle_closed = idle.iter().filter(|o| o.after.is_some()).count();
    println!(
        "idle:         {idle_closed} of {IDLE} closed by the server, after {}",
        when(&idle)
    );
    Ok(errors == 0
        && !samples.is_empty()
        && answered_408 == SLOW_UPLOADS
        && heads_closed == HALF_HEADS
        && idle_closed == IDLE)
}

/// What happened to one slow client: the status it was answered with, and
/// when its connection was answered or closed, from the start of its
/// attack.
#[derive(Clone, Default)]
struct Outcome {
    status: Option<u16>,
    after: Option<Duration>,
}

/// "p50 X  max Y" of the outcomes that ended.
fn when(outcomes: &[Outcome]) -> String {
    let mut t: Vec<Duration> = outcomes.iter().filter_map(|o| o.after).collect();
    t.sort();
    format!(
        "p50 {}  max {}",
        ms(percentile(&t, 50.0)),
        ms(t.last().copied())
    )
}

/// Uploads a 100 kB body a byte every 100 ms until answered or `end`.
fn slow_upload(addr: SocketAddr, end: Instant) -> Outcome {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return Outcome::default();
    };
    let head = "POST /v1/layout-assignment HTTP/1.1\r\nHost: loadtest\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n";
    if s.write_all(head.as_bytes()).is_err()
        || s.set_read_timeout(Some(Duration::from_millis(100)))
            .is_err()
    {
        return Outcome::default();
    }
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < end {
        // The answer is read between the bytes: a server that answered
        // and closed would reset the connection on the next byte.
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                continue;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        if !answer.is_empty() || s.write_all(b"x").is_err() {
            break;
        }
    }
    let after = started.elapsed();
    let status = server::client::read_response(&mut std::io::BufReader::new(&answer[..]))
        .ok()
        .map(|r| r.status);
    Outcome {
        status,
        after: status.map(|_| after),
    }
}

/// Sends half a request head, then waits for the server to close.
fn half_head(addr: SocketAddr, end: Instant) -> Outcome {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return Outcome::default();
    };
    if s.write_all(b"POST /v1/layout-assignment HTTP/1.1\r\nHost: loadtest\r\nContent-Le")
        .is_err()
    {
        return Outcome::default();
    }
    let started = Instant::now();
    wait_closed(&mut s, end).map_or_else(Outcome::default, |_| Outcome {
        status: None,
        after: Some(started.elapsed()),
    })
}

/// Opens connections that send nothing, then waits for each to be closed.
fn idle_connections(addr: SocketAddr, end: Instant) -> Vec<Outcome> {
    let started = Instant::now();
    let mut open: Vec<Option<TcpStream>> = (0..IDLE)
        .map(|_| {
            TcpStream::connect(addr)
                .ok()
                .filter(|s| s.set_nonblocking(true).is_ok())
        })
        .collect();
    let mut out = vec![Outcome::default(); IDLE];
    while Instant::now() < end && open.iter().any(Option::is_some) {
        for (i, slot) in open.iter_mut().enumerate() {
            let Some(s) = slot else { continue };
            let closed = match s.read(&mut [0u8; 64]) {
                Ok(0) => true,
                Ok(_) => false,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            };
            if closed {
                out[i].after = Some(started.elapsed());
                *slot = None;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    out
}

/// Blocks until the server closes `s` (then the time), or `end`.
fn wait_closed(s: &mut TcpStream, end: Instant) -> Option<Instant> {
    let mut buf = [0u8; 256];
    loop {
        let left = end.checked_duration_since(Instant::now())?;
        if s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .is_err()
        {
            return None;
        }
        match s.read(&mut buf) {
            Ok(0) => return Some(Instant::now()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if Instant::now() >= end {
                    return None;
                }
            }
            Err(_) => return Some(Instant::now()),
        }
    }
}

/// Resolves `--addr` and refuses it unless every address it names is
/// loopback. A name that resolves to one loopback and one other address is
/// refused too, because the client might connect to either.
fn loopback_addr(given: &str) -> anyhow::Result<SocketAddr> {
    let resolved: Vec<SocketAddr> = given
        .to_socket_addrs()
        .with_context(|| format!("--addr {given}: not a HOST:PORT address that resolves"))?
        .collect();
    let Some(&first) = resolved.first() else {
        bail!("--addr {given}: the name resolves to no address");
    };
    let outside: Vec<String> = resolved
        .iter()
        .filter(|a| !is_loopback(a.ip()))
        .map(|a| a.ip().to_string())
        .collect();
    if !outside.is_empty() {
        bail!(
            "--addr {given}: the load test runs on loopback only (127.0.0.0/8 or ::1), but this names {}",
            outside.join(", ")
        );
    }
    Ok(first)
}

/// 127.0.0.0/8 and `::1`, including `::ffff:127.x.y.z`, which is the same
/// IPv4 loopback address written as IPv6. The unspecified address
/// (`0.0.0.0`, `::`) is refused: it means "any interface", not loopback.
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The corpus modules, by directory name, minus the excluded ones.
fn corpus(exclude: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    let dir: PathBuf = crate::root().join("testdata/xla-cpu");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path().join("before_layout.hlo");
        if !path.is_file() || exclude.iter().any(|x| name.contains(x.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        out.push((name, text));
    }
    out.sort();
    Ok(out)
}

pub(crate) type Stop = tokio::sync::oneshot::Sender<()>;

/// Starts the service on a loopback port in a thread of its own, with the
/// service's log (see `server::log`) written to a sink.
pub(crate) fn start_server(
    config: server::Config,
) -> anyhow::Result<(SocketAddr, Stop, std::thread::JoinHandle<()>)> {
    // The log `tessera serve` installs, written to a sink: making its lines
    // is part of serving (the first server of the process installs it).
    let _ = server::log::init(false, "info", std::io::sink);
    let runtime = server::runtime(&config).context("starting tokio")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .context("binding a loopback port")?;
    let addr = listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let state = server::AppState::new(config);
    let thread = std::thread::spawn(move || {
        let served = runtime.block_on(server::serve(listener, state, async move {
            let _ = rx.await;
        }));
        if let Err(e) = served {
            eprintln!("loadtest: the server failed: {e}");
        }
    });
    Ok((addr, tx, thread))
}

/// `VmHWM` (peak resident set) in KiB from a `/proc/*/status` file.
fn vm_hwm(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".to_string(),
        |d| format!("{:.1} ms", d.as_secs_f64() * 1000.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_are_accepted() {
        for (given, want) in [
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("127.12.34.56:1", "127.12.34.56:1"),
            ("[::1]:9000", "[::1]:9000"),
            ("[::ffff:127.0.0.1]:80", "[::ffff:127.0.0.1]:80"),
        ] {
            let got = loopback_addr(given).unwrap_or_else(|e| panic!("{given} is loopback: {e:#}"));
            assert_eq!(got.to_string(), want);
        }
    }

    #[test]
    fn localhost_is_accepted_when_it_resolves_to_loopback() {
        // `localhost` resolves through /etc/hosts, without the network; on a
        // machine where it named anything but loopback, refusing is right.
        let every_address_loopback = ("localhost", 80)
            .to_socket_addrs()
            .map(|mut a| a.all(|a| is_loopback(a.ip())))
            .unwrap_or(false);
        let got = loopback_addr("localhost:8080");
        if every_address_loopback {
            let a = got.expect("localhost is loopback here");
            assert!(a.ip().is_loopback() && a.port() == 8080, "{a}");
        } else {
            assert!(got.is_err(), "{got:?}");
        }
    }

    #[test]
    fn other_addresses_are_refused_with_a_clear_error() {
        for given in [
            "10.0.0.1:8080",
            "192.168.1.20:80",
            "8.8.8.8:53",
            "0.0.0.0:8080",
            "[::]:8080",
            "[2001:db8::1]:80",
            "[::ffff:10.0.0.1]:80",
            "128.0.0.1:80",
        ] {
            let e = loopback_addr(given).expect_err(given);
            let message = format!("{e:#}");
            assert!(
                message.contains("loopback only") && message.contains(given),
                "{given}: {message}"
            );
        }
    }

    #[test]
    fn malformed_addresses_are_refused() {
        // No port, a bad port, nothing at all: refused without a lookup.
        for given in ["127.0.0.1", "127.0.0.1:99999", "", ":80x"] {
            let e = loopback_addr(given).expect_err(given);
            assert!(format!("{e:#}").contains("--addr"), "{given}: {e:#}");
        }
    }

    #[test]
    fn the_command_line_refuses_a_remote_addr_before_any_work() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let cli = Cli::try_parse_from(["loadtest", "--addr", "10.1.2.3:8080", "--requests", "1"])
            .expect("parses");
        let e = run(cli.args).expect_err("a remote address is refused");
        assert!(format!("{e:#}").contains("loopback only"), "{e:#}");
    }
}
