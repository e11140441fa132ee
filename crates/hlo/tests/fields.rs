//! Field by field: a module that uses every construct the parser knows
//! keeps each field through parse → print → parse, compared as `Module`s,
//! not as text.

use hlo::{
    AliasKind, AttrKey, AttrValue, CompId, Computation, InstId, KnownAttr, Module, Opcode, PadDim,
    Payload, SliceDim, diff_modules, parse_module, print_module, verify_module,
};

const RICH: &str = r#"HloModule rich, is_scheduled=true, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {}) }, entry_computation_layout={(f32[8,16]{1,0}, f32[16]{0}, s32[], f32[4,4]{0,1:T(2,2)})->(f32[8,16]{1,0}, f32[16])}, allow_spmd_sharding_propagation_to_parameters={false,false,false,false}, replica_count=2, frontend_attributes={xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}, some_future_attr="x"

FileNames
1 "a.py"
2 "b\"q.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=4 column=5 end_column=6}

StackFrames
1 {file_location_id=1 parent_frame_id=0}


%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(%x, %y)
}

%lt_cmp (p.c: f32[], q.c: f32[]) -> pred[] {
  %p.c = f32[] parameter(0)
  %q.c = f32[] parameter(1)
  ROOT %lt.c = pred[] compare(%p.c, %q.c), direction=LT
}

%cond (s: (s32[], f32[16])) -> pred[] {
  %s = (s32[], f32[16]{0}) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (s.1: (s32[], f32[16])) -> (s32[], f32[16]) {
  %s.1 = (s32[], f32[16]{0}) parameter(0)
  %i.1 = s32[] get-tuple-element(%s.1), index=0
  %v = f32[16]{0} get-tuple-element(%s.1), index=1
  %one = s32[] constant(1)
  %i.2 = s32[] add(%i.1, %one)
  ROOT %t = (s32[], f32[16]{0}) tuple(%i.2, %v)
}, execution_thread="side"

ENTRY %main (a: f32[8,16], b: f32[16], c: s32[], d: f32[4,4]) -> (f32[8,16], f32[16]) {
  %a = f32[8,16]{1,0} parameter(0), sharding={replicated}, metadata={op_name="a\"b"}
  %b = f32[16]{0} parameter(1)
  %c = s32[] parameter(2)
  %d = f32[4,4]{0,1:T(2,2)} parameter(3)
  %zero = f32[] constant(0)
  %bc = f32[8,16]{1,0} broadcast(%b), dimensions={1}
  %sum.1 = f32[8,16]{1,0} add(%a, %bc), metadata={op_name="jit(f)/add" source_file="a.py" source_line=3}, backend_config={"k":[1,2]}
  %red = f32[16]{0} reduce(%sum.1, %zero), dimensions={0}, to_apply=%add, frontend_attributes={_x="1"}
  %sl = f32[4,8]{1,0} slice(%sum.1), slice={[0:8:2], [0:16:2]}
  %pd = f32[10,16]{1,0} pad(%sl, %zero), padding=1_2_1x3_5_0
  %dot = f32[8,8]{1,0} dot(%a, %a), lhs_contracting_dims={1}, rhs_contracting_dims={1}, operand_precision={high,high}
  %init = (s32[], f32[16]{0}) tuple(%c, %red)
  %w = (s32[], f32[16]{0}) while(%init), condition=%cond, body=%body, backend_config="{\"known_trip_count\":{\"n\":\"10\"}}"
  %wv = f32[16]{0} get-tuple-element(%w), index=1
  %cc = f32[4,4]{1,0} custom-call(%d), custom_call_target="Sharding", operand_layout_constraints={f32[4,4]{0,1}}, output_to_operand_aliasing={{}: (0, {})}, api_version=API_VERSION_TYPED_FFI
  %x4 = f32[1,4,4,1]{3,2,1,0} reshape(%d)
  %k = f32[1,1,1,1]{3,2,1,0} constant({ { { {1} } } })
  %conv = f32[1,4,4,1]{3,2,1,0} convolution(%x4, %k), window={size=1x1}, dim_labels=b01f_01io->b01f
  %ds = f32[2,8]{1,0} dynamic-slice(%a, %c, %c), dynamic_slice_sizes={2,8}
  %fut = f32[8,16]{1,0} frobnicate(%a, %bc), new_attr={x, y}
  %iota = s32[8]{0} iota(), iota_dimension=0
  %sort = f32[16]{0} sort(%wv), dimensions={0}, is_stable=true, to_apply=%lt_cmp
  %t6 = (f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[]) tuple(%zero, %zero, %zero, %zero, %zero, /*index=5*/%zero)
  ROOT %out = (f32[8,16]{1,0}, f32[16]{0}) tuple(%sum.1, %wv), control-predecessors={%dot, %cc}
}

"#;

fn find<'a>(c: &'a Computation, name: &str) -> (InstId, &'a hlo::Instruction) {
    c.instructions()
        .find(|(_, i)| i.name == name)
        .unwrap_or_else(|| panic!("no %{name}"))
}

