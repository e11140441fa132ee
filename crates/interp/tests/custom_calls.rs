//! `fft`, `TopK`, `topk`, JAX's LAPACK calls and opaque custom calls.
//! Expected FFT and top-k values were computed with numpy 2 and JAX 0.10.2
//! on the same inputs.

mod common;

use common::*;
use interp::{Buffer, Limits, Scalar, Value, check_equivalent};

fn complex(shape: &str, values: &[(f64, f64)]) -> Value {
    let s: Vec<Scalar> = values
        .iter()
        .map(|&(re, im)| Scalar::Complex(re, im))
        .collect();
    Value::Array(Buffer::from_logical(array_shape(shape), &s).expect("valid test buffer"))
}

fn as_complex(v: &Value) -> Vec<(f64, f64)> {
    v.as_array()
        .expect("an array")
        .to_logical()
        .expect("readable")
        .into_iter()
        .map(|s| match s {
            Scalar::Complex(re, im) => (re, im),
            other => panic!("not complex: {other:?}"),
        })
        .collect()
}

fn assert_close(got: &[(f64, f64)], want: &[(f64, f64)]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.0 - w.0).abs() < 1e-5 && (g.1 - w.1).abs() < 1e-5,
            "{got:?} vs {want:?}"
        );
    }
}

const X6: [(f64, f64); 6] = [
    (1., 0.),
    (2., -1.),
    (0., 3.),
    (-1., 1.),
    (0.5, 0.5),
    (-2., 0.),
];

#[test]
fn fft_and_ifft_match_numpy() {
    let text = r#"HloModule t
ENTRY %main (p: c64[6]) -> (c64[6], c64[6]) {
  %p = c64[6]{0} parameter(0)
  %f = c64[6]{0} fft(%p), fft_type=FFT, fft_length={6}
  %i = c64[6]{0} fft(%p), fft_type=IFFT, fft_length={6}
  ROOT %t = (c64[6]{0}, c64[6]{0}) tuple(%f, %i)
}
"#;
    let r = run(text, &[complex("c64[6]", &X6)]).unwrap();
    assert_close(
        &as_complex(elem(&r, 0)),
        &[
            (0.5, 3.5),
            (3.0490382, -6.281089),
            (-3.2810888, -4.1471143),
            (2.5, 3.5),
            (2.7810888, 3.6471143),
            (0.4509619, -0.21891108),
        ],
    );
    assert_close(
        &as_complex(elem(&r, 1)),
        &[
            (0.08333334, 0.5833334),
            (0.07516031, -0.0364852),
            (0.4635148, 0.6078524),
            (0.4166667, 0.58333325),
            (-0.5468482, -0.6911857),
            (0.508173, -1.046848),
        ],
    );
}

#[test]
fn rfft_irfft_and_2d_fft_match_numpy() {
    let text = r#"HloModule t
ENTRY %main (r: f32[5], h: c64[3], m: c64[2,3]) -> (c64[3], f32[5], c64[2,3]) {
  %r = f32[5]{0} parameter(0)
  %h = c64[3]{0} parameter(1)
  %m = c64[2,3]{0,1} parameter(2)
  %a = c64[3]{0} fft(%r), fft_type=RFFT, fft_length={5}
  %b = f32[5]{0} fft(%h), fft_type=IRFFT, fft_length={5}
  %c = c64[2,3]{0,1} fft(%m), fft_type=FFT, fft_length={2,3}
  ROOT %t = (c64[3]{0}, f32[5]{0}, c64[2,3]{0,1}) tuple(%a, %b, %c)
}
"#;
    let m = [(1., 0.), (2., 0.), (0., 0.), (0., 0.), (-1., 0.), (3., 0.)];
    let r = run(
        text,
        &[
            floats("f32[5]", &[1., 2., 3., 4., 5.]),
            complex("c64[3]", &[(3., 1.), (1., -2.), (0.5, 0.25)]),
            complex("c64[2,3]{0,1}", &m),
        ],
    )
    .unwrap();
    assert_close(
        &as_complex(elem(&r, 0)),
        &[(15., 0.), (-2.5, 3.4409547), (-2.5, 0.81229925)],
    );
    let real: Vec<(f64, f64)> = as_f64(elem(&r, 1)).into_iter().map(|x| (x, 0.)).collect();
    assert_close(
        &real,
        &[
            (1.2, 0.),
            (1.26387009, 0.),
            (0.90353045, 0.),
            (-0.22713725, 0.),
            (-0.14026329, 0.),
        ],
    );
    let s3 = 1.7320508;
    assert_close(
        &as_complex(elem(&r, 2)),
        &[
            (5., 0.),
            (-1., s3),
            (-1., -s3),
            (1., 0.),
            (1., -3. * s3),
            (1., 3. * s3),
        ],
    );
}

#[test]
fn fft_refuses_mismatched_lengths() {
    let text = r#"HloModule t
ENTRY %main (p: c64[6]) -> c64[6] {
  %p = c64[6]{0} parameter(0)
  ROOT %f = c64[6]{0} fft(%p), fft_type=FFT, fft_length={4}
}
"#;
    let e = run(text, &[complex("c64[6]", &X6)]).unwrap_err();
    assert_eq!(e.instruction(), Some("%f"), "{e}");
}

