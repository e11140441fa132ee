//! A session's run and a stateless run give the same answer: on every
//! module under `testdata/`, on cpu, gpu and tpu, the same text, the same
//! reports (timings aside) or the same error, in a fresh database and in
//! one that saw every module before.

use std::sync::Arc;

mod common;

use common::same_answer;
use db::Database;
use driver::{Options, Output, PipelineError};

/// A session's answer is the stateless one, and its parts tile its text.
fn same(
    name: &str,
    stateless: &Result<Output, PipelineError>,
    session: &Result<Output, PipelineError>,
) {
    if let Some((a, b)) = same_answer(name, stateless, session) {
        assert!(a.parts().is_none(), "{name}: a stateless run has no parts");
        let parts = b.parts().expect("a database run has parts");
        parts_tile_the_text(name, b.text(), parts);
    }
}

/// The parts of a database run's text are its header and computations,
/// as the outliner finds them in that text, and the header's entry layout
/// is the one the text prints.
fn parts_tile_the_text(name: &str, text: &str, parts: &db::output::Assembled) {
    let outline = hlo::outline(text, name).expect("output text outlines");
    let (header, ranges) = parts.ranges();
    assert_eq!(header.start, 0, "{name}");
    assert_eq!(
        &text[header.clone()],
        parts.header.as_str(),
        "{name}: the header"
    );
    let mut at = header.end;
    assert_eq!(
        parts.computations.len(),
        outline.computations.len(),
        "{name}: computations"
    );
    for ((part, range), c) in parts
        .computations
        .iter()
        .zip(&ranges)
        .zip(&outline.computations)
    {
        let n = &part.name;
        assert_eq!(
            range.start, at,
            "{name}: {n} does not follow the part before it"
        );
        assert_eq!(&**n, c.name.as_str(), "{name}: the part's name");
        assert_eq!(
            range.start, c.span.start,
            "{name}: {n} starts where the outline says"
        );
        assert_eq!(
            text[range.clone()].trim_end(),
            c.span.text(text).trim_end(),
            "{name}: {n}'s text"
        );
        assert_eq!(part.text(), &text[range.clone()], "{name}: {n}'s text");
        assert_eq!(
            part.hash(),
            db::output::text_hash(&text[range.clone()]),
            "{name}: {n}'s hash is its text's"
        );
        at = range.end;
    }
    assert_eq!(at, text.len(), "{name}: the parts end where the text ends");
    let module = hlo::parse_module(text, name).expect("output parses");
    assert_eq!(
        *parts.entry_layout, module.entry_computation_layout,
        "{name}: the entry layout"
    );
}

#[test]
fn sessions_answer_as_stateless_runs_on_all_testdata() {
    let mut compared = 0;
    for target_name in ["cpu", "gpu", "tpu"] {
        let target = Arc::new(target::load_builtin(target_name).expect("builtin target"));
        let mut reused = Database::default();
        for path in test_support::hlo_files() {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let name = format!("{} on {target_name}", path.display());
            let file = path.display().to_string();
            let opts = Options::new(target.clone());
            let stateless = driver::run(&text, &file, &opts);
            let fresh = driver::run_in(&mut Database::default(), &text, &file, &opts);
            same(&name, &stateless, &fresh);
            let one_run = driver::run_fresh(&text, &file, &opts);
            same(&format!("{name} (one-run database)"), &stateless, &one_run);
            let again = driver::run_in(&mut reused, &text, &file, &opts);
            same(&format!("{name} (reused database)"), &stateless, &again);
            compared += 1;
        }
    }
    assert!(compared > 300, "{compared} runs compared");
}

