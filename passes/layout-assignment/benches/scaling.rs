//! Pass time against module size: generated modules of 1e3 to 1e6
//! instructions, built from a repeated block (transpose, reshape,
//! elementwise ops, a broadcast, a reduction and a dot), so that growth can
//! be read off directly. `cargo xtask bench` runs this and records it.

use divan::Bencher;

fn main() {
    divan::main();
}

/// One block is 12 instructions; the module has `blocks` of them chained.
fn generated_module(instructions: usize) -> String {
    let blocks = instructions.div_ceil(12).max(1);
    let mut s = String::with_capacity(blocks * 700);
    s.push_str("HloModule scaling, entry_computation_layout={(f32[64,128]{1,0}, f32[128,128]{1,0}, f32[128]{0})->f32[64,128]{1,0}}\n\n");
    s.push_str("add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n");
    s.push_str("ENTRY main {\n  x0 = f32[64,128] parameter(0)\n  w = f32[128,128] parameter(1)\n  bias = f32[128] parameter(2)\n  zero = f32[] constant(0)\n");
    for k in 0..blocks {
        let x = format!("x{k}");
        let n = format!("x{}", k + 1);
        s.push_str(&format!(
            "  t{k} = f32[128,64] transpose({x}), dimensions={{1,0}}\n\
             \x20 r{k} = f32[64,128] reshape(t{k})\n\
             \x20 e{k} = f32[64,128] exponential(r{k})\n\
             \x20 b{k} = f32[64,128] broadcast(bias), dimensions={{1}}\n\
             \x20 a{k} = f32[64,128] add(e{k}, b{k})\n\
             \x20 m{k} = f32[64,128] multiply(a{k}, {x})\n\
             \x20 s{k} = f32[64] reduce(m{k}, zero), dimensions={{1}}, to_apply=add\n\
             \x20 sb{k} = f32[64,128] broadcast(s{k}), dimensions={{0}}\n\
             \x20 d{k} = f32[64,128] dot(m{k}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n\
             \x20 q{k} = f32[64,128] subtract(d{k}, sb{k})\n\
             \x20 h{k} = f32[64,128] tanh(q{k})\n\
             \x20 {n} = f32[64,128] maximum(h{k}, {x})\n"
        ));
    }
    s.push_str(&format!("  ROOT out = f32[64,128] negate(x{blocks})\n}}\n"));
    s
}

#[divan::bench(args = [1_000, 3_000, 10_000, 30_000, 100_000, 1_000_000], sample_count = 5, sample_size = 1)]
fn layout_assignment_cpu(bencher: Bencher<'_, '_>, instructions: usize) {
    let module = hlo::parse_module(&generated_module(instructions), "scaling.hlo").expect("generated module parses");
    let target = target::load_builtin("cpu").expect("cpu target");
    bencher.with_inputs(|| module.clone()).bench_local_values(|mut m| layout_assignment::run(&mut m, &target).expect("assigns"));
}

#[divan::bench(args = [1_000, 3_000, 10_000, 30_000, 100_000, 1_000_000], sample_count = 5, sample_size = 1)]
fn layout_assignment_tpu(bencher: Bencher<'_, '_>, instructions: usize) {
    let module = hlo::parse_module(&generated_module(instructions), "scaling.hlo").expect("generated module parses");
    let target = target::load_builtin("tpu").expect("tpu target");
    bencher.with_inputs(|| module.clone()).bench_local_values(|mut m| layout_assignment::run(&mut m, &target).expect("assigns"));
}
