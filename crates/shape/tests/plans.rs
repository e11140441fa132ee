//! Relayout plans, executed step by step on physical buffers by a small
//! brute-force evaluator (pad / transpose / slice on the logical array,
//! bitcast = the same bytes), must produce exactly TO's buffer: every
//! element at its slot (padding slots unconstrained).

mod common;

use common::*;
use proptest::prelude::*;
use shape::{
    ArrayShape, Plan, Shape, StepOp, is_bitcast, parse_shape, physical_view_is_bitcast,
    relayout_plan, storage_size,
};

fn array(text: &str) -> ArrayShape {
    match parse_shape(text) {
        Ok(Shape::Array(a)) => a,
        other => panic!("{text}: {other:?}"),
    }
}

/// The logical array a buffer holds under `shape`.
fn read(shape: &ArrayShape, buf: &[Option<u64>]) -> Nd {
    let (at, _) = slots(shape);
    Nd {
        dims: shape.dims.to_vec(),
        data: at.iter().map(|&s| buf[s as usize]).collect(),
    }
}

/// Runs the plan on FROM's numbered buffer; checks every bitcast on the way.
fn execute(plan: &Plan) -> Result<Vec<Option<u64>>, String> {
    let mut buf = materialize(&plan.from, &Nd::numbered(&plan.from.dims));
    let mut cur = plan.from.clone();
    for step in &plan.steps {
        let out = &step.shape;
        buf = match &step.op {
            StepOp::Bitcast => {
                let (a, b) = (
                    storage_size(&cur).map_err(|e| e.to_string())?,
                    storage_size(out).map_err(|e| e.to_string())?,
                );
                if a.bytes != b.bytes || a.element_bits != b.element_bits {
                    return Err(format!("bitcast {cur} -> {out} changes the size"));
                }
                // Every bitcast is proven by the exact algebra: a layout
                // change or reshape (between two plain row-major views, the
                // split and merge steps), a transpose (an untiled FROM or TO
                // and its physical order), or a physical view (into and out
                // of a tiled FROM and TO).
                let v = is_bitcast(&cur, out).map_err(|e| e.to_string())?;
                if !v.bitcast
                    && shape::facts::deduce_transpose_dimensions_for_bitcast(&cur, out).is_none()
                {
                    let w = physical_view_is_bitcast(&cur, out).map_err(|e| e.to_string())?;
                    if !w.bitcast {
                        return Err(format!(
                            "bitcast {cur} -> {out} is not proven: {}; {}",
                            v.reason, w.reason
                        ));
                    }
                }
                // Equal bytes with sub-byte elements may still differ in
                // slot count (3 vs 4 packed s4 fill 2 bytes): the extra
                // slots are padding on both sides.
                let mut buf = buf;
                if buf.iter().skip(b.slots as usize).any(Option::is_some) {
                    return Err(format!("bitcast {cur} -> {out} drops an element"));
                }
                buf.resize(b.slots as usize, None);
                buf
            }
            StepOp::Transpose { dims } => materialize(out, &read(&cur, &buf).transpose(dims)),
            StepOp::Copy => {
                if cur.dims != out.dims
                    || layout_of(&cur).tiles.len() + layout_of(out).tiles.len() > 0
                {
                    return Err(format!(
                        "copy {cur} -> {out} is not between two untiled views of one array"
                    ));
                }
                materialize(out, &read(&cur, &buf))
            }
            StepOp::Slice(dims) => {
                if dims.iter().any(|d| d.start != 0 || d.stride != 1) {
                    return Err("unexpected slice start or stride".into());
                }
                let limit: Vec<i64> = dims.iter().map(|d| d.limit).collect();
                if limit[..] != out.dims[..] {
                    return Err("slice limit does not match its shape".into());
                }
                materialize(out, &read(&cur, &buf).slice_to(&limit))
            }
            StepOp::Pad(dims) => {
                if dims.iter().any(|d| d.low != 0 || d.interior != 0) {
                    return Err("unexpected low or interior padding".into());
                }
                if cur
                    .dims
                    .iter()
                    .zip(dims)
                    .map(|(d, p)| d + p.high)
                    .ne(out.dims.iter().copied())
                {
                    return Err("padding does not match its shape".into());
                }
                materialize(out, &read(&cur, &buf).pad_to(&out.dims))
            }
        };
        cur = out.clone();
    }
    Ok(buf)
}

/// The plan from `from` to `to` is correct: it ends in TO and every element
/// lands where TO puts it.
fn check_plan(from: &ArrayShape, to: &ArrayShape) -> Result<Plan, String> {
    let plan = relayout_plan(from, to).map_err(|e| e.to_string())?;
    check_steps(from, to, plan)
}

