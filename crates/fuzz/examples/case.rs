//! Prints case INDEX of seed SEED and what each target makes of it:
//! `cargo run -p fuzz --example case -- SEED INDEX`.

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (seed, index) = (
        args.first().copied().unwrap_or(0),
        args.get(1).copied().unwrap_or(0),
    );
    let (text, expand) = fuzz::case(seed, index);
    println!("{text}");
    for (t, name) in fuzz::TARGETS.iter().enumerate() {
        eprintln!(
            "{name} (expand_relayouts: {expand}): {:?}",
            fuzz::check(&text, t, expand)
        );
    }
}