#[test]
fn sessions_answer_as_stateless_runs_with_other_passes() {
    let target = Arc::new(target::load_builtin("tpu").expect("builtin target"));
    let variants: Vec<Options> = vec![
        Options {
            passes: vec![driver::PassName::LayoutAssignment],
            ..Options::new(target.clone())
        },
        Options {
            passes: vec![driver::PassName::Relayout],
            ..Options::new(target.clone())
        },
        Options {
            expand_relayouts: true,
            ..Options::new(target.clone())
        },
        Options {
            verify: false,
            ..Options::new(target.clone())
        },
    ];
    let mut db = Database::default();
    for path in test_support::hlo_files()
        .into_iter()
        .filter(|p| p.display().to_string().contains("/tpu/"))
    {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let file = path.display().to_string();
        for (i, opts) in variants.iter().enumerate() {
            let name = format!("{file} variant {i}");
            same(
                &name,
                &driver::run(&text, &file, opts),
                &driver::run_in(&mut db, &text, &file, opts),
            );
        }
    }
}

/// Every [`hlo::Parallelism`] policy gives the same answer, stateless and
/// in a session: each module under `testdata/`, on cpu, gpu and tpu, run
/// on one thread, and run with every step split as finely as it can be on
/// a pool of several threads, gives the text, reports or error of the
/// default policy's stateless run.
#[test]
fn every_parallelism_policy_answers_the_same_on_all_testdata() {
    use hlo::Parallelism;
    let mut compared = 0;
    for target_name in ["cpu", "gpu", "tpu"] {
        let target = Arc::new(target::load_builtin(target_name).expect("builtin target"));
        let opts = Options::new(target.clone());
        for path in test_support::hlo_files() {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let file = path.display().to_string();
            let expected = driver::run(&text, &file, &opts);
            for policy in [Parallelism::Sequential, Parallelism::Always] {
                let name = format!("{file} on {target_name} under {policy:?}");
                let stateless = policy.install(|| driver::run(&text, &file, &opts));
                let session = policy
                    .install(|| driver::run_in(&mut Database::default(), &text, &file, &opts));
                same(&name, &expected, &session);
                same_answer(&name, &expected, &stateless);
            }
            compared += 1;
        }
    }
    assert!(compared > 300, "{compared} modules compared");
}

/// Every generated shape of module (see `test_support::scaling`), on cpu
/// and tpu, gives the same answer under every [`hlo::Parallelism`] policy,
/// stateless and in a session. The `many_computations` shape's entry calls
/// a wide level of computations that both paths assign side by side, each
/// worker with its own memo over the levels before (`Driver::warm` in the
/// pass, `warm_beside` in the driver); the testdata modules have only
/// narrow ones. (Their test above is the one that fails when a worker
/// reads the wrong assignment of an earlier level: on these shapes a
/// computation's alone and final assignments agree.)
#[test]
fn every_parallelism_policy_answers_the_same_on_every_generated_shape() {
    use hlo::Parallelism;
    for target_name in ["cpu", "tpu"] {
        let target = Arc::new(target::load_builtin(target_name).expect("builtin target"));
        let opts = Options::new(target.clone());
        for shape in test_support::scaling::Shape::ALL {
            let text = shape.module(1_200);
            let file = format!("{}.hlo", shape.name());
            let expected = Parallelism::Sequential.install(|| driver::run(&text, &file, &opts));
            assert!(expected.is_ok(), "{file} on {target_name} runs");
            let name = format!("{file} on {target_name} under Always");
            let stateless = Parallelism::Always.install(|| driver::run(&text, &file, &opts));
            // On this thread, not on the pool: `run_in` wants a caller
            // that is not one of rayon's (a pool thread waiting inside a
            // query may take another test's `install` job, which queries
            // another database), and the test above has the pool's threads
            // in queries of its own meanwhile.
            let session = {
                let _always = Parallelism::Always.enter();
                driver::run_in(&mut Database::default(), &text, &file, &opts)
            };
            same_answer(&name, &expected, &stateless);
            same(&name, &expected, &session);
            // A one-run database of this size is freed on a thread of its
            // own once discarded, while its output lives on.
            let one_run = {
                let _always = Parallelism::Always.enter();
                driver::run_fresh(&text, &file, &opts)
            };
            Database::settle_discarded();
            same(&format!("{name} (one-run database)"), &expected, &one_run);
        }
    }
}
