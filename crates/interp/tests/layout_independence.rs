//! Whatever the layouts (permutations, tiles, repeated tiling, `*`
//! combining, tail padding), a computation without bitcasts computes the
//! same logical values.

mod common;

use common::*;
use interp::{Buffer, Limits, Scalar, SplitMix64, check_equivalent};
use shape::{ArrayShape, Layout, PrimitiveType, Tile};

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    rng.next_u64() % n
}

/// A random layout for `dims`: any minor-to-major permutation, and one of
/// no tiling, `T(2)`, `T(2,2)`, `T(2,4)(2,1)`, `T(*,2)`, `T(3)(*,2)`, with
/// tail padding `L(4)` now and then.
fn random_layout(rng: &mut SplitMix64, dims: &[i64]) -> Layout {
    let rank = dims.len();
    let mut m2m: Vec<usize> = (0..rank).collect();
    for i in (1..rank).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        m2m.swap(i, j);
    }
    let mut layout = Layout::new(&m2m);
    let tiles: Vec<Tile> = match below(rng, 7) {
        2 => vec![Tile::new(&[2])],
        3 if rank >= 2 => vec![Tile::new(&[2, 2])],
        4 if rank >= 2 => vec![Tile::new(&[2, 4]), Tile::new(&[2, 1])],
        5 if rank >= 2 => vec![Tile::new(&[Tile::COMBINE, 2])],
        6 => vec![Tile::new(&[3]), Tile::new(&[Tile::COMBINE, 2])],
        _ => vec![],
    };
    layout = layout.with_tiles(&tiles);
    if below(rng, 5) == 0 {
        layout.tail_padding_alignment_in_elements = 4;
    }
    assert_eq!(
        layout.validate_for_dims(dims),
        Ok(()),
        "{layout} for {dims:?}"
    );
    layout
}

fn dims_text(d: &[i64]) -> String {
    d.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// A module of elementwise, transpose, reshape, broadcast, reduce and
/// convert instructions over `dims`; `layout(i, dims)` gives instruction
/// `i`'s layout text.
fn program(dims: &[i64], perm: &[usize], layout: &mut dyn FnMut(&[i64]) -> String) -> String {
    let rank = dims.len();
    let d = dims_text(dims);
    let tdims: Vec<i64> = perm.iter().map(|&p| dims[p]).collect();
    let t = dims_text(&tdims);
    let n: i64 = dims.iter().product();
    let mut bdims = dims.to_vec();
    bdims.push(3);
    let b = dims_text(&bdims);
    let rev: Vec<i64> = dims.iter().rev().copied().collect();
    let r = dims_text(&rev);
    let perm_text = perm
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let bdim_list = (0..rank)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut l = |shape: &[i64]| layout(shape);
    let (lp, lq, la, lm, lt, lf, lr, le, lc, lb, ls, lx) = (
        l(dims),
        l(dims),
        l(dims),
        l(dims),
        l(&tdims),
        l(&[n]),
        l(&rev),
        l(&tdims),
        l(dims),
        l(&bdims),
        l(dims),
        l(&tdims),
    );
    format!(
        r#"HloModule layouts
%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}
ENTRY %main (p: f32[{d}], q: f32[{d}]) -> (f32[{t}], f32[{r}], s32[{d}], f32[{d}], f32[{t}]) {{
  %p = f32[{d}]{lp} parameter(0)
  %q = f32[{d}]{lq} parameter(1)
  %a = f32[{d}]{la} add(%p, %q)
  %m = f32[{d}]{lm} multiply(%a, %p)
  %t = f32[{t}]{lt} transpose(%m), dimensions={{{perm_text}}}
  %f = f32[{n}]{lf} reshape(%t)
  %r = f32[{r}]{lr} reshape(%f)
  %e = f32[{t}]{le} exponential(%t)
  %c = s32[{d}]{lc} convert(%m)
  %b = f32[{b}]{lb} broadcast(%q), dimensions={{{bdim_list}}}
  %z = f32[] constant(0)
  %s = f32[{d}]{ls} reduce(%b, %z), dimensions={{{rank}}}, to_apply=%add
  %x = f32[{t}]{lx} copy(%e)
  ROOT %out = (f32[{t}]{lx}, f32[{r}]{lr}, s32[{d}]{lc}, f32[{d}]{ls}, f32[{t}]{lt}) tuple(%x, %r, %c, %s, %t)
}}
"#
    )
}

#[test]
fn results_do_not_depend_on_layouts() {
    let mut rng = SplitMix64::new(0x1a7_0075);
    let mut tiled_variants = 0;
    for case in 0..24 {
        let rank = 1 + below(&mut rng, 3) as usize;
        let dims: Vec<i64> = (0..rank).map(|_| 1 + below(&mut rng, 5) as i64).collect();
        let mut perm: Vec<usize> = (0..rank).collect();
        for i in (1..rank).rev() {
            let j = below(&mut rng, i as u64 + 1) as usize;
            perm.swap(i, j);
        }
        let default = program(&dims, &perm, &mut |s| {
            format!("{}", Layout::descending(s.len()))
        });
        let reference = module(&default);
        for variant in 0..3 {
            let mut lrng = SplitMix64::new(rng.next_u64());
            let text = program(&dims, &perm, &mut |s| {
                let l = random_layout(&mut lrng, s);
                if !l.tiles.is_empty() {
                    tiled_variants += 1;
                }
                format!("{l}")
            });
            let m = module(&text);
            let report = check_equivalent(&reference, &m, &[case, case + 100], &Limits::default())
                .unwrap_or_else(|e| panic!("case {case} variant {variant}: {e}\n{text}"));
            assert_eq!(report.seeds, 2);
        }
    }
    assert!(
        tiled_variants > 50,
        "only {tiled_variants} tiled layouts were drawn"
    );
}

