//! The IR: a module of computations, each a petgraph graph of instructions
//! plus a program-order schedule.
//!
//! Architecture invariant: an instruction's operand list and the graph's
//! operand edges always agree. Both are private to [`Computation`] and only
//! change through its methods, so passes can read operands in order from
//! the instruction (fast, no sorting) and walk users or run graph
//! algorithms on the edges.

use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use smallvec::SmallVec;

use shape::Shape;

use crate::{AttrValue, Attrs, KnownAttr, Opcode, OperandAlias};

/// An instruction's id inside its computation: a stable graph node index.
pub type InstId = NodeIndex<u32>;

/// A computation's index in [`Module::computations`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompId(pub u32);

impl CompId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A graph edge, from a producer to the instruction that uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Edge {
    /// A data use: the producer is operand number `.0` of the user.
    Operand(u32),
    /// A control dependency: the producer must run before the user.
    Control,
}

/// What sits between an instruction's parentheses when it is not a list
/// of operand names, and the text of an unknown opcode.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Payload {
    /// The usual case: the parentheses hold operand names.
    #[default]
    None,
    /// `parameter(N)`.
    Parameter(u32),
    /// `constant(...)`: the literal, exactly as written.
    Constant(Box<str>),
    /// An opcode Tessera does not know, exactly as written.
    UnknownOpcode(Box<str>),
}

/// One HLO instruction. Its operands and control predecessors are owned by
/// the computation (see [`Computation::operands`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// The name, without the `%` sigil.
    pub name: String,
    /// The opcode.
    pub opcode: Opcode,
    /// The result shape, layouts included when assigned.
    pub shape: Shape,
    /// Parameter number, constant literal, or unknown opcode text.
    pub payload: Payload,
    /// Attributes in print order. Control predecessors are not here; they
    /// are graph edges.
    pub attrs: Attrs,
    operands: SmallVec<[InstId; 3]>,
    control_predecessors: SmallVec<[InstId; 1]>,
}

impl Instruction {
    /// A new instruction with no operands yet; add it to a computation with
    /// [`Computation::add`] to give it operands.
    pub fn new(name: impl Into<String>, opcode: Opcode, shape: Shape) -> Instruction {
        Instruction {
            name: name.into(),
            opcode,
            shape,
            payload: Payload::None,
            attrs: Attrs::default(),
            operands: SmallVec::new(),
            control_predecessors: SmallVec::new(),
        }
    }

    /// The operands, in order.
    pub fn operands(&self) -> &[InstId] {
        &self.operands
    }

    /// The control predecessors, in order.
    pub fn control_predecessors(&self) -> &[InstId] {
        &self.control_predecessors
    }

    /// The opcode as text, the real text for an unknown opcode.
    pub fn opcode_name(&self) -> &str {
        match &self.payload {
            Payload::UnknownOpcode(s) => s,
            _ => self.opcode.name(),
        }
    }

    /// The parameter number of a `parameter` instruction.
    pub fn parameter_number(&self) -> Option<u32> {
        match self.payload {
            Payload::Parameter(n) => Some(n),
            _ => None,
        }
    }

    /// The computation that runs with this instruction's operands as its
    /// parameters: a `while`'s body, or what a `call`, `fusion` or
    /// `async-start` calls (`to_apply`, or `calls`), when written.
    pub fn called_body(&self) -> Option<CompId> {
        let attr = match self.opcode {
            Opcode::While => self.attrs.get(KnownAttr::Body),
            Opcode::Call | Opcode::Fusion | Opcode::AsyncStart => self
                .attrs
                .get(KnownAttr::ToApply)
                .or(self.attrs.get(KnownAttr::Calls)),
            _ => None,
        };
        match attr {
            Some(AttrValue::Computation(c)) => Some(*c),
            _ => None,
        }
    }

    /// The tuple element a `get-tuple-element` reads, when its index is
    /// written and not negative.
    pub fn tuple_index(&self) -> Option<usize> {
        if self.opcode != Opcode::GetTupleElement {
            return None;
        }
        usize::try_from(self.attrs.int(KnownAttr::Index)?).ok()
    }

