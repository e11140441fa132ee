//! The structural check of a JSON or YAML request body, before it is
//! decoded: how deep it nests, how many values it holds and how many bytes
//! of strings it expands to.
//!
//! Decoding is where a small hostile body becomes a large cost. A YAML
//! alias repeats the node its anchor names, so an 8 MiB string referenced
//! 250 times decodes to 2 GiB; and serde_yaml's loader reads a whole
//! document before it checks anything, in time that grows with the square
//! of the flow nesting (libyaml rescans every open level on each token).
//! So every JSON or YAML body is first walked by a pull parser that stops
//! at the first excess: the walk is linear in the body and never builds
//! the document. A body that passes decodes to at most `max_body_nodes`
//! values holding at most `max_expanded_bytes` bytes of strings.
//!
//! YAML is walked by `saphyr-parser` (YAML 1.2), and a body it refuses is
//! refused, so that no input can be judged shallow here and be read
//! deeply by libyaml. JSON is walked by hand: its strings are the only
//! context that changes the meaning of a bracket, and they are easy to
//! skip exactly.

use saphyr_parser::{Event, Parser};

/// What a body may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The deepest nesting of arrays and objects (sequences and mappings).
    pub max_nesting: usize,
    /// The most values, YAML aliases expanded.
    pub max_nodes: usize,
    /// The most bytes of scalars (keys included), YAML aliases expanded.
    pub max_expanded_bytes: usize,
}

/// What the walk saw, for the tests' work counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// The deepest nesting, aliases expanded.
    pub nesting: usize,
    /// Values, aliases expanded.
    pub nodes: usize,
    /// Bytes of scalars, aliases expanded.
    pub expanded_bytes: usize,
    /// Parser events (YAML) or bytes (JSON) looked at: the walk's work.
    pub steps: usize,
}

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Excess {
    /// It nests deeper than `max_nesting`.
    TooDeep,
    /// It holds more than `max_nodes` values.
    TooManyNodes,
    /// Its scalars expand to more than `max_expanded_bytes`.
    TooManyBytes,
    /// An alias names a node that contains it.
    RecursiveAlias,
    /// The YAML does not parse (the parser's message; 1-based line and
    /// column).
    Invalid {
        /// What is wrong.
        message: String,
        /// The line.
        line: usize,
        /// The column.
        col: usize,
    },
}

/// The size of a node that an anchor names, once the node is complete.
#[derive(Clone, Copy, Default)]
struct Size {
    nodes: usize,
    bytes: usize,
    /// Nesting below the node itself (0 for a scalar).
    depth: usize,
}

/// An open sequence or mapping.
struct Open {
    anchor: usize,
    nodes: usize,
    bytes: usize,
    /// The deepest nesting reached inside, relative to this node.
    depth: usize,
}

/// The running totals of a walk.
struct Totals {
    limits: Limits,
    shape: Shape,
}

impl Totals {
    fn new(limits: Limits) -> Totals {
        Totals {
            limits,
            shape: Shape::default(),
        }
    }

    /// Adds `nodes` values of `bytes` bytes reaching `depth` levels.
    fn add(&mut self, nodes: usize, bytes: usize, depth: usize) -> Result<(), Excess> {
        let s = &mut self.shape;
        s.nodes = s.nodes.saturating_add(nodes);
        s.expanded_bytes = s.expanded_bytes.saturating_add(bytes);
        s.nesting = s.nesting.max(depth);
        if s.nesting > self.limits.max_nesting {
            Err(Excess::TooDeep)
        } else if s.nodes > self.limits.max_nodes {
            Err(Excess::TooManyNodes)
        } else if s.expanded_bytes > self.limits.max_expanded_bytes {
            Err(Excess::TooManyBytes)
        } else {
            Ok(())
        }
    }
}

/// Walks a YAML body (every document in it).
pub fn check_yaml(text: &str, limits: Limits) -> Result<Shape, Excess> {
    let mut totals = Totals::new(limits);
    walk_yaml(text, &mut totals)?;
    Ok(totals.shape)
}

