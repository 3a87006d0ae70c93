//! Names, descriptions and input JSON Schemas of the four task tools, as offered to a model.

use serde_json::{Value, json};

/// The built-in task tools, in the order they are offered.
pub const TOOL_NAMES: [&str; 4] = ["task_write", "task_update", "task_complete", "task_check"];

const WRITE_DESCRIPTION: &str = "Create or replace the structured task list for the current work. Use it for multi-step work (three or more distinct actions) to plan, track progress and show the user what is being done.

Usage:
- Pass the COMPLETE list on every call: it replaces the previous list
- Each task has: id (stable identifier, optional), content (imperative, e.g. \"Fix the login bug\"), status (pending, in_progress or completed), activeForm (present continuous, e.g. \"Fixing the login bug\")
- Keep ids stable across calls; when an id is omitted one is generated and returned in the result, and a task whose content matches exactly one existing task keeps that task's id
- Ids must be unique: a repeated id is replaced by a generated one
- Only ONE task may be in_progress at a time; mark a task in_progress before starting it and completed as soon as it is done
- To change a single task, prefer task_update or task_complete";

const UPDATE_DESCRIPTION: &str = "Change one task of the current task list, found by its id.

Usage:
- Give the id returned by the task tools and only the fields that change (at least one of content, status, activeForm)
- Setting a task in_progress moves any other in_progress task back to pending
- To only mark a task completed, use task_complete
- An unknown id returns an error listing the available ids";

const COMPLETE_DESCRIPTION: &str = "Mark one task of the current task list completed, found by its id. Call it as soon as the task is done.

An unknown id returns an error listing the available ids.";

const CHECK_DESCRIPTION: &str = "Check the progress of the current task list; use it before finishing tracked work to make sure every task is completed.

Returns a readable summary, the list with its ids, a summary object (total, completed, inProgress, pending, incomplete, hasTasks, allCompleted) and the incompleteTasks still to do. allCompleted is true only when at least one task exists and all are completed.";

/// `(name, description, JSON Schema of the input)` of each task tool, in [`TOOL_NAMES`] order.
pub fn tool_definitions() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (TOOL_NAMES[0], WRITE_DESCRIPTION, write_schema()),
        (TOOL_NAMES[1], UPDATE_DESCRIPTION, update_schema()),
        (TOOL_NAMES[2], COMPLETE_DESCRIPTION, complete_schema()),
        (TOOL_NAMES[3], CHECK_DESCRIPTION, check_schema()),
    ]
}

fn id_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "description": "Stable task id (e.g. \"task_fix_login_bug\"); keep it unchanged across updates",
    })
}

fn text_schema(description: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "description": description })
}

fn status_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "enum": ["pending", "in_progress", "completed"],
        "description": description,
    })
}

fn write_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tasks": {
                "type": "array",
                "description": "The complete new task list",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": id_schema(),
                        "content": text_schema("What to do, in imperative form"),
                        "status": status_schema("Task status"),
                        "activeForm": text_schema("Present continuous form shown while the task is in progress"),
                    },
                    "required": ["content", "status", "activeForm"],
                },
            },
        },
        "required": ["tasks"],
    })
}

// "At least one of content/status/activeForm" is stated in the description rather than as a
// top-level `anyOf`, which several model providers reject in tool schemas.
fn update_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": id_schema(),
            "content": text_schema("New description, in imperative form"),
            "status": status_schema("New status"),
            "activeForm": text_schema("New present continuous form"),
        },
        "required": ["id"],
    })
}

fn complete_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "id": id_schema() },
        "required": ["id"],
    })
}

fn check_schema() -> Value {
    json!({ "type": "object", "properties": {} })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_follow_tool_names() {
        let names: Vec<&str> = tool_definitions().iter().map(|d| d.0).collect();
        assert_eq!(names, TOOL_NAMES);
    }

    #[test]
    fn write_schema_requires_what_validation_requires() {
        let schema = write_schema();
        assert_eq!(schema["required"], json!(["tasks"]));
        let item = &schema["properties"]["tasks"]["items"];
        assert_eq!(item["required"], json!(["content", "status", "activeForm"]));
        assert_eq!(item["properties"]["id"]["minLength"], json!(1));
    }
}
