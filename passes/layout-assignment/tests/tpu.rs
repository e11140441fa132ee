//! The TPU target on every corpus module: the output verifies, every array
//! is tiled (scalars and parameters included), and every array carries one
//! of the tilings the target lists for its element type and rank, legal for
//! its dimensions in its order (or the `*`-combined form of one); entry
//! parameters may also carry a storage tiling.

use std::path::Path;

use shape::ArrayShape;

/// The corpus modules bundled in testdata.
fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (
                name,
                std::fs::read_to_string(e.path().join("before_layout.hlo")).unwrap(),
            )
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 20,
        "the corpus copies are missing from testdata"
    );
    out
}

/// Checks one array leaf against the target's candidates; returns a problem.
fn check_leaf(
    target: &target::TargetSpec,
    a: &ArrayShape,
    use_: target::tiling::TileUse,
) -> Option<String> {
    let layout = a.layout.as_ref()?;
    if layout.tiles.is_empty()
        && a.element_type
            .bit_width()
            .is_some_and(|b| b >= 8 || a.element_type == shape::PrimitiveType::Pred)
    {
        return Some(format!("{a} is not tiled"));
    }
    (!target::tiling::allows(target, a, layout, use_))
        .then(|| format!("{a} carries a tiling the target does not allow"))
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
        assert!(
            hlo::uses_before_definition(&module).is_empty(),
            "{name}: a use before its definition"
        );
        let problems = layout_assignment::check_layouts(&module, Some(&target));
        assert!(
            problems.is_empty(),
            "{name}: {}",
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
        for (id, comp) in module.computation_ids().zip(&module.computations) {
            for (_, inst) in comp.instructions() {
                let use_ = if id == module.entry && inst.opcode == hlo::Opcode::Parameter {
                    target::tiling::TileUse::Storage
                } else {
                    target::tiling::TileUse::Compute
                };
                inst.shape.for_each_array(&mut |_, a| {
                    if let Some(problem) = check_leaf(&target, a, use_) {
                        panic!("{name}: %{} in %{}: {problem}", inst.name, comp.name);
                    }
                    if a.element_type == shape::PrimitiveType::Bf16 && a.rank() >= 2 {
                        let tiles: Vec<String> = a
                            .layout
                            .iter()
                            .flat_map(|l| l.tiles.iter().map(ToString::to_string))
                            .collect();
                        assert_eq!(
                            tiles.last().map(String::as_str),
                            Some("(2,1)"),
                            "{name}: {a}"
                        );
                        bf16 += 1;
                    }
                });
            }
        }
        // The printed entry layout names the tiles too.
        for p in module.entry_computation_layout.parameters.iter() {
            p.for_each_array(&mut |_, a| {
                if a.element_type.bit_width().is_some_and(|b| b >= 8) {
                    assert!(
                        a.layout.as_ref().is_some_and(|l| !l.tiles.is_empty()),
                        "{name}: entry parameter {a}"
                    );
                }
            });
        }
    }
    assert!(
        bf16 >= 4,
        "the corpus should exercise bf16 packing ({bf16} arrays seen)"
    );
}
