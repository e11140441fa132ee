//! The pipeline fuzzer: generated and edited modules through the whole
//! pipeline on every target, each output proven equivalent to its input by
//! the reference evaluator (the check of `tessera check`).
//!
//! A case is a pure function of `(seed, index)`, so any failure is
//! reproduced by its seed and index alone, and a run's summary does not
//! depend on how many threads ran it. `cargo xtask fuzz` runs it at
//! length; `cargo test -p fuzz` runs a few hundred cases.
//!
//! What a case must show, on cpu, gpu and tpu:
//! - no panic;
//! - a refused module gets a typed user error that says where: a parse
//!   error (line and column) or input problems each `FILE:LINE:COL:`;
//!   the pass's own refusals (assignment, relayout) are counted apart with
//!   their messages, and an output that fails verification is a failure;
//! - an accepted module's output parses again and computes what the input
//!   computed, unless the evaluator cannot run it (counted apart).

mod generate;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use driver::PipelineError;
use target::TargetSpec;

/// The targets every case runs on.
pub const TARGETS: [&str; 3] = ["cpu", "gpu", "tpu"];

fn targets() -> &'static [Arc<TargetSpec>] {
    static T: OnceLock<Vec<Arc<TargetSpec>>> = OnceLock::new();
    T.get_or_init(|| {
        TARGETS
            .iter()
            .map(|t| Arc::new(target::load_builtin(t).expect("a built-in target")))
            .collect()
    })
}

/// The random seed of case `index` of a run seeded `seed`.
fn case_seed(seed: u64, index: u64) -> u64 {
    let mut g = interp::SplitMix64::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    g.next_u64()
}

/// How one module fared on one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted, and the output was proven equivalent to the input.
    Equivalent,
    /// Accepted; the evaluator could not compare (an unsupported op, a
    /// limit, or the input itself reads padding).
    Unchecked(String),
    /// Refused with a located user error, with its message.
    Refused(String),
    /// Refused by the pass itself (assignment or relayout), with its message.
    PassError(String),
    /// A bug: a panic, an output that fails verification or does not parse,
    /// an unlocated input error, or an output that computes something else.
    Failure(String),
}

/// The limits of one semantic check: small, so a case stays fast.
fn limits() -> interp::Limits {
    interp::Limits {
        max_buffer_slots: 1 << 20,
        max_work: 1 << 24,
        ..interp::Limits::default()
    }
}

/// Whether every input problem says `FILE:LINE:COL: error:`.
fn located(problems: &[driver::InputProblem]) -> bool {
    problems.iter().all(|p| {
        let mut parts = p.located.splitn(4, ':');
        let _file = parts.next();
        let line = parts
            .next()
            .is_some_and(|l| l.parse::<u32>().is_ok_and(|l| l >= 1));
        let col = parts
            .next()
            .is_some_and(|c| c.parse::<u32>().is_ok_and(|c| c >= 1));
        line && col && parts.next().is_some_and(|r| r.starts_with(" error: "))
    })
}

/// Runs one module on one target and judges the outcome.
pub fn check(text: &str, target: usize, expand_relayouts: bool) -> Outcome {
    let mut opts = driver::Options::new(Arc::clone(&targets()[target]));
    opts.expand_relayouts = expand_relayouts;
    let run = catch_unwind(AssertUnwindSafe(|| driver::run(text, "fuzz.hlo", &opts)));
    let out = match run {
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            return Outcome::Failure(format!("panic: {}", what.unwrap_or_default()));
        }
        Ok(Err(PipelineError::Parse(e))) if e.line >= 1 && e.col >= 1 => {
            return Outcome::Refused(format!("parse: {}", e.message));
        }
        Ok(Err(PipelineError::InvalidInput(p))) if !p.is_empty() && located(&p) => {
            return Outcome::Refused(format!("input: {}", p[0]));
        }
        Ok(Err(PipelineError::Assign(m))) => return Outcome::PassError(format!("assign: {m}")),
        Ok(Err(PipelineError::Relayout(m))) => return Outcome::PassError(format!("relayout: {m}")),
        Ok(Err(e)) => return Outcome::Failure(format!("error: {e}")),
        Ok(Ok(out)) => out,
    };
    let after = match out.module() {
        Ok(m) => m,
        Err(e) => return Outcome::Failure(format!("the output does not parse: {e}")),
    };
    let before = match hlo::parse_module(text, "fuzz.hlo") {
        Ok(m) => m,
        Err(e) => return Outcome::Failure(format!("accepted text that does not parse: {e}")),
    };
    let checked = catch_unwind(AssertUnwindSafe(|| {
        interp::check_equivalent(&before, &after, &[1], &limits())
    }));
    match checked {
        Err(_) => Outcome::Failure("the evaluator panicked".into()),
        Ok(Ok(_)) => Outcome::Equivalent,
        // An input whose own result holds padding (a bitcast that views a
        // tiled buffer's padding as elements) computes nothing to compare.
        Ok(Err(e)) if e.to_string().contains("left value: reads padding") => {
            Outcome::Unchecked("the input's result reads padding".into())
        }
        // The same input, when the output reads that padding before its
        // result does: the evaluator carries padding as poison through a
        // copy and a bitcast only, so an expanded relayout's steps fail on
        // it outright (seed 3 case 345734: `s4[3]{0:T(4)(2)}` viewed as
        // `s4[4]`, then copied).
        Ok(Err(e)) if e.to_string().contains("reads padding") && result_reads_padding(&before) => {
            Outcome::Unchecked("the input's result reads padding".into())
        }
        Ok(Err(e)) if e.shows_difference() => Outcome::Failure(format!("not equivalent: {e}")),
        Ok(Err(e)) => Outcome::Unchecked(first_words(&e.to_string())),
    }
}

