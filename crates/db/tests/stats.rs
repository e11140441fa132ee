//! The counts over an output module: tile padding is counted once per
//! buffer, so ops that hand on a buffer defined elsewhere add none.

use db::pipeline::ModuleStats;

/// `f32[3,3]` in `T(8,128)` tiles: 4,096 bytes stored for 36 of elements.
const PADDED: u64 = 8 * 128 * 4 - 3 * 3 * 4;

#[test]
fn async_ops_that_hand_on_a_buffer_add_no_padding() {
    let text = r#"HloModule m, entry_computation_layout={(f32[3,3]{1,0:T(8,128)})->f32[3,3]{1,0:T(8,128)}}

%work (p: f32[3,3]) -> f32[3,3] {
  %p = f32[3,3]{1,0:T(8,128)} parameter(0)
  ROOT %n = f32[3,3]{1,0:T(8,128)} negate(%p)
}

ENTRY %e (p0: f32[3,3]) -> f32[3,3] {
  %p0 = f32[3,3]{1,0:T(8,128)} parameter(0)
  %s = ((f32[3,3]{1,0:T(8,128)}), f32[3,3]{1,0:T(8,128)}, u32[]) async-start(%p0), calls=%work
  %u = ((f32[3,3]{1,0:T(8,128)}), f32[3,3]{1,0:T(8,128)}, u32[]) async-update(%s)
  ROOT %d = f32[3,3]{1,0:T(8,128)} async-done(%u)
}
"#;
    let module = hlo::parse_module(text, "m.hlo").expect("parses");
    assert!(
        hlo::verify_module(&module).is_empty(),
        "{:?}",
        hlo::verify_module(&module)
    );
    let stats = ModuleStats::of(&module);
    // Buffers: the entry parameter, the callee's root, and the two arrays
    // async-start defines. The callee's parameter, async-update and
    // async-done hand on buffers defined elsewhere.
    assert_eq!(stats.padding_bytes, 4 * PADDED);
    assert_eq!(stats.instructions, 6);
}
