//! `cargo xtask session-bench [--runs N]`: a session against stateless
//! runs, through HTTP. A release `tessera serve` in process on a loopback
//! port; a client on the same machine times each request from its first
//! byte sent to its last byte read.
//!
//! For `large_transformer_24_f32` (bundled) and a generated module of
//! about 100,000 instructions in 16,667 small computations (the scaling
//! benchmark's `many_computations` shape), it measures the median of N
//! runs of:
//! - a stateless `POST /v1/layout-assignment`;
//! - a session's first run (`PUT`, then the timed `POST
//!   /v1/modules/{id}/layout-assignment`, on a new session each time),
//!   alone and with its `PUT` (which parses and checks the module), each
//!   right after a stateless run, so that the machine's drift weighs on
//!   both alike;
//! - a re-run with no change;
//! - a re-run after a `PATCH` of one computation's body (same signature),
//!   timed alone and with its `PATCH`;
//! - the two re-runs again with `response=changes` against the run the
//!   client holds (the answer lists only the computations whose text
//!   changed; its `PATCH` untimed).
//!
//! Every session answer must be byte-identical to the stateless answer of
//! the same text; the command fails otherwise.
//!
//! Then the floor of a text answer: the answer's bytes alone, moved over
//! a loopback TCP connection with nothing else on it, against the re-run
//! with no change and against a hundredth of the stateless run (the
//! one-pipeline issue's goal for that re-run).
//!
//! Then, in process and without HTTP, a stateless run against a first run
//! on a fresh database (what a session's `PUT` and first run do together:
//! load, check, run) and against a run on a database made for that run
//! alone (`driver::run_fresh`, which a stateless run would be on one
//! pipeline), rotating the three run by run, so that the machine's drift,
//! as large as the effect on a shared machine, weighs on all alike.
//! Dropping the session's database is timed apart (a session keeps it), as
//! is freeing the one-run database, which happens off the answer's path.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use server::client::{Client, ClientResponse};

/// Arguments of `cargo xtask session-bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Timed runs of each request (the median is reported).
    #[arg(long, default_value_t = 11)]
    runs: usize,
}

/// A module to measure, and one body edit of it: the computation's name
/// and its two texts, which the edits alternate between.
pub(crate) struct Subject {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) edited: String,
    before: String,
    after: String,
}

