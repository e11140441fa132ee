//! `cargo xtask corpus`: compares Tessera with XLA on the corpus of real
//! modules (`../shared/corpus/xla-cpu`, or `--corpus DIR`) and writes the
//! comparison tables into `docs/performance.md`.
//!
//! For each module it measures, on the same input (`before_layout.hlo`):
//! - XLA CPU's layout assignment (`after_layout.hlo`): its copies and their
//!   bytes, how many of those copies are in fact bitcasts, and the bytes of
//!   its transposes and reshapes that move data (both judged with Tessera's
//!   exact algebra);
//! - Tessera with `--target cpu`: the same counts, after the relayout pass;
//! - bitcasts (`bitcasts.rs`): the reshapes, transposes and copies XLA's
//!   layouts make no-ops, and how many of them Tessera makes bitcasts; and
//!   XLA's `optimized.hlo` bitcasts, raw and without fusion duplicates;
//! - time: XLA's `pass_only` median from `meta.json` against Tessera's pass
//!   (median of warm in-process runs) and its whole `run-pass`;
//! - TPU: tile padding with and without dimension combining;
//! - round trip: every `.hlo` file of the corpus (the 15.7 MB optimized
//!   transformer included) must print back byte for byte; the command fails
//!   otherwise.
//!
//! Timings need a release build; the command re-runs itself with
//! `--release` when built for debugging.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use hlo::{Module, Opcode};
use shape::ArrayShape;

mod bitcasts;

/// Arguments of `cargo xtask corpus`.
#[derive(clap::Args)]
pub struct Args {
    /// The corpus directory (default: ../shared/corpus/xla-cpu beside the repository).
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Timed runs per module (the median is reported). Small modules run
    /// in a fraction of a millisecond, so a few runs leave the median at
    /// the mercy of one busy moment.
    #[arg(long, default_value_t = 31)]
    runs: usize,
    /// Print the tables without writing docs/performance.md.
    #[arg(long)]
    no_write: bool,
    /// Also run the exact solver on every module (cpu, gpu, tpu) and add
    /// the optimum, or a lower bound, and the default solver's gap to the
    /// tables.
    #[arg(long)]
    exact: bool,
}

/// The default solver's cost against the exact solver's proof on one
/// module and target (`cargo xtask corpus --exact`).
#[derive(Clone, Copy, Default)]
struct Gap {
    /// The default solver's cost (bytes, the cost model's units).
    cost: u64,
    /// Its lower bound: the optimum when `proven`.
    lower: u64,
    proven: bool,
    /// The exact run's wall time (the whole run-pass).
    seconds: f64,
}

impl Gap {
    /// The exact solver's run and the default's optimality on one target.
    fn measure(
        text: &str,
        name: &str,
        target: &target::TargetSpec,
        default: &layout_assignment::Optimality,
    ) -> anyhow::Result<Gap> {
        let mut opts = driver::Options::new(std::sync::Arc::new(target.clone()));
        opts.solver = driver::SolverOptions::exact();
        let t = Instant::now();
        let out = driver::run(text, name, &opts)
            .map_err(|e| anyhow::anyhow!("{name} (exact, {}): {e}", target.name))?;
        let seconds = t.elapsed().as_secs_f64();
        let o = out
            .report
            .assignment()
            .map(|a| a.optimality())
            .unwrap_or_default();
        let lower = o
            .lower_bound
            .ok_or_else(|| anyhow::anyhow!("{name}: the exact solver gave no bound"))?;
        Ok(Gap {
            cost: default.cost,
            lower,
            proven: o.proven_optimal_computations == o.computations,
            seconds,
        })
    }

    /// `= N` for a proven optimum, `>= N` for a bound.
    fn optimum(&self) -> String {
        if self.proven {
            format!("{}", self.lower)
        } else {
            format!("≥ {}", self.lower)
        }
    }

