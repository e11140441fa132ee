//! The golden tests: one test per `testdata/**/*.hlo` file (and per
//! `*.test` file, for commands that read no module). Each file
//! carries `// RUN:` lines (`%s` is the file, `tessera` is this crate's
//! binary, `FileCheck` is Tessera's own) and its `// CHECK:` lines.
//!
//! Set `TESSERA_LLVM_FILECHECK=/path/to/FileCheck` to also run every
//! FileCheck stage through LLVM's binary and require the same verdict
//! (`cargo xtask golden --llvm` does this when the binary exists).

use std::path::{Path, PathBuf};

fn check_hlo(path: &Path) -> datatest_stable::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(path)?;
    if filecheck::lit::run_lines(&text).is_empty() {
        return Err(format!(
            "{} has no RUN line; every golden file needs one",
            path.display()
        )
        .into());
    }
    let cfg = filecheck::lit::RunConfig {
        tessera_bin: PathBuf::from(env!("CARGO_BIN_EXE_tessera")),
        extra_tools: Vec::new(),
        llvm_filecheck: std::env::var_os("TESSERA_LLVM_FILECHECK").map(PathBuf::from),
        cwd: root,
    };
    filecheck::lit::run_file(path, &cfg).map_err(|failure| {
        // The harness prints errors with `{:?}`; print the readable report
        // here and return a short message.
        eprintln!("{failure}");
        format!("{}: a RUN line failed", path.display()).into()
    })
}

datatest_stable::harness! {
    { test = check_hlo, root = "../../testdata", pattern = r"\.(hlo|test)$" },
}
