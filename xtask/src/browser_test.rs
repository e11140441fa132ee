//! `cargo xtask browser-test`: a real headless Chromium (Debian's
//! `chromium`, driven through `chromedriver` with WebDriver) opens the
//! explorer served by `tessera serve`, runs a module from `testdata/`,
//! and checks that the page highlights the output's copies, draws the
//! graph with copies red, reports the semantic check, and shows the
//! memory-order picture of a clicked shape. It writes a screenshot to
//! `target/browser-test/explorer.png`.
//!
//! Everything runs on loopback: the service on a free port, chromedriver
//! on another, Chromium with its background networking off.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Arguments of `cargo xtask browser-test`.
#[derive(clap::Args)]
pub struct Args {
    /// The module to run, relative to testdata/ (its cpu output must have
    /// copies).
    #[arg(
        long,
        default_value = "xla-cpu/entry_layout_colmajor/before_layout.hlo"
    )]
    module: PathBuf,
    /// The Chromium binary.
    #[arg(long, default_value = "/usr/bin/chromium")]
    chromium: PathBuf,
    /// The chromedriver binary.
    #[arg(long, default_value = "/usr/bin/chromedriver")]
    chromedriver: PathBuf,
}

/// A child process killed when dropped.
pub(crate) struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::root();
    for bin in [&args.chromium, &args.chromedriver] {
        ensure!(
            bin.exists(),
            "{} is missing: install Debian's chromium and chromium-driver (`.ci/run` does)",
            bin.display()
        );
    }
    let module = std::fs::read_to_string(root.join("testdata").join(&args.module))
        .with_context(|| format!("cannot read testdata/{}", args.module.display()))?;
    let (_service, base) = start_service(&root)?;
    let (_driver, driver_url) = start_chromedriver(&args.chromedriver)?;
    let profile = std::env::temp_dir().join(format!("tessera-browser-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let shot = root.join("target/browser-test/explorer.png");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(drive(
        &args.chromium,
        &profile,
        &driver_url,
        &base,
        &module,
        &shot,
    ));
    let _ = std::fs::remove_dir_all(&profile);
    let checks = result?;
    for c in &checks {
        println!("ok: {c}");
    }
    println!(
        "screenshot: {}",
        shot.strip_prefix(&root).unwrap_or(&shot).display()
    );
    println!("{} passed, 0 failed", checks.len());
    Ok(ExitCode::SUCCESS)
}

/// Builds and starts `tessera serve` on a free loopback port; returns its
/// base URL once it listens.
pub(crate) fn start_service(root: &Path) -> anyhow::Result<(Guard, String)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args(["build", "--quiet", "--package", "cli"])
        .status()?;
    ensure!(status.success(), "cannot build the tessera binary");
    let bin = root.join("target/debug/tessera");
    let mut child = Command::new(&bin)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let guard = Guard(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .context("tessera serve did not announce its address")?;
    Ok((guard, base.to_string()))
}

