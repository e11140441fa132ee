//! The TPU target on every corpus module: the output verifies, every array
//! of rank 2 or more is tiled (parameters included), and every array the
//! policy covers carries the policy's tiling for its element type and rank
//! (or the `*`-combined variant of it).

use std::path::Path;

use shape::{ArrayShape, Tile};

/// The corpus modules bundled in testdata.
fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(e.path().join("before_layout.hlo")).unwrap())
        })
        .collect();
    out.sort();
    assert!(out.len() >= 20, "the corpus copies are missing from testdata");
    out
}

/// The first tile without `*` entries.
fn uncombined(tile: &Tile) -> Vec<i64> {
    tile.dims.iter().copied().filter(|&d| d != Tile::COMBINE).collect()
}

/// Checks one array leaf against the policy; returns a problem.
fn check_leaf(target: &target::TargetSpec, a: &ArrayShape) -> Option<String> {
    let layout = a.layout.as_ref()?;
    if a.rank() == 0 {
        return (!layout.tiles.is_empty()).then(|| format!("scalar {a} is tiled"));
    }
    let want = layout_assignment::layout_for(target, a, &layout.minor_to_major);
    if a.rank() >= 2 && layout.tiles.is_empty() {
        return Some(format!("{a} is not tiled"));
    }
    let same_first = match (layout.tiles.first(), want.tiles.first()) {
        (Some(have), Some(want)) => uncombined(have) == uncombined(want),
        (None, None) => true,
        _ => false,
    };
    let same_rest = layout.tiles.iter().skip(1).eq(want.tiles.iter().skip(1));
    if !same_first || !same_rest || layout.element_size_in_bits != want.element_size_in_bits {
        return Some(format!("{a} does not carry the policy tiling {want}"));
    }
    None
}

#[test]
fn every_corpus_module_is_tiled_by_the_tpu_policy() {
    let target = target::load_builtin("tpu").unwrap();
    let mut bf16 = 0;
    for (name, text) in corpus() {
        let mut module = hlo::parse_module(&text, &name).unwrap();
        layout_assignment::run(&mut module, &target).unwrap_or_else(|e| panic!("{name}: {e}"));
        let structural = hlo::verify_module(&module);
        assert!(structural.is_empty(), "{name}: {structural:?}");
        assert!(hlo::uses_before_definition(&module).is_empty(), "{name}: a use before its definition");
        let problems = layout_assignment::check_layouts(&module, Some(&target));
        assert!(problems.is_empty(), "{name}: {}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
        for comp in &module.computations {
            for (_, inst) in comp.instructions() {
                inst.shape.for_each_array(&mut |_, a| {
                    if let Some(problem) = check_leaf(&target, a) {
                        panic!("{name}: %{} in %{}: {problem}", inst.name, comp.name);
                    }
                    if a.element_type == shape::PrimitiveType::Bf16 && a.rank() >= 2 {
                        let tiles: Vec<String> = a.layout.iter().flat_map(|l| l.tiles.iter().map(ToString::to_string)).collect();
                        assert_eq!(tiles.last().map(String::as_str), Some("(2,1)"), "{name}: {a}");
                        bf16 += 1;
                    }
                });
            }
        }
        // The printed entry layout names the tiles too.
        for p in &module.entry_computation_layout.parameters {
            p.for_each_array(&mut |_, a| {
                if a.rank() >= 2 {
                    assert!(a.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()), "{name}: entry parameter {a}");
                }
            });
        }
    }
    assert!(bf16 >= 4, "the corpus should exercise bf16 packing ({bf16} arrays seen)");
}
