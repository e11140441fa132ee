//! Pictures of a computation: Graphviz text and a hand-laid-out SVG.
//!
//! Both show one box per instruction (opcode and name) and one edge per
//! operand use, labelled with the operand's layout; `copy` boxes are red and
//! `bitcast` boxes green, so that the relayouts stand out. Large
//! computations are cut at [`MAX_DRAWN_NODES`] instructions (in program
//! order) and the picture says so.
//!
//! The SVG layout is a simple layered one: an instruction's layer is one
//! below its deepest drawn operand; within a layer, boxes are ordered by the
//! mean position of their operands (one barycentre sweep), then placed left
//! to right.

use std::fmt::Write as _;

use hlo::{CompId, Computation, InstId, Module, Opcode};
use rustc_hash::FxHashMap;
use shape::Shape;

/// The most instructions a picture shows.
pub const MAX_DRAWN_NODES: usize = 400;

const COPY_FILL: &str = "#f8c4c4";
const COPY_STROKE: &str = "#c62828";
const BITCAST_FILL: &str = "#c8ecc8";
const BITCAST_STROKE: &str = "#2e7d32";
const PLAIN_FILL: &str = "#f2f2f2";
const PLAIN_STROKE: &str = "#555555";

fn colors(op: Opcode) -> (&'static str, &'static str) {
    match op {
        Opcode::Copy => (COPY_FILL, COPY_STROKE),
        Opcode::Bitcast => (BITCAST_FILL, BITCAST_STROKE),
        _ => (PLAIN_FILL, PLAIN_STROKE),
    }
}

/// The label of an edge: the operand's layout (`{1,0:T(8,128)}`), `{}` for
/// a scalar, `tuple` for a tuple.
fn edge_label(shape: &Shape) -> String {
    match shape {
        Shape::Array(a) => a.layout_or_default().to_string(),
        Shape::Tuple(_) => "tuple".to_string(),
        other => other.to_string(),
    }
}

