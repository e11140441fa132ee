//! Pictures: Graphviz text and SVG of a computation, with copies red,
//! bitcasts green, edges labelled with layouts, and a cap on big graphs.

use hlo::Module;

/// Parses `text` and runs the relayout pass alone on it.
fn relayout_alone(text: &str, target_name: &str, expand: bool) -> (Module, relayout::Report) {
    let mut m = hlo::parse_module(text, "test.hlo").unwrap_or_else(|e| panic!("{e}"));
    let target = target::load_builtin(target_name).expect("built-in target");
    let opts = relayout::Options {
        expand_relayouts: expand,
    };
    let r = relayout::run(&mut m, &target, &opts).unwrap_or_else(|e| panic!("{e}"));
    (m, r)
}

const TEXT: &str = r#"HloModule pic

ENTRY %main (p: f32[8,128], q: f32[3,128]) -> (f32[8,128], f32[3,128]) {
  %p = f32[8,128]{1,0:T(8,128)} parameter(0)
  %q = f32[3,128]{1,0:T(8,128)} parameter(1)
  %b = f32[8,128]{1,0} copy(%p)
  %c = f32[3,128]{1,0} copy(%q)
  ROOT %t = (f32[8,128]{1,0}, f32[3,128]{1,0}) tuple(%b, %c)
}
"#;

#[test]
fn dot_colours_copies_and_bitcasts_and_labels_layouts() {
    let (m, _) = relayout_alone(TEXT, "gpu", false);
    let dot = draw::to_dot(&m, m.entry);
    assert!(dot.starts_with("digraph \"main\" {"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
    // %b became a bitcast (green), %c stays a copy (red).
    let line = |name: &str| {
        dot.lines()
            .find(|l| l.contains(&format!("label=\"%{name}\\n")))
            .unwrap_or_else(|| panic!("{dot}"))
            .to_string()
    };
    assert!(
        line("b").contains("bitcast") && line("b").contains("#c8ecc8"),
        "{}",
        line("b")
    );
    assert!(
        line("c").contains("\\ncopy\\n") && line("c").contains("#f8c4c4"),
        "{}",
        line("c")
    );
    assert!(line("t").contains("penwidth=2"), "the root is marked");
    // Edges carry the operand's layout.
    assert_eq!(dot.matches(" -> ").count(), 4);
    assert!(dot.contains("[label=\"{1,0:T(8,128)}\"]"), "{dot}");
}

#[test]
fn svg_is_one_box_per_instruction_with_layout_labels() {
    let (m, _) = relayout_alone(TEXT, "gpu", false);
    let svg = draw::to_svg(&m, m.entry);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g class=\"node ").count(), 5);
    assert_eq!(svg.matches("<line ").count(), 4);
    assert!(svg.contains("<g class=\"node copy\">") && svg.contains("fill=\"#f8c4c4\""));
    assert!(svg.contains("<g class=\"node bitcast\">") && svg.contains("fill=\"#c8ecc8\""));
    assert!(
        svg.contains(">{1,0:T(8,128)}</text>"),
        "layouts label the edges"
    );
    assert!(!svg.contains("showing the first"));
    // Every opened element is closed: the text is well formed enough for
    // a browser (a tag count, not a parser).
    assert_eq!(svg.matches("<g").count(), svg.matches("</g>").count());
    assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
}

#[test]
fn big_computations_are_capped_and_say_so() {
    let mut text = String::from(
        "HloModule big\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  %p = f32[4]{0} parameter(0)\n",
    );
    let mut prev = "p".to_string();
    for i in 0..450 {
        text.push_str(&format!("  %n{i} = f32[4]{{0}} negate(%{prev})\n"));
        prev = format!("n{i}");
    }
    text.push_str(&format!("  ROOT %r = f32[4]{{0}} copy(%{prev})\n}}\n"));
    let m = hlo::parse_module(&text, "test.hlo").unwrap_or_else(|e| panic!("{e}"));
    let svg = draw::to_svg(&m, m.entry);
    assert_eq!(
        svg.matches("<g class=\"node ").count(),
        draw::MAX_DRAWN_NODES
    );
    assert!(
        svg.contains("showing the first 400 of 452 instructions"),
        "the picture says it is cut"
    );
    let dot = draw::to_dot(&m, m.entry);
    assert_eq!(dot.matches("[label=\"%").count(), draw::MAX_DRAWN_NODES);
    assert!(dot.contains("showing the first 400 of 452 instructions"));
}
