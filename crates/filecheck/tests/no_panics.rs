//! Check files and inputs are user input: whatever they contain, FileCheck
//! must answer with an exit status, never panic. This feeds a few thousand
//! deterministic pseudo-random check files and inputs, built from fragments
//! of FileCheck syntax and awkward bytes (multi-byte characters, `\r`,
//! tabs, unbalanced brackets), through the command-line entry point.

use std::path::Path;

/// A small deterministic generator (64-bit LCG), so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next() % items.len()]
    }
}

const DIRECTIVES: &[&str] = &[
    "CHECK: ",
    "CHECK-NEXT: ",
    "CHECK-SAME:",
    "CHECK-NOT: ",
    "CHECK-DAG: ",
    "CHECK-LABEL: ",
    "CHECK-EMPTY:",
    "CHECK-COUNT-2: ",
    "CHECK-COUNT-x: ",
    "CHECK{LITERAL}: ",
    "CHECK{: ",
    "COM: ",
    "RUN: ",
    "CHECK",
    "CHECK-",
    "CHECK-COUNT-99999999999: ",
    "",
];

const FRAGMENTS: &[&str] = &[
    "a",
    "é",
    "日本",
    "{{",
    "}}",
    "[[",
    "]]",
    "[[V:",
    "[[V]]",
    "[[#",
    "[[#N:]]",
    "[[#N+1]]",
    "[[#%x,H:]]",
    "[[#%.3d,",
    "[[@LINE",
    "[[@LINE+1]]",
    "{{[^a]",
    "{{(}}",
    "{{a|b}}",
    "{{\\",
    "\\",
    "]",
    "[",
    "(",
    ")",
    "{",
    "}",
    "#",
    "%",
    ",",
    ":",
    "==",
    "+",
    "-",
    "*",
    " ",
    "\t",
    "\r",
    "\r\n",
    "$",
    "^",
    "[[$G:x]]",
    "[[$G]]",
    "[[#add(",
    "[[#max(1,2)]]",
    "[[#((((1))))]]",
    "0x",
    "99999999999999999999999",
    "{{.*}}",
    "{{x{2}}}",
    "{{[[:alpha:]]}}",
];

const INPUT_FRAGMENTS: &[&str] = &[
    "a", "b", "é", "日本", " ", "\t", "\n", "\r\n", "\r", "{", "}", "[", "]", "42", "0x1f", "-7",
    "x",
];

fn random_text(rng: &mut Lcg, pieces: &[&str], max: usize) -> String {
    let count = rng.next() % max;
    (0..count).map(|_| rng.pick(pieces)).collect()
}

#[test]
fn random_check_files_never_panic() {
    let dir = std::env::temp_dir().join(format!("filecheck-no-panics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let option_sets: &[&[&str]] = &[
        &[],
        &["--strict-whitespace"],
        &["--match-full-lines"],
        &["--ignore-case", "--enable-var-scope"],
        &["--implicit-check-not=b", "-DV=é", "-D#N=0x10"],
        &[
            "--check-prefixes=CHECK,X",
            "--allow-unused-prefixes",
            "--allow-empty",
        ],
    ];
    let mut rng = Lcg(0x5eed);
    let mut statuses = [0usize; 3];
    for round in 0..3000 {
        let mut check = String::new();
        for _ in 0..(1 + rng.next() % 5) {
            check.push_str(rng.pick(DIRECTIVES));
            check.push_str(&random_text(&mut rng, FRAGMENTS, 6));
            check.push('\n');
        }
        let input = random_text(&mut rng, INPUT_FRAGMENTS, 12);
        std::fs::write(dir.join("check.txt"), &check).unwrap_or_else(|e| panic!("{e}"));
        let mut args: Vec<String> = option_sets[round % option_sets.len()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.push("check.txt".to_string());
        let mut stderr = Vec::new();
        let status =
            filecheck::run_cli_in_dir(&args, &mut input.as_bytes(), &mut stderr, Path::new(&dir));
        assert!(
            (0..=2).contains(&status),
            "unexpected status {status} for check file {check:?} and input {input:?}"
        );
        statuses[status as usize] += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    // The generator must exercise passing, failing and malformed cases alike.
    assert!(
        statuses.iter().all(|&n| n > 0),
        "statuses seen: {statuses:?}"
    );
}