    /// The default's distance above the optimum (or at most this far above
    /// a bound).
    fn gap(&self) -> String {
        let pct = |x: u64| {
            if self.lower == 0 {
                if x == 0 {
                    "0%".to_string()
                } else {
                    "n/a".to_string()
                }
            } else {
                format!(
                    "{:.2}%",
                    (x as f64 - self.lower as f64) / self.lower as f64 * 100.0
                )
            }
        };
        if self.proven {
            pct(self.cost)
        } else {
            format!("≤ {}", pct(self.cost))
        }
    }

    /// The table cells: default cost, optimum or bound, gap.
    fn cells(&self) -> String {
        format!(" {} | {} | {} |", self.cost, self.optimum(), self.gap())
    }
}

/// What one side did to a module.
#[derive(Default, Clone)]
struct Side {
    copies: usize,
    copy_bytes: u64,
    bitcast_copies: usize,
    movement_bytes: u64,
    bitcasts: usize,
}

struct Row {
    name: String,
    instructions: usize,
    xla: Side,
    ours: Side,
    bitcasts: bitcasts::Comparison,
    xla_optimized_bitcasts: Option<bitcasts::OptimizedCount>,
    xla_pass_us: Option<f64>,
    our_pass_us: f64,
    /// The whole run-pass without the verifier: parse, assign, relayout, print.
    our_run_pass_us: f64,
    /// The same with the verifier after the passes (the CLI's default).
    our_verified_run_pass_us: f64,
    tpu_padding: u64,
    tpu_padding_uncombined: u64,
    /// Per tiled built-in target (see `tiled_targets`): the bytes of every
    /// buffer of the output, padding included, and of their elements.
    tiled_storage: Vec<(u64, u64)>,
    gpu: Side,
    /// With `--exact`: cpu, gpu and tpu.
    gaps: Option<[Gap; 3]>,
}

/// One corpus file parsed and printed back.
struct RoundTrip {
    file: String,
    bytes: usize,
    identical: bool,
    parse_ms: f64,
    print_ms: f64,
}

/// Parses and prints every `.hlo` file in `dirs`.
fn round_trips(dirs: &[PathBuf], corpus: &Path) -> anyhow::Result<Vec<RoundTrip>> {
    let mut out = Vec::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "hlo"))
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path)?;
            let file = path
                .strip_prefix(corpus)
                .unwrap_or(&path)
                .display()
                .to_string();
            let t = Instant::now();
            let parsed = hlo::parse_module(&text, &file);
            let parse_ms = t.elapsed().as_secs_f64() * 1e3;
            let (identical, print_ms) = match parsed {
                Ok(m) => {
                    let t = Instant::now();
                    let printed = hlo::print_module(&m);
                    (printed == text, t.elapsed().as_secs_f64() * 1e3)
                }
                Err(_) => (false, 0.0),
            };
            out.push(RoundTrip {
                file,
                bytes: text.len(),
                identical,
                parse_ms,
                print_ms,
            });
        }
    }
    Ok(out)
}

fn bytes(a: &ArrayShape) -> u64 {
    shape::storage_size(a).map_or(0, |s| s.bytes)
}

/// Copies, copy bytes, copies that are bitcasts, data-moving transposes and
/// reshapes, and bitcasts of a module whose layouts are all set.
fn measure(module: &Module) -> Side {
    let mut side = Side::default();
    for comp in &module.computations {
        for (id, inst) in comp.instructions() {
            let operand = comp
                .operands(id)
                .first()
                .and_then(|&o| comp.inst(o).shape.as_array());
            let (Some(out), Some(_)) = (inst.shape.as_array(), operand) else {
                if inst.opcode == Opcode::Bitcast {
                    side.bitcasts += 1;
                }
                continue;
            };
            // An instruction the algebra cannot judge counts as moving data.
            let noop = bitcasts::is_noop(comp, id) == Some(true);
            match inst.opcode {
                Opcode::Copy => {
                    side.copies += 1;
                    side.copy_bytes += bytes(out);
                    if noop {
                        side.bitcast_copies += 1;
                    }
                }
                Opcode::Transpose | Opcode::Reshape if !noop => side.movement_bytes += bytes(out),
                Opcode::Bitcast => side.bitcasts += 1,
                _ => {}
            }
        }
    }
    side
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn read_meta(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).ok()?).ok()
}

