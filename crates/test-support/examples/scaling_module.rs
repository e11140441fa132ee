//! Prints a generated scaling module, for profiling a step by hand:
//! `cargo run -p test-support --example scaling_module -- SHAPE INSTRUCTIONS > m.hlo`
//! (shapes: chain, shared, wide_tuple, many_computations, many_copies,
//! copied_result).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let shape = test_support::scaling::Shape::ALL
        .into_iter()
        .find(|s| args.get(1).is_some_and(|a| a == s.name()));
    let n = args.get(2).and_then(|a| a.parse::<usize>().ok());
    let (Some(shape), Some(n)) = (shape, n) else {
        eprintln!(
            "usage: scaling_module chain|shared|wide_tuple|many_computations|many_copies|copied_result INSTRUCTIONS"
        );
        return std::process::ExitCode::FAILURE;
    };
    print!("{}", shape.module(n));
    std::process::ExitCode::SUCCESS
}