pub(crate) fn transformer() -> anyhow::Result<Subject> {
    let name = "large_transformer_24_f32";
    let path = crate::root()
        .join("testdata/xla-cpu")
        .join(name)
        .join("before_layout.hlo");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let outline = hlo::outline(&text, name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let region = outline
        .computations
        .iter()
        .find(|c| {
            let t = c.span.text(&text);
            c.name.starts_with("region_") && t.contains("ROOT") && t.contains(" add(")
        })
        .context("a reduction region")?;
    let before = region.span.text(&text).to_string();
    let after = before.replacen(" add(", " maximum(", 1);
    subject(name, text, &region.name, before, after)
}

pub(crate) fn generated() -> anyhow::Result<Subject> {
    let text = test_support::scaling::Shape::ManyComputations.module(100_000);
    let outline = hlo::outline(&text, "generated").map_err(|e| anyhow::anyhow!("{e}"))?;
    let middle = &outline.computations[outline.computations.len() / 2];
    let before = middle.span.text(&text).to_string();
    let after = before.replacen(" exponential(", " tanh(", 1);
    subject(
        "many_computations_1e5",
        text.clone(),
        &middle.name.clone(),
        before,
        after,
    )
}

fn subject(
    name: &str,
    text: String,
    computation: &str,
    before: String,
    after: String,
) -> anyhow::Result<Subject> {
    if before == after {
        bail!("{name}: the edit of {computation} changes nothing");
    }
    let edited = text.replacen(&before, &after, 1);
    Ok(Subject {
        name: format!("{name} ({computation} edited)"),
        text,
        edited,
        before,
        after,
    })
}

/// Sends a request and times it; fails on any status but 200 and 201.
fn timed(
    client: &mut Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> anyhow::Result<(Duration, ClientResponse)> {
    let accept = if path.contains("response=changes") {
        "application/json"
    } else {
        "text/plain"
    };
    let headers = [("content-type", content_type), ("accept", accept)];
    let started = Instant::now();
    let r = client.request(method, path, &headers, body)?;
    let took = started.elapsed();
    if r.status != 200 && r.status != 201 {
        bail!("{method} {path}: {} {}", r.status, r.text());
    }
    Ok((took, r))
}

/// Replaces the body of computation `name` in the bench session with
/// `body`; the time it took.
fn patch(client: &mut Client, name: &str, body: &str) -> anyhow::Result<Duration> {
    let patch = serde_json::json!({ "computations": { name: body } }).to_string();
    let (took, _) = timed(
        client,
        "PATCH",
        "/v1/modules/bench",
        "application/json",
        patch.as_bytes(),
    )?;
    Ok(took)
}

/// Runs the pass on `module` without a session: the time and the answer.
fn stateless_run(client: &mut Client, module: &str) -> anyhow::Result<(Duration, String)> {
    let (took, r) = timed(
        client,
        "POST",
        "/v1/layout-assignment",
        "text/plain",
        module.as_bytes(),
    )?;
    Ok((took, r.text()))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// How many times `b` fits in `a`.
fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// What one subject's HTTP rows leave for the floor table (see
/// [`raw_transfer`]).
struct Measured {
    /// Every session answer matched the stateless one.
    identical: bool,
    /// The bytes of the text answer.
    answer_bytes: usize,
    /// The median stateless run.
    stateless: Duration,
    /// The median re-run with no change, answered with the text.
    unchanged_text: Duration,
}

/// Measures one subject; prints its rows.
fn measure(client: &mut Client, s: &Subject, runs: usize) -> anyhow::Result<Measured> {
    let run = "/v1/modules/bench/layout-assignment";
    let (_, want) = stateless_run(client, &s.text)?;
    let (_, want_edited) = stateless_run(client, &s.edited)?;
    let mut identical = true;
    // A stateless run and a session's first run, round by round, so that
    // the machine's drift weighs on both alike.
    let (mut stateless, mut first, mut first_total) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (t, text) = stateless_run(client, &s.text)?;
        stateless.push(t);
        identical &= text == want;
        let _ = client.request("DELETE", "/v1/modules/bench", &[], b"")?;
        let (put, _) = timed(
            client,
            "PUT",
            "/v1/modules/bench",
            "text/plain",
            s.text.as_bytes(),
        )?;
        let (t, r) = timed(client, "POST", run, "application/json", b"")?;
        first.push(t);
        first_total.push(put + t);
        identical &= r.text() == want;
    }
    let mut unchanged = Vec::new();
    for _ in 0..runs {
        let (t, r) = timed(client, "POST", run, "application/json", b"")?;
        unchanged.push(t);
        identical &= r.text() == want;
    }
    let (mut edit_run, mut edit_total) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (body, expected) = if i % 2 == 0 {
            (&s.after, &want_edited)
        } else {
            (&s.before, &want)
        };
        let name = computation_name(body);
        let p = patch(client, &name, body)?;
        let (t, r) = timed(client, "POST", run, "application/json", b"")?;
        edit_run.push(t);
        edit_total.push(p + t);
        identical &= r.text() == *expected;
    }
    let (changes_unchanged, changes_edit) = measure_changes(client, s, runs, &want, &want_edited)?;
    let (st, fr, ft, nc, er, et) = (
        median(stateless),
        median(first),
        median(first_total),
        median(unchanged),
        median(edit_run),
        median(edit_total),
    );
    println!(
        "| {} | {:.1} MB | {} | {} ({:.2}x) | {} ({:.2}x) | {} ({:.0}x faster) | {} ({:.0}x faster) | {} ({:.0}x faster) | {} |",
        s.name,
        s.text.len() as f64 / 1e6,
        ms(st),
        ms(fr),
        ratio(fr, st),
        ms(ft),
        ratio(ft, st),
        ms(nc),
        ratio(st, nc),
        ms(er),
        ratio(st, er),
        ms(et),
        ratio(st, et),
        if identical { "yes" } else { "NO" }
    );
    println!(
        "| {} with `response=changes` | | | | | {} ({:.0}x faster) | {} ({:.0}x faster) | | yes |",
        s.name,
        ms(changes_unchanged),
        ratio(st, changes_unchanged),
        ms(changes_edit),
        ratio(st, changes_edit),
    );
    Ok(Measured {
        identical,
        answer_bytes: want.len(),
        stateless: st,
        unchanged_text: nc,
    })
}

/// The median time to move `bytes` bytes over a loopback TCP connection
/// with nothing else on it: the client asks with one byte and reads the
/// answer into one buffer it keeps (the least a client can do: a new
/// zeroed buffer for each answer, as `server::client` made until 536c4d9,
/// took 0.73 ms for the transformer's 1.2 MB in one round where a kept one
/// took 0.32 ms). A text answer of that many bytes can be no faster on the
/// machine.
fn raw_transfer(bytes: usize, runs: usize) -> anyhow::Result<Duration> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let payload = vec![b'x'; bytes];
    let sender = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut ask = [0u8; 1];
        while s.read(&mut ask)? == 1 {
            s.write_all(&payload)?;
        }
        Ok(())
    });
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let mut times = Vec::with_capacity(runs + 1);
    let mut body = vec![0; bytes];
    for _ in 0..=runs {
        let t = Instant::now();
        c.write_all(b"?")?;
        c.read_exact(&mut body)?;
        times.push(t.elapsed());
    }
    drop(c);
    sender
        .join()
        .map_err(|_| anyhow::anyhow!("the loopback sender panicked"))??;
    // The first transfer opens the connection's windows.
    times.remove(0);
    Ok(median(times))
}

