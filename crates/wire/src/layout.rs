//! The layout algebra's answers for the front doors: a shape given as
//! text checked with a caret under the error, the JSON of `tessera layout
//! explain --json` and `GET /v1/layout/explain`, and the SVG picture of
//! `tessera layout draw` and `GET /v1/layout/draw` (every element with its
//! linear slot, the tiles, the padding, and the buffer in memory order).

use std::fmt::Write as _;

use serde_json::Value;
use shape::{AlgebraError, ArrayShape, Expansion, Shape, Slot};

/// `message` with the shape text and a caret under byte `offset`.
pub fn caret(text: &str, offset: usize, message: &str) -> String {
    let col = text[..offset.min(text.len())].chars().count();
    format!(
        "{message} (column {})\n  {text}\n  {}^",
        col + 1,
        " ".repeat(col)
    )
}

/// Parses and validates an array shape given on the command line.
pub fn parse(text: &str, what: &str) -> Result<(ArrayShape, Expansion), String> {
    let shape = shape::parse_shape(text)
        .map_err(|e| caret(text, e.offset, &format!("invalid {what}: {}", e.message)))?;
    let Shape::Array(array) = shape else {
        return Err(caret(
            text,
            0,
            &format!(
                "{what} must be an array shape such as f32[3,5]{{1,0}}, not a tuple, token or buffer"
            ),
        ));
    };
    let expansion = Expansion::new(&array).map_err(|e| {
        let at = match &e {
            AlgebraError::Layout(_) | AlgebraError::Sparse => text.find('{').unwrap_or(0),
            AlgebraError::Unbounded(_) => text.find('?').unwrap_or(0),
            _ => text.find('[').unwrap_or(0),
        };
        caret(text, at, &format!("invalid {what}: {e}"))
    })?;
    Ok((array, expansion))
}

pub fn list<T: std::fmt::Display>(v: &[T]) -> String {
    let mut s = String::new();
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x}");
    }
    s
}

pub fn dims(v: &[i64]) -> String {
    format!("[{}]", list(v))
}

/// The JSON description of a shape's physical expansion.
pub fn explain_json(text: &str) -> Result<Value, String> {
    let (s, e) = parse(text, "SHAPE")?;
    let pad = e.padding_slots();
    let levels: Vec<serde_json::Value> = e
        .levels
        .iter()
        .map(|l| {
            serde_json::json!({
                "tile": l.tile.to_string(),
                "input_dims": &l.input_dims[..],
                "combined_dims": &l.combined_dims[..],
                "padded_shape": &l.padded_dims[..],
                "reshaped_shape": &l.split_dims[..],
                "permutation": &l.permutation[..],
                "output_dims": &l.output_dims[..],
                "tile_counts": l.tile_counts(),
                "tile_sizes": &l.tile_sizes[..],
            })
        })
        .collect();
    // The top-level expansion fields describe the first tile level;
    // an untiled layout is its own padded and reshaped shape.
    let identity: Vec<usize> = (0..e.untiled_dims.len()).collect();
    let (padded, reshaped, perm, counts) = match e.levels.first() {
        Some(l) => (
            l.padded_dims.to_vec(),
            l.split_dims.to_vec(),
            l.permutation.to_vec(),
            l.tile_counts().to_vec(),
        ),
        None => (
            e.untiled_dims.to_vec(),
            e.untiled_dims.to_vec(),
            identity,
            Vec::new(),
        ),
    };
    let v = serde_json::json!({
        "shape": s.to_string(),
        "element_type": s.element_type.name(),
        "logical_dims": &e.logical_dims[..],
        "element_count": e.element_count,
        "legacy_padded_dims": &e.padded_dims[..],
        "physical_order": &e.physical_order[..],
        "untiled_physical_dims": &e.untiled_dims[..],
        "padded_shape": padded,
        "reshaped_shape": reshaped,
        "permutation": perm,
        "tile_counts": counts,
        "levels": levels,
        "physical_dims": &e.physical_dims[..],
        "tiled_elements": e.element_slots,
        "storage_elements": e.storage_slots,
        "padding_elements": pad,
        "element_bits": e.element_bits,
        "storage_bytes": e.storage_bytes,
    });
    Ok(v)
}

// ---------------------------------------------------------------------------
// SVG drawing.

