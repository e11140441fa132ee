//! Structural comparison of modules: the same header, tables, computations,
//! instructions (names, opcodes, shapes with layouts, payloads, operands,
//! control predecessors, every attribute) and roots. Instructions and
//! computations are matched by name and position, never by id, so two
//! modules parsed from different texts compare equal when they say the
//! same thing.

use std::fmt::Debug;

use crate::{AttrValue, Computation, InstId, Module};

/// The first structural difference between two modules, described for a
/// test failure, or `None` when they are equal.
pub fn diff_modules(a: &Module, b: &Module) -> Option<String> {
    fn field<T: PartialEq + Debug>(what: &str, x: &T, y: &T) -> Option<String> {
        (x != y).then(|| format!("{what} differs: {x:?} vs {y:?}"))
    }
    field("module name", &a.name, &b.name)
        .or_else(|| {
            field(
                "entry_computation_layout",
                &a.entry_computation_layout,
                &b.entry_computation_layout,
            )
        })
        .or_else(|| {
            field(
                "entry_computation_layout_given",
                &a.entry_computation_layout_given,
                &b.entry_computation_layout_given,
            )
        })
        .or_else(|| {
            field(
                "input_output_alias",
                &a.input_output_alias,
                &b.input_output_alias,
            )
        })
        .or_else(|| field("is_scheduled", &a.is_scheduled, &b.is_scheduled))
        .or_else(|| field("header attributes", &a.header_attrs, &b.header_attrs))
        .or_else(|| field("debug tables", &a.debug_tables, &b.debug_tables))
        .or_else(|| field("entry", &a.entry, &b.entry))
        .or_else(|| {
            field(
                "computation count",
                &a.computations.len(),
                &b.computations.len(),
            )
        })
        .or_else(|| {
            a.computations
                .iter()
                .zip(&b.computations)
                .find_map(|(x, y)| diff_computation(a, x, b, y))
        })
}

fn name_of(c: &Computation, id: InstId) -> &str {
    c.get(id).map_or("<missing>", |i| i.name.as_str())
}

fn comp_name(m: &Module, id: crate::CompId) -> &str {
    m.computations
        .get(id.index())
        .map_or("<missing>", |c| c.name.as_str())
}

/// An attribute value with computation ids replaced by names.
fn value_text(m: &Module, v: &AttrValue) -> String {
    match v {
        AttrValue::Computation(c) => format!("Computation(%{})", comp_name(m, *c)),
        AttrValue::Computations(cs) => {
            let names: Vec<_> = cs.iter().map(|c| comp_name(m, *c)).collect();
            format!("Computations({names:?})")
        }
        other => format!("{other:?}"),
    }
}

fn diff_computation(ma: &Module, a: &Computation, mb: &Module, b: &Computation) -> Option<String> {
    let at = |what: &str| format!("computation %{}: {what}", a.name);
    if a.name != b.name {
        return Some(format!(
            "computation names differ: %{} vs %{}",
            a.name, b.name
        ));
    }
    if a.execution_thread != b.execution_thread {
        return Some(at(&format!(
            "execution_thread differs: {:?} vs {:?}",
            a.execution_thread, b.execution_thread
        )));
    }
    if a.len() != b.len() {
        return Some(at(&format!(
            "instruction count differs: {} vs {}",
            a.len(),
            b.len()
        )));
    }
    let ra = a.root().map(|r| name_of(a, r));
    let rb = b.root().map(|r| name_of(b, r));
    if ra != rb {
        return Some(at(&format!("root differs: {ra:?} vs {rb:?}")));
    }
    for ((ia, x), (ib, y)) in a.instructions().zip(b.instructions()) {
        let here = |what: String| {
            Some(format!(
                "computation %{}, instruction %{}: {what}",
                a.name, x.name
            ))
        };
        if x.name != y.name {
            return here(format!("name differs from %{}", y.name));
        }
        if x.opcode != y.opcode || x.opcode_name() != y.opcode_name() {
            return here(format!(
                "opcode differs: {} vs {}",
                x.opcode_name(),
                y.opcode_name()
            ));
        }
        if x.shape != y.shape {
            return here(format!("shape differs: {} vs {}", x.shape, y.shape));
        }
        if x.payload != y.payload {
            return here(format!(
                "payload differs: {:?} vs {:?}",
                x.payload, y.payload
            ));
        }
        let oa: Vec<_> = a.operands(ia).iter().map(|&o| name_of(a, o)).collect();
        let ob: Vec<_> = b.operands(ib).iter().map(|&o| name_of(b, o)).collect();
        if oa != ob {
            return here(format!("operands differ: {oa:?} vs {ob:?}"));
        }
        let ca: Vec<_> = x
            .control_predecessors()
            .iter()
            .map(|&o| name_of(a, o))
            .collect();
        let cb: Vec<_> = y
            .control_predecessors()
            .iter()
            .map(|&o| name_of(b, o))
            .collect();
        if ca != cb {
            return here(format!("control predecessors differ: {ca:?} vs {cb:?}"));
        }
        if x.attrs.0.len() != y.attrs.0.len() {
            let ka: Vec<_> = x.attrs.0.iter().map(|a| a.key.name()).collect();
            let kb: Vec<_> = y.attrs.0.iter().map(|a| a.key.name()).collect();
            return here(format!("attributes differ: {ka:?} vs {kb:?}"));
        }
        for (p, q) in x.attrs.0.iter().zip(&y.attrs.0) {
            if p.key != q.key {
                return here(format!(
                    "attribute '{}' vs '{}'",
                    p.key.name(),
                    q.key.name()
                ));
            }
            let (vp, vq) = (value_text(ma, &p.value), value_text(mb, &q.value));
            if vp != vq {
                return here(format!(
                    "attribute '{}' differs: {vp} vs {vq}",
                    p.key.name()
                ));
            }
        }
    }
    None
}
