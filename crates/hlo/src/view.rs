//! What checking or printing one computation needs from the module around
//! it: the names and signatures of the computations it calls, the entry,
//! and a few header facts. [`Module`] is one such view; an incremental
//! database is another, which hands out only the signatures of a
//! computation's callees, so that a change inside a callee's body does not
//! reach its callers.

use std::sync::Arc;

use shape::Shape;

use crate::{CompId, Computation, ComputationLayout, IoAlias, Module};

/// The module around one computation.
pub trait ModuleView: Sync {
    /// Another computation, at least as its callers see it (see
    /// [`Callee`]).
    fn callee(&self, id: CompId) -> Option<Callee<'_>>;
    /// The entry computation.
    fn entry(&self) -> CompId;
    /// `is_scheduled=true`.
    fn is_scheduled(&self) -> bool;
    /// The entry computation layout.
    fn entry_computation_layout(&self) -> &ComputationLayout;
}

impl ModuleView for Module {
    fn callee(&self, id: CompId) -> Option<Callee<'_>> {
        self.computations.get(id.index()).map(Callee::Whole)
    }
    fn entry(&self) -> CompId {
        self.entry
    }
    fn is_scheduled(&self) -> bool {
        self.is_scheduled
    }
    fn entry_computation_layout(&self) -> &ComputationLayout {
        &self.entry_computation_layout
    }
}

/// A computation as its callers see it: what the checks and the printing
/// of a caller read of a computation it calls. That is its name, and the
/// names and shapes of its parameters, in parameter order, and of its root,
/// nothing else, so a caller looks only at these (see [`CalleeSignature`]).
#[derive(Clone, Copy, Debug)]
pub enum Callee<'a> {
    /// The whole computation, when the module is at hand.
    Whole(&'a Computation),
    /// Its signature alone, as an incremental database keeps it.
    Signature(&'a CalleeSignature),
}

impl<'a> Callee<'a> {
    /// The computation's name.
    pub fn name(self) -> &'a str {
        match self {
            Callee::Whole(c) => &c.name,
            Callee::Signature(s) => s.name(),
        }
    }

    /// The parameters' names and shapes, in parameter order.
    pub fn parameters(self) -> Vec<(&'a str, &'a Shape)> {
        match self {
            Callee::Whole(c) => c
                .parameters()
                .into_iter()
                .filter_map(|p| c.get(p).map(|i| (i.name.as_str(), &i.shape)))
                .collect(),
            Callee::Signature(s) => (0..s.parameter_count()).map(|k| s.entry(k)).collect(),
        }
    }

    /// The root's name and shape, if the computation has a root.
    pub fn root(self) -> Option<(&'a str, &'a Shape)> {
        match self {
            Callee::Whole(c) => c
                .root()
                .and_then(|r| c.get(r))
                .map(|i| (i.name.as_str(), &i.shape)),
            Callee::Signature(s) => s.has_root.then(|| s.entry(s.shapes.len() - 1)),
        }
    }

    /// The parameters' shapes, in parameter order.
    pub fn parameter_shapes(self) -> Vec<&'a Shape> {
        match self {
            Callee::Whole(_) => self.parameters().into_iter().map(|(_, s)| s).collect(),
            Callee::Signature(s) => s.shapes[..s.parameter_count()]
                .iter()
                .map(|s| &**s)
                .collect(),
        }
    }

    /// The root's shape, if the computation has a root.
    pub fn root_shape(self) -> Option<&'a Shape> {
        self.root().map(|(_, s)| s)
    }
}

/// What [`Callee`] reads of a computation, kept alone: an incremental
/// database holds one per computation, so that its callers' checks read
/// this and not its body, and an edit inside the body that keeps it equal
/// does not reach them. Two computations with equal signatures look the
/// same to every check and to the printing of a caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CalleeSignature {
    /// The computation's name, then each parameter's and the root's, one
    /// after the other (one allocation for all).
    names: Box<str>,
    /// Where each name in `names` ends.
    ends: Box<[u32]>,
    /// The parameters' shapes in parameter order, then the root's when
    /// there is a root, each shared with every signature of the process
    /// that has it (see [`crate::shared_shape`]): signatures repeat a few
    /// shapes, and a session keeps two of every computation.
    shapes: Box<[Arc<Shape>]>,
    has_root: bool,
}

impl CalleeSignature {
    /// The signature of `comp`.
    pub fn of(comp: &Computation) -> CalleeSignature {
        let callee = Callee::Whole(comp);
        let root = callee.root();
        let parts: Vec<(&str, &Shape)> = callee.parameters().into_iter().chain(root).collect();
        let mut names = String::with_capacity(
            comp.name.len() + parts.iter().map(|(n, _)| n.len()).sum::<usize>(),
        );
        let mut ends = Vec::with_capacity(parts.len() + 1);
        for name in std::iter::once(comp.name.as_str()).chain(parts.iter().map(|&(n, _)| n)) {
            names.push_str(name);
            // A computation's text is far below 4 GiB (the parser's spans
            // are `u32` too), so its names' total length fits.
            ends.push(u32::try_from(names.len()).unwrap_or(u32::MAX));
        }
        CalleeSignature {
            names: names.into_boxed_str(),
            ends: ends.into_boxed_slice(),
            shapes: shared_shapes(parts.iter().map(|&(_, s)| s)),
            has_root: root.is_some(),
        }
    }

