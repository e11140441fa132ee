//! A few hundred fuzz cases on every target (`cargo xtask fuzz` runs
//! millions): no panic, refusals located, outputs equivalent.

#[test]
fn fuzz_cases_run_clean() {
    let cases = std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed = std::env::var("TESSERA_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x7e55_e7a0);
    let sum = fuzz::run(seed, 0, cases, 2);
    assert_eq!(sum.cases, cases);
    if let Some((index, target, expand, message)) = sum.failures.first() {
        let (text, _) = fuzz::case(seed, *index);
        panic!(
            "{} failures; the first: case {index} of seed {seed} on {target} (expand_relayouts: {expand}): {message}\n{text}",
            sum.failures.len()
        );
    }
    // The cases exercise every outcome that is not a bug.
    assert!(sum.equivalent > cases, "{sum:?}");
    assert!(sum.refused > 0, "{sum:?}");
}

/// The cases long runs found, each fixed since (see `docs/performance.md`):
/// none may fail again, on any target.
#[test]
fn cases_found_by_long_runs_stay_fixed() {
    let found = [
        (2, 65958),
        (2, 141273),
        (2, 319412),
        (3, 83425),
        (3, 345734),
        (3, 449032),
    ];
    for (seed, index) in found {
        let (text, expand) = fuzz::case(seed, index);
        for (target, name) in fuzz::TARGETS.iter().enumerate() {
            let outcome = fuzz::check(&text, target, expand);
            assert!(
                !matches!(outcome, fuzz::Outcome::Failure(_)),
                "seed {seed} case {index} on {name}: {outcome:?}\n{text}"
            );
        }
    }
}

/// An input whose own result reads tile padding has nothing to compare,
/// even where the output's expanded relayout fails on that padding rather
/// than carrying it (seed 3 case 345734).
#[test]
fn an_input_result_that_reads_padding_is_not_checkable() {
    let text = "HloModule m\n\nENTRY %main (p0: s4[3]) -> s4[4] {\n  %p0 = s4[3]{0:T(4)(2)} parameter(0)\n  %v1 = s4[3] copy(%p0)\n  %v2 = s4[4] bitcast(%p0)\n  ROOT %root = s4[4] copy(%v2)\n}\n";
    let tpu = fuzz::TARGETS.iter().position(|&t| t == "tpu").unwrap();
    assert_eq!(
        fuzz::check(text, tpu, true),
        fuzz::Outcome::Unchecked("the input's result reads padding".into())
    );
}
