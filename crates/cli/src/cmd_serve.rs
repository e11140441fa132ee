//! `tessera serve`: the HTTP service (see `docs/http-api.md`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::common::fail;

/// Arguments of `tessera serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// A YAML file of limits and timeouts (see docs/http-api.md).
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Runs the service until ctrl-c or SIGTERM, then drains requests in
/// flight and exits.
pub fn run(args: Args) -> ExitCode {
    let config = match &args.config {
        Some(path) => match server::Config::from_file(path) {
            Ok(c) => c,
            Err(e) => {
                // The message is already `file:line:col: error: ...`.
                eprintln!("{e}");
                return ExitCode::from(1);
            }
        },
        None => server::Config::default(),
    };
    // Every connection is a file: raise the soft limit where the system
    // allows, so that max_connections is not lowered to a small default.
    match server::raise_file_limit() {
        Ok(limit) => tracing::debug!(limit, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open file limit"),
    }
    let runtime = match server::runtime(&config) {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", args.addr))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // The signal handlers go in before the address is announced, so a
        // client that saw the address can always stop the service gracefully.
        let shutdown = server::shutdown_signal();
        tracing::info!(%addr, ?config, "listening");
        let state = server::AppState::new(config);
        // The bound address on stdout, for scripts that asked for port 0.
        // It is printed once the service is ready (built-in targets loaded,
        // signals handled). A closed stdout is no reason to stop serving, so
        // a failed write is ignored.
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on http://{addr}");
            let _ = out.flush();
        }
        server::serve(listener, state, shutdown)
            .await
            .map_err(|e| format!("the server failed: {e}"))
    });
    // Abandoned pipeline runs (of requests that timed out) are not waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
