//! The wire format: how reports and targets look outside the process.
//!
//! Architecture invariant: only this crate (and the server and CLI on top of
//! it) knows serde's JSON; the pipeline's own types stay plain data. The
//! CLI's `--report` file and the HTTP service's `report` field are the same
//! value, built here.

pub mod layout;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use target::TargetSpec;

/// Resolves a target given as a built-in name (`cpu`, `gpu`, `tpu`, ...)
/// or as a path to a YAML file.
pub fn resolve_target(name_or_path: &str) -> Result<Arc<TargetSpec>, target::LoadError> {
    let looks_like_path = name_or_path.ends_with(".yaml")
        || name_or_path.ends_with(".yml")
        || name_or_path.contains('/');
    if looks_like_path {
        target::load_file(Path::new(name_or_path)).map(Arc::new)
    } else {
        target::load_builtin(name_or_path).map(Arc::new)
    }
}

/// The JSON report of a pipeline run.
pub fn report_json(report: &driver::PipelineReport) -> Value {
    report_json_sections(
        report,
        ReportSections {
            assignment: true,
            relayout: true,
        },
    )
}

/// Which of a report's large sections an answer carries.
#[derive(Clone, Copy, Debug)]
pub struct ReportSections {
    /// `layout_assignment`, when assignment ran.
    pub assignment: bool,
    /// `relayout`, when relayout ran.
    pub relayout: bool,
}

/// The report as [`report_json`] writes it, with only the large sections
/// `sections` names (a changes answer leaves out those the client holds).
pub fn report_json_sections(report: &driver::PipelineReport, sections: ReportSections) -> Value {
    let stats = &report.stats;
    let mut out = json!({
        "module": report.module,
        "target": report.target,
        "passes": report.passes,
        "stats": {
            "instructions": stats.instructions,
            "copies": stats.copies,
            "bitcasts": stats.bitcasts,
            "transposes": stats.transposes,
            "copy_bytes": stats.copy_bytes,
            "movement_bytes": stats.movement_bytes,
            "bytes_moved": stats.copy_bytes + stats.movement_bytes,
            "padding_bytes": stats.padding_bytes,
            "storage_bytes": stats.storage_bytes,
            "logical_bytes": stats.logical_bytes,
        },
        "timings_us": timings_json(&report.timings),
    });
    if let Some(a) = report.assignment().filter(|_| sections.assignment) {
        out["layout_assignment"] = assignment_json(a);
    }
    if let Some(r) = report.relayout().filter(|_| sections.relayout) {
        out["relayout"] = relayout_json(r);
    }
    out
}

/// The relayout report: every rewrite (what, where, bytes, why), with the
/// steps of expanded relayouts, and counts per kind.
pub fn relayout_json(r: &driver::RelayoutReport) -> Value {
    let mut counts = serde_json::Map::new();
    for &k in driver::RelayoutKind::all() {
        counts.insert(k.name().to_string(), json!(r.count(k)));
    }
    json!({
        "rewrites": r.rewrites.iter().map(|w| {
            let mut o = json!({
                "kind": w.kind.name(),
                "computation": w.computation,
                "instruction": w.instruction,
                "operand": w.operand,
                "from": w.from.to_string(),
                "to": w.to.to_string(),
                "bytes": w.bytes,
                "why": &*w.why,
            });
            if !w.users.is_empty() {
                o["users"] = json!(w.users);
            }
            if let Some(d) = &w.transpose_dims {
                o["transpose_dimensions"] = json!(d.as_slice());
            }
            if !w.steps.is_empty() {
                o["steps"] = json!(w.steps.iter().map(|s| json!({
                    "name": s.name,
                    "op": s.op,
                    "shape": s.shape.to_string(),
                    "bytes": s.bytes,
                })).collect::<Vec<_>>());
            }
            o
        }).collect::<Vec<_>>(),
        "counts": Value::Object(counts),
        "bytes_moved": r.bytes_moved(),
    })
}

/// Step timings in microseconds, keyed by step.
pub fn timings_json(timings: &[driver::Timing]) -> Value {
    let mut map = serde_json::Map::new();
    for t in timings {
        map.insert(t.step.to_string(), json!(t.duration.as_micros() as u64));
    }
    Value::Object(map)
}

/// The cost of an assignment against the best possible (bytes).
pub fn optimality_json(o: &layout_assignment::Optimality) -> Value {
    json!({
        "cost": o.cost,
        "lower_bound": o.lower_bound,
        "proven_optimal_computations": o.proven_optimal_computations,
        "computations": o.computations,
    })
}

/// One data movement (or copy of the input) of a report.
fn movement_json(m: &layout_assignment::MovementRecord) -> Value {
    json!({
        "computation": m.computation,
        "name": m.name,
        "bytes": m.bytes,
    })
}

/// The layout-assignment report.
pub fn assignment_json(r: &layout_assignment::Report) -> Value {
    json!({
        "optimality": optimality_json(&r.optimality()),
        "copies": r.copies.iter().map(|c| json!({
            "computation": c.computation,
            "name": c.name,
            "value": c.value,
            "from": c.from.to_string(),
            "to": c.to.to_string(),
            "bytes": c.bytes,
            "users": c.users,
            "cause": c.cause.name(),
            "why": &*c.why,
        })).collect::<Vec<_>>(),
        "copy_bytes": r.copy_bytes(),
        "data_movements": r.movements.iter().map(movement_json).collect::<Vec<_>>(),
        "movement_bytes": r.movement_bytes(),
        "input_copies": r.input_copies.iter().map(movement_json).collect::<Vec<_>>(),
        "input_copy_bytes": r.input_copy_bytes(),
        "padding_saved_by_combining": r.padding_saved(),
        "retilings": r.retilings.iter().map(|t| json!({
            "computation": t.computation,
            "name": t.name,
            "bytes": t.bytes,
            "why": t.why,
        })).collect::<Vec<_>>(),
        "retile_bytes": r.retile_bytes(),
        "orientations": r.orientations.iter().map(|o| json!({
            "computation": o.computation,
            "value": o.value,
            "layout": o.layout.to_string(),
            "least_padding": o.least_padding.to_string(),
            "extra_padding": o.extra_padding,
            "group": o.group,
            "why": o.why,
        })).collect::<Vec<_>>(),
        "filled_entry_layouts": r.filled.iter().map(|f| json!({
            "position": f.position,
            "layout": f.layout.to_string(),
        })).collect::<Vec<_>>(),
        "tiled_entry_layouts": r.tiled_entry.iter().map(|t| json!({
            "position": t.position,
            "given": t.given.to_string(),
            "layout": t.layout.to_string(),
        })).collect::<Vec<_>>(),
        "entry_computation_layout": r.entry_layout.as_ref().map(|l| json!({
            "parameters": l.parameters.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "result": l.result.to_string(),
        })),
        "computations": r.computations.iter().map(|c| json!({
            "name": c.name,
            "values": c.values,
            "relations": c.relations,
            "sweeps": c.sweeps,
            "moves": c.moves,
            "padding_saved": c.padding_saved,
            "cost": c.cost,
            "lower_bound": c.lower_bound,
            "proven_optimal": c.proven_optimal,
        })).collect::<Vec<_>>(),
    })
}
