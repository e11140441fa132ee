//! `cargo xtask loadtest`: N concurrent clients post the corpus modules
//! (`testdata/xla-cpu/*/before_layout.hlo`, round robin) to
//! `POST /v1/layout-assignment` for a fixed total number of requests, and
//! report throughput, latency percentiles, errors and peak memory.
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
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Arguments of `cargo xtask loadtest`.
#[derive(clap::Args)]
pub struct Args {
    /// Concurrent clients, each on its own kept-alive connection.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Requests in all.
    #[arg(long, default_value_t = 200)]
    requests: usize,
    /// A running server to load instead of an in-process one, as
    /// `HOST:PORT`. Loopback only: 127.0.0.0/8, `[::1]` or `localhost`.
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
    /// Leave out modules whose directory name contains this (repeatable).
    #[arg(long)]
    exclude: Vec<String>,
}

/// One answered request.
struct Sample {
    module: usize,
    latency: Duration,
    ok: bool,
}

/// Runs the load test.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.clients == 0 || args.requests == 0 {
        bail!("--clients and --requests must be at least 1");
    }
    // Checked first, so that a wrong address costs nothing.
    let given = args.addr.as_deref().map(loopback_addr).transpose()?;
    let modules = corpus(&args.exclude)?;
    if modules.is_empty() {
        bail!("no module under testdata/xla-cpu matches");
    }
    let modules = Arc::new(modules);

    // The server: in process on a loopback port, or the one given.
    let mut in_process = None;
    let addr = match given {
        Some(a) => a,
        None => {
            let config = server::Config {
                // Every client may run at once: the test measures latency
                // under load, not shedding.
                max_concurrency: args.clients.max(1),
                max_in_flight: args.clients.max(64),
                ..server::Config::default()
            };
            let (addr, stop, thread) = start_server(config)?;
            in_process = Some((stop, thread));
            addr
        }
    };
    let path = format!("/v1/layout-assignment?target={}", args.target);

    eprintln!(
        "loadtest: {} clients, {} requests, {} modules ({:.1} MiB), server {}{}",
        args.clients,
        args.requests,
        modules.len(),
        modules.iter().map(|(_, t)| t.len()).sum::<usize>() as f64 / (1 << 20) as f64,
        addr,
        if in_process.is_some() { " (in process)" } else { "" },
    );
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(args.time_limit);
    let started = Instant::now();
    let threads: Vec<_> = (0..args.clients)
        .map(|_| {
            let (next, modules, path) = (next.clone(), modules.clone(), path.clone());
            let total = args.requests;
            std::thread::spawn(move || {
                let mut client = server::client::Client::new(addr, Duration::from_secs(120));
                let mut samples = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total || Instant::now() >= deadline {
                        break;
                    }
                    let m = i % modules.len();
                    let t = Instant::now();
                    let r = client.request("POST", &path, &[("content-type", "text/plain")], modules[m].1.as_bytes());
                    let latency = t.elapsed();
                    let ok = match &r {
                        Ok(resp) => resp.status == 200 && resp.body.starts_with(b"{\"module\":"),
                        Err(_) => false,
                    };
                    if !ok {
                        let why = match r {
                            Ok(resp) => format!("{} {}", resp.status, resp.text().chars().take(300).collect::<String>()),
                            Err(e) => e.to_string(),
                        };
                        eprintln!("loadtest: {} failed: {why}", modules[m].0);
                    }
                    samples.push(Sample { module: m, latency, ok });
                }
                samples
            })
        })
        .collect();
    let mut samples = Vec::new();
    for t in threads {
        samples.extend(t.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))?);
    }
    let wall = started.elapsed();

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
    let errors = samples.iter().filter(|s| !s.ok).count() + args.requests.saturating_sub(done);
    let mut all: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    all.sort();
    let bytes: usize = samples.iter().map(|s| modules[s.module].1.len()).sum();
    println!("profile:      {}", if cfg!(debug_assertions) { "debug" } else { "release" });
    println!("requests:     {done} of {} in {:.2} s ({} clients)", args.requests, wall.as_secs_f64(), args.clients);
    println!("throughput:   {:.1} requests/s, {:.2} MiB/s of HLO in", done as f64 / wall.as_secs_f64(), bytes as f64 / (1 << 20) as f64 / wall.as_secs_f64());
    println!("latency:      p50 {}  p99 {}  max {}", ms(percentile(&all, 50.0)), ms(percentile(&all, 99.0)), ms(all.last().copied()));
    println!("errors:       {errors}");
    match server_hwm {
        Some(kib) => println!(
            "peak RSS:     {:.1} MiB (VmHWM of the {})",
            kib as f64 / 1024.0,
            if given.is_none() { "loadtest process, server included" } else { "server process" }
        ),
        None => println!("peak RSS:     not measured (give --server-pid for a server at --addr)"),
    }
    println!("per module:   requests, p50, max");
    let mut by_module: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    for s in &samples {
        by_module.entry(modules[s.module].0.as_str()).or_default().push(s.latency);
    }
    for (name, mut l) in by_module {
        l.sort();
        println!("  {name:<28} {:>5} {:>10} {:>10}", l.len(), ms(percentile(&l, 50.0)), ms(l.last().copied()));
    }
    Ok(if errors == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
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
    let outside: Vec<String> = resolved.iter().filter(|a| !is_loopback(a.ip())).map(|a| a.ip().to_string()).collect();
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
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path().join("before_layout.hlo");
        if !path.is_file() || exclude.iter().any(|x| name.contains(x.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        out.push((name, text));
    }
    out.sort();
    Ok(out)
}

type Stop = tokio::sync::oneshot::Sender<()>;

/// Starts the service on a loopback port in a thread of its own.
fn start_server(config: server::Config) -> anyhow::Result<(SocketAddr, Stop, std::thread::JoinHandle<()>)> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).context("binding a loopback port")?;
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
    d.map_or_else(|| "-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1000.0))
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
        let every_address_loopback =
            ("localhost", 80).to_socket_addrs().map(|mut a| a.all(|a| is_loopback(a.ip()))).unwrap_or(false);
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
        for given in ["10.0.0.1:8080", "192.168.1.20:80", "8.8.8.8:53", "0.0.0.0:8080", "[::]:8080", "[2001:db8::1]:80", "[::ffff:10.0.0.1]:80", "128.0.0.1:80"] {
            let e = loopback_addr(given).expect_err(given);
            let message = format!("{e:#}");
            assert!(message.contains("loopback only") && message.contains(given), "{given}: {message}");
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
        let cli = Cli::try_parse_from(["loadtest", "--addr", "10.1.2.3:8080", "--requests", "1"]).expect("parses");
        let e = run(cli.args).expect_err("a remote address is refused");
        assert!(format!("{e:#}").contains("loopback only"), "{e:#}");
    }
}