    /// The array leaves (numbered as in `shape.array_leaves()`) that tuple
    /// element `k` of this instruction's result covers.
    pub fn element_leaves(&self, k: usize) -> Option<std::ops::Range<usize>> {
        element_leaf_range(&self.shape, k)
    }

    /// The array leaves (numbered as in `shape.array_leaves()`) of the
    /// sub-shape of this instruction's result at tuple index `path`.
    pub fn leaves_at(&self, path: &[i64]) -> Option<std::ops::Range<usize>> {
        let mut start = 0;
        let mut cur = &self.shape;
        for &k in path {
            let k = usize::try_from(k).ok()?;
            start += element_leaf_range(cur, k)?.start;
            cur = cur.tuple_elements()?.get(k)?;
        }
        Some(start..start + cur.array_leaf_count())
    }
}

/// The range of array-leaf indices that tuple element `k` of `s` covers.
fn element_leaf_range(s: &Shape, k: usize) -> Option<std::ops::Range<usize>> {
    let elements = s.tuple_elements()?;
    let start: usize = elements.get(..k)?.iter().map(Shape::array_leaf_count).sum();
    Some(start..start + elements.get(k)?.array_leaf_count())
}

/// One pair of an instruction's `output_to_operand_aliasing`, resolved
/// against the shapes (see [`Computation::operand_aliases`]).
#[derive(Clone, Debug)]
pub struct ResolvedAlias<'a> {
    /// The pair as written.
    pub alias: &'a OperandAlias,
    /// The aliased operand.
    pub operand: InstId,
    /// The result's array leaves the pair names.
    pub output_leaves: std::ops::Range<usize>,
    /// The operand's array leaves it names; as many as `output_leaves`
    /// when the two sub-shapes have the same structure.
    pub operand_leaves: std::ops::Range<usize>,
}

/// A computation: instructions in a graph, a schedule and a root.
#[derive(Clone, Debug)]
pub struct Computation {
    /// The name, without the `%` sigil.
    pub name: String,
    /// `execution_thread="..."` after the body, when given.
    pub execution_thread: Option<String>,
    graph: StableDiGraph<Instruction, Edge, u32>,
    schedule: Vec<InstId>,
    root: Option<InstId>,
}

/// Why a graph edit was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("instruction {0:?} is not in this computation")]
    NoSuchInstruction(InstId),
    #[error("operand index {index} is out of range for an instruction with {count} operands")]
    OperandIndex { index: usize, count: usize },
    #[error("instruction {0:?} still has users")]
    HasUsers(InstId),
    #[error("the schedule is not a permutation of the computation's instructions")]
    BadSchedule,
}

impl Computation {
    /// An empty computation.
    pub fn new(name: impl Into<String>) -> Computation {
        Computation {
            name: name.into(),
            execution_thread: None,
            graph: StableDiGraph::default(),
            schedule: Vec::new(),
            root: None,
        }
    }

    /// An empty computation with room for `instructions` instructions, so
    /// that adding them does not move the ones already added.
    pub fn with_capacity(name: impl Into<String>, instructions: usize) -> Computation {
        Computation {
            name: name.into(),
            execution_thread: None,
            graph: StableDiGraph::with_capacity(instructions, instructions * 2),
            schedule: Vec::with_capacity(instructions),
            root: None,
        }
    }

    /// The graph, for reading and for petgraph algorithms. Nodes are
    /// instructions; an edge runs from a producer to its user.
    pub fn graph(&self) -> &StableDiGraph<Instruction, Edge, u32> {
        &self.graph
    }

    /// The instructions in program order.
    pub fn schedule(&self) -> &[InstId] {
        &self.schedule
    }

    /// The number of instructions.
    pub fn len(&self) -> usize {
        self.schedule.len()
    }

    /// True when the computation has no instruction.
    pub fn is_empty(&self) -> bool {
        self.schedule.is_empty()
    }

