//! Modules to try: generated ones (random element types, shapes, layouts
//! and tiles, chains of operations, call chains, loops, conditionals and
//! fusions nested up to thousands of levels) and bundled XLA dumps, both
//! then edited as text (other layouts, tiles, element types, dimension
//! lists, AUTO entry layouts).

use std::fmt::Write as _;

use interp::SplitMix64;

/// A random source for one case.
pub(crate) struct Rng(SplitMix64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    /// True with probability `num / den`.
    pub(crate) fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Small XLA dumps to edit.
const SEEDS: &[&str] = &[
    include_str!("../../../testdata/xla-cpu/entry_layout_colmajor/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/tuple_pytree_io/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/einsum_awkward/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/pad_ops/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/int8_quantized_matmul/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/transpose_reshape_chain/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/cond_switch/before_layout.hlo"),
    include_str!("../../../testdata/xla-cpu/loops_fori_while/before_layout.hlo"),
];

/// Tiles an edit or a generated layout may carry.
const TILES: &[&str] = &[
    "",
    ":T(2,2)",
    ":T(8,128)",
    ":T(8,128)(2,1)",
    ":T(2,*,4)",
    ":T(1024)",
    ":T(4)(2)",
    ":T(8,128)E(4)",
    ":T(8,128)(4,1)",
    ":T(4,128)(8,1)E(4)",
    ":T(1,128)",
];

/// Element types: name, kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Float,
    Int,
    Pred,
}

const TYPES: &[(&str, Kind)] = &[
    ("f32", Kind::Float),
    ("bf16", Kind::Float),
    ("f16", Kind::Float),
    ("f64", Kind::Float),
    ("s32", Kind::Int),
    ("s8", Kind::Int),
    ("u8", Kind::Int),
    ("s4", Kind::Int),
    ("u16", Kind::Int),
    ("pred", Kind::Pred),
];

/// Sizes a generated dimension may take.
const DIMS: &[i64] = &[1, 2, 3, 4, 5, 8, 16, 33, 128, 130];

/// One generated value: its name, element type and dimensions.
#[derive(Clone)]
struct Val {
    name: String,
    ty: usize,
    dims: Vec<i64>,
}

/// A module being generated: its computations so far and its entry body.
struct Builder<'r> {
    rng: &'r mut Rng,
    comps: String,
    body: String,
    params: Vec<Val>,
    values: Vec<Val>,
    next: usize,
    /// Levels of nesting generated so far, to keep a case's size bounded.
    levels: usize,
}

fn array(ty: usize, dims: &[i64]) -> String {
    let d: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("{}[{}]", TYPES[ty].0, d.join(","))
}

