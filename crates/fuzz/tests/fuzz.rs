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
