//! Helpers shared by tests in several crates. Only tests depend on this
//! crate (as a dev-dependency), so it may panic: a test without its
//! testdata cannot run.

use std::path::PathBuf;

/// The workspace's `testdata/` directory.
pub fn testdata_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Every `.hlo` file under `testdata/`, at any depth, in path order (so
/// that tests visit them, and report the first failure, deterministically).
pub fn hlo_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![testdata_dir()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{} is not readable: {e}", dir.display()));
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
    files
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_bundled_modules_in_order() {
        let files = super::hlo_files();
        // The corpus copies alone are two files for each of 22 modules.
        assert!(files.len() >= 44, "only {} .hlo files under testdata/", files.len());
        assert!(files.windows(2).all(|w| w[0] < w[1]), "not in path order");
        assert!(files.iter().any(|f| f.ends_with("xla-cpu/large_transformer_24_f32/before_layout.hlo")));
    }
}