const CELL: i64 = 34;
const MAX_DRAWN: u64 = 4096;
const PALETTE: [&str; 7] = [
    "#cfe8ff", "#ffe2b8", "#d4f5d0", "#f6d0f0", "#fff3a8", "#d8d4ff", "#ffd0d0",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The tile an element is in: the row-major number of its level-0 tile
/// (prefix and tile-count coordinates), or 0 for an untiled layout.
fn tile_of(e: &Expansion, idx: &[i64]) -> u64 {
    match (e.levels.first(), e.stage_index(idx, 1)) {
        (Some(l), Ok(s)) => {
            let n = l.prefix + l.tile_sizes.len();
            s[..n]
                .iter()
                .zip(&l.output_dims[..n])
                .fold(0u64, |acc, (&i, &d)| acc * d as u64 + i as u64)
        }
        _ => 0,
    }
}

/// Neighbouring tiles (numbers differing by 1 or by a grid row) get
/// different colors unless the grid row is a multiple of 7.
fn color(tile: u64) -> &'static str {
    PALETTE[(tile % PALETTE.len() as u64) as usize]
}

/// The SVG picture of a shape's layout: every element with its linear
/// slot and its tile, the padding, and the buffer in memory order; for more
/// than 4096 elements a summary instead.
pub fn draw_svg(text: &str) -> Result<String, String> {
    let (s, e) = parse(text, "SHAPE")?;
    Ok(
        if e.element_count > MAX_DRAWN || e.storage_slots > 4 * MAX_DRAWN {
            summary_svg(&s, &e)
        } else {
            full_svg(&s, &e)
        },
    )
}