/// The re-runs again, answered with `response=changes` against the run the
/// client holds: medians of a re-run with no change and of one after a
/// body edit (its `PATCH` untimed). Every answer, applied to the output
/// held, must give the stateless text.
fn measure_changes(
    client: &mut Client,
    s: &Subject,
    runs: usize,
    want: &str,
    want_edited: &str,
) -> anyhow::Result<(Duration, Duration)> {
    let mut held = server::client::HeldOutput::default();
    let run_changes = |client: &mut Client, held: &mut server::client::HeldOutput| {
        let mut path = String::from("/v1/modules/bench/layout-assignment?response=changes");
        if let Some(run) = &held.run {
            path.push_str("&since=");
            path.push_str(run);
        }
        let (t, r) = timed(client, "POST", &path, "application/json", b"")?;
        let answer: serde_json::Value = serde_json::from_slice(&r.body)?;
        held.apply(&answer).map_err(|e| anyhow::anyhow!(e))?;
        anyhow::Ok(t)
    };
    // The session holds `before` after the edit loop's last run or not:
    // put it back, and take a first complete answer.
    let name = computation_name(&s.before);
    patch(client, &name, &s.before)?;
    run_changes(client, &mut held)?;
    let mut identical = held.text() == want;
    let mut unchanged = Vec::new();
    for _ in 0..runs {
        unchanged.push(run_changes(client, &mut held)?);
        identical &= held.text() == want;
    }
    let mut edited = Vec::new();
    for i in 0..runs {
        let (body, expected) = if i % 2 == 0 {
            (&s.after, want_edited)
        } else {
            (&s.before, want)
        };
        patch(client, &name, body)?;
        edited.push(run_changes(client, &mut held)?);
        identical &= held.text() == expected;
    }
    if !identical {
        bail!(
            "{}: a changes answer, applied to the output held, does not give the stateless text",
            s.name
        );
    }
    Ok((median(unchanged), median(edited)))
}

