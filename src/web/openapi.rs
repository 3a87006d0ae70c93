//! The OpenAPI 3.1 document of the JSON mapping, generated from the same descriptors the
//! server runs on (comments included), so it can never drift from the proto. `docs/openapi.json`
//! is a copy, checked by a test.

use std::collections::{BTreeMap, HashMap};

use prost_reflect::{
    DescriptorPool, EnumDescriptor, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor,
    MethodDescriptor,
};
use serde_json::{Map, Value, json};

/// The document for `services` (full names) of `pool`.
pub fn document(pool: &DescriptorPool, services: &[&str]) -> anyhow::Result<Value> {
    let mut builder = Builder {
        comments: Comments::default(),
        schemas: BTreeMap::new(),
        pending: Vec::new(),
    };
    let mut paths = Map::new();
    for name in services {
        let service = pool
            .get_service_by_name(name)
            .ok_or_else(|| anyhow::anyhow!("{name} is not in the descriptor pool"))?;
        let tag = service.name().to_owned();
        for method in service.methods() {
            let operation = builder.operation(&method, &tag);
            paths.insert(
                format!("/{}/{}", service.full_name(), method.name()),
                json!({ "post": operation }),
            );
        }
    }
    let status = pool
        .get_message_by_name("google.rpc.Status")
        .ok_or_else(|| anyhow::anyhow!("google.rpc.Status is not in the descriptor pool"))?;
    builder.reference(&status);
    // Typed error details are written by type: describe the ones agentd sends.
    if let Some(bad_request) = pool.get_message_by_name("google.rpc.BadRequest") {
        builder.reference(&bad_request);
    }
    while let Some(message) = builder.pending.pop() {
        if !builder.schemas.contains_key(message.full_name()) {
            let schema = builder.message_schema(&message);
            builder
                .schemas
                .insert(message.full_name().to_owned(), schema);
        }
    }
    Ok(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agentd JSON API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The proto3 JSON mapping of agentd's gRPC services, on the gRPC port. \
    Every method is POST /{package.Service}/{Method} with Content-Type: application/json. \
    Server streams answer application/x-ndjson (one {\"result\": message} per line, a final \
    {\"error\": google.rpc.Status} on failure), or text/event-stream when the Accept header asks \
    for it. Client streams take application/x-ndjson, one message per line. Errors are \
    google.rpc.Status JSON with the HTTP status of the gRPC code.",
        },
        "paths": paths,
        "components": {
            "schemas": builder.schemas,
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "One of the server's API keys, when it requires them.",
                },
            },
        },
        // Keys are optional: a server without keys accepts any call.
        "security": [{}, { "apiKey": [] }],
    }))
}

/// Leading comments of a file's elements, by source path.
#[derive(Default)]
struct Comments {
    files: HashMap<String, HashMap<Vec<i32>, String>>,
}

impl Comments {
    fn get(&mut self, file: &FileDescriptor, path: &[i32]) -> Option<String> {
        let by_path = self.files.entry(file.name().to_owned()).or_insert_with(|| {
            let proto = file.file_descriptor_proto();
            proto
                .source_code_info
                .iter()
                .flat_map(|info| &info.location)
                .filter_map(|l| {
                    let text = l.leading_comments.as_deref()?.trim();
                    let text = text.lines().map(str::trim).collect::<Vec<_>>().join("\n");
                    (!text.is_empty()).then(|| (l.path.clone(), text))
                })
                .collect()
        });
        by_path.get(path).cloned()
    }
}

struct Builder {
    comments: Comments,
    schemas: BTreeMap<String, Value>,
    pending: Vec<MessageDescriptor>,
}

impl Builder {
    fn operation(&mut self, method: &MethodDescriptor, tag: &str) -> Value {
        let description = self
            .comments
            .get(&method.parent_file(), method.path())
            .unwrap_or_default();
        let input = self.reference(&method.input());
        let output = self.reference(&method.output());
        let request_type = if method.is_client_streaming() {
            "application/x-ndjson"
        } else {
            "application/json"
        };
        let ok = if method.is_server_streaming() {
            json!({
                "description": format!("A stream of {}.", method.output().full_name()),
                "content": {
                    "application/x-ndjson": { "schema": {
                        "type": "object",
                        "description": "One line per message; a failure ends the stream with an `error` line.",
                        "properties": {
                            "result": output,
                            "error": { "$ref": "#/components/schemas/google.rpc.Status" },
                        },
                    }},
                    "text/event-stream": { "schema": {
                        "type": "string",
                        "description": "`data:` events with one message each; a failure ends the stream with `event: error`.",
                    }},
                },
            })
        } else {
            json!({
                "description": format!("The {}.", method.output().full_name()),
                "content": { "application/json": { "schema": output } },
            })
        };
        json!({
            "operationId": format!("{tag}_{}", method.name()),
            "tags": [tag],
            "summary": description.lines().next().unwrap_or_default(),
            "description": description,
            "requestBody": {
                "required": true,
                "content": { request_type: { "schema": input } },
            },
            "responses": {
                "200": ok,
                "default": {
                    "description": "The call failed: its gRPC status as JSON.",
                    "content": { "application/json": {
                        "schema": { "$ref": "#/components/schemas/google.rpc.Status" },
                    }},
                },
            },
        })
    }

    /// A `$ref` to `message`'s schema, queued for writing.
    fn reference(&mut self, message: &MessageDescriptor) -> Value {
        if let Some(schema) = well_known(message.full_name()) {
            return schema;
        }
        self.pending.push(message.clone());
        json!({ "$ref": format!("#/components/schemas/{}", message.full_name()) })
    }

