//! `cargo xtask fuzz --cases N [--seed S] [--first F] [--threads T]`: the
//! pipeline fuzzer (crate `fuzz`) at length, in a release build, on every
//! core. Prints what the cases gave and every failure with the seed and
//! case index that reproduce it (`cargo run -p fuzz --example case -- SEED
//! INDEX`); exits 1 if any case failed.

use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// How many cases (each runs on cpu, gpu and tpu).
    #[arg(long, default_value_t = 10_000)]
    cases: u64,
    /// The run's seed: case `i` of seed `s` is always the same module.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The first case index (to run a long run in chunks).
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if cfg!(debug_assertions) {
        return crate::rerun_release("fuzz", &std::env::args().skip(2).collect::<Vec<_>>());
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    // A panic is a finding, reported in the summary; the default hook
    // would print each one with a backtrace besides.
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let sum = fuzz::run(args.seed, args.first, args.cases, threads);
    let secs = started.elapsed().as_secs_f64();
    let _ = std::panic::take_hook();
    let runs = sum.cases * fuzz::TARGETS.len() as u64;
    println!(
        "fuzz: seed {} cases {}..{} ({} cases x {} targets = {runs} runs) on {threads} threads in {secs:.1} s ({:.0} cases/s)",
        args.seed,
        args.first,
        args.first + args.cases,
        sum.cases,
        fuzz::TARGETS.len(),
        sum.cases as f64 / secs.max(1e-9)
    );
    println!(
        "  equivalent {}  accepted but not checkable {}  refused with a located error {}  refused by the pass {}  failures {}",
        sum.equivalent,
        sum.unchecked,
        sum.refused,
        sum.pass_errors,
        sum.failures.len()
    );
    let mut messages: Vec<(&String, &u64)> = sum.messages.iter().collect();
    messages.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (m, n) in messages.iter().take(15) {
        println!("  {n:>8}  {m}");
    }
    for (index, target, expand, message) in sum.failures.iter().take(20) {
        let line = message.lines().next().unwrap_or("");
        println!(
            "FAIL seed {} case {index} on {target} (expand_relayouts: {expand}): {line}",
            args.seed
        );
    }
    if let Some((index, ..)) = sum.failures.first() {
        println!(
            "reproduce: cargo run -p fuzz --example case -- {} {index}",
            args.seed
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