fn names(c: &Computation, ids: &[InstId]) -> Vec<String> {
    ids.iter().map(|&i| c.inst(i).name.clone()).collect()
}

fn comp<'a>(m: &'a Module, name: &str) -> &'a Computation {
    m.computation(m.find_computation(name).unwrap())
}

#[test]
fn rich_module_round_trips_and_verifies() {
    let m = parse_module(RICH, "rich.hlo").unwrap();
    assert_eq!(print_module(&m), RICH);
    let again = parse_module(&print_module(&m), "rich.hlo").unwrap();
    assert_eq!(diff_modules(&m, &again), None);
    let problems = verify_module(&m);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn every_field_survives_the_round_trip() {
    let first = parse_module(RICH, "rich.hlo").unwrap();
    let m = parse_module(&print_module(&first), "rich.hlo").unwrap();

    // Header.
    assert_eq!(m.name, "rich");
    assert!(m.is_scheduled);
    assert!(m.entry_computation_layout_given);
    assert_eq!(m.input_output_alias.len(), 2);
    assert_eq!(m.input_output_alias[0].kind, Some(AliasKind::Must));
    assert_eq!(m.input_output_alias[1].kind, None);
    assert_eq!(m.input_output_alias[1].parameter, 1);
    let header: Vec<(&str, &str)> = m
        .header_attrs
        .iter()
        .map(|a| (&*a.name, &*a.value))
        .collect();
    assert_eq!(
        header,
        [
            (
                "allow_spmd_sharding_propagation_to_parameters",
                "{false,false,false,false}"
            ),
            ("replica_count", "2"),
            (
                "frontend_attributes",
                "{xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}"
            ),
            ("some_future_attr", "\"x\""),
        ]
    );
    let ecl = &m.entry_computation_layout;
    assert_eq!(ecl.parameters.len(), 4);
    assert_eq!(ecl.parameters[3].to_string(), "f32[4,4]{0,1:T(2,2)}");
    // The second result leaf was written without a layout: AUTO.
    let result = ecl.result.tuple_elements().unwrap();
    assert!(result[0].as_array().unwrap().layout.is_some());
    assert!(result[1].as_array().unwrap().layout.is_none());

    // Tables, strings with their escapes.
    let t = &m.debug_tables;
    assert_eq!(
        t.file_names,
        vec![(1, "a.py".into()), (2, "b\\\"q.py".into())]
    );
    assert_eq!(t.function_names, vec![(1, "f".into())]);
    assert_eq!(t.file_locations[0].end_column, 6);
    assert_eq!(
        (
            t.stack_frames[0].file_location_id,
            t.stack_frames[0].parent_frame_id
        ),
        (1, 0)
    );

    // Computations and signatures.
    let comp_names: Vec<&str> = m.computations.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(comp_names, ["add", "lt_cmp", "cond", "body", "main"]);
    assert_eq!(m.entry, CompId(4));
    assert_eq!(comp(&m, "body").execution_thread.as_deref(), Some("side"));
    let printed = print_module(&m);
    assert!(printed.contains("\n%cond (s: (s32[], f32[16])) -> pred[] {\n"));
    assert!(printed.contains("\nENTRY %main (a: f32[8,16], b: f32[16], c: s32[], d: f32[4,4]) -> (f32[8,16], f32[16]) {\n"));

    let main = comp(&m, "main");
    assert_eq!(main.len(), 24);
    assert_eq!(main.inst(main.root().unwrap()).name, "out");
    // Parameters and shapes with layouts (tiles included; scalars without).
    let (_, d) = find(main, "d");
    assert_eq!(d.payload, Payload::Parameter(3));
    assert_eq!(d.shape.to_string(), "f32[4,4]{0,1:T(2,2)}");
    let (_, c) = find(main, "c");
    assert!(c.shape.as_array().unwrap().layout.is_none());
    // Sharding and metadata, verbatim.
    let (_, a) = find(main, "a");
    assert_eq!(
        a.attrs.get(KnownAttr::Sharding),
        Some(&AttrValue::Raw("{replicated}".into()))
    );
    assert_eq!(
        a.attrs.get(KnownAttr::Metadata),
        Some(&AttrValue::Raw("{op_name=\"a\\\"b\"}".into()))
    );
    // Operand order.
    let (dot_id, dot) = find(main, "dot");
    assert_eq!(names(main, main.operands(dot_id)), ["a", "a"]);
    assert_eq!(
        dot.attrs.ints(KnownAttr::LhsContractingDims),
        Some(&[1i64][..])
    );
    assert_eq!(
        dot.attrs.get_by_name("operand_precision"),
        Some(&AttrValue::Raw("{high,high}".into()))
    );
    let (ds_id, ds) = find(main, "ds");
    assert_eq!(names(main, main.operands(ds_id)), ["a", "c", "c"]);
    assert_eq!(
        ds.attrs.ints(KnownAttr::DynamicSliceSizes),
        Some(&[2i64, 8][..])
    );
    // Typed attributes.
    let (_, sum) = find(main, "sum.1");
    assert_eq!(
        sum.attrs.get(KnownAttr::BackendConfig),
        Some(&AttrValue::Raw("{\"k\":[1,2]}".into()))
    );
    let (_, red) = find(main, "red");
    assert_eq!(
        red.attrs.get(KnownAttr::ToApply),
        Some(&AttrValue::Computation(CompId(0)))
    );
    assert_eq!(
        red.attrs.get(KnownAttr::FrontendAttributes),
        Some(&AttrValue::Raw("{_x=\"1\"}".into()))
    );
    let (_, sl) = find(main, "sl");
    assert_eq!(
        sl.attrs.get(KnownAttr::Slice),
        Some(&AttrValue::Slice(vec![
            SliceDim {
                start: 0,
                limit: 8,
                stride: 2
            },
            SliceDim {
                start: 0,
                limit: 16,
                stride: 2
            }
        ]))
    );
    let (_, pd) = find(main, "pd");
    assert_eq!(
        pd.attrs.get(KnownAttr::Padding),
        Some(&AttrValue::Padding(vec![
            PadDim {
                low: 1,
                high: 2,
                interior: 1
            },
            PadDim {
                low: 3,
                high: 5,
                interior: 0
            }
        ]))
    );
    let (_, w) = find(main, "w");
    assert_eq!(
        w.attrs.get(KnownAttr::Condition),
        Some(&AttrValue::Computation(CompId(2)))
    );
    assert_eq!(
        w.attrs.get(KnownAttr::Body),
        Some(&AttrValue::Computation(CompId(3)))
    );
    assert_eq!(
        w.attrs.get(KnownAttr::BackendConfig),
        Some(&AttrValue::Raw(
            r#""{\"known_trip_count\":{\"n\":\"10\"}}""#.into()
        ))
    );
    let (_, cc) = find(main, "cc");
    assert_eq!(
        cc.attrs.string(KnownAttr::CustomCallTarget),
        Some("Sharding")
    );
    match cc.attrs.get(KnownAttr::OperandLayoutConstraints) {
        Some(AttrValue::Shapes(s)) => assert_eq!(s[0].to_string(), "f32[4,4]{0,1}"),
        other => panic!("{other:?}"),
    }
    match cc.attrs.get(KnownAttr::OutputToOperandAliasing) {
        Some(AttrValue::Aliasing(v)) => {
            assert_eq!(
                (
                    v[0].output_index.len(),
                    v[0].operand,
                    v[0].operand_index.len()
                ),
                (0, 0, 0)
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cc.attrs.get(KnownAttr::ApiVersion),
        Some(&AttrValue::Raw("API_VERSION_TYPED_FFI".into()))
    );
    let (_, conv) = find(main, "conv");
    match conv.attrs.get(KnownAttr::DimLabels) {
        Some(AttrValue::DimLabels(l)) => {
            assert_eq!(
                (&*l.text, l.input_feature, l.kernel_output_feature),
                ("b01f_01io->b01f", 3, 3)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        conv.attrs.get(KnownAttr::Window),
        Some(&AttrValue::Raw("{size=1x1}".into()))
    );
    let (_, k) = find(main, "k");
    assert_eq!(k.payload, Payload::Constant("{ { { {1} } } }".into()));
    let (_, fut) = find(main, "fut");
    assert_eq!(
        (fut.opcode, fut.opcode_name()),
        (Opcode::Unknown, "frobnicate")
    );
    assert_eq!(fut.attrs.0[0].key, AttrKey::Other("new_attr".into()));
    assert_eq!(fut.attrs.0[0].value, AttrValue::Raw("{x, y}".into()));
    let (_, iota) = find(main, "iota");
    assert_eq!(iota.attrs.int(KnownAttr::IotaDimension), Some(0));
    let (_, sort) = find(main, "sort");
    assert!(sort.attrs.flag(KnownAttr::IsStable));
    let (t6_id, _) = find(main, "t6");
    assert_eq!(main.operands(t6_id).len(), 6);
    // Control predecessors.
    let (_, out) = find(main, "out");
    assert_eq!(names(main, out.control_predecessors()), ["dot", "cc"]);
    // Other computations.
    let cond = comp(&m, "cond");
    let (_, lt) = find(cond, "lt");
    assert_eq!(
        lt.attrs.get(KnownAttr::Direction),
        Some(&AttrValue::Raw("LT".into()))
    );
    let (_, i) = find(cond, "i");
    assert_eq!(i.attrs.int(KnownAttr::Index), Some(0));
}

/// The comparison itself notices each kind of change.
#[test]
fn diff_notices_every_kind_of_change() {
    let m = parse_module(RICH, "rich.hlo").unwrap();
    let main = m.entry;
    type Mutation = Box<dyn Fn(&mut Module)>;
    let mutations: Vec<(&str, Mutation)> = vec![
        ("module name", Box::new(|m| m.name.push('x'))),
        (
            "header attribute",
            Box::new(|m| m.header_attrs[1].value = "3".into()),
        ),
        (
            "table row",
            Box::new(|m| m.debug_tables.file_locations[0].line += 1),
        ),
        (
            "io alias",
            Box::new(|m| m.input_output_alias.pop().map(drop).unwrap_or(())),
        ),
        (
            "execution thread",
            Box::new(|m| m.computations[3].execution_thread = None),
        ),
        (
            "instruction name",
            Box::new(move |m| {
                let id = first(m, main);
                m.computation_mut(main).inst_mut(id).name.push('x');
            }),
        ),
        (
            "layout",
            Box::new(move |m| {
                let id = first(m, main);
                let shape = &mut m.computation_mut(main).inst_mut(id).shape;
                shape.as_array_mut().unwrap().layout = Some(shape::Layout::new(&[0, 1]).into());
            }),
        ),
        (
            "operand",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (bc, _) = find(c, "bc");
                let (sum, _) = find(c, "sum.1");
                c.set_operand(sum, 0, bc).unwrap();
            }),
        ),
        (
            "attribute value",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (bc, _) = find(c, "bc");
                c.inst_mut(bc).attrs.set(
                    KnownAttr::Dimensions,
                    AttrValue::Ints([0].into_iter().collect()),
                );
            }),
        ),
        (
            "metadata",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (a, _) = find(c, "a");
                c.inst_mut(a).attrs.remove(KnownAttr::Metadata);
            }),
        ),
        (
            "control predecessor",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (a, _) = find(c, "a");
                let (b, _) = find(c, "b");
                c.add_control_dependency(a, b).unwrap();
            }),
        ),
        (
            "called computation",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (red, _) = find(c, "red");
                c.inst_mut(red)
                    .attrs
                    .set(KnownAttr::ToApply, AttrValue::Computation(CompId(1)));
            }),
        ),
        (
            "root",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (a, _) = find(c, "a");
                c.set_root(a).unwrap();
            }),
        ),
        (
            "payload",
            Box::new(move |m| {
                let c = m.computation_mut(main);
                let (k, _) = find(c, "k");
                c.inst_mut(k).payload = Payload::Constant("{ { { {2} } } }".into());
            }),
        ),
    ];
    for (what, mutate) in mutations {
        let mut changed = m.clone();
        mutate(&mut changed);
        assert!(
            diff_modules(&m, &changed).is_some(),
            "{what} went unnoticed"
        );
    }
}

