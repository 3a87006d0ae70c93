//! Messages and tool choices between the wire and the domain, both ways.

use serde_json::Value;

use super::timestamp;
use crate::agent::message::{Message, Part, Role, SignalMetaKind};
use crate::json::{from_proto_value, to_proto_value};
use crate::model::ToolChoice;
use crate::pb;

/// A tool choice from the wire (`None`: unset); `Err` names the bad field and why.
pub fn tool_choice_from(
    choice: &pb::ToolChoice,
) -> Result<Option<ToolChoice>, (&'static str, &'static str)> {
    use pb::tool_choice::Choice;
    match &choice.choice {
        None => Ok(None),
        Some(Choice::Mode(mode)) => match pb::ToolChoiceMode::try_from(*mode) {
            Ok(pb::ToolChoiceMode::Auto) => Ok(Some(ToolChoice::Auto)),
            Ok(pb::ToolChoiceMode::None) => Ok(Some(ToolChoice::None)),
            Ok(pb::ToolChoiceMode::Required) => Ok(Some(ToolChoice::Required)),
            Ok(pb::ToolChoiceMode::Unspecified) => Ok(None),
            Err(_) => Err(("mode", "unknown mode")),
        },
        Some(Choice::ToolName(name)) if name.is_empty() => Err(("tool_name", "must name a tool")),
        Some(Choice::ToolName(name)) => Ok(Some(ToolChoice::Tool(name.clone()))),
    }
}

/// A tool choice on the wire.
pub fn tool_choice(choice: &ToolChoice) -> pb::ToolChoice {
    use pb::tool_choice::Choice;
    let choice = match choice {
        ToolChoice::Auto => Choice::Mode(pb::ToolChoiceMode::Auto as i32),
        ToolChoice::None => Choice::Mode(pb::ToolChoiceMode::None as i32),
        ToolChoice::Required => Choice::Mode(pb::ToolChoiceMode::Required as i32),
        ToolChoice::Tool(name) => Choice::ToolName(name.clone()),
    };
    pb::ToolChoice {
        choice: Some(choice),
    }
}

/// A wire message.
pub fn message(m: &Message) -> pb::Message {
    let role = match m.role {
        Role::System => pb::Role::System,
        Role::User => pb::Role::User,
        Role::Assistant => pb::Role::Assistant,
        Role::Tool => pb::Role::Tool,
    };
    pb::Message {
        id: m.id.clone(),
        role: role.into(),
        content: m.parts.iter().map(part).collect(),
        created_at: Some(timestamp(m.created_at_ms)),
        signal: match m.signal.as_ref().map(|s| s.kind) {
            None => pb::SignalKind::Unspecified,
            Some(SignalMetaKind::Snapshot) => pb::SignalKind::Snapshot,
            Some(SignalMetaKind::Delta) => pb::SignalKind::Delta,
        }
        .into(),
    }
}

fn part(p: &Part) -> pb::Part {
    use pb::part::Kind;
    let kind = match p {
        Part::Text { text } => Kind::Text(pb::TextPart { text: text.clone() }),
        Part::Reasoning { text } => Kind::Reasoning(pb::ReasoningPart { text: text.clone() }),
        Part::Image {
            url,
            data,
            mime_type,
        } => Kind::Image(pb::ImagePart {
            source: media_source(url, data).map(|s| match s {
                Media::Url(u) => pb::image_part::Source::Url(u),
                Media::Data(d) => pb::image_part::Source::Data(d),
            }),
            mime_type: mime_type.clone(),
        }),
        Part::File {
            url,
            data,
            mime_type,
            filename,
        } => Kind::File(pb::FilePart {
            source: media_source(url, data).map(|s| match s {
                Media::Url(u) => pb::file_part::Source::Url(u),
                Media::Data(d) => pb::file_part::Source::Data(d),
            }),
            mime_type: mime_type.clone(),
            filename: filename.clone(),
        }),
        Part::ToolCall {
            tool_call_id,
            tool_name,
            args,
        } => Kind::ToolCall(pb::ToolCall {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            args: Some(to_proto_value(args)),
            provider_executed: false,
        }),
        Part::ToolResult {
            tool_call_id,
            tool_name,
            args,
            result,
            is_error,
            model_output,
        } => Kind::ToolResult(pb::ToolResult {
            tool_call_id: tool_call_id.clone(),
            tool_name: tool_name.clone(),
            args: Some(to_proto_value(args)),
            result: Some(to_proto_value(result)),
            is_error: *is_error,
            model_output: model_output.clone(),
        }),
    };
    pb::Part { kind: Some(kind) }
}