/// The drawn instructions (program order, capped) and a note when capped.
fn drawn(comp: &Computation) -> (Vec<InstId>, Option<String>) {
    let all = comp.schedule();
    let ids: Vec<InstId> = all.iter().copied().take(MAX_DRAWN_NODES).collect();
    let note = (all.len() > MAX_DRAWN_NODES).then(|| {
        format!(
            "showing the first {MAX_DRAWN_NODES} of {} instructions (program order)",
            all.len()
        )
    });
    (ids, note)
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz text of computation `id`. An id not in the module gives an
/// empty graph.
pub fn to_dot(module: &Module, id: CompId) -> String {
    let mut out = String::new();
    let Some(comp) = module.computations.get(id.index()) else {
        return "digraph \"missing\" {}\n".to_string();
    };
    let (ids, note) = drawn(comp);
    let index: FxHashMap<InstId, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let _ = writeln!(out, "digraph \"{}\" {{", dot_escape(&comp.name));
    let mut title = format!("computation {}", comp.name);
    if let Some(n) = &note {
        title.push_str(" - ");
        title.push_str(n);
    }
    let _ = writeln!(out, "  label=\"{}\";", dot_escape(&title));
    out.push_str("  labelloc=t;\n  rankdir=TB;\n");
    out.push_str(
        "  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n",
    );
    out.push_str("  edge [fontname=\"monospace\", fontsize=8];\n");
    for (i, &n) in ids.iter().enumerate() {
        let inst = comp.inst(n);
        let (fill, stroke) = colors(inst.opcode);
        let root = if comp.root() == Some(n) {
            ", penwidth=2"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  n{i} [label=\"%{}\\n{}\\n{}\", fillcolor=\"{fill}\", color=\"{stroke}\"{root}];",
            dot_escape(&inst.name),
            dot_escape(inst.opcode_name()),
            dot_escape(&inst.shape.to_string()),
        );
    }
    for (i, &n) in ids.iter().enumerate() {
        for &o in comp.operands(n) {
            if let Some(&j) = index.get(&o) {
                let label = edge_label(&comp.inst(o).shape);
                let _ = writeln!(out, "  n{j} -> n{i} [label=\"{}\"];", dot_escape(&label));
            }
        }
    }
    out.push_str("}\n");
    out
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

const CHAR_W: f64 = 7.0;
const BOX_H: f64 = 38.0;
const GAP_X: f64 = 28.0;
const LAYER_H: f64 = 96.0;
const MARGIN: f64 = 24.0;
const TOP: f64 = 64.0;

struct Node {
    id: InstId,
    layer: usize,
    width: f64,
    x: f64,
    y: f64,
}

/// The layer of each drawn instruction (`ids`, at their `index`): one
/// below the deepest drawn operand, then as late as possible.
fn layers(comp: &Computation, ids: &[InstId], index: &FxHashMap<InstId, usize>) -> Vec<usize> {
    // Layers: one below the deepest drawn operand, in a topological order.
    let topo: Vec<InstId> = comp
        .topological_order()
        .unwrap_or_else(|_| comp.schedule().to_vec())
        .into_iter()
        .filter(|n| index.contains_key(n))
        .collect();
    let mut layer = vec![0usize; ids.len()];
    for &n in &topo {
        let i = index[&n];
        let l = comp
            .operands(n)
            .iter()
            .filter_map(|o| index.get(o))
            .map(|&j| layer[j] + 1)
            .max()
            .unwrap_or(0);
        layer[i] = l;
    }
    // Then as late as possible: a value sits just above its first user, so
    // that few edges cross several layers.
    for &n in topo.iter().rev() {
        let i = index[&n];
        let first_use = comp
            .users(n)
            .iter()
            .filter_map(|u| index.get(u))
            .map(|&j| layer[j])
            .min();
        if let Some(l) = first_use {
            layer[i] = layer[i].max(l.saturating_sub(1));
        }
    }
    layer
}

/// Places the nodes, `layers` rows of them, and returns the picture's
/// width.
fn place(
    comp: &Computation,
    nodes: &mut [Node],
    index: &FxHashMap<InstId, usize>,
    layers: usize,
) -> f64 {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for (i, node) in nodes.iter().enumerate() {
        rows[node.layer].push(i);
    }
    // Place rows top-down; order each row by the mean centre of its
    // operands (already placed, in earlier rows).
    let mut widest: f64 = 0.0;
    for (r, row) in rows.iter_mut().enumerate() {
        if r > 0 {
            let key = |i: usize| -> f64 {
                let centres: Vec<f64> = comp
                    .operands(nodes[i].id)
                    .iter()
                    .filter_map(|o| index.get(o))
                    .map(|&j| nodes[j].x + nodes[j].width / 2.0)
                    .collect();
                if centres.is_empty() {
                    f64::MAX
                } else {
                    centres.iter().sum::<f64>() / centres.len() as f64
                }
            };
            let mut keyed: Vec<(f64, usize)> = row.iter().map(|&i| (key(i), i)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            *row = keyed.into_iter().map(|(_, i)| i).collect();
        }
        let mut x = MARGIN;
        for &i in row.iter() {
            nodes[i].x = x;
            nodes[i].y = TOP + r as f64 * LAYER_H;
            x += nodes[i].width + GAP_X;
        }
        widest = widest.max(x - GAP_X + MARGIN);
    }
    let width = widest.max(720.0);
    // Centre every row in the picture.
    for row in &rows {
        let Some((&first, &last)) = row.first().zip(row.last()) else {
            continue;
        };
        let used = nodes[last].x + nodes[last].width - nodes[first].x;
        let shift = (width - 2.0 * MARGIN - used) / 2.0;
        for &i in row {
            nodes[i].x += shift;
        }
    }
    width
}

/// A hand-written SVG of computation `id`. An id not in the module gives
/// an empty picture.
pub fn to_svg(module: &Module, id: CompId) -> String {
    let Some(comp) = module.computations.get(id.index()) else {
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"/>\n"
            .to_string();
    };
    let (ids, note) = drawn(comp);
    let index: FxHashMap<InstId, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let layer = layers(comp, &ids, &index);
    let mut nodes: Vec<Node> = ids
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let inst = comp.inst(n);
            let chars = (inst.name.len() + 1).max(inst.opcode_name().len()).max(6);
            Node {
                id: n,
                layer: layer[i],
                width: chars as f64 * CHAR_W + 16.0,
                x: 0.0,
                y: 0.0,
            }
        })
        .collect();
    let layers = layer.iter().max().map_or(0, |m| m + 1);
    let width = place(comp, &mut nodes, &index, layers);
    let height = TOP + layers as f64 * LAYER_H + MARGIN;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"monospace\">"
    );
    out.push_str("<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#777777\"/></marker></defs>\n");
    let _ = writeln!(
        out,
        "<rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\" fill=\"white\"/>"
    );
    let _ = writeln!(
        out,
        "<text x=\"{MARGIN}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">computation {}</text>",
        xml_escape(&comp.name)
    );
    let legend = format!(
        "{} instructions; <tspan fill=\"{COPY_STROKE}\">copy</tspan> red, <tspan fill=\"{BITCAST_STROKE}\">bitcast</tspan> green; edges show the operand's layout",
        comp.len()
    );
    let _ = writeln!(
        out,
        "<text x=\"{MARGIN}\" y=\"40\" font-size=\"11\">{legend}</text>"
    );
    if let Some(n) = &note {
        let _ = writeln!(
            out,
            "<text x=\"{MARGIN}\" y=\"56\" font-size=\"11\" fill=\"#b00020\">{}</text>",
            xml_escape(n)
        );
    }
    // Every edge as its operand and its ends: the bottom middle of the
    // operand's box and the top middle of the user's.
    let edges: Vec<_> = nodes
        .iter()
        .flat_map(|node| comp.operands(node.id).iter().map(move |&o| (node, o)))
        .filter_map(|(node, o)| {
            let from = &nodes[*index.get(&o)?];
            let start = (from.x + from.width / 2.0, from.y + BOX_H);
            Some((o, start, (node.x + node.width / 2.0, node.y)))
        })
        .collect();
    // Edges first, so boxes cover their ends.
    out.push_str("<g stroke=\"#777777\" fill=\"none\">\n");
    for &(_, (x1, y1), (x2, y2)) in &edges {
        let _ = writeln!(
            out,
            "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" marker-end=\"url(#arrow)\"/>"
        );
    }
    out.push_str("</g>\n<g font-size=\"9\" fill=\"#1a4d8f\" stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">\n");
    for &(o, (x1, y1), (x2, y2)) in &edges {
        let label = edge_label(&comp.inst(o).shape);
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x1 + (x2 - x1) * 0.7,
            y1 + (y2 - y1) * 0.7 + 3.0,
            xml_escape(&label)
        );
    }
    out.push_str("</g>\n");
    for node in &nodes {
        let inst = comp.inst(node.id);
        let (fill, stroke) = colors(inst.opcode);
        let stroke_width = if comp.root() == Some(node.id) {
            2.5
        } else {
            1.0
        };
        let cx = node.x + node.width / 2.0;
        let _ = writeln!(
            out,
            "<g class=\"node {}\"><title>%{} = {}</title><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{BOX_H}\" rx=\"5\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"{stroke_width}\"/><text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" font-weight=\"bold\">{}</text><text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">%{}</text></g>",
            xml_escape(inst.opcode_name()),
            xml_escape(&inst.name),
            xml_escape(&inst.shape.to_string()),
            node.x,
            node.y,
            node.width,
            node.y + 15.0,
            xml_escape(inst.opcode_name()),
            node.y + 30.0,
            xml_escape(&inst.name),
        );
    }
    out.push_str("</svg>\n");
    out
}
