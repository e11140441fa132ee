//! Phase 3: copies between tilings expanded into pad / bitcast / transpose /
//! slice instructions. Each expansion is executed on a numbered buffer by a
//! brute-force evaluator and must produce exactly the copy's result buffer;
//! afterwards no copy in the module changes tiling.

mod common;

use common::*;
use hlo::Opcode;
use relayout::RewriteKind;
use relayout::expand::changes_tiling;

/// A module copying a FROM parameter into TO and returning it.
fn copy_module(from: &str, to: &str) -> String {
    let f = array(from);
    let t = array(to);
    format!(
        "HloModule expand, entry_computation_layout={{({f})->{t}}}\n\nENTRY %main (p: {f}) -> {t} {{\n  %p = {f} parameter(0)\n  ROOT %x = {t} copy(%p), metadata={{op_name=\"x\"}}\n}}\n"
    )
}

fn ops(m: &hlo::Module) -> Vec<&'static str> {
    m.entry_computation()
        .instructions()
        .filter(|(_, i)| !matches!(i.opcode, Opcode::Parameter | Opcode::Constant))
        .map(|(_, i)| i.opcode.name())
        .collect()
}

fn no_copy_changes_tiling(m: &hlo::Module) -> bool {
    m.computations.iter().all(|c| {
        c.instructions().all(|(id, i)| {
            if i.opcode != Opcode::Copy {
                return true;
            }
            let o = c.operands(id)[0];
            match (c.inst(o).shape.as_array(), i.shape.as_array()) {
                (Some(a), Some(b)) => !changes_tiling(a, b),
                _ => true,
            }
        })
    })
}

/// Expands one copy, checks it by execution, returns the module and report.
fn expand(from: &str, to: &str) -> (hlo::Module, relayout::Report) {
    let text = copy_module(from, to);
    let (m, r) = relayout_alone(&text, "gpu", true);
    assert!(no_copy_changes_tiling(&m), "{}", hlo::print_module(&m));
    assert_eq!(r.rewrites.len(), 1, "{:?}", r.rewrites);
    let w = &r.rewrites[0];
    assert_eq!(w.kind, RewriteKind::ExpandedRelayout);
    assert_eq!((w.from.to_string(), w.to.to_string()), (from.to_string(), to.to_string()));
    // The chain, executed, lands every element where TO puts it.
    prove_bitcasts(&m, &r, &[]).unwrap_or_else(|e| panic!("{from} -> {to}: {e}\n{}", hlo::print_module(&m)));
    // The copy kept its name and metadata as the last step.
    let comp = m.entry_computation();
    let root = comp.inst(comp.root().expect("root"));
    assert_eq!(root.name, "x");
    assert!(root.attrs.get(hlo::KnownAttr::Metadata).is_some());
    assert_eq!(root.shape.to_string(), to);
    // Bytes: the sum of the data-moving steps, padding included.
    let moved: u64 = w.steps.iter().filter(|s| s.op != "bitcast").map(|s| s.bytes).sum();
    assert_eq!(w.bytes, moved);
    (m, r)
}

#[test]
fn untiled_to_tiled_pads_splits_transposes() {
    let (m, r) = expand("f32[3,200]{1,0}", "f32[3,200]{1,0:T(8,128)}");
    assert_eq!(ops(&m), ["pad", "bitcast", "transpose", "bitcast"]);
    let text = hlo::print_module(&m);
    assert!(text.contains("%zero.f32 = f32[] constant(0)"), "{text}");
    assert!(text.contains("%x.pad = f32[8,256]{1,0} pad(%p, %zero.f32), padding=0_5x0_56"), "{text}");
    assert!(text.contains("%x.transpose = f32[1,2,8,128]{3,2,1,0} transpose(%x.bitcast), dimensions={0,2,1,3}"), "{text}");
    // 8x256 floats padded, then 8x256 floats transposed.
    assert_eq!(r.rewrites[0].bytes, 2 * 8 * 256 * 4);
}

#[test]
fn tiled_to_untiled_slices_the_padding_away() {
    let (m, _) = expand("f32[3,200]{1,0:T(8,128)}", "f32[3,200]{1,0}");
    assert_eq!(ops(&m), ["bitcast", "transpose", "bitcast", "slice"]);
    let text = hlo::print_module(&m);
    assert!(text.contains("slice={[0:3], [0:200]}"), "{text}");
}

