//! Malformed inputs: each must fail with the expected message at the
//! expected line and column, never panic.

use hlo::{MAX_NESTING, parse_module, parse_module_bytes};

/// (name, input, line, column, message substring).
const CASES: &[(&str, &str, u32, u32, &str)] = &[
    (
        "empty",
        "",
        1,
        1,
        "expected 'HloModule' at the start of the module, found the end of the input",
    ),
    (
        "whitespace only",
        "   \n\n",
        3,
        1,
        "expected 'HloModule' at the start of the module, found the end of the input",
    ),
    (
        "comment only",
        "// RUN: x\n/* c */\n",
        3,
        1,
        "expected 'HloModule' at the start of the module, found the end of the input",
    ),
    (
        "no module name",
        "HloModule\n",
        2,
        1,
        "expected a module name after 'HloModule', found the end of the input",
    ),
    (
        "header attr without equals",
        "HloModule m, foo\n%c {\n  ROOT %x = f32[] constant(0)\n}\n",
        1,
        17,
        "expected '=' after header attribute 'foo', found '%'",
    ),
    (
        "no computation",
        "HloModule m, replica_count=2\n\n",
        3,
        1,
        "expected a computation: a module needs at least one",
    ),
    (
        "missing equals",
        "HloModule m\n\nENTRY %main {\n  %x f32[] constant(0)\n}\n",
        4,
        6,
        "expected '=' after instruction name %x, found 'f'",
    ),
    (
        "opcode-less garbage",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[] 123\n}\n",
        3,
        19,
        "expected an opcode after the shape of %x, found '1'",
    ),
    (
        "missing opcode",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[2]{0} (%y)\n}\n",
        3,
        23,
        "expected an opcode after the shape of %x, found '('",
    ),
    (
        "bad element type",
        "HloModule m\nENTRY %main {\n  ROOT %x = f33[2]{0} parameter(0)\n}\n",
        3,
        13,
        "expected an element type such as f32 or bf16, found 'f33'",
    ),
    (
        "layout m2m length",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[2,3]{0} parameter(0)\n}\n",
        3,
        21,
        "Dimensions size is 2, but minor to major size is 1.",
    ),
    (
        "layout props out of order",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[2]{0:E(4)T(2)} parameter(0)\n}\n",
        3,
        26,
        "expects layout to end with '}' (properties go in the order D T L # * E S SC P M)",
    ),
    (
        "tile size of minus one (not '*')",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[3,5]{1,0:T(-1,2)} parameter(0)\n}\n",
        3,
        28,
        "tile 0 entry 0 is -1; tile sizes must be positive or '*'",
    ),
    (
        "tile size of zero in a second level",
        "HloModule m\nENTRY %main {\n  ROOT %x = f32[8,128]{1,0:T(8,128)(2,0)} parameter(0)\n}\n",
        3,
        39,
        "tile 1 entry 1 is 0; tile sizes must be positive or '*'",
    ),
    (
        "unknown operand",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] add(%a, %foo)\n}\n",
        4,
        27,
        "unknown operand %foo",
    ),
    (
        "duplicate name",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  %a = f32[] negate(%a)\n  ROOT %r = f32[] negate(%a)\n}\n",
        4,
        3,
        "duplicate instruction name %a",
    ),
    (
        "unterminated string",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0), metadata={op_name=\"abc}\n}\n",
        3,
        51,
        "unterminated string: expected a closing '\"' for this one",
    ),
    (
        "unterminated comment",
        "HloModule m\nENTRY %main {\n  /* never closed\n  ROOT %a = f32[] parameter(0)\n}\n",
        3,
        3,
        "unterminated comment: expected '*/' to close this '/*'",
    ),
    (
        "unterminated body",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n",
        4,
        1,
        "expected '}' to close computation %main, whose body opens at line 2, column 13",
    ),
    (
        "unterminated attr brace",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0), metadata={op_name=\"a\"\n}\n",
        5,
        1,
        "expected '}' to close computation %main, whose body opens at line 2, column 13",
    ),
    (
        "two entry",
        "HloModule m\nENTRY %a {\n  ROOT %x = f32[] constant(0)\n}\nENTRY %b {\n  ROOT %y = f32[] constant(0)\n}\n",
        5,
        1,
        "a second ENTRY computation: %a is already the entry",
    ),
    (
        "two root",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n  ROOT %b = f32[] negate(%a)\n}\n",
        4,
        3,
        "a second ROOT instruction %b in computation %main: %a is already the root",
    ),
    (
        "undefined computation",
        "HloModule m\nENTRY %main {\n  %a = f32[4]{0} parameter(0)\n  %z = f32[] constant(0)\n  ROOT %r = f32[] reduce(%a, %z), dimensions={0}, to_apply=%sum\n}\n",
        5,
        60,
        "computation %sum is not defined",
    ),
    (
        "bad integer in dims",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[2]{0} broadcast(%a), dimensions={x}\n}\n",
        4,
        50,
        "expected an integer in 'dimensions', found 'x'",
    ),
    (
        "dims separator",
        "HloModule m\nENTRY %main {\n  %a = f32[2]{0} parameter(0)\n  ROOT %b = f32[2,3]{1,0} broadcast(%a), dimensions={0 1}\n}\n",
        4,
        56,
        "expected ',' or '}' in 'dimensions', found '1'",
    ),
    (
        "integer overflow",
        "HloModule m\nENTRY %main {\n  %a = (f32[]) parameter(0)\n  ROOT %b = f32[] get-tuple-element(%a), index=99999999999999999999\n}\n",
        4,
        48,
        "integer 99999999999999999999 does not fit in 64 bits",
    ),
    (
        "overflowing shape",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[4294967296,4294967296]{1,0} parameter(0)\n}\n",
        3,
        13,
        "shape f32[4294967296,4294967296]{1,0} has more elements than fit in a 64-bit integer",
    ),
    (
        "rank over 64",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1] parameter(0)\n}\n",
        3,
        145,
        "rank exceeds the supported maximum of 64",
    ),
    (
        "dimension too large",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[99999999999999999999] parameter(0)\n}\n",
        3,
        17,
        "a dimension size is too large",
    ),
    (
        "missing paren after opcode",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] negate %b\n}\n",
        3,
        26,
        "expected '(' after opcode 'negate', found '%'",
    ),
    (
        "operand separator",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] add(%a %a)\n}\n",
        4,
        26,
        "expected ',' or ')' after operand %a, found '%'",
    ),
    (
        "bad parameter number",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(x)\n}\n",
        3,
        29,
        "expected a parameter number, found 'x'",
    ),
    (
        "negative parameter",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(-1)\n}\n",
        3,
        29,
        "parameter number -1 is out of range",
    ),
    (
        "attr without equals",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[2]{0} broadcast(%a), dimensions\n}\n",
        4,
        48,
        "expected '=' after attribute name 'dimensions', found '}'",
    ),
    (
        "attr name missing",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[2]{0} broadcast(%a), ={0}\n}\n",
        4,
        38,
        "expected an attribute name after ',', found '='",
    ),
    (
        "duplicate attribute",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[2]{0} broadcast(%a), dimensions={}, dimensions={}\n}\n",
        4,
        53,
        "duplicate attribute 'dimensions'",
    ),
    (
        "bad slice",
        "HloModule m\nENTRY %main {\n  %a = f32[4]{0} parameter(0)\n  ROOT %b = f32[2]{0} slice(%a), slice={[0;2]}\n}\n",
        4,
        43,
        "expected ':' after the slice start, found ';'",
    ),
    (
        "bad padding",
        "HloModule m\nENTRY %main {\n  %a = f32[4]{0} parameter(0)\n  %z = f32[] constant(0)\n  ROOT %b = f32[6]{0} pad(%a, %z), padding=1-1\n}\n",
        5,
        45,
        "expected '_' between low and high padding, found '-'",
    ),
    (
        "bad dim_labels",
        "HloModule m\nENTRY %main {\n  %a = f32[1,2,2,1]{3,2,1,0} parameter(0)\n  %k = f32[1,1,1,1]{3,2,1,0} parameter(1)\n  ROOT %c = f32[1,2,2,1]{3,2,1,0} convolution(%a, %k), window={size=1x1}, dim_labels=b01f_01io->bf\n}\n",
        5,
        86,
        "invalid dim_labels 'b01f_01io->bf': the three parts have different numbers of spatial dimensions",
    ),
    (
        "bad bool",
        "HloModule m\nENTRY %main {\n  %a = f32[4]{0} parameter(0)\n  ROOT %s = f32[4]{0} sort(%a), dimensions={0}, is_stable=maybe\n}\n",
        4,
        59,
        "expected 'true' or 'false' for 'is_stable', found 'm'",
    ),
    (
        "body without brace",
        "HloModule m\nENTRY %main (a: f32[]) -> f32[]\n  ROOT %a = f32[] parameter(0)\n",
        3,
        3,
        "expected '{' to start the body of computation %main, found 'R'",
    ),
    (
        "no instructions",
        "HloModule m\nENTRY %main {\n}\n",
        3,
        1,
        "computation %main has no instructions",
    ),
    (
        "trailing garbage",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n}\n",
        5,
        1,
        "expected a computation name or 'ENTRY', found '}'",
    ),
    (
        "ecl missing arrow",
        "HloModule m, entry_computation_layout={(f32[])f32[]}\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n",
        1,
        47,
        "expected '->' before the result shape of entry_computation_layout, found 'f'",
    ),
    (
        "io alias bad kind",
        "HloModule m, input_output_alias={ {0}: (0, {}, maybe-alias) }\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n",
        1,
        48,
        "expected 'may-alias' or 'must-alias', found 'm'",
    ),
    (
        "filenames missing string",
        "HloModule m\n\nFileNames\n1 jax.py\n\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n",
        4,
        3,
        "expected a quoted string, found 'j'",
    ),
    (
        "filelocations unknown key",
        "HloModule m\n\nFileLocations\n1 {file_name_id=1 row=3}\n\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n",
        4,
        19,
        "unknown FileLocations field 'row'",
    ),
    (
        "unknown control predecessor",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] negate(%a), control-predecessors={%ghost}\n}\n",
        4,
        53,
        "unknown control predecessor %ghost",
    ),
    (
        "signature mismatch",
        "HloModule m\nENTRY %main (a: f32[]) -> f32[2] {\n  ROOT %a = f32[] parameter(0)\n}\n",
        2,
        27,
        "the result shape f32[2] of computation %main does not match the shape f32[] of its root %a",
    ),
    (
        "execution thread not string",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}, execution_thread=main\n",
        4,
        21,
        "expected a quoted string, found 'm'",
    ),
    (
        "layout constraint bad shape",
        "HloModule m\nENTRY %main {\n  %a = f32[2]{0} parameter(0)\n  ROOT %c = f32[2]{0} custom-call(%a), custom_call_target=\"x\", operand_layout_constraints={f32[2]{0,1}}\n}\n",
        4,
        98,
        "Dimensions size is 1, but minor to major size is 2.",
    ),
    (
        "aliasing malformed",
        "HloModule m\nENTRY %main {\n  %a = f32[2]{0} parameter(0)\n  ROOT %c = f32[2]{0} custom-call(%a), custom_call_target=\"x\", output_to_operand_aliasing={{}: 0}\n}\n",
        4,
        96,
        "expected '(' to start an operand alias, found '0'",
    ),
    (
        "duplicate computation",
        "HloModule m\n%c {\n  ROOT %x = f32[] constant(0)\n}\nENTRY %c {\n  ROOT %y = f32[] constant(0)\n}\n",
        5,
        7,
        "duplicate computation name %c",
    ),
    (
        "lone slash",
        "HloModule m\nENTRY %main {\n  %a = f32[] parameter(0)\n  ROOT %b = f32[] add(%a / %a)\n}\n",
        4,
        26,
        "expected ',' or ')' after operand %a, found '/'",
    ),
    (
        "mismatched brackets",
        "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0), sharding={devices=[2,1)0,1}\n}\n",
        3,
        55,
        "expected ']' in attribute 'sharding', found ')'",
    ),
    (
        "tuple shape separator",
        "HloModule m\nENTRY %main {\n  ROOT %a = (f32[] s32[]) parameter(0)\n}\n",
        3,
        20,
        "expected ',' or ')' in a tuple shape",
    ),
    (
        "duplicate header attr",
        "HloModule m, replica_count=1, replica_count=2\nENTRY %main {\n  ROOT %a = f32[] parameter(0)\n}\n",
        1,
        31,
        "duplicate header attribute 'replica_count'",
    ),
];

