//! What checking or printing one computation needs from the module around
//! it: the names and signatures of the computations it calls, the entry,
//! and a few header facts. [`Module`] is one such view; an incremental
//! database is another, which hands out only the signatures of a
//! computation's callees, so that a change inside a callee's body does not
//! reach its callers.

use crate::{CompId, Computation, ComputationLayout, Instruction, IoAlias, Module, Opcode};

/// The module around one computation.
pub trait ModuleView: Sync {
    /// Another computation, at least as its signature: its name, its
    /// parameters and its root (see [`Computation::signature_stub`]).
    fn callee(&self, id: CompId) -> Option<&Computation>;
    /// The entry computation.
    fn entry(&self) -> CompId;
    /// `is_scheduled=true`.
    fn is_scheduled(&self) -> bool;
    /// The entry computation layout.
    fn entry_computation_layout(&self) -> &ComputationLayout;
}

impl ModuleView for Module {
    fn callee(&self, id: CompId) -> Option<&Computation> {
        self.computations.get(id.index())
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

/// The opcode of a stub's root when the root is not a parameter.
const STUB_ROOT: Opcode = Opcode::Tuple;

impl Computation {
    /// The computation as its callers see it: its name, thread, parameters
    /// and a root of its root's name and shape (a parameter when the root
    /// is one; else an instruction of a fixed opcode, since no check of a
    /// caller reads what computes the callee's root), and nothing else. Two computations with equal stubs look
    /// the same to every check of a caller.
    pub fn signature_stub(&self) -> Computation {
        let mut stub = Computation::without_edges(self.name.clone(), self.parameters().len() + 1);
        stub.execution_thread = self.execution_thread.clone();
        let mut root = None;
        for p in self.parameters() {
            let inst = self.inst(p);
            let mut copy =
                Instruction::new(inst.name.clone(), Opcode::Parameter, inst.shape.clone());
            copy.payload = inst.payload.clone();
            // Adding an instruction without operands cannot fail.
            if let Ok(id) = stub.add(copy, &[])
                && self.root() == Some(p)
            {
                root = Some(id);
            }
        }
        if root.is_none()
            && let Some(r) = self.root().and_then(|r| self.get(r))
            && let Ok(id) = stub.add(
                Instruction::new(r.name.clone(), STUB_ROOT, r.shape.clone()),
                &[],
            )
        {
            root = Some(id);
        }
        if let Some(r) = root {
            let _ = stub.set_root(r);
        }
        stub
    }

    /// Whether two computations have the same signature stub, without
    /// building either.
    pub fn same_signature(&self, other: &Computation) -> bool {
        let (a, b) = (self.parameters(), other.parameters());
        let same_inst = |x: &Instruction, y: &Instruction| {
            x.name == y.name && x.shape == y.shape && x.payload == y.payload
        };
        self.name == other.name
            && self.execution_thread == other.execution_thread
            && a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(&x, &y)| same_inst(self.inst(x), other.inst(y)))
            && match (
                self.root().and_then(|r| self.get(r)),
                other.root().and_then(|r| other.get(r)),
            ) {
                (Some(x), Some(y)) => {
                    x.name == y.name
                        && x.shape == y.shape
                        && (x.opcode == Opcode::Parameter) == (y.opcode == Opcode::Parameter)
                }
                (None, None) => true,
                _ => false,
            }
    }
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