impl Builder<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// The shape text of a value, with a random layout (sometimes none,
    /// sometimes tiled) when `layouts` says so.
    fn shape(&mut self, ty: usize, dims: &[i64], layouts: bool) -> String {
        let base = array(ty, dims);
        if !layouts || dims.is_empty() || self.rng.chance(1, 3) {
            return base;
        }
        let mut order: Vec<usize> = (0..dims.len()).rev().collect();
        if self.rng.chance(1, 2) {
            for i in (1..order.len()).rev() {
                let j = self.rng.below(i + 1);
                order.swap(i, j);
            }
        }
        // Mostly tiles that fit the rank; sometimes any tile at all.
        let tile = if dims.is_empty() || self.rng.chance(1, 2) {
            ""
        } else if self.rng.chance(1, 8) {
            *self.rng.pick(TILES)
        } else if dims.len() == 1 {
            *self
                .rng
                .pick(&[":T(128)", ":T(1024)", ":T(4)(2)", ":T(256)"])
        } else {
            *self.rng.pick(&[
                ":T(2,2)",
                ":T(8,128)",
                ":T(8,128)(2,1)",
                ":T(4,128)",
                ":T(1,128)",
                ":T(8,128)(4,1)",
                ":T(8,128)(8,1)E(4)",
            ])
        };
        let o: Vec<String> = order.iter().map(usize::to_string).collect();
        format!("{base}{{{}{tile}}}", o.join(","))
    }

    fn random_dims(&mut self) -> Vec<i64> {
        let rank = self.rng.below(4);
        let mut dims: Vec<i64> = (0..rank).map(|_| *self.rng.pick(DIMS)).collect();
        // Keep evaluation cheap: at most 4096 elements.
        while dims.iter().product::<i64>() > 4096 {
            let i = self.rng.below(dims.len());
            dims[i] = (dims[i] / 4).max(1);
        }
        dims
    }

    /// Defines `name = SHAPE op` in the entry body and returns the value.
    fn emit(&mut self, ty: usize, dims: Vec<i64>, rest: &str) -> Val {
        let name = self.fresh("v");
        let shape = self.shape(ty, &dims, true);
        let _ = writeln!(self.body, "  %{name} = {shape} {rest}");
        let v = Val { name, ty, dims };
        self.values.push(v.clone());
        v
    }

    /// A scalar computation combining two values of type `ty` (a reducer).
    fn reducer(&mut self, ty: usize) -> String {
        let name = self.fresh("red");
        let t = TYPES[ty].0;
        let op = if TYPES[ty].1 == Kind::Pred {
            "or"
        } else {
            *self.rng.pick(&["add", "maximum", "multiply", "minimum"])
        };
        let (a, b) = (self.fresh("a"), self.fresh("b"));
        let _ = writeln!(
            self.comps,
            "%{name} ({a}: {t}[], {b}: {t}[]) -> {t}[] {{\n  %{a} = {t}[] parameter(0)\n  %{b} = {t}[] parameter(1)\n  ROOT %{name}.r = {t}[] {op}(%{a}, %{b})\n}}\n"
        );
        name
    }

    /// A unary op for type `ty` that keeps it.
    fn unary(&mut self, ty: usize) -> &'static str {
        match TYPES[ty].1 {
            Kind::Pred => "not",
            Kind::Int => {
                const INT: [&str; 4] = ["negate", "abs", "not", "copy"];
                INT[self.rng.below(INT.len())]
            }
            Kind::Float => {
                const FLOAT: [&str; 6] = ["negate", "abs", "exponential", "floor", "copy", "tanh"];
                FLOAT[self.rng.below(FLOAT.len())]
            }
        }
    }

    /// A chain of `depth` computations nested as `how` says, each applying
    /// a unary op, around a value of `ty[dims]`; returns the outermost
    /// computation's name. Written innermost first, so the text defines
    /// every computation before its use, as XLA prints.
    fn nest(&mut self, ty: usize, dims: &[i64], depth: usize, how: usize) -> String {
        let s = array(ty, dims);
        let mut inner = String::new();
        let cond = if how == 1 {
            let c = self.fresh("cond");
            let x = self.fresh("x");
            let _ = writeln!(
                self.comps,
                "%{c} ({x}: {s}) -> pred[] {{\n  %{x} = {s} parameter(0)\n  ROOT %{c}.r = pred[] constant(false)\n}}\n"
            );
            c
        } else {
            String::new()
        };
        for level in 0..depth {
            let name = self.fresh("n");
            let x = self.fresh("x");
            let op = self.unary(ty);
            let laid = self.rng.chance(1, 4);
            let shape = self.shape(ty, dims, laid);
            let _ = writeln!(
                self.comps,
                "%{name} ({x}: {s}) -> {s} {{\n  %{x} = {s} parameter(0)"
            );
            let applied = format!("%{name}.u");
            let _ = writeln!(self.comps, "  {applied} = {shape} {op}(%{x})");
            if level == 0 {
                let _ = writeln!(self.comps, "  ROOT %{name}.r = {s} copy({applied})\n}}\n");
            } else {
                let line = match how {
                    0 => format!("call({applied}), to_apply=%{inner}"),
                    1 => format!("while({applied}), condition=%{cond}, body=%{inner}"),
                    2 => {
                        let k = self.fresh("k");
                        let _ =
                            writeln!(self.comps, "  %{k} = pred[] constant({})", level % 2 == 0);
                        format!(
                            "conditional(%{k}, {applied}, {applied}), true_computation=%{inner}, false_computation=%{inner}"
                        )
                    }
                    _ => format!("fusion({applied}), kind=kLoop, calls=%{inner}"),
                };
                let _ = writeln!(self.comps, "  ROOT %{name}.r = {s} {line}\n}}\n");
            }
            inner = name;
        }
        inner
    }

    /// A reduce of one dimension of `v`.
    fn reduce_step(&mut self, v: &Val) {
        let rank = v.dims.len();
        let d = self.rng.below(rank);
        let mut dims = v.dims.clone();
        dims.remove(d);
        let red = self.reducer(v.ty);
        let t = TYPES[v.ty].0;
        let init = self.fresh("init");
        let zero = match TYPES[v.ty].1 {
            Kind::Pred => "false",
            _ => "0",
        };
        let _ = writeln!(self.body, "  %{init} = {t}[] constant({zero})");
        self.emit(
            v.ty,
            dims,
            &format!(
                "reduce(%{}, %{init}), dimensions={{{d}}}, to_apply=%{red}",
                v.name
            ),
        );
    }

    /// A slice of one dimension of `v`.
    fn slice_step(&mut self, v: &Val) {
        let rank = v.dims.len();
        let d = self.rng.below(rank);
        let start = self.rng.below(v.dims[d] as usize) as i64;
        let mut dims = v.dims.clone();
        dims[d] -= start;
        let spec: Vec<String> = v
            .dims
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if i == d {
                    format!("[{start}:{n}]")
                } else {
                    format!("[0:{n}]")
                }
            })
            .collect();
        self.emit(
            v.ty,
            dims,
            &format!("slice(%{}), slice={{{}}}", v.name, spec.join(", ")),
        );
    }

    /// A bitcast of `v`: sometimes a real one (same layout, merged
    /// dimensions), sometimes one that changes the size.
    fn bitcast_step(&mut self, v: &Val) {
        let n: i64 = v.dims.iter().product();
        let n = if self.rng.chance(1, 8) { n + 1 } else { n };
        let name = self.fresh("v");
        let _ = writeln!(
            self.body,
            "  %{name} = {} bitcast(%{})",
            array(v.ty, &[n]),
            v.name
        );
        self.values.push(Val {
            name,
            ty: v.ty,
            dims: vec![n],
        });
    }

    /// One random operation on the values so far.
    fn step(&mut self) {
        let v = self.rng.pick(&self.values).clone();
        let rank = v.dims.len();
        match self.rng.below(12) {
            0 | 1 => {
                let op = self.unary(v.ty);
                self.emit(v.ty, v.dims.clone(), &format!("{op}(%{})", v.name));
            }
            2 => {
                let same: Vec<Val> = self
                    .values
                    .iter()
                    .filter(|w| w.ty == v.ty && w.dims == v.dims)
                    .cloned()
                    .collect();
                let w = self.rng.pick(&same).clone();
                let op = match TYPES[v.ty].1 {
                    Kind::Pred => *self.rng.pick(&["and", "or", "xor"]),
                    _ => *self.rng.pick(&["add", "multiply", "maximum", "subtract"]),
                };
                self.emit(
                    v.ty,
                    v.dims.clone(),
                    &format!("{op}(%{}, %{})", v.name, w.name),
                );
            }
            3 if rank > 1 => {
                let mut perm: Vec<usize> = (0..rank).collect();
                for i in (1..rank).rev() {
                    let j = self.rng.below(i + 1);
                    perm.swap(i, j);
                }
                let dims: Vec<i64> = perm.iter().map(|&p| v.dims[p]).collect();
                let p: Vec<String> = perm.iter().map(usize::to_string).collect();
                self.emit(
                    v.ty,
                    dims,
                    &format!("transpose(%{}), dimensions={{{}}}", v.name, p.join(",")),
                );
            }
            4 => {
                // Flatten, or split the leading dimension, or merge two.
                let n: i64 = v.dims.iter().product();
                let dims = match self.rng.below(3) {
                    0 => vec![n],
                    1 if rank >= 2 => {
                        let mut d = vec![v.dims[0] * v.dims[1]];
                        d.extend_from_slice(&v.dims[2..]);
                        d
                    }
                    _ => {
                        let f = [2, 4, 8]
                            .into_iter()
                            .find(|f| n % f == 0 && n > *f)
                            .unwrap_or(1);
                        vec![f, n / f]
                    }
                };
                self.emit(v.ty, dims, &format!("reshape(%{})", v.name));
            }
            5 if rank < 3 => {
                let extra = *self.rng.pick(&[2i64, 3, 8, 128]);
                let at = self.rng.below(rank + 1);
                let mut dims = v.dims.clone();
                dims.insert(at, extra);
                let map: Vec<String> = (0..rank)
                    .map(|i| (if i < at { i } else { i + 1 }).to_string())
                    .collect();
                self.emit(
                    v.ty,
                    dims,
                    &format!("broadcast(%{}), dimensions={{{}}}", v.name, map.join(",")),
                );
            }
            6 if rank > 0 => self.reduce_step(&v),
            7 => {
                let ty = self.rng.below(TYPES.len());
                self.emit(ty, v.dims.clone(), &format!("convert(%{})", v.name));
            }
            8 => {
                let ty = v.ty;
                self.emit(ty, v.dims.clone(), &format!("copy(%{})", v.name));
            }
            9 if rank > 0 => self.slice_step(&v),
            10 if self.levels < 4000 => {
                // A nest: mostly shallow, sometimes thousands deep.
                let depth = if self.rng.chance(1, 20) {
                    500 + self.rng.below(1500)
                } else {
                    1 + self.rng.below(12)
                };
                self.levels += depth;
                let how = self.rng.below(4);
                let outer = self.nest(v.ty, &v.dims, depth, how);
                self.emit(
                    v.ty,
                    v.dims.clone(),
                    &format!("call(%{}), to_apply=%{outer}", v.name),
                );
            }
            11 if rank > 0 => self.bitcast_step(&v),
            _ => {
                let op = self.unary(v.ty);
                self.emit(v.ty, v.dims.clone(), &format!("{op}(%{})", v.name));
            }
        }
    }
}