fn check(name: &str, text: &str, line: u32, col: u32, message: &str) -> Result<(), String> {
    match parse_module(text, "t.hlo") {
        Ok(_) => Err(format!("{name}: parsed, but an error was expected")),
        Err(e) if !e.message.contains(message) => Err(format!(
            "{name}: message '{}' does not contain '{message}'",
            e.message
        )),
        Err(e) if (e.line, e.col) != (line, col) => Err(format!(
            "{name}: error at {}:{}, expected {line}:{col}: {}",
            e.line, e.col, e.message
        )),
        Err(_) => Ok(()),
    }
}

#[test]
fn malformed_inputs_report_message_and_position() {
    assert!(CASES.len() >= 40, "{} cases", CASES.len());
    let failures: Vec<String> = CASES
        .iter()
        .filter_map(|&(n, t, l, c, m)| check(n, t, l, c, m).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let n = 100_000;
    // A tuple shape nested far beyond the limit.
    let text = format!(
        "HloModule m\nENTRY %main {{\n  ROOT %a = {}f32[]{} parameter(0)\n}}\n",
        "(".repeat(n),
        ")".repeat(n)
    );
    let e = parse_module(&text, "t").unwrap_err();
    assert!(
        e.message.contains("nesting is deeper than 256 levels"),
        "{}",
        e.message
    );
    assert_eq!((e.line, e.col), (3, 13 + MAX_NESTING as u32));
    // Braces in a verbatim attribute value.
    let text = format!(
        "HloModule m\nENTRY %main {{\n  ROOT %a = f32[] parameter(0), metadata={}{}\n}}\n",
        "{".repeat(n),
        "}".repeat(n)
    );
    let e = parse_module(&text, "t").unwrap_err();
    assert!(e.message.contains("nesting is deeper"), "{}", e.message);
    assert_eq!((e.line, e.col), (3, 42 + MAX_NESTING as u32));
    // Parentheses in a constant's literal.
    let text = format!(
        "HloModule m\nENTRY %main {{\n  ROOT %a = f32[] constant({}1{})\n}}\n",
        "(".repeat(n),
        ")".repeat(n)
    );
    let e = parse_module(&text, "t").unwrap_err();
    assert!(e.message.contains("nesting is deeper"), "{}", e.message);
    // Layouts nest through physical shapes: P(f32[1]{0:P(...)}).
    let text = format!(
        "HloModule m\nENTRY %main {{\n  ROOT %a = f32[1]{{0:{}f32[1]{}}} parameter(0)\n}}\n",
        "P(f32[1]{0:".repeat(n),
        ")}".repeat(n)
    );
    let e = parse_module(&text, "t").unwrap_err();
    assert!(e.message.contains("nesting is deeper"), "{}", e.message);
    // A tuple nested just below the limit parses, prints, reparses and
    // verifies on a test thread's small stack.
    let depth = MAX_NESTING - 2;
    let shape = format!("{}f32[]{}", "(".repeat(depth), ")".repeat(depth));
    let text = format!(
        "HloModule m, entry_computation_layout={{({shape})->{shape}}}\n\nENTRY %main (p: {shape}) -> {shape} {{\n  ROOT %p = {shape} parameter(0)\n}}\n\n"
    );
    let m = parse_module(&text, "t").unwrap();
    assert_eq!(hlo::print_module(&m), text);
    assert!(hlo::verify_module(&m).is_empty());
    // Exactly at the limit is fine.
    let ok = format!(
        "HloModule m\nENTRY %main {{\n  ROOT %a = f32[] parameter(0), metadata={}{}\n}}\n",
        "{".repeat(MAX_NESTING),
        "}".repeat(MAX_NESTING)
    );
    assert!(parse_module(&ok, "t").is_ok());
}

#[test]
fn invalid_utf8_is_reported_with_its_position() {
    let bytes = b"HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0), metadata={op_name=\"\xff\"}\n}\n";
    let e = parse_module_bytes(bytes, "bytes.hlo").unwrap_err();
    assert_eq!((e.line, e.col), (3, 52));
    assert_eq!(
        e.message,
        "invalid UTF-8: byte 0xff does not start a valid character"
    );
    assert!(
        e.to_string()
            .starts_with("bytes.hlo:3:52: error: invalid UTF-8")
    );
}

#[test]
fn display_shows_file_line_column_source_and_caret() {
    let e = parse_module(
        "HloModule m\nENTRY %main {\n  %x f32[] constant(0)\n}\n",
        "dir/x.hlo",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "dir/x.hlo:3:6: error: expected '=' after instruction name %x, found 'f'\n  %x f32[] constant(0)\n     ^"
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let text = "HloModule m\nENTRY %main {\n  ROOT %a = f32[] parameter(0), metadata={op_name=\"\u{e9}\u{e9}\"} %\n}\n";
    let e = parse_module(text, "t").unwrap_err();
    // The stray `%` is at byte column 59 but character column 57.
    assert_eq!((e.line, e.col), (3, 57), "{}", e.message);
}

/// The files under `testdata/errors/`, with what each must report. Leading
/// `//` lines (RUN lines a golden harness may add) are stripped first.
const FILES: &[(&str, u32, u32, &str)] = &[
    (
        "bad_element_type.hlo",
        4,
        13,
        "expected an element type such as f32 or bf16, found 'f33'",
    ),
    (
        "bad_integer.hlo",
        5,
        50,
        "expected an integer in 'dimensions', found 'x'",
    ),
    (
        "deep_tile_nest.hlo",
        4,
        71,
        "more than 8 tiling levels; at most 8 are supported",
    ),
    ("duplicate_name.hlo", 5, 3, "duplicate instruction name %a"),
    (
        "empty.hlo",
        1,
        1,
        "expected 'HloModule' at the start of the module",
    ),
    (
        "layout_rank_mismatch.hlo",
        4,
        21,
        "Dimensions size is 2, but minor to major size is 1.",
    ),
    (
        "minus_one_tile.hlo",
        4,
        28,
        "tile 0 entry 0 is -1; tile sizes must be positive or '*'",
    ),
    (
        "missing_equals.hlo",
        4,
        6,
        "expected '=' after instruction name %x",
    ),
    (
        "missing_opcode.hlo",
        5,
        19,
        "expected an opcode after the shape of %b",
    ),
    (
        "overflowing_shape.hlo",
        4,
        13,
        "has more elements than fit in a 64-bit integer",
    ),
    (
        "storage_overflow.hlo",
        4,
        13,
        "needs more storage than a 64-bit size can count: the buffer size in bytes overflows 64 bits",
    ),
    (
        "tile_padding_overflow.hlo",
        4,
        13,
        "needs more storage than a 64-bit size can count: a padded dimension overflows 64 bits",
    ),
    (
        "two_entry.hlo",
        7,
        1,
        "a second ENTRY computation: %a is already the entry",
    ),
    (
        "two_root.hlo",
        5,
        3,
        "a second ROOT instruction %b in computation %main",
    ),
    (
        "undefined_computation.hlo",
        6,
        60,
        "computation %sum is not defined",
    ),
    ("unknown_operand.hlo", 5, 27, "unknown operand %foo"),
    (
        "unterminated_body.hlo",
        5,
        1,
        "expected '}' to close computation %main",
    ),
    ("unterminated_comment.hlo", 4, 3, "unterminated comment"),
    ("unterminated_string.hlo", 4, 51, "unterminated string"),
];

#[test]
fn error_files_report_message_and_position() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/errors");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hlo"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
    assert_eq!(
        on_disk, listed,
        "every file under testdata/errors needs an expectation"
    );
    assert!(FILES.len() >= 10);
    let mut failures = Vec::new();
    for &(file, line, col, message) in FILES {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        if let Err(f) = check(
            file,
            hlo::strip_leading_comment_lines(&text),
            line,
            col,
            message,
        ) {
            failures.push(f);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