fn full_svg(s: &ArrayShape, e: &Expansion) -> String {
    let r = s.rank();
    // Slices: every index of the leading dims, each a 2-D grid of the last two.
    let (rows, cols) = match r {
        0 => (1, 1),
        1 => (1, s.dims[0]),
        _ => (s.dims[r - 2], s.dims[r - 1]),
    };
    let lead: Vec<i64> = if r > 2 {
        s.dims[..r - 2].to_vec()
    } else {
        Vec::new()
    };
    let nslices: i64 = lead.iter().product();
    let per_row = (nslices as f64).sqrt().ceil().max(1.0) as i64;
    let (gw, gh) = (cols * CELL + 30, rows * CELL + 40);
    let grid_rows = (nslices + per_row - 1) / per_row.max(1);
    let strip_cols = 32i64;
    let slots = e.storage_slots as i64;
    let strip_rows = (slots + strip_cols - 1) / strip_cols;
    let width = (per_row * gw).max(strip_cols * CELL + 20) + 20;
    let top = 60;
    let strip_top = top + grid_rows * gh + 40;
    let height = strip_top + strip_rows * CELL + 40;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="10">"#
    );
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="white"/>"##);
    let _ = writeln!(
        o,
        r#"<text x="10" y="20" font-size="14">{}</text><text x="10" y="38">{} elements in {} slots ({} padding), {} bytes; physical dims {}; numbers are linear slots</text>"#,
        esc(&s.to_string()),
        e.element_count,
        e.storage_slots,
        e.padding_slots(),
        e.storage_bytes,
        dims(&e.physical_dims)
    );
    for sl in 0..nslices.max(1) {
        let mut prefix = vec![0i64; lead.len()];
        let mut rest = sl;
        for (p, &d) in prefix.iter_mut().zip(&lead).rev() {
            *p = rest % d;
            rest /= d;
        }
        let (ox, oy) = ((sl % per_row) * gw + 10, (sl / per_row) * gh + top);
        if r > 2 {
            let _ = writeln!(
                o,
                r#"<text x="{}" y="{}">[{},:,:]</text>"#,
                ox,
                oy + 12,
                list(&prefix)
            );
        }
        let (gx, gy) = (ox + 20, oy + 20);
        let idx_at = |i: i64, j: i64| -> Vec<i64> {
            match r {
                0 => Vec::new(),
                1 => vec![j],
                _ => {
                    let mut v = prefix.clone();
                    v.push(i);
                    v.push(j);
                    v
                }
            }
        };
        for i in 0..rows {
            for j in 0..cols {
                let idx = idx_at(i, j);
                let lin = e.linear_index(&idx).unwrap_or(0);
                let tile = tile_of(e, &idx);
                let (x, y) = (gx + j * CELL, gy + i * CELL);
                let _ = writeln!(
                    o,
                    r##"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{}" stroke="#999" stroke-width="0.5"><title>({}) -> slot {lin}</title></rect><text x="{}" y="{}" text-anchor="middle">{lin}</text>"##,
                    color(tile),
                    list(&idx),
                    x + CELL / 2,
                    y + CELL / 2 + 4
                );
                // Tile outlines: a thick edge where the neighbour is in another tile.
                if j + 1 < cols && tile_of(e, &idx_at(i, j + 1)) != tile {
                    let _ = writeln!(
                        o,
                        r##"<line x1="{0}" y1="{y}" x2="{0}" y2="{1}" stroke="#222" stroke-width="2"/>"##,
                        x + CELL,
                        y + CELL
                    );
                }
                if i + 1 < rows && tile_of(e, &idx_at(i + 1, j)) != tile {
                    let _ = writeln!(
                        o,
                        r##"<line x1="{x}" y1="{0}" x2="{1}" y2="{0}" stroke="#222" stroke-width="2"/>"##,
                        y + CELL,
                        x + CELL
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            r##"<rect x="{gx}" y="{gy}" width="{}" height="{}" fill="none" stroke="#222" stroke-width="2"/>"##,
            cols * CELL,
            rows * CELL
        );
    }
    // The buffer in memory order: each slot's element or padding.
    let _ = writeln!(
        o,
        r#"<text x="10" y="{}" font-size="12">memory order ({} slots, {} per row)</text>"#,
        strip_top - 10,
        slots,
        strip_cols
    );
    for slot in 0..slots {
        let (x, y) = (
            10 + (slot % strip_cols) * CELL,
            strip_top + (slot / strip_cols) * CELL,
        );
        match e.multi_index(slot as u64) {
            Ok(Slot::Element(idx)) => {
                let _ = writeln!(
                    o,
                    r##"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{}" stroke="#999" stroke-width="0.5"/><text x="{}" y="{}" text-anchor="middle" font-size="8">{}</text>"##,
                    color(tile_of(e, &idx)),
                    x + CELL / 2,
                    y + CELL / 2 + 3,
                    list(&idx)
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    r##"<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="#e4e4e4" stroke="#999" stroke-width="0.5"/><text x="{}" y="{}" text-anchor="middle" font-size="8" fill="#888">pad</text>"##,
                    x + CELL / 2,
                    y + CELL / 2 + 3
                );
            }
        }
    }
    o.push_str("</svg>\n");
    o
}

fn summary_svg(s: &ArrayShape, e: &Expansion) -> String {
    let mut lines = vec![
        s.to_string(),
        format!(
            "logical dims {} = {} elements",
            dims(&e.logical_dims),
            e.element_count
        ),
        format!(
            "untiled physical dims {} (major to minor)",
            dims(&e.untiled_dims)
        ),
    ];
    for (i, l) in e.levels.iter().enumerate() {
        lines.push(format!(
            "tile level {i} T{}: pad {} -> reshape {} -> transpose {{{}}} -> {}; grid {} tiles of {}",
            l.tile,
            dims(&l.padded_dims),
            dims(&l.split_dims),
            list(&l.permutation),
            dims(&l.output_dims),
            dims(l.tile_counts()),
            dims(&l.tile_sizes)
        ));
    }
    let pad = e.padding_slots();
    let frac = if e.storage_slots == 0 {
        0.0
    } else {
        pad as f64 / e.storage_slots as f64
    };
    lines.push(format!("physical dims {}", dims(&e.physical_dims)));
    lines.push(format!(
        "{} slots = {} elements + {pad} padding ({:.2}%), {} bits each, {} bytes",
        e.storage_slots,
        e.element_count,
        frac * 100.0,
        e.element_bits,
        e.storage_bytes
    ));
    lines.push(format!(
        "(more than {MAX_DRAWN} elements: summary instead of every element)"
    ));
    let width = 900;
    let bar_y = 30 + lines.len() as i64 * 20 + 10;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{}" font-family="monospace" font-size="12">"#,
        bar_y + 60
    );
    let _ = writeln!(o, r##"<rect width="100%" height="100%" fill="white"/>"##);
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<text x="10" y="{}">{}</text>"#,
            24 + i as i64 * 20,
            esc(l)
        );
    }
    let used = ((1.0 - frac) * (width as f64 - 20.0)) as i64;
    let _ = writeln!(
        o,
        r##"<rect x="10" y="{bar_y}" width="{used}" height="24" fill="#cfe8ff" stroke="#222"/>"##
    );
    let _ = writeln!(
        o,
        r##"<rect x="{}" y="{bar_y}" width="{}" height="24" fill="#e4e4e4" stroke="#222"/>"##,
        10 + used,
        width - 20 - used
    );
    let _ = writeln!(o, r#"<text x="14" y="{}">elements</text>"#, bar_y + 16);
    o.push_str("</svg>\n");
    o
}