    /// The root instruction. A parsed computation always has one.
    pub fn root(&self) -> Option<InstId> {
        self.root
    }

    /// Makes `id` the root.
    pub fn set_root(&mut self, id: InstId) -> Result<(), EditError> {
        self.check(id)?;
        self.root = Some(id);
        Ok(())
    }

    /// The pairs of instruction `id`'s `output_to_operand_aliasing` whose
    /// operand and tuple indices exist, in the order written.
    pub fn operand_aliases(&self, id: InstId) -> impl Iterator<Item = ResolvedAlias<'_>> + '_ {
        let inst = self.inst(id);
        let aliases = match inst.attrs.get(KnownAttr::OutputToOperandAliasing) {
            Some(AttrValue::Aliasing(aliases)) => aliases.as_slice(),
            _ => &[],
        };
        aliases.iter().filter_map(move |alias| {
            let &operand = inst.operands().get(usize::try_from(alias.operand).ok()?)?;
            Some(ResolvedAlias {
                alias,
                operand,
                output_leaves: inst.leaves_at(&alias.output_index)?,
                operand_leaves: self.inst(operand).leaves_at(&alias.operand_index)?,
            })
        })
    }

    /// The instruction with this id. Panics on a foreign id, which is a
    /// programming error, never a user-input error.
    pub fn inst(&self, id: InstId) -> &Instruction {
        &self.graph[id]
    }

    /// The instruction with this id, mutably. Operands cannot be changed
    /// through it; use [`Computation::set_operand`].
    pub fn inst_mut(&mut self, id: InstId) -> &mut Instruction {
        &mut self.graph[id]
    }

    /// The instruction with this id, if it exists.
    pub fn get(&self, id: InstId) -> Option<&Instruction> {
        self.graph.node_weight(id)
    }

    /// The operands of `id`, in order.
    pub fn operands(&self, id: InstId) -> &[InstId] {
        &self.graph[id].operands
    }

