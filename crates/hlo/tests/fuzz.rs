//! Fuzz-style properties: random bytes and random mutations of real XLA
//! dumps never make the parser, printer or verifier panic; whatever parses
//! prints to text that parses again and prints the same.

use std::sync::OnceLock;

use proptest::prelude::*;

use hlo::{diff_modules, parse_module, parse_module_bytes, print_module, verify_module};

/// Small corpus files to mutate.
fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/xla-cpu");
        [
            "entry_layout_colmajor/before_layout.hlo",
            "entry_layout_colmajor/after_layout.hlo",
            "tuple_pytree_io/before_layout.hlo",
            "einsum_awkward/before_layout.hlo",
            "pad_ops/before_layout.hlo",
            "int8_quantized_matmul/before_layout.hlo",
        ]
        .iter()
        .map(|f| std::fs::read(root.join(f)).unwrap())
        .collect()
    })
}

/// Snippets that steer mutations toward the parser's decisions.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"(",
    b")",
    b"[",
    b"]",
    b"\"",
    b"'",
    b"/*",
    b"*/",
    b"//",
    b"%",
    b"=",
    b",",
    b":",
    b"->",
    b"ROOT ",
    b"ENTRY ",
    b"f32[2]{0}",
    b"(f32[], s32[])",
    b"\n",
    b" ",
    b"-",
    b"99999999999999999999",
    b"\xc3\xa9",
    b"\xff",
    b"{1,0:T(2,*)}",
    b"parameter(0)",
    b"constant(",
    b"control-predecessors={%a}",
    b"to_apply=%nope",
    b"\\",
    b"<=",
    b"?",
    b"HloModule m\n",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, token: usize },
    InsertBytes { at: usize, bytes: Vec<u8> },
    Duplicate { at: usize, len: usize, to: usize },
    Swap { a: usize, b: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::InsertBytes { at, bytes }),
        (any::<usize>(), 1usize..200, any::<usize>())
            .prop_map(|(at, len, to)| Mutation::Duplicate { at, len, to }),
        (any::<usize>(), any::<usize>(), 1usize..40).prop_map(|(a, b, len)| Mutation::Swap {
            a,
            b,
            len
        }),
    ]
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let n = text.len().max(1);
    match m {
        Mutation::Delete { at, len } => {
            let at = at % n;
            let end = (at + len).min(text.len());
            if at < end {
                text.drain(at..end);
            }
        }
        Mutation::Insert { at, token } => {
            let at = at % (text.len() + 1);
            let bytes = TOKENS[*token];
            text.splice(at..at, bytes.iter().copied());
        }
        Mutation::InsertBytes { at, bytes } => {
            let at = at % (text.len() + 1);
            text.splice(at..at, bytes.iter().copied());
        }
        Mutation::Duplicate { at, len, to } => {
            let at = at % n;
            let end = (at + len).min(text.len());
            let chunk: Vec<u8> = text.get(at..end).unwrap_or_default().to_vec();
            let to = to % (text.len() + 1);
            text.splice(to..to, chunk);
        }
        Mutation::Swap { a, b, len } => {
            let (a, b) = (a % n, b % n);
            let (a, b) = (a.min(b), a.max(b));
            if a + len <= b && b + len <= text.len() {
                for i in 0..*len {
                    text.swap(a + i, b + i);
                }
            }
        }
    }
}

/// Words whose replacement keeps the text parseable but changes its
/// meaning, so that the verifier and printer see odd but valid modules.
const WORDS: &[&str] = &[
    "add(",
    "multiply(",
    "negate(",
    "broadcast(",
    "transpose(",
    "reshape(",
    "tuple(",
    "copy(",
    "reduce(",
    "dot(",
    "slice(",
    "f32[",
    "s32[",
    "pred[",
    "bf16[",
    "ROOT ",
    "{1,0}",
    "{0,1}",
    "{0}",
    "index=0",
    "index=1",
    "dimensions={0}",
    "dimensions={1}",
    "dimensions={1,0}",
    "[0:",
    "[1:",
    ",1]",
    ",2]",
    "parameter(0)",
    "parameter(1)",
];

