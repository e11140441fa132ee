//! Every kind of instruction in the bundled modules is evaluable: each
//! opcode, each custom-call target and each FFT type found in any
//! `testdata/**/*.hlo` that parses and is well formed is evaluated, in the
//! smallest module holding it where it is actually reached (not dead code
//! after the root, not an untaken branch), on random arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use interp::{Limits, evaluate_traced, instruction_kind, random_arguments};

/// The modules under `testdata/` that parse and pass the structural
/// verifier, with their sizes (the elements their instructions produce, a
/// proxy for the cost of evaluating them) and kinds, smallest first.
fn bundled() -> Vec<(PathBuf, hlo::Module, u64, BTreeSet<String>)> {
    let mut out = Vec::new();
    for path in test_support::hlo_files() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let Ok(module) = hlo::parse_module(&text, &path.display().to_string()) else {
            continue; // testdata/errors: parse errors on purpose.
        };
        if !hlo::verify_module(&module).is_empty() {
            continue; // testdata/pipeline/invalid_module.hlo.
        }
        let mut kinds = BTreeSet::new();
        let mut count = 0;
        for comp in &module.computations {
            for id in comp.schedule() {
                let inst = comp.inst(*id);
                kinds.insert(instruction_kind(inst));
                count += elements(&inst.shape);
            }
        }
        out.push((path, module, count, kinds));
    }
    out.sort_by_key(|m| m.2);
    out
}

fn elements(shape: &shape::Shape) -> u64 {
    match shape {
        shape::Shape::Array(a) => a.dims.iter().map(|&d| d.max(1) as u64).product(),
        shape::Shape::Tuple(es) => es.iter().map(elements).sum(),
        _ => 0,
    }
}

#[test]
fn every_kind_in_testdata_is_evaluated() {
    let modules = bundled();
    assert!(modules.len() > 60, "only {} modules", modules.len());
    let all: BTreeSet<String> = modules.iter().flat_map(|m| m.3.iter().cloned()).collect();
    // Where each kind was evaluated: the smallest module that reaches it.
    let mut proven: BTreeMap<String, String> = BTreeMap::new();
    let limits = Limits::default();
    for (path, module, _, kinds) in &modules {
        if kinds.iter().all(|k| proven.contains_key(k)) {
            continue;
        }
        let args = random_arguments(module, 1).expect("random arguments");
        let name = path
            .strip_prefix(test_support::testdata_dir())
            .unwrap_or(path)
            .display()
            .to_string();
        let (_, seen) = evaluate_traced(module, &args, &limits)
            .unwrap_or_else(|e| panic!("{name} does not evaluate: {e}"));
        for k in seen {
            proven.entry(k).or_insert_with(|| name.clone());
        }
    }
    let missing: Vec<&String> = all.iter().filter(|k| !proven.contains_key(*k)).collect();
    assert!(missing.is_empty(), "never evaluated: {missing:?}");
    // Where each kind was shown goes to the log; the pinned list is the
    // kinds alone, so that a new bundled module changes it only when it
    // brings a new kind.
    for k in &all {
        eprintln!("{k:<30} {}", proven[k]);
    }
    let listing: String = all.iter().map(|k| format!("{k}\n")).collect();
    expect_test::expect_file!["coverage.txt"].assert_eq(&listing);
}
