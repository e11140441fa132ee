//! The bitcast comparison of `cargo xtask corpus`: does Tessera catch every
//! bitcast XLA's layouts make possible?
//!
//! Raw counts over XLA's `optimized.hlo` do not answer that: XLA fuses after
//! layout assignment and copies the same reshape into every fusion that
//! reads it, and its simplifier also prints some `bitcast-convert`s as
//! `bitcast`. So the comparison works at the layout level instead:
//!
//! - a *layout-level no-op* is a reshape, transpose or copy of
//!   `before_layout.hlo` whose same-named instruction in XLA's
//!   `after_layout.hlo`, under the layouts XLA gave it and its operand there,
//!   moves no byte (judged with the exact algebra: `reshape_is_bitcast`,
//!   `transpose_is_bitcast`, `layout_change_is_bitcast`), or is already a
//!   `bitcast`;
//! - Tessera catches it when the same-named instruction of its CPU output
//!   is a `bitcast`; otherwise it is a miss, reported with what Tessera
//!   emits there and the bytes that moves, and with the bytes of XLA's
//!   copies next to it (the copy it reads, and the copies of its value,
//!   followed through tuples), since XLA's no-op is often a bitcast that a
//!   copy before or after it pays for.
//!
//! XLA's `optimized.hlo` bitcasts are counted raw and *distinct*: once per
//! (value, result shape), where fusion's copies of one value are one value.
//! Two instructions hold the same value when
//! - one is a bitcast of the other (a bitcast makes no new value);
//! - one is a parameter of a fused computation with exactly one caller and
//!   the other the calling fusion's operand for it;
//! - both are in fused computations, neither is a fusion, custom-call or
//!   parameter, and they have the same opcode, shape, attributes (metadata
//!   aside), literal and operand values: the same expression recomputed in
//!   two fusions.
//!
//! Every other instruction is a value of its own.

use std::collections::{HashMap, HashSet};

use hlo::{
    Attr, AttrKey, CompId, Computation, InstId, Instruction, KnownAttr, Module, Opcode, Payload,
};
use shape::{ArrayShape, Shape};

/// One layout-level no-op of XLA that Tessera's output does not make a
/// bitcast.
pub struct Miss {
    /// The instruction's name.
    pub name: String,
    /// Its opcode in Tessera's output (or `missing`).
    pub ours_opcode: String,
    /// Bytes Tessera's instruction writes (0 when it moves no byte).
    pub ours_bytes: u64,
    /// Bytes of XLA's copies next to the instruction in `after_layout`: the
    /// copy it reads, if any, and the copies of its value.
    pub xla_copy_bytes: u64,
}

/// The comparison for one module.
#[derive(Default)]
pub struct Comparison {
    /// Reshapes, transposes and copies of `before_layout.hlo` (the
    /// candidates).
    pub candidates: usize,
    /// Candidates that are no-ops under XLA's layouts.
    pub layout_noops: usize,
    /// Layout-level no-ops that are bitcasts in Tessera's output.
    pub caught: usize,
    /// Layout-level no-ops that are not.
    pub misses: Vec<Miss>,
}

/// Raw and distinct bitcasts of XLA's `optimized.hlo`.
#[derive(Clone, Copy)]
pub struct OptimizedCount {
    /// Every `bitcast` instruction.
    pub raw: usize,
    /// Distinct ones, as defined in the module documentation.
    pub distinct: usize,
    /// Those whose element type differs from their operand's: XLA prints a
    /// `bitcast-convert` between types of one width as a `bitcast`.
    pub type_changing: usize,
}

fn bytes(a: &ArrayShape) -> u64 {
    shape::storage_size(a).map_or(0, |s| s.bytes)
}

/// Every instruction of a module by (computation name, instruction name).
fn by_name(module: &Module) -> HashMap<(&str, &str), (CompId, InstId)> {
    let mut out = HashMap::new();
    for c in module.computation_ids() {
        let comp = module.computation(c);
        for (id, inst) in comp.instructions() {
            out.insert((comp.name.as_str(), inst.name.as_str()), (c, id));
        }
    }
    out
}

