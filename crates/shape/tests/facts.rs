//! Every number of `shared/reference/facts.md` and the algebra rows (1–51)
//! of the XLA notes' test-fact table (section 5), as data-driven tables.
//!
//! Rows skipped because they test XLA API plumbing with no algebra content:
//! 31 (second half: `ChangeElementType` clearing `E`), 33 (scalar layout
//! equality), 34 (`Equal` vs `Compatible`; the layout-change half is checked
//! below), 35–37 (printing, covered by `text.rs`), 38 (`CopyLayoutBetweenShapes`),
//! 40 (missing layouts; Tessera uses the default layout), 42 (token/opaque
//! layouts).

use shape::facts::*;
use shape::{
    AlgebraError, ArrayShape, Expansion, Reason, Shape, Slot, is_bitcast, linear_index,
    multi_index, parse_shape, reshape_is_bitcast, storage_size, transpose_is_bitcast,
};

fn array(text: &str) -> ArrayShape {
    match parse_shape(text) {
        Ok(Shape::Array(a)) => a,
        other => panic!("{text}: {other:?}"),
    }
}

/// `linear_index(shape, index) == expected`, and the inverse maps back.
fn check_index(shape: &str, index: &[i64], expected: u64) {
    let s = array(shape);
    assert_eq!(
        linear_index(&s, index).unwrap(),
        expected,
        "{shape} {index:?}"
    );
    assert_eq!(
        multi_index(&s, expected).unwrap(),
        Slot::Element(index.into()),
        "{shape} @{expected}"
    );
}

#[test]
fn linear_indices() {
    for (shape, index, expected) in [
        // facts.md 1 / row 50: tile index (1,1), within-tile (0,1).
        ("f32[3,5]{1,0:T(2,2)}", &[2, 3][..], 17),
        // Row 51: the second tile reaches the cross-tile dimensions.
        ("f32[8,8]{1,0:T(2,4)(2,1,1,1)}", &[6, 5], 51),
        // Rows 44-48 (IndexUtil).
        ("f32[10,20]{0,1}", &[3, 5], 53),
        ("f32[10,20]{0,1}", &[9, 19], 199),
        ("f32[10,20]{1,0}", &[3, 5], 65),
        ("f32[10,20,30]{2,1,0}", &[3, 5, 7], 1957),
        ("f32[10,20,30]{2,1,0}", &[8, 15, 27], 5277),
        ("f32[10,20,30]{1,2,0}", &[3, 5, 7], 1945),
        ("f32[10,20,30]{1,2,0}", &[8, 15, 27], 5355),
        ("f32[10,20,30,40]{3,2,1,0}", &[3, 5, 7, 9], 78289),
        // shapes-and-layout.md: 2x3 padded to 3x5, column major: a d 0 b e 0 c f.
        ("f32[2,3]{0,1:PAD(3,5)}", &[0, 0], 0),
        ("f32[2,3]{0,1:PAD(3,5)}", &[1, 0], 1),
        ("f32[2,3]{0,1:PAD(3,5)}", &[0, 1], 3),
        ("f32[2,3]{0,1:PAD(3,5)}", &[1, 2], 7),
    ] {
        check_index(shape, index, expected);
    }
}

#[test]
fn figure_2_table() {
    // facts.md 2: 4x8 under {1,0:T(2,4)(2,1)}.
    let table = [
        [0, 2, 4, 6, 8, 10, 12, 14],
        [1, 3, 5, 7, 9, 11, 13, 15],
        [16, 18, 20, 22, 24, 26, 28, 30],
        [17, 19, 21, 23, 25, 27, 29, 31],
    ];
    let e = Expansion::new(&array("f32[4,8]{1,0:T(2,4)(2,1)}")).unwrap();
    for (r, row) in table.iter().enumerate() {
        for (c, &want) in row.iter().enumerate() {
            assert_eq!(
                e.linear_index(&[r as i64, c as i64]).unwrap(),
                want,
                "({r},{c})"
            );
        }
    }
    assert_eq!(e.storage_slots, 32);
}

