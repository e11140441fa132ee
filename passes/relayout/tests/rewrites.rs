//! Phases 1 and 2 on hand-laid-out modules (the relayout pass alone):
//! copy-or-bitcast decisions, shared instructions, the entry root, and
//! no-op movements turned into bitcasts. Every bitcast the pass emits is
//! proven by walking every element; every copy, transpose and reshape it
//! keeps is confirmed to move one.

mod common;

use common::*;
use hlo::Opcode;
use relayout::RewriteKind;

fn find<'m>(m: &'m hlo::Module, name: &str) -> &'m hlo::Instruction {
    m.entry_computation()
        .instructions()
        .map(|(_, i)| i)
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no %{name}"))
}

fn operand_names(m: &hlo::Module, name: &str) -> Vec<String> {
    let comp = m.entry_computation();
    let (id, _) = comp
        .instructions()
        .find(|(_, i)| i.name == name)
        .unwrap_or_else(|| panic!("no %{name}"));
    comp.operands(id)
        .iter()
        .map(|&o| comp.inst(o).name.clone())
        .collect()
}

fn rewrite_of<'r>(r: &'r relayout::Report, name: &str) -> &'r relayout::Rewrite {
    r.rewrites
        .iter()
        .find(|w| w.instruction == name)
        .unwrap_or_else(|| panic!("no rewrite for %{name}: {:?}", r.rewrites))
}

fn kind_of(r: &relayout::Report, name: &str) -> RewriteKind {
    rewrite_of(r, name).kind
}

#[test]
fn the_walk_oracle_sees_tiles() {
    // Negative and positive controls for the oracle itself.
    let t = array("f32[8,128]{1,0:T(8,128)}");
    assert_eq!(walk(&Map::Same, &t, &array("f32[8,128]{1,0}")), Ok(true));
    assert_eq!(
        walk(
            &Map::Same,
            &array("f32[3,128]{1,0:T(8,128)}"),
            &array("f32[3,128]{1,0}")
        ),
        Ok(false)
    );
    assert_eq!(
        walk(&Map::RowMajor, &array("f32[2,3]{0,1}"), &array("f32[6]{0}")),
        Ok(false)
    );
    assert_eq!(
        walk(&Map::RowMajor, &array("f32[2,3]{1,0}"), &array("f32[6]{0}")),
        Ok(true)
    );
    assert_eq!(
        walk(
            &Map::Transpose(vec![1, 0]),
            &array("f32[4,8]{1,0}"),
            &array("f32[8,4]{0,1}")
        ),
        Ok(true)
    );
    assert_eq!(
        walk(
            &Map::Transpose(vec![1, 0]),
            &array("f32[4,8]{1,0}"),
            &array("f32[8,4]{1,0}")
        ),
        Ok(false)
    );
    // A large pair is shrunk to one with the same layouts and verdict.
    assert_eq!(
        walk(
            &Map::RowMajor,
            &array("f32[512,4096]{1,0}"),
            &array("f32[512,64,64]{2,1,0}")
        ),
        Ok(true)
    );
    assert_eq!(
        walk(
            &Map::RowMajor,
            &array("f32[512,4096]{0,1}"),
            &array("f32[512,64,64]{2,1,0}")
        ),
        Ok(false)
    );
    // Large tiled pairs too: the stand-in keeps the tiles and each
    // dimension's remainder modulo its tile.
    let (f, t) = shrink(
        &Map::RowMajor,
        &array("f32[4,128,256]{2,1,0:T(8,128)}"),
        &array("f32[512,256]{1,0:T(8,128)}"),
    )
    .unwrap();
    assert!(count(&f.dims) <= WALK_LIMIT, "{f}");
    assert_eq!(
        (f.layout, t.layout),
        (
            array("f32[4,128,256]{2,1,0:T(8,128)}").layout,
            array("f32[512,256]{1,0:T(8,128)}").layout
        )
    );
    assert_eq!(
        walk(
            &Map::RowMajor,
            &array("f32[4,128,256]{2,1,0:T(8,128)}"),
            &array("f32[512,256]{1,0:T(8,128)}")
        ),
        Ok(true)
    );
    // 100 rows are not a whole number of 8-row tiles: merging them moves
    // elements, and the walk must say so (the buffers differ in size too).
    assert_eq!(
        walk(
            &Map::RowMajor,
            &array("f32[4,100,256]{2,1,0:T(8,128)}"),
            &array("f32[400,256]{1,0:T(8,128)}")
        ),
        Ok(false)
    );
    // Same buffer size, elements moved: a transpose {1,0} of a square
    // tiled array kept in the same layout; in the reversed order the
    // tiles cover the same physical dimensions, so nothing moves.
    assert_eq!(
        walk(
            &Map::Transpose(vec![1, 0]),
            &array("f32[256,256]{1,0:T(8,128)}"),
            &array("f32[256,256]{1,0:T(8,128)}")
        ),
        Ok(false)
    );
    assert_eq!(
        walk(
            &Map::Transpose(vec![1, 0]),
            &array("f32[256,256]{1,0:T(8,128)}"),
            &array("f32[256,256]{0,1:T(8,128)}")
        ),
        Ok(true)
    );
    assert_eq!(
        walk(
            &Map::Same,
            &array("f32[64,8,256]{2,1,0:T(8,128)}"),
            &array("f32[64,8,256]{2,1,0:T(*,8,128)}")
        ),
        Ok(true)
    );
}

