//! One small hand-computed case per op family.

mod common;

use common::*;
use interp::{EvalError, Limits, Value};

#[test]
fn transpose_of_2x3_into_column_major_moves_no_byte() {
    let text = r#"HloModule t
ENTRY %main (p: f32[2,3]) -> f32[3,2] {
  %p = f32[2,3]{1,0} parameter(0)
  ROOT %t = f32[3,2]{0,1} transpose(%p), dimensions={1,0}
}
"#;
    let r = run(text, &[floats("f32[2,3]{1,0}", &[1., 2., 3., 4., 5., 6.])]).unwrap();
    assert_eq!(as_f64(&r), vec![1., 4., 2., 5., 3., 6.]);
    // Column-major [3,2] stores the transpose in the input's byte order.
    let phys: Vec<Option<f64>> = [1., 2., 3., 4., 5., 6.].iter().map(|&x| Some(x)).collect();
    assert_eq!(slots(&r), phys);
    assert_eq!(r.as_array().unwrap().shape().to_string(), "f32[3,2]{0,1}");
}

#[test]
fn tiled_result_has_poison_padding_slots() {
    let text = r#"HloModule t
ENTRY %main (p: f32[3,5]) -> f32[3,5] {
  %p = f32[3,5]{1,0} parameter(0)
  ROOT %c = f32[3,5]{1,0:T(2,2)} copy(%p)
}
"#;
    let vals: Vec<f64> = (0..15).map(f64::from).collect();
    let r = run(text, &[floats("f32[3,5]{1,0}", &vals)]).unwrap();
    assert_eq!(as_f64(&r), vals);
    let s = slots(&r);
    assert_eq!(s.len(), 24, "3x5 padded to 4x6 by 2x2 tiles");
    assert_eq!(s.iter().filter(|x| x.is_none()).count(), 9);
    // The first tile holds (0,0) (0,1) (1,0) (1,1).
    assert_eq!(&s[..4], &[Some(0.), Some(1.), Some(5.), Some(6.)]);
    // Element (2,3) lives in slot 17 (the layout algebra's own example).
    assert_eq!(s[17], Some(13.));
}

#[test]
fn pad_with_negative_and_interior_padding() {
    let text = r#"HloModule t
ENTRY %main (p: f32[3]) -> f32[5] {
  %p = f32[3]{0} parameter(0)
  %z = f32[] constant(0)
  ROOT %r = f32[5]{0} pad(%p, %z), padding=1_-1_1
}
"#;
    let r = run(text, &[floats("f32[3]", &[1., 2., 3.])]).unwrap();
    assert_eq!(as_f64(&r), vec![0., 1., 0., 2., 0.]);
    let text2 = r#"HloModule t
ENTRY %main (p: f32[2,2]) -> f32[3,5] {
  %p = f32[2,2]{1,0} parameter(0)
  %z = f32[] constant(-1)
  ROOT %r = f32[3,5]{0,1} pad(%p, %z), padding=0_1x1_1_1
}
"#;
    let r = run(text2, &[floats("f32[2,2]", &[1., 2., 3., 4.])]).unwrap();
    #[rustfmt::skip]
    let want = vec![-1., 1., -1., 2., -1.,
                    -1., 3., -1., 4., -1.,
                    -1., -1., -1., -1., -1.];
    assert_eq!(as_f64(&r), want);
}

const REDUCE: &str = r#"HloModule t
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (p: f32[2,3]) -> (f32[3], f32[2], f32[]) {
  %p = f32[2,3]{0,1} parameter(0)
  %z = f32[] constant(0)
  %r0 = f32[3]{0} reduce(%p, %z), dimensions={0}, to_apply=%add
  %r1 = f32[2]{0} reduce(%p, %z), dimensions={1}, to_apply=%add
  %r2 = f32[] reduce(%p, %z), dimensions={0,1}, to_apply=%add
  ROOT %t = (f32[3]{0}, f32[2]{0}, f32[]) tuple(%r0, %r1, %r2)
}
"#;

#[test]
fn reduce_over_each_dimension_and_all() {
    let r = run(
        REDUCE,
        &[floats("f32[2,3]{1,0}", &[1., 2., 3., 4., 5., 6.])],
    )
    .unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![5., 7., 9.]);
    assert_eq!(as_f64(elem(&r, 1)), vec![6., 15.]);
    assert_eq!(as_f64(elem(&r, 2)), vec![21.]);
}