#[test]
fn f32_3_5_slots_and_expansion() {
    // facts.md 1 and 4.
    let e = Expansion::new(&array("f32[3,5]{1,0:T(2,2)}")).unwrap();
    assert_eq!(
        (e.storage_slots, e.element_count, e.padding_slots()),
        (24, 15, 9)
    );
    let l = &e.levels[0];
    assert_eq!(
        (&l.padded_dims[..], &l.split_dims[..], &l.output_dims[..]),
        (&[4, 6][..], &[2, 2, 3, 2][..], &[2, 3, 2, 2][..])
    );
    assert_eq!(l.tile_counts(), &[2, 3]);
    // Element (2,3) is at (tile (1,1), within (0,1)) of [2,3,2,2], whose
    // row-major index is the tiled linear index 17.
    let at = e.stage_index(&[2, 3], 1).unwrap();
    assert_eq!(&at[..], &[1, 1, 0, 1]);
    let row_major = at
        .iter()
        .zip(&l.output_dims)
        .fold(0, |acc, (&i, &d)| acc * d + i);
    assert_eq!(row_major, 17);
    assert_eq!(e.linear_index(&[2, 3]).unwrap(), 17);
}

#[test]
fn combined_dimensions() {
    // facts.md 3: tiled as f32[112,110] with (2,3): 56 x 37 tiles of 6.
    let e = Expansion::new(&array("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")).unwrap();
    let l = &e.levels[0];
    assert_eq!(&l.combined_dims[..], &[112, 110]);
    assert_eq!(l.tile_counts(), &[56, 37]);
    assert_eq!(e.storage_slots, 12432);
    assert_eq!(56 * 37 * 6, 12432);
}

#[test]
fn storage_sizes() {
    for (shape, slots, bytes) in [
        ("s4[64,128]{1,0:E(4)}", 8192, 4096), // row 31
        ("s4[64,128]{1,0}", 8192, 8192),      // no E: XLA rounds s4 to a byte
        ("s4[0,128]{1,0:E(4)}", 0, 0),        // row 32
        ("s4[64,0]{1,0:E(4)}", 0, 0),         // row 32
        ("pred[10]{0:E(1)}", 10, 2),          // sub-byte rounding up
        ("pred[10]{0}", 10, 10),
        ("f32[3,128]{1,0:T(8,128)}", 1024, 4096),
        ("f32[3,128]{1,0}", 384, 1536),
        ("f32[5]{0:L(8)}", 8, 32),
        ("bf16[3,5]{1,0:T(2,2)}", 24, 48),
        ("f32[2,3]{0,1:PAD(3,5)}", 15, 60),
    ] {
        let s = storage_size(&array(shape)).unwrap();
        assert_eq!((s.slots, s.bytes), (slots, bytes), "{shape}");
    }
    // Overflow is an error, never a wrapped size.
    assert!(matches!(
        storage_size(&array("f32[1000000000000,1000000000000]")),
        Err(AlgebraError::Overflow { .. })
    ));
    assert!(matches!(
        storage_size(&array("f32[4611686018427387904]{0:T(3)}")),
        Err(AlgebraError::Overflow { .. })
    ));
    // Tessera rejects a tile longer than the rank (XLA would round the
    // missing dimensions up to the tile).
    assert!(matches!(
        storage_size(&array("f32[5]{0:T(8,128)}")),
        Err(AlgebraError::Layout(_))
    ));
    // Row 39: m2m length != rank.
    assert!(parse_shape("f32[2,3]{0,1,2}").is_err());
}