/// Whether a reshape, transpose or copy moves no byte under the layouts it
/// and its operand have; `Some(true)` for a bitcast, `None` for any other
/// instruction or when a shape is not an array with a layout the algebra
/// can judge.
pub fn is_noop(comp: &Computation, id: InstId) -> Option<bool> {
    let inst = comp.inst(id);
    if inst.opcode == Opcode::Bitcast {
        return Some(true);
    }
    let out = inst.shape.as_array()?;
    let from = comp.inst(*comp.operands(id).first()?).shape.as_array()?;
    let verdict = match inst.opcode {
        Opcode::Reshape => shape::reshape_is_bitcast(from, out),
        Opcode::Transpose => shape::transpose_is_bitcast(from, out, &transpose_dims(inst)),
        Opcode::Copy => shape::layout_change_is_bitcast(from, out),
        _ => return None,
    };
    verdict.ok().map(|v| v.bitcast)
}

fn transpose_dims(inst: &Instruction) -> Vec<usize> {
    inst.attrs
        .ints(hlo::KnownAttr::Dimensions)
        .unwrap_or(&[])
        .iter()
        .filter_map(|&d| usize::try_from(d).ok())
        .collect()
}

/// The instruction whose value `id` is, following get-tuple-elements of
/// tuples and bitcasts within one computation.
fn value_source(comp: &Computation, mut id: InstId) -> InstId {
    // Bounded by the computation's size: each step moves to an operand, and
    // operands come before their users.
    for _ in 0..=comp.len() {
        let inst = comp.inst(id);
        let next = match inst.opcode {
            Opcode::Bitcast => comp.operands(id).first().copied(),
            Opcode::GetTupleElement => {
                let tuple = comp.operands(id).first().copied();
                let index = inst
                    .attrs
                    .int(hlo::KnownAttr::Index)
                    .and_then(|i| usize::try_from(i).ok());
                match (tuple, index) {
                    (Some(t), Some(i)) if comp.inst(t).opcode == Opcode::Tuple => {
                        comp.operands(t).get(i).copied()
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        match next {
            Some(n) => id = n,
            None => break,
        }
    }
    id
}

/// Bytes written by the copies of each value of a computation, by the
/// instruction the copied value comes from.
fn copies_of(comp: &Computation) -> HashMap<InstId, u64> {
    let mut out = HashMap::new();
    for (id, inst) in comp.instructions() {
        if inst.opcode != Opcode::Copy || is_noop(comp, id) == Some(true) {
            continue;
        }
        if let (Some(&operand), Some(a)) = (comp.operands(id).first(), inst.shape.as_array()) {
            *out.entry(value_source(comp, operand)).or_insert(0) += bytes(a);
        }
    }
    out
}

/// Bytes of the data-moving copy an instruction reads, if it reads one:
/// XLA often moves the data before a no-op rather than after it.
fn feeding_copy_bytes(comp: &Computation, id: InstId) -> u64 {
    let Some(&operand) = comp.operands(id).first() else {
        return 0;
    };
    let inst = comp.inst(operand);
    match (inst.opcode, inst.shape.as_array()) {
        (Opcode::Copy, Some(a)) if is_noop(comp, operand) == Some(false) => bytes(a),
        _ => 0,
    }
}

/// Compares XLA's layout-level no-ops with Tessera's bitcasts on one module.
pub fn compare(before: &Module, xla_after: &Module, ours: &Module) -> Comparison {
    let xla = by_name(xla_after);
    let tessera = by_name(ours);
    let mut xla_copies: HashMap<CompId, HashMap<InstId, u64>> = HashMap::new();
    let mut out = Comparison::default();
    for comp in &before.computations {
        for (_, inst) in comp.instructions() {
            if !matches!(
                inst.opcode,
                Opcode::Reshape | Opcode::Transpose | Opcode::Copy
            ) {
                continue;
            }
            out.candidates += 1;
            let key = (comp.name.as_str(), inst.name.as_str());
            let Some(&(xc, xi)) = xla.get(&key) else {
                continue;
            };
            let xla_comp = xla_after.computation(xc);
            if is_noop(xla_comp, xi) != Some(true) {
                continue;
            }
            out.layout_noops += 1;
            let ours_inst = tessera.get(&key).map(|&(c, i)| (ours.computation(c), i));
            match ours_inst {
                Some((c, i)) if c.inst(i).opcode == Opcode::Bitcast => out.caught += 1,
                _ => {
                    let (ours_opcode, ours_bytes) = match ours_inst {
                        Some((c, i)) => {
                            let moved = match (is_noop(c, i), c.inst(i).shape.as_array()) {
                                (Some(false), Some(a)) => bytes(a),
                                _ => 0,
                            };
                            (c.inst(i).opcode_name().to_string(), moved)
                        }
                        None => ("missing".to_string(), 0),
                    };
                    let copies = xla_copies.entry(xc).or_insert_with(|| copies_of(xla_comp));
                    let after = copies.get(&xi).copied().unwrap_or(0);
                    out.misses.push(Miss {
                        name: inst.name.clone(),
                        ours_opcode,
                        ours_bytes,
                        xla_copy_bytes: after + feeding_copy_bytes(xla_comp, xi),
                    });
                }
            }
        }
    }
    out
}

/// Counts the bitcasts of XLA's `optimized.hlo`, raw and distinct.
pub fn count_optimized(module: &Module) -> OptimizedCount {
    let mut values = Values::new(module);
    let mut raw = 0;
    let mut type_changing = 0;
    let mut distinct: HashSet<(u32, &Shape)> = HashSet::new();
    for c in module.computation_ids() {
        let comp = module.computation(c);
        for (id, inst) in comp.instructions() {
            if inst.opcode != Opcode::Bitcast {
                continue;
            }
            raw += 1;
            let Some(&operand) = comp.operands(id).first() else {
                continue;
            };
            let element = |s: &Shape| s.as_array().map(|a| a.element_type);
            if element(&inst.shape) != element(&comp.inst(operand).shape) {
                type_changing += 1;
            }
            distinct.insert((values.of(c, operand, 0), &inst.shape));
        }
    }
    OptimizedCount {
        raw,
        distinct: distinct.len(),
        type_changing,
    }
}

/// A value of `optimized.hlo`, up to fusion's duplication: an instruction
/// outside the fused computations, or an expression inside them.
#[derive(PartialEq, Eq, Hash)]
enum Value {
    Instruction(CompId, InstId),
    Expression {
        opcode: Opcode,
        shape: Box<Shape>,
        attrs: Vec<Attr>,
        payload: Payload,
        operands: Vec<u32>,
    },
}

/// Numbers the values of a module (see the module documentation for when
/// two instructions are the same value).
struct Values<'m> {
    module: &'m Module,
    /// Each fused computation's callers: (calling computation, fusion).
    callers: HashMap<CompId, Vec<(CompId, InstId)>>,
    numbers: HashMap<Value, u32>,
    memo: HashMap<(CompId, InstId), u32>,
}

/// Deeper expressions are cut off (taken as the instruction itself), so
/// that a malformed or adversarial module cannot overflow the stack.
const MAX_DEPTH: usize = 10_000;

impl<'m> Values<'m> {
    fn new(module: &'m Module) -> Values<'m> {
        let mut callers: HashMap<CompId, Vec<(CompId, InstId)>> = HashMap::new();
        for c in module.computation_ids() {
            for (id, inst) in module.computation(c).instructions() {
                if inst.opcode == Opcode::Fusion {
                    for callee in inst.attrs.called_computations() {
                        callers.entry(callee).or_default().push((c, id));
                    }
                }
            }
        }
        Values {
            module,
            callers,
            numbers: HashMap::new(),
            memo: HashMap::new(),
        }
    }

    fn number(&mut self, value: Value) -> u32 {
        let next = u32::try_from(self.numbers.len()).unwrap_or(u32::MAX);
        *self.numbers.entry(value).or_insert(next)
    }

    /// The number of the value instruction `id` of computation `c` holds.
    fn of(&mut self, c: CompId, id: InstId, depth: usize) -> u32 {
        if let Some(&n) = self.memo.get(&(c, id)) {
            return n;
        }
        let module = self.module;
        let comp = module.computation(c);
        let inst = comp.inst(id);
        let fused = self.callers.contains_key(&c);
        let first_operand = comp.operands(id).first().copied();
        let n = if depth > MAX_DEPTH {
            self.number(Value::Instruction(c, id))
        } else if let (Opcode::Bitcast, Some(o)) = (inst.opcode, first_operand) {
            self.of(c, o, depth + 1)
        } else if inst.opcode == Opcode::Parameter {
            let site = match self.callers.get(&c).map(Vec::as_slice) {
                Some(&[site]) => Some(site),
                _ => None,
            };
            let operand = site.and_then(|(sc, si)| {
                let n = usize::try_from(inst.parameter_number()?).ok()?;
                Some((sc, *module.computation(sc).operands(si).get(n)?))
            });
            match operand {
                Some((sc, o)) => self.of(sc, o, depth + 1),
                None => self.number(Value::Instruction(c, id)),
            }
        } else if fused && !matches!(inst.opcode, Opcode::Fusion | Opcode::CustomCall) {
            let operands: Vec<u32> = comp
                .operands(id)
                .to_vec()
                .into_iter()
                .map(|o| self.of(c, o, depth + 1))
                .collect();
            let attrs = inst
                .attrs
                .0
                .iter()
                .filter(|a| a.key != AttrKey::Known(KnownAttr::Metadata))
                .cloned()
                .collect();
            self.number(Value::Expression {
                opcode: inst.opcode,
                shape: Box::new(inst.shape.clone()),
                attrs,
                payload: inst.payload.clone(),
                operands,
            })
        } else {
            self.number(Value::Instruction(c, id))
        };
        self.memo.insert((c, id), n);
        n
    }
}

/// What the bitcast tables need of one module.
pub struct TableRow<'a> {
    /// The module.
    pub name: &'a str,
    /// The layout-level comparison.
    pub comparison: &'a Comparison,
    /// Every bitcast in Tessera's CPU output.
    pub ours_bitcasts: usize,
    /// Bytes moved over the whole module (copies plus data-moving
    /// transposes and reshapes), XLA's and Tessera's.
    pub xla_bytes: u64,
    /// See `xla_bytes`.
    pub ours_bytes: u64,
    /// XLA's `optimized.hlo` bitcasts, when that file parses.
    pub optimized: Option<OptimizedCount>,
}

/// The bitcast section of docs/performance.md: the layout-level table, the
/// misses one by one, and the raw and distinct counts.
pub fn tables(rows: &[TableRow<'_>]) -> String {
    let mut s = String::new();
    s.push_str("### Bitcasts: XLA's layout-level no-ops against Tessera (CPU, after relayout)\n\n");
    s.push_str("A *layout-level no-op* is a reshape, transpose or copy of `before_layout.hlo` that, under the layouts XLA's `after_layout.hlo` gives the same-named instruction and its operand, moves no byte (the exact algebra: `reshape_is_bitcast`, `transpose_is_bitcast`, `layout_change_is_bitcast`). These are the bitcasts XLA's simplifier can find from its layouts. \"caught\" counts those whose same-named instruction in Tessera's output is a `bitcast`; the others are listed below the table with what Tessera emits instead and the bytes it writes, beside the bytes of XLA's copies next to it: the copy XLA's instruction reads, if any, and the copies of its value (followed through tuples). The last two columns are the bytes moved over the whole module (as in the table above): a miss costs nothing if Tessera's total is not above XLA's.\n\n");
    s.push_str("| module | reshapes, transposes, copies | layout-level no-ops in XLA | caught by Tessera | not caught | Tessera bytes at those | XLA copy bytes next to those | XLA bytes moved | Tessera bytes moved |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let c = r.comparison;
        let at: u64 = c.misses.iter().map(|m| m.ours_bytes).sum();
        let copies: u64 = c.misses.iter().map(|m| m.xla_copy_bytes).sum();
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            c.candidates,
            c.layout_noops,
            c.caught,
            c.misses.len(),
            at,
            copies,
            r.xla_bytes,
            r.ours_bytes
        ));
    }
    let sum = |f: &dyn Fn(&TableRow<'_>) -> u64| rows.iter().map(f).sum::<u64>();
    s.push_str(&format!(
        "| **total** | {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
        sum(&|r| r.comparison.candidates as u64),
        sum(&|r| r.comparison.layout_noops as u64),
        sum(&|r| r.comparison.caught as u64),
        sum(&|r| r.comparison.misses.len() as u64),
        sum(&|r| r.comparison.misses.iter().map(|m| m.ours_bytes).sum()),
        sum(&|r| r.comparison.misses.iter().map(|m| m.xla_copy_bytes).sum()),
        sum(&|r| r.xla_bytes),
        sum(&|r| r.ours_bytes)
    ));
    let with_misses: Vec<&TableRow<'_>> = rows
        .iter()
        .filter(|r| !r.comparison.misses.is_empty())
        .collect();
    if with_misses.is_empty() {
        s.push_str("Tessera makes every layout-level no-op a bitcast.\n\n");
    } else {
        let worse: Vec<&str> = with_misses
            .iter()
            .filter(|r| r.ours_bytes > r.xla_bytes)
            .map(|r| r.name)
            .collect();
        if worse.is_empty() {
            s.push_str("Where Tessera does not make a layout-level no-op a bitcast, it does not move more bytes over the module than XLA: it chose layouts under which the instruction itself does data movement that XLA leaves to copies. The misses:\n\n");
        } else {
            s.push_str(&format!(
                "**Tessera moves more bytes than XLA in: {}.** The misses:\n\n",
                worse.join(", ")
            ));
        }
        for r in with_misses {
            s.push_str(&format!(
                "- {}: {}\n",
                r.name,
                describe_misses(&r.comparison.misses)
            ));
        }
        s.push_str("\nWhere the two byte counts of a miss are equal, both sides do the same reordering once: XLA as a no-op next to a copy, Tessera in the instruction itself. Usually XLA's later passes fold the pair into one data-moving instruction, and no bitcast is left of it in `optimized.hlo`.");
        // The one known exception, described only while the measurement
        // still shows it (checked here, so that the text cannot go stale).
        let tuple_case = rows.iter().any(|r| {
            r.name == "tuple_pytree_io"
                && matches!(r.comparison.misses.as_slice(), [m] if m.name == "transpose.2" && m.ours_bytes == m.xla_copy_bytes)
        });
        if tuple_case {
            s.push_str(" The exception is `tuple_pytree_io`: XLA copies `%transpose.2` only after it has passed through a tuple, at the root (to give the result its layout), so the pair is not folded, and `optimized.hlo` keeps the transpose as a bitcast (`%bitcast.1`) read by a copy fusion. That is one XLA bitcast more than Tessera's, for the same bytes moved: Tessera does the reordering in the transpose itself.");
        }
        s.push_str("\n\n");
    }
    s.push_str("### Bitcasts: Tessera against XLA's optimized.hlo, raw and distinct\n\n");
    s.push_str("XLA's raw count is over its whole optimized module, after its passes that run after layout assignment: fusion copies the same reshape into every fusion that reads the value, the simplifier prints a `bitcast-convert` between types of one width as `bitcast` (the sort comparators' f32 to s32; counted under \"type-changing\"), and later passes add their own. \"distinct\" counts bitcasts once per (value, result shape), where the copies fusion makes of one value are one value: a bitcast is looked through, a fused computation's parameter is the calling fusion's operand (when the computation has one caller), and two instructions inside fused computations (fusions and custom-calls aside) with the same opcode, shape, attributes apart from metadata, literal and operand values are the same value, recomputed. Every other instruction is a value of its own.\n\n");
    s.push_str("| module | Tessera bitcasts | XLA optimized.hlo bitcasts | distinct | type-changing |\n|---|---:|---:|---:|---:|\n");
    for r in rows {
        let (raw, distinct, converts) = match r.optimized {
            Some(o) => (
                o.raw.to_string(),
                o.distinct.to_string(),
                o.type_changing.to_string(),
            ),
            None => ("n/a".into(), "n/a".into(), "n/a".into()),
        };
        s.push_str(&format!(
            "| {} | {} | {raw} | {distinct} | {converts} |\n",
            r.name, r.ours_bitcasts
        ));
    }
    let opt = |f: &dyn Fn(OptimizedCount) -> usize| {
        rows.iter()
            .filter_map(|r| r.optimized)
            .map(f)
            .sum::<usize>()
    };
    s.push_str(&format!(
        "| **total** | {} | {} | {} | {} |\n\n",
        sum(&|r| r.ours_bitcasts as u64),
        opt(&|o| o.raw),
        opt(&|o| o.distinct),
        opt(&|o| o.type_changing)
    ));
    let surplus: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let o = r.optimized?;
            (o.distinct > r.ours_bitcasts).then(|| {
                format!(
                    "{} (+{}, {} type-changing)",
                    r.name,
                    o.distinct - r.ours_bitcasts,
                    o.type_changing
                )
            })
        })
        .collect();
    if !surplus.is_empty() {
        s.push_str(&format!("\"distinct\" is above Tessera's count in: {}. The layout-level table above accounts for every bitcast XLA's layouts allow; the rest of the surplus is made after layout assignment: `bitcast-convert`s printed as bitcasts, the transpose of `tuple_pytree_io` described above, bitcasts later passes add (one in `linalg_custom_calls`), and in `large_transformer_24_f32` f32[2,64,1] to f32[2,64] bitcasts of elementwise expressions that fusion rebuilds from different inputs, which the definition of \"distinct\" does not identify (before layout assignment the module has 94 reshapes of that pair, all caught).\n\n", surplus.join(", ")));
    }
    s
}

/// The misses of one module in a sentence: one by one when there are few,
/// grouped by Tessera's opcode otherwise.
fn describe_misses(misses: &[Miss]) -> String {
    let per = |m: &Miss| {
        format!(
            "`%{}` is a `{}` writing {} bytes in Tessera; XLA's copies next to it write {} bytes",
            m.name, m.ours_opcode, m.ours_bytes, m.xla_copy_bytes
        )
    };
    if misses.len() <= 3 {
        return misses.iter().map(per).collect::<Vec<_>>().join("; ") + ".";
    }
    let mut groups: Vec<(&str, usize, u64, u64)> = Vec::new();
    for m in misses {
        match groups.iter_mut().find(|g| g.0 == m.ours_opcode) {
            Some(g) => {
                g.1 += 1;
                g.2 += m.ours_bytes;
                g.3 += m.xla_copy_bytes;
            }
            None => groups.push((&m.ours_opcode, 1, m.ours_bytes, m.xla_copy_bytes)),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(op, n, ours, xla)| format!("{n} are `{op}`s writing {ours} bytes in Tessera, where XLA's copies next to them write {xla} bytes"))
        .collect();
    parts.join("; ") + "."
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Module {
        hlo::parse_module(text, "t.hlo").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn fusion_copies_of_one_bitcast_count_once() {
        // Two fusions recompute negate(x) and bitcast it the same way: one
        // distinct bitcast. The entry's bitcasts of x itself are two more,
        // one of them type-changing.
        let m = parse(
            "HloModule m\n\n\
             %f1 (p: f32[2,1]) -> f32[2] {\n  %p = f32[2,1]{1,0} parameter(0)\n  %n1 = f32[2,1]{1,0} negate(%p)\n  ROOT %b1 = f32[2]{0} bitcast(%n1)\n}\n\n\
             %f2 (q: f32[2,1]) -> f32[2] {\n  %q = f32[2,1]{1,0} parameter(0)\n  %n2 = f32[2,1]{1,0} negate(%q)\n  %b2 = f32[2]{0} bitcast(%n2)\n  ROOT %r = f32[2]{0} add(%b2, %b2)\n}\n\n\
             ENTRY %main (x: f32[2,1]) -> (f32[2], f32[2], s32[2,1], f32[2]) {\n  %x = f32[2,1]{1,0} parameter(0)\n  %a = f32[2]{0} fusion(%x), kind=kLoop, calls=%f1\n  %e = f32[2]{0} fusion(%x), kind=kLoop, calls=%f2\n  %s = s32[2,1]{1,0} bitcast(%x)\n  %y = f32[2]{0} bitcast(%x)\n  ROOT %t = (f32[2]{0}, f32[2]{0}, s32[2,1]{1,0}, f32[2]{0}) tuple(%a, %e, %s, %y)\n}\n",
        );
        let count = count_optimized(&m);
        assert_eq!((count.raw, count.distinct, count.type_changing), (4, 3, 1));
    }

    #[test]
    fn layout_level_no_ops_are_matched_by_name() {
        let before = parse(
            "HloModule m\n\nENTRY %main (x: f32[2,3]) -> (f32[6], f32[3,2]) {\n  %x = f32[2,3]{1,0} parameter(0)\n  %r = f32[6]{0} reshape(%x)\n  %t = f32[3,2]{1,0} transpose(%x), dimensions={1,0}\n  ROOT %u = (f32[6]{0}, f32[3,2]{1,0}) tuple(%r, %t)\n}\n",
        );
        // XLA: both are no-ops; a copy then reorders the transpose's result.
        let xla = parse(
            "HloModule m\n\nENTRY %main (x: f32[2,3]) -> (f32[6], f32[3,2]) {\n  %x = f32[2,3]{1,0} parameter(0)\n  %r = f32[6]{0} reshape(%x)\n  %t = f32[3,2]{0,1} transpose(%x), dimensions={1,0}\n  %c = f32[3,2]{1,0} copy(%t)\n  ROOT %u = (f32[6]{0}, f32[3,2]{1,0}) tuple(%r, %c)\n}\n",
        );
        // Tessera: the reshape is a bitcast, the transpose moves the data.
        let ours = parse(
            "HloModule m\n\nENTRY %main (x: f32[2,3]) -> (f32[6], f32[3,2]) {\n  %x = f32[2,3]{1,0} parameter(0)\n  %r = f32[6]{0} bitcast(%x)\n  %t = f32[3,2]{1,0} transpose(%x), dimensions={1,0}\n  ROOT %u = (f32[6]{0}, f32[3,2]{1,0}) tuple(%r, %t)\n}\n",
        );
        let c = compare(&before, &xla, &ours);
        assert_eq!(
            (c.candidates, c.layout_noops, c.caught, c.misses.len()),
            (2, 2, 1, 1)
        );
        let m = &c.misses[0];
        assert_eq!(
            (
                m.name.as_str(),
                m.ours_opcode.as_str(),
                m.ours_bytes,
                m.xla_copy_bytes
            ),
            ("t", "transpose", 24, 24)
        );
    }
}
