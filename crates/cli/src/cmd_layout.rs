//! `tessera layout`: the layout algebra from the command line.
//!
//! ```text
//! tessera layout index SHAPE IDX... [--reverse LINEAR...]
//! tessera layout explain SHAPE [--json]
//! tessera layout bitcast FROM TO [--transpose D,D,... | --view]
//! tessera layout plan FROM TO
//! tessera layout draw SHAPE -o FILE.svg
//! ```
//!
//! Results go to stdout; invalid input prints `error: ...` (with a caret
//! under the offending column of a shape) and exits with status 1.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use shape::Slot;
use wire::layout::{dims, list, parse};

/// Arguments of `tessera layout`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Print the linear slot of each multi-index (`2,3`), one per line; with
    /// --reverse, the multi-index (or `padding`) held by each linear slot.
    Index {
        /// A shape with a layout, e.g. `f32[3,5]{1,0:T(2,2)}`.
        shape: String,
        /// Multi-indices, each a comma-separated list such as 2,3.
        indices: Vec<String>,
        /// Linear slots to map back to multi-indices.
        #[arg(long, num_args = 1..)]
        reverse: Vec<String>,
    },
    /// Show the physical expansion: padding, reshape, transpose per tile
    /// level, tile grid and storage size.
    Explain {
        /// A shape with a layout.
        shape: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Decide whether FROM → TO moves no byte. Prints `bitcast` or `copy`,
    /// then why.
    Bitcast {
        /// The operand shape.
        from: String,
        /// The result shape.
        to: String,
        /// Treat it as a transpose with these HLO dimensions (D,D,...).
        #[arg(long, conflicts_with = "view")]
        transpose: Option<String>,
        /// Treat it as a physical view: one side is the other's buffer as
        /// the row-major array of its physical dimensions.
        #[arg(long)]
        view: bool,
    },
    /// Print the relayout plan from FROM to TO as HLO instructions.
    Plan {
        /// The operand shape.
        from: String,
        /// The result shape (same element type and dimensions).
        to: String,
    },
    /// Draw the array, its tiles, padding and memory order as SVG.
    Draw {
        /// A shape with a layout.
        shape: String,
        /// The SVG file to write.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
    },
}

/// Runs the command.
pub fn run(args: Args) -> ExitCode {
    let result = match args.command {
        Command::Index {
            shape,
            indices,
            reverse,
        } => index(&shape, &indices, &reverse),
        Command::Explain { shape, json } => explain(&shape, json),
        Command::Bitcast {
            from,
            to,
            transpose,
            view,
        } => bitcast(&from, &to, transpose.as_deref(), view),
        Command::Plan { from, to } => plan(&from, &to),
        Command::Draw { shape, output } => draw(&shape, &output),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => crate::common::fail(message),
    }
}

fn parse_list<T: std::str::FromStr>(text: &str, what: &str) -> Result<Vec<T>, String> {
    let t = text.trim().trim_start_matches('(').trim_end_matches(')');
    if t.trim().is_empty() {
        return Ok(Vec::new());
    }
    t.split(',')
        .map(|p| p.trim().parse::<T>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            format!(
                "{what} '{text}' is not a comma-separated list of non-negative integers (e.g. 2,3)"
            )
        })
}

fn index(text: &str, indices: &[String], reverse: &[String]) -> Result<String, String> {
    let (_, e) = parse(text, "SHAPE")?;
    if indices.is_empty() && reverse.is_empty() {
        return Err("give at least one index (e.g. 2,3) or --reverse LINEAR".into());
    }
    let mut out = String::new();
    for idx in indices {
        let v: Vec<i64> = parse_list(idx, "index")?;
        let l = e
            .linear_index(&v)
            .map_err(|err| format!("index {idx}: {err}"))?;
        let _ = writeln!(out, "{l}");
    }
    for lin in reverse {
        let l: u64 = lin
            .trim()
            .parse()
            .map_err(|_| format!("linear index '{lin}' is not a non-negative integer"))?;
        match e.multi_index(l).map_err(|err| err.to_string())? {
            Slot::Element(i) => {
                let _ = writeln!(out, "{}", list(&i));
            }
            Slot::Padding => out.push_str("padding\n"),
        }
    }
    Ok(out)
}

