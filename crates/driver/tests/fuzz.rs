//! Fuzz-style property for the whole pipeline: real XLA dumps with
//! meaning-changing edits that keep them parseable (other layouts, tiles,
//! AUTO entry layouts, other element types, other dimension lists) never
//! make the passes panic, on any target. A module the pipeline accepts
//! verifies; one it refuses gets an error, not a crash.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

use proptest::prelude::*;

/// Small corpus files to edit.
fn seeds() -> &'static [String] {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
        [
            "entry_layout_colmajor/before_layout.hlo",
            "tuple_pytree_io/before_layout.hlo",
            "einsum_awkward/before_layout.hlo",
            "pad_ops/before_layout.hlo",
            "int8_quantized_matmul/before_layout.hlo",
            "transpose_reshape_chain/before_layout.hlo",
            "cond_switch/before_layout.hlo",
            "loops_fori_while/before_layout.hlo",
        ]
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .collect()
    })
}

/// Layout suffixes an edit may write in place of a layout.
const TILES: &[&str] = &["", ":T(2,2)", ":T(8,128)", ":T(8,128)(2,1)", ":T(2,*,4)", ":T(1024)", ":T(4)(2)", ":T(8,128)E(4)"];

/// Element types an edit may write in place of one.
const TYPES: &[&str] = &["f32", "bf16", "s8", "pred", "s4", "f64", "u16"];

#[derive(Clone, Debug)]
enum Edit {
    /// Reverse or rotate the `n`th layout's minor-to-major list and give it a tile.
    Layout { n: usize, rotate: usize, tile: usize },
    /// Drop every layout in the entry computation layout (all AUTO).
    AutoEntry,
    /// Replace the `n`th element type.
    ElementType { n: usize, ty: usize },
    /// Rotate the `n`th `dimensions={...}` list.
    Dimensions { n: usize, rotate: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), 0usize..4, 0..TILES.len()).prop_map(|(n, rotate, tile)| Edit::Layout { n, rotate, tile }),
        1 => Just(Edit::AutoEntry),
        2 => (any::<usize>(), 0..TYPES.len()).prop_map(|(n, ty)| Edit::ElementType { n, ty }),
        2 => (any::<usize>(), 1usize..4).prop_map(|(n, rotate)| Edit::Dimensions { n, rotate }),
    ]
}

/// Byte ranges of `{...}` layouts after a `]` (the list inside the braces).
fn layout_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    for i in 0..b.len().saturating_sub(1) {
        if b[i] == b']' && b[i + 1] == b'{'
            && let Some(end) = text[i + 2..].find('}') {
                spans.push((i + 2, i + 2 + end));
            }
    }
    spans
}

fn apply(text: &str, e: &Edit) -> String {
    match e {
        Edit::Layout { n, rotate, tile } => {
            let spans = layout_spans(text);
            if spans.is_empty() {
                return text.to_string();
            }
            let (start, end) = spans[n % spans.len()];
            let inner = &text[start..end];
            let m2m = inner.split(':').next().unwrap_or("");
            let mut dims: Vec<&str> = m2m.split(',').filter(|d| !d.is_empty()).collect();
            if dims.is_empty() {
                return text.to_string();
            }
            if rotate % 2 == 1 {
                dims.reverse();
            }
            let k = rotate % dims.len();
            dims.rotate_left(k);
            format!("{}{}{}{}", &text[..start], dims.join(","), TILES[*tile], &text[end..])
        }
        Edit::AutoEntry => {
            let Some(start) = text.find("entry_computation_layout={") else { return text.to_string() };
            let line_end = text[start..].find('\n').map_or(text.len(), |e| start + e);
            let mut header = String::new();
            let mut depth = 0;
            for c in text[start..line_end].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        if depth > 1 {
                            continue;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth > 0 {
                            continue;
                        }
                    }
                    _ if depth > 1 => continue,
                    _ => {}
                }
                header.push(c);
            }
            format!("{}{}{}", &text[..start], header, &text[line_end..])
        }
        Edit::ElementType { n, ty } => {
            let hits: Vec<usize> = text.match_indices("f32[").map(|(i, _)| i).collect();
            if hits.is_empty() {
                return text.to_string();
            }
            let at = hits[n % hits.len()];
            format!("{}{}{}", &text[..at], TYPES[*ty], &text[at + 3..])
        }
        Edit::Dimensions { n, rotate } => {
            let hits: Vec<usize> = text.match_indices("dimensions={").map(|(i, _)| i + "dimensions={".len()).collect();
            if hits.is_empty() {
                return text.to_string();
            }
            let start = hits[n % hits.len()];
            let Some(len) = text[start..].find('}') else { return text.to_string() };
            let mut dims: Vec<&str> = text[start..start + len].split(',').filter(|d| !d.is_empty()).collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let k = rotate % dims.len();
            dims.rotate_left(k);
            format!("{}{}{}", &text[..start], dims.join(","), &text[start + len..])
        }
    }
}

fn targets() -> &'static [std::sync::Arc<target::TargetSpec>] {
    static TARGETS: OnceLock<Vec<std::sync::Arc<target::TargetSpec>>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        ["cpu", "gpu", "tpu"].iter().map(|t| std::sync::Arc::new(target::load_builtin(t).unwrap())).collect()
    })
}

/// A fixed seed and case count keep CI reproducible; exploration runs set
/// `TESSERA_FUZZ_SEED` and `TESSERA_FUZZ_CASES` (e.g.
/// `TESSERA_FUZZ_SEED=7 TESSERA_FUZZ_CASES=20000 cargo test --release -p driver --test fuzz`).
fn config() -> ProptestConfig {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    ProptestConfig {
        cases: env("TESSERA_FUZZ_CASES").map_or(512, |n| n as u32),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(env("TESSERA_FUZZ_SEED").unwrap_or(0x7e55_e7a0)),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn edited_modules_never_make_the_pipeline_panic(
        seed in 0usize..8,
        edits in proptest::collection::vec(edit(), 1..4),
        target in 0usize..3,
    ) {
        let mut text = seeds()[seed % seeds().len()].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        let opts = driver::Options::new(std::sync::Arc::clone(&targets()[target]));
        let outcome = catch_unwind(AssertUnwindSafe(|| driver::run(&text, "fuzz.hlo", &opts)));
        match outcome {
            Err(_) => panic!("the pipeline panicked on {edits:?} under target {target}:\n{text}"),
            Ok(Ok(out)) => {
                // Accepted output is well formed and parses again.
                prop_assert!(hlo::parse_module(&out.text, "out.hlo").is_ok());
            }
            // An invalid input or an unassignable module is refused with an
            // error; an output that fails verification would be our bug.
            Ok(Err(e)) => prop_assert!(!matches!(e, driver::PipelineError::Verify(_)), "{e}\n{text}"),
        }
    }
}
