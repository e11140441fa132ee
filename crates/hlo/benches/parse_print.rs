//! Parse and print throughput on the largest HLO file at hand:
//! `large_transformer_24_f32/optimized.hlo` (15.7 MB) from
//! `$TESSERA_CORPUS` or `../shared/corpus/xla-cpu` next to the workspace,
//! else the largest `.hlo` under `testdata/`.
//!
//! Run with `cargo bench -p hlo --bench parse_print`; divan reports bytes
//! per second for each benchmark.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use divan::counter::BytesCount;
use divan::{Bencher, black_box};

fn main() {
    let (path, text) = input();
    // Named relative to the workspace so the line recorded in
    // docs/performance.md does not depend on where the clone lives.
    let root = workspace_root()
        .canonicalize()
        .unwrap_or_else(|_| workspace_root());
    let shown = path.canonicalize().unwrap_or_else(|_| path.clone());
    let shown = pathdiff_from(&root, &shown);
    eprintln!(
        "input: {} ({:.1} MB)",
        shown.display(),
        text.len() as f64 / 1e6
    );
    divan::main();
}

/// `path` relative to `root` when it lies under `root` or beside it.
fn pathdiff_from(root: &Path, path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix(root) {
        return rest.to_path_buf();
    }
    match root.parent().map(|parent| path.strip_prefix(parent)) {
        Some(Ok(rest)) => Path::new("..").join(rest),
        _ => path.to_path_buf(),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn largest_hlo_under(dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "hlo") {
                let size = entry.metadata().map_or(0, |m| m.len());
                if best.as_ref().is_none_or(|(s, _)| size > *s) {
                    best = Some((size, p));
                }
            }
        }
    }
    best.map(|(_, p)| p)
}

fn input() -> &'static (PathBuf, String) {
    static INPUT: OnceLock<(PathBuf, String)> = OnceLock::new();
    INPUT.get_or_init(|| {
        let corpus = std::env::var_os("TESSERA_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("../shared/corpus/xla-cpu"));
        let big = corpus.join("large_transformer_24_f32/optimized.hlo");
        let path = if big.is_file() {
            big
        } else {
            largest_hlo_under(&workspace_root().join("testdata"))
                .expect("no .hlo file under testdata/")
        };
        let text = std::fs::read_to_string(&path).expect("readable HLO file");
        (path, text)
    })
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn parse(bencher: Bencher<'_, '_>) {
    let (_, text) = input();
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| hlo::parse_module(black_box(text), "bench.hlo").expect("parses"));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn outline(bencher: Bencher<'_, '_>) {
    let (_, text) = input();
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| hlo::outline(black_box(text), "bench.hlo").expect("parses"));
}

#[divan::bench(sample_count = 10, sample_size = 1)]
fn print(bencher: Bencher<'_, '_>) {
    let (_, text) = input();
    let module = hlo::parse_module(text, "bench.hlo").expect("parses");
    let mut out = String::with_capacity(text.len());
    bencher.counter(BytesCount::of_str(text)).bench_local(|| {
        out.clear();
        hlo::write_module(&mut out, black_box(&module));
        out.len()
    });
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn verify(bencher: Bencher<'_, '_>) {
    let (_, text) = input();
    let module = hlo::parse_module(text, "bench.hlo").expect("parses");
    bencher
        .counter(BytesCount::of_str(text))
        .bench(|| hlo::verify_module(black_box(&module)).len());
}
