//! The layout algebra's cost must not grow with the array: the bitcast test
//! and the physical expansion on shapes from ~1e3 to ~1e12 elements.
//!
//! Run with `cargo bench -p shape --bench algebra`.

use divan::{Bencher, black_box};
use shape::{ArrayShape, Expansion, Shape, is_bitcast, parse_shape, transpose_is_bitcast};

fn main() {
    divan::main();
}

/// Array sizes, named by their element count, so the recorded table reads
/// as a function of the size.
const SIZES: [&str; 4] = ["1e3", "1e6", "1e9", "1e12"];

/// Square-ish sides (multiples of 128) for ~1e3, ~1e6, ~1e9, ~1e12 elements.
fn sides(size: &str) -> (i64, i64) {
    match size {
        "1e3" => (8, 128),
        "1e6" => (1024, 1024),
        "1e9" => (32768, 32768),
        _ => (1 << 20, 1 << 20),
    }
}

fn array(text: &str) -> ArrayShape {
    match parse_shape(text) {
        Ok(Shape::Array(a)) => a,
        other => panic!("{text}: {other:?}"),
    }
}

#[divan::bench(args = SIZES, name = "bitcast: T(8,128) vs row-major (copy)")]
fn bitcast_tiled_vs_plain(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let from = array(&format!("f32[{r},{c}]{{1,0:T(8,128)}}"));
    let to = array(&format!("f32[{r},{c}]{{1,0}}"));
    b.bench(|| is_bitcast(black_box(&from), black_box(&to)).map(|v| v.bitcast));
}

#[divan::bench(args = SIZES, name = "bitcast: T(8,128) vs its 4-d physical view (bitcast)")]
fn bitcast_reshape(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let from = array(&format!("f32[{r},{c}]{{1,0:T(8,128)}}"));
    let to = array(&format!("f32[{},8,{},128]{{3,1,2,0}}", r / 8, c / 128));
    b.bench(|| is_bitcast(black_box(&from), black_box(&to)).map(|v| v.bitcast));
}

#[divan::bench(args = SIZES, name = "bitcast: bf16 (8,128)(2,1) vs (16,128)(2,1)")]
fn bitcast_two_level(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let from = array(&format!("bf16[{r},{c}]{{1,0:T(8,128)(2,1)}}"));
    let to = array(&format!("bf16[{r},{c}]{{1,0:T(16,128)(2,1)}}"));
    b.bench(|| is_bitcast(black_box(&from), black_box(&to)).map(|v| v.bitcast));
}

#[divan::bench(args = SIZES, name = "bitcast: transpose {1,0} of a tiled 3-d array")]
fn bitcast_transpose(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let from = array(&format!("f32[4,{r},{c}]{{2,1,0:T(8,128)}}"));
    let to = array(&format!("f32[4,{c},{r}]{{1,2,0:T(8,128)}}"));
    b.bench(|| {
        transpose_is_bitcast(black_box(&from), black_box(&to), &[0, 2, 1]).map(|v| v.bitcast)
    });
}

#[divan::bench(args = SIZES, name = "expansion: Expansion::new, T(8,128)(2,1)")]
fn expansion(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let s = array(&format!("bf16[{r},{c}]{{1,0:T(8,128)(2,1)}}"));
    b.bench(|| Expansion::new(black_box(&s)).map(|e| e.storage_bytes));
}

#[divan::bench(args = SIZES, name = "index: linear_index on a built expansion")]
fn index(b: Bencher<'_, '_>, size: &str) {
    let (r, c) = sides(size);
    let e = Expansion::new(&array(&format!("bf16[{r},{c}]{{1,0:T(8,128)(2,1)}}"))).expect("valid");
    let idx = [r - 3, c - 5];
    b.bench(|| e.linear_index(black_box(&idx)));
}