#[test]
fn relayout_round_trips_through_any_layout() {
    let mut rng = SplitMix64::new(7);
    for _ in 0..200 {
        let rank = 1 + below(&mut rng, 4) as usize;
        let dims: Vec<i64> = (0..rank).map(|_| 1 + below(&mut rng, 6) as i64).collect();
        let n: i64 = dims.iter().product();
        let values: Vec<Scalar> = (0..n).map(|i| Scalar::Int(i * 7 - 3)).collect();
        let logical =
            Buffer::from_logical(ArrayShape::new(PrimitiveType::S32, &dims), &values).unwrap();
        let layout = random_layout(&mut rng, &dims);
        let physical = logical.relayout(Some(layout.clone())).unwrap();
        let shape = ArrayShape::with_layout(PrimitiveType::S32, &dims, layout.clone());
        let size = shape::storage_size(&shape).unwrap();
        assert_eq!(physical.slot_count() as u64, size.slots, "{shape}");
        let padding = (0..physical.slot_count())
            .filter(|&i| physical.slot(i).is_none())
            .count() as u64;
        assert_eq!(padding, size.slots - size.elements, "{shape}");
        // Every element sits where the layout algebra says.
        for (i, v) in values.iter().enumerate() {
            let mut idx = vec![0i64; rank];
            let mut rest = i as i64;
            for k in (0..rank).rev() {
                idx[k] = rest % dims[k];
                rest /= dims[k];
            }
            let slot = shape::linear_index(&shape, &idx).unwrap() as usize;
            assert_eq!(physical.slot(slot), Some(*v), "{shape} {idx:?}");
            assert_eq!(physical.get(&idx).unwrap(), *v);
        }
        assert_eq!(physical.to_logical().unwrap(), values);
        let back = physical.relayout(None).unwrap();
        assert_eq!(back.to_logical().unwrap(), values);
        assert_eq!(back.slot_count() as i64, n);
    }
}

#[test]
fn logical_eq_ignores_layouts_but_not_values() {
    let a = floats("f32[2,3]{1,0}", &[1., 2., 3., 4., 5., f64::NAN]);
    let b = floats("f32[2,3]{0,1:T(2,2)}", &[1., 2., 3., 4., 5., f64::NAN]);
    interp::logical_eq(&a, &b).unwrap();
    let c = floats("f32[2,3]{0,1}", &[1., 2., 3., 4., 6., f64::NAN]);
    let m = interp::logical_eq(&a, &c).unwrap_err();
    assert_eq!(m.index, Some(vec![1, 1]));
    assert_eq!(
        m.to_string(),
        "at the output, index (1,1): 5.0 vs 6.0 (1 of 6 elements of f32[2,3]{1,0} differ)"
    );
    // Exact: +0 and -0 differ.
    let z = floats("f32[1]", &[0.0]);
    let nz = floats("f32[1]", &[-0.0]);
    assert!(interp::logical_eq(&z, &nz).is_err());
    let d = floats("f32[3,2]", &[1., 2., 3., 4., 5., 6.]);
    assert!(
        interp::logical_eq(&a, &d)
            .unwrap_err()
            .message
            .contains("shapes differ")
    );
}

#[test]
fn random_arguments_are_deterministic_distinct_and_laid_out_per_entry_layout() {
    let text = r#"HloModule t, entry_computation_layout={(f32[64,32]{0,1}, s32[100]{0}, pred[50]{0})->f32[64,32]{1,0}}
ENTRY %main (a: f32[64,32], b: s32[100], c: pred[50]) -> f32[64,32] {
  %a = f32[64,32]{1,0} parameter(0)
  %b = s32[100]{0} parameter(1)
  %c = pred[50]{0} parameter(2)
  ROOT %n = f32[64,32]{1,0} negate(%a)
}
"#;
    let m = module(text);
    let x = interp::random_arguments(&m, 5).unwrap();
    let y = interp::random_arguments(&m, 5).unwrap();
    let z = interp::random_arguments(&m, 6).unwrap();
    assert_eq!(x.len(), 3);
    assert_eq!(
        x[0].as_array().unwrap().shape().to_string(),
        "f32[64,32]{0,1}"
    );
    for i in 0..3 {
        interp::logical_eq(&x[i], &y[i]).unwrap();
    }
    assert!(interp::logical_eq(&x[0], &z[0]).is_err());
    let mut floats = as_f64(&x[0]);
    floats.sort_by(f64::total_cmp);
    floats.dedup();
    assert!(
        floats.len() > 2000,
        "only {} distinct values of 2048",
        floats.len()
    );
    assert!(floats.iter().all(|v| (-4.0..4.0).contains(v)));
    let ints = as_i64(&x[1]);
    assert!(ints.iter().all(|v| (-32..96).contains(v)));
    let preds = as_i64(&x[2]);
    assert!(preds.contains(&0) && preds.contains(&1));
}
