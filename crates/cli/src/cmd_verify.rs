//! `tessera verify`: checks that HLO modules are well formed.

use std::io::Write;
use std::process::ExitCode;

use crate::cmd_fmt::load;

/// Arguments of `tessera verify`.
#[derive(clap::Args)]
pub struct Args {
    /// HLO files to check; `-` reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
    /// Also check layouts: every value has one, layout-preserving ops
    /// agree with their operands, calls and loops agree with their
    /// computations, the entry layout holds, and every bitcast is proven.
    #[arg(long)]
    layouts: bool,
    /// With --layouts, also check a target's operand requirements
    /// (`cpu`, `gpu`, `tpu` or a target YAML file).
    #[arg(long, requires = "layouts")]
    target: Option<String>,
}

/// Runs the command: exit status 0 when every module is valid, 1 after
/// listing every problem otherwise.
pub fn run(args: Args) -> ExitCode {
    ExitCode::from(run_with(&args, &mut std::io::stderr().lock()))
}

/// The command over an explicit message stream; returns the exit status.
fn run_with(args: &Args, err: &mut dyn Write) -> u8 {
    let target = match args.target.as_deref().map(wire::resolve_target).transpose() {
        Ok(t) => t,
        Err(e) => {
            let located = e.is_located();
            let _ = writeln!(err, "{}", crate::common::error_line(e, located));
            return 1;
        }
    };
    let mut failed = false;
    for file in &args.files {
        let Some((label, module, bytes)) = load(file, err) else {
            failed = true;
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut errors: Vec<String> = hlo::verify_module(&module)
            .iter()
            .map(|e| e.located(&text, &label))
            .collect();
        if args.layouts && errors.is_empty() {
            let problems = layout_assignment::check_layouts(&module, target.as_deref());
            errors.extend(problems.iter().map(|e| e.located(&text, &label)));
        }
        if errors.is_empty() {
            let _ = writeln!(
                err,
                "{label}: ok ({} computations, {} instructions)",
                module.computations.len(),
                module.instruction_count()
            );
        } else {
            for e in &errors {
                let _ = writeln!(err, "{e}");
            }
            let n = errors.len();
            let _ = writeln!(err, "{label}: {n} problem{}", if n == 1 { "" } else { "s" });
            failed = true;
        }
    }
    u8::from(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd_fmt::tests::{CANONICAL, TempFile};

    fn verify(files: &[&str]) -> (u8, String) {
        let args = Args {
            files: files.iter().map(|s| s.to_string()).collect(),
            layouts: false,
            target: None,
        };
        let mut err = Vec::new();
        let code = run_with(&args, &mut err);
        (code, String::from_utf8(err).unwrap())
    }

    #[test]
    fn valid_module_exits_0() {
        let f = TempFile::new("valid.hlo", CANONICAL.as_bytes());
        assert_eq!(
            verify(&[&f.name()]),
            (
                0,
                format!("{}: ok (1 computations, 2 instructions)\n", f.name())
            )
        );
    }

    #[test]
    fn every_problem_is_listed_and_exits_1() {
        let text = "HloModule m\nENTRY %main {\n  %p = f32[2]{0} parameter(0)\n  %a = f32[3]{0} negate(%p)\n  ROOT %t = f32[] get-tuple-element(%p), index=0\n}\n";
        let f = TempFile::new("invalid.hlo", text.as_bytes());
        let (code, err) = verify(&[&f.name()]);
        assert_eq!(code, 1);
        let n = f.name();
        assert_eq!(
            err,
            format!(
                "{n}:4:3: error: computation %main, instruction %a: the operand is f32[2] but the result is f32[3]: the dimensions differ\n\
                 {n}:5:8: error: computation %main, instruction %t: the operand must be a tuple, not f32[2]\n\
                 {n}: 2 problems\n"
            )
        );
    }

    #[test]
    fn parse_errors_exit_1() {
        let f = TempFile::new("unparsable.hlo", b"HloModule m\n");
        let (code, err) = verify(&[&f.name()]);
        assert_eq!(code, 1);
        assert!(
            err.starts_with(&format!("{}:2:1: error: expected a computation", f.name())),
            "{err}"
        );
    }
}