/// Runs the command.
/// The corpus's module folders (those with a `before_layout.hlo`), in
/// name order.
fn module_dirs(corpus: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus)
        .with_context(|| format!("cannot read the corpus at {}", corpus.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("before_layout.hlo").exists())
        .collect();
    dirs.sort();
    Ok(dirs)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if cfg!(debug_assertions) {
        return crate::rerun_release("corpus", &std::env::args().skip(2).collect::<Vec<_>>());
    }
    let root = crate::root();
    let corpus = args
        .corpus
        .clone()
        .unwrap_or_else(|| root.join("../shared/corpus/xla-cpu"));
    let dirs = module_dirs(&corpus)?;
    let cpu = target::load_builtin("cpu").map_err(|e| anyhow::anyhow!("{e}"))?;
    let gpu = target::load_builtin("gpu").map_err(|e| anyhow::anyhow!("{e}"))?;
    let tpu = target::load_builtin("tpu").map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut tpu_flat = tpu.clone();
    if let Some(t) = &mut tpu_flat.tiling {
        t.combine_dimensions = false;
    }
    let tiled = tiled_targets()?;
    let mut rows = Vec::new();
    for dir in &dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        eprintln!("{name}");
        let before_text = std::fs::read_to_string(dir.join("before_layout.hlo"))?;
        let after = hlo::parse_module(
            &std::fs::read_to_string(dir.join("after_layout.hlo"))?,
            "after_layout.hlo",
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let optimized = std::fs::read_to_string(dir.join("optimized.hlo"))
            .ok()
            .and_then(|t| hlo::parse_module(&t, "optimized.hlo").ok());
        let meta = read_meta(dir);
        let xla_pass_us = meta
            .as_ref()
            .and_then(|m| m["layout_assignment_time_us"]["pass_only"]["median"].as_f64());
        let parsed = hlo::parse_module(&before_text, &name).map_err(|e| anyhow::anyhow!("{e}"))?;

        let options = |t: &target::TargetSpec, verify: bool| driver::Options {
            verify,
            ..driver::Options::new(std::sync::Arc::new(t.clone()))
        };
        let run_opts = |opts: &driver::Options| -> anyhow::Result<driver::Output> {
            driver::run(&before_text, &name, opts).map_err(|e| anyhow::anyhow!("{name}: {e}"))
        };
        let run = |t: &target::TargetSpec| run_opts(&options(t, true));
        // The timed runs' options are made once, outside the timings: a
        // pipeline holds its target, it does not copy it per module.
        let (cpu_unverified, cpu_verified) = (options(&cpu, false), options(&cpu, true));
        let ours_out = run(&cpu)?;
        let ours = Side {
            copy_bytes: ours_out.report.stats.copy_bytes,
            movement_bytes: ours_out.report.stats.movement_bytes,
            ..measure(&ours_out.module()?)
        };
        // The pass alone, warm, on a fresh copy of the parsed module each run.
        let mut pass_times = Vec::with_capacity(args.runs);
        let mut run_times = Vec::with_capacity(args.runs);
        let mut verified_run_times = Vec::with_capacity(args.runs);
        for _ in 0..args.runs {
            let mut m = parsed.clone();
            let t = Instant::now();
            layout_assignment::run(&mut m, &cpu).map_err(|e| anyhow::anyhow!("{e}"))?;
            pass_times.push(t.elapsed());
            let t = Instant::now();
            run_opts(&cpu_unverified)?;
            run_times.push(t.elapsed());
            let t = Instant::now();
            run_opts(&cpu_verified)?;
            verified_run_times.push(t.elapsed());
        }
        let gpu_out = run(&gpu)?;
        let tpu_out = run(&tpu)?;
        let tpu_flat_out = run(&tpu_flat)?;
        let mut tiled_storage = Vec::with_capacity(tiled.len());
        for t in &tiled {
            let stats = if t.name == tpu.name {
                tpu_out.report.stats.clone()
            } else {
                run(t)?.report.stats
            };
            tiled_storage.push((stats.storage_bytes, stats.logical_bytes));
        }
        let bitcasts = bitcasts::compare(&parsed, &after, &ours_out.module()?);
        let optimality = |o: &driver::Output| {
            o.report
                .assignment()
                .map(|a| a.optimality())
                .unwrap_or_default()
        };
        let gaps = if args.exact {
            Some([
                Gap::measure(&before_text, &name, &cpu, &optimality(&ours_out))?,
                Gap::measure(&before_text, &name, &gpu, &optimality(&gpu_out))?,
                Gap::measure(&before_text, &name, &tpu, &optimality(&tpu_out))?,
            ])
        } else {
            None
        };
        rows.push(Row {
            name,
            instructions: parsed.instruction_count(),
            xla: measure(&after),
            ours,
            bitcasts,
            xla_optimized_bitcasts: optimized.as_ref().map(bitcasts::count_optimized),
            xla_pass_us,
            our_pass_us: median(pass_times),
            our_run_pass_us: median(run_times),
            our_verified_run_pass_us: median(verified_run_times),
            tpu_padding: tpu_out.report.stats.padding_bytes,
            tpu_padding_uncombined: tpu_flat_out.report.stats.padding_bytes,
            tiled_storage,
            gpu: Side {
                copy_bytes: gpu_out.report.stats.copy_bytes,
                movement_bytes: gpu_out.report.stats.movement_bytes,
                ..measure(&gpu_out.module()?)
            },
            gaps,
        });
    }
    let trips = round_trips(&dirs, &corpus)?;
    let names: Vec<&str> = tiled.iter().map(|t| t.name.as_str()).collect();
    let mut tables = tables(&rows, &names);
    if rows.iter().all(|r| r.gaps.is_some()) {
        tables.push_str(&gap_table(&rows));
    }
    tables.push_str(&round_trip_table(&trips));
    println!("{tables}");
    let broken: Vec<&RoundTrip> = trips.iter().filter(|t| !t.identical).collect();
    for t in &broken {
        eprintln!("error: {} does not print back byte for byte", t.file);
    }
    if !broken.is_empty() {
        return Ok(ExitCode::from(1));
    }
    if !args.no_write {
        crate::replace_section(&root.join("docs/performance.md"), "corpus", &tables)?;
        eprintln!("wrote docs/performance.md");
    }
    Ok(ExitCode::SUCCESS)
}

