//! Generated modules for the scaling benchmarks and the work-count tests:
//! one shape per way a module can grow, each of about `instructions`
//! instructions, so that growth in any one of them can be read off
//! directly. Every shape is linear in size by construction; a step whose
//! cost is not has a bug.

use std::fmt::Write as _;

/// The shapes a generated module can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// One entry computation of chained 12-instruction blocks (transpose,
    /// reshape, elementwise ops, broadcasts of a shared bias, a reduction
    /// with a shared zero, a dot with a shared weight).
    Chain,
    /// One entry computation of chained 9-instruction blocks (transpose,
    /// reshape, reshape back, add with a shared `{0,1}` parameter, dot,
    /// reduce with a shared zero constant, broadcast, exp, multiply): one
    /// parameter and one constant are read by every block, so two values
    /// have as many users as there are blocks.
    Shared,
    /// Independent 4-instruction blocks whose results all go into one
    /// root tuple, as wide as there are blocks.
    WideTuple,
    /// Many small computations, each called once from the entry: a
    /// module of about `instructions / 6` computations, each a 5-instruction
    /// block with a transpose and a reshape across its boundary.
    ManyComputations,
    /// One entry computation of 2-instruction blocks: a parameter the
    /// entry computation layout fixes in `{0,1}`, and a `dot` of it with
    /// itself, which the CPU target needs in `{1,0}`; every dot goes into
    /// one root tuple. Each block needs a copy of its own, so there are as
    /// many inserted copies as blocks.
    ManyCopies,
    /// One entry computation of 2-instruction blocks: a parameter the
    /// entry computation layout fixes in `{0,1}`, and its negation; both
    /// go into one root tuple that the layout wants in `{1,0}`, so every
    /// parameter needs a copy into the result (a copy of a result leaf,
    /// at the root).
    CopiedResult,
}

impl Shape {
    /// Every shape, in the order the benchmarks list them.
    pub const ALL: [Shape; 6] = [
        Shape::Chain,
        Shape::Shared,
        Shape::WideTuple,
        Shape::ManyComputations,
        Shape::ManyCopies,
        Shape::CopiedResult,
    ];

    /// The shape's name in benchmark tables.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Chain => "chain",
            Shape::Shared => "shared",
            Shape::WideTuple => "wide_tuple",
            Shape::ManyComputations => "many_computations",
            Shape::ManyCopies => "many_copies",
            Shape::CopiedResult => "copied_result",
        }
    }

    /// A module of this shape with about `instructions` instructions.
    pub fn module(self, instructions: usize) -> String {
        match self {
            Shape::Chain => chain(instructions),
            Shape::Shared => shared(instructions),
            Shape::WideTuple => wide_tuple(instructions),
            Shape::ManyComputations => many_computations(instructions),
            Shape::ManyCopies => many_copies(instructions),
            Shape::CopiedResult => copied_result(instructions),
        }
    }
}

const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

/// A module whose entry chains `blocks` blocks from `x0` to `x{blocks}`
/// (each written by `block` for its index) and returns the last one
/// negated; `entry_params` opens the entry computation.
fn chained(
    header: &str,
    entry_params: &str,
    blocks: usize,
    block_bytes: usize,
    block: impl Fn(&mut String, usize),
) -> String {
    let mut s = String::with_capacity(blocks * block_bytes);
    s.push_str(header);
    s.push_str(ADD);
    s.push_str("ENTRY main {\n");
    s.push_str(entry_params);
    for k in 0..blocks {
        block(&mut s, k);
    }
    let _ = writeln!(s, "  ROOT out = f32[64,128] negate(x{blocks})\n}}");
    s
}

fn chain(instructions: usize) -> String {
    chained(
        "HloModule scaling, entry_computation_layout={(f32[64,128]{1,0}, f32[128,128]{1,0}, f32[128]{0})->f32[64,128]{1,0}}\n\n",
        "  x0 = f32[64,128] parameter(0)\n  w = f32[128,128] parameter(1)\n  bias = f32[128] parameter(2)\n  zero = f32[] constant(0)\n",
        instructions.div_ceil(12).max(1),
        700,
        |s, k| {
            let x = format!("x{k}");
            let n = format!("x{}", k + 1);
            let _ = write!(
                s,
                "  t{k} = f32[128,64] transpose({x}), dimensions={{1,0}}\n\
                 \x20 r{k} = f32[64,128] reshape(t{k})\n\
                 \x20 e{k} = f32[64,128] exponential(r{k})\n\
                 \x20 b{k} = f32[64,128] broadcast(bias), dimensions={{1}}\n\
                 \x20 a{k} = f32[64,128] add(e{k}, b{k})\n\
                 \x20 m{k} = f32[64,128] multiply(a{k}, {x})\n\
                 \x20 s{k} = f32[64] reduce(m{k}, zero), dimensions={{1}}, to_apply=add\n\
                 \x20 sb{k} = f32[64,128] broadcast(s{k}), dimensions={{0}}\n\
                 \x20 d{k} = f32[64,128] dot(m{k}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n\
                 \x20 q{k} = f32[64,128] subtract(d{k}, sb{k})\n\
                 \x20 h{k} = f32[64,128] tanh(q{k})\n\
                 \x20 {n} = f32[64,128] maximum(h{k}, {x})\n"
            );
        },
    )
}