    /// The instructions in program order with their ids.
    pub fn instructions(&self) -> impl Iterator<Item = (InstId, &Instruction)> + '_ {
        self.schedule.iter().map(move |&id| (id, &self.graph[id]))
    }

    /// The distinct users of `id` through data edges, in schedule-independent
    /// but deterministic order (ascending id).
    pub fn users(&self, id: InstId) -> SmallVec<[InstId; 4]> {
        let mut users: SmallVec<[InstId; 4]> = self
            .graph
            .edges_directed(id, Direction::Outgoing)
            .filter(|e| matches!(e.weight(), Edge::Operand(_)))
            .map(|e| e.target())
            .collect();
        crate::work::count(crate::Work::IrEdges, users.len());
        users.sort_unstable();
        users.dedup();
        users
    }

    /// Every data use of `id` as (user, operand index), ordered by user id
    /// then operand index.
    pub fn uses(&self, id: InstId) -> SmallVec<[(InstId, u32); 4]> {
        let mut uses: SmallVec<[(InstId, u32); 4]> = self
            .graph
            .edges_directed(id, Direction::Outgoing)
            .filter_map(|e| match e.weight() {
                Edge::Operand(i) => Some((e.target(), *i)),
                Edge::Control => None,
            })
            .collect();
        crate::work::count(crate::Work::IrEdges, uses.len());
        uses.sort_unstable();
        uses
    }

    /// The parameter instructions ordered by parameter number.
    pub fn parameters(&self) -> Vec<InstId> {
        let mut params: Vec<(u32, InstId)> = self
            .instructions()
            .filter_map(|(id, inst)| inst.parameter_number().map(|n| (n, id)))
            .collect();
        params.sort_unstable();
        params.into_iter().map(|(_, id)| id).collect()
    }

    fn check(&self, id: InstId) -> Result<(), EditError> {
        if self.graph.contains_node(id) {
            Ok(())
        } else {
            Err(EditError::NoSuchInstruction(id))
        }
    }

    /// Adds an instruction with the given operands at the end of the
    /// schedule.
    pub fn add(&mut self, inst: Instruction, operands: &[InstId]) -> Result<InstId, EditError> {
        let id = self.add_unscheduled(inst, operands)?;
        self.schedule.push(id);
        Ok(id)
    }

    /// Adds an instruction just before `anchor` in the schedule. This costs
    /// a shift of the schedule; passes that insert many instructions should
    /// use [`Computation::add_unscheduled`] and [`Computation::set_schedule`].
    pub fn add_before(
        &mut self,
        anchor: InstId,
        inst: Instruction,
        operands: &[InstId],
    ) -> Result<InstId, EditError> {
        let at = self
            .schedule
            .iter()
            .position(|&s| s == anchor)
            .ok_or(EditError::NoSuchInstruction(anchor))?;
        let id = self.add_unscheduled(inst, operands)?;
        self.schedule.insert(at, id);
        Ok(id)
    }

    /// Makes room for `instructions` more instructions and `edges` more
    /// operand edges, exactly: a pass that knows how many it will add
    /// reserves them, since growing by doubling left a computation of a
    /// million instructions, given half a million copies, with room for
    /// half a million more (344 bytes each, some 170 MB never used).
    pub fn reserve(&mut self, instructions: usize, edges: usize) {
        self.graph.reserve_exact_nodes(instructions);
        self.graph.reserve_exact_edges(edges);
    }

    /// Adds an instruction to the graph but not to the schedule; the caller
    /// must later give a full schedule with [`Computation::set_schedule`].
    pub fn add_unscheduled(
        &mut self,
        mut inst: Instruction,
        operands: &[InstId],
    ) -> Result<InstId, EditError> {
        for &op in operands {
            self.check(op)?;
        }
        inst.operands = SmallVec::from_slice(operands);
        inst.control_predecessors.clear();
        let id = self.graph.add_node(inst);
        for (i, &op) in operands.iter().enumerate() {
            self.graph.add_edge(op, id, Edge::Operand(i as u32));
        }
        Ok(id)
    }

    /// Replaces the schedule. It must hold every instruction exactly once.
    pub fn set_schedule(&mut self, schedule: Vec<InstId>) -> Result<(), EditError> {
        if schedule.len() != self.graph.node_count() {
            return Err(EditError::BadSchedule);
        }
        let mut seen = vec![false; self.node_bound()];
        for &id in &schedule {
            if !self.graph.contains_node(id) || std::mem::replace(&mut seen[id.index()], true) {
                return Err(EditError::BadSchedule);
            }
        }
        self.schedule = schedule;
        Ok(())
    }

    /// Makes `new` operand number `index` of `user`.
    ///
    /// petgraph keeps a node's edges in singly linked lists, and unlinking
    /// an edge walks both lists from their heads to it: this costs the
    /// position of the edge among the uses of the old operand. To redirect
    /// many uses of one value, use [`Computation::set_operands_at`].
    pub fn set_operand(
        &mut self,
        user: InstId,
        index: usize,
        new: InstId,
    ) -> Result<(), EditError> {
        self.check(user)?;
        self.check(new)?;
        let count = self.graph[user].operands.len();
        if index >= count {
            return Err(EditError::OperandIndex { index, count });
        }
        let old = self.graph[user].operands[index];
        if old == new {
            return Ok(());
        }
        // Found among the user's operands, a short list, not among the
        // old operand's uses, which may be many.
        let edge = self
            .graph
            .edges_directed(user, Direction::Incoming)
            .find(|e| e.source() == old && *e.weight() == Edge::Operand(index as u32))
            .map(|e| e.id());
        if let Some(edge) = edge {
            self.graph.remove_edge(edge);
        }
        self.graph.add_edge(new, user, Edge::Operand(index as u32));
        self.graph[user].operands[index] = new;
        Ok(())
    }

    /// Makes each `(user, index, new)` of `edits`, in order, operand number
    /// `index` of `user`; nothing changes if any edit is invalid.
    ///
    /// Each lost edge is unlinked from the head of one of its two lists,
    /// where unlinking it from that list is one step: the user's list of
    /// operands when the user loses at least as many edges in the batch as the old
    /// operand does (a wide tuple whose elements change), else the old
    /// operand's list of uses (a value many users stop reading). The edges
    /// kept on the way are linked back in their order. So the work is the
    /// length of the prefixes that hold the lost edges, however many they
    /// are: redirecting all N uses of a value costs about N steps, not one
    /// walk of up to N per use. Returns the number of edges unlinked (lost
    /// and kept), the work count the tests bound.
    pub fn set_operands_at(
        &mut self,
        edits: &[(InstId, usize, InstId)],
    ) -> Result<usize, EditError> {
        for &(user, index, new) in edits {
            self.check(user)?;
            self.check(new)?;
            let count = self.graph[user].operands.len();
            if index >= count {
                return Err(EditError::OperandIndex { index, count });
            }
        }
        // The slots whose edge goes, each with the operand it had first in
        // this batch: the edge runs from that one, since the edges of the
        // batch's own edits are linked only at the end. Kept in sorted
        // vectors, not hash maps: a batch may redirect half a million uses,
        // and a hash map of that many entries, indexed in program order,
        // missed the cache on nearly every look (at 1e6 instructions this
        // step took 21 times as long as at 1e5).
        let lost = Losses::of(self, edits);
        let mut work = 0;
        for &(user, count) in &lost.users {
            work += self.unlink_from_head(user, Direction::Incoming, count, |source, target, i| {
                lost.find(target, i)
                    .is_some_and(|l| l.old == source && l.by_user)
            });
        }
        for &(old, count) in &lost.olds {
            work += self.unlink_from_head(old, Direction::Outgoing, count, |source, target, i| {
                lost.find(target, i)
                    .is_some_and(|l| l.old == source && !l.by_user)
            });
        }
        for &k in &lost.order {
            let Loss { user, index, .. } = lost.slots[k as usize];
            let new = self.graph[user].operands[index as usize];
            self.graph.add_edge(new, user, Edge::Operand(index));
        }
        crate::work::count(crate::Work::IrEdges, work);
        Ok(work)
    }

    /// Unlinks edges from the head of `node`'s list in `direction` until
    /// `count` of them are ones `lost` names (by source, target and operand
    /// index), and links the others back in their order. Returns the
    /// number of edges unlinked.
    fn unlink_from_head(
        &mut self,
        node: InstId,
        direction: Direction,
        count: usize,
        lost: impl Fn(InstId, InstId, u32) -> bool,
    ) -> usize {
        let mut left = count;
        let mut kept = Vec::new();
        let mut work = 0;
        while left > 0 {
            let Some(e) = self.graph.edges_directed(node, direction).next() else {
                break;
            };
            let (id, source, target, weight) = (e.id(), e.source(), e.target(), *e.weight());
            self.graph.remove_edge(id);
            work += 1;
            match weight {
                Edge::Operand(i) if lost(source, target, i) => left -= 1,
                _ => kept.push((source, target, weight)),
            }
        }
        // Linking prepends, so the kept edges go back last first.
        for (source, target, weight) in kept.into_iter().rev() {
            self.graph.add_edge(source, target, weight);
        }
        work
    }

    /// Replaces the whole operand list of `user` (the operand count may
    /// change). The parser uses it for operands named before their
    /// definition.
    pub fn set_operands(&mut self, user: InstId, operands: &[InstId]) -> Result<(), EditError> {
        self.check(user)?;
        for &op in operands {
            self.check(op)?;
        }
        let old: Vec<_> = self
            .graph
            .edges_directed(user, Direction::Incoming)
            .filter(|e| matches!(e.weight(), Edge::Operand(_)))
            .map(|e| e.id())
            .collect();
        for edge in old {
            self.graph.remove_edge(edge);
        }
        for (i, &op) in operands.iter().enumerate() {
            self.graph.add_edge(op, user, Edge::Operand(i as u32));
        }
        self.graph[user].operands = SmallVec::from_slice(operands);
        Ok(())
    }

    /// Redirects every data use of `old` to `new`, except uses by `new`
    /// itself (so that `new = copy(old)` can take over `old`'s users). The
    /// root moves too when it was `old`.
    pub fn replace_all_uses(&mut self, old: InstId, new: InstId) -> Result<(), EditError> {
        self.check(old)?;
        self.check(new)?;
        let edits: Vec<(InstId, usize, InstId)> = self
            .uses(old)
            .into_iter()
            .filter(|&(user, _)| user != new)
            .map(|(user, index)| (user, index as usize, new))
            .collect();
        self.set_operands_at(&edits)?;
        if self.root == Some(old) {
            self.root = Some(new);
        }
        Ok(())
    }

    /// Adds a control dependency: `pred` runs before `succ`.
    pub fn add_control_dependency(&mut self, pred: InstId, succ: InstId) -> Result<(), EditError> {
        self.check(pred)?;
        self.check(succ)?;
        if !self.graph[succ].control_predecessors.contains(&pred) {
            self.graph[succ].control_predecessors.push(pred);
            self.graph.add_edge(pred, succ, Edge::Control);
        }
        Ok(())
    }

    /// Removes an instruction that has no data users and is not the root.
    /// Its control edges go with it.
    pub fn remove(&mut self, id: InstId) -> Result<Instruction, EditError> {
        self.check(id)?;
        if !self.users(id).is_empty() || self.root == Some(id) {
            return Err(EditError::HasUsers(id));
        }
        let successors: Vec<InstId> = self
            .graph
            .edges_directed(id, Direction::Outgoing)
            .filter(|e| *e.weight() == Edge::Control)
            .map(|e| e.target())
            .collect();
        for s in successors {
            self.graph[s].control_predecessors.retain(|p| *p != id);
        }
        self.schedule.retain(|&s| s != id);
        Ok(self.graph.remove_node(id).expect("checked above"))
    }
}