#[test]
fn tiled_to_tiled() {
    let (m, _) = expand("f32[16,256]{1,0:T(8,128)}", "f32[16,256]{1,0:T(4,128)}");
    assert!(ops(&m).contains(&"transpose"));
    let (m, _) = expand("bf16[16,256]{1,0:T(8,128)}", "bf16[16,256]{1,0:T(8,128)(2,1)}");
    assert_eq!(ops(&m), ["bitcast", "transpose", "bitcast"]);
    // Padding on both sides: 3 rows pad to 8 and to 4.
    expand("f32[3,200]{1,0:T(8,128)}", "f32[3,200]{1,0:T(4,128)}");
    expand("f32[3,200]{1,0:T(8,128)}", "f32[3,200]{0,1:T(8,128)}");
}

#[test]
fn a_tiled_copy_that_only_drops_padding_free_tiles_is_a_bitcast() {
    // Phase 2 turns it into a bitcast before expansion looks at it.
    let (m, r) = relayout_alone(&copy_module("f32[8,128]{1,0:T(8,128)}", "f32[8,128]{1,0}"), "gpu", true);
    assert_eq!(ops(&m), ["bitcast"]);
    assert_eq!(r.rewrites[0].kind, RewriteKind::CopyToBitcast);
}

#[test]
fn copies_that_keep_their_tiling_stay_copies() {
    let (m, r) = relayout_alone(&copy_module("f32[4,8]{1,0}", "f32[4,8]{0,1}"), "gpu", true);
    assert_eq!(ops(&m), ["copy"]);
    assert!(r.rewrites.is_empty());
}

#[test]
fn many_tilings_expand_correctly() {
    let dims = ["[3,5]", "[8,128]", "[3,200]", "[16,130]", "[2,3,130]"];
    let layouts2 = ["{1,0}", "{0,1}", "{1,0:T(2,2)}", "{1,0:T(8,128)}", "{0,1:T(8,128)}", "{1,0:T(4,128)}", "{1,0:T(8,128)(2,1)}"];
    let layouts3 = ["{2,1,0}", "{0,1,2}", "{2,1,0:T(8,128)}", "{2,0,1:T(2,2)}", "{2,1,0:T(4,128)}"];
    let mut expanded = 0;
    for d in dims {
        let rank = d.matches(',').count() + 1;
        let layouts: &[&str] = if rank == 2 { &layouts2 } else { &layouts3 };
        for ty in ["f32", "bf16"] {
            for a in layouts {
                for b in layouts {
                    let (from, to) = (format!("{ty}{d}{a}"), format!("{ty}{d}{b}"));
                    let (fa, ta) = (array(&from), array(&to));
                    if fa.validate().is_err() || ta.validate().is_err() || !changes_tiling(&fa, &ta) {
                        continue;
                    }
                    let text = copy_module(&from, &to);
                    let (m, r) = relayout_alone(&text, "gpu", true);
                    assert!(no_copy_changes_tiling(&m), "{from} -> {to}");
                    prove_bitcasts(&m, &r, &[]).unwrap_or_else(|e| panic!("{from} -> {to}: {e}\n{}", hlo::print_module(&m)));
                    if r.count(RewriteKind::ExpandedRelayout) == 1 {
                        expanded += 1;
                    } else {
                        assert_eq!(r.count(RewriteKind::CopyToBitcast), 1, "{from} -> {to}: {:?}", r.rewrites);
                    }
                }
            }
        }
    }
    eprintln!("{expanded} tiled copies expanded and executed");
    assert!(expanded > 100, "only {expanded} expansions");
}

#[test]
fn the_copy_inserted_for_a_use_is_expanded_too() {
    let text = r#"HloModule use

ENTRY %main (p: f32[3,128]) -> f32[3,128] {
  %p = f32[3,128]{1,0:T(8,128)} parameter(0)
  ROOT %c = f32[3,128]{1,0} custom-call(%p), custom_call_target="lib", operand_layout_constraints={f32[3,128]{1,0}}
}
"#;
    let (m, r) = relayout_alone(text, "gpu", true);
    assert_eq!(r.count(RewriteKind::InsertedCopy), 1);
    assert_eq!(r.count(RewriteKind::ExpandedRelayout), 1);
    assert!(no_copy_changes_tiling(&m));
    assert_eq!(prove_bitcasts(&m, &r, &[]).map(|n| n > 0), Ok(true));
}
