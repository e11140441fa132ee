//! Helpers shared by tests in several crates (and by xtask's sweeps over
//! testdata). Tests depend on this crate as a dev-dependency, so it may
//! panic: a test without its testdata cannot run.

use std::io;
use std::path::{Path, PathBuf};

pub mod scaling;

/// The workspace's `testdata/` directory.
pub fn testdata_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every `.hlo` file under `testdata/`, at any depth, in path order (so
/// that tests visit them, and report the first failure, deterministically).
pub fn hlo_files() -> Vec<PathBuf> {
    hlo_files_under(&testdata_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// Every `.hlo` file under `dir`, at any depth, in path order. A directory
/// that cannot be read is an error naming it, not a silent gap.
pub fn hlo_files_under(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            io::Error::new(e.kind(), format!("{} is not readable: {e}", dir.display()))
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "hlo") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// How a generated deep module nests its computations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nesting {
    /// Each computation `call`s the one below it.
    Call,
    /// Each computation runs a `while` whose body is the one below it.
    While,
    /// Each computation runs a `conditional` whose true branch is the one
    /// below it (the false branch is the innermost computation).
    Conditional,
    /// Each computation is a `fusion` of the one below it.
    Fusion,
}

/// A module of `depth` computations nested as `nesting` says, below an
/// entry computation that calls the outermost one: `%c0` negates an
/// `f32[4,8]`, and `%c(i)` reaches `%c(i-1)`. Deep modules like these
/// must not take a stack frame per level anywhere in Tessera.
pub fn deep_module(depth: usize, nesting: Nesting) -> String {
    use std::fmt::Write as _;
    const S: &str = "f32[4,8]";
    let mut out = String::with_capacity(depth * 140 + 400);
    let _ = writeln!(out, "HloModule deep_{nesting:?}\n");
    if nesting == Nesting::While {
        let _ = writeln!(
            out,
            "%cond (s: {S}) -> pred[] {{\n  %s = {S} parameter(0)\n  ROOT %f = pred[] constant(false)\n}}\n"
        );
    }
    let _ = writeln!(
        out,
        "%c0 (x0: {S}) -> {S} {{\n  %x0 = {S} parameter(0)\n  ROOT %r0 = {S} negate(%x0)\n}}\n"
    );
    let reach = |out: &mut String, i: usize, operand: &str, callee: usize| {
        // The root of `%c{i}`, which reaches `%c{callee}`.
        let root = match nesting {
            Nesting::Call => format!("call({operand}), to_apply=%c{callee}"),
            Nesting::While => format!("while({operand}), condition=%cond, body=%c{callee}"),
            Nesting::Fusion => format!("fusion({operand}), kind=kLoop, calls=%c{callee}"),
            Nesting::Conditional => {
                let _ = writeln!(out, "  %k{i} = pred[] constant(true)");
                format!(
                    "conditional(%k{i}, {operand}, {operand}), true_computation=%c{callee}, false_computation=%c0"
                )
            }
        };
        let _ = writeln!(out, "  ROOT %r{i} = {S} {root}");
    };
    for i in 1..=depth {
        let _ = writeln!(
            out,
            "%c{i} (x{i}: {S}) -> {S} {{\n  %x{i} = {S} parameter(0)"
        );
        reach(&mut out, i, &format!("%x{i}"), i - 1);
        let _ = writeln!(out, "}}\n");
    }
    let _ = writeln!(
        out,
        "ENTRY %main (p: {S}) -> {S} {{\n  %p = {S} parameter(0)"
    );
    let _ = writeln!(out, "  ROOT %r = {S} call(%p), to_apply=%c{depth}\n}}");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_bundled_modules_in_order() {
        let files = super::hlo_files();
        // The corpus copies alone are two files for each of 22 modules.
        assert!(
            files.len() >= 44,
            "only {} .hlo files under testdata/",
            files.len()
        );
        assert!(files.windows(2).all(|w| w[0] < w[1]), "not in path order");
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("xla-cpu/large_transformer_24_f32/before_layout.hlo"))
        );
    }

    #[test]
    fn deep_modules_nest_as_asked() {
        use super::{Nesting, deep_module};
        let text = deep_module(3, Nesting::While);
        assert!(
            text.contains("ROOT %r3 = f32[4,8] while(%x3), condition=%cond, body=%c2"),
            "{text}"
        );
        assert!(
            text.contains("ROOT %r = f32[4,8] call(%p), to_apply=%c3"),
            "{text}"
        );
        let text = deep_module(2, Nesting::Conditional);
        assert!(
            text.contains("true_computation=%c1, false_computation=%c0"),
            "{text}"
        );
        assert_eq!(
            deep_module(5, Nesting::Call).matches("to_apply=").count(),
            6
        );
    }
}
