//! The parallel parser gives exactly what the sequential one gives: the
//! same module (instruction ids, order, names, attributes) for good text,
//! and the same first error (message, line, column, source line) for bad
//! text, wherever the computations are cut.

use std::path::Path;

use proptest::prelude::*;

use hlo::{
    Module, Parallelism, ParseError, ParseOptions, diff_modules, parse_module_with, print_module,
};

/// One way of parsing: a parallelism policy and the options (forced cuts).
#[derive(Debug)]
struct Way {
    policy: Parallelism,
    options: ParseOptions,
}

impl Way {
    fn run<T: Send>(&self, parse: impl Fn(&ParseOptions) -> T + Sync) -> T {
        self.policy.install(|| parse(&self.options))
    }
}

fn under(policy: Parallelism) -> Way {
    Way {
        policy,
        options: ParseOptions::default(),
    }
}

fn sequential() -> Way {
    under(Parallelism::Sequential)
}

/// The production policy, then every piece split as small as the policy
/// allows: the ways of parsing that do not force cuts.
fn unforced() -> Vec<Way> {
    vec![under(Parallelism::Auto), under(Parallelism::Always)]
}

fn cut_at(offsets: Vec<usize>) -> Way {
    Way {
        policy: Parallelism::Auto,
        options: ParseOptions {
            forced_splits: Some(offsets),
        },
    }
}

fn parse(text: &str, way: &Way) -> Result<Module, ParseError> {
    way.run(|o| parse_module_with(text, "t.hlo", o))
}

fn large_module() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/xla-cpu/large_transformer_24_f32/before_layout.hlo");
    std::fs::read_to_string(path).unwrap()
}

/// The first difference between two parse results, ids included, or
/// `None` when they are identical.
fn difference(a: &Result<Module, ParseError>, b: &Result<Module, ParseError>) -> Option<String> {
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) if a == b => return None,
        (Err(a), Err(b)) => return Some(format!("errors differ:\n{a}\n{b}")),
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => return Some(format!("one failed: {e}")),
    };
    if let Some(d) = diff_modules(a, b) {
        return Some(d);
    }
    for (x, y) in a.computations.iter().zip(&b.computations) {
        if x.schedule() != y.schedule() || x.root() != y.root() {
            return Some(format!("computation %{}: ids differ", x.name));
        }
        if x.graph().edge_count() != y.graph().edge_count() {
            return Some(format!("computation %{}: edge counts differ", x.name));
        }
        for &id in x.schedule() {
            let (i, j) = (x.inst(id), y.inst(id));
            if i != j || i.operands() != j.operands() {
                return Some(format!(
                    "computation %{}: instruction {id:?} differs",
                    x.name
                ));
            }
        }
    }
    (print_module(a) != print_module(b)).then(|| "printed texts differ".to_string())
}

fn assert_same(text: &str, way: &Way, what: &str) {
    let expected = parse(text, &sequential());
    if let Some(d) = difference(&expected, &parse(text, way)) {
        panic!("{what} ({way:?}): {d}");
    }
}

/// Offsets of the first non-blank byte of every line.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut line = 0;
    for l in text.split_inclusive('\n') {
        let indent = l.len() - l.trim_start_matches([' ', '\t']).len();
        starts.push(line + indent);
        line += l.len();
    }
    starts
}

#[test]
fn every_testdata_module_parses_the_same() {
    for path in test_support::hlo_files() {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        // The default (parallel for the large modules), and every module
        // split as finely as the policy allows.
        for way in unforced() {
            assert_same(&text, &way, &name);
        }
        // Cut at every instruction start, then at awkward places: inside
        // the first token of every line, and at every line end.
        let starts = line_starts(&text);
        assert_same(
            &text,
            &cut_at(starts.clone()),
            &format!("{name}, every line"),
        );
        let inside: Vec<usize> = starts.iter().map(|s| s + 1).collect();
        assert_same(&text, &cut_at(inside), &format!("{name}, inside tokens"));
        let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).collect();
        assert_same(&text, &cut_at(ends), &format!("{name}, line ends"));
        // One cut at the middle instruction line of each computation.
        let middles: Vec<usize> = starts
            .iter()
            .copied()
            .skip(starts.len() / 2)
            .take(1)
            .collect();
        assert_same(&text, &cut_at(middles), &format!("{name}, middle"));
    }
}

