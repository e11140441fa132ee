//! `--expand-relayouts` outputs compute what their inputs computed: the
//! whole pipeline (layout assignment, relayout with every tiled copy spelled
//! out as pad / bitcast / transpose / slice, the output verifiers), then the
//! reference evaluator on the same random inputs. The evaluator follows each
//! bitcast onto a buffer's physical array, padding included, and refuses to
//! compute with a padding slot, so a wrong view or a padding element that
//! survives into the result is caught.

use std::path::Path;
use std::sync::Arc;

/// (file under testdata, target): the reproductions of issue 14 item 2 and
/// small corpus modules that have tiled copies on tpu.
const CASES: &[(&str, &str)] = &[
    ("relayout/expand_cpu_tiled_operand.hlo", "cpu"),
    ("relayout/expand_cpu_unit_second_tile.hlo", "cpu"),
    ("relayout/expand_cpu_bf16_pairs.hlo", "cpu"),
    ("relayout/expand_cpu_s4_packed_tiles.hlo", "cpu"),
    ("relayout/expand_cpu_s4_packed_copy.hlo", "cpu"),
    ("relayout/expand_tpu_pred_packed.hlo", "tpu"),
    ("relayout/expand_tpu_tilings.hlo", "tpu"),
    ("tpu/retile.hlo", "tpu"),
    ("xla-cpu/cond_switch/before_layout.hlo", "tpu"),
    ("xla-cpu/int8_quantized_matmul/before_layout.hlo", "tpu"),
    ("xla-cpu/pad_ops/before_layout.hlo", "tpu"),
    ("xla-cpu/dynamic_slice_update/before_layout.hlo", "tpu"),
    ("xla-cpu/reductions_mixed/before_layout.hlo", "tpu"),
];

/// `relayout/expand_tpu_bf16_major_dim.hlo` in small (the evaluator of a
/// debug build takes 40 s on its 2^19 elements).
const BF16_MAJOR_DIM: &str = r#"HloModule bf16_major_dim, entry_computation_layout={(bf16[2,8,16,128]{2,1,0,3:T(8,128)(2,1)})->bf16[2,8,16,128]{3,2,1,0:T(8,128)(2,1)}}

ENTRY %main (p: bf16[2,8,16,128]) -> bf16[2,8,16,128] {
  %p = bf16[2,8,16,128]{2,1,0,3:T(8,128)(2,1)} parameter(0)
  ROOT %n = bf16[2,8,16,128]{3,2,1,0:T(8,128)(2,1)} negate(%p)
}
"#;

/// Runs the pipeline with expansion and checks the output against the input;
/// returns how many relayouts were expanded.
fn check(text: &str, name: &str, target_name: &str) -> usize {
    let target = Arc::new(target::load_builtin(target_name).unwrap());
    let mut opts = driver::Options::new(target);
    opts.expand_relayouts = true;
    let out =
        driver::run(text, name, &opts).unwrap_or_else(|e| panic!("{name} on {target_name}: {e}"));
    let expanded = out
        .report
        .relayout()
        .map_or(0, |r| r.count(driver::RelayoutKind::ExpandedRelayout));
    let before = hlo::parse_module(text, name).unwrap();
    let after = hlo::parse_module(out.text(), "out.hlo").unwrap();
    if let Err(e) = interp::check_equivalent(&before, &after, &[1], &interp::Limits::default()) {
        panic!(
            "{name} on {target_name}: the expanded output is not equivalent to the input:\n{e}\n{}",
            out.text()
        );
    }
    expanded
}

#[test]
fn expanded_outputs_are_equivalent_to_their_inputs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    for (file, target_name) in CASES {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let expanded = check(&text, file, target_name);
        assert!(
            expanded > 0,
            "{file} on {target_name}: nothing was expanded"
        );
    }
    assert_eq!(check(BF16_MAJOR_DIM, "bf16_major_dim.hlo", "tpu"), 1);
}
