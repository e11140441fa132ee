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
    assert_eq!(
        (w.from.to_string(), w.to.to_string()),
        (from.to_string(), to.to_string())
    );
    // The chain, executed, lands every element where TO puts it.
    prove_bitcasts(&m, &r, &[])
        .unwrap_or_else(|e| panic!("{from} -> {to}: {e}\n{}", hlo::print_module(&m)));
    // The copy kept its name and metadata as the last step.
    let comp = m.entry_computation();
    let root = comp.inst(comp.root().expect("root"));
    assert_eq!(root.name, "x");
    assert!(root.attrs.get(hlo::KnownAttr::Metadata).is_some());
    assert_eq!(root.shape.to_string(), to);
    // Bytes: the sum of the data-moving steps, padding included.
    let moved: u64 = w
        .steps
        .iter()
        .filter(|s| s.op != "bitcast")
        .map(|s| s.bytes)
        .sum();
    assert_eq!(w.bytes, moved);
    (m, r)
}

#[test]
fn untiled_to_tiled_pads_splits_transposes() {
    let (m, r) = expand("f32[3,200]{1,0}", "f32[3,200]{1,0:T(8,128)}");
    assert_eq!(ops(&m), ["pad", "bitcast", "transpose", "bitcast"]);
    let text = hlo::print_module(&m);
    assert!(text.contains("%x.zero = f32[] constant(0)"), "{text}");
    assert!(
        text.contains("%x.pad = f32[8,256]{1,0} pad(%p, %x.zero), padding=0_5x0_56"),
        "{text}"
    );
    assert!(
        text.contains(
            "%x.transpose = f32[1,2,8,128]{3,2,1,0} transpose(%x.bitcast), dimensions={0,2,1,3}"
        ),
        "{text}"
    );
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
    let (m, _) = expand(
        "bf16[16,256]{1,0:T(8,128)}",
        "bf16[16,256]{1,0:T(8,128)(2,1)}",
    );
    assert_eq!(ops(&m), ["bitcast", "transpose", "bitcast"]);
    // Padding on both sides: 3 rows pad to 8 and to 4.
    expand("f32[3,200]{1,0:T(8,128)}", "f32[3,200]{1,0:T(4,128)}");
    expand("f32[3,200]{1,0:T(8,128)}", "f32[3,200]{0,1:T(8,128)}");
}

