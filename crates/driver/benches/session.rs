//! The pipeline in a session on the largest bundled corpus module
//! (`large_transformer_24_f32`, CPU target, the verifiers on, as the
//! service runs it): a stateless run, a session's first run (on a fresh
//! database, and after the service's check of a new session, which parsed
//! and checked the module in it), a re-run with no change, and a re-run
//! after editing one reduction region's body (its root alternates between
//! `add` and `maximum`: the same signature, another body). Every re-run
//! gives the text a stateless run of the same module gives
//! (`crates/driver/tests/session_equivalence.rs`,
//! `crates/driver/tests/incremental_pipeline.rs`).
//! `cargo xtask bench` runs this and records it.

use std::path::Path;
use std::sync::Arc;

use db::Database;
use divan::Bencher;

#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;

fn main() {
    allocator::configure(allocator::Lifetime::Service);
    divan::main();
}

const NAME: &str = "large_transformer_24_f32";

fn text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/xla-cpu")
        .join(NAME)
        .join("before_layout.hlo");
    std::fs::read_to_string(path).expect("bundled corpus module")
}

fn options() -> driver::Options {
    driver::Options::new(Arc::new(target::load_builtin("cpu").expect("cpu target")))
}

#[divan::bench(sample_count = 20)]
fn stateless(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    bencher.bench_local(|| driver::run(&text, NAME, &opts).expect("runs"));
}

#[divan::bench(sample_count = 20)]
fn session_first_run(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    bencher
        .with_inputs(Database::default)
        .bench_local_values(|mut db| {
            (
                driver::run_in(&mut db, &text, NAME, &opts).expect("runs"),
                db,
            )
        });
}

/// Loads `text` in `db` and checks it, as the service's `PUT` of a new
/// session does (parsing every computation).
fn load_and_check(db: &mut Database, text: &str, opts: &driver::Options) {
    db.load(text, NAME, opts.target.clone()).expect("loads");
    driver::check_loaded_input(db).expect("a well-formed module");
}

/// What the service's `PUT` of a new session does in its database.
#[divan::bench(sample_count = 20)]
fn session_load_and_check(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    bencher
        .with_inputs(Database::default)
        .bench_local_values(|mut db| {
            load_and_check(&mut db, &text, &opts);
            db
        });
}

/// A session's first run after the service's `PUT` loaded and checked the
/// module in its database (untimed): it neither parses nor checks again.
#[divan::bench(sample_count = 20)]
fn session_first_run_after_check(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    bencher
        .with_inputs(|| {
            let mut db = Database::default();
            load_and_check(&mut db, &text, &opts);
            db
        })
        .bench_local_values(|mut db| (driver::run_loaded(&mut db, &opts).expect("runs"), db));
}

#[divan::bench(sample_count = 20)]
fn session_no_change(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    let mut db = Database::default();
    driver::run_in(&mut db, &text, NAME, &opts).expect("runs");
    bencher.bench_local(|| driver::run_in(&mut db, &text, NAME, &opts).expect("runs"));
}

#[divan::bench(sample_count = 20)]
fn session_one_body_edit(bencher: Bencher<'_, '_>) {
    let (text, opts) = (text(), options());
    let outline = hlo::outline(&text, NAME).expect("outlines");
    let region = outline
        .computations
        .iter()
        .find(|c| {
            c.name.starts_with("region_")
                && c.span.text(&text).contains("ROOT")
                && c.span.text(&text).contains(" add(")
        })
        .expect("a reduction region");
    let before = region.span.text(&text).to_string();
    let after = before.replacen(" add(", " maximum(", 1);
    let mut db = Database::default();
    driver::run_in(&mut db, &text, NAME, &opts).expect("runs");
    let mut edits = 0usize;
    bencher.bench_local(|| {
        edits += 1;
        let body = if edits % 2 == 1 { &after } else { &before };
        db.replace_computations(&[(region.name.clone(), body.clone())])
            .expect("replaces");
        driver::run_loaded(&mut db, &opts).expect("runs")
    });
}