#[derive(Clone, Debug)]
enum LineMutation {
    SwapLines { a: usize, b: usize },
    DeleteLine { at: usize },
    ReplaceWord { nth: usize, from: usize, to: usize },
    ReplaceDigit { nth: usize, digit: u8 },
}

fn line_mutation() -> impl Strategy<Value = LineMutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| LineMutation::SwapLines { a, b }),
        any::<usize>().prop_map(|at| LineMutation::DeleteLine { at }),
        (any::<usize>(), 0..WORDS.len(), 0..WORDS.len())
            .prop_map(|(nth, from, to)| LineMutation::ReplaceWord { nth, from, to }),
        (any::<usize>(), 0u8..10)
            .prop_map(|(nth, digit)| LineMutation::ReplaceDigit { nth, digit }),
    ]
}

fn apply_line(text: &str, m: &LineMutation) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    let n = lines.len();
    match m {
        LineMutation::SwapLines { a, b } => {
            lines.swap(a % n, b % n);
            lines.join("\n")
        }
        LineMutation::DeleteLine { at } => {
            lines.remove(at % n);
            lines.join("\n")
        }
        LineMutation::ReplaceWord { nth, from, to } => {
            let (from, to) = (WORDS[*from], WORDS[*to]);
            let hits: Vec<usize> = text.match_indices(from).map(|(i, _)| i).collect();
            match hits.get(nth % hits.len().max(1)) {
                Some(&i) => format!("{}{to}{}", &text[..i], &text[i + from.len()..]),
                None => text.to_string(),
            }
        }
        LineMutation::ReplaceDigit { nth, digit } => {
            let hits: Vec<usize> = text
                .bytes()
                .enumerate()
                .filter(|(_, b)| b.is_ascii_digit())
                .map(|(i, _)| i)
                .collect();
            let mut bytes = text.as_bytes().to_vec();
            if let Some(&i) = hits.get(nth % hits.len().max(1)) {
                bytes[i] = b'0' + digit;
            }
            String::from_utf8(bytes).unwrap()
        }
    }
}

/// Whatever parses must print, reparse to the same module, print the same
/// text again, and verify without panicking.
fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(module) = parse_module_bytes(bytes, "fuzz.hlo") {
        let _ = verify_module(&module);
        let printed = print_module(&module);
        let again = parse_module(&printed, "printed.hlo").map_err(|e| {
            TestCaseError::fail(format!("printed text does not parse: {e}\n{printed}"))
        })?;
        prop_assert_eq!(
            print_module(&again),
            printed.clone(),
            "printing is not idempotent"
        );
        if module.entry_computation_layout_given {
            prop_assert_eq!(diff_modules(&module, &again), None);
        }
        let _ = verify_module(&again);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        exercise(&bytes)?;
        let mut with_header = b"HloModule m\nENTRY %e {\n".to_vec();
        with_header.extend_from_slice(&bytes);
        exercise(&with_header)?;
    }

    #[test]
    fn mutated_dumps_never_panic(seed in 0usize..6, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let mut text = seeds()[seed].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        exercise(&text)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Line swaps, deletions and word or digit replacements: mostly valid
    /// syntax with broken meaning, for the verifier and the printer.
    #[test]
    fn semantic_mutations_never_panic(seed in 0usize..6, mutations in proptest::collection::vec(line_mutation(), 1..5)) {
        let mut text = String::from_utf8(seeds()[seed].clone()).unwrap();
        for m in &mutations {
            text = apply_line(&text, m);
        }
        exercise(text.as_bytes())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Token soup inside one instruction line, where most decisions are.
    #[test]
    fn token_soup_in_an_instruction_never_panics(tokens in proptest::collection::vec(0..TOKENS.len(), 0..24)) {
        let mut text = b"HloModule m\nENTRY %e {\n  %a = f32[2]{0} parameter(0)\n  ROOT %b = ".to_vec();
        for t in tokens {
            text.extend_from_slice(TOKENS[t]);
        }
        text.extend_from_slice(b"\n}\n");
        exercise(&text)?;
    }
}
