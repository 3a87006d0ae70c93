//! Whether a BadRequest field violation names a real field of the request: its path, walked
//! through the request's descriptor.

use prost_reflect::{Kind, MessageDescriptor};

/// Walks `path` (dotted; a list index as `.3` or `[3]`; proto or JSON field names; a oneof's
/// name as its last step) from `message`. Inside a `google.protobuf.Struct` or `Value` the
/// rest is the caller's own JSON, so any keys are accepted. `Err` says where it went wrong.
pub fn resolve(message: &MessageDescriptor, path: &str) -> Result<(), String> {
    let steps = split(path);
    let mut current = message.clone();
    let mut i = 0;
    while i < steps.len() {
        if matches!(
            current.full_name(),
            "google.protobuf.Struct" | "google.protobuf.Value" | "google.protobuf.ListValue"
        ) {
            return Ok(());
        }
        let step = steps[i];
        let field = current
            .get_field_by_name(step)
            .or_else(|| current.get_field_by_json_name(step));
        let Some(field) = field else {
            let last = i + 1 == steps.len();
            if last && current.oneofs().any(|o| o.name() == step) {
                return Ok(());
            }
            return Err(format!(
                "{step:?} is not a field of {}",
                current.full_name()
            ));
        };
        i += 1;
        if field.is_list() || field.is_map() {
            // The whole list, or one element of it.
            let Some(&key) = steps.get(i) else {
                return Ok(());
            };
            if field.is_list() && key.parse::<usize>().is_err() {
                return Err(format!("{key:?} is not an index of {}", field.full_name()));
            }
            i += 1;
        }
        match field.kind() {
            Kind::Message(inner) if field.is_map() => match inner.map_entry_value_field().kind() {
                Kind::Message(value) => current = value,
                _ => return at_end(&steps, i, field.full_name()),
            },
            Kind::Message(inner) => current = inner,
            _ => return at_end(&steps, i, field.full_name()),
        }
    }
    Ok(())
}

/// A scalar field must be the last step.
fn at_end(steps: &[&str], i: usize, field: &str) -> Result<(), String> {
    if i == steps.len() {
        Ok(())
    } else {
        Err(format!("{field} is a scalar, yet the path goes on"))
    }
}

/// `a.b[2].c` and `a.b.2.c` both as `["a", "b", "2", "c"]`.
fn split(path: &str) -> Vec<&str> {
    path.split(['.', '[', ']'])
        .filter(|step| !step.is_empty())
        .collect()
}

#[test]
fn resolves_the_paths_the_services_use() {
    let pool = agentd::pb::descriptor_pool().expect("descriptor pool");
    let message = |name: &str| pool.get_message_by_name(name).expect(name);
    let write = message("agentd.v1.WriteRequest");
    for path in [
        "tasks",
        "tasks.0.status",
        "tasks.3.activeForm",
        "tasks.0.active_form",
        "thread_id",
    ] {
        assert_eq!(resolve(&write, path), Ok(()), "{path}");
    }
    for path in ["task", "tasks.x", "tasks.0.status.name", "root"] {
        assert!(resolve(&write, path).is_err(), "{path}");
    }
    let generate = message("agentd.v1.GenerateRequest");
    for path in [
        "messages.0.content.1.image.mime_type",
        "stop_when.2.step_count_is",
        "memory.options.semantic_recall.message_range.before",
        "structured_output.schema.properties.anything",
    ] {
        assert_eq!(resolve(&generate, path), Ok(()), "{path}");
    }
    let delete = message("agentd.v1.DeleteMessagesRequest");
    assert_eq!(resolve(&delete, "message_ids[3]"), Ok(()));
}