/// The same for a plan that works on unpacked elements: besides, every
/// pad, transpose and slice reads elements of the type's default width, and
/// pads and slices (which keep their layout) write them too.
fn check_plan_unpacked(from: &ArrayShape, to: &ArrayShape) -> Result<Plan, String> {
    let plan = shape::relayout_plan_at(from, to, 0).map_err(|e| e.to_string())?;
    let width = from.element_type.default_storage_bits().unwrap_or(8) as u64;
    let mut cur = plan.from.clone();
    for s in &plan.steps {
        let reads = matches!(
            s.op,
            StepOp::Pad(_) | StepOp::Transpose { .. } | StepOp::Slice(_)
        );
        let keeps = matches!(s.op, StepOp::Pad(_) | StepOp::Slice(_));
        if (reads && cur.element_storage_bits() != width)
            || (keeps && s.shape.element_storage_bits() != width)
        {
            return Err(format!(
                "{from} -> {to}: {cur} -> {} is not at {width} bits:\n{plan}",
                s.shape
            ));
        }
        cur = s.shape.clone();
    }
    check_steps(from, to, plan)
}

fn check_steps(from: &ArrayShape, to: &ArrayShape, plan: Plan) -> Result<Plan, String> {
    let last = plan.steps.last().map(|s| &s.shape).unwrap_or(&plan.from);
    let to_full = ArrayShape {
        layout: Some(layout_of(to).into()),
        ..to.clone()
    };
    if *last != to_full {
        return Err(format!("plan ends in {last}, not {to}"));
    }
    let buf = execute(&plan)?;
    let (at, len) = slots(to);
    if buf.len() != len {
        return Err(format!(
            "final buffer has {} slots, TO has {len}",
            buf.len()
        ));
    }
    for (l, &s) in at.iter().enumerate() {
        if buf[s as usize] != Some(l as u64) {
            return Err(format!(
                "{from} -> {to}: element #{l} wrong at slot {s}:\n{plan}"
            ));
        }
    }
    Ok(plan)
}

