//! The reproductions of issue 14 through HTTP: an input that is not well
//! formed (a bitcast that changes the buffer size, a reducer whose
//! signature does not fit its reduce, storage that overflows 64 bits) is a
//! 4xx with a JSON error that says where, on the stateless route, when a
//! session is created and when one is edited (the session keeps the module
//! it had); and an s4 to s8 convert on tpu gets s8 layouts.

mod common;

use common::*;
use serde_json::{Value, json};
use server::Config;

/// Asserts a 422 `invalid_module` whose every problem is located at
/// `file:line:col` and one of which contains `needle`.
#[track_caller]
fn invalid_at(a: &Answer, file: &str, line: u32, col: u32, needle: &str) {
    let e = a.error(422, "invalid_module");
    let problems = e["problems"].as_array().expect("a list of problems");
    let at = format!("{file}:{line}:{col}: error: ");
    assert!(
        !problems.is_empty()
            && problems
                .iter()
                .all(|p| p.as_str().is_some_and(|p| p.starts_with(&at))),
        "{e}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.contains(needle))),
        "{e}"
    );
}

/// Asserts a 400 `parse_error` at `file:line:col` whose message contains `needle`.
#[track_caller]
fn parse_error_at(a: &Answer, file: &str, line: u64, col: u64, needle: &str) {
    let e = a.error(400, "parse_error");
    assert_eq!(
        (e["file"].as_str(), e["line"].as_u64(), e["col"].as_u64()),
        (Some(file), Some(line), Some(col)),
        "{e}"
    );
    assert!(
        e["message"].as_str().is_some_and(|m| m.contains(needle)),
        "{e}"
    );
}

const BITCAST: &str =
    "bitcast from f32[3,5]{1,0} (60 bytes) to f32[16]{0} (64 bytes) changes the buffer size";
const REDUCER: &str = "computation %add (to_apply) takes f32[4] as parameter 0, but reduce applies it to f32[] elements";
const OVERFLOW: &str = "needs more storage than a 64-bit size can count";

#[tokio::test]
async fn malformed_inputs_are_refused_where_they_are_on_the_stateless_route() {
    let (router, _) = app(Config::default());
    for target in ["cpu", "gpu", "tpu"] {
        let post = |file: &str| {
            request(
                "POST",
                &format!("/v1/layout-assignment?target={target}"),
                Some("text/plain"),
                testdata(file),
            )
        };
        invalid_at(
            &call(&router, post("pipeline/bitcast_changes_size.hlo")).await,
            "request.hlo",
            15,
            8,
            BITCAST,
        );
        invalid_at(
            &call(&router, post("pipeline/reducer_signature.hlo")).await,
            "request.hlo",
            20,
            8,
            REDUCER,
        );
        parse_error_at(
            &call(&router, post("errors/storage_overflow.hlo")).await,
            "request.hlo",
            8,
            13,
            OVERFLOW,
        );
        parse_error_at(
            &call(&router, post("errors/tile_padding_overflow.hlo")).await,
            "request.hlo",
            8,
            13,
            OVERFLOW,
        );
    }
    // Without the output verifier too: the input is always checked.
    let body = json!({ "module": testdata("pipeline/bitcast_changes_size.hlo"), "options": { "verify": false } });
    let a = call(
        &router,
        request(
            "POST",
            "/v1/layout-assignment",
            Some("application/json"),
            body.to_string(),
        ),
    )
    .await;
    invalid_at(&a, "request.hlo", 15, 8, BITCAST);
}

#[tokio::test]
async fn malformed_modules_never_become_sessions() {
    let (router, _) = app(Config::default());
    let put = |file: &str| {
        request(
            "PUT",
            "/v1/modules/bad?target=tpu",
            Some("text/plain"),
            testdata(file),
        )
    };
    invalid_at(
        &call(&router, put("pipeline/bitcast_changes_size.hlo")).await,
        "modules/bad",
        15,
        8,
        BITCAST,
    );
    invalid_at(
        &call(&router, put("pipeline/reducer_signature.hlo")).await,
        "modules/bad",
        20,
        8,
        REDUCER,
    );
    parse_error_at(
        &call(&router, put("errors/storage_overflow.hlo")).await,
        "modules/bad",
        8,
        13,
        OVERFLOW,
    );
    parse_error_at(
        &call(&router, put("errors/tile_padding_overflow.hlo")).await,
        "modules/bad",
        8,
        13,
        OVERFLOW,
    );
    call(&router, get("/v1/modules/bad"))
        .await
        .error(404, "session_not_found");
}

