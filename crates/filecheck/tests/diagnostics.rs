//! The exact diagnostics, including `file:line:col`, the quoted line and the
//! caret/tilde line, for cases chosen to stress LLVM's column conventions.
//!
//! Every expectation below is the stderr of LLVM 14's FileCheck
//! (`/usr/lib/llvm-14/bin/FileCheck check.txt --dump-input=never`, input on
//! standard input) for the same check file and input, pasted verbatim. Do
//! not refresh them with `UPDATE_EXPECT=1` unless LLVM's output changed too.

use expect_test::{Expect, expect};
use filecheck::{Options, check};

fn diagnostics(check_text: &str, input: &str, opts: &Options) -> String {
    match check(check_text, "check.txt", input, "<stdin>", opts) {
        Ok(()) => String::new(),
        Err(failure) => failure.to_string(),
    }
}

fn assert_llvm(check_text: &str, input: &str, opts: &Options, llvm: Expect) {
    llvm.assert_eq(&diagnostics(check_text, input, opts));
}

#[test]
fn tabs_in_the_check_file_are_canonicalized_before_columns_are_counted() {
    assert_llvm(
        "\tCHECK:\tfoo  bar\n",
        "nothing\n",
        &Options::default(),
        expect![[r#"
            check.txt:1:9: error: CHECK: expected string not found in input
             CHECK: foo bar
                    ^
            <stdin>:1:1: note: scanning from here
            nothing
            ^
        "#]],
    );
}

#[test]
fn scanning_starts_at_the_end_of_the_previous_line() {
    assert_llvm(
        "CHECK: abc\nCHECK: xyz\n",
        "abc\nabd\n",
        &Options::default(),
        expect![[r#"
            check.txt:2:8: error: CHECK: expected string not found in input
            CHECK: xyz
                   ^
            <stdin>:1:4: note: scanning from here
            abc
               ^
        "#]],
    );
}

#[test]
fn a_match_range_is_clipped_to_its_first_line() {
    assert_llvm(
        "CHECK: start\nCHECK-NOT: a{{[[:space:]]}}b\nCHECK: end\n",
        "start\nxa\nb\nend\n",
        &Options::default(),
        expect![[r#"
            check.txt:2:12: error: CHECK-NOT: excluded string found in input
            CHECK-NOT: a{{[[:space:]]}}b
                       ^
            <stdin>:2:2: note: found here
            xa
             ^
        "#]],
    );
}

#[test]
fn next_on_the_same_line_points_at_both_ends() {
    assert_llvm(
        "  // CHECK: foo\n  // CHECK-NEXT: bar\n",
        "foo bar\n",
        &Options::default(),
        expect![[r#"
            check.txt:2:17: error: CHECK-NEXT: is on the same line as previous match
             // CHECK-NEXT: bar
                            ^
            <stdin>:1:5: note: 'next' match was here
            foo bar
                ^
            <stdin>:1:4: note: previous match ended here
            foo bar
               ^
        "#]],
    );
}

#[test]
fn implicit_check_not_points_into_a_fake_command_line() {
    let opts = Options {
        implicit_check_not: vec!["error:".to_string()],
        ..Options::default()
    };
    assert_llvm(
        "CHECK: a\n",
        "a\nerror: bad\n",
        &opts,
        expect![[r#"
            command line:1:22: error: CHECK-NOT: excluded string found in input
            -implicit-check-not='error:'
                                 ^
            <stdin>:2:1: note: found here
            error: bad
            ^~~~~~
        "#]],
    );
}

#[test]
fn expression_errors_are_followed_by_a_blank_line() {
    assert_llvm(
        "CHECK: [[#%z,N:]]\n",
        "x\n",
        &Options::default(),
        expect![[r#"
            check.txt:1:12: error: invalid format specifier in expression
            CHECK: [[#%z,N:]]
                       ^

        "#]],
    );
}

#[test]
fn count_failures_say_which_repetition_failed() {
    assert_llvm(
        "CHECK-COUNT-3: {{a+}}b\n",
        "ab\naab\nb\n",
        &Options::default(),
        expect![[r#"
            check.txt:1:16: error: CHECK-COUNT: expected string not found in input (3 out of 3)
            CHECK-COUNT-3: {{a+}}b
                           ^
            <stdin>:2:4: note: scanning from here
            aab
               ^
            <stdin>:3:1: note: possible intended match here
            b
            ^
        "#]],
    );
}
