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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use driver::Part;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// A top-level field of an answer: a value built for it, or JSON text
/// rendered for an earlier answer and sent again as it is.
pub enum Field {
    /// A value built for this answer.
    Value(Value),
    /// JSON text kept from an earlier answer (see [`Rendered`]).
    Rendered(Arc<RawValue>),
    /// A text shared with the output that holds it, sent as a JSON string
    /// without being copied first.
    Text(Arc<String>),
}

impl Serialize for Field {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Value(v) => v.serialize(serializer),
            Field::Rendered(raw) => raw.serialize(serializer),
            Field::Text(text) => serializer.serialize_str(text),
        }
    }
}

impl From<Value> for Field {
    fn from(v: Value) -> Field {
        Field::Value(v)
    }
}

/// An answer's fields by name, written in the order of their names (as a
/// `serde_json::Map` writes its keys).
pub type Fields = BTreeMap<&'static str, Field>;

/// The fields of a changes answer that seldom change from run to run, as
/// JSON text, with what each was rendered from: a later answer whose
/// header, entry layout or list of computations is the same sends the
/// same text again instead of rendering it. On the transformer (a
/// 200-parameter entry, 455 computations) rendering these was most of the
/// service's work in a re-run with no change.
#[derive(Clone)]
pub struct Rendered {
    /// The header's length and hash ([`db::output::text_hash`]), as the
    /// computations' texts are compared.
    header_key: (usize, u64),
    header: Arc<RawValue>,
    entry_layout: Option<Arc<hlo::ComputationLayout>>,
    entry: Arc<RawValue>,
    /// The computations whose names `computations` lists, in order.
    names: Arc<[Part]>,
    computations: Arc<RawValue>,
}

/// `v` as JSON text.
fn render(v: &impl Serialize) -> Result<Arc<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(v).map(Arc::from)
}

impl Rendered {
    /// The fields of `out`, taken from `kept` where they are the same.
    fn of(out: &driver::Output, kept: Option<&Rendered>) -> Result<Rendered, serde_json::Error> {
        let header = out.parts().map_or("", |p| p.header.as_str());
        let entry_layout = out.parts().map(|p| Arc::clone(&p.entry_layout));
        // The very entry layout kept is that of the very output rendered
        // (each output has its own), so its header is the same too.
        let same_output = kept.is_some_and(|k| match (&k.entry_layout, &entry_layout) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        });
        let header_key = match kept {
            Some(k) if same_output => k.header_key,
            _ => (header.len(), db::output::text_hash(header)),
        };
        let header = match kept {
            Some(k) if k.header_key == header_key => Arc::clone(&k.header),
            _ => render(&header)?,
        };
        let entry = match (kept, &entry_layout) {
            (Some(k), Some(now)) if k.entry_layout.as_ref().is_some_and(|e| e == now) => {
                Arc::clone(&k.entry)
            }
            (Some(k), None) if k.entry_layout.is_none() => Arc::clone(&k.entry),
            _ => render(&entry_layout.as_deref().map(|e| {
                json!({
                    "parameters": e.parameters.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "result": e.result.to_string(),
                })
            }))?,
        };
        let names = parts(out);
        let computations = match kept {
            Some(k) if same_names(&k.names, &names) => Arc::clone(&k.computations),
            _ => render(&names.iter().map(|p| &*p.name).collect::<Vec<_>>())?,
        };
        Ok(Rendered {
            header_key,
            header,
            entry_layout,
            entry,
            names,
            computations,
        })
    }
}

