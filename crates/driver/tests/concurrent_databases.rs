//! Databases used at once from several threads: each run gives the
//! stateless answer. Salsa refuses a second database handle on a thread in
//! the middle of a query; when the runs' per-computation steps were jobs on
//! rayon's pool, a pool thread waiting inside one database's query for work
//! it had split could start another database's job and panic ("cannot
//! change database mid-query"), as two sessions of the service running at
//! once did. `large_transformer_24_f32` has one computation large enough
//! for the steps to split it on rayon's pool.

use std::sync::Arc;

use db::Database;

#[test]
fn databases_run_side_by_side_without_interfering() {
    let path =
        test_support::testdata_dir().join("xla-cpu/large_transformer_24_f32/before_layout.hlo");
    let text = std::fs::read_to_string(&path).expect("bundled module");
    let opts = driver::Options::new(Arc::new(target::load_builtin("cpu").expect("cpu target")));
    let want = driver::run(&text, "m.hlo", &opts)
        .expect("runs")
        .text()
        .to_string();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let mut db = Database::default();
                    for _ in 0..2 {
                        let out = driver::run_in(&mut db, &text, "m.hlo", &opts);
                        assert!(out.is_ok_and(|o| o.text() == want), "a run differs");
                    }
                })
            })
            .collect();
        for r in runs {
            r.join().expect("no run panics");
        }
    });
}
