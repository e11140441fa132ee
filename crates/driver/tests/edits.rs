//! A session edited again and again answers as a stateless run of its
//! current text does: the same text, reports and counts, or the same
//! error. This is the check that the engine (`db::engine`) hands every
//! change on to every computation that reads it: a run after an edit
//! looks only at what the edit reached, so a reader it missed would keep
//! an answer the stateless run does not give.
//!
//! Each module under `testdata/` (and each generated shape) is run in a
//! session on cpu, gpu and tpu, then edited a computation at a time, as a
//! service's `PATCH` does (the edit checked first, and taken back when the
//! check refuses it), or as a whole new text, and run again after each
//! edit. The edits, chosen by a seeded generator, change a body (an
//! elementwise opcode), a layout written in the text, the layout of a
//! computation's result (pinned by a custom call: what its callers read of
//! it, and so what they choose), a parameter's dimensions (its callers'
//! calls no longer match), an instruction's name (names are unique over
//! the module, and an edit may take another computation's name), the
//! parse (a bracket removed), add an instruction, or take a computation
//! back to its first text.

use std::sync::Arc;

mod common;

use common::same_answer;
use db::Database;
use driver::Options;

/// A seeded generator, so that every run makes the same edits.
struct Rng(interp::SplitMix64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }
}

/// The byte ranges and names of the computations of `text`.
fn computations(text: &str) -> Vec<(String, std::ops::Range<usize>)> {
    match hlo::outline(text, "m.hlo") {
        Ok(o) => o
            .computations
            .iter()
            .map(|c| (c.name.clone(), c.span.start..c.span.end))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The names `%name` defined in `text`, in order.
fn defined(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches("ROOT ");
            let rest = l.strip_prefix('%')?;
            let (name, _) = rest.split_once(" = ")?;
            Some(name.to_string())
        })
        .collect()
}