const HAND: &str = r#"HloModule hand, entry_computation_layout={(f32[8,128]{1,0:T(8,128)}, f32[3,128]{1,0:T(8,128)}, f32[4,8]{1,0}, f32[2,8,128]{2,1,0:T(8,128)}, f32[2,3,128]{2,1,0:T(8,128)})->(f32[8,128]{1,0}, f32[3,128]{1,0}, f32[8,4]{0,1}, f32[8,4]{1,0}, f32[16,128]{1,0:T(8,128)}, f32[6,128]{1,0:T(8,128)}, f32[8,128]{1,0})}

ENTRY %main (p0: f32[8,128], p1: f32[3,128], p2: f32[4,8], p3: f32[2,8,128], p4: f32[2,3,128]) -> (f32[8,128], f32[3,128], f32[8,4], f32[8,4], f32[16,128], f32[6,128], f32[8,128]) {
  %p0 = f32[8,128]{1,0:T(8,128)} parameter(0)
  %p1 = f32[3,128]{1,0:T(8,128)} parameter(1)
  %p2 = f32[4,8]{1,0} parameter(2)
  %p3 = f32[2,8,128]{2,1,0:T(8,128)} parameter(3)
  %p4 = f32[2,3,128]{2,1,0:T(8,128)} parameter(4)
  %cc0 = f32[8,128]{1,0} custom-call(%p0), custom_call_target="foo", operand_layout_constraints={f32[8,128]{1,0}}
  %cc1 = f32[3,128]{1,0} custom-call(%p1), custom_call_target="foo", operand_layout_constraints={f32[3,128]{1,0}}
  %t = f32[8,4]{0,1} transpose(%p2), dimensions={1,0}, metadata={op_name="t"}
  %t2 = f32[8,4]{1,0} transpose(%p2), dimensions={1,0}
  %r = f32[16,128]{1,0:T(8,128)} reshape(%p3)
  %r2 = f32[6,128]{1,0:T(8,128)} reshape(%p4)
  %c = f32[8,128]{1,0} copy(%p0)
  ROOT %out = (f32[8,128]{1,0}, f32[3,128]{1,0}, f32[8,4]{0,1}, f32[8,4]{1,0}, f32[16,128]{1,0:T(8,128)}, f32[6,128]{1,0:T(8,128)}, f32[8,128]{1,0}) tuple(%cc0, %cc1, %t, %t2, %r, %r2, %c)
}
"#;