/// The parameter and result shapes of a computation, layouts included.
/// A leaf without a layout is AUTO: the pass chooses it.
///
/// The parameters are shared: an entry computation can have thousands,
/// and a session keeps its entry layout in many places (the header, the
/// entry's constraints and assignment, the output's header), each of
/// which used to hold a copy. Change them through [`Arc::make_mut`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ComputationLayout {
    /// One shape per parameter.
    pub parameters: Arc<Vec<Shape>>,
    /// The result shape (shared too: an entry's result is often a tuple
    /// of as many leaves).
    pub result: Arc<Shape>,
}

/// How strongly an `input_output_alias` entry aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AliasKind {
    /// `may-alias`.
    May,
    /// `must-alias`.
    Must,
}

/// One entry of the module's `input_output_alias`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IoAlias {
    /// The tuple index in the entry result.
    pub output_index: SmallVec<[i64; 2]>,
    /// The entry parameter number.
    pub parameter: i64,
    /// The tuple index within the parameter.
    pub parameter_index: SmallVec<[i64; 2]>,
    /// The alias kind, when written.
    pub kind: Option<AliasKind>,
}

/// A `FileLocations` row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileLocation {
    /// Row id.
    pub id: i64,
    /// Index into `FileNames`.
    pub file_name_id: i64,
    /// Index into `FunctionNames`.
    pub function_name_id: i64,
    /// First line.
    pub line: i64,
    /// Last line.
    pub end_line: i64,
    /// First column.
    pub column: i64,
    /// Last column.
    pub end_column: i64,
}

