//! The YAML wire format of target files, and its conversion to
//! [`TargetSpec`].
//!
//! Every name in a target file (an opcode, an element type, a requirement)
//! is checked while deserializing, so that an error carries the line and
//! column of the offending key, not just its text.

use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer};

use hlo::Opcode;
use shape::{PrimitiveType, Tile};

use crate::{
    Condition, CostWeights, DimOrder, OperandRequirements, ReducePolicy, Requirement, Rule,
    TargetSpec, TileCandidate, TileFit, TilingPolicy, TilingRule,
};

/// The targets shipped with Tessera, by name.
const BUILTIN: &[(&str, &str)] = &[
    ("cpu", include_str!("../../../targets/cpu.yaml")),
    ("gpu", include_str!("../../../targets/gpu.yaml")),
    ("tpu", include_str!("../../../targets/tpu.yaml")),
    ("tpu-v5e", include_str!("../../../targets/tpu-v5e.yaml")),
    ("tpu-v3", include_str!("../../../targets/tpu-v3.yaml")),
];

/// The names of the built-in targets.
pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|&(n, _)| n)
}

/// Loads a built-in target by name.
pub fn load_builtin(name: &str) -> Result<TargetSpec, LoadError> {
    let text = BUILTIN
        .iter()
        .find(|&&(n, _)| n == name)
        .map(|&(_, t)| t)
        .ok_or_else(|| LoadError::UnknownTarget {
            name: name.to_string(),
            known: builtin_names().collect::<Vec<_>>().join(", "),
        })?;
    load_str(text, &format!("targets/{name}.yaml"))
}

impl LoadError {
    /// True when the message starts with the file it is about, in the
    /// `FILE[:LINE:COL]: error: MESSAGE` form, so that a front end prints
    /// it as it is rather than prefixing another `error:`.
    pub fn is_located(&self) -> bool {
        matches!(self, LoadError::Io { .. } | LoadError::Yaml { .. })
    }
}

/// Loads a target file.
pub fn load_file(path: &Path) -> Result<TargetSpec, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|e| LoadError::Io {
        file: path.display().to_string(),
        message: e.to_string(),
    })?;
    load_str(&text, &path.display().to_string())
}

/// Parses target YAML; `file` names it in errors.
pub fn load_str(text: &str, file: &str) -> Result<TargetSpec, LoadError> {
    let wire: TargetFile = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        // The YAML library reports a value's own errors at the start of the
        // enclosing mapping; point at the offending value instead.
        let message = e.to_string();
        let message = match message.rfind(" at line ") {
            Some(at) => message[..at].to_string(),
            None => message,
        };
        let (line, column) = refine_location(text, line, column, &message);
        LoadError::Yaml {
            file: file.to_string(),
            line,
            column,
            message,
        }
    })?;
    Ok(wire.into_spec())
}

/// Finds the quoted value named in `message` ('like this') at or after the
/// reported line, and returns its position; otherwise the reported one.
fn refine_location(text: &str, line: usize, column: usize, message: &str) -> (usize, usize) {
    let quoted = message.split('\'').nth(1).filter(|q| !q.is_empty());
    let Some(quoted) = quoted else {
        return (line, column);
    };
    for (i, text_line) in text.lines().enumerate().skip(line.saturating_sub(1)) {
        if let Some(col) = text_line.find(quoted) {
            return (i + 1, text_line[..col].chars().count() + 1);
        }
    }
    (line, column)
}

/// Why a target could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: error: cannot read the target file: {message}")]
    Io { file: String, message: String },
    #[error("{file}:{line}:{column}: error: {message}")]
    Yaml {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "unknown target '{name}'; the built-in targets are {known}, or give a path to a .yaml file"
    )]
    UnknownTarget { name: String, known: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFile {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "descending")]
    default_layout: OrderName,
    #[serde(default)]
    operand_default: OptRequirement,
    #[serde(default)]
    layout_preserving: LayoutPreservingFile,
    #[serde(default)]
    rules: Vec<RuleFile>,
    #[serde(default)]
    reduce: ReduceFile,
    #[serde(default)]
    tiling: Option<TilingFile>,
    #[serde(default)]
    cost: CostFile,
}