/// The plan's ops in order, e.g. "bitcast transpose".
fn ops(plan: &Plan) -> String {
    plan.steps
        .iter()
        .map(|s| match s.op {
            StepOp::Pad(_) => "pad",
            StepOp::Bitcast => "bitcast",
            StepOp::Transpose { .. } => "transpose",
            StepOp::Slice(_) => "slice",
            StepOp::Copy => "copy",
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn plan_shapes_for_the_usual_cases() {
    for (from, to, want) in [
        // Untiled -> tiled: pad, bitcast-split, transpose, bitcast.
        (
            "f32[3,5]{1,0}",
            "f32[3,5]{1,0:T(2,2)}",
            "pad bitcast transpose bitcast",
        ),
        // Tiled -> untiled: bitcast to the physical view, transpose, merge, slice.
        (
            "f32[3,5]{1,0:T(2,2)}",
            "f32[3,5]{1,0}",
            "bitcast transpose bitcast slice",
        ),
        // minor_to_major only: one transpose.
        ("f32[3,5]{1,0}", "f32[3,5]{0,1}", "transpose bitcast"),
        // Tiled -> other tiling.
        (
            "f32[3,5]{1,0:T(2,4)}",
            "f32[3,5]{1,0:T(6,2)}",
            "bitcast transpose bitcast slice pad bitcast transpose bitcast",
        ),
        // ... where the slice is subsumed when the padding only grows.
        (
            "f32[3,5]{1,0:T(2,2)}",
            "f32[3,5]{1,0:T(2,4)}",
            "bitcast transpose bitcast pad bitcast transpose bitcast",
        ),
        // Same padded extents: one transpose of the digits.
        (
            "f32[3,5]{1,0:T(2,2)}",
            "f32[3,5]{0,1:T(2,2)}",
            "bitcast transpose bitcast",
        ),
        // A second tile level that divides the first: one transpose.
        (
            "bf16[16,256]{1,0:T(8,128)}",
            "bf16[16,256]{1,0:T(8,128)(2,1)}",
            "bitcast transpose bitcast",
        ),
        // A bitcast is a one-step plan.
        ("f32[8,128]{1,0:T(8,128)}", "f32[8,128]{1,0}", "bitcast"),
    ] {
        let plan = check_plan(&array(from), &array(to)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ops(&plan), want, "{from} -> {to}:\n{plan}");
    }
}

#[test]
fn plan_text_is_hlo() {
    let plan = check_plan(&array("f32[3,5]{1,0}"), &array("f32[3,5]{1,0:T(2,2)}")).unwrap();
    expect_test::expect![[r#"
        %x = f32[3,5]{1,0} parameter(0)
        %zero = f32[] constant(0)
        %pad.0 = f32[4,6]{1,0} pad(%x, %zero), padding=0_1x0_1
        %bitcast.1 = f32[2,2,3,2]{3,2,1,0} bitcast(%pad.0)
        %transpose.2 = f32[2,3,2,2]{3,2,1,0} transpose(%bitcast.1), dimensions={0,2,1,3}
        %bitcast.3 = f32[3,5]{1,0:T(2,2)} bitcast(%transpose.2)
        // bytes moved: 192"#]]
    .assert_eq(&plan.to_string());
    let plan = check_plan(&array("f32[3,5]{1,0:T(2,2)}"), &array("f32[3,5]{1,0}")).unwrap();
    expect_test::expect![[r#"
        %x = f32[3,5]{1,0:T(2,2)} parameter(0)
        %bitcast.0 = f32[2,3,2,2]{3,2,1,0} bitcast(%x)
        %transpose.1 = f32[2,2,3,2]{3,2,1,0} transpose(%bitcast.0), dimensions={0,2,1,3}
        %bitcast.2 = f32[4,6]{1,0} bitcast(%transpose.1)
        %slice.3 = f32[3,5]{1,0} slice(%bitcast.2), slice={[0:3], [0:5]}
        // bytes moved: 156"#]]
    .assert_eq(&plan.to_string());
}

#[test]
fn sub_byte_and_tail_padding_plans() {
    for (from, to) in [
        ("s4[8,3]{1,0:E(4)}", "s4[8,3]{0,1:T(2,2)E(4)}"),
        ("s4[8,3]{1,0:E(4)}", "s4[8,3]{1,0}"),
        ("f32[5,3]{1,0:L(4)}", "f32[5,3]{0,1:L(7)}"),
        ("f32[2,3]{0,1:PAD(3,5)}", "f32[2,3]{1,0:T(2,2)}"),
        (
            "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",
            "f32[2,7,8,11,10]{4,3,2,1,0}",
        ),
        ("f32[8,8]{1,0:T(2,4)(2,1,1,1)}", "f32[8,8]{0,1:T(4,2)}"),
    ] {
        check_plan(&array(from), &array(to)).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_plans_produce_the_target_buffer(
        pair in shape(4).prop_flat_map(|s| (Just(s.clone()), relayout_any_size(&s)))
    ) {
        let (from, to) = pair;
        if let Err(e) = check_plan(&from, &to) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn random_unpacked_plans_produce_the_target_buffer(
        pair in shape(4).prop_flat_map(|s| (Just(s.clone()), relayout_any_size(&s)))
    ) {
        let (from, to) = pair;
        if let Err(e) = check_plan_unpacked(&from, &to) {
            return Err(TestCaseError::fail(e));
        }
    }
}

#[test]
fn views_that_cut_across_the_physical_dimensions_go_through_them() {
    // TO's `*` fold joins 6 and 5 into 30 and tiles it by 2: [15,2] cuts
    // across FROM's physical [6,5,2,2], so FROM is first viewed as that.
    let plan = check_plan(
        &array("u2[3,6,5]{0,2,1:T(2)E(2)}"),
        &array("u2[3,6,5]{0,2,1:T(4)(*,*,2,1)E(2)}"),
    )
    .unwrap();
    assert_eq!(ops(&plan), "bitcast bitcast transpose bitcast", "{plan}");
    assert_eq!(plan.steps[0].shape.to_string(), "u2[6,5,2,2]{3,2,1,0:E(2)}");
}

#[test]
fn unpacked_plans_copy_to_unpack_and_transpose_to_pack() {
    let plan =
        check_plan_unpacked(&array("s4[4,6]{1,0:T(2,2)E(4)}"), &array("s4[4,6]{1,0}")).unwrap();
    assert_eq!(ops(&plan), "bitcast copy transpose bitcast", "{plan}");
    let plan =
        check_plan_unpacked(&array("s4[4,6]{1,0}"), &array("s4[4,6]{1,0:T(2,2)E(4)}")).unwrap();
    assert_eq!(ops(&plan), "bitcast transpose bitcast", "{plan}");
    // Ending in a slice, the plan packs with a copy.
    let plan =
        check_plan_unpacked(&array("s4[3,5]{1,0:T(2,2)}"), &array("s4[3,5]{1,0:E(4)}")).unwrap();
    assert_eq!(ops(&plan), "bitcast transpose bitcast slice copy", "{plan}");
    // Unpacked on both sides: the ordinary plan.
    let (a, b) = (array("f32[3,5]{1,0}"), array("f32[3,5]{1,0:T(2,2)}"));
    assert_eq!(
        shape::relayout_plan_at(&a, &b, 0).unwrap(),
        relayout_plan(&a, &b).unwrap()
    );
}
