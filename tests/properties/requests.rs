//! Generated requests of every agentd RPC through the services' checks
//! (`agentd::api::fuzzing`): never a panic; either accepted, or INVALID_ARGUMENT whose
//! BadRequest violations each name a real field of the request.
//!
//! The requests are built from the proto descriptors, so every field of every request message
//! (nested messages, oneofs, maps, `google.protobuf.Struct`) is covered, with odd strings,
//! edge numbers and unknown enum values.

use agentd::api::fuzzing::{METHODS, Outcome, decode_and_convert};
use proptest::prelude::*;
use proptest::strategy::Union;
use prost::Message as _;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value};
use tonic::Code;
use tonic_types::StatusExt;

use crate::field_paths;
use crate::strings::odd_string;

/// How deep generated messages nest (a Struct inside a Struct counts).
const DEPTH: u32 = 3;

/// The request descriptor of `package.Service/Method`.
fn input_of(method: &str) -> MessageDescriptor {
    let pool = agentd::pb::descriptor_pool().expect("descriptor pool");
    let (service, name) = method.split_once('/').expect("Service/Method");
    let service = pool.get_service_by_name(service).expect(service);
    let found = service.methods().find(|m| m.name() == name);
    found.expect(method).input()
}

fn int32() -> BoxedStrategy<i32> {
    prop_oneof![
        2 => prop::sample::select(vec![0, 1, 2, -1, 100, 101, 200, 201, 1000, i32::MAX, i32::MIN]),
        1 => any::<i32>(),
    ]
    .boxed()
}

fn int64() -> BoxedStrategy<i64> {
    prop_oneof![
        2 => prop::sample::select(vec![0, 1, -1, i64::MAX, i64::MIN, 1 << 40]),
        1 => any::<i64>(),
    ]
    .boxed()
}

fn float64() -> BoxedStrategy<f64> {
    prop_oneof![
        2 => prop::sample::select(vec![
            0.0, 0.5, 1.0, -1.0, 1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX,
        ]),
        1 => any::<f64>(),
    ]
    .boxed()
}

/// One value of a field's kind (an element, for a list).
fn value_of(kind: Kind, depth: u32) -> BoxedStrategy<Value> {
    match kind {
        Kind::Double => float64().prop_map(Value::F64).boxed(),
        Kind::Float => float64().prop_map(|f| Value::F32(f as f32)).boxed(),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => int32().prop_map(Value::I32).boxed(),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => int64().prop_map(Value::I64).boxed(),
        Kind::Uint32 | Kind::Fixed32 => int32().prop_map(|n| Value::U32(n as u32)).boxed(),
        Kind::Uint64 | Kind::Fixed64 => int64().prop_map(|n| Value::U64(n as u64)).boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Kind::String => odd_string().prop_map(Value::String).boxed(),
        Kind::Bytes => prop::collection::vec(any::<u8>(), 0..8)
            .prop_map(|b| Value::Bytes(b.into()))
            .boxed(),
        Kind::Enum(e) => {
            let known: Vec<i32> = e.values().map(|v| v.number()).collect();
            prop_oneof![
                4 => prop::sample::select(known),
                1 => int32(),
            ]
            .prop_map(Value::EnumNumber)
            .boxed()
        }
        Kind::Message(m) => message(&m, depth.saturating_sub(1))
            .prop_map(Value::Message)
            .boxed(),
    }
}

/// A generated value for one field: a list, a map or a single value.
fn field_value(field: &FieldDescriptor, depth: u32) -> BoxedStrategy<Value> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            unreachable!("a map field's kind is its entry message");
        };
        let value = value_of(entry.map_entry_value_field().kind(), depth);
        return prop::collection::vec((odd_string(), value), 0..3)
            .prop_map(|entries| {
                Value::Map(
                    entries
                        .into_iter()
                        .map(|(k, v)| (MapKey::String(k), v))
                        .collect(),
                )
            })
            .boxed();
    }
    let one = value_of(field.kind(), depth);
    if field.is_list() {
        prop::collection::vec(one, 0..4)
            .prop_map(Value::List)
            .boxed()
    } else {
        one
    }
}

/// Any message of this type, fields set or not, nested down to `depth`.
fn message(desc: &MessageDescriptor, depth: u32) -> BoxedStrategy<DynamicMessage> {
    let fields: Vec<BoxedStrategy<Option<(FieldDescriptor, Value)>>> = desc
        .fields()
        // At the bottom, message fields stay unset (recursive types end there).
        .filter(|f| depth > 0 || !matches!(f.kind(), Kind::Message(_)))
        .map(|f| {
            let value = field_value(&f, depth);
            prop::option::of(value.prop_map(move |v| (f.clone(), v))).boxed()
        })
        .collect();
    let desc = desc.clone();
    fields
        .prop_map(move |values| {
            let mut message = DynamicMessage::new(desc.clone());
            for (field, value) in values.into_iter().flatten() {
                // Setting a oneof's member clears its others, as on the wire.
                message.set_field(&field, value);
            }
            message
        })
        .boxed()
}

/// A method and one of its requests, encoded (the strategies are built once per test).
fn request() -> impl Strategy<Value = (&'static str, Vec<u8>)> {
    Union::new(METHODS.iter().map(|&method| {
        message(&input_of(method), DEPTH).prop_map(move |m| (method, m.encode_to_vec()))
    }))
}