fn descending() -> OrderName {
    OrderName(DimOrder::Descending)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LayoutPreservingFile {
    #[serde(default)]
    add: Vec<OpName>,
    #[serde(default)]
    remove: Vec<OpName>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: String,
    ops: Vec<OpName>,
    #[serde(default)]
    custom_call_targets: Vec<String>,
    #[serde(default)]
    when: ConditionFile,
    #[serde(default)]
    operands: OperandsField,
    #[serde(default)]
    result: OptRequirement,
    #[serde(default)]
    reason: String,
}

/// `operands:` is either one requirement for every operand or a map from
/// operand index to requirement.
#[derive(Default)]
struct OperandsField(OperandRequirements);

impl<'de> Deserialize<'de> for OperandsField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read the value first and interpret it here, so that an error is
        // reported at this field's position rather than as "no variant
        // matched".
        let value = serde_yaml::Value::deserialize(d)?;
        let requirements = match value {
            serde_yaml::Value::String(s) => {
                OperandRequirements::All(parse_requirement(s.trim()).map_err(de::Error::custom)?)
            }
            serde_yaml::Value::Mapping(map) => {
                let mut by_index = Vec::new();
                for (k, v) in map {
                    let index = k.as_u64().ok_or_else(|| {
                        de::Error::custom("operand indices must be integers like 0 or 1")
                    })? as usize;
                    let text = v.as_str().ok_or_else(|| {
                        de::Error::custom(format!(
                            "operand {index} needs a requirement such as row_major"
                        ))
                    })?;
                    by_index.push((
                        index,
                        parse_requirement(text.trim()).map_err(de::Error::custom)?,
                    ));
                }
                OperandRequirements::ByIndex(by_index)
            }
            _ => {
                return Err(de::Error::custom(
                    "operands must be a requirement such as row_major, or a map from operand index to requirement",
                ));
            }
        };
        Ok(OperandsField(requirements))
    }
}

/// An optional requirement; a missing key means none.
#[derive(Default)]
struct OptRequirement(Option<Requirement>);

