//! `POST /v1/modules/{id}/layout-assignment?response=changes`: a client
//! that keeps the last answer and patches it with each changes answer
//! holds, after every run, the text a stateless run of the session's
//! module gives, byte for byte; and each answer lists exactly the
//! computations whose output text changed.

mod common;

use common::*;
use serde_json::{Value, json};
use server::Config;
use server::client::HeldOutput;

async fn run_changes(router: &axum::Router, since: Option<&str>) -> Value {
    let uri = match since {
        Some(s) => format!("/v1/modules/c1/layout-assignment?response=changes&since={s}"),
        None => "/v1/modules/c1/layout-assignment?response=changes".to_string(),
    };
    let a = call(router, request("POST", &uri, None, "")).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["response"], "changes");
    assert!(
        v.get("module").is_none(),
        "a changes answer has no whole module"
    );
    v
}

/// A report without its timings, which differ from run to run.
fn untimed(report: &Value) -> Value {
    let mut r = report.clone();
    if let Some(o) = r.as_object_mut() {
        o.remove("timings_us");
    }
    r
}

/// The held output is the stateless answer of `text`: its text, and its
/// report but for the timings.
fn assert_holds(held: &HeldOutput, text: &str) {
    let (want_text, want_report) = expected(text, "cpu");
    assert_eq!(held.text(), want_text);
    assert_eq!(untimed(held.report()), untimed(&want_report));
}

fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .or_else(|| {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default();
    n.sort();
    n
}

async fn put(router: &axum::Router, text: &str) {
    let a = call(
        router,
        request(
            "PUT",
            "/v1/modules/c1",
            Some("text/plain"),
            text.to_string(),
        ),
    )
    .await;
    assert!(
        a.status == 201 || a.status == 200,
        "{}",
        String::from_utf8_lossy(&a.body)
    );
}

#[tokio::test]
async fn changes_answers_patch_the_held_output_into_the_stateless_text() {
    let (router, _) = app(Config::default());
    let text = corpus("reductions_mixed");
    put(&router, &text).await;
    let mut held = HeldOutput::default();

    // The first answer is against no run: it lists every computation.
    let first = run_changes(&router, None).await;
    assert_eq!(first["since"], Value::Null);
    assert_eq!(first["removed"], json!([]));
    assert_eq!(names(&first["changed"]), names(&first["computations"]));
    assert!(names(&first["computations"]).len() >= 4);
    assert_eq!(first["report_unchanged"], json!([]));
    held.apply(&first).expect("applies");
    assert_holds(&held, &text);
    let entry = &first["entry_computation_layout"];
    assert!(
        first["header"]
            .as_str()
            .is_some_and(|h| h.contains(entry["result"].as_str().expect("result"))),
        "the header prints the entry layout {entry}"
    );

    // No change: nothing listed, against the run the client holds.
    let run = first["run"].as_str().expect("a run token").to_string();
    let same = run_changes(&router, Some(&run)).await;
    assert_eq!(same["since"], json!(run));
    assert_eq!(same["changed"], json!({}));
    assert_eq!(same["removed"], json!([]));
    // ...and the report's large sections are the client's already.
    assert_eq!(
        same["report_unchanged"],
        json!(["layout_assignment", "relayout"])
    );
    assert!(same["report"].get("layout_assignment").is_none());
    assert!(same["report"].get("relayout").is_none());
    held.apply(&same).expect("applies");
    assert_holds(&held, &text);

    // One body edit: only that computation's text changed.
    let (old, new) = edited_region(&text);
    let patch = json!({ "computations": { "region_0.1": new } });
    let a = call(
        &router,
        request(
            "PATCH",
            "/v1/modules/c1",
            Some("application/json"),
            patch.to_string(),
        ),
    )
    .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let edited = run_changes(&router, held.run.as_deref()).await;
    assert_eq!(names(&edited["changed"]), ["region_0.1"]);
    assert_eq!(edited["recomputed_computations"], json!(["region_0.1"]));
    held.apply(&edited).expect("applies");
    let edited_text = text.replace(&old, &new);
    assert_holds(&held, &edited_text);

    // Another module in the same session: the old computations that are
    // gone are listed as removed, the new ones as changed.
    let other = corpus("mlp_fwd");
    put(&router, &other).await;
    let swapped = run_changes(&router, held.run.as_deref()).await;
    assert_eq!(swapped["since"], json!(held.run));
    let before: Vec<String> = names(&edited["computations"]);
    let after: Vec<String> = names(&swapped["computations"]);
    let gone: Vec<String> = before
        .iter()
        .filter(|n| !after.contains(n))
        .cloned()
        .collect();
    assert!(!gone.is_empty());
    assert_eq!(names(&swapped["removed"]), gone);
    // Another module rebuilds both sections.
    assert_eq!(swapped["report_unchanged"], json!([]));
    held.apply(&swapped).expect("applies");
    assert_holds(&held, &other);

    // A run the session did not answer last: the answer is complete.
    let stale = run_changes(&router, Some(&run)).await;
    assert_eq!(stale["since"], Value::Null);
    assert_eq!(names(&stale["changed"]), names(&stale["computations"]));
    let mut fresh = HeldOutput::default();
    assert_eq!(stale["report_unchanged"], json!([]));
    fresh.apply(&stale).expect("applies");
    assert_holds(&fresh, &other);
    // ...and one against another run than the held one is refused.
    let mut wrong = held.clone();
    wrong.run = Some("not-this-run".into());
    let mut against = stale.clone();
    against["since"] = json!("some-other-run");
    assert!(wrong.apply(&against).is_err());
    assert_eq!(
        wrong.text(),
        held.text(),
        "a refused answer changes nothing"
    );
}

#[tokio::test]
async fn a_full_answer_is_a_base_for_changes() {
    let (router, _) = app(Config::default());
    let text = corpus("reductions_mixed");
    put(&router, &text).await;
    let a = call(
        &router,
        request("POST", "/v1/modules/c1/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200);
    let full = a.json();
    let run = full["run"].as_str().expect("a full answer names its run");
    let v = run_changes(&router, Some(run)).await;
    assert_eq!(v["since"], json!(run));
    assert_eq!(v["changed"], json!({}));
}

#[tokio::test]
async fn changes_are_refused_where_they_cannot_be_answered() {
    let (router, _) = app(Config::default());
    let text = corpus("mlp_fwd");
    // No session: no earlier run.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment?response=changes",
            Some("text/plain"),
            text.clone(),
        ),
    )
    .await;
    a.error(400, "invalid_request");
    put(&router, &text).await;
    // A text answer cannot carry changes.
    let mut req = request(
        "POST",
        "/v1/modules/c1/layout-assignment?response=changes",
        None,
        "",
    );
    req.headers_mut()
        .insert("accept", "text/plain".parse().expect("a header value"));
    call(&router, req).await.error(400, "invalid_request");
    // `since` alone means nothing.
    let a = call(
        &router,
        request("POST", "/v1/modules/c1/layout-assignment?since=x", None, ""),
    )
    .await;
    a.error(400, "invalid_request");
    // An unknown form.
    let a = call(
        &router,
        request(
            "POST",
            "/v1/modules/c1/layout-assignment?response=diff",
            None,
            "",
        ),
    )
    .await;
    a.error(400, "invalid_request");
}

/// A session whose module changes only in its header's entry layout: the
/// computations and their names stay, so a changes answer lists no
/// computation, but its header and entry layout are those of the new
/// layout, not the ones the session rendered for the answer before.
#[tokio::test]
async fn a_new_entry_layout_is_answered_anew() {
    let (router, _) = app(Config::default());
    let module = |order: &str| {
        format!(
            "HloModule layouts, entry_computation_layout={{(f32[4,8]{{{order}}})->f32[4,8]{{1,0}}}}\n\n\
             ENTRY %main (p: f32[4,8]) -> f32[4,8] {{\n  \
             %p = f32[4,8]{{{order}}} parameter(0)\n  \
             ROOT %n = f32[4,8]{{1,0}} negate(%p)\n}}\n"
        )
    };
    let (rows, columns) = (module("1,0"), module("0,1"));
    put(&router, &rows).await;
    let mut held = HeldOutput::default();
    let first = run_changes(&router, None).await;
    held.apply(&first).expect("applies");
    assert_holds(&held, &rows);
    let again = run_changes(&router, held.run.as_deref()).await;
    assert_eq!(again["header"], first["header"]);
    held.apply(&again).expect("applies");

    put(&router, &columns).await;
    let turned = run_changes(&router, held.run.as_deref()).await;
    assert_eq!(turned["since"], json!(held.run));
    assert_eq!(turned["removed"], json!([]));
    assert_eq!(turned["computations"], first["computations"]);
    assert_ne!(turned["header"], first["header"]);
    assert_eq!(
        turned["entry_computation_layout"]["parameters"],
        json!(["f32[4,8]{0,1}"])
    );
    held.apply(&turned).expect("applies");
    assert_holds(&held, &columns);

    // And back: the header the session rendered first is right again.
    put(&router, &rows).await;
    let back = run_changes(&router, held.run.as_deref()).await;
    assert_eq!(back["header"], first["header"]);
    assert_eq!(
        back["entry_computation_layout"],
        first["entry_computation_layout"]
    );
    held.apply(&back).expect("applies");
    assert_holds(&held, &rows);
}