fn walk_yaml(text: &str, totals: &mut Totals) -> Result<(), Excess> {
    // Sizes of complete anchored nodes by anchor id; `None` while open.
    let mut anchors: Vec<Option<Size>> = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    for event in Parser::new_from_str(text) {
        totals.shape.steps += 1;
        let (event, _span) = event.map_err(|e| Excess::Invalid {
            message: e.info().to_string(),
            line: e.marker().line(),
            col: e.marker().col() + 1,
        })?;
        let level = open.len();
        match event {
            Event::Scalar(value, _, anchor, _) => {
                totals.add(1, value.len(), level)?;
                set_anchor(
                    &mut anchors,
                    anchor,
                    Some(Size {
                        nodes: 1,
                        bytes: value.len(),
                        depth: 0,
                    }),
                );
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                totals.add(1, 0, level + 1)?;
                set_anchor(&mut anchors, anchor, None);
                open.push(Open {
                    anchor,
                    nodes: totals.shape.nodes - 1,
                    bytes: totals.shape.expanded_bytes,
                    depth: 0,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(o) = open.pop() else { continue };
                let inner = o.depth + 1;
                if let Some(parent) = open.last_mut() {
                    parent.depth = parent.depth.max(inner);
                }
                let size = Size {
                    nodes: totals.shape.nodes - o.nodes,
                    bytes: totals.shape.expanded_bytes - o.bytes,
                    depth: inner,
                };
                set_anchor(&mut anchors, o.anchor, Some(size));
            }
            Event::Alias(id) => {
                let Some(Some(size)) = anchors.get(id).copied() else {
                    // The node is still open: the alias is inside it.
                    return Err(Excess::RecursiveAlias);
                };
                totals.add(size.nodes, size.bytes, level + size.depth)?;
                if let Some(parent) = open.last_mut() {
                    parent.depth = parent.depth.max(size.depth);
                }
            }
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart(_)
            | Event::DocumentEnd => {}
        }
    }
    Ok(())
}

fn set_anchor(anchors: &mut Vec<Option<Size>>, id: usize, size: Option<Size>) {
    // Id 0 is "no anchor".
    if id == 0 {
        return;
    }
    if anchors.len() <= id {
        anchors.resize(id + 1, None);
    }
    if let Some(slot) = anchors.get_mut(id) {
        *slot = size;
    }
}

/// Walks a JSON body. A body that is not JSON passes if it is within the
/// limits as far as its brackets go: the decoder reports what is wrong.
pub fn check_json(bytes: &[u8], limits: Limits) -> Result<Shape, Excess> {
    let mut totals = Totals::new(limits);
    let mut depth = 0usize;
    // The last byte outside strings and whitespace: a scalar begins after
    // an opening bracket, a comma, a colon, or at the start.
    let mut previous = b',';
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                let end = string_end(bytes, i + 1);
                totals.add(1, end - i - 1, depth)?;
                i = end;
            }
            b'[' | b'{' => {
                depth += 1;
                totals.add(1, 0, depth)?;
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            _ if matches!(previous, b'[' | b'{' | b',' | b':') => totals.add(1, 0, depth)?,
            _ => {}
        }
        previous = b;
        i += 1;
    }
    totals.shape.steps = bytes.len();
    Ok(totals.shape)
}