/// A generated module.
fn generated(rng: &mut Rng) -> String {
    let mut b = Builder {
        rng,
        comps: String::new(),
        body: String::new(),
        params: Vec::new(),
        values: Vec::new(),
        next: 0,
        levels: 0,
    };
    let ty = b.rng.below(TYPES.len());
    let dims = b.random_dims();
    let nparams = 1 + b.rng.below(2);
    for i in 0..nparams {
        let (ty, dims) = if i > 0 && b.rng.chance(1, 2) {
            (b.rng.below(TYPES.len()), b.random_dims())
        } else {
            (ty, dims.clone())
        };
        let name = format!("p{i}");
        let shape = b.shape(ty, &dims, true);
        let _ = writeln!(b.body, "  %{name} = {shape} parameter({i})");
        let v = Val { name, ty, dims };
        b.params.push(v.clone());
        b.values.push(v);
    }
    let steps = 1 + b.rng.below(10);
    for _ in 0..steps {
        b.step();
    }
    // The root: the last value, or a tuple of two.
    let last = b.values.last().cloned().expect("a value");
    let root = if b.rng.chance(1, 3) && b.values.len() > 2 {
        let other = b.rng.pick(&b.values[..b.values.len() - 1]).clone();
        let shapes = format!(
            "({}, {})",
            array(last.ty, &last.dims),
            array(other.ty, &other.dims)
        );
        format!(
            "  ROOT %root = {shapes} tuple(%{}, %{})",
            last.name, other.name
        )
    } else {
        format!(
            "  ROOT %root = {} copy(%{})",
            array(last.ty, &last.dims),
            last.name
        )
    };
    let params: Vec<String> = b
        .params
        .iter()
        .map(|p| format!("{}: {}", p.name, array(p.ty, &p.dims)))
        .collect();
    let result = if root.contains("tuple(") {
        root[root.find('(').unwrap_or(0)..root.find(" tuple(").unwrap_or(0)].to_string()
    } else {
        array(last.ty, &last.dims)
    };
    format!(
        "HloModule fuzz\n\n{}ENTRY %main ({}) -> {result} {{\n{}{root}\n}}\n",
        b.comps,
        params.join(", "),
        b.body
    )
}