enum Media {
    Url(String),
    Data(Vec<u8>),
}

fn media_source(url: &Option<String>, data: &Option<Vec<u8>>) -> Option<Media> {
    match (url, data) {
        (Some(u), _) => Some(Media::Url(u.clone())),
        (None, Some(d)) => Some(Media::Data(d.clone())),
        (None, None) => None,
    }
}

/// A domain message from the wire; `field` prefixes the paths of errors
/// (e.g. `messages.2`).
pub fn message_from(m: &pb::Message, field: &str) -> Result<Message, (String, String)> {
    let role = match pb::Role::try_from(m.role).unwrap_or(pb::Role::Unspecified) {
        pb::Role::System => Role::System,
        pb::Role::User => Role::User,
        pb::Role::Assistant => Role::Assistant,
        pb::Role::Tool => Role::Tool,
        pb::Role::Unspecified => {
            return Err((
                format!("{field}.role"),
                "must be ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT or ROLE_TOOL".into(),
            ));
        }
    };
    if m.content.is_empty() {
        return Err((
            format!("{field}.content"),
            "must have at least one part".into(),
        ));
    }
    let mut parts = Vec::with_capacity(m.content.len());
    for (i, p) in m.content.iter().enumerate() {
        parts.push(part_from(p, &format!("{field}.content.{i}"))?);
    }
    let mut message = Message::new(role, parts);
    if !m.id.is_empty() {
        message.id.clone_from(&m.id);
    }
    Ok(message)
}

fn part_from(p: &pb::Part, field: &str) -> Result<Part, (String, String)> {
    use pb::part::Kind;
    let value = |v: &Option<prost_types::Value>| v.as_ref().map_or(Value::Null, from_proto_value);
    Ok(match &p.kind {
        None => return Err((field.to_owned(), "must set one kind of content".into())),
        Some(Kind::Text(t)) => Part::Text {
            text: t.text.clone(),
        },
        Some(Kind::Reasoning(t)) => Part::Reasoning {
            text: t.text.clone(),
        },
        Some(Kind::Image(i)) => {
            let (url, data) = match &i.source {
                Some(pb::image_part::Source::Url(u)) => (Some(u.clone()), None),
                Some(pb::image_part::Source::Data(d)) => (None, Some(d.clone())),
                None => return Err((format!("{field}.image"), "needs url or data".into())),
            };
            if data.is_some() && i.mime_type.is_empty() {
                return Err((
                    format!("{field}.image.mime_type"),
                    "is required with data".into(),
                ));
            }
            Part::Image {
                url,
                data,
                mime_type: i.mime_type.clone(),
            }
        }
        Some(Kind::File(f)) => {
            let (url, data) = match &f.source {
                Some(pb::file_part::Source::Url(u)) => (Some(u.clone()), None),
                Some(pb::file_part::Source::Data(d)) => (None, Some(d.clone())),
                None => return Err((format!("{field}.file"), "needs url or data".into())),
            };
            Part::File {
                url,
                data,
                mime_type: f.mime_type.clone(),
                filename: f.filename.clone(),
            }
        }
        Some(Kind::ToolCall(c)) => Part::ToolCall {
            tool_call_id: c.tool_call_id.clone(),
            tool_name: c.tool_name.clone(),
            args: value(&c.args),
        },
        Some(Kind::ToolResult(r)) => Part::ToolResult {
            tool_call_id: r.tool_call_id.clone(),
            tool_name: r.tool_name.clone(),
            args: value(&r.args),
            result: value(&r.result),
            is_error: r.is_error,
            model_output: r.model_output.clone(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Part::Text { text: "hi".into() },
                Part::ToolCall {
                    tool_call_id: "c1".into(),
                    tool_name: "t".into(),
                    args: serde_json::json!({"a": 1}),
                },
            ],
        );
        let back = message_from(&message(&m), "m").unwrap();
        assert_eq!(back.parts, m.parts);
        assert_eq!(back.id, m.id);
    }

    #[test]
    fn unspecified_role_names_the_field() {
        let m = pb::Message::default();
        assert_eq!(
            message_from(&m, "messages.0").unwrap_err().0,
            "messages.0.role"
        );
    }
}