/// A stateless run against a first run on a fresh database (a session's,
/// which it keeps) and a run on a database made for that one run and then
/// discarded (`driver::run_fresh`), in process, rotating which goes first;
/// prints a row. True if the outputs match.
fn in_process(s: &Subject, runs: usize) -> anyhow::Result<bool> {
    let target = target::load_builtin("cpu").map_err(|e| anyhow::anyhow!("{e}"))?;
    let opts = driver::Options::new(Arc::new(target));
    let file = "bench.hlo";
    let mut times: [Vec<Duration>; 3] = Default::default();
    let (mut dropped, mut freed) = (Vec::new(), Vec::new());
    let mut identical = true;
    for i in 0..runs {
        let mut texts: [Arc<String>; 3] = Default::default();
        for k in 0..3 {
            let which = (i + k) % 3;
            let t = Instant::now();
            let out = match which {
                0 => driver::run(&s.text, file, &opts),
                1 => {
                    let mut db = db::Database::default();
                    let out = driver::run_in(&mut db, &s.text, file, &opts);
                    times[1].push(t.elapsed());
                    let t = Instant::now();
                    drop(db);
                    dropped.push(t.elapsed());
                    out
                }
                _ => driver::run_fresh(&s.text, file, &opts),
            }
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            if which != 1 {
                times[which].push(t.elapsed());
            }
            texts[which] = Arc::clone(out.shared_text());
            drop(out);
            if which == 2 {
                // Freed off the answer's path; not in the next run's time.
                let t = Instant::now();
                db::Database::settle_discarded();
                freed.push(t.elapsed());
            }
        }
        identical &= texts[0] == texts[1] && texts[0] == texts[2];
    }
    let fastest = |v: &[Duration]| v.iter().min().copied().unwrap_or_default();
    let [st, session, one_run] = times;
    let (fastest_st, fastest_one) = (fastest(&st), fastest(&one_run));
    let st = median(st);
    let (session, one_run) = (median(session), median(one_run));
    println!(
        "| {} | {} | {} | {:.2}x | {} | {:.2}x | {:.2}x | {} | {} | {} |",
        s.name,
        ms(st),
        ms(session),
        ratio(session, st),
        ms(one_run),
        ratio(one_run, st),
        ratio(fastest_one, fastest_st),
        ms(median(dropped)),
        ms(median(freed)),
        if identical { "yes" } else { "NO" }
    );
    Ok(identical)
}

/// The name a computation's text declares (without `%`).
fn computation_name(text: &str) -> String {
    let head = text
        .trim_start()
        .trim_start_matches("ENTRY ")
        .trim_start_matches('%');
    head.split([' ', '(', '{'])
        .next()
        .unwrap_or_default()
        .to_string()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if cfg!(debug_assertions) {
        return crate::rerun_release(
            "session-bench",
            &std::env::args().skip(2).collect::<Vec<_>>(),
        );
    }
    let runs = args.runs.max(1);
    let config = server::Config {
        max_body_bytes: 256 << 20,
        ..server::Config::default()
    };
    let (addr, stop, thread) = crate::loadtest::start_server(config)?;
    let mut client = Client::new(addr, Duration::from_secs(600));
    println!(
        "Through HTTP (loopback, server in process, CPU target, verified), median of {runs} runs each:\n"
    );
    println!(
        "| module | text | stateless | session first run | PUT + first run | re-run, no change | re-run after a body edit | PATCH + re-run | outputs identical |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|:---:|");
    let mut ok = true;
    let mut floors = Vec::new();
    for subject in [transformer()?, generated()?] {
        let m = measure(&mut client, &subject, runs)?;
        ok &= m.identical;
        floors.push((subject.name, m));
    }
    let _ = stop.send(());
    let _ = thread.join();
    println!(
        "\nThe floor of a text answer: its bytes alone over a loopback TCP connection, median of {} transfers:\n",
        20 * runs
    );
    println!(
        "| module | text answer | raw loopback transfer | re-run with no change, text | 100x faster than stateless would be |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (name, m) in floors {
        let raw = raw_transfer(m.answer_bytes, 20 * runs)?;
        println!(
            "| {name} | {:.2} MB | {} | {} | {} |",
            m.answer_bytes as f64 / 1e6,
            ms(raw),
            ms(m.unchanged_text),
            ms(m.stateless / 100),
        );
    }
    println!(
        "\nIn process, rotating, {} runs of each (freeing the databases timed apart):\n",
        3 * runs
    );
    println!(
        "| module | stateless | session's fresh database | median ratio | one-run database | median ratio | fastest ratio | dropping the session's database | freeing the one-run database (off the answer's path) | outputs identical |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|");
    for subject in [transformer()?, generated()?] {
        ok &= in_process(&subject, 3 * runs)?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
