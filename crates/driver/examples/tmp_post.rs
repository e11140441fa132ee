use db::Database;
use std::sync::Arc;
use std::time::Instant;
#[global_allocator]
static ALLOCATOR: allocator::Allocator = allocator::Allocator;
fn main() {
    allocator::configure();
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1]).unwrap();
    let n: usize = args[2].parse().unwrap();
    let opts = driver::Options::new(Arc::new(target::load_builtin("cpu").unwrap()));
    let (mut sl, mut post) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let s = Instant::now();
        drop(driver::run(&text, "x", &opts).unwrap());
        sl.push(s.elapsed().as_secs_f64() * 1e3);
        let mut db = Database::default();
        db.load(&text, "x", opts.target.clone()).unwrap();
        driver::check_loaded_input(&db).unwrap();
        let s = Instant::now();
        let out = driver::run_loaded(&mut db, &opts).unwrap();
        post.push(s.elapsed().as_secs_f64() * 1e3);
        if std::env::var_os("SHOW").is_some() {
            for t in &out.report.timings {
                eprint!("{:?} {:.2}  ", t.step, t.duration.as_secs_f64() * 1e3);
            }
            eprintln!();
        }
        drop(out);
        drop(db);
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (a, b) = (med(sl), med(post));
    println!(
        "stateless {a:.2} ms, first run after check {b:.2} ms ({:.2}x)",
        b / a
    );
}