fn shared(instructions: usize) -> String {
    chained(
        "HloModule scaling_shared, entry_computation_layout={(f32[64,128]{1,0}, f32[128,64]{0,1})->f32[64,128]{1,0}}\n\n",
        "  x0 = f32[64,128] parameter(0)\n  p = f32[128,64] parameter(1)\n  zero = f32[] constant(0)\n",
        instructions.div_ceil(9).max(1),
        560,
        |s, k| {
            let _ = write!(
                s,
                "  t{k} = f32[128,64] transpose(x{k}), dimensions={{1,0}}\n\
                 \x20 r{k} = f32[8192] reshape(t{k})\n\
                 \x20 rb{k} = f32[128,64] reshape(r{k})\n\
                 \x20 a{k} = f32[128,64] add(rb{k}, p)\n\
                 \x20 d{k} = f32[128,128] dot(a{k}, x{k}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n\
                 \x20 s{k} = f32[128] reduce(d{k}, zero), dimensions={{0}}, to_apply=add\n\
                 \x20 b{k} = f32[64,128] broadcast(s{k}), dimensions={{1}}\n\
                 \x20 e{k} = f32[64,128] exponential(b{k})\n\
                 \x20 x{} = f32[64,128] multiply(e{k}, x{k})\n",
                k + 1
            );
        },
    )
}

fn wide_tuple(instructions: usize) -> String {
    let blocks = instructions.div_ceil(4).max(1);
    let mut s = String::with_capacity(blocks * 260);
    s.push_str("HloModule scaling_wide_tuple\n\n");
    s.push_str("ENTRY main {\n  x = f32[32,16] parameter(0)\n");
    for k in 0..blocks {
        let _ = write!(
            s,
            "  c{k} = f32[] constant({k})\n\
             \x20 b{k} = f32[32,16] broadcast(c{k}), dimensions={{}}\n\
             \x20 m{k} = f32[32,16] multiply(b{k}, x)\n\
             \x20 t{k} = f32[16,32] transpose(m{k}), dimensions={{1,0}}\n"
        );
    }
    s.push_str("  ROOT out = (");
    for k in 0..blocks {
        s.push_str(if k == 0 { "f32[16,32]" } else { ", f32[16,32]" });
    }
    s.push_str(") tuple(");
    for k in 0..blocks {
        let _ = write!(s, "{}t{k}", if k == 0 { "" } else { ", " });
    }
    s.push_str(")\n}\n");
    s
}

fn many_computations(instructions: usize) -> String {
    let blocks = instructions.div_ceil(6).max(1);
    let mut s = String::with_capacity(blocks * 420);
    s.push_str("HloModule scaling_many_computations\n\n");
    for k in 0..blocks {
        let _ = write!(
            s,
            "f{k} {{\n  p{k} = f32[64,32] parameter(0)\n\
             \x20 t{k} = f32[32,64] transpose(p{k}), dimensions={{1,0}}\n\
             \x20 e{k} = f32[32,64] exponential(t{k})\n\
             \x20 r{k} = f32[2048] reshape(e{k})\n\
             \x20 ROOT o{k} = f32[64,32] reshape(r{k})\n}}\n\n"
        );
    }
    s.push_str("ENTRY main {\n  x0 = f32[64,32] parameter(0)\n");
    for k in 0..blocks {
        let _ = writeln!(s, "  x{} = f32[64,32] call(x{k}), to_apply=f{k}", k + 1);
    }
    let _ = writeln!(s, "  ROOT out = f32[64,32] negate(x{blocks})\n}}");
    s
}

fn many_copies(instructions: usize) -> String {
    let blocks = instructions.div_ceil(2).max(1);
    let list = |layout: &str| vec![format!("f32[8,8]{layout}"); blocks].join(", ");
    let mut s = String::with_capacity(blocks * 130);
    let _ = write!(
        s,
        "HloModule scaling_many_copies, entry_computation_layout={{({})->({})}}\n\nENTRY main {{\n",
        list("{0,1}"),
        list("{1,0}")
    );
    for k in 0..blocks {
        let _ = write!(
            s,
            "  p{k} = f32[8,8] parameter({k})\n\
             \x20 d{k} = f32[8,8] dot(p{k}, p{k}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
        );
    }
    let _ = write!(s, "  ROOT out = ({}) tuple(", list(""));
    for k in 0..blocks {
        let _ = write!(s, "{}d{k}", if k == 0 { "" } else { ", " });
    }
    s.push_str(")\n}\n");
    s
}

fn copied_result(instructions: usize) -> String {
    let blocks = instructions.div_ceil(2).max(1);
    let list = |layout: &str| vec![format!("f32[8,8]{layout}"); 2 * blocks].join(", ");
    let mut s = String::with_capacity(blocks * 160);
    let _ = write!(
        s,
        "HloModule scaling_copied_result, entry_computation_layout={{({})->({})}}\n\nENTRY main {{\n",
        vec!["f32[8,8]{0,1}"; blocks].join(", "),
        list("{1,0}")
    );
    for k in 0..blocks {
        let _ = writeln!(
            s,
            "  p{k} = f32[8,8] parameter({k})\n  n{k} = f32[8,8] negate(p{k})"
        );
    }
    let _ = write!(s, "  ROOT out = ({}) tuple(", list(""));
    for k in 0..blocks {
        let _ = write!(s, "{}p{k}, n{k}", if k == 0 { "" } else { ", " });
    }
    s.push_str(")\n}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::Shape;

    #[test]
    fn every_shape_has_about_the_asked_size() {
        for shape in Shape::ALL {
            for n in [1_000, 10_000] {
                let text = shape.module(n);
                // One instruction a line, plus headers, braces and blanks.
                let lines = text.lines().filter(|l| l.contains(" = ")).count();
                assert!(
                    lines >= n && lines <= n + n / 5 + 20,
                    "{}: {lines} instructions for {n}",
                    shape.name()
                );
            }
        }
    }
}
