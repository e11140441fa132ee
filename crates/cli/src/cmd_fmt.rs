//! `tessera fmt`: prints HLO files in canonical XLA text.
//!
//! Comments are dropped, so `// RUN:` lines of a golden test vanish from
//! the output; `--check` ignores the leading `//` lines of a file for the
//! same reason.

use std::io::Write;
use std::process::ExitCode;

/// Arguments of `tessera fmt`.
#[derive(clap::Args)]
pub struct Args {
    /// HLO files to format; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Print nothing but the names of files that are not canonical, and
    /// exit with status 1 if there is any.
    #[arg(long)]
    check: bool,
}

/// Runs the command.
pub fn run(args: Args) -> ExitCode {
    crate::common::on_std_streams(|out, err| run_with(&args, out, err))
}

/// The command over explicit output streams; returns the exit status.
fn run_with(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let mut failed = false;
    let mut text = String::new();
    for file in &args.files {
        let Some((label, module, bytes)) = load(file, err) else {
            failed = true;
            continue;
        };
        text.clear();
        hlo::write_module(&mut text, &module);
        if args.check {
            let original = String::from_utf8_lossy(&bytes);
            if hlo::strip_leading_comment_lines(&original) != text {
                failed = true;
                // A closed pipe (`tessera fmt x | head`) is not worth a panic.
                if writeln!(out, "{label}").is_err() {
                    return 1;
                }
            }
        } else if out.write_all(text.as_bytes()).is_err() {
            return 1;
        }
    }
    if out.flush().is_err() {
        return 1;
    }
    u8::from(failed)
}

/// Reads and parses one input, reporting failures on `err`. Returns the
/// name to show in messages, the module and the bytes read.
pub(crate) fn load(file: &str, err: &mut dyn Write) -> Option<(String, hlo::Module, Vec<u8>)> {
    let (label, bytes) = match crate::common::read_input(file) {
        Ok(x) => x,
        Err(message) => {
            let _ = writeln!(err, "{message}");
            return None;
        }
    };
    match hlo::parse_module_bytes(&bytes, &label) {
        Ok(m) => Some((label, m, bytes)),
        Err(e) => {
            let _ = writeln!(err, "{e}");
            None
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A file under the temporary directory, removed on drop.
    pub(crate) struct TempFile(pub std::path::PathBuf);

    impl TempFile {
        pub(crate) fn new(name: &str, bytes: &[u8]) -> TempFile {
            let dir = std::env::temp_dir().join(format!("tessera-cli-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            TempFile(path)
        }

        pub(crate) fn name(&self) -> String {
            self.0.display().to_string()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    pub(crate) const CANONICAL: &str = "HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n\
        ENTRY %main (p: f32[2]) -> f32[2] {\n  %p = f32[2]{0} parameter(0)\n  ROOT %n = f32[2]{0} negate(%p)\n}\n\n";

    fn fmt(files: &[&str], check: bool) -> (u8, String, String) {
        let args = Args {
            files: files.iter().map(|s| s.to_string()).collect(),
            check,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_with(&args, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn prints_canonical_text_and_drops_comments() {
        let messy = "// RUN: tessera fmt %s\nHloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\
            ENTRY main (p: f32[2]) -> f32[2] {\n p = f32[2]{0} parameter(0) /* c */\n ROOT n = f32[2]{0} negate(f32[2]{0} p)\n}\n";
        let f = TempFile::new("messy.hlo", messy.as_bytes());
        assert_eq!(
            fmt(&[&f.name()], false),
            (0, CANONICAL.to_string(), String::new())
        );
    }

    #[test]
    fn check_names_files_that_are_not_canonical() {
        let good = TempFile::new("good.hlo", CANONICAL.as_bytes());
        let with_run = TempFile::new("run.hlo", format!("// RUN: x\n{CANONICAL}").as_bytes());
        let bad = TempFile::new("bad.hlo", CANONICAL.replace("  %p", "    %p").as_bytes());
        assert_eq!(
            fmt(&[&good.name(), &with_run.name()], true),
            (0, String::new(), String::new())
        );
        assert_eq!(
            fmt(&[&good.name(), &bad.name()], true),
            (1, format!("{}\n", bad.name()), String::new())
        );
    }

    #[test]
    fn bad_input_and_missing_files_exit_1_with_a_located_error() {
        let bad = TempFile::new(
            "err.hlo",
            b"HloModule m\nENTRY %main {\n  %x f32[] constant(0)\n}\n",
        );
        let (code, out, err) = fmt(&[&bad.name()], false);
        assert_eq!((code, out.as_str()), (1, ""));
        assert!(
            err.starts_with(&format!(
                "{}:3:6: error: expected '=' after instruction name %x",
                bad.name()
            )),
            "{err}"
        );
        let (code, _, err) = fmt(&["/nonexistent/x.hlo"], false);
        assert_eq!(code, 1);
        assert!(
            err.starts_with("/nonexistent/x.hlo: error: cannot read the file"),
            "{err}"
        );
        let not_utf8 = TempFile::new("bytes.hlo", b"HloModule m\xff\n");
        let (code, _, err) = fmt(&[&not_utf8.name()], false);
        assert_eq!(code, 1);
        assert!(err.contains(":1:12: error: invalid UTF-8"), "{err}");
    }
}