impl<'de> Deserialize<'de> for OptRequirement {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_text(d, |s| {
            parse_requirement(s.trim()).map(|r| OptRequirement(Some(r)))
        })
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConditionFile {
    batch_dims: Option<bool>,
    gemv: Option<bool>,
    constant_operand: Option<usize>,
    #[serde(default)]
    operand_types: Vec<TypeName>,
    #[serde(default)]
    result_types: Vec<TypeName>,
    min_rank: Option<usize>,
    max_rank: Option<usize>,
    dim_labels: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReduceFile {
    #[serde(default)]
    reduced_dims_minor: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TilingFile {
    rules: Vec<TilingRuleFile>,
    #[serde(default)]
    combine_dimensions: bool,
    #[serde(default)]
    keep_untiled_entry: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TilingRuleFile {
    #[serde(default)]
    bits: Vec<u32>,
    #[serde(default)]
    types: Vec<TypeName>,
    #[serde(default)]
    min_rank: usize,
    #[serde(default = "max_rank")]
    max_rank: usize,
    /// Tilings for any size (one, or a list).
    tiles: TilesList,
    /// Tilings for a dimension that fits in one tile.
    #[serde(default)]
    short_tiles: TilesList,
    /// Tilings for HBM-resident buffers whose dimension fills a tile.
    #[serde(default)]
    storage_tiles: TilesList,
    #[serde(default)]
    element_size_in_bits: Option<i64>,
}

/// Tilings written as in HLO, one (`"(8,128)"`) or a list of them.
#[derive(Default)]
struct TilesList(Vec<Vec<Tile>>);

impl<'de> Deserialize<'de> for TilesList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read the value first and interpret it here, so that an error
        // names the bad tiling rather than "no variant matched".
        let value = serde_yaml::Value::deserialize(d)?;
        let texts: Vec<String> = match value {
            serde_yaml::Value::String(s) => vec![s],
            serde_yaml::Value::Sequence(items) => items
                .into_iter()
                .map(|v| match v {
                    serde_yaml::Value::String(s) => Ok(s),
                    _ => Err(de::Error::custom(
                        "tiles are written as strings such as \"(8,128)\"",
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => {
                return Err(de::Error::custom(
                    "tiles must be a string such as \"(8,128)\" or a list of them",
                ));
            }
        };
        texts
            .iter()
            .map(|t| parse_tiles(t).map_err(de::Error::custom))
            .collect::<Result<_, _>>()
            .map(TilesList)
    }
}

fn max_rank() -> usize {
    shape::MAX_RANK
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostFile {
    #[serde(default = "one")]
    copy_byte: f64,
    #[serde(default = "one")]
    transpose_byte: f64,
    /// Unset: 1.0 on a target that tiles, 0.0 otherwise.
    #[serde(default)]
    padding_byte: Option<f64>,
}

impl Default for CostFile {
    fn default() -> Self {
        CostFile {
            copy_byte: 1.0,
            transpose_byte: 1.0,
            padding_byte: None,
        }
    }
}

fn one() -> f64 {
    1.0
}

impl TargetFile {
    fn into_spec(self) -> TargetSpec {
        TargetSpec {
            name: self.name,
            description: self.description.trim().to_string(),
            default_order: self.default_layout.0,
            operand_default: self.operand_default.0,
            layout_preserving_extra: self
                .layout_preserving
                .add
                .into_iter()
                .map(|o| o.0)
                .collect(),
            layout_changing_extra: self
                .layout_preserving
                .remove
                .into_iter()
                .map(|o| o.0)
                .collect(),
            rules: self
                .rules
                .into_iter()
                .map(|r| Rule {
                    name: r.name,
                    ops: r.ops.into_iter().map(|o| o.0).collect(),
                    custom_call_targets: r.custom_call_targets,
                    when: Condition {
                        batch_dims: r.when.batch_dims,
                        gemv: r.when.gemv,
                        constant_operand: r.when.constant_operand,
                        operand_types: r.when.operand_types.into_iter().map(|t| t.0).collect(),
                        result_types: r.when.result_types.into_iter().map(|t| t.0).collect(),
                        min_rank: r.when.min_rank,
                        max_rank: r.when.max_rank,
                        dim_labels: r.when.dim_labels,
                    },
                    operands: r.operands.0,
                    result: r.result.0,
                    reason: r.reason.trim().to_string(),
                })
                .collect(),
            reduce: ReducePolicy {
                reduced_dims_minor: self.reduce.reduced_dims_minor,
            },
            cost: CostWeights {
                copy_byte: self.cost.copy_byte,
                transpose_byte: self.cost.transpose_byte,
                padding_byte: self.cost.padding_byte.unwrap_or(if self.tiling.is_some() {
                    1.0
                } else {
                    0.0
                }),
            },
            tiling: self.tiling.map(|t| TilingPolicy {
                rules: t
                    .rules
                    .into_iter()
                    .map(|r| {
                        let candidate = |tiles, fit, storage_only| TileCandidate {
                            tiles,
                            fit,
                            storage_only,
                        };
                        let mut candidates: Vec<TileCandidate> = r
                            .tiles
                            .0
                            .into_iter()
                            .map(|t| candidate(t, TileFit::Any, false))
                            .collect();
                        candidates.extend(
                            r.short_tiles
                                .0
                                .into_iter()
                                .map(|t| candidate(t, TileFit::Within, false)),
                        );
                        candidates.extend(
                            r.storage_tiles
                                .0
                                .into_iter()
                                .map(|t| candidate(t, TileFit::Filled, true)),
                        );
                        TilingRule {
                            bits: r.bits,
                            types: r.types.into_iter().map(|t| t.0).collect(),
                            min_rank: r.min_rank,
                            max_rank: r.max_rank,
                            candidates,
                            element_size_in_bits: r.element_size_in_bits,
                        }
                    })
                    .collect(),
                combine_dimensions: t.combine_dimensions,
                keep_untiled_entry: t.keep_untiled_entry,
            }),
        }
    }
}

/// Deserializes a string and converts it with `parse`, so that a bad value
/// is reported at its own position in the file.
fn from_text<'de, D, T>(d: D, parse: impl FnOnce(&str) -> Result<T, String>) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let text = String::deserialize(d)?;
    parse(&text).map_err(de::Error::custom)
}

/// An opcode name, checked against the opcodes Tessera knows.
struct OpName(Opcode);

impl<'de> Deserialize<'de> for OpName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_text(d, |s| {
            Opcode::from_name(s)
                .map(OpName)
                .ok_or_else(|| format!("unknown opcode '{s}'"))
        })
    }
}

/// An element type name.
struct TypeName(PrimitiveType);

impl<'de> Deserialize<'de> for TypeName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_text(d, |s| {
            PrimitiveType::from_name(s)
                .map(TypeName)
                .ok_or_else(|| format!("unknown element type '{s}'"))
        })
    }
}

/// `descending` or `ascending`.
struct OrderName(DimOrder);

impl<'de> Deserialize<'de> for OrderName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        from_text(d, |s| match s {
            "descending" | "row_major" => Ok(OrderName(DimOrder::Descending)),
            "ascending" | "col_major" => Ok(OrderName(DimOrder::Ascending)),
            _ => Err(format!(
                "unknown default layout '{s}'; expected descending or ascending"
            )),
        })
    }
}

const REQUIREMENTS: &str = "row_major, col_major, default, matrix, contracting_minor, fortran, \
     feature_minor, feature_most_minor, spatial_minor, dim_major(ATTRIBUTE) or m2m(D,...)";