#[test]
fn variadic_reduce_computes_argmax() {
    let text = r#"HloModule t
%argmax (a: f32[], ai: s32[], b: f32[], bi: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %ai = s32[] parameter(1)
  %b = f32[] parameter(2)
  %bi = s32[] parameter(3)
  %gt = pred[] compare(%b, %a), direction=GT
  %v = f32[] select(%gt, %b, %a)
  %i = s32[] select(%gt, %bi, %ai)
  ROOT %r = (f32[], s32[]) tuple(%v, %i)
}
ENTRY %main (p: f32[2,4]) -> (f32[2], s32[2]) {
  %p = f32[2,4]{1,0} parameter(0)
  %io = s32[2,4]{1,0} iota(), iota_dimension=1
  %ninf = f32[] constant(-inf)
  %zero = s32[] constant(0)
  ROOT %r = (f32[2]{0}, s32[2]{0}) reduce(%p, %io, %ninf, %zero), dimensions={1}, to_apply=%argmax
}
"#;
    let r = run(
        text,
        &[floats("f32[2,4]", &[3., 9., 1., 9., -5., -2., -8., -3.])],
    )
    .unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![9., -2.]);
    assert_eq!(as_i64(elem(&r, 1)), vec![1, 1]);
}

#[test]
fn dot_with_batch_and_contracting_dimensions() {
    let text = r#"HloModule t
ENTRY %main (a: f32[2,2,3], b: f32[2,3,1]) -> f32[2,2,1] {
  %a = f32[2,2,3]{2,1,0} parameter(0)
  %b = f32[2,3,1]{1,2,0} parameter(1)
  ROOT %d = f32[2,2,1]{0,1,2} dot(%a, %b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}
"#;
    let a = floats(
        "f32[2,2,3]",
        &[1., 2., 3., 4., 5., 6., 1., 0., 0., 0., 0., 2.],
    );
    let b = floats("f32[2,3,1]", &[1., 10., 100., 7., 8., 9.]);
    let r = run(text, &[a, b]).unwrap();
    // batch 0: [1,2,3].[1,10,100] = 321, [4,5,6].[...] = 654
    // batch 1: [1,0,0].[7,8,9] = 7, [0,0,2].[7,8,9] = 18
    assert_eq!(as_f64(&r), vec![321., 654., 7., 18.]);
}

#[test]
fn mixed_type_dot_converts_operands_first() {
    let text = r#"HloModule t
ENTRY %main (a: s8[1,2], b: s8[2,1]) -> s32[1,1] {
  %a = s8[1,2]{1,0} parameter(0)
  %b = s8[2,1]{1,0} parameter(1)
  ROOT %d = s32[1,1]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;
    let r = run(
        text,
        &[ints("s8[1,2]", &[-128, 127]), ints("s8[2,1]", &[127, 127])],
    )
    .unwrap();
    assert_eq!(as_i64(&r), vec![-128 * 127 + 127 * 127]);
}

#[test]
fn reduce_window_with_padding_and_stride() {
    let text = r#"HloModule t
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
%max (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] maximum(%a, %b)
}
ENTRY %main (p: f32[4]) -> (f32[4], f32[2,2]) {
  %p = f32[4]{0} parameter(0)
  %z = f32[] constant(0)
  %w = f32[4]{0} reduce-window(%p, %z), window={size=2 pad=1_0}, to_apply=%add
  %m = f32[2,2]{1,0} reshape(%p)
  %ninf = f32[] constant(-inf)
  %x = f32[2,2]{0,1} reduce-window(%m, %ninf), window={size=2x1 stride=1x1 pad=0_1x0_0}, to_apply=%max
  ROOT %t = (f32[4]{0}, f32[2,2]{0,1}) tuple(%w, %x)
}
"#;
    let r = run(text, &[floats("f32[4]", &[1., 2., 3., 4.])]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![1., 3., 5., 7.]);
    // Column maxima over a window of two rows, the second padded.
    assert_eq!(as_f64(elem(&r, 1)), vec![3., 4., 3., 4.]);
}

#[test]
fn gather_embedding_rows_clamps_out_of_range_indices() {
    // The corpus form (gather_embedding), small.
    let text = r#"HloModule t
ENTRY %main (t: f32[4,2], i: s32[3,1]) -> (f32[3,1,2], f32[3,2]) {
  %t = f32[4,2]{1,0} parameter(0)
  %i = s32[3,1]{1,0} parameter(1)
  %g = f32[3,1,2]{2,1,0} gather(%t, %i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
  %h = f32[3,2]{0,1} gather(%t, %i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
  ROOT %r = (f32[3,1,2]{2,1,0}, f32[3,2]{0,1}) tuple(%g, %h)
}
"#;
    let t = floats("f32[4,2]", &[0., 1., 10., 11., 20., 21., 30., 31.]);
    let i = ints("s32[3,1]", &[2, 0, 7]);
    let r = run(text, &[t, i]).unwrap();
    let want = vec![20., 21., 0., 1., 30., 31.];
    assert_eq!(as_f64(elem(&r, 0)), want);
    assert_eq!(as_f64(elem(&r, 1)), want);
}

#[test]
fn gather_with_two_index_components() {
    // The corpus form gather.10: start_index_map={0,2}, slice 1x40x1.
    let text = r#"HloModule t
ENTRY %main (x: f32[3,2,4], i: s32[2,2]) -> f32[2,1,2,1] {
  %x = f32[3,2,4]{2,1,0} parameter(0)
  %i = s32[2,2]{1,0} parameter(1)
  ROOT %g = f32[2,1,2,1]{3,2,1,0} gather(%x, %i), offset_dims={1,2,3}, collapsed_slice_dims={}, start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,2,1}
}
"#;
    let x: Vec<f64> = (0..24).map(f64::from).collect();
    let r = run(
        text,
        &[floats("f32[3,2,4]", &x), ints("s32[2,2]", &[1, 3, 2, -5])],
    )
    .unwrap();
    // (1, :, 3) = 11, 15; (2, :, 0) = 16, 20 (the -5 clamps to 0).
    assert_eq!(as_f64(&r), vec![11., 15., 16., 20.]);
}

#[test]
fn scatter_adds_updates_and_skips_out_of_range() {
    let text = r#"HloModule t
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (o: f32[4], i: s32[4,1], u: f32[4]) -> f32[4] {
  %o = f32[4]{0} parameter(0)
  %i = s32[4,1]{1,0} parameter(1)
  %u = f32[4]{0} parameter(2)
  ROOT %s = f32[4]{0} scatter(%o, %i, %u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add
}
"#;
    let r = run(
        text,
        &[
            floats("f32[4]", &[0., 0., 0., 100.]),
            ints("s32[4,1]", &[1, 3, 1, 9]),
            floats("f32[4]", &[1., 2., 3., 4.]),
        ],
    )
    .unwrap();
    assert_eq!(as_f64(&r), vec![0., 4., 0., 102.]);
}

#[test]
fn sort_with_comparator_is_stable_over_two_operands() {
    let text = r#"HloModule t
%gt (a: f32[], b: f32[], c: s32[], d: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = s32[] parameter(2)
  %d = s32[] parameter(3)
  ROOT %r = pred[] compare(%a, %b), direction=GT
}
ENTRY %main (k: f32[5], v: s32[5]) -> (f32[5], s32[5]) {
  %k = f32[5]{0} parameter(0)
  %v = s32[5]{0} parameter(1)
  ROOT %s = (f32[5]{0}, s32[5]{0}) sort(%k, %v), dimensions={0}, is_stable=true, to_apply=%gt
}
"#;
    let r = run(
        text,
        &[
            floats("f32[5]", &[3., 1., 3., 2., 1.]),
            ints("s32[5]", &[0, 1, 2, 3, 4]),
        ],
    )
    .unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![3., 3., 2., 1., 1.]);
    assert_eq!(as_i64(elem(&r, 1)), vec![0, 2, 3, 1, 4]);
}

#[test]
fn sort_along_a_minor_dimension_in_a_column_major_layout() {
    let text = r#"HloModule t
%lt (a: s32[], b: s32[]) -> pred[] {
  %a = s32[] parameter(0)
  %b = s32[] parameter(1)
  ROOT %r = pred[] compare(%a, %b), direction=LT
}
ENTRY %main (k: s32[2,3]) -> s32[2,3] {
  %k = s32[2,3]{0,1} parameter(0)
  ROOT %s = s32[2,3]{0,1} sort(%k), dimensions={1}, to_apply=%lt
}
"#;
    let r = run(text, &[ints("s32[2,3]", &[3, 1, 2, 9, 7, 8])]).unwrap();
    assert_eq!(as_i64(&r), vec![1, 2, 3, 7, 8, 9]);
}

#[test]
fn convolution_1d_and_grouped() {
    let text = r#"HloModule t
ENTRY %main (x: f32[1,5,1], k: f32[3,1,1]) -> f32[1,5,1] {
  %x = f32[1,5,1]{2,1,0} parameter(0)
  %k = f32[3,1,1]{2,1,0} parameter(1)
  ROOT %c = f32[1,5,1]{2,1,0} convolution(%x, %k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
}
"#;
    let r = run(
        text,
        &[
            floats("f32[1,5,1]", &[1., 2., 3., 4., 5.]),
            floats("f32[3,1,1]", &[1., 10., 100.]),
        ],
    )
    .unwrap();
    assert_eq!(as_f64(&r), vec![210., 321., 432., 543., 54.]);

    let grouped = r#"HloModule t
ENTRY %main (x: f32[1,1,2], k: f32[1,1,2]) -> f32[1,1,2] {
  %x = f32[1,1,2]{2,1,0} parameter(0)
  %k = f32[1,1,2]{2,1,0} parameter(1)
  ROOT %c = f32[1,1,2]{2,1,0} convolution(%x, %k), window={size=1}, dim_labels=b0f_0io->b0f, feature_group_count=2
}
"#;
    let r = run(
        grouped,
        &[
            floats("f32[1,1,2]", &[3., 5.]),
            floats("f32[1,1,2]", &[2., 7.]),
        ],
    )
    .unwrap();
    assert_eq!(as_f64(&r), vec![6., 35.]);

    let strided = r#"HloModule t
ENTRY %main (x: f32[1,1,5], k: f32[2,1,1]) -> f32[1,1,2] {
  %x = f32[1,1,5]{2,1,0} parameter(0)
  %k = f32[2,1,1]{2,1,0} parameter(1)
  ROOT %c = f32[1,1,2]{2,1,0} convolution(%x, %k), window={size=2 stride=2 rhs_reversal=1}, dim_labels=bf0_0io->bf0
}
"#;
    let r = run(
        strided,
        &[
            floats("f32[1,1,5]", &[1., 2., 3., 4., 5.]),
            floats("f32[2,1,1]", &[1., 10.]),
        ],
    )
    .unwrap();
    // Reversed kernel [10, 1] over windows [1,2] and [3,4].
    assert_eq!(as_f64(&r), vec![12., 34.]);
}

#[test]
fn select_and_scatter_routes_source_to_window_maxima() {
    let text = r#"HloModule t
%ge (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %r = pred[] compare(%a, %b), direction=GE
}
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %main (o: f32[4], s: f32[2]) -> f32[4] {
  %o = f32[4]{0} parameter(0)
  %s = f32[2]{0} parameter(1)
  %z = f32[] constant(0)
  ROOT %r = f32[4]{0} select-and-scatter(%o, %s, %z), window={size=2 stride=2}, select=%ge, scatter=%add
}
"#;
    let r = run(
        text,
        &[
            floats("f32[4]", &[1., 5., 3., 2.]),
            floats("f32[2]", &[10., 20.]),
        ],
    )
    .unwrap();
    assert_eq!(as_f64(&r), vec![0., 10., 20., 0.]);
}

#[test]
fn data_movement_ops() {
    let text = r#"HloModule t
ENTRY %main (p: f32[2,3], i: s32[]) -> (f32[3,2,2], f32[5,3], f32[2,3], f32[1,2], f32[2,3], f32[6], f32[2,2]) {
  %p = f32[2,3]{1,0} parameter(0)
  %i = s32[] parameter(1)
  %b = f32[3,2,2]{0,2,1} broadcast(%p), dimensions={2,0}
  %c = f32[6,3]{0,1} concatenate(%p, %p, %p), dimensions={0}
  %s = f32[5,3]{1,0} slice(%c), slice={[0:5], [0:3]}
  %r = f32[2,3]{0,1} reverse(%p), dimensions={0,1}
  %d = f32[1,2]{1,0} dynamic-slice(%p, %i, %i), dynamic_slice_sizes={1,2}
  %one = f32[1,2]{1,0} constant({ {-1, -2} })
  %u = f32[2,3]{0,1} dynamic-update-slice(%p, %one, %i, %i)
  %f = f32[6]{0} reshape(%r)
  %st = f32[2,2]{1,0} slice(%c), slice={[0:4:2], [0:3:2]}
  ROOT %t = (f32[3,2,2]{0,2,1}, f32[5,3]{1,0}, f32[2,3]{0,1}, f32[1,2]{1,0}, f32[2,3]{0,1}, f32[6]{0}, f32[2,2]{1,0}) tuple(%b, %s, %r, %d, %u, %f, %st)
}
"#;
    let p = floats("f32[2,3]", &[1., 2., 3., 4., 5., 6.]);
    // i = 5 clamps to 1 (row) and 1 (column: 3 - 2).
    let r = run(text, &[p, ints("s32[]", &[5])]).unwrap();
    // b[k][j][i] = p[i][k]
    assert_eq!(
        as_f64(elem(&r, 0)),
        vec![1., 4., 1., 4., 2., 5., 2., 5., 3., 6., 3., 6.]
    );
    assert_eq!(
        as_f64(elem(&r, 1)),
        vec![1., 2., 3., 4., 5., 6., 1., 2., 3., 4., 5., 6., 1., 2., 3.]
    );
    assert_eq!(as_f64(elem(&r, 2)), vec![6., 5., 4., 3., 2., 1.]);
    assert_eq!(as_f64(elem(&r, 3)), vec![5., 6.]);
    assert_eq!(as_f64(elem(&r, 4)), vec![1., 2., 3., 4., -1., -2.]);
    assert_eq!(as_f64(elem(&r, 5)), vec![6., 5., 4., 3., 2., 1.]);
    assert_eq!(as_f64(elem(&r, 6)), vec![1., 3., 1., 3.]);
}

#[test]
fn elementwise_compare_select_clamp_convert() {
    let text = r#"HloModule t
ENTRY %main (a: f32[4], b: f32[4]) -> (pred[4], f32[4], s32[4], u8[4], f32[4], pred[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %lt = pred[4]{0} compare(%a, %b), direction=LT
  %sel = f32[4]{0} select(%lt, %a, %b)
  %lo = f32[] constant(-1)
  %hi = f32[] constant(1)
  %cl = f32[4]{0} clamp(%lo, %a, %hi)
  %cv = s32[4]{0} convert(%a)
  %cu = u8[4]{0} convert(%b)
  %n = f32[4]{0} negate(%a)
  %e = f32[4]{0} exponential(%n)
  %t = pred[4]{0} compare(%a, %b), direction=LT, type=TOTALORDER
  ROOT %r = (pred[4]{0}, f32[4]{0}, s32[4]{0}, u8[4]{0}, f32[4]{0}, pred[4]{0}) tuple(%lt, %sel, %cv, %cu, %cl, %t)
}
"#;
    let nan = f64::NAN;
    let a = floats("f32[4]", &[-2.5, 0.5, nan, 3e9]);
    let b = floats("f32[4]", &[1.0, -300.0, 0.0, nan]);
    let r = run(text, &[a, b]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![1., 0., 0., 0.]);
    let sel = as_f64(elem(&r, 1));
    assert_eq!(&sel[..2], &[-2.5, -300.0]);
    assert!(sel[2] == 0.0 && sel[3].is_nan());
    // Float to int conversion saturates and maps NaN to 0.
    assert_eq!(as_i64(elem(&r, 2)), vec![-2, 0, 0, i64::from(i32::MAX)]);
    assert_eq!(as_i64(elem(&r, 3)), vec![1, 0, 0, 0]);
    let cl = as_f64(elem(&r, 4));
    assert_eq!(&cl[..2], &[-1.0, 0.5]);
    assert!(cl[2].is_nan());
    assert_eq!(cl[3], 1.0);
    // TOTALORDER: NaN (positive) is above everything; 3e9 < NaN.
    assert_eq!(as_f64(elem(&r, 5)), vec![1., 0., 0., 1.]);
}

#[test]
fn integer_arithmetic_wraps_and_divides_like_xla() {
    let text = r#"HloModule t
ENTRY %main (a: s32[3], b: s32[3]) -> (s32[3], s32[3], s32[3], s8[3], s32[3]) {
  %a = s32[3]{0} parameter(0)
  %b = s32[3]{0} parameter(1)
  %d = s32[3]{0} divide(%a, %b)
  %m = s32[3]{0} remainder(%a, %b)
  %x = s32[3]{0} multiply(%a, %a)
  %c = s8[3]{0} convert(%a)
  %s = s32[3]{0} shift-right-logical(%a, %b)
  ROOT %r = (s32[3]{0}, s32[3]{0}, s32[3]{0}, s8[3]{0}, s32[3]{0}) tuple(%d, %m, %x, %c, %s)
}
"#;
    let r = run(
        text,
        &[
            ints("s32[3]", &[7, -2147483648, 65536]),
            ints("s32[3]", &[0, -1, 4]),
        ],
    )
    .unwrap();
    assert_eq!(as_i64(elem(&r, 0)), vec![-1, -2147483648, 16384]);
    assert_eq!(as_i64(elem(&r, 1)), vec![7, 0, 0]);
    assert_eq!(as_i64(elem(&r, 2)), vec![49, 0, 0]);
    assert_eq!(as_i64(elem(&r, 3)), vec![7, 0, 0]);
    // -2^31 shifted right by 0xffffffff: the amount is out of range, giving 0.
    assert_eq!(as_i64(elem(&r, 4)), vec![7, 0, 4096]);
}

#[test]
fn bitcast_convert_sees_real_bit_patterns() {
    let text = r#"HloModule t
ENTRY %main (a: f32[2]) -> (s32[2], u8[2,4], bf16[2], f32[2]) {
  %a = f32[2]{0} parameter(0)
  %i = s32[2]{0} bitcast-convert(%a)
  %b = u8[2,4]{1,0} bitcast-convert(%a)
  %h = bf16[2]{0} convert(%a)
  %back = f32[2]{0} bitcast-convert(%i)
  ROOT %r = (s32[2]{0}, u8[2,4]{1,0}, bf16[2]{0}, f32[2]{0}) tuple(%i, %b, %h, %back)
}
"#;
    let r = run(text, &[floats("f32[2]", &[1.0, -0.0])]).unwrap();
    assert_eq!(as_i64(elem(&r, 0)), vec![0x3f80_0000, i64::from(i32::MIN)]);
    assert_eq!(as_i64(elem(&r, 1)), vec![0, 0, 0x80, 0x3f, 0, 0, 0, 0x80]);
    assert_eq!(as_f64(elem(&r, 2)), vec![1.0, 0.0]);
    let back = as_f64(elem(&r, 3));
    assert!(back[1] == 0.0 && back[1].is_sign_negative());
}

#[test]
fn constants_literals_and_iota() {
    let text = r#"HloModule t
ENTRY %main () -> (f32[2,2], f32[3], pred[2], s32[2,3], f32[3]) {
  %a = f32[2,2]{0,1} constant({ {1, 2}, {3, 4} })
  %b = f32[3]{0} constant({inf, -inf, nan})
  %c = pred[2]{0} constant({true, false})
  %d = s32[2,3]{0,1} iota(), iota_dimension=1
  %e = f32[3]{0} iota(), iota_dimension=0
  ROOT %r = (f32[2,2]{0,1}, f32[3]{0}, pred[2]{0}, s32[2,3]{0,1}, f32[3]{0}) tuple(%a, %b, %c, %d, %e)
}
"#;
    let r = run(text, &[]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![1., 2., 3., 4.]);
    assert_eq!(
        slots(elem(&r, 0)),
        vec![Some(1.), Some(3.), Some(2.), Some(4.)]
    );
    let b = as_f64(elem(&r, 1));
    assert!(b[0] == f64::INFINITY && b[1] == f64::NEG_INFINITY && b[2].is_nan());
    assert_eq!(as_f64(elem(&r, 2)), vec![1., 0.]);
    assert_eq!(as_i64(elem(&r, 3)), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(as_f64(elem(&r, 4)), vec![0., 1., 2.]);
}

#[test]
fn control_flow_while_conditional_call_map() {
    let text = r#"HloModule t
%cond (s: (s32[], f32[2])) -> pred[] {
  %s = (s32[], f32[2]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}
%body (s: (s32[], f32[2])) -> (s32[], f32[2]) {
  %s = (s32[], f32[2]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %v = f32[2]{0} get-tuple-element(%s), index=1
  %one = s32[] constant(1)
  %j = s32[] add(%i, %one)
  %w = f32[2]{0} add(%v, %v)
  ROOT %t = (s32[], f32[2]{0}) tuple(%j, %w)
}
%neg (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  ROOT %n = f32[2]{0} negate(%x)
}
%same (x: f32[2]) -> f32[2] {
  ROOT %x = f32[2]{0} parameter(0)
}
%sq (x: f32[2]) -> f32[2] {
  %x = f32[2]{0} parameter(0)
  ROOT %m = f32[2]{0} multiply(%x, %x)
}
%mul (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %m = f32[] multiply(%a, %b)
}
ENTRY %main (p: pred[], k: s32[], x: f32[2]) -> (f32[2], f32[2], f32[2], f32[2], f32[2]) {
  %p = pred[] parameter(0)
  %k = s32[] parameter(1)
  %x = f32[2]{0} parameter(2)
  %zero = s32[] constant(0)
  %init = (s32[], f32[2]{0}) tuple(%zero, %x)
  %w = (s32[], f32[2]{0}) while(%init), condition=%cond, body=%body
  %wv = f32[2]{0} get-tuple-element(%w), index=1
  %c1 = f32[2]{0} conditional(%p, %x, %x), true_computation=%neg, false_computation=%same
  %c2 = f32[2]{0} conditional(%k, %x, %x, %x), branch_computations={%neg, %same, %sq}
  %cl = f32[2]{0} call(%x), to_apply=%sq
  %mp = f32[2]{0} map(%x, %x), dimensions={0}, to_apply=%mul
  ROOT %r = (f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}, f32[2]{0}) tuple(%wv, %c1, %c2, %cl, %mp)
}
"#;
    let x = floats("f32[2]", &[1.5, -3.0]);
    let r = run(
        text,
        &[preds("pred[]", &[true]), ints("s32[]", &[17]), x.clone()],
    )
    .unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![12., -24.]);
    assert_eq!(as_f64(elem(&r, 1)), vec![-1.5, 3.0]);
    // Index 17 is out of range: the last branch runs.
    assert_eq!(as_f64(elem(&r, 2)), vec![2.25, 9.0]);
    assert_eq!(as_f64(elem(&r, 3)), vec![2.25, 9.0]);
    assert_eq!(as_f64(elem(&r, 4)), vec![2.25, 9.0]);
    let r = run(text, &[preds("pred[]", &[false]), ints("s32[]", &[0]), x]).unwrap();
    assert_eq!(as_f64(elem(&r, 1)), vec![1.5, -3.0]);
    assert_eq!(as_f64(elem(&r, 2)), vec![-1.5, 3.0]);
}

#[test]
fn known_custom_calls_check_their_shapes_and_layout_constraint_is_the_identity() {
    let text = r#"HloModule t
ENTRY %main (p: f32[2,2]) -> f32[2,2] {
  %p = f32[2,2]{1,0} parameter(0)
  ROOT %c = f32[2,2]{1,0} custom-call(%p), custom_call_target="lapack_spotrf_ffi"
}
"#;
    // potrf gives (factor, info): a lone array is a malformed call.
    let e = run(text, &[floats("f32[2,2]", &[1., 2., 3., 4.])]).unwrap_err();
    assert!(matches!(e, EvalError::Invalid { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "%c: Potrf produces 2 results, the shape has 1"
    );
    let lc = text
        .replace("lapack_spotrf_ffi", "LayoutConstraint")
        .replace("ROOT %c = f32[2,2]{1,0}", "ROOT %c = f32[2,2]{0,1}");
    let r = run(&lc, &[floats("f32[2,2]", &[1., 2., 3., 4.])]).unwrap();
    assert_eq!(as_f64(&r), vec![1., 2., 3., 4.]);
    assert_eq!(slots(&r), vec![Some(1.), Some(3.), Some(2.), Some(4.)]);
}

#[test]
fn tokens_and_optimization_barrier() {
    let text = r#"HloModule t
ENTRY %main (p: f32[2]) -> (f32[2], token[]) {
  %p = f32[2]{0} parameter(0)
  %tok = token[] after-all()
  %t = (f32[2]{0}, token[]) tuple(%p, %tok)
  ROOT %b = (f32[2]{0}, token[]) opt-barrier(%t)
}
"#;
    let r = run(text, &[floats("f32[2]", &[1., 2.])]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![1., 2.]);
    assert!(matches!(elem(&r, 1), Value::Token));
}

#[test]
fn limits_stop_runaway_loops_and_huge_buffers() {
    let forever = r#"HloModule t
%cond (s: s32[]) -> pred[] {
  %s = s32[] parameter(0)
  ROOT %t = pred[] constant(true)
}
%body (s: s32[]) -> s32[] {
  %s = s32[] parameter(0)
  %one = s32[] constant(1)
  ROOT %n = s32[] add(%s, %one)
}
ENTRY %main () -> s32[] {
  %z = s32[] constant(0)
  ROOT %w = s32[] while(%z), condition=%cond, body=%body
}
"#;
    let limits = Limits {
        max_while_iterations: 1000,
        ..Limits::default()
    };
    let e = interp::evaluate(&module(forever), &[], &limits).unwrap_err();
    assert!(matches!(e, EvalError::Limit { .. }), "{e}");
    assert!(e.to_string().contains("max_while_iterations"), "{e}");

    let huge = r#"HloModule t
ENTRY %main () -> f32[100000,100000] {
  %z = f32[] constant(0)
  ROOT %b = f32[100000,100000]{1,0} broadcast(%z), dimensions={}
}
"#;
    let e = interp::evaluate(&module(huge), &[], &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("max_buffer_slots"), "{e}");

    let work = r#"HloModule t
ENTRY %main (a: f32[64,64], b: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64]{1,0} parameter(0)
  %b = f32[64,64]{1,0} parameter(1)
  ROOT %d = f32[64,64]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"#;
    let m = module(work);
    let args = interp::random_arguments(&m, 1).unwrap();
    let limits = Limits {
        max_work: 100_000,
        ..Limits::default()
    };
    let e = interp::evaluate(&m, &args, &limits).unwrap_err();
    assert!(e.to_string().contains("max_work"), "{e}");
}

#[test]
fn unary_and_binary_float_ops() {
    let text = r#"HloModule t
ENTRY %main (a: f32[4], b: f32[4]) -> (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], f32[4], pred[4]) {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %abs = f32[4]{0} abs(%a)
  %fl = f32[4]{0} floor(%a)
  %ce = f32[4]{0} ceil(%a)
  %afz = f32[4]{0} round-nearest-afz(%a)
  %even = f32[4]{0} round-nearest-even(%a)
  %sg = f32[4]{0} sign(%a)
  %sq = f32[4]{0} sqrt(%b)
  %rs = f32[4]{0} rsqrt(%b)
  %cb = f32[4]{0} cbrt(%b)
  %pw = f32[4]{0} power(%b, %a)
  %rm = f32[4]{0} remainder(%a, %b)
  %mx = f32[4]{0} maximum(%a, %b)
  %lg = f32[4]{0} logistic(%a)
  %fin = pred[4]{0} is-finite(%rs)
  ROOT %r = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, pred[4]{0}) tuple(%abs, %fl, %ce, %afz, %even, %sg, %sq, %rs, %cb, %pw, %rm, %mx, %lg, %fin)
}
"#;
    let a = floats("f32[4]", &[2.5, -2.5, 0.0, -1.0]);
    let b = floats("f32[4]", &[4.0, 8.0, 0.0, 1.0]);
    let r = run(text, &[a, b]).unwrap();
    let v = |i| as_f64(elem(&r, i));
    assert_eq!(v(0), vec![2.5, 2.5, 0.0, 1.0]);
    assert_eq!(v(1), vec![2.0, -3.0, 0.0, -1.0]);
    assert_eq!(v(2), vec![3.0, -2.0, 0.0, -1.0]);
    assert_eq!(v(3), vec![3.0, -3.0, 0.0, -1.0]);
    assert_eq!(v(4), vec![2.0, -2.0, 0.0, -1.0]);
    assert_eq!(v(5), vec![1.0, -1.0, 0.0, -1.0]);
    assert_eq!(v(6), vec![2.0, 8f64.sqrt() as f32 as f64, 0.0, 1.0]);
    assert_eq!(
        v(7),
        vec![0.5, (1.0 / 8f64.sqrt()) as f32 as f64, f64::INFINITY, 1.0]
    );
    assert_eq!(v(8), vec![4f64.cbrt() as f32 as f64, 2.0, 0.0, 1.0]);
    // 4^2.5 = 32, 8^-2.5, 0^0 = 1, 1^-1 = 1.
    assert_eq!(v(9), vec![32.0, 8f64.powf(-2.5) as f32 as f64, 1.0, 1.0]);
    let rm = v(10);
    assert_eq!(&rm[..2], &[2.5, -2.5]);
    assert!(rm[2].is_nan());
    assert_eq!(rm[3], -0.0);
    assert_eq!(v(11), vec![4.0, 8.0, 0.0, 1.0]);
    assert_eq!(v(12)[2], 0.5);
    assert_eq!(v(13), vec![1., 1., 0., 1.]);
}

#[test]
fn integer_and_pred_bit_ops() {
    let text = r#"HloModule t
ENTRY %main (a: s32[3], b: s32[3], p: pred[3]) -> (s32[3], s32[3], s32[3], s32[3], s32[3], pred[3], s32[3], u8[3]) {
  %a = s32[3]{0} parameter(0)
  %b = s32[3]{0} parameter(1)
  %p = pred[3]{0} parameter(2)
  %pc = s32[3]{0} popcnt(%a)
  %cz = s32[3]{0} count-leading-zeros(%a)
  %sl = s32[3]{0} shift-left(%a, %b)
  %sa = s32[3]{0} shift-right-arithmetic(%a, %b)
  %pw = s32[3]{0} power(%a, %b)
  %np = pred[3]{0} not(%p)
  %x = s32[3]{0} xor(%a, %b)
  %u = u8[3]{0} convert(%a)
  ROOT %r = (s32[3]{0}, s32[3]{0}, s32[3]{0}, s32[3]{0}, s32[3]{0}, pred[3]{0}, s32[3]{0}, u8[3]{0}) tuple(%pc, %cz, %sl, %sa, %pw, %np, %x, %u)
}
"#;
    let r = run(
        text,
        &[
            ints("s32[3]", &[7, -8, 1]),
            ints("s32[3]", &[3, 1, -1]),
            preds("pred[3]", &[true, false, true]),
        ],
    )
    .unwrap();
    assert_eq!(as_i64(elem(&r, 0)), vec![3, 29, 1]);
    assert_eq!(as_i64(elem(&r, 1)), vec![29, 0, 31]);
    assert_eq!(as_i64(elem(&r, 2)), vec![56, -16, 0]);
    assert_eq!(as_i64(elem(&r, 3)), vec![0, -4, 0]);
    // 7^3, (-8)^1, 1^-1.
    assert_eq!(as_i64(elem(&r, 4)), vec![343, -8, 1]);
    assert_eq!(as_i64(elem(&r, 5)), vec![0, 1, 0]);
    assert_eq!(as_i64(elem(&r, 6)), vec![4, -7, -2]);
    // s32 -> u8 truncates: -8 is 248.
    assert_eq!(as_i64(elem(&r, 7)), vec![7, 248, 1]);
}

#[test]
fn narrow_floats_round_to_nearest_even() {
    let text = r#"HloModule t
ENTRY %main (a: f32[3], b: bf16[1,2], c: bf16[2,1]) -> (bf16[3], f16[3], bf16[1,1]) {
  %a = f32[3]{0} parameter(0)
  %b = bf16[1,2]{1,0} parameter(1)
  %c = bf16[2,1]{1,0} parameter(2)
  %h = bf16[3]{0} convert(%a)
  %g = f16[3]{0} convert(%a)
  %d = bf16[1,1]{1,0} dot(%b, %c), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %r = (bf16[3]{0}, f16[3]{0}, bf16[1,1]{1,0}) tuple(%h, %g, %d)
}
"#;
    // 1 + 2^-8 is a tie in bf16 (to 1), 1 + 3*2^-8 rounds up; 70000
    // overflows f16.
    let a = floats(
        "f32[3]",
        &[1.0 + 2f64.powi(-8), 1.0 + 3.0 * 2f64.powi(-8), 70000.0],
    );
    let b = floats("bf16[1,2]", &[1.5, 256.0]);
    let c = floats("bf16[2,1]", &[1.0, 1.0]);
    let r = run(text, &[a, b, c]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![1.0, 1.0 + 2f64.powi(-6), 70144.0]);
    assert_eq!(
        as_f64(elem(&r, 1)),
        vec![1.00390625, 1.01171875, f64::INFINITY]
    );
    // 1.5 + 256 = 257.5 rounds to 258 in bf16 (8 significant bits).
    assert_eq!(as_f64(elem(&r, 2)), vec![258.0]);
}

#[test]
fn check_equivalent_refuses_different_signatures() {
    let a = module(
        r#"HloModule t
ENTRY %main (p: f32[2]) -> f32[2] {
  ROOT %p = f32[2]{0} parameter(0)
}
"#,
    );
    let b = module(
        r#"HloModule t
ENTRY %main (p: f32[3]) -> f32[3] {
  ROOT %p = f32[3]{0} parameter(0)
}
"#,
    );
    let e = interp::check_equivalent(&a, &b, &[1], &Limits::default()).unwrap_err();
    assert!(matches!(e, interp::EquivalenceError::Setup(_)), "{e}");
    let e = interp::check_equivalent(&a, &a, &[], &Limits::default()).unwrap_err();
    assert_eq!(e.to_string(), "cannot compare the modules: no seeds given");
}