#[test]
fn a_tiled_copy_that_only_drops_padding_free_tiles_is_a_bitcast() {
    // Phase 2 turns it into a bitcast before expansion looks at it.
    let (m, r) = relayout_alone(
        &copy_module("f32[8,128]{1,0:T(8,128)}", "f32[8,128]{1,0}"),
        "gpu",
        true,
    );
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
    let layouts2 = [
        "{1,0}",
        "{0,1}",
        "{1,0:T(2,2)}",
        "{1,0:T(8,128)}",
        "{0,1:T(8,128)}",
        "{1,0:T(4,128)}",
        "{1,0:T(8,128)(2,1)}",
    ];
    let layouts3 = [
        "{2,1,0}",
        "{0,1,2}",
        "{2,1,0:T(8,128)}",
        "{2,0,1:T(2,2)}",
        "{2,1,0:T(4,128)}",
    ];
    let mut expanded = 0;
    for d in dims {
        let rank = d.matches(',').count() + 1;
        let layouts: &[&str] = if rank == 2 { &layouts2 } else { &layouts3 };
        for ty in ["f32", "bf16"] {
            for a in layouts {
                for b in layouts {
                    let (from, to) = (format!("{ty}{d}{a}"), format!("{ty}{d}{b}"));
                    let (fa, ta) = (array(&from), array(&to));
                    if fa.validate().is_err() || ta.validate().is_err() || !changes_tiling(&fa, &ta)
                    {
                        continue;
                    }
                    let text = copy_module(&from, &to);
                    let (m, r) = relayout_alone(&text, "gpu", true);
                    assert!(no_copy_changes_tiling(&m), "{from} -> {to}");
                    prove_bitcasts(&m, &r, &[]).unwrap_or_else(|e| {
                        panic!("{from} -> {to}: {e}\n{}", hlo::print_module(&m))
                    });
                    if r.count(RewriteKind::ExpandedRelayout) == 1 {
                        expanded += 1;
                    } else {
                        assert_eq!(
                            r.count(RewriteKind::CopyToBitcast),
                            1,
                            "{from} -> {to}: {:?}",
                            r.rewrites
                        );
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

// ---------------------------------------------------------------------------
// Every expansion the plans produce passes the layout verifier.

use proptest::prelude::*;
use shape::{ArrayShape, Layout, PrimitiveType, Tile};

/// An element type and the element sizes its layouts may carry (0: none).
fn element() -> impl Strategy<Value = (PrimitiveType, Vec<i64>)> {
    prop_oneof![
        3 => Just((PrimitiveType::F32, vec![0])),
        3 => Just((PrimitiveType::Bf16, vec![0])),
        1 => Just((PrimitiveType::S8, vec![0])),
        2 => Just((PrimitiveType::S4, vec![4, 0])),
        1 => Just((PrimitiveType::Pred, vec![0, 8])),
        1 => Just((PrimitiveType::U2, vec![2])),
    ]
}

/// One tile level over `rank` dimensions: sizes 1..=4, sometimes `*`.
fn level(rank: usize) -> impl Strategy<Value = Tile> {
    (1..=rank.max(1)).prop_flat_map(|len| {
        prop::collection::vec(prop_oneof![6 => 1i64..=4, 1 => Just(Tile::COMBINE)], len).prop_map(
            |mut v| {
                if let Some(last) = v.last_mut()
                    && *last == Tile::COMBINE
                {
                    *last = 2;
                }
                Tile { dims: v.into() }
            },
        )
    })
}

/// Tiles for a shape of `rank`: none; TPU's families in small (a 2-d tile
/// with a repeated `(c,1)` tile of it, as in `T(8,128)(2,1)` or
/// `T(8,128)(4,1)`; a rank-1 tile with two more, as in `T(256)(128)(2,1)`;
/// `T(1,b)`); or up to three random levels.
fn tiles(rank: usize) -> BoxedStrategy<Vec<Tile>> {
    let t = |d: &[i64]| Tile {
        dims: d.iter().copied().collect(),
    };
    let mut families = vec![(2, Just(Vec::new()).boxed())];
    if rank >= 2 {
        families.push((
            3,
            (
                prop_oneof![Just(1i64), Just(2), Just(4)],
                prop_oneof![Just(2i64), Just(4)],
                prop_oneof![Just(1i64), Just(2), Just(4)],
            )
                .prop_map(move |(a, b, c)| {
                    let mut v = vec![t(&[a, b])];
                    if c > 1 && a % c == 0 {
                        v.push(t(&[c, 1]));
                    }
                    v
                })
                .boxed(),
        ));
    }
    families.push((
        1,
        (prop_oneof![Just(4i64), Just(8)], Just(2i64))
            .prop_map(move |(m, n)| vec![t(&[m]), t(&[n]), t(&[2, 1])])
            .boxed(),
    ));
    let random = level(rank).prop_flat_map(move |a| {
        let r1 = rank - a.dims.len() + 2 * a.sized_entries();
        (Just(a), prop::option::of(level(r1)), any::<bool>()).prop_flat_map(move |(a, b, third)| {
            let a = a.clone();
            match b {
                None => Just(vec![a]).boxed(),
                Some(b) => {
                    let r2 = r1 - b.dims.len() + 2 * b.sized_entries();
                    let (a, b) = (a.clone(), b.clone());
                    if third {
                        level(r2.min(2))
                            .prop_map(move |c| vec![a.clone(), b.clone(), c])
                            .boxed()
                    } else {
                        Just(vec![a, b]).boxed()
                    }
                }
            }
        })
    });
    families.push((3, random.boxed()));
    prop::strategy::Union::new_weighted(families).boxed()
}

fn layout(dims: Vec<i64>, sizes: Vec<i64>) -> impl Strategy<Value = Layout> {
    let r = dims.len();
    (
        Just((0..r).collect::<Vec<usize>>()).prop_shuffle(),
        tiles(r),
        prop::sample::select(sizes),
    )
        .prop_map(|(perm, tiles, e)| {
            let mut l = Layout::new(&perm).with_tiles(&tiles);
            l.element_size_in_bits = e;
            l
        })
}

/// A copy between two random layouts of one array.
fn copy_pair() -> impl Strategy<Value = (ArrayShape, ArrayShape)> {
    (
        element(),
        prop::collection::vec(prop_oneof![1i64..=6, Just(8)], 1..=3),
    )
        .prop_flat_map(|((t, sizes), dims)| {
            let (d1, d2) = (dims.clone(), dims.clone());
            (layout(dims.clone(), sizes.clone()), layout(dims, sizes)).prop_map(move |(a, b)| {
                (
                    ArrayShape::with_layout(t, &d1, a),
                    ArrayShape::with_layout(t, &d2, b),
                )
            })
        })
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// For random shapes, element types (sub-byte ones packed or not) and
/// tilings (repeated tiles, `*`, padding), the expansion of a copy passes
/// the layout verifier on every built-in target: each of its bitcasts is
/// proven (`prove_bitcast`) and each step meets the target's needs. The
/// chain, executed, is the copy.
#[test]
fn every_expansion_passes_the_layout_verifier() {
    #[derive(Debug, Default)]
    struct Tally {
        expansions: usize,
        repeated_tiles: usize,
        sub_byte: usize,
        element_size_changes: usize,
        bitcasts: usize,
    }
    let tally = std::cell::RefCell::new(Tally::default());
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let result = runner.run(&copy_pair(), |(from, to)| {
        if from.validate().is_err() || to.validate().is_err() || !changes_tiling(&from, &to) {
            return Ok(());
        }
        for t in ["cpu", "gpu", "tpu"] {
            let (m, r) = relayout_alone(&copy_module(&from.to_string(), &to.to_string()), t, true);
            prop_assert!(no_copy_changes_tiling(&m));
            let problems = layout_assignment::check_layouts(&m, Some(&target(t)));
            prop_assert!(
                problems.is_empty(),
                "{} -> {} on {}: {:?}\n{}",
                from,
                to,
                t,
                problems,
                hlo::print_module(&m)
            );
            let proven = prove_bitcasts(&m, &r, &[]).map_err(|e| {
                TestCaseError::fail(format!(
                    "{from} -> {to} on {t}: {e}\n{}",
                    hlo::print_module(&m)
                ))
            })?;
            let mut k = tally.borrow_mut();
            k.bitcasts += proven;
            if t == "tpu" && r.count(RewriteKind::ExpandedRelayout) == 1 {
                let levels = |a: &ArrayShape| a.layout.as_ref().map_or(0, |l| l.tiles.len());
                k.expansions += 1;
                k.repeated_tiles += usize::from(levels(&from) > 1 || levels(&to) > 1);
                k.sub_byte += usize::from(from.element_storage_bits() < 8);
                k.element_size_changes +=
                    usize::from(from.element_storage_bits() != to.element_storage_bits());
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let k = tally.into_inner();
    eprintln!("{k:?}");
    assert!(k.expansions * 2 >= config().cases as usize, "{k:?}");
    assert!(
        k.repeated_tiles * 5 >= k.expansions
            && k.sub_byte * 10 >= k.expansions
            && k.element_size_changes * 20 >= k.expansions,
        "{k:?}"
    );
}