/// Starts chromedriver on a free loopback port and waits until it is ready.
fn start_chromedriver(bin: &Path) -> anyhow::Result<(Guard, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(bin)
        .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let guard = Guard(child);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let start = Instant::now();
    loop {
        let mut client = server::client::Client::new(addr, Duration::from_secs(2));
        if client
            .request("GET", "/status", &[], &[])
            .is_ok_and(|r| r.status == 200)
        {
            break;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(30),
            "chromedriver did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((guard, format!("http://127.0.0.1:{port}")))
}

/// Drives the page; returns what it checked.
async fn drive(
    chromium: &Path,
    profile: &Path,
    driver: &str,
    base: &str,
    module: &str,
    shot: &Path,
) -> anyhow::Result<Vec<String>> {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium.display().to_string(),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1600,1400", format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .context("cannot open a Chromium session through chromedriver")?;
    let result = checks(&client, base, module, shot).await;
    let _ = client.close().await;
    result
}

/// Waits until `script` (a JavaScript expression) is truthy.
async fn wait_until(client: &Client, script: &str, what: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if client
            .execute(&format!("return Boolean({script});"), vec![])
            .await?
            == Value::Bool(true)
        {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(60) {
            let status = client
                .execute(
                    "return document.getElementById('status').textContent;",
                    vec![],
                )
                .await?;
            bail!("timed out waiting for {what}; the page says {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn eval(client: &Client, script: &str) -> anyhow::Result<Value> {
    Ok(client.execute(script, vec![]).await?)
}

/// Loads the explorer, pastes `module`, picks cpu with the semantic
/// check, and runs it; fails unless the run succeeds.
async fn load_and_run(client: &Client, base: &str, module: &str) -> anyhow::Result<()> {
    client.goto(&format!("{base}/")).await?;
    wait_until(
        client,
        "document.body.dataset.state === 'ready'",
        "the page to load",
    )
    .await?;
    wait_until(
        client,
        "document.querySelectorAll('#target option').length >= 3",
        "the targets",
    )
    .await?;

    // Paste the module, pick cpu, ask for the semantic check, and run.
    client
        .execute(
            "document.getElementById('module').value = arguments[0];",
            vec![json!(module)],
        )
        .await?;
    client
        .execute("document.getElementById('target').value = 'cpu';", vec![])
        .await?;
    let semantic = client.find(Locator::Css("#semantic")).await?;
    if semantic.prop("checked").await?.as_deref() != Some("true") {
        semantic.click().await?;
    }
    client.find(Locator::Css("#run")).await?.click().await?;
    wait_until(
        client,
        "document.body.dataset.state === 'done' || document.body.dataset.state === 'error'",
        "the run",
    )
    .await?;
    let state = eval(client, "return document.body.dataset.state;").await?;
    let status = eval(
        client,
        "return document.getElementById('status').textContent;",
    )
    .await?;
    ensure!(state == "done", "the run failed: {status}");
    Ok(())
}

/// Clicks the smallest shape a copy produces (every element is drawn up
/// to 4096 of them) and checks its memory-order picture; what it saw.
async fn check_picture(client: &Client) -> anyhow::Result<String> {
    let mut smallest = None;
    for el in client
        .find_all(Locator::Css("#output .line.op-copy .shape"))
        .await?
    {
        let text = el.text().await?;
        let dims = text
            .split('[')
            .nth(1)
            .and_then(|d| d.split(']').next())
            .unwrap_or("");
        let n: u64 = dims
            .split(',')
            .filter(|d| !d.is_empty())
            .map(|d| d.parse::<u64>().unwrap_or(u64::MAX))
            .product();
        if smallest.as_ref().is_none_or(|(m, _, _)| n < *m) {
            smallest = Some((n, text, el));
        }
    }
    let (_, shape, shape_el) = smallest.context("no shape on a copy line")?;
    shape_el.click().await?;
    wait_until(
        client,
        "document.querySelector('#picture svg') && document.body.dataset.picture",
        "the layout picture",
    )
    .await?;
    let picture = eval(
        client,
        "const svg = document.querySelector('#picture svg');
         return { shape: document.body.dataset.picture,
                  slots: svg.querySelectorAll('title').length,
                  first: svg.querySelector('title') ? svg.querySelector('title').textContent : '',
                  memory: svg.textContent.includes('memory order'),
                  explain: document.getElementById('explain').textContent };",
    )
    .await?;
    ensure!(
        picture["shape"] == shape.as_str(),
        "the picture is of {} instead of {shape}",
        picture["shape"]
    );
    ensure!(
        picture["slots"].as_u64().unwrap_or(0) > 0 && picture["memory"] == true,
        "the picture has no elements: {picture}"
    );
    ensure!(
        picture["first"]
            .as_str()
            .is_some_and(|t| t.contains("-> slot")),
        "no linear index in the picture: {picture}"
    );
    Ok(format!(
        "clicking {shape} draws its memory order ({} elements with their linear slots; {})",
        picture["slots"],
        picture["explain"].as_str().unwrap_or("")
    ))
}

async fn checks(
    client: &Client,
    base: &str,
    module: &str,
    shot: &Path,
) -> anyhow::Result<Vec<String>> {
    let mut done = Vec::new();
    load_and_run(client, base, module).await?;
    done.push("the page loads its script and the targets from the service".to_string());

    // Copies are highlighted: every copy instruction of the output, and
    // only those, is on a red line.
    let copies = eval(
        client,
        "const lines = [...document.querySelectorAll('#output .line')];
         const red = lines.filter(l => l.classList.contains('op-copy'));
         return { red: red.length,
                  copies: lines.filter(l => / copy\\(/.test(l.textContent)).length,
                  allCopies: red.every(l => / copy\\(/.test(l.textContent)),
                  color: red.length ? getComputedStyle(red[0]).backgroundColor : '' };",
    )
    .await?;
    let red = copies["red"].as_u64().unwrap_or(0);
    ensure!(red > 0, "no highlighted copy in the output: {copies}");
    ensure!(
        copies["copies"] == copies["red"] && copies["allCopies"] == true,
        "the highlighted lines are not the copies: {copies}"
    );
    ensure!(
        copies["color"] == "rgb(248, 196, 196)",
        "copies are not drawn red: {copies}"
    );
    done.push(format!(
        "{red} copies highlighted in red in the output text"
    ));

    let rows = eval(
        client,
        "return document.querySelectorAll('#report tbody tr.copy').length;",
    )
    .await?;
    ensure!(
        rows.as_u64() == Some(red),
        "the report lists {rows} copies, the output has {red}"
    );
    done.push(format!(
        "the report lists the {red} copies with their reasons"
    ));

    let semantic = eval(
        client,
        "return document.getElementById('semantic-result').textContent;",
    )
    .await?;
    ensure!(
        semantic
            .as_str()
            .is_some_and(|s| s.starts_with("Semantic check: equivalent")),
        "semantic check: {semantic}"
    );
    done.push("the semantic check says equivalent".to_string());

    wait_until(client, "document.querySelector('#graph svg')", "the graph").await?;
    let graph = eval(
        client,
        "return document.querySelector('#graph svg').outerHTML;",
    )
    .await?;
    ensure!(
        graph.as_str().is_some_and(|g| g.contains("#c62828")),
        "the graph draws no copy red"
    );
    done.push("the entry computation's graph draws its copies red".to_string());

    done.push(check_picture(client).await?);

    let png = client.screenshot().await?;
    if let Some(dir) = shot.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(shot, &png)?;
    ensure!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
    Ok(done)
}