#[test]
fn copy_or_bitcast_decisions_are_exact_and_tile_aware() {
    let (m, r) = relayout_alone(HAND, "gpu", false);
    // A custom call's constraint met by a tile-aware bitcast, and one that
    // needs a copy because the tiled buffer is padded (4096 vs 1536 bytes).
    assert_eq!(operand_names(&m, "cc0"), ["p0.bitcast"]);
    assert_eq!(find(&m, "p0.bitcast").opcode, Opcode::Bitcast);
    assert_eq!(kind_of(&r, "p0.bitcast"), RewriteKind::InsertedBitcast);
    assert_eq!(operand_names(&m, "cc1"), ["p1.copy"]);
    assert_eq!(find(&m, "p1.copy").opcode, Opcode::Copy);
    let copy = r
        .rewrites
        .iter()
        .find(|w| w.instruction == "p1.copy")
        .expect("copy rewrite");
    assert_eq!(copy.kind, RewriteKind::InsertedCopy);
    assert_eq!(copy.bytes, 3 * 128 * 4);
    assert!(
        copy.why.contains("buffer sizes differ: 4096 vs 1536 bytes"),
        "{}",
        copy.why
    );
    assert!(copy.why.contains("custom call \"foo\""), "{}", copy.why);
    assert_eq!(copy.users, ["operand 0 of %cc1"]);
    // No-op movements became bitcasts, keeping names and metadata.
    assert_eq!(kind_of(&r, "t"), RewriteKind::TransposeToBitcast);
    let t = find(&m, "t");
    assert_eq!(t.opcode, Opcode::Bitcast);
    assert!(t.attrs.get(hlo::KnownAttr::Dimensions).is_none());
    assert!(t.attrs.get(hlo::KnownAttr::Metadata).is_some());
    assert_eq!(kind_of(&r, "r"), RewriteKind::ReshapeToBitcast);
    assert_eq!(kind_of(&r, "c"), RewriteKind::CopyToBitcast);
    // The ones that move data stay.
    assert_eq!(find(&m, "t2").opcode, Opcode::Transpose);
    assert_eq!(find(&m, "r2").opcode, Opcode::Reshape);
    assert_eq!(r.rewrites.len(), 5);
    assert!(
        r.rewrites
            .iter()
            .filter(|w| w.kind.is_bitcast())
            .all(|w| w.bytes == 0)
    );
    // The proofs.
    assert_eq!(prove_bitcasts(&m, &r, &[]), Ok(4));
    assert_eq!(confirm_movements(&m), Ok(3)); // p1.copy, t2, r2
}

const SHARED: &str = r#"HloModule shared

ENTRY %main (p: f32[4,8], q: f32[4,8], u: f32[1,128], v: f32[1,128]) -> (f32[4,8], f32[4,8], f32[4,8], f32[1,128]) {
  %p = f32[4,8]{0,1} parameter(0)
  %q = f32[4,8]{1,0} parameter(1)
  %u = f32[1,128]{0,1} parameter(2)
  %v = f32[1,128]{1,0} parameter(3)
  %a = f32[4,8]{1,0} add(%p, %q)
  %b = f32[4,8]{1,0} multiply(%q, %p)
  %c = f32[4,8]{1,0} custom-call(%p), custom_call_target="lib", operand_layout_constraints={f32[4,8]{1,0}}
  %w = f32[1,128]{1,0} add(%u, %v)
  ROOT %t = (f32[4,8]{1,0}, f32[4,8]{1,0}, f32[4,8]{1,0}, f32[1,128]{1,0}) tuple(%a, %b, %c, %w)
}
"#;