/// The property: accepted, or INVALID_ARGUMENT naming real fields.
fn check(method: &str, bytes: &[u8]) -> Result<(), TestCaseError> {
    let outcome = decode_and_convert(method, bytes).expect("a known method");
    let status = match outcome {
        Outcome::Accepted => return Ok(()),
        Outcome::Undecodable(e) => {
            return Err(TestCaseError::fail(format!("{method}: undecodable: {e}")));
        }
        Outcome::Rejected(status) => status,
    };
    prop_assert_eq!(
        status.code(),
        Code::InvalidArgument,
        "{}: {:?}",
        method,
        status
    );
    let bad = status.get_details_bad_request();
    let violations = bad.map(|b| b.field_violations).unwrap_or_default();
    prop_assert!(
        !violations.is_empty(),
        "{}: no field violations: {:?}",
        method,
        status
    );
    let input = input_of(method);
    for violation in violations {
        prop_assert!(!violation.description.is_empty());
        // `root`: the task tools' reference path for the whole input ("Provide at least one
        // field to update."), kept so TaskService names what the tool result names.
        if method.starts_with("agentd.v1.TaskService/") && violation.field == "root" {
            continue;
        }
        let resolved = field_paths::resolve(&input, &violation.field);
        prop_assert!(
            resolved.is_ok(),
            "{}: {:?}: {:?}",
            method,
            violation,
            resolved
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::config(400))]

    #[test]
    fn every_request_is_accepted_or_names_real_fields((method, bytes) in request()) {
        check(method, &bytes)?;
    }

    /// Arbitrary bytes: undecodable, or checked like any request.
    #[test]
    fn arbitrary_bytes_never_panic(
        method in prop::sample::select(METHODS.to_vec()),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        if !matches!(decode_and_convert(method, &bytes), Some(Outcome::Undecodable(_))) {
            check(method, &bytes)?;
        }
    }
}

/// Plain, valid requests are accepted (so the property above is not vacuous).
#[test]
fn valid_requests_are_accepted() {
    use agentd::pb;
    let write = pb::WriteRequest {
        thread_id: "t".into(),
        resource_id: "r".into(),
        tasks: vec![pb::TaskInput {
            id: None,
            content: "Fix bug".into(),
            status: pb::TaskStatus::InProgress.into(),
            active_form: "Fixing bug".into(),
        }],
    };
    let generate = pb::GenerateRequest {
        agent_id: "a".into(),
        prompt: "hi".into(),
        ..Default::default()
    };
    for (method, bytes) in [
        ("agentd.v1.TaskService/Write", write.encode_to_vec()),
        ("agentd.v1.AgentService/Generate", generate.encode_to_vec()),
    ] {
        let outcome = decode_and_convert(method, &bytes);
        assert!(
            matches!(outcome, Some(Outcome::Accepted)),
            "{method}: {outcome:?}"
        );
    }
    // A reflected message encodes like the generated type (the strategies' premise).
    let bytes = write.encode_to_vec();
    let reflected = DynamicMessage::decode(input_of("agentd.v1.TaskService/Write"), &*bytes)
        .expect("decodes as reflected");
    assert_eq!(reflected.encode_to_vec(), bytes);
}

/// Found by `every_request_is_accepted_or_names_real_fields`: a ContinueWithHooks whose
/// `start.approve` had an empty run id was refused naming `run_id`, and a GenerateWithHooks
/// request's problems named `agent_id` and the like, which are not fields of those messages.
#[test]
fn hooked_streams_name_fields_from_the_stream_message() {
    use agentd::pb;
    let field = |method: &str, bytes: Vec<u8>| match decode_and_convert(method, &bytes) {
        Some(Outcome::Rejected(status)) => {
            let bad = status.get_details_bad_request().expect("BadRequest");
            bad.field_violations
                .into_iter()
                .map(|v| v.field)
                .collect::<Vec<_>>()
        }
        other => panic!("{method}: {other:?}"),
    };
    let approve = pb::ContinueWithHooksRequest {
        message: Some(pb::continue_with_hooks_request::Message::Start(
            pb::HookedContinue {
                decision: Some(pb::hooked_continue::Decision::Approve(pb::ApproveRequest {
                    tool_call_id: "call".into(),
                    ..Default::default()
                })),
                hooks: None,
            },
        )),
    };
    assert_eq!(
        field(
            "agentd.v1.ApprovalService/ContinueWithHooks",
            approve.encode_to_vec()
        ),
        ["start.approve.run_id"]
    );
    let generate = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(pb::GenerateRequest {
                    prompt: "hi".into(),
                    tracing_options: Some(pb::TracingOptions {
                        trace_id: "not hex".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                hooks: None,
            },
        )),
    };
    assert_eq!(
        field(
            "agentd.v1.AgentService/GenerateWithHooks",
            generate.encode_to_vec()
        ),
        ["start.request.tracing_options.trace_id"]
    );
    let generate = pb::GenerateWithHooksRequest {
        message: Some(pb::generate_with_hooks_request::Message::Start(
            pb::HookedGenerate {
                request: Some(pb::GenerateRequest {
                    prompt: "hi".into(),
                    ..Default::default()
                }),
                hooks: None,
            },
        )),
    };
    assert_eq!(
        field(
            "agentd.v1.AgentService/GenerateWithHooks",
            generate.encode_to_vec()
        ),
        ["start.request.agent_id"]
    );
}