/// A `StackFrames` row.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StackFrame {
    /// Row id.
    pub id: i64,
    /// Index into `FileLocations`.
    pub file_location_id: i64,
    /// The calling frame.
    pub parent_frame_id: i64,
}

/// The debug tables that follow the module header in XLA dumps.
/// Strings are stored with their escapes as written, without quotes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DebugTables {
    /// `FileNames`: (id, name).
    pub file_names: Vec<(i64, Box<str>)>,
    /// `FunctionNames`: (id, name).
    pub function_names: Vec<(i64, Box<str>)>,
    /// `FileLocations`.
    pub file_locations: Vec<FileLocation>,
    /// `StackFrames`.
    pub stack_frames: Vec<StackFrame>,
}

impl DebugTables {
    /// True when there is no table at all.
    pub fn is_empty(&self) -> bool {
        self.file_names.is_empty()
            && self.function_names.is_empty()
            && self.file_locations.is_empty()
            && self.stack_frames.is_empty()
    }
}

/// A module header attribute Tessera keeps as text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HeaderAttr {
    /// The name, such as `allow_spmd_sharding_propagation_to_output`.
    pub name: Box<str>,
    /// The exact text after `=`.
    pub value: Box<str>,
}

/// An HLO module.
#[derive(Clone, Debug)]
pub struct Module {
    /// The module name.
    pub name: String,
    /// The entry computation layout. When the text has none, it is derived
    /// from the entry computation's parameters and root, as XLA does.
    pub entry_computation_layout: ComputationLayout,
    /// True when the text gave `entry_computation_layout`.
    pub entry_computation_layout_given: bool,
    /// `input_output_alias`, typed.
    pub input_output_alias: Vec<IoAlias>,
    /// `is_scheduled=true`.
    pub is_scheduled: bool,
    /// Every other header attribute, in text order.
    pub header_attrs: Vec<HeaderAttr>,
    /// The debug tables.
    pub debug_tables: DebugTables,
    /// The computations in text order; [`CompId`] indexes this.
    pub computations: Vec<Computation>,
    /// The entry computation.
    pub entry: CompId,
}