    /// The computation's name.
    pub fn name(&self) -> &str {
        self.name_at(0)
    }

    /// The number of parameters.
    pub fn parameter_count(&self) -> usize {
        self.shapes.len() - usize::from(self.has_root)
    }

    /// Name number `k` of `names`.
    fn name_at(&self, k: usize) -> &str {
        let start = if k == 0 { 0 } else { self.ends[k - 1] as usize };
        self.names.get(start..self.ends[k] as usize).unwrap_or("")
    }

    /// The name and shape of parameter `k`, or of the root after the last
    /// parameter.
    fn entry(&self, k: usize) -> (&str, &Shape) {
        (self.name_at(k + 1), &self.shapes[k])
    }
}

/// Each of `shapes`, shared (see [`crate::shared_shape`]); a shape equal
/// to the one before it is the same copy without a lookup.
fn shared_shapes<'a>(shapes: impl Iterator<Item = &'a Shape>) -> Box<[Arc<Shape>]> {
    let mut out: Vec<Arc<Shape>> = Vec::with_capacity(shapes.size_hint().0);
    for shape in shapes {
        let same = out.last().filter(|last| ***last == *shape).cloned();
        out.push(same.unwrap_or_else(|| crate::shared_shape(shape)));
    }
    out.into_boxed_slice()
}

/// The module-level facts a pass needs of the module around one
/// computation. Each is asked for only when needed, so that an
/// incremental database records exactly what each computation depends on.
pub trait ModuleFacts {
    /// The entry computation.
    fn entry(&self) -> CompId;
    /// The entry computation layout (asked only for the entry).
    fn entry_layout(&self) -> ComputationLayout;
    /// `input_output_alias` (asked only for the entry).
    fn io_alias(&self) -> Vec<IoAlias>;
    /// A computation's name.
    fn name(&self, id: CompId) -> String;
}

impl ModuleFacts for Module {
    fn entry(&self) -> CompId {
        self.entry
    }
    fn entry_layout(&self) -> ComputationLayout {
        self.entry_computation_layout.clone()
    }
    fn io_alias(&self) -> Vec<IoAlias> {
        self.input_output_alias.clone()
    }
    fn name(&self, id: CompId) -> String {
        self.computations
            .get(id.index())
            .map_or_else(String::new, |c| c.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{Callee, CalleeSignature};

    const TEXT: &str = r#"HloModule m

add {
  x = f32[] parameter(1)
  w = f32[] parameter(0)
  ROOT s = f32[] add(w, x)
}

id {
  ROOT p = (f32[2,3]{0,1}, s32[]) parameter(0)
}

ENTRY main {
  a = f32[2,3]{1,0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
}
"#;

    /// A signature answers every question a caller asks as the whole
    /// computation does: parameters in parameter order (not text order),
    /// a root that is a parameter, layouts kept.
    #[test]
    fn a_signature_reads_as_its_computation() {
        let module = crate::parse_module(TEXT, "t.hlo").expect("parses");
        for comp in &module.computations {
            let sig = CalleeSignature::of(comp);
            let (whole, alone) = (Callee::Whole(comp), Callee::Signature(&sig));
            assert_eq!(alone.name(), whole.name());
            assert_eq!(alone.parameters(), whole.parameters());
            assert_eq!(alone.root(), whole.root());
        }
        let add = CalleeSignature::of(&module.computations[0]);
        let names: Vec<&str> = Callee::Signature(&add)
            .parameters()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["w", "x"]);
        assert_eq!(Callee::Signature(&add).root().map(|(n, _)| n), Some("s"));
        let id = CalleeSignature::of(&module.computations[1]);
        let root = Callee::Signature(&id)
            .root()
            .map(|(n, s)| (n, s.to_string()));
        assert_eq!(root, Some(("p", "(f32[2,3]{0,1}, s32[])".to_string())));
    }

    /// Equal signatures mean equal names and shapes: a renamed parameter
    /// or another root shape makes them differ, a new body does not.
    #[test]
    fn signatures_compare_what_callers_read() {
        let sig = |text: &str| {
            let m = crate::parse_module(text, "t.hlo").expect("parses");
            CalleeSignature::of(&m.computations[0])
        };
        let base = sig(TEXT);
        assert_eq!(base, sig(&TEXT.replacen("add(w, x)", "multiply(w, x)", 1)));
        assert_ne!(
            base,
            sig(&TEXT
                .replace("w = f32[]", "v = f32[]")
                .replace("(w, x)", "(v, x)"))
        );
        assert_ne!(
            base,
            sig(&TEXT.replacen("ROOT s = f32[] add", "ROOT s = f64[] add", 1))
        );
    }
}