/// A module with a reducer and a called computation, both well formed.
const GOOD: &str = "HloModule good

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%view (q: f32[3,5]) -> f32[15] {
  %q = f32[3,5]{1,0} parameter(0)
  ROOT %c = f32[15]{0} bitcast(%q)
}

ENTRY %main (x: f32[8,16], y: f32[3,5]) -> (f32[8], f32[15]) {
  %x = f32[8,16]{1,0} parameter(0)
  %y = f32[3,5]{1,0} parameter(1)
  %z = f32[] constant(0)
  %r = f32[8]{0} reduce(%x, %z), dimensions={1}, to_apply=%add
  %v = f32[15]{0} call(%y), to_apply=%view
  ROOT %t = (f32[8]{0}, f32[15]{0}) tuple(%r, %v)
}
";

#[tokio::test]
async fn an_edit_that_makes_a_session_malformed_is_refused_and_the_session_keeps_its_module() {
    let (router, _) = app(Config::default());
    let a = call(
        &router,
        request("PUT", "/v1/modules/s?target=tpu", Some("text/plain"), GOOD),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.text());
    let run = || request("POST", "/v1/modules/s/layout-assignment", None, "");
    let before = call(&router, run()).await;
    assert_eq!(before.status, 200, "{}", before.text());
    let patch = |name: &str, text: &str| {
        request(
            "PATCH",
            "/v1/modules/s",
            Some("application/json"),
            json!({ "computations": { name: text } }).to_string(),
        )
    };
    // Lines and columns are the module's, after the edit: %add starts on
    // line 3, %view on line 9.
    let reducer = "%add (a: f32[4], b: f32[4]) -> f32[4] {\n  %a = f32[4]{0} parameter(0)\n  %b = f32[4]{0} parameter(1)\n  ROOT %s = f32[4]{0} add(%a, %b)\n}";
    invalid_at(
        &call(&router, patch("add", reducer)).await,
        "modules/s",
        18,
        3,
        "takes f32[4] as parameter 0, but reduce applies it to f32[] elements",
    );
    let bitcast = "%view (q: f32[3,5]) -> f32[16] {\n  %q = f32[3,5]{1,0} parameter(0)\n  ROOT %c = f32[16]{0} bitcast(%q)\n}";
    let a = call(&router, patch("view", bitcast)).await;
    let e = a.error(422, "invalid_module");
    let problems: Vec<&str> = e["problems"]
        .as_array()
        .expect("problems")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("modules/s:11:")
                && p.contains("(60 bytes) to f32[16]{0} (64 bytes)")),
        "{e}"
    );
    let overflow = "%view (q: f32[3,5]) -> f32[15] {\n  %q = f32[3,5]{1,0:T(9223372036854775807,9223372036854775807)} parameter(0)\n  ROOT %c = f32[15]{0} bitcast(%q)\n}";
    parse_error_at(
        &call(&router, patch("view", overflow)).await,
        "modules/s",
        10,
        8,
        OVERFLOW,
    );
    // Nothing of the refused edits stays.
    let after = call(&router, run()).await;
    assert_eq!(after.status, 200, "{}", after.text());
    assert_eq!(after.json()["module"], before.json()["module"]);
}

#[tokio::test]
async fn an_s4_to_s8_convert_on_tpu_gets_s8_layouts() {
    let (router, _) = app(Config::default());
    let text = testdata("tpu/convert_s4_to_s8.hlo");
    for expand in [false, true] {
        let uri = format!("/v1/layout-assignment?target=tpu&expand_relayouts={expand}");
        let a = call(
            &router,
            request("POST", &uri, Some("text/plain"), text.clone()),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let module = a.json()["module"].as_str().expect("the module").to_string();
        assert!(
            module.contains("ROOT %c = s8[257,33]{1,0:T(8,128)(4,1)} convert("),
            "{module}"
        );
        assert!(
            module.contains("->s8[257,33]{1,0:T(8,128)(4,1)}}"),
            "{module}"
        );
        for line in module.lines().filter(|l| l.contains("s8[")) {
            assert!(
                !line.contains("E(4)") || !line.contains("= s8["),
                "an s8 value with 4-bit slots: {line}"
            );
        }
    }
    // And in a session.
    let a = call(
        &router,
        request("PUT", "/v1/modules/c?target=tpu", Some("text/plain"), text),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.text());
    let a = call(
        &router,
        request("POST", "/v1/modules/c/layout-assignment", None, ""),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(
        a.json()["module"]
            .as_str()
            .is_some_and(|m| m.contains("ROOT %c = s8[257,33]{1,0:T(8,128)(4,1)} convert("))
    );
}
