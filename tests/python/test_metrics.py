"""The Prometheus endpoint of a real agentd, scraped after a run and a hooked tool call, and parsed
with the Prometheus client library's own text parser."""

import urllib.request
import uuid

from prometheus_client.parser import text_string_to_metric_families


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return {family.name: family for family in text_string_to_metric_families(response.read().decode())}


def samples(family, name):
    return [s for s in family.samples if s.name == name]


def test_metrics_after_runs(agent_stubs, channel, metrics_port):
    s = agent_stubs
    agents = s.agent_rpc.AgentServiceStub(channel)
    for agent in ("planner", "policed"):
        memory = s.agent.MemoryOptions(thread=s.agent.ThreadRef(id=f"m-{uuid.uuid4().hex}"), resource="metrics")
        chunks = list(agents.Generate(s.agent.GenerateRequest(agent_id=agent, prompt="Write code, Test it", memory=memory)))
        assert chunks[-1].WhichOneof("payload") == "finish"

    families = scrape(metrics_port)
    runs = samples(families["agentd_runs"], "agentd_runs_total")
    stopped = [r for r in runs if r.labels.get("finish_reason") == "stop" and r.labels.get("gen_ai_agent_id") == "planner"]
    assert stopped and stopped[0].value >= 1, runs

    tokens = samples(families["agentd_tokens"], "agentd_tokens_total")
    assert {t.labels.get("type") for t in tokens} >= {"input", "output"}, tokens

    for histogram in ("agentd_step_duration_seconds", "agentd_model_duration_seconds", "agentd_tool_duration_seconds", "agentd_hook_duration_seconds"):
        family = families[histogram]
        assert family.type == "histogram", histogram
        counts = samples(family, f"{histogram}_count")
        assert counts and sum(c.value for c in counts) >= 1, histogram
        buckets = samples(family, f"{histogram}_bucket")
        assert any(b.labels["le"] == "+Inf" for b in buckets), histogram

    streams = families["agentd_streams_active"]
    assert streams.type == "gauge"
    assert all(sample.value == 0 for sample in streams.samples), "no stream is open after the runs ended"
