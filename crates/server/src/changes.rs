//! `?response=changes`: a session run that answers with only the
//! computations whose output text changed since a run the client holds.
//!
//! Every successful session run gets a `run` token, and the session keeps
//! a hash of each output computation's text from its last successful run
//! (whatever form that answer took). A client that holds the answer of
//! that run names it with `since`; the answer then lists the computations
//! whose text differs from it (`changed`, keyed by name), those that are
//! gone (`removed`), and the order of all of them (`computations`). With
//! no `since`, or one that is not the session's last run (another client
//! ran it since, or the server lost the session), `since` is `null` and
//! every computation is listed: the answer is then complete on its own.
//! The output text is the header followed by each computation's text in
//! `computations` order.
//!
//! The report is answered the same way: its `layout_assignment` and
//! `relayout` sections are left out, and named in `report_unchanged`,
//! when the database did not rebuild them since the run `since` (the
//! session keeps the sections it answered, and compares them by identity,
//! which costs nothing and is never wrong: a section rebuilt equal is sent
//! again).

use std::hash::BuildHasher;
use std::sync::Arc;

use driver::Part;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

/// What a session remembers of its last answer.
pub struct LastAnswer {
    /// The run's token.
    pub run: String,
    /// Its output computations' names and text hashes, in order (shared
    /// with the output it answered).
    computations: Arc<[Part]>,
    /// Its report's sections, shared with the database that made them: a
    /// later run whose section is the very same value did not rebuild it,
    /// so the section is unchanged.
    assignment: Option<Arc<driver::AssignmentReport>>,
    relayout: Option<Arc<driver::RelayoutReport>>,
}

/// A token no other run of this process had, and that a restarted server
/// will not hand out again but by chance: a random prefix for the process
/// and a counter.
pub fn new_run_token() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix =
        PREFIX.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) + 1;
    format!("{:08x}-{n}", prefix >> 32)
}

/// The output's computations, in order, each with its name, byte range
/// and text hash (kept with each computation's output, so a run hashes
/// only what it printed again).
fn parts(out: &driver::Output) -> Arc<[Part]> {
    out.parts
        .as_ref()
        .map_or_else(|| Arc::from(Vec::new()), |p| Arc::clone(&p.computations))
}

/// The record of `out`, answered as run `run`.
pub fn remember(run: String, out: &driver::Output) -> LastAnswer {
    LastAnswer {
        run,
        computations: parts(out),
        assignment: out.report.assignment.clone(),
        relayout: out.report.relayout.clone(),
    }
}

/// Whether a report section is the very value an earlier answer carried.
fn same_section<T>(held: &Option<Arc<T>>, now: &Option<Arc<T>>) -> bool {
    matches!((held, now), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
}

/// Whether two outputs list the same computations in the same order.
fn same_names(a: &[Part], b: &[Part]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.name == y.name)
}

/// Whether each computation of `now` has the text it had in `base`, in
/// order. Compared position by position while the two list the same
/// names in the same order (an edit of bodies), by name otherwise.
fn unchanged(base: &[Part], now: &[Part]) -> Vec<bool> {
    if same_names(base, now) {
        return base
            .iter()
            .zip(now)
            .map(|(b, n)| b.hash == n.hash)
            .collect();
    }
    let by_name: HashMap<&str, u64> = base.iter().map(|b| (b.name.as_str(), b.hash)).collect();
    now.iter()
        .map(|n| by_name.get(n.name.as_str()) == Some(&n.hash))
        .collect()
}

/// The fields of a changes answer to `out`, run `run`: against `last` when
/// it is the run the client named as `since`, else complete.
pub fn changes_fields(
    out: &driver::Output,
    run: &str,
    since: Option<&str>,
    last: Option<&LastAnswer>,
) -> Map<String, Value> {
    let base = last.filter(|l| since == Some(l.run.as_str()));
    let comps = parts(out);
    let same = match base {
        // The very parts of the last answer: a re-run with no change.
        Some(b) if Arc::ptr_eq(&b.computations, &comps) => vec![true; comps.len()],
        Some(b) => unchanged(&b.computations, &comps),
        None => vec![false; comps.len()],
    };
    let mut changed = Map::new();
    for (p, same) in comps.iter().zip(same) {
        if !same {
            changed.insert(
                p.name.clone(),
                Value::String(out.text[p.range.clone()].to_string()),
            );
        }
    }
    let mut removed: Vec<&str> = match base {
        Some(b) if same_names(&b.computations, &comps) => Vec::new(),
        Some(b) => {
            let now: HashSet<&str> = comps.iter().map(|p| p.name.as_str()).collect();
            b.computations
                .iter()
                .map(|p| p.name.as_str())
                .filter(|n| !now.contains(n))
                .collect()
        }
        None => Vec::new(),
    };
    removed.sort_unstable();
    let header = out
        .parts
        .as_ref()
        .map_or("", |p| &out.text[p.header.clone()]);
    let entry = out.parts.as_ref().map(|p| {
        json!({
            "parameters": p.entry_layout.parameters.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "result": p.entry_layout.result.to_string(),
        })
    });
    let mut m = Map::new();
    m.insert("response".into(), json!("changes"));
    m.insert("run".into(), json!(run));
    m.insert("since".into(), json!(base.map(|b| b.run.as_str())));
    m.insert("header".into(), json!(header));
    m.insert("entry_computation_layout".into(), json!(entry));
    m.insert(
        "computations".into(),
        json!(comps.iter().map(|p| p.name.as_str()).collect::<Vec<_>>()),
    );
    m.insert("changed".into(), Value::Object(changed));
    m.insert("removed".into(), json!(removed));
    let sections = wire::ReportSections {
        assignment: !base.is_some_and(|b| same_section(&b.assignment, &out.report.assignment)),
        relayout: !base.is_some_and(|b| same_section(&b.relayout, &out.report.relayout)),
    };
    let mut unchanged = Vec::new();
    if !sections.assignment {
        unchanged.push("layout_assignment");
    }
    if !sections.relayout {
        unchanged.push("relayout");
    }
    m.insert(
        "report".into(),
        wire::report_json_sections(&out.report, sections),
    );
    m.insert("report_unchanged".into(), json!(unchanged));
    m
}