/// A text edit that keeps the module parseable most of the time.
fn edit(rng: &mut Rng, text: &str) -> String {
    match rng.below(5) {
        0 | 1 => {
            // A layout: reverse or rotate its order, give it a tile.
            let b = text.as_bytes();
            let spans: Vec<(usize, usize)> = (0..b.len().saturating_sub(1))
                .filter(|&i| b[i] == b']' && b[i + 1] == b'{')
                .filter_map(|i| text[i + 2..].find('}').map(|e| (i + 2, i + 2 + e)))
                .collect();
            if spans.is_empty() {
                return text.to_string();
            }
            let (start, end) = spans[rng.below(spans.len())];
            let m2m = text[start..end].split(':').next().unwrap_or("");
            let mut dims: Vec<&str> = m2m.split(',').filter(|d| !d.is_empty()).collect();
            if dims.is_empty() {
                return text.to_string();
            }
            if rng.chance(1, 2) {
                dims.reverse();
            }
            let k = rng.below(dims.len());
            dims.rotate_left(k);
            format!(
                "{}{}{}{}",
                &text[..start],
                dims.join(","),
                rng.pick(TILES),
                &text[end..]
            )
        }
        2 => {
            // An element type, wherever one is written.
            let hits: Vec<(usize, usize)> = TYPES
                .iter()
                .flat_map(|(t, _)| {
                    let pat = format!("{t}[");
                    text.match_indices(&pat)
                        .map(|(i, _)| (i, t.len()))
                        .collect::<Vec<_>>()
                })
                .filter(|&(i, _)| i == 0 || !text.as_bytes()[i - 1].is_ascii_alphanumeric())
                .collect();
            if hits.is_empty() {
                return text.to_string();
            }
            let (at, len) = hits[rng.below(hits.len())];
            format!("{}{}{}", &text[..at], rng.pick(TYPES).0, &text[at + len..])
        }
        3 => {
            // A dimension list.
            let hits: Vec<usize> = text
                .match_indices("dimensions={")
                .map(|(i, _)| i + "dimensions={".len())
                .collect();
            if hits.is_empty() {
                return text.to_string();
            }
            let start = hits[rng.below(hits.len())];
            let Some(len) = text[start..].find('}') else {
                return text.to_string();
            };
            let mut dims: Vec<&str> = text[start..start + len]
                .split(',')
                .filter(|d| !d.is_empty())
                .collect();
            if dims.is_empty() {
                return text.to_string();
            }
            let k = 1 + rng.below(3);
            let k = k % dims.len();
            dims.rotate_left(k);
            format!(
                "{}{}{}",
                &text[..start],
                dims.join(","),
                &text[start + len..]
            )
        }
        _ => {
            // AUTO entry layouts: drop the entry computation layout's layouts.
            let Some(start) = text.find("entry_computation_layout={") else {
                return text.to_string();
            };
            let line_end = text[start..].find('\n').map_or(text.len(), |e| start + e);
            let mut header = String::new();
            let mut depth = 0;
            for c in text[start..line_end].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        if depth > 1 {
                            continue;
                        }
                    }
                    '}' => {
                        depth -= 1;
                        if depth > 0 {
                            continue;
                        }
                    }
                    _ if depth > 1 => continue,
                    _ => {}
                }
                header.push(c);
            }
            format!("{}{}{}", &text[..start], header, &text[line_end..])
        }
    }
}

/// The module of one case: generated (two cases in three) or a bundled
/// dump, then edited zero to three times.
pub(crate) fn module(rng: &mut Rng) -> String {
    let mut text = if rng.chance(2, 3) {
        generated(rng)
    } else {
        rng.pick(SEEDS).to_string()
    };
    let edits = rng.below(4);
    for _ in 0..edits {
        text = edit(rng, &text);
    }
    text
}