/// Whether a module's own result holds padding (a bitcast that views a
/// tiled buffer's padding as elements): compared with itself, its result
/// cannot be read.
fn result_reads_padding(module: &hlo::Module) -> bool {
    let checked = catch_unwind(AssertUnwindSafe(|| {
        interp::check_equivalent(module, module, &[1], &limits())
    }));
    matches!(checked, Ok(Err(e)) if e.to_string().contains("left value: reads padding"))
}

/// The start of a message, without the numbers and names that make every
/// instance distinct, to group messages in a summary.
pub fn first_words(message: &str) -> String {
    let line = message.lines().next().unwrap_or("");
    let line = line.split_once("error: ").map_or(line, |(_, rest)| rest);
    // Past "computation %c, instruction %i: " or "module: ".
    let line = match line.split_once(": ") {
        Some((head, rest)) if head.starts_with("computation %") || head == "module" => rest,
        _ => line,
    };
    let words: Vec<String> = line
        .split_whitespace()
        .take(7)
        .map(|w| {
            if w.starts_with('%') {
                "%_".to_string()
            } else {
                w.chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect()
            }
        })
        .collect();
    words.join(" ")
}

/// Case `index` of the run seeded `seed`: its module, and whether its
/// relayouts are expanded.
pub fn case(seed: u64, index: u64) -> (String, bool) {
    let mut rng = generate::Rng::new(case_seed(seed, index));
    let expand = rng.chance(1, 4);
    (generate::module(&mut rng), expand)
}

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Cases run (each on every target).
    pub cases: u64,
    /// Runs (case x target) by outcome.
    pub equivalent: u64,
    pub unchecked: u64,
    pub refused: u64,
    pub pass_errors: u64,
    /// Messages of refusals, unchecked runs and pass errors (their first
    /// words, digits as `#`), with counts.
    pub messages: std::collections::BTreeMap<String, u64>,
    /// Failures: case index, target, expanded, message.
    pub failures: Vec<(u64, &'static str, bool, String)>,
}

impl Summary {
    fn add(&mut self, index: u64, target: usize, expand: bool, o: Outcome) {
        match o {
            Outcome::Equivalent => self.equivalent += 1,
            Outcome::Refused(m) => {
                self.refused += 1;
                *self
                    .messages
                    .entry(format!("refused: {}", first_words(&m)))
                    .or_default() += 1;
            }
            Outcome::Unchecked(m) => {
                self.unchecked += 1;
                *self.messages.entry(format!("unchecked: {m}")).or_default() += 1;
            }
            Outcome::PassError(m) => {
                self.pass_errors += 1;
                *self.messages.entry(first_words(&m)).or_default() += 1;
            }
            Outcome::Failure(m) => self.failures.push((index, TARGETS[target], expand, m)),
        }
    }

    fn merge(&mut self, other: Summary) {
        self.cases += other.cases;
        self.equivalent += other.equivalent;
        self.unchecked += other.unchecked;
        self.refused += other.refused;
        self.pass_errors += other.pass_errors;
        for (m, n) in other.messages {
            *self.messages.entry(m).or_default() += n;
        }
        self.failures.extend(other.failures);
        self.failures.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    }
}

/// Runs cases `first..first + count` of the run seeded `seed` on `threads`
/// threads (case `i` on thread `i % threads`).
pub fn run(seed: u64, first: u64, count: u64, threads: usize) -> Summary {
    let threads = threads.max(1) as u64;
    let parts: Vec<Summary> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut sum = Summary::default();
                    let mut i = first + t;
                    while i < first + count {
                        let (text, expand) = case(seed, i);
                        for target in 0..TARGETS.len() {
                            sum.add(i, target, expand, check(&text, target, expand));
                        }
                        sum.cases += 1;
                        i += threads;
                    }
                    sum
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut total = Summary::default();
    for p in parts {
        total.merge(p);
    }
    total
}