fn explain(text: &str, json: bool) -> Result<String, String> {
    let (s, e) = parse(text, "SHAPE")?;
    let pad = e.padding_slots();
    let frac = if e.storage_slots == 0 {
        0.0
    } else {
        pad as f64 / e.storage_slots as f64 * 100.0
    };
    if json {
        let v = wire::layout::explain_json(text)?;
        return serde_json::to_string_pretty(&v)
            .map(|t| t + "\n")
            .map_err(|err| err.to_string());
    }
    let mut o = String::new();
    let _ = writeln!(o, "shape           {s}");
    let _ = writeln!(
        o,
        "logical dims    {} ({} elements)",
        dims(&e.logical_dims),
        e.element_count
    );
    if e.padded_dims != e.logical_dims {
        let _ = writeln!(o, "legacy padding  pad to {}", dims(&e.padded_dims));
    }
    let _ = writeln!(
        o,
        "physical order  dims {} (major to minor) -> {}",
        dims(
            &e.physical_order
                .iter()
                .map(|&d| d as i64)
                .collect::<Vec<_>>()
        ),
        dims(&e.untiled_dims)
    );
    for (i, l) in e.levels.iter().enumerate() {
        let _ = writeln!(o, "tile level {i}    T{}", l.tile);
        // Each step's output is the next one's input.
        let combined = dims(&l.combined_dims);
        let padded = dims(&l.padded_dims);
        if l.combined_dims != l.input_dims {
            let input = dims(&l.input_dims);
            let _ = writeln!(o, "  combine '*'   {input} -> {combined}");
        }
        let _ = writeln!(o, "  pad           {combined} -> {padded}");
        let split = dims(&l.split_dims);
        let _ = writeln!(o, "  reshape       {padded} -> {split} (a bitcast)");
        let _ = writeln!(
            o,
            "  transpose     dimensions={{{}}} -> {}",
            list(&l.permutation),
            dims(&l.output_dims)
        );
        let vol: i64 = l.tile_sizes.iter().product();
        let _ = writeln!(
            o,
            "  tile grid     {} tiles of {} ({vol} slots each)",
            dims(l.tile_counts()),
            dims(&l.tile_sizes)
        );
    }
    let _ = writeln!(o, "physical dims   {} (row-major)", dims(&e.physical_dims));
    if e.storage_slots != e.element_slots {
        let _ = writeln!(
            o,
            "tail padding    {} -> {} slots",
            e.element_slots, e.storage_slots
        );
    }
    let _ = writeln!(
        o,
        "storage         {} slots: {} elements + {pad} padding ({frac:.1}%), {} bits each = {} bytes",
        e.storage_slots, e.element_count, e.element_bits, e.storage_bytes
    );
    Ok(o)
}

fn bitcast(from: &str, to: &str, transpose: Option<&str>, view: bool) -> Result<String, String> {
    let (f, _) = parse(from, "FROM")?;
    let (t, _) = parse(to, "TO")?;
    let verdict = match transpose {
        Some(d) => {
            let dims: Vec<usize> = parse_list(d, "--transpose")?;
            shape::transpose_is_bitcast(&f, &t, &dims)
        }
        None if view => shape::physical_view_is_bitcast(&f, &t),
        None => shape::is_bitcast(&f, &t),
    }
    .map_err(|e| e.to_string())?;
    Ok(format!("{verdict}\n"))
}

fn plan(from: &str, to: &str) -> Result<String, String> {
    let (f, _) = parse(from, "FROM")?;
    let (t, _) = parse(to, "TO")?;
    let p = shape::relayout_plan(&f, &t).map_err(|e| e.to_string())?;
    Ok(format!("{p}\n"))
}

fn draw(text: &str, output: &std::path::Path) -> Result<String, String> {
    let svg = wire::layout::draw_svg(text)?;
    std::fs::write(output, svg)
        .map_err(|err| format!("cannot write {}: {err}", output.display()))?;
    Ok(format!("wrote {}\n", output.display()))
}
