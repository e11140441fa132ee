//! Checks two HLO modules for equivalence with the reference evaluator.
//!
//! ```text
//! cargo run -p interp --release --example check_equivalence -- BEFORE.hlo AFTER.hlo [SEED...]
//! ```
//!
//! `BEFORE` is evaluated with logical boundaries (its layouts are taken as
//! placeholders), `AFTER` with physical ones. Exits with status 1 on a
//! mismatch or an evaluation error, 2 on a usage error.

use std::process::ExitCode;

fn load(path: &str) -> Result<hlo::Module, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    hlo::parse_module(&text, path).map_err(|e| format!("{path}: {e:?}"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: check_equivalence BEFORE.hlo AFTER.hlo [SEED...]");
        return ExitCode::from(2);
    }
    let mut seeds = Vec::new();
    for s in &args[2..] {
        match s.parse::<u64>() {
            Ok(v) => seeds.push(v),
            Err(_) => {
                eprintln!("seed '{s}' is not an unsigned integer");
                return ExitCode::from(2);
            }
        }
    }
    if seeds.is_empty() {
        seeds.push(1);
    }
    let (before, after) = match (load(&args[0]), load(&args[1])) {
        (Ok(b), Ok(a)) => (b, a),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match interp::check_equivalent(&before, &after, &seeds, &interp::Limits::default()) {
        Ok(r) => {
            println!(
                "equivalent on {} seed(s): {} elements compared; before {:.2?} ({} work units), after {:.2?} ({} work units)",
                r.seeds,
                r.elements_compared,
                r.time_before,
                r.work_before,
                r.time_after,
                r.work_after
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