/// The built-in targets that tile arrays, in name order.
fn tiled_targets() -> anyhow::Result<Vec<target::TargetSpec>> {
    let mut out = Vec::new();
    for name in target::builtin_names() {
        let t = target::load_builtin(name).map_err(|e| anyhow::anyhow!("{e}"))?;
        if t.tiling.is_some() {
            out.push(t);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The default solver against the exact solver's optimum or bound, per
/// module and target (`--exact`).
fn gap_table(rows: &[Row]) -> String {
    let mut s = String::from(
        "\n### Distance from the optimum (`cargo xtask corpus --exact`)\n\nCost is the cost model's (bytes of copies, data-moving transposes and reshapes, and re-tiling ops, plus weighed padding), summed over each module's computations as the call-boundary rule assigned them. The optimum is the exact solver's (`--solver exact`: an integer program per computation over every value's candidate layouts, its group's layouts and the default's answer); `≥ N` is a lower bound where it was not proven. The gap is the default solver's cost above it. The last columns are the exact run's wall time (the whole `run-pass`, release build).\n\n| module | cpu cost | cpu optimum | cpu gap | gpu cost | gpu optimum | gpu gap | tpu cost | tpu optimum | tpu gap | exact ms cpu/gpu/tpu |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut totals = [(0u64, 0u64); 3];
    for r in rows {
        let Some(g) = &r.gaps else { continue };
        s.push_str(&format!("| {} |", r.name));
        for (i, gap) in g.iter().enumerate() {
            s.push_str(&gap.cells());
            totals[i].0 += gap.cost;
            totals[i].1 += gap.lower;
        }
        s.push_str(&format!(
            " {:.1} / {:.1} / {:.1} |\n",
            g[0].seconds * 1e3,
            g[1].seconds * 1e3,
            g[2].seconds * 1e3
        ));
    }
    s.push_str("| **total** |");
    for (cost, lower) in totals {
        let pct = if lower == 0 {
            "n/a".to_string()
        } else {
            format!(
                "{:.2}%",
                (cost as f64 - lower as f64) / lower as f64 * 100.0
            )
        };
        s.push_str(&format!(" {cost} | {lower} | {pct} |"));
    }
    s.push_str(" |\n");
    s
}

fn round_trip_table(trips: &[RoundTrip]) -> String {
    let identical = trips.iter().filter(|t| t.identical).count();
    let total: usize = trips.iter().map(|t| t.bytes).sum();
    let mut s = format!(
        "\n### Round trip: parse, then print\n\n{identical} of {} corpus files ({:.1} MB) print back byte for byte. The largest:\n\n| file | bytes | identical | parse ms | print ms |\n|---|---:|---|---:|---:|\n",
        trips.len(),
        total as f64 / 1e6
    );
    let mut largest: Vec<&RoundTrip> = trips.iter().collect();
    largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.file.cmp(&b.file)));
    for t in largest.iter().take(5) {
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.1} |\n",
            t.file,
            t.bytes,
            if t.identical { "yes" } else { "**no**" },
            t.parse_ms,
            t.print_ms
        ));
    }
    s
}