    fn message_schema(&mut self, message: &MessageDescriptor) -> Value {
        let mut properties = Map::new();
        for field in message.fields() {
            let mut schema = self.field_schema(&field);
            let mut description = self
                .comments
                .get(&message.parent_file(), field.path())
                .unwrap_or_default();
            if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic()) {
                let others: Vec<String> =
                    oneof.fields().map(|f| f.json_name().to_owned()).collect();
                description = format!(
                    "{description}\n\nAt most one of: {} (oneof {}).",
                    others.join(", "),
                    oneof.name()
                )
                .trim()
                .to_owned();
            }
            if let (Value::Object(fields), false) = (&mut schema, description.is_empty()) {
                fields.insert("description".into(), Value::String(description));
            }
            properties.insert(field.json_name().to_owned(), schema);
        }
        let mut schema = json!({
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        });
        if let Some(description) = self.comments.get(&message.parent_file(), message.path()) {
            schema["description"] = Value::String(description);
        }
        schema
    }

    fn field_schema(&mut self, field: &FieldDescriptor) -> Value {
        if field.is_map() {
            let value = match field.kind() {
                Kind::Message(entry) => entry.map_entry_value_field(),
                _ => return json!({ "type": "object" }),
            };
            return json!({ "type": "object", "additionalProperties": self.kind_schema(&value.kind()) });
        }
        let item = self.kind_schema(&field.kind());
        if field.is_list() {
            json!({ "type": "array", "items": item })
        } else {
            item
        }
    }

    fn kind_schema(&mut self, kind: &Kind) -> Value {
        match kind {
            Kind::Double | Kind::Float => json!({ "type": "number" }),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                json!({ "type": "integer", "format": "int32" })
            }
            Kind::Uint32 | Kind::Fixed32 => {
                json!({ "type": "integer", "format": "int32", "minimum": 0 })
            }
            // proto3 JSON writes 64-bit integers as strings and reads either.
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 | Kind::Uint64 | Kind::Fixed64 => {
                json!({ "type": ["string", "integer"], "format": "int64" })
            }
            Kind::Bool => json!({ "type": "boolean" }),
            Kind::String => json!({ "type": "string" }),
            Kind::Bytes => json!({ "type": "string", "contentEncoding": "base64" }),
            Kind::Enum(e) => enum_schema(e),
            Kind::Message(m) => self.reference(m),
        }
    }
}

fn enum_schema(e: &EnumDescriptor) -> Value {
    let names: Vec<String> = e.values().map(|v| v.name().to_owned()).collect();
    json!({ "type": "string", "enum": names, "title": e.full_name() })
}

/// The JSON shapes of the well-known types the protos use.
fn well_known(name: &str) -> Option<Value> {
    Some(match name {
        "google.protobuf.Struct" => json!({ "type": "object" }),
        "google.protobuf.Value" => json!({}),
        "google.protobuf.ListValue" => json!({ "type": "array" }),
        "google.protobuf.Timestamp" => json!({ "type": "string", "format": "date-time" }),
        "google.protobuf.Duration" => {
            json!({ "type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?s$" })
        }
        "google.protobuf.Empty" => json!({ "type": "object" }),
        "google.protobuf.Any" => json!({
            "type": "object",
            "properties": { "@type": { "type": "string" } },
            "required": ["@type"],
        }),
        "google.protobuf.StringValue" => json!({ "type": "string" }),
        "google.protobuf.BoolValue" => json!({ "type": "boolean" }),
        "google.protobuf.Int32Value" | "google.protobuf.UInt32Value" => {
            json!({ "type": "integer" })
        }
        "google.protobuf.DoubleValue" | "google.protobuf.FloatValue" => json!({ "type": "number" }),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::gateway::JSON_SERVICES;

    fn generated() -> String {
        let pool = crate::pb::descriptor_pool().unwrap();
        let mut text =
            serde_json::to_string_pretty(&document(pool, &JSON_SERVICES).unwrap()).unwrap();
        text.push('\n');
        text
    }

    /// `docs/openapi.json` is the served document; `UPDATE_OPENAPI=1 cargo test` rewrites it.
    #[test]
    fn the_committed_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json");
        let text = generated();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == text,
            "docs/openapi.json is stale: run `UPDATE_OPENAPI=1 cargo test --lib openapi`"
        );
    }

    #[test]
    fn every_method_is_described_with_its_schemas() {
        let doc: Value = serde_json::from_str(&generated()).unwrap();
        let write = &doc["paths"]["/agentd.v1.TaskService/Write"]["post"];
        assert_eq!(write["summary"], "Replaces the whole list (task_write).");
        let schemas = &doc["components"]["schemas"];
        let task = &schemas["agentd.v1.Task"]["properties"];
        assert_eq!(task["activeForm"]["type"], "string");
        assert_eq!(
            task["status"]["enum"],
            json!([
                "TASK_STATUS_UNSPECIFIED",
                "TASK_STATUS_PENDING",
                "TASK_STATUS_IN_PROGRESS",
                "TASK_STATUS_COMPLETED"
            ])
        );
        let generate = &doc["paths"]["/agentd.v1.AgentService/Generate"]["post"];
        assert!(generate["responses"]["200"]["content"]["application/x-ndjson"].is_object());
        let hooked = &doc["paths"]["/agentd.v1.AgentService/GenerateWithHooks"]["post"];
        assert!(hooked["requestBody"]["content"]["application/x-ndjson"].is_object());
        assert!(doc["paths"]["/grpc.health.v1.Health/Check"].is_object());
        // Every $ref resolves.
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(schemas[name].is_object(), "dangling $ref {name}");
        }
    }
}