/// What a session remembers of its last answer.
pub struct LastAnswer {
    /// The run's token.
    pub run: String,
    /// Its output computations' names and text hashes, in order (shared
    /// with the output it answered).
    computations: Arc<[Part]>,
    /// Which reports it carried, shared with the database that made them
    /// (made or not: a text answer never joins them): a later run whose
    /// reports are the very same value did not rebuild them, so their
    /// sections are unchanged.
    reports: driver::ReportsKey,
    /// The fields of the last changes answer, to send again where they
    /// are the same.
    rendered: Option<Rendered>,
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

/// The output's computations, in order, each with its name, text and
/// text hash (kept with each computation's output, so a run hashes only
/// what it printed again).
fn parts(out: &driver::Output) -> Arc<[Part]> {
    out.parts()
        .map_or_else(|| Arc::from(Vec::new()), |p| Arc::clone(&p.computations))
}

/// The record of `out`, answered as run `run`, keeping the fields a
/// changes answer `rendered` (or, for another answer, those the session
/// kept before: each is compared before it is sent again).
pub fn remember(run: String, out: &driver::Output, rendered: Option<Rendered>) -> LastAnswer {
    LastAnswer {
        run,
        computations: parts(out),
        reports: out.report.reports_key(),
        rendered,
    }
}

impl LastAnswer {
    /// The fields this answer's session kept rendered.
    pub fn into_rendered(self) -> Option<Rendered> {
        self.rendered
    }
}

/// Whether two outputs list the same computations in the same order.
fn same_names(a: &Arc<[Part]>, b: &Arc<[Part]>) -> bool {
    Arc::ptr_eq(a, b)
        || (a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.name == y.name))
}

/// Whether each computation of `now` has the text it had in `base`, in
/// order. Compared position by position while the two list the same
/// names in the same order (an edit of bodies), by name otherwise.
fn unchanged(base: &Arc<[Part]>, now: &Arc<[Part]>) -> Vec<bool> {
    if same_names(base, now) {
        return base
            .iter()
            .zip(now.iter())
            .map(|(b, n)| b.same(n) || b.hash() == n.hash())
            .collect();
    }
    let by_name: HashMap<&str, u64> = base.iter().map(|b| (&*b.name, b.hash())).collect();
    now.iter()
        .map(|n| by_name.get(&*n.name) == Some(&n.hash()))
        .collect()
}

/// The fields of a changes answer to `out`, run `run`: against `last` when
/// it is the run the client named as `since`, else complete. Also the
/// fields rendered for it, for the session to keep.
pub fn changes_fields(
    out: &driver::Output,
    run: &str,
    since: Option<&str>,
    last: Option<&LastAnswer>,
) -> Result<(Fields, Rendered), serde_json::Error> {
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
            changed.insert(p.name.to_string(), Value::String(p.text().to_string()));
        }
    }
    let mut removed: Vec<&str> = match base {
        Some(b) if same_names(&b.computations, &comps) => Vec::new(),
        Some(b) => {
            let now: HashSet<&str> = comps.iter().map(|p| &*p.name).collect();
            b.computations
                .iter()
                .map(|p| &*p.name)
                .filter(|n| !now.contains(n))
                .collect()
        }
        None => Vec::new(),
    };
    removed.sort_unstable();
    let rendered = Rendered::of(out, last.and_then(|l| l.rendered.as_ref()))?;
    let mut m = Fields::new();
    m.insert("response", json!("changes").into());
    m.insert("run", json!(run).into());
    m.insert("since", json!(base.map(|b| b.run.as_str())).into());
    m.insert("header", Field::Rendered(Arc::clone(&rendered.header)));
    m.insert(
        "entry_computation_layout",
        Field::Rendered(Arc::clone(&rendered.entry)),
    );
    m.insert(
        "computations",
        Field::Rendered(Arc::clone(&rendered.computations)),
    );
    m.insert("changed", Value::Object(changed).into());
    m.insert("removed", json!(removed).into());
    let key = out.report.reports_key();
    let sections = wire::ReportSections {
        assignment: !base.is_some_and(|b| b.reports.same_assignment(&key)),
        relayout: !base.is_some_and(|b| b.reports.same_relayout(&key)),
    };
    let mut unchanged = Vec::new();
    if !sections.assignment {
        unchanged.push("layout_assignment");
    }
    if !sections.relayout {
        unchanged.push("relayout");
    }
    m.insert(
        "report",
        wire::report_json_sections(&out.report, sections).into(),
    );
    m.insert("report_unchanged", json!(unchanged).into());
    Ok((m, rendered))
}