#[test]
fn slot_order_bumps_the_last_dimension_first() {
    // Row 49: s32[2,2] walks (0,0), (0,1), (1,0), (1,1).
    let s = array("s32[2,2]{1,0}");
    let got: Vec<Slot> = (0..4).map(|l| multi_index(&s, l).unwrap()).collect();
    let want: Vec<Slot> = [[0, 0], [0, 1], [1, 0], [1, 1]]
        .iter()
        .map(|i| Slot::Element(i[..].into()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        multi_index(&array("f32[3,5]{1,0:T(2,2)}"), 23).unwrap(),
        Slot::Padding
    );
}

/// `from → to` (reshape or layout change) is a bitcast iff `expected`.
fn check_bitcast(from: &str, to: &str, expected: bool) {
    let v = is_bitcast(&array(from), &array(to)).unwrap();
    assert_eq!(v.bitcast, expected, "{from} -> {to}: {}", v.reason);
}

#[test]
fn reshape_and_layout_bitcasts() {
    for (from, to, expected) in [
        // Row 1.
        ("f32[3,4]{1,0}", "f32[6,2]{1,0}", true),
        ("f32[3,4]{0,1}", "f32[6,2]{1,0}", false),
        ("f32[3,4]{1,0}", "f32[6,2]{0,1}", false),
        ("f32[3,4]{0,1}", "f32[6,2]{0,1}", false),
        // Rows 2-3.
        ("f32[3,2,2]{1,0,2}", "f32[6,2]{0,1}", true),
        ("f32[3,2,2]{0,1,2}", "f32[6,2]{0,1}", false),
        // Row 4: Tessera compares storage widths; f16 is half of f32.
        ("f32[3,2,2]{1,0,2}", "f16[6,2]{0,1}", false),
        ("f32[3,2,2]{1,0,2}", "s32[6,2]{0,1}", true),
        // Tiles: no padding and the same order is a bitcast.
        ("f32[8,128]{1,0:T(8,128)}", "f32[8,128]{1,0}", true),
        ("f32[3,128]{1,0:T(8,128)}", "f32[3,128]{1,0}", false),
        ("f32[16,256]{1,0:T(8,128)}", "f32[16,256]{1,0}", false),
        ("f32[16,256]{1,0:T(8,128)}", "f32[2,8,2,128]{3,1,2,0}", true),
        (
            "f32[8,128]{1,0:T(8,128)}",
            "f32[2,4,128]{2,1,0:T(*,8,128)}",
            true,
        ),
        // (8,128)(2,1) and (16,128)(2,1) agree on 16 rows: both put row
        // 8a+2b+e, column c at a·1024 + b·256 + 2c + e.
        (
            "bf16[16,128]{1,0:T(8,128)(2,1)}",
            "bf16[16,128]{1,0:T(16,128)(2,1)}",
            true,
        ),
        (
            "bf16[16,128]{1,0:T(8,128)(2,1)}",
            "bf16[16,128]{1,0:T(8,128)}",
            false,
        ),
        (
            "bf16[32,128]{1,0:T(8,128)(2,1)}",
            "bf16[32,128]{1,0:T(16,128)(2,1)}",
            true,
        ),
        (
            "bf16[16,256]{1,0:T(8,128)(2,1)}",
            "bf16[16,256]{1,0:T(16,128)(2,1)}",
            false,
        ),
        // Same buffer size (6144 slots), but the padding sits after every
        // 3012 elements in FROM and every 2008 in TO.
        (
            "f32[2,3,1004]{2,1,0:T(*,1024)}",
            "f32[3,2,1004]{2,1,0:T(*,1024)}",
            false,
        ),
        (
            "f32[2,3,1004]{2,1,0:T(*,*,1024)}",
            "f32[6024]{0:T(1024)}",
            true,
        ),
        (
            "bf16[2,3,1004]{2,1,0:T(2,*,128)}",
            "bf16[2,3012]{1,0:T(2,128)}",
            true,
        ),
        ("f32[2,4]{1,0:T(2,1)}", "f32[2,4]{0,1}", true),
        // Padding at different places, same element order, same size.
        ("f32[3,4]{1,0:PAD(4,4)}", "f32[3,4]{1,0:T(4,4)}", true),
        ("f32[3,4]{1,0:PAD(4,4)}", "f32[3,4]{1,0:T(4,1)}", false),
        ("f32[3,4]{1,0:PAD(3,5)}", "f32[3,4]{1,0:L(15)}", false),
        // Sub-byte: packed and unpacked s4 differ.
        ("s4[8]{0:E(4)}", "s4[8]{0}", false),
        ("s4[2,4]{1,0:E(4)}", "s4[8]{0:E(4)}", true),
        ("pred[3]{0:E(1)}", "pred[4]{0:E(1)}", false),
    ] {
        check_bitcast(from, to, expected);
    }
    // Row 34: different layouts of the same logical shape are no bitcast.
    check_bitcast("f32[3,2]{0,1}", "f32[3,2]{1,0}", false);
}

#[test]
fn reasons_name_what_differs() {
    let v = is_bitcast(
        &array("f32[3,128]{1,0:T(8,128)}"),
        &array("f32[3,128]{1,0}"),
    )
    .unwrap();
    assert_eq!(
        v.reason.to_string(),
        "buffer sizes differ: 4096 vs 1536 bytes"
    );
    let v = is_bitcast(&array("f32[2,2]{1,0}"), &array("f32[2,2]{0,1}")).unwrap();
    assert_eq!(
        v.reason.to_string(),
        "element (0,1) is at byte 4 in FROM but at byte 8 in TO"
    );
    let v = is_bitcast(&array("f32[2]"), &array("f32[3]")).unwrap();
    assert_eq!(v.reason, Reason::ElementCounts { from: 2, to: 3 });
    let v = is_bitcast(&array("f32[2,3]{1,0}"), &array("s32[6]{0}")).unwrap();
    assert!(v.bitcast);
    assert!(
        v.reason
            .to_string()
            .contains("element types f32 and s32 differ"),
        "{}",
        v.reason
    );
}

#[test]
fn transpose_bitcasts() {
    // Row 5.
    let (a, b) = (array("f32[10,5]{1,0}"), array("f32[5,10]{0,1}"));
    assert!(transpose_is_bitcast(&a, &b, &[1, 0]).unwrap().bitcast);
    assert!(
        !transpose_is_bitcast(&a, &array("f32[5,10]{1,0}"), &[1, 0])
            .unwrap()
            .bitcast
    );
    assert!(
        !transpose_is_bitcast(&a, &array("f16[5,10]{0,1}"), &[1, 0])
            .unwrap()
            .bitcast
    );
    assert!(matches!(
        transpose_is_bitcast(&a, &b, &[0, 1]),
        Err(AlgebraError::Mismatch(_))
    ));
    // Row 6: PermuteDimensions always gives a bitcast, tiles included.
    let perms: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for m2m in perms {
        for tiles in ["", ":T(8,128)", ":T(2,*,128)(2,1)"] {
            let l = format!("{{{},{},{}{tiles}}}", m2m[0], m2m[1], m2m[2]);
            let s = array(&format!("f32[10,100,1000]{l}"));
            for p in perms {
                let t = permute_dimensions(&s, &p).unwrap();
                let v = transpose_is_bitcast(&s, &t, &p).unwrap();
                assert!(v.bitcast, "{s} -> {t} by {p:?}: {}", v.reason);
            }
        }
    }
    // Row 29: ReorderLogicalDimensions.
    let s = permute_dimensions(&array("f32[16,3,12,17]{1,2,0,3}"), &[0, 2, 1, 3]).unwrap();
    assert_eq!(s.to_string(), "f32[16,12,3,17]{2,1,0,3}");
}

#[test]
fn transpose_layouts_both_directions() {
    let input = array("f32[3,5,6,7]{2,0,3,1:T(8,128)}");
    let perm = [2, 3, 0, 1];
    let l = transpose_result_layout(&input, &perm).unwrap();
    let out = ArrayShape {
        layout: Some(l.into()),
        ..permute_dimensions(&input, &perm).unwrap()
    };
    assert!(transpose_is_bitcast(&input, &out, &perm).unwrap().bitcast);
    let back = transpose_operand_layout(&out, &perm).unwrap();
    assert_eq!(&back, input.layout.as_ref().unwrap());
}

#[test]
fn deduce_transpose_dimensions() {
    // Rows 7-8.
    let f = array("f32[5,3]{1,0}");
    assert_eq!(
        deduce_transpose_dimensions_for_bitcast(&f, &array("f32[3,5]{0,1}")).as_deref(),
        Some(&[1, 0][..])
    );
    assert_eq!(
        deduce_transpose_dimensions_for_bitcast(&f, &array("f32[3,5]{1,0}")),
        None
    );
}

#[test]
fn reshape_dimension_utilities() {
    // Row 9.
    assert!(inserted_or_deleted_1_sized_dimensions(&[9, 1, 4], &[1, 9, 4, 1]).is_some());
    assert_eq!(
        inserted_or_deleted_1_sized_dimensions(&[9, 1, 4], &[3, 1, 12]),
        None
    );
    // Row 10.
    assert_eq!(
        dimensions_unmodified_by_reshape(&[4, 1, 3, 5, 6, 7], &[2, 6, 1, 5, 1, 42]),
        vec![(3, 3)]
    );
    // Row 11, both directions.
    assert_eq!(
        dimensions_unmodified_by_reshape(&[1, 1, 1, 1], &[1, 1, 1]),
        vec![(0, 0), (1, 1), (2, 2)]
    );
    assert_eq!(
        dimensions_unmodified_by_reshape(&[1, 1, 1], &[1, 1, 1, 1]),
        vec![(0, 0), (1, 1), (2, 2)]
    );
}

#[test]
fn align_layouts() {
    let input = "f32[3,8,5,7,11]{3,2,1,0,4}";
    for (input, out, expected) in [
        (input, &[4i64, 3, 2, 7, 5, 11][..], Some("{4,3,2,1,0,5}")), // row 12
        (input, &[3, 2, 4, 35, 11], Some("{3,2,1,0,4}")),            // row 13
        ("f32[3,8,5,7,11]{2,3,1,0,4}", &[4, 3, 2, 7, 5, 11], None),  // row 14
        (input, &[4, 3, 2, 5, 77], None),                            // row 15
        // Tile-aware: the tile is regrouped with '*' onto the output.
        (
            "f32[8,128]{1,0:T(8,128)}",
            &[2, 4, 128],
            Some("{2,1,0:T(*,8,128)}"),
        ),
        (
            "f32[16,128]{1,0:T(8,128)}",
            &[2, 8, 128],
            Some("{2,1,0:T(8,128)}"),
        ),
    ] {
        let s = array(input);
        let got = reshape_result_layout(&s, out);
        assert_eq!(
            got.as_ref().map(|l| l.to_string()).as_deref(),
            expected,
            "{input} -> {out:?}"
        );
        if let Some(l) = got {
            let o = ArrayShape::with_layout(s.element_type, out, l);
            assert!(reshape_is_bitcast(&s, &o).unwrap().bitcast);
        }
    }
    // Row 16: scattered size-1 dimensions and all-ones shapes.
    for (input, out) in [
        ("f32[1,3,1,4,1]{4,2,3,0,1}", &[3, 1, 4, 1][..]),
        ("f32[1,1,1]{0,1,2}", &[1, 1]),
        ("f32[2,1,3]{2,0,1}", &[1, 6, 1]),
        ("f32[6,1]{0,1}", &[1, 2, 1, 3]),
    ] {
        let s = array(input);
        let l = reshape_result_layout(&s, out).unwrap_or_else(|| panic!("{input} -> {out:?}"));
        let o = ArrayShape::with_layout(s.element_type, out, l);
        assert!(reshape_is_bitcast(&s, &o).unwrap().bitcast, "{s} -> {o}");
    }
}

#[test]
fn decompose_bitcasts() {
    use BitcastDecomposition::*;
    // Rows 17-19.
    assert_eq!(
        decompose_bitcast(&array("f32[1,16,17,3]{3,2,1,0}"), &array("f32[16,51]{1,0}")).unwrap(),
        Reshape
    );
    assert_eq!(
        decompose_bitcast(&array("f32[17,3,1,16]{1,0,3,2}"), &array("f32[51,16]{0,1}")).unwrap(),
        Reshape
    );
    assert_eq!(
        decompose_bitcast(
            &array("f32[3,7,6,4]{3,2,1,0}"),
            &array("f32[3,6,4,7]{2,1,3,0}")
        )
        .unwrap(),
        Transpose {
            dims: [0, 2, 3, 1].into_iter().collect()
        }
    );
    // Rows 20-23: (from, to, t1 dims, reshape shape, t2 dims).
    for (from, to, t1, reshape, t2) in [
        (
            "f32[16,17,3]{2,1,0}",
            "f32[51,16]{0,1}",
            &[0, 1, 2][..],
            "f32[16,51]{1,0}",
            &[1, 0][..],
        ),
        (
            "f32[16,17,3,7]{3,2,1,0}",
            "f32[7,16,51]{0,2,1}",
            &[0, 1, 2, 3],
            "f32[16,51,7]{2,1,0}",
            &[2, 0, 1],
        ),
        (
            "f32[16,3,17]{1,2,0}",
            "f32[51,16]{1,0}",
            &[0, 2, 1],
            "f32[51,16]{1,0}",
            &[0, 1],
        ),
        (
            "f32[16,3,17]{1,2,0}",
            "f32[16,51]{0,1}",
            &[0, 2, 1],
            "f32[51,16]{1,0}",
            &[1, 0],
        ),
    ] {
        match decompose_bitcast(&array(from), &array(to)).unwrap() {
            Trt {
                transpose1_dims,
                reshape_shape,
                transpose2_dims,
                ..
            } => {
                assert_eq!(&transpose1_dims[..], t1, "{from}");
                assert_eq!(reshape_shape.to_string(), reshape, "{from}");
                assert_eq!(&transpose2_dims[..], t2, "{from}");
            }
            other => panic!("{from} -> {to}: {other:?}"),
        }
    }
    // Row 22's first transpose goes to f32[16,17,3]{2,1,0}.
    if let Ok(Trt {
        transpose1_shape, ..
    }) = decompose_bitcast(&array("f32[16,3,17]{1,2,0}"), &array("f32[51,16]{1,0}"))
    {
        assert_eq!(transpose1_shape.to_string(), "f32[16,17,3]{2,1,0}");
    } else {
        panic!("row 22 is a Trt");
    }
}

#[test]
fn layout_utilities() {
    // Row 24 and 43: MoveDimToMajor.
    let d = shape::Layout::descending(3);
    assert_eq!(move_dim_to_major(&d, 0).to_string(), "{2,1,0}");
    assert_eq!(move_dim_to_major(&d, 1).to_string(), "{2,0,1}");
    assert_eq!(
        move_dim_to_major(&shape::parse_layout("{0,2,1}").unwrap(), 0).to_string(),
        "{2,1,0}"
    );
    let t = parse_shape("(f32[10,10,10]{2,1,0}, f32[10,10,10]{0,2,1})").unwrap();
    assert_eq!(
        move_dim_to_major_in_shape(&t, 1).to_string(),
        "(f32[10,10,10]{2,0,1}, f32[10,10,10]{0,2,1})"
    );
    // Rows 25-26: DeleteDimensions.
    assert_eq!(
        delete_dimensions(&array("f32[5,3,2]{2,0,1}"), &[1])
            .unwrap()
            .to_string(),
        "f32[5,2]{1,0}"
    );
    for dims in [[1, 2, 3], [3, 1, 2], [2, 3, 1]] {
        let s = delete_dimensions(&array("f32[5,3,2,7,9]{2,0,1,4,3}"), &dims).unwrap();
        assert_eq!(s.to_string(), "f32[5,9]{0,1}");
    }
    // Row 27.
    let s = descending_with_same_physical_layout(&array("f32[128,24,4,48,48]{2,4,3,1,0}")).unwrap();
    assert_eq!(s.to_string(), "f32[128,24,48,48,4]{4,3,2,1,0}");
    // Row 28.
    let l = shape::parse_layout("{0,2,1}").unwrap();
    assert_eq!(prepend_major_dimension(&l).to_string(), "{1,3,2,0}");
    assert_eq!(append_minor_dimension(&l).to_string(), "{3,0,2,1}");
    // Row 30.
    assert!(is_effectively_most_major_dimension(
        &array("f32[1,1,16,1,279]{4,0,1,2,3}"),
        2
    ));
    assert!(!is_effectively_most_major_dimension(
        &array("f32[1,1,16,1,279]{0,1,2,3,4}"),
        2
    ));
    // Row 41.
    assert_eq!(descending_layout(2).to_string(), "{1,0}");
    assert_eq!(descending_layout(3).to_string(), "{2,1,0}");
    assert_eq!(descending_layout(4).to_string(), "{3,2,1,0}");
    assert_eq!(descending_layout(0).to_string(), "{}");
    // Permutation helpers.
    assert_eq!(
        &compose_permutations(&[2, 0, 1], &[1, 2, 0])[..],
        &[0, 1, 2]
    );
    assert_eq!(&inverse_permutation(&[2, 0, 1])[..], &[1, 2, 0]);
    assert_eq!(&reverse_order(&[0, 2, 1])[..], &[1, 2, 0]);
}