#[test]
fn uses_needing_one_layout_share_one_instruction() {
    let (m, r) = relayout_alone(SHARED, "gpu", false);
    let copies: Vec<_> = r
        .rewrites
        .iter()
        .filter(|w| w.kind == RewriteKind::InsertedCopy)
        .collect();
    assert_eq!(copies.len(), 1, "{:?}", r.rewrites);
    assert_eq!(copies[0].instruction, "p.copy");
    assert_eq!(
        copies[0].users,
        ["operand 0 of %a", "operand 1 of %b", "operand 0 of %c"]
    );
    assert_eq!(operand_names(&m, "a"), ["p.copy", "q"]);
    assert_eq!(operand_names(&m, "b"), ["q", "p.copy"]);
    assert_eq!(operand_names(&m, "c"), ["p.copy"]);
    let count = m
        .entry_computation()
        .instructions()
        .filter(|(_, i)| i.opcode == Opcode::Copy)
        .count();
    assert_eq!(count, 1);
    // Size-1 dimensions do not move bytes: {0,1} and {1,0} of [1,128] are
    // the same buffer, so the elementwise add gets a bitcast.
    assert_eq!(operand_names(&m, "w"), ["u.bitcast", "v"]);
    assert_eq!(kind_of(&r, "u.bitcast"), RewriteKind::InsertedBitcast);
    assert!(kind_of(&r, "p.copy") == RewriteKind::InsertedCopy);
    assert_eq!(prove_bitcasts(&m, &r, &[]), Ok(1));
    assert_eq!(confirm_movements(&m), Ok(1));
}

#[test]
fn the_entry_root_gets_the_entry_layout() {
    let text = r#"HloModule root, entry_computation_layout={(f32[4,8]{1,0}, f32[1,8]{1,0})->(f32[4,8]{0,1}, f32[1,8]{0,1}, f32[4,8]{1,0})}

ENTRY %main (p: f32[4,8], q: f32[1,8]) -> (f32[4,8], f32[1,8], f32[4,8]) {
  %p = f32[4,8]{1,0} parameter(0)
  %q = f32[1,8]{1,0} parameter(1)
  %n = f32[4,8]{1,0} negate(%p)
  ROOT %t = (f32[4,8]{1,0}, f32[1,8]{1,0}, f32[4,8]{1,0}) tuple(%n, %q, %n)
}
"#;
    let (m, r) = relayout_alone(text, "cpu", false);
    let root = m.entry_computation().root().expect("root");
    assert_eq!(
        m.entry_computation().inst(root).name,
        "t",
        "the root tuple is edited in place"
    );
    assert_eq!(operand_names(&m, "t"), ["n.copy", "q.bitcast", "n"]);
    assert_eq!(
        m.entry_computation().inst(root).shape.to_string(),
        "(f32[4,8]{0,1}, f32[1,8]{0,1}, f32[4,8]{1,0})"
    );
    assert_eq!(kind_of(&r, "n.copy"), RewriteKind::InsertedCopy);
    assert_eq!(kind_of(&r, "q.bitcast"), RewriteKind::InsertedBitcast);
    let why = &r
        .rewrites
        .iter()
        .find(|w| w.instruction == "n.copy")
        .expect("copy")
        .why;
    assert!(
        why.contains("the entry result, element 0") && why.contains("entry computation layout"),
        "{why}"
    );
    assert_eq!(prove_bitcasts(&m, &r, &[]), Ok(1));

    // An array root is replaced by its copy.
    let text = r#"HloModule root2, entry_computation_layout={(f32[4,8]{1,0})->f32[4,8]{0,1}}

ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8]{1,0} parameter(0)
  ROOT %n = f32[4,8]{1,0} negate(%p)
}
"#;
    let (m, r) = relayout_alone(text, "cpu", false);
    let comp = m.entry_computation();
    let root = comp.root().expect("root");
    assert_eq!(comp.inst(root).name, "n.copy");
    assert_eq!(comp.inst(root).shape.to_string(), "f32[4,8]{0,1}");
    assert_eq!(r.rewrites.len(), 1);
    assert_eq!(r.rewrites[0].users, ["the entry result"]);
}