fn first(m: &Module, comp: CompId) -> InstId {
    m.computation(comp).schedule()[0]
}

/// A pass may push attributes anywhere; the printer still prints XLA's
/// order, control predecessors in their place, and omits defaults.
#[test]
fn printer_orders_attributes_canonically() {
    let text = "HloModule m\nENTRY %main {\n  %a = f32[2]{0} parameter(0)\n  %b = f32[2]{0} negate(%a)\n  ROOT %s = f32[2]{0} sort(%b), dimensions={0}, to_apply=%main\n}\n";
    let mut m = parse_module(text, "t").unwrap();
    let main = m.entry;
    let c = m.computation_mut(main);
    let (s, _) = find(c, "s");
    let (a, _) = find(c, "a");
    c.add_control_dependency(a, s).unwrap();
    let attrs = &mut c.inst_mut(s).attrs.0;
    attrs.insert(
        0,
        hlo::Attr {
            key: AttrKey::Known(KnownAttr::Metadata),
            value: AttrValue::Raw("{op_name=\"x\"}".into()),
        },
    );
    attrs.push(hlo::Attr {
        key: AttrKey::Known(KnownAttr::Sharding),
        value: AttrValue::Raw("{replicated}".into()),
    });
    attrs.push(hlo::Attr {
        key: AttrKey::Known(KnownAttr::IsStable),
        value: AttrValue::Bool(false),
    });
    attrs.push(hlo::Attr {
        key: AttrKey::Other("origin".into()),
        value: AttrValue::Raw("{{\"s\"}}".into()),
    });
    let printed = print_module(&m);
    assert!(
        printed.contains(
            "ROOT %s = f32[2]{0} sort(%b), dimensions={0}, to_apply=%main, sharding={replicated}, \
             control-predecessors={%a}, origin={{\"s\"}}, metadata={op_name=\"x\"}\n"
        ),
        "{printed}"
    );
}