/// `text` with every `%old` (as a whole name) renamed `%new`.
fn rename(text: &str, old: &str, new: &str) -> String {
    let pattern = format!("%{old}");
    let replacement = format!("%{new}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&pattern) {
        let after = &rest[at + pattern.len()..];
        let whole = !after
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_' || c == '-');
        out.push_str(&rest[..at]);
        out.push_str(if whole { &replacement } else { &pattern });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Replaces one occurrence (chosen by `rng`) of any of `pairs`' first
/// strings by its second, or `None` when there is none.
fn swap_one(rng: &mut Rng, text: &str, pairs: &[(&str, &str)]) -> Option<String> {
    let mut sites = Vec::new();
    for (from, to) in pairs {
        for (at, _) in text.match_indices(from) {
            sites.push((at, *from, *to));
        }
    }
    if sites.is_empty() {
        return None;
    }
    let (at, from, to) = sites[rng.below(sites.len())];
    Some(format!("{}{}{}", &text[..at], to, &text[at + from.len()..]))
}

/// `comp` with its root pinned to the other layout of its rank-2 array
/// result: the root computed as before under another name, and a custom
/// call that takes it in its layout and gives the other one. What the
/// computation's callers read of it changes.
fn pin_root(comp: &str) -> Option<String> {
    let (start, line) = comp
        .match_indices("\n")
        .map(|(at, _)| at + 1)
        .map(|at| (at, comp[at..].lines().next().unwrap_or("")))
        .find(|(_, l)| l.trim_start().starts_with("ROOT %"))?;
    let body = line.trim_start().strip_prefix("ROOT %")?;
    let (name, rest) = body.split_once(" = ")?;
    let (shape, op) = rest.split_once(' ')?;
    let (dims, layout) = shape.split_once('{')?;
    let flipped = match layout {
        "1,0}" => "0,1}",
        "0,1}" => "1,0}",
        _ => return None,
    };
    if !dims.contains(',') || dims.matches(',').count() != 1 {
        return None;
    }
    let pinned = format!(
        "  %{name}.pinned = {shape} {op}\n  ROOT %{name} = {dims}{{{flipped} custom-call(%{name}.pinned), custom_call_target=\"pin\", operand_layout_constraints={{{shape}}}"
    );
    Some(format!(
        "{}{}{}",
        &comp[..start],
        pinned,
        &comp[start + line.len()..]
    ))
}

/// `comp` with one rank-2 parameter's dimensions swapped (so, most often,
/// its callers' calls no longer match it).
fn swap_parameter_dims(rng: &mut Rng, comp: &str) -> Option<String> {
    let sites: Vec<(usize, usize)> = comp
        .match_indices(" parameter(")
        .filter_map(|(at, _)| {
            let line_start = comp[..at].rfind('\n').map_or(0, |n| n + 1);
            let open = comp[line_start..at].find('[')? + line_start;
            let close = comp[open..at].find(']')? + open;
            comp[open + 1..close]
                .contains(',')
                .then_some((open + 1, close))
        })
        .collect();
    let &(from, to) = sites.get(rng.below(sites.len()))?;
    let (a, b) = comp[from..to].split_once(',')?;
    if b.contains(',') || a == b {
        return None;
    }
    Some(format!("{}{b},{a}{}", &comp[..from], &comp[to..]))
}

/// How an edit is sent: as one computation's new text, or as the whole
/// module's.
enum Sent {
    Computation,
    Module,
}

/// One edit of computation `name` (its text `comp`) in the module `text`
/// whose other computations define `others`: the new text of the
/// computation, and how it is sent.
fn edit(rng: &mut Rng, comp: &str, original: &str, others: &[String]) -> Option<(String, Sent)> {
    let one = |t: String| Some((t, Sent::Computation));
    match rng.below(10) {
        0 | 1 => one(swap_one(
            rng,
            comp,
            &[
                (" exponential(", " tanh("),
                (" tanh(", " exponential("),
                (" negate(", " abs("),
                (" abs(", " negate("),
                (" add(", " multiply("),
                (" multiply(", " add("),
                (" maximum(", " minimum("),
            ],
        )?),
        2 => one(swap_one(
            rng,
            comp,
            &[
                ("]{1,0", "]{0,1"),
                ("]{0,1", "]{1,0"),
                ("]{2,1,0", "]{0,1,2"),
            ],
        )?),
        3 => {
            let names = defined(comp);
            let old = names.get(rng.below(names.len()))?;
            let new = if others.is_empty() || rng.below(3) > 0 {
                format!("{old}.edited")
            } else {
                others[rng.below(others.len())].clone()
            };
            one(rename(comp, old, &new))
        }
        4 => {
            let at = comp.rfind(')')?;
            one(format!("{}{}", &comp[..at], &comp[at + 1..]))
        }
        5 => {
            let at = comp.find("\n  ")?;
            let added = format!("\n  %added.{} = f32[] constant(1)", rng.below(1000));
            Some((
                format!("{}{}{}", &comp[..at], added, &comp[at..]),
                Sent::Module,
            ))
        }
        6 | 7 => one(pin_root(comp)?),
        8 => one(swap_parameter_dims(rng, comp)?),
        _ => (comp != original).then(|| (original.to_string(), Sent::Computation)),
    }
}

/// Runs `text` in a session on `opts`, then `steps` edits, comparing each
/// answer with a stateless run of the text it stands for.
fn edit_and_compare(label: &str, text: &str, opts: &Options, seed: u64, steps: usize) -> usize {
    let file = "m.hlo";
    let mut rng = Rng(interp::SplitMix64::new(seed));
    let mut db = Database::default();
    let mut current = text.to_string();
    let originals: Vec<(String, String)> = computations(text)
        .into_iter()
        .map(|(n, r)| (n, text[r].to_string()))
        .collect();
    same_answer(
        &format!("{label}: first run"),
        &driver::run(&current, file, opts),
        &driver::run_in(&mut db, &current, file, opts),
    );
    let mut compared = 1;
    for step in 0..steps {
        let comps = computations(&current);
        if comps.is_empty() {
            break;
        }
        let (name, range) = comps[rng.below(comps.len())].clone();
        let comp = &current[range.clone()];
        let original = originals
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(comp, |(_, t)| t.as_str());
        let others: Vec<String> = comps
            .iter()
            .filter(|(n, _)| *n != name)
            .flat_map(|(_, r)| defined(&current[r.clone()]))
            .collect();
        let Some((new_comp, sent)) = edit(&mut rng, comp, original, &others) else {
            continue;
        };
        let edited = format!(
            "{}{}{}",
            &current[..range.start],
            new_comp,
            &current[range.end..]
        );
        let what = format!("{label}: edit {step} of {name}");
        let stateless = driver::run(&edited, file, opts);
        match sent {
            Sent::Module => {
                let session = driver::run_in(&mut db, &edited, file, opts);
                same_answer(&what, &stateless, &session);
                // A text the outline refuses is not loaded.
                if hlo::outline(&edited, file).is_ok() {
                    current = edited;
                }
            }
            Sent::Computation => {
                let before = db.computation_text(&name).expect("the session has it");
                db.replace_computations(&[(name.clone(), new_comp.clone())])
                    .expect("a computation of the session");
                match driver::check_loaded_input(&mut db) {
                    Err(refused) => {
                        // Refused as the stateless run refuses it, and
                        // taken back, as the service does.
                        let Err(want) = &stateless else {
                            panic!(
                                "{what}: the session refused {refused}, the stateless run did not"
                            );
                        };
                        assert_eq!(want, &refused, "{what}: the refusals differ");
                        db.replace_computations(&[(name.clone(), before)])
                            .expect("a computation of the session");
                    }
                    Ok(()) => {
                        let session = driver::run_loaded(&mut db, opts);
                        same_answer(&what, &stateless, &session);
                        current = edited;
                    }
                }
            }
        }
        compared += 1;
        // Now and then a run with nothing changed, which reads only what
        // the last run kept.
        if rng.below(4) == 0 {
            same_answer(
                &format!("{what}, then again"),
                &driver::run(&current, file, opts),
                &driver::run_loaded(&mut db, opts),
            );
        }
    }
    compared
}

#[test]
fn an_edited_session_answers_as_a_stateless_run_on_all_testdata() {
    let mut compared = 0;
    for (t, target_name) in ["cpu", "gpu", "tpu"].iter().enumerate() {
        let target = Arc::new(target::load_builtin(target_name).expect("builtin target"));
        let opts = Options::new(target);
        for (i, path) in test_support::hlo_files().iter().enumerate() {
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            // The transformer has a test of its own.
            if text.len() > 200_000 {
                continue;
            }
            let label = format!("{} on {target_name}", path.display());
            compared += edit_and_compare(&label, &text, &opts, (t * 1000 + i) as u64, 6);
        }
    }
    assert!(compared > 1000, "{compared} answers compared");
}

#[test]
fn an_edited_session_answers_as_a_stateless_run_on_the_transformer() {
    let path =
        test_support::testdata_dir().join("xla-cpu/large_transformer_24_f32/before_layout.hlo");
    let text = std::fs::read_to_string(&path).expect("the transformer");
    let opts = Options::new(Arc::new(target::load_builtin("cpu").expect("cpu")));
    let compared = edit_and_compare("transformer on cpu", &text, &opts, 7, 4);
    assert!(compared >= 3, "{compared} answers compared");
}

#[test]
fn an_edited_session_answers_as_a_stateless_run_on_every_generated_shape() {
    for (t, target_name) in ["cpu", "tpu"].iter().enumerate() {
        let opts = Options::new(Arc::new(
            target::load_builtin(target_name).expect("builtin"),
        ));
        for (s, shape) in test_support::scaling::Shape::ALL.iter().enumerate() {
            let text = shape.module(600);
            let label = format!("{} on {target_name}", shape.name());
            let compared = edit_and_compare(&label, &text, &opts, (t * 100 + s) as u64, 12);
            assert!(compared >= 4, "{label}: {compared} answers compared");
        }
    }
}