fn tables(rows: &[Row], tiled: &[&str]) -> String {
    let mut s = String::new();
    let sum = |f: &dyn Fn(&Row) -> u64| rows.iter().map(f).sum::<u64>();
    s.push_str("### Copies and bytes moved, CPU target, against XLA CPU\n\n");
    s.push_str("Bytes moved are the bytes written by copies plus those written by transposes and reshapes that are not bitcasts, judged with the exact algebra on both sides. \"bitcast copies\" are XLA copies that move no byte (its later simplifier turns them into bitcasts).\n\n");
    s.push_str("| module | instrs | XLA copies | XLA bitcast copies | XLA bytes moved | Tessera copies | Tessera bytes moved | bytes saved |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let xla = r.xla.copy_bytes + r.xla.movement_bytes;
        let ours = r.ours.copy_bytes + r.ours.movement_bytes;
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.instructions,
            r.xla.copies,
            r.xla.bitcast_copies,
            xla,
            r.ours.copies,
            ours,
            xla as i64 - ours as i64
        ));
    }
    let xla_total = sum(&|r| r.xla.copy_bytes + r.xla.movement_bytes);
    let our_total = sum(&|r| r.ours.copy_bytes + r.ours.movement_bytes);
    s.push_str(&format!(
        "| **total** | {} | {} | {} | {} | {} | {} | {} |\n\n",
        sum(&|r| r.instructions as u64),
        sum(&|r| r.xla.copies as u64),
        sum(&|r| r.xla.bitcast_copies as u64),
        xla_total,
        sum(&|r| r.ours.copies as u64),
        our_total,
        xla_total as i64 - our_total as i64
    ));
    let bitcast_rows: Vec<bitcasts::TableRow<'_>> = rows
        .iter()
        .map(|r| bitcasts::TableRow {
            name: &r.name,
            comparison: &r.bitcasts,
            ours_bitcasts: r.ours.bitcasts,
            xla_bytes: r.xla.copy_bytes + r.xla.movement_bytes,
            ours_bytes: r.ours.copy_bytes + r.ours.movement_bytes,
            optimized: r.xla_optimized_bitcasts,
        })
        .collect();
    s.push_str(&bitcasts::tables(&bitcast_rows));
    s.push_str("### Time, CPU target\n\nXLA: `layout_assignment_time_us.pass_only` median from `meta.json` (XLA's pass alone, in a warm compiler, 2-core machine). Tessera: median of warm in-process runs on this machine: the pass alone (layout assignment on a parsed module), the whole `run-pass` pipeline (parse, assign, relayout, print: `tessera run-pass --no-verify`), and the same followed by the structural and layout verifiers (the command's default).\n\n");
    s.push_str("| module | XLA pass µs | Tessera pass µs | speed-up | Tessera run-pass µs | run-pass vs XLA pass | run-pass + verify µs | vs XLA pass |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let (x, ratio, ratio_run, ratio_verified) = match r.xla_pass_us {
            Some(x) => (
                format!("{x:.0}"),
                format!("{:.1}x", x / r.our_pass_us),
                format!("{:.1}x", x / r.our_run_pass_us),
                format!("{:.1}x", x / r.our_verified_run_pass_us),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into(), "n/a".into()),
        };
        s.push_str(&format!(
            "| {} | {} | {:.0} | {} | {:.0} | {} | {:.0} | {} |\n",
            r.name,
            x,
            r.our_pass_us,
            ratio,
            r.our_run_pass_us,
            ratio_run,
            r.our_verified_run_pass_us,
            ratio_verified
        ));
    }
    s.push('\n');
    s.push_str("### TPU target: tile padding with and without dimension combining\n\n| module | padding bytes, no combining | padding bytes, combining | saved |\n|---|---:|---:|---:|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.name,
            r.tpu_padding_uncombined,
            r.tpu_padding,
            r.tpu_padding_uncombined as i64 - r.tpu_padding as i64
        ));
    }
    let (a, b) = (sum(&|r| r.tpu_padding_uncombined), sum(&|r| r.tpu_padding));
    s.push_str(&format!(
        "| **total** | {a} | {b} | {} |\n\n",
        a as i64 - b as i64
    ));
    s.push_str("### Tiled targets: storage over logical bytes\n\nThe bytes of every buffer of the output (padding included, each buffer once) over the bytes of their elements, per tiled built-in target (`stats.storage_bytes` / `stats.logical_bytes` in the report).\n\n| module |");
    for t in tiled {
        s.push_str(&format!(" {t} |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---:|".repeat(tiled.len()));
    s.push('\n');
    let ratio = |(storage, logical): (u64, u64)| {
        if logical == 0 {
            "n/a".to_string()
        } else {
            format!("{:.3}", storage as f64 / logical as f64)
        }
    };
    for r in rows {
        s.push_str(&format!("| {} |", r.name));
        for &x in &r.tiled_storage {
            s.push_str(&format!(" {} |", ratio(x)));
        }
        s.push('\n');
    }
    s.push_str("| **total** |");
    for i in 0..tiled.len() {
        let total = rows
            .iter()
            .filter_map(|r| r.tiled_storage.get(i))
            .fold((0, 0), |(a, b), &(x, y)| (a + x, b + y));
        s.push_str(&format!(" {} |", ratio(total)));
    }
    s.push_str("\n\n");
    s.push_str("### GPU target\n\n| module | copies | copy bytes | data-moving transpose/reshape bytes | bitcasts |\n|---|---:|---:|---:|---:|\n");
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.name, r.gpu.copies, r.gpu.copy_bytes, r.gpu.movement_bytes, r.gpu.bitcasts
        ));
    }
    s
}
