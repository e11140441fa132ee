//! `tessera serve` as a child process, for the tests that run the real
//! binary: started on `127.0.0.1:0`, its address read from stdout, killed
//! when its guard drops.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long any one step may take before the test fails. The large module
/// takes seconds in a debug build on a busy machine, so this is generous.
pub const STEP: Duration = Duration::from_secs(120);

/// A running `tessera serve`, killed on drop unless it already exited.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: mpsc::Receiver<String>,
    // Kept open, so that the server never writes to a closed pipe.
    _stdout: Option<std::thread::JoinHandle<ChildStdout>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        // Only this test's own child, by its handle.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Starts `tessera ARGS serve --addr 127.0.0.1:0` and waits for the line
/// that announces the bound address.
pub fn serve(args: &[&str]) -> Served {
    spawn(args, &[], &[])
}

/// `tessera serve` with its open file limit set to `files` (soft and
/// hard, so that it cannot raise it), through util-linux's `prlimit`.
pub fn serve_with_file_limit(files: u64) -> Served {
    let mut command = Command::new("prlimit");
    command
        .arg(format!("--nofile={files}:{files}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_tessera"));
    start(command, &[], &[], &[])
}

/// Starts `tessera GLOBAL serve --addr 127.0.0.1:0 SERVE_ARGS`.
fn spawn(args: &[&str], serve_args: &[&str], env: &[(&str, &str)]) -> Served {
    start(
        Command::new(env!("CARGO_BIN_EXE_tessera")),
        args,
        serve_args,
        env,
    )
}

/// Starts `COMMAND GLOBAL serve --addr 127.0.0.1:0 SERVE_ARGS`, where the
/// command runs `tessera`.
fn start(mut command: Command, args: &[&str], serve_args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut child = command
        .args(args)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .args(serve_args)
        // The default filter (info for the service) is what is under test.
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tessera starts");
    let stdout = child.stdout.take().expect("a stdout pipe");
    let stderr = child.stderr.take().expect("a stderr pipe");
    let (line_tx, line_rx) = mpsc::channel();
    let stdout_reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = line_tx.send(line);
        r.into_inner()
    });
    let (err_tx, err_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if err_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut served = Served {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        stderr: err_rx,
        _stdout: Some(stdout_reader),
    };
    let line = line_rx
        .recv_timeout(STEP)
        .expect("the server announces its address on stdout");
    let addr = line
        .trim_end()
        .strip_prefix("listening on http://")
        .and_then(|a| a.parse::<SocketAddr>().ok())
        .unwrap_or_else(|| {
            panic!("the first line of stdout is `listening on http://ADDR`: {line:?}")
        });
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    served.addr = addr;
    served
}

/// A corpus module's text.
pub fn corpus(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/xla-cpu")
        .join(name)
        .join("before_layout.hlo");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `tessera serve --config FILE` with `yaml` as the file (named `name`),
/// and `env` added to its environment.
pub fn serve_with_config(name: &str, yaml: &str, env: &[(&str, &str)]) -> Served {
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.serve.yaml"));
    std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let path = path.to_string_lossy().into_owned();
    spawn(&[], &["--config", &path], env)
}

/// A field of `/proc/PID/status` in KiB (`VmRSS`, `VmHWM`).
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    text.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}