#[test]
fn broadcasts_read_their_operand_in_the_restricted_order() {
    let text = r#"HloModule bcast

ENTRY %main (p: f32[4,8], s: f32[8]) -> (f32[4,8,2], f32[4,8,2]) {
  %p = f32[4,8]{0,1} parameter(0)
  %s = f32[8]{0} parameter(1)
  %b = f32[4,8,2]{2,1,0} broadcast(%p), dimensions={0,1}
  %c = f32[4,8,2]{0,1,2} broadcast(%p), dimensions={0,1}
  ROOT %t = (f32[4,8,2]{2,1,0}, f32[4,8,2]{0,1,2}) tuple(%b, %c)
}
"#;
    let (m, r) = relayout_alone(text, "gpu", false);
    // %b's order restricted to {0,1} is {1,0}: %p ({0,1}) is copied; %c's
    // is {0,1}, which %p already has.
    assert_eq!(operand_names(&m, "b"), ["p.copy"]);
    assert_eq!(operand_names(&m, "c"), ["p"]);
    assert_eq!(r.rewrites.len(), 1);
    assert!(
        r.rewrites[0].why.contains("broadcast"),
        "{}",
        r.rewrites[0].why
    );
    assert_eq!(r.rewrites[0].to.to_string(), "f32[4,8]{1,0}");
}

#[test]
fn target_rules_are_needs_too() {
    // XLA CPU: dots read row-major operands (eigen-dot), and every other
    // operand is row-major by default unless a layout-preserving op says
    // otherwise.
    let text = r#"HloModule dot

ENTRY %main (a: f32[16,32], b: f32[32,8]) -> f32[16,8] {
  %a = f32[16,32]{0,1} parameter(0)
  %b = f32[32,8]{1,0} parameter(1)
  ROOT %d = f32[16,8]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;
    let (m, r) = relayout_alone(text, "cpu", false);
    assert_eq!(operand_names(&m, "d"), ["a.copy", "b"]);
    assert!(
        r.rewrites[0].why.contains("rule 'eigen-dot'"),
        "{}",
        r.rewrites[0].why
    );
    assert_eq!(r.rewrites[0].bytes, 16 * 32 * 4);
}

#[test]
fn the_pass_is_idempotent() {
    for text in [HAND, SHARED] {
        let (mut m, first) = relayout_alone(text, "gpu", true);
        assert!(!first.rewrites.is_empty());
        let printed = hlo::print_module(&m);
        let again = relayout::run(
            &mut m,
            &target("gpu"),
            &relayout::Options {
                expand_relayouts: true,
            },
        )
        .expect("run");
        assert!(again.rewrites.is_empty(), "{:?}", again.rewrites);
        assert_eq!(hlo::print_module(&m), printed);
    }
}

#[test]
fn invalid_needs_are_errors_not_panics() {
    // The constraint's layout has the wrong rank for the operand.
    let text = r#"HloModule bad

ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8]{1,0} parameter(0)
  ROOT %c = f32[4,8]{1,0} custom-call(%p), custom_call_target="lib", operand_layout_constraints={f32[4,8,2]{0,1,2}}
}
"#;
    let mut m = parse(text);
    let err = relayout::run(&mut m, &target("gpu"), &relayout::Options::default())
        .expect_err("an invalid need");
    assert!(err.to_string().contains("not a valid layout"), "{err}");
}

#[test]
fn run_computation_works_on_one_computation() {
    let mut m = parse(SHARED);
    let facts = relayout::facts_for(&m, m.entry);
    let entry = m.entry;
    let rewrites = relayout::run_computation(
        &facts,
        m.computation_mut(entry),
        &target("gpu"),
        &relayout::Options::default(),
    )
    .expect("run");
    assert_eq!(rewrites.len(), 2);
    assert!(rewrites.iter().all(|w| w.computation == "main"));
}

