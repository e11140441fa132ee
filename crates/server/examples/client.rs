//! Calling `tessera serve` from Rust: send a module, read the module and
//! the report (the Rust example of `docs/clients.md`).
//!
//! ```text
//! tessera serve --addr 127.0.0.1:8080 &
//! cargo run -p server --example client -- 127.0.0.1:8080 testdata/xla-cpu/entry_layout_colmajor/before_layout.hlo tpu
//! ```

use std::net::SocketAddr;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:8080".into())
        .parse()?;
    let path = args
        .next()
        .ok_or("usage: client ADDR MODULE.hlo [TARGET]")?;
    let target = args.next().unwrap_or_else(|| "cpu".into());
    let text = std::fs::read_to_string(&path)?;

    // JSON in, JSON out; `verify: "semantic"` adds the equivalence check.
    let body = serde_json::json!({ "module": text, "target": target, "options": { "verify": "semantic" } });
    let mut client = server::client::Client::new(addr, Duration::from_secs(120));
    let answer = client.request(
        "POST",
        "/v1/layout-assignment",
        &[
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ],
        body.to_string().as_bytes(),
    )?;
    let v: serde_json::Value = serde_json::from_slice(&answer.body)?;
    if answer.status != 200 {
        // Every error answer is {"error": {"kind", "message", ...}}.
        return Err(format!(
            "{} {}: {}",
            answer.status, v["error"]["kind"], v["error"]["message"]
        )
        .into());
    }
    let module = v["module"].as_str().unwrap_or_default();
    let stats = &v["report"]["stats"];
    println!("{}", module.lines().next().unwrap_or_default());
    println!(
        "{} copies, {} bitcasts, {} bytes moved",
        stats["copies"], stats["bitcasts"], stats["bytes_moved"]
    );
    for copy in v["report"]["layout_assignment"]["copies"]
        .as_array()
        .into_iter()
        .flatten()
    {
        println!(
            "  copy %{} {} -> {}: {}",
            copy["name"].as_str().unwrap_or(""),
            copy["from"],
            copy["to"],
            copy["why"]
        );
    }
    println!("semantic check: {}", v["semantic_check"]["result"]);
    Ok(())
}
