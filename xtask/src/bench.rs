//! `cargo xtask bench`: runs the benchmarks (divan) and records their
//! tables in `docs/performance.md`.

use std::process::{Command, ExitCode};

/// Arguments of `cargo xtask bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Print the results without writing docs/performance.md.
    #[arg(long)]
    no_write: bool,
    /// Run only the benchmark recorded in this section (`bench-shapes`,
    /// ...); the other sections are left as they are.
    #[arg(long, value_name = "SECTION")]
    only: Option<String>,
}

/// (section in docs/performance.md, package, bench target, what it shows)
const BENCHES: &[(&str, &str, &str, &str)] = &[
    (
        "bench-parse",
        "hlo",
        "parse_print",
        "Parse, print, outline and verify throughput on the largest corpus file",
    ),
    (
        "bench-algebra",
        "shape",
        "algebra",
        "The bitcast test and the expansion as arrays grow from 1e3 to 1e12 elements",
    ),
    (
        "bench-scaling",
        "layout-assignment",
        "scaling",
        "Layout assignment on generated modules of 1e3 to 1e6 instructions",
    ),
    (
        "bench-pipeline",
        "driver",
        "pipeline",
        "The pass alone and the whole run-pass on bundled corpus modules (CPU target)",
    ),
    (
        "bench-session",
        "driver",
        "session",
        "The pipeline in a session on large_transformer_24_f32: stateless, first run, no change, one body edit (CPU target, verified)",
    ),
    (
        "bench-shapes",
        "driver",
        "scaling",
        "The whole run-pass (CPU, no verify) on generated modules of six shapes at 1e4, 1e5 and 1e6 instructions",
    ),
];

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = crate::root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut failed = false;
    if let Some(only) = &args.only
        && !BENCHES.iter().any(|&(section, ..)| section == only)
    {
        let known: Vec<&str> = BENCHES.iter().map(|&(section, ..)| section).collect();
        anyhow::bail!(
            "no benchmark section {only}; the sections are {}",
            known.join(", ")
        );
    }
    for &(section, package, bench, what) in BENCHES {
        if args.only.as_ref().is_some_and(|only| only != section) {
            continue;
        }
        eprintln!("== cargo bench -p {package} --bench {bench}");
        let out = Command::new(&cargo)
            .current_dir(&root)
            .args(["bench", "-q", "-p", package, "--bench", bench])
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        print!("{stdout}");
        if !out.status.success() {
            eprintln!("{stderr}");
            failed = true;
            continue;
        }
        let machine = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
            })
            .unwrap_or_default();
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let notes: String = stderr
            .lines()
            .filter(|l| l.starts_with("input:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let body = format!(
            "{what}. `cargo bench -p {package} --bench {bench}` on {machine} ({cores} cores).\n{}\n```text\n{}```\n",
            if notes.is_empty() {
                String::new()
            } else {
                format!("\n{notes}")
            },
            stdout
        );
        if !args.no_write {
            crate::replace_section(&root.join("docs/performance.md"), section, &body)?;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