/// A module with text that looks like instructions where there are none:
/// inside a multi-line constant literal, a multi-line string and a block
/// comment. Also a forward reference, a control predecessor and a called
/// computation.
const AWKWARD: &str = r#"HloModule awkward

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %s = f32[] add(%x, %y)
}

ENTRY %main (p: f32[2],
    q: f32[2]) -> f32[2] {
  %p = f32[2]{0} parameter(0)
  %q = f32[2]{0} parameter(1)
  %k = f32[2,2]{1,0} constant({
  %not_an_instruction = {1, 2},
  ROOT {3, 4}
  })
  /* a comment that looks like code:
  %c = f32[2]{0} negate(%p)
  ROOT %c2 = f32[2]{0} negate(%p)
  */
  %n = f32[2]{0} negate(%fwd), metadata={op_name="first
  %m = f32[2]{0} add(%p, %p)
  ROOT %r = f32[2]{0} add(%p, %p)"}, control-predecessors={%q}
  %fwd = f32[2]{0} abs(%p) // a line comment
  %z = f32[] constant(0)
  %red = f32[] reduce(%p, %z), dimensions={0}, to_apply=%add
  ROOT %out = f32[2]{0} add(%n, %fwd)
}

"#;

#[test]
fn any_single_cut_gives_the_sequential_module() {
    assert!(parse(AWKWARD, &sequential()).is_ok());
    for k in 0..=AWKWARD.len() {
        assert_same(AWKWARD, &cut_at(vec![k]), &format!("cut at {k}"));
    }
    for k in 0..AWKWARD.len() {
        for d in [1, 2, 5, 17, 40, 90] {
            assert_same(
                AWKWARD,
                &cut_at(vec![k, k + d]),
                &format!("cuts at {k} and {}", k + d),
            );
        }
    }
}

/// Texts whose computations are not where the lines suggest at a glance:
/// what was parsed from the guessed places is dropped, and the
/// computations are parsed again from the outline.
#[test]
fn misleading_lines_are_no_problem() {
    let variants = [
        AWKWARD.replace(
            "\nENTRY %main",
            "\n// a comment between computations\nENTRY %main",
        ),
        AWKWARD.replace("}\n\nENTRY", "} /* a comment */\n\nENTRY"),
        AWKWARD.replace("\n%add (x", "\n  %add (x"),
        AWKWARD.replace(
            "op_name=\"first\n",
            "op_name=\"first\n%fake (x: f32[]) -> f32[] {\n",
        ),
        AWKWARD.replace("\n%add (x", "\n%main (x"),
        format!("{AWKWARD}// the end\n"),
        {
            // The entry first: XLA prints it last.
            let (head, entry) = AWKWARD.split_at(AWKWARD.find("ENTRY").unwrap());
            let (header, add) = head.split_at(head.find("%add").unwrap());
            format!("{header}{entry}{add}")
        },
    ];
    for text in &variants {
        for cuts in [vec![], line_starts(text)] {
            assert_same(text, &cut_at(cuts), text);
        }
    }
    let large = large_module();
    let entry = large.find("\nENTRY ").unwrap();
    for text in [
        format!("{large}// the end\n"),
        format!("{}\n/* a comment */{}", &large[..entry], &large[entry..]),
    ] {
        for way in unforced() {
            assert_same(&text, &way, "large module with a comment");
        }
    }
}

/// The byte range of the line that defines the instruction `name`.
fn line_of(text: &str, name: &str) -> (usize, usize) {
    let needle = format!("\n  %{name} = ");
    let start = text.find(&needle).unwrap_or_else(|| panic!("no %{name}")) + 1;
    let end = start + text[start..].find('\n').unwrap();
    (start, end)
}

/// Names of the entry computation's instructions, in order.
fn entry_names(text: &str) -> Vec<String> {
    let entry = text.find("\nENTRY ").unwrap();
    text[entry..]
        .lines()
        .filter_map(|l| l.strip_prefix("  %"))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// Applies `edit` to the line of the instruction `at` (a fraction of the
/// way into the entry computation) and checks that every way of parsing
/// gives the same error.
fn check_error(text: &str, at: f64, what: &str, edit: impl Fn(&str, &[String]) -> String) {
    let names = entry_names(text);
    let name = &names[(names.len() as f64 * at) as usize];
    let (start, end) = line_of(text, name);
    let edited = format!(
        "{}{}{}",
        &text[..start],
        edit(&text[start..end], &names),
        &text[end..]
    );
    let expected = parse(&edited, &sequential());
    let Err(e) = &expected else {
        panic!("{what}: parsed")
    };
    // The cuts: the default ones, on the edited line and around it.
    let mut options = unforced();
    for cuts in [
        vec![start],
        vec![start - 1, start + 2],
        vec![start + 2],
        vec![end + 1, end + 3],
    ] {
        options.push(cut_at(cuts));
    }
    let middle = start / 2 + text[start / 2..].find("\n  %").unwrap() + 3;
    options.push(cut_at(vec![middle, start, end + 3]));
    for o in &options {
        let got = parse(&edited, o);
        if let Some(d) = difference(&expected, &got) {
            panic!("{what} ({o:?}): {d}");
        }
        assert_eq!(
            got.as_ref().err().map(ToString::to_string),
            Some(e.to_string())
        );
    }
}

#[test]
fn errors_in_the_second_half_are_the_sequential_ones() {
    let text = large_module();
    check_error(&text, 0.8, "syntax error", |line, _| {
        line.replacen(" = ", " ", 1)
    });
    check_error(&text, 0.8, "bad shape", |line, _| {
        line.replacen("f32[", "f33[", 1)
    });
    check_error(&text, 0.8, "duplicate name", |line, names| {
        let name = line.trim_start().split(' ').next().unwrap();
        line.replacen(name, &format!("%{}", names[names.len() / 2]), 1)
    });
    check_error(&text, 0.8, "unknown operand", |line, _| {
        line.replacen("(%", "(%nowhere_", 1)
    });
    check_error(&text, 0.8, "second ROOT", |line, _| {
        line.replacen("  %", "  ROOT %", 1)
    });
    check_error(&text, 0.8, "unknown computation", |line, _| {
        format!("{line}, to_apply=%nowhere")
    });
    check_error(&text, 0.8, "unterminated string", |line, _| {
        format!("{line}, x=\"open")
    });
    check_error(&text, 0.97, "duplicate name near the end", |line, names| {
        let name = line.trim_start().split(' ').next().unwrap();
        line.replacen(name, &format!("%{}", names[1]), 1)
    });
    // Two errors: the one earlier in the text wins, even when it is a
    // registration error and the later one a syntax error.
    let names = entry_names(&text);
    let (start, end) = line_of(&text, &names[names.len() * 3 / 10]);
    let line = text[start..end].replacen(
        text[start..end].trim_start().split(' ').next().unwrap(),
        &format!("%{}", names[2]),
        1,
    );
    let two = format!("{}{line}{}", &text[..start], &text[end..]);
    check_error(&two, 0.8, "two errors", |line, _| {
        line.replacen(" = ", " ", 1)
    });
}

/// The large module with its names bare (no `%`), which the parser takes
/// and the parallel path now finds and cuts as it does the `%` form (see
/// `bare_names_are_found_and_cut_at` in the parser's unit tests): the same
/// module on the pool, and for damaged text the same error, among them a
/// name defined twice in pieces far apart, which only the check at the end
/// of a cut computation sees.
#[test]
fn bare_names_parse_the_same() {
    let text = large_module().replace('%', "");
    assert!(parse(&text, &sequential()).is_ok());
    for way in unforced() {
        assert_same(&text, &way, "bare names");
    }
    let entry = text.find("\nENTRY ").unwrap();
    let defs: Vec<(usize, &str)> = text[entry..]
        .match_indices("\n  ")
        .filter_map(|(at, _)| {
            let line = &text[entry + at + 3..];
            let name = line.split(' ').next()?;
            line[name.len()..]
                .starts_with(" = ")
                .then_some((entry + at + 3, name))
        })
        .collect();
    let (late, late_name) = defs[defs.len() * 4 / 5];
    let (_, early_name) = defs[defs.len() / 5];
    let damaged = [
        // A name defined twice, in pieces far apart: the later definition
        // and its uses renamed, so that nothing else is wrong.
        format!(
            "{}{}",
            &text[..late],
            renamed(&text[late..], late_name, early_name)
        ),
        // An operand nothing defines.
        text.replacen(&format!("({late_name}"), "(nowhere", 1),
    ];
    for (k, bad) in damaged.iter().enumerate() {
        let expected = parse(bad, &sequential());
        assert!(expected.is_err(), "damage {k} parsed");
        for way in unforced() {
            let got = parse(bad, &way);
            assert_eq!(difference(&expected, &got), None, "damage {k} ({way:?})");
        }
    }
}

/// A computation of more names than one table takes (see the parser's
/// `names`): a name defined twice in two of its tables, which only the
/// check at the end of the computation sees, gives the sequential error.
#[test]
fn a_name_defined_twice_in_a_huge_computation_is_the_sequential_error() {
    let text = test_support::scaling::Shape::Shared.module(90_000);
    assert!(parse(&text, &sequential()).is_ok());
    let late = text.find("\n  e9000 = ").unwrap() + 3;
    let damaged = format!(
        "{}{}",
        &text[..late],
        renamed(&text[late..], "e9000", "e100")
    );
    let expected = parse(&damaged, &sequential());
    let Err(e) = &expected else {
        panic!("a name defined twice parsed")
    };
    assert!(e.to_string().contains("duplicate instruction name"), "{e}");
    for way in unforced() {
        assert_eq!(
            difference(&expected, &parse(&damaged, &way)),
            None,
            "{way:?}"
        );
    }
}

/// `text` with every whole-word `from` replaced by `to`.
fn renamed(text: &str, from: &str, to: &str) -> String {
    let word =
        |b: Option<&u8>| b.is_some_and(|&b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(from) {
        let end = at + from.len();
        if word(at.checked_sub(1).and_then(|i| text.as_bytes().get(i)))
            || word(text.as_bytes().get(end))
        {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str(to);
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

fn corpus_seed() -> &'static str {
    static SEED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SEED.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/xla-cpu/mlp_fwd_bwd/optimized.hlo");
        std::fs::read_to_string(path).unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random cuts of a real module.
    #[test]
    fn random_cuts_give_the_sequential_module(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let text = corpus_seed();
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
        let expected = parse(text, &sequential());
        prop_assert_eq!(difference(&expected, &parse(text, &cut_at(cuts))), None);
    }

    /// Random cuts of a damaged module: the same module or the same error.
    #[test]
    fn random_cuts_of_damaged_text_give_the_sequential_result(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..8usize), 1..4),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 1..8),
    ) {
        const SNIPPETS: [&str; 8] = ["\"", "/*", "}", "{", "ROOT ", "%x = f32[] constant(1)\n  ", "(", ","];
        let mut text = AWKWARD.to_string();
        for (at, what) in &edits {
            let mut at = at.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, SNIPPETS[*what]);
        }
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
        let expected = parse(&text, &sequential());
        prop_assert_eq!(difference(&expected, &parse(&text, &cut_at(cuts))), None);
    }
}

/// A computation parsed alone (as a session's database parses each one),
/// on the pool and cut anywhere, gives the sequential computation, or the
/// sequential error.
#[test]
fn one_computation_parses_the_same_cut_anywhere() {
    let text = large_module();
    let outline = hlo::outline(&text, "t.hlo").unwrap();
    let entry = &outline.computations[outline.entry];
    let ids: std::collections::HashMap<&str, hlo::CompId> = outline
        .computations
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), hlo::CompId(i as u32)))
        .collect();
    let resolve = |name: &str| ids.get(name).copied();
    let body = entry.span.text(&text);
    let third = body.len() / 3 + body[body.len() / 3..].find("\n  %").unwrap() + 3;
    let damaged = format!(
        "{}{}",
        &body[..third],
        body[third..].replacen(" = ", " ", 1)
    );
    for body in [body, damaged.as_str()] {
        let parse = |way: &Way| {
            way.run(|o| hlo::parse_computation_with(body, &entry.span, &resolve, "t.hlo", o))
        };
        let expected = parse(&sequential());
        let mut options = unforced();
        for cuts in [
            vec![third],
            vec![1, third - 1, third + 2],
            vec![body.len() / 2, body.len() - 5],
        ] {
            options.push(cut_at(cuts));
        }
        for o in &options {
            match (&expected, &parse(o)) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a.schedule(), b.schedule(), "{o:?}");
                    assert_eq!(a.root(), b.root(), "{o:?}");
                    for &id in a.schedule() {
                        assert_eq!(a.inst(id), b.inst(id), "{o:?}");
                        assert_eq!(a.operands(id), b.operands(id), "{o:?}");
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "{o:?}"),
                (a, b) => panic!("{o:?}: {:?} against {:?}", a.is_ok(), b.is_ok()),
            }
        }
        assert!(
            body.len() >= hlo::Split::ParseText.threshold(),
            "the default policy splits it too"
        );
    }
    assert!(
        sequential()
            .run(|o| hlo::parse_computation_with(&damaged, &entry.span, &resolve, "t.hlo", o))
            .is_err()
    );
}