#[test]
fn a_change_of_memory_space_is_never_a_bitcast() {
    // Same bytes, other memory: the bitcast test compares positions only,
    // so the pass keeps the copy.
    let text = r#"HloModule mem

ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8]{1,0} parameter(0)
  ROOT %c = f32[4,8]{1,0:S(1)} copy(%p)
}
"#;
    let (m, r) = relayout_alone(text, "gpu", true);
    assert!(r.rewrites.is_empty(), "{:?}", r.rewrites);
    assert_eq!(find(&m, "c").opcode, Opcode::Copy);
}

#[test]
fn reports_of_one_movement_share_their_shapes_and_sentence() {
    // Two reshapes of the same shapes and one transpose: the reshapes'
    // reports hold one copy of their shapes and sentence between them
    // (a session keeps every report), the transpose's its own.
    let text = r#"HloModule shared_movements

ENTRY %main (p: f32[4,8], q: f32[4,8]) -> (f32[32], f32[32], f32[8,4]) {
  %p = f32[4,8]{1,0} parameter(0)
  %q = f32[4,8]{1,0} parameter(1)
  %a = f32[32]{0} reshape(%p)
  %b = f32[32]{0} reshape(%q)
  %t = f32[8,4]{0,1} transpose(%p), dimensions={1,0}
  ROOT %out = (f32[32]{0}, f32[32]{0}, f32[8,4]{0,1}) tuple(%a, %b, %t)
}
"#;
    let (_, r) = relayout_alone(text, "cpu", false);
    let report = |name: &str| rewrite_of(&r, name);
    let (a, b, t) = (report("a"), report("b"), report("t"));
    assert_eq!(a.kind, RewriteKind::ReshapeToBitcast);
    assert_eq!(b.kind, RewriteKind::ReshapeToBitcast);
    assert_eq!(t.kind, RewriteKind::TransposeToBitcast);
    assert_eq!((a.operand.as_str(), b.operand.as_str()), ("p", "q"));
    assert!(std::sync::Arc::ptr_eq(&a.from, &b.from));
    assert!(std::sync::Arc::ptr_eq(&a.to, &b.to));
    assert!(std::sync::Arc::ptr_eq(&a.why, &b.why));
    assert!(!std::sync::Arc::ptr_eq(&a.from, &t.from));
    assert!(a.why.contains("moves no byte"), "{}", a.why);
    assert_eq!(a.from.to_string(), "f32[4,8]{1,0}");
    assert_eq!(a.to.to_string(), "f32[32]{0}");
}

#[test]
fn reports_of_one_movement_share_it_across_computations() {
    // The same reshape in two computations: one copy of its shapes and
    // sentence while both reports live (a module of many small
    // computations repeats a few movements in each).
    let text = r#"HloModule across

%f (x: f32[4,8]) -> f32[32] {
  %x = f32[4,8]{1,0} parameter(0)
  ROOT %inner = f32[32]{0} reshape(%x)
}

ENTRY %main (p: f32[4,8]) -> (f32[32], f32[32]) {
  %p = f32[4,8]{1,0} parameter(0)
  %outer = f32[32]{0} reshape(%p)
  %c = f32[32]{0} call(%p), to_apply=%f
  ROOT %out = (f32[32]{0}, f32[32]{0}) tuple(%outer, %c)
}
"#;
    let (_, r) = relayout_alone(text, "cpu", false);
    let report = |name: &str| rewrite_of(&r, name);
    let (inner, outer) = (report("inner"), report("outer"));
    assert_eq!(
        (inner.computation.as_str(), outer.computation.as_str()),
        ("f", "main")
    );
    assert!(std::sync::Arc::ptr_eq(&inner.from, &outer.from));
    assert!(std::sync::Arc::ptr_eq(&inner.to, &outer.to));
    assert!(std::sync::Arc::ptr_eq(&inner.why, &outer.why));
}