const TOPK: &str = r#"HloModule t
%gt (a: f32[], b: f32[], i: s32[], j: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %i = s32[] parameter(2)
  %j = s32[] parameter(3)
  ROOT %c = pred[] compare(%a, %b), direction=GT
}
ENTRY %main (p: f32[2,8]) -> ((f32[2,3], s32[2,3]), (f32[2,3], s32[2,3])) {
  %p = f32[2,8]{0,1} parameter(0)
  %k = (f32[2,3]{1,0}, s32[2,3]{1,0}) custom-call(%p), custom_call_target="TopK", called_computations={%gt}
  %o = (f32[2,3]{0,1}, s32[2,3]{1,0}) topk(%p), k=3, largest=false
  ROOT %t = ((f32[2,3]{1,0}, s32[2,3]{1,0}), (f32[2,3]{0,1}, s32[2,3]{1,0})) tuple(%k, %o)
}
"#;

#[test]
fn topk_custom_call_and_opcode() {
    let x = [
        3., 1., 4., 1., 5., 9., 2., 6., 0., 0., -1., 7., 7., 2., 8., -3.,
    ];
    let r = run(TOPK, &[floats("f32[2,8]", &x)]).unwrap();
    let (k, o) = (elem(&r, 0), elem(&r, 1));
    // JAX: lax.top_k([3,1,4,1,5,9,2,6], 3) = ([9,6,5], [5,7,4]).
    assert_eq!(as_f64(elem(k, 0)), vec![9., 6., 5., 8., 7., 7.]);
    assert_eq!(as_i64(elem(k, 1)), vec![5, 7, 4, 6, 3, 4]);
    // The smallest, ties in index order.
    assert_eq!(as_f64(elem(o, 0)), vec![1., 1., 2., -3., -1., 0.]);
    assert_eq!(as_i64(elem(o, 1)), vec![1, 3, 6, 7, 2, 0]);
}

#[test]
fn lapack_cholesky_of_a_corpus_shape() {
    // potrf with uplo=L: the lower triangle becomes L, the upper is kept.
    let text = r#"HloModule t
ENTRY %main (p: f32[2,2]) -> (f32[2,2], s32[]) {
  %p = f32[2,2]{1,0} parameter(0)
  %c = f32[2,2]{0,1} copy(%p)
  ROOT %l = (f32[2,2]{0,1}, s32[]) custom-call(%c), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[2,2]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
}
"#;
    let r = run(text, &[floats("f32[2,2]", &[4., 7., 2., 5.])]).unwrap();
    assert_eq!(as_f64(elem(&r, 0)), vec![2., 7., 1., 2.]);
    assert_eq!(as_i64(elem(&r, 1)), vec![0]);
}

const OPAQUE: &str = r#"HloModule t
ENTRY %main (p: f32[4,8]) -> f32[4,8] {
  %p = f32[4,8]{1,0} parameter(0)
  ROOT %c = f32[4,8]{1,0} custom-call(%p), custom_call_target="lib", operand_layout_constraints={f32[4,8]{1,0}}
}
"#;

#[test]
fn opaque_custom_calls_depend_on_logical_operands_only() {
    let x: Vec<f64> = (0..32).map(f64::from).collect();
    let a = run(OPAQUE, &[floats("f32[4,8]", &x)]).unwrap();
    let b = run(OPAQUE, &[floats("f32[4,8]{0,1}", &x)]).unwrap();
    assert_eq!(
        as_f64(&a),
        as_f64(&b),
        "the argument's layout does not matter"
    );
    let mut y = x.clone();
    y[31] = 100.;
    let c = run(OPAQUE, &[floats("f32[4,8]", &y)]).unwrap();
    let differ = as_f64(&a)
        .iter()
        .zip(as_f64(&c))
        .filter(|(p, q)| *p != q)
        .count();
    assert!(
        differ > 28,
        "one changed operand element changes the results ({differ} of 32 differ)"
    );
    // The check says which targets it could only treat as opaque.
    let m = module(OPAQUE);
    let report = check_equivalent(&m, &m, &[1], &Limits::default()).unwrap();
    assert_eq!(report.opaque_custom_calls, vec!["lib".to_string()]);
}

#[test]
fn a_constrained_operand_in_the_wrong_layout_is_caught() {
    // `after` hands the call a column-major buffer where it reads
    // row-major: the callee sees the wrong bytes.
    let after = OPAQUE.replace(
        "%p = f32[4,8]{1,0} parameter(0)",
        "%p = f32[4,8]{0,1} parameter(0)",
    );
    let after = after.replace(
        "HloModule t",
        "HloModule t, entry_computation_layout={(f32[4,8]{0,1})->f32[4,8]{1,0}}",
    );
    let e =
        check_equivalent(&module(OPAQUE), &module(&after), &[1], &Limits::default()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("%c: a buffer written as f32[4,8]{0,1} is read as {1,0}"),
        "{text}"
    );
}

#[test]
fn an_untiled_constraint_fixes_only_the_order() {
    // On a tiled target the operand of a call constrained to {1,0} is
    // tiled in that order: the callee reads it as it is (docs/tpu.md).
    let tiled = OPAQUE
        .replace(
            "%p = f32[4,8]{1,0} parameter(0)",
            "%p = f32[4,8]{1,0:T(8,128)} parameter(0)",
        )
        .replace(
            "HloModule t",
            "HloModule t, entry_computation_layout={(f32[4,8]{1,0:T(8,128)})->f32[4,8]{1,0}}",
        );
    let report =
        check_equivalent(&module(OPAQUE), &module(&tiled), &[1], &Limits::default()).unwrap();
    assert_eq!(report.elements_compared, 32);
}
