"""The OpenAPI document a real agentd serves for its JSON mapping is a valid OpenAPI 3.1 document,
and a call made as it describes works (plain urllib, no generated code)."""

import json
import urllib.request
import uuid

from openapi_spec_validator import validate


def fetch(url, body=None):
    request = urllib.request.Request(url, data=body, headers={"content-type": "application/json"} if body else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_served_document_is_valid_and_describes_working_calls(server_address):
    base = f"http://{server_address}"
    document = fetch(f"{base}/openapi.json")
    validate(document)
    operations = {path: spec["post"] for path, spec in document["paths"].items()}
    # 6 AgentService, 5 ApprovalService, 5 TaskService, 8 ThreadService, 1 ScoreService and 2 Health methods.
    assert len(operations) == 27, sorted(operations)
    assert "/agentd.v1.ThreadService/ListMessages" in operations
    assert "/agentd.v1.ScoreService/ListScores" in operations

    write = operations["/agentd.v1.TaskService/Write"]
    schema_ref = write["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    request_schema = document["components"]["schemas"][schema_ref.rsplit("/", 1)[1]]
    assert set(request_schema["properties"]) == {"threadId", "resourceId", "tasks"}

    thread = f"oa-{uuid.uuid4().hex}"
    body = {"threadId": thread, "resourceId": "openapi", "tasks": [
        {"content": "Read the spec", "status": "TASK_STATUS_IN_PROGRESS", "activeForm": "Reading the spec"}]}
    result = fetch(f"{base}/agentd.v1.TaskService/Write", json.dumps(body).encode())
    assert result["tasks"][0]["status"] == "TASK_STATUS_IN_PROGRESS"
    assert result["tasks"][0]["id"] == "task_read_the_spec"