impl Module {
    /// The computation with this id.
    pub fn computation(&self, id: CompId) -> &Computation {
        &self.computations[id.index()]
    }

    /// The computation with this id, mutably.
    pub fn computation_mut(&mut self, id: CompId) -> &mut Computation {
        &mut self.computations[id.index()]
    }

    /// The entry computation.
    pub fn entry_computation(&self) -> &Computation {
        self.computation(self.entry)
    }

    /// Finds a computation by name.
    pub fn find_computation(&self, name: &str) -> Option<CompId> {
        self.computations
            .iter()
            .position(|c| c.name == name)
            .map(|i| CompId(i as u32))
    }

    /// Every computation id, in order.
    pub fn computation_ids(&self) -> impl Iterator<Item = CompId> + use<> {
        (0..self.computations.len() as u32).map(CompId)
    }

    /// The total number of instructions.
    pub fn instruction_count(&self) -> usize {
        self.computations.iter().map(Computation::len).sum()
    }
}

/// An operand slot whose edge a batch of edits removes
/// ([`Computation::set_operands_at`]).
#[derive(Clone, Copy, Debug)]
struct Loss {
    user: InstId,
    index: u32,
    /// The operand the slot had before the batch: the edge's source.
    old: InstId,
    /// The edit of the batch that first changed the slot.
    seq: u32,
    /// Whether the edge leaves from the user's list of operands (else
    /// from the old operand's list of uses).
    by_user: bool,
}

/// The slots a batch of edits removes the edges of, and the lists to
/// unlink them from.
struct Losses {
    /// One per slot, sorted by user and operand index.
    slots: Vec<Loss>,
    /// Indices into `slots` in the order of the edits that lost them.
    order: Vec<u32>,
    /// The users to unlink from, each with its number of lost edges, in
    /// the order of the batch.
    users: Vec<(InstId, usize)>,
    /// The old operands to unlink from, likewise.
    olds: Vec<(InstId, usize)>,
}

