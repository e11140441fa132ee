//! The checks of a module as a whole, which no single computation can
//! make: unique names, the entry computation layout against the entry
//! computation, and (for tests of passes) uses before definitions.

use rustc_hash::{FxHashMap, FxHashSet};

use super::{VerifyError, show};
use crate::{Callee, Computation, InstId, Module};

/// The checks of a module as a whole: unique computation and instruction
/// names, and the entry computation layout against the entry computation.
pub fn verify_module_checks(module: &Module) -> Vec<VerifyError> {
    let names = module.computations.iter().map(|c| {
        (
            c.name.as_str(),
            c.instructions().map(|(_, i)| i.name.as_str()),
        )
    });
    let mut errors = verify_names(names, module.instruction_count());
    match module.computations.get(module.entry.index()) {
        Some(entry) => errors.extend(verify_entry_layout(
            Callee::Whole(entry),
            &module.entry_computation_layout,
        )),
        None => errors.push(VerifyError {
            computation: String::new(),
            instruction: None,
            message: format!(
                "the entry computation id {} is out of range ({} computations)",
                module.entry.0,
                module.computations.len()
            ),
        }),
    }
    errors
}

/// Unique names: every computation's, and every instruction's across the
/// module. `computations` gives each computation's name and its
/// instructions' names in order; `instructions` is a size hint.
pub fn verify_names<'a, I: Iterator<Item = &'a str>>(
    computations: impl Iterator<Item = (&'a str, I)> + Clone,
    instructions: usize,
) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    let mut comp_names = FxHashSet::default();
    for (c, _) in computations.clone() {
        if !comp_names.insert(c) {
            errors.push(VerifyError {
                computation: String::new(),
                instruction: None,
                message: format!("computation name %{c} is used twice"),
            });
        }
    }
    let mut inst_names: FxHashMap<&str, &str> = FxHashMap::default();
    inst_names.reserve(instructions);
    for (c, insts) in computations {
        for inst in insts {
            if let Some(first) = inst_names.insert(inst, c) {
                errors.push(VerifyError {
                    computation: c.to_string(),
                    instruction: Some(inst.to_string()),
                    message: format!(
                        "instruction name %{inst} is already used in computation %{first}"
                    ),
                });
            }
        }
    }
    errors
}

/// The entry computation layout against the entry computation: valid
/// layouts, and the parameters' and root's logical shapes.
pub fn verify_entry_layout(
    entry: Callee<'_>,
    layout: &crate::ComputationLayout,
) -> Vec<VerifyError> {
    let mut errors = Vec::new();
    let mut module_error = |message: String| {
        errors.push(VerifyError {
            computation: String::new(),
            instruction: None,
            message,
        })
    };
    let params = entry.parameters();
    // A leaf equal to the instruction's shape is checked with the
    // instruction; report only the layouts the header adds.
    for (i, s) in layout.parameters.iter().enumerate() {
        let same = params.get(i).is_some_and(|&(_, p)| p == s);
        if let (false, Err(e)) = (same, s.validate()) {
            module_error(format!(
                "entry_computation_layout parameter {i} {}: {e}",
                show(s)
            ));
        }
    }
    let root = entry.root();
    let root_same = root.is_some_and(|(_, r)| *r == *layout.result);
    if let (false, Err(e)) = (root_same, layout.result.validate()) {
        module_error(format!(
            "entry_computation_layout result {}: {e}",
            show(&layout.result)
        ));
    }
    if params.len() != layout.parameters.len() {
        module_error(format!(
            "entry_computation_layout has {} parameters but the entry computation %{} has {}",
            layout.parameters.len(),
            entry.name(),
            params.len()
        ));
    } else {
        for (i, (&(name, actual), s)) in params.iter().zip(layout.parameters.iter()).enumerate() {
            if !actual.same_logical_shape(s) {
                module_error(format!(
                    "entry_computation_layout parameter {i} is {} but parameter %{name} is {}",
                    s.display_without_layout(),
                    actual.display_without_layout()
                ));
            }
        }
    }
    if let Some((name, shape)) = root
        && !shape.same_logical_shape(&layout.result)
    {
        module_error(format!(
            "entry_computation_layout result is {} but the entry root %{name} is {}",
            layout.result.display_without_layout(),
            shape.display_without_layout()
        ));
    }
    errors
}

/// Every use of an instruction that comes before its definition in the
/// schedule, as `(computation, user, operand)` names. XLA's parser accepts
/// such text in unscheduled modules, so `verify_module` allows it there;
/// passes must not introduce any, and tests check that with this.
pub fn uses_before_definition(module: &Module) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    for comp in &module.computations {
        for (user, op) in early_uses(comp) {
            found.push((
                comp.name.clone(),
                comp.inst(user).name.clone(),
                comp.inst(op).name.clone(),
            ));
        }
    }
    found
}

/// Each use in `comp` of an operand or control predecessor scheduled after
/// its user, as (user, operand), in schedule order.
pub(super) fn early_uses(comp: &Computation) -> Vec<(InstId, InstId)> {
    let position: FxHashMap<InstId, usize> = comp
        .schedule()
        .iter()
        .enumerate()
        .map(|(i, &id)| (id, i))
        .collect();
    let mut found = Vec::new();
    for (i, (id, inst)) in comp.instructions().enumerate() {
        for &op in inst.operands().iter().chain(inst.control_predecessors()) {
            if position.get(&op).is_some_and(|&j| j > i) {
                found.push((id, op));
            }
        }
    }
    found
}