/// The index of the quote that closes a string whose content starts at
/// `from`, or the end of the input.
fn string_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(off) = memchr::memchr2(b'"', b'\\', bytes.get(i..).unwrap_or_default()) {
        let at = i + off;
        if bytes.get(at) == Some(&b'\\') {
            i = at + 2;
            if i >= bytes.len() {
                return bytes.len();
            }
        } else {
            return at;
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_nesting: 64,
        max_nodes: 1000,
        max_expanded_bytes: 1 << 20,
    };

    #[test]
    fn a_request_body_passes_with_its_shape() {
        let yaml = "module: |\n  HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n  ENTRY %e (p: f32[4]) -> f32[4] {\n    ROOT %p = f32[4] parameter(0)\n  }\noptions:\n  passes: [layout-assignment, relayout]\n";
        let s = check_yaml(yaml, LIMITS).expect("passes");
        // The top mapping, its 2 keys, the module, the options mapping,
        // its key, and the list and its two items.
        assert_eq!((s.nesting, s.nodes), (3, 9), "{s:?}");
        let json = r#"{"module": "HloModule m [x] {y}", "options": {"passes": ["layout-assignment"], "verify": true}}"#;
        let s = check_json(json.as_bytes(), LIMITS).expect("passes");
        // Brackets inside strings do not count; keys are counted.
        assert_eq!((s.nesting, s.nodes), (3, 10), "{s:?}");
    }

    #[test]
    fn an_alias_counts_what_it_repeats() {
        let yaml = "a: &x [1, 2, 3]\nb: *x\nc: *x\n";
        let s = check_yaml(yaml, LIMITS).expect("passes");
        // 1 mapping, 3 keys, the list of 4 nodes three times.
        assert_eq!(s.nodes, 1 + 3 + 4 * 3, "{s:?}");
        assert_eq!(s.expanded_bytes, 3 + 3 * 3, "{s:?}");
        assert_eq!(s.nesting, 2, "{s:?}");
    }

    #[test]
    fn a_string_repeated_by_aliases_is_refused_by_its_expanded_bytes() {
        let mut yaml = format!("module: x\ntarget:\n  k0: &a {}\n", "x".repeat(4096));
        for k in 1..250 {
            yaml.push_str(&format!("  k{k}: *a\n"));
        }
        let limits = Limits {
            max_expanded_bytes: 64 * 1024,
            ..LIMITS
        };
        assert_eq!(check_yaml(&yaml, limits), Err(Excess::TooManyBytes));
        // The same body with a budget for it passes.
        let roomy = Limits {
            max_expanded_bytes: 2 << 20,
            ..LIMITS
        };
        assert!(check_yaml(&yaml, roomy).is_ok());
    }

    #[test]
    fn nested_aliases_multiply_and_are_refused_by_their_node_count() {
        // A billion laughs: each level repeats the one before ten times.
        let mut yaml = String::from("a0: &a0 [x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            yaml.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let e = check_yaml(&yaml, LIMITS).expect_err("refused");
        assert_eq!(e, Excess::TooManyNodes);
    }

    #[test]
    fn an_alias_deepens_where_it_is_used() {
        let yaml = "a: &x [[[[1]]]]\nb: [[[[[[*x]]]]]]\n";
        let s = check_yaml(yaml, LIMITS).expect("passes");
        assert_eq!(s.nesting, 1 + 6 + 4, "{s:?}");
        let shallow = Limits {
            max_nesting: 8,
            ..LIMITS
        };
        assert_eq!(check_yaml(yaml, shallow), Err(Excess::TooDeep));
    }

    #[test]
    fn deep_flow_nesting_is_refused_after_a_bounded_walk() {
        // The input that took serde_yaml's loader quadratic time.
        for n in [1_000usize, 50_000, 500_000] {
            let yaml = format!("module: x\ntarget: {}{}", "[".repeat(n), "]".repeat(n));
            let e = check_yaml(&yaml, LIMITS).expect_err("refused");
            assert!(
                matches!(e, Excess::TooDeep | Excess::Invalid { .. }),
                "{e:?}"
            );
            // The walk stopped within the first levels, whatever the depth.
            let mut totals = Totals::new(LIMITS);
            assert!(walk_yaml(&yaml, &mut totals).is_err());
            assert!(
                totals.shape.steps < 200,
                "n = {n}: {} events",
                totals.shape.steps
            );
            let json = format!(
                "{{\"module\": \"x\", \"target\": {}{}}}",
                "[".repeat(n),
                "]".repeat(n)
            );
            assert_eq!(check_json(json.as_bytes(), LIMITS), Err(Excess::TooDeep));
        }
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        let mut yaml = String::new();
        for i in 0..100 {
            yaml.push_str(&" ".repeat(i));
            yaml.push_str("k:\n");
        }
        assert_eq!(check_yaml(&yaml, LIMITS), Err(Excess::TooDeep));
    }

    #[test]
    fn a_recursive_alias_is_refused() {
        assert_eq!(
            check_yaml("a: &x [1, *x]\n", LIMITS),
            Err(Excess::RecursiveAlias)
        );
    }

    #[test]
    fn invalid_yaml_is_located() {
        let Err(Excess::Invalid { line, col, .. }) =
            check_yaml("module: x\noptions: [a, b\n", LIMITS)
        else {
            panic!("refused as invalid")
        };
        assert!(line >= 2 && col >= 1, "{line}:{col}");
    }

    #[test]
    fn json_strings_with_escaped_quotes_are_skipped_exactly() {
        let json = r#"{"module": "a \"[[[[\" \\", "x": [1, -2, true, null]}"#;
        let s = check_json(json.as_bytes(), LIMITS).expect("passes");
        assert_eq!((s.nesting, s.nodes), (2, 9), "{s:?}");
        let many = format!("[{}0]", "0,".repeat(2000));
        assert_eq!(
            check_json(many.as_bytes(), LIMITS),
            Err(Excess::TooManyNodes)
        );
    }
}