impl Losses {
    /// Makes the edits of `edits` (already checked) on the operand lists
    /// and gathers what they lose.
    fn of(comp: &mut Computation, edits: &[(InstId, usize, InstId)]) -> Losses {
        let mut slots = Vec::with_capacity(edits.len());
        for (seq, &(user, index, new)) in edits.iter().enumerate() {
            let old = std::mem::replace(&mut comp.graph[user].operands[index], new);
            if old != new {
                slots.push(Loss {
                    user,
                    index: index as u32,
                    old,
                    seq: seq as u32,
                    by_user: false,
                });
            }
        }
        // The first loss of a slot names its old operand: before it, each
        // edit of the slot left it as it was.
        slots.sort_unstable_by_key(|l| (l.user, l.index, l.seq));
        slots.dedup_by_key(|l| (l.user, l.index));
        // Each lost edge leaves the shorter of its two crowds from the
        // head: the user's when the user loses at least as many edges as
        // the old operand (a wide tuple whose elements change), else the
        // old operand's (a value many users stop reading). A tie goes to
        // the user, whose list holds its operands, where the old operand's
        // holds all its uses: every edge unlinked on the way is unlinked
        // from its other list too, which petgraph walks. A parameter read
        // by a negation and by a root tuple of 160,000 elements, whose
        // negation now reads a copy, unlinked its edge into the tuple on
        // the way, a walk of the tuple's operands for each such parameter.
        let per_user = run_lengths(&slots, |l| l.user);
        let mut by_old: Vec<u32> = (0..slots.len() as u32).collect();
        by_old.sort_unstable_by_key(|&k| (slots[k as usize].old, k));
        let mut per_old = vec![0; slots.len()];
        for run in by_old.chunk_by(|&a, &b| slots[a as usize].old == slots[b as usize].old) {
            for &k in run {
                per_old[k as usize] = run.len();
            }
        }
        for (k, l) in slots.iter_mut().enumerate() {
            l.by_user = per_user[k] >= per_old[k];
        }
        let mut order: Vec<u32> = (0..slots.len() as u32).collect();
        order.sort_unstable_by_key(|&k| slots[k as usize].seq);
        let users = crowds(&slots, &order, true, |l| l.user);
        let olds = crowds(&slots, &order, false, |l| l.old);
        Losses {
            slots,
            order,
            users,
            olds,
        }
    }

    /// The loss of slot `index` of `user`, if the batch loses it.
    fn find(&self, user: InstId, index: u32) -> Option<&Loss> {
        self.slots
            .binary_search_by_key(&(user, index), |l| (l.user, l.index))
            .ok()
            .map(|k| &self.slots[k])
    }
}

/// For each of `slots` (sorted so that equal keys are adjacent), how many
/// slots share its key.
fn run_lengths(slots: &[Loss], key: impl Fn(&Loss) -> InstId) -> Vec<usize> {
    let mut lengths = Vec::with_capacity(slots.len());
    for run in slots.chunk_by(|a, b| key(a) == key(b)) {
        lengths.extend(std::iter::repeat_n(run.len(), run.len()));
    }
    lengths
}

/// The distinct keys of the slots unlinked from the side `by_user` names,
/// each with its number of slots, in the order (`order`) of their first
/// slot.
fn crowds(
    slots: &[Loss],
    order: &[u32],
    by_user: bool,
    key: impl Fn(&Loss) -> InstId,
) -> Vec<(InstId, usize)> {
    // Each slot of this side as (key, position in `order`), sorted by key
    // so that a key's slots are adjacent and its first slot leads them.
    let mut side: Vec<(InstId, u32)> = order
        .iter()
        .enumerate()
        .map(|(at, &k)| (&slots[k as usize], at as u32))
        .filter(|(l, _)| l.by_user == by_user)
        .map(|(l, at)| (key(l), at))
        .collect();
    side.sort_unstable();
    // (first position, key, count), put back in the order of the batch.
    let mut firsts: Vec<(u32, InstId, usize)> = side
        .chunk_by(|a, b| a.0 == b.0)
        .map(|run| (run[0].1, run[0].0, run.len()))
        .collect();
    firsts.sort_unstable();
    firsts
        .into_iter()
        .map(|(_, node, count)| (node, count))
        .collect()
}