fn parse_requirement(s: &str) -> Result<Requirement, String> {
    let unknown = || format!("unknown requirement '{s}'; expected one of {REQUIREMENTS}");
    Ok(match s {
        "row_major" => Requirement::RowMajor,
        "col_major" => Requirement::ColMajor,
        "default" => Requirement::Default,
        "matrix" => Requirement::MatrixLayout,
        "contracting_minor" => Requirement::ContractingMinor,
        "fortran" => Requirement::Fortran,
        "feature_minor" => Requirement::FeatureMinor,
        "feature_most_minor" => Requirement::FeatureMostMinor,
        "spatial_minor" => Requirement::SpatialMinor,
        _ => {
            let (head, rest) = s.split_once('(').ok_or_else(unknown)?;
            let inner = rest.strip_suffix(')').ok_or_else(unknown)?.trim();
            match head.trim() {
                "dim_major" if !inner.is_empty() => Requirement::DimMajor(inner.to_string()),
                "m2m" => {
                    let dims = inner
                        .split(',')
                        .map(|d| d.trim().parse::<usize>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            format!("m2m(...) takes dimension numbers, found '{inner}'")
                        })?;
                    Requirement::Fixed(dims)
                }
                _ => return Err(unknown()),
            }
        }
    })
}

/// Tiles written as in HLO: `(8,128)(2,1)`.
fn parse_tiles(s: &str) -> Result<Vec<Tile>, String> {
    // Reuse the shape parser: the tiles are the `T` property of a layout.
    let layout =
        shape::parse_layout(&format!("{{:T{s}}}")).map_err(|e| format!("bad tiles '{s}': {e}"))?;
    if layout.tiles.is_empty() {
        return Err(format!("bad tiles '{s}': no tile"));
    }
    Ok(layout.tiles.into_vec())
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::RowMajor => f.write_str("row_major"),
            Requirement::ColMajor => f.write_str("col_major"),
            Requirement::Default => f.write_str("default"),
            Requirement::MatrixLayout => f.write_str("matrix"),
            Requirement::ContractingMinor => f.write_str("contracting_minor"),
            Requirement::Fortran => f.write_str("fortran"),
            Requirement::FeatureMinor => f.write_str("feature_minor"),
            Requirement::FeatureMostMinor => f.write_str("feature_most_minor"),
            Requirement::SpatialMinor => f.write_str("spatial_minor"),
            Requirement::DimMajor(a) => write!(f, "dim_major({a})"),
            Requirement::Fixed(d) => {
                f.write_str("m2m(")?;
                shape::text::write_list(f, d)?;
                f.write_str(")")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        load_str(text, "t.yaml").expect_err("must fail").to_string()
    }

    #[test]
    fn builtin_targets_load() {
        for name in builtin_names() {
            let spec = load_builtin(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(spec.name, name);
        }
        assert!(
            load_builtin("tpu9")
                .unwrap_err()
                .to_string()
                .contains("unknown target 'tpu9'")
        );
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = error("name: x\nrules:\n  - name: r\n    ops: [dot]\n    frobnicate: 1\n");
        assert!(e.starts_with("t.yaml:5:"), "{e}");
        assert!(e.contains("unknown field `frobnicate`"), "{e}");
        let e = error("name: x\nrules:\n  - name: r\n    ops: [dott]\n");
        assert!(e.starts_with("t.yaml:4:"), "{e}");
        assert!(e.contains("unknown opcode 'dott'"), "{e}");
        let e = error("name: x\noperand_default: sideways\n");
        assert!(e.starts_with("t.yaml:2:18: error:"), "{e}");
        assert!(e.contains("unknown requirement 'sideways'"), "{e}");
        let e = error(
            "name: x\nrules:\n  - name: r\n    ops: [dot]\n    operands: { 0: row_major, 1: upside_down }\n",
        );
        assert!(e.starts_with("t.yaml:5:"), "{e}");
        assert!(e.contains("unknown requirement 'upside_down'"), "{e}");
        let e = error(
            "name: x\ntiling:\n  rules:\n    - { bits: [32], tiles: [\"(8,128)\", \"(8,x)\"] }\n",
        );
        assert!(e.starts_with("t.yaml:4:"), "{e}");
        assert!(e.contains("bad tiles '(8,x)'"), "{e}");
        let e = error("name: [unclosed\n");
        assert!(e.starts_with("t.yaml:"), "{e}");
    }

    #[test]
    fn requirements_parse() {
        assert_eq!(
            parse_requirement("dim_major(dimensions)"),
            Ok(Requirement::DimMajor("dimensions".into()))
        );
        assert_eq!(
            parse_requirement("m2m(0, 1)"),
            Ok(Requirement::Fixed([0, 1].into_iter().collect()))
        );
        assert!(parse_requirement("m2m(a)").is_err());
        for r in [
            "row_major",
            "col_major",
            "default",
            "matrix",
            "contracting_minor",
            "fortran",
            "feature_minor",
            "feature_most_minor",
            "spatial_minor",
        ] {
            assert_eq!(parse_requirement(r).unwrap().to_string(), r);
        }
    }
}
