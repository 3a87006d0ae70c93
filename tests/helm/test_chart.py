"""Tests of the agentd Helm chart, on the output of the real Helm engine.

helm-python-sdk embeds Helm's Go SDK (no helm binary): `lint`, `Chart.render` (what `helm template`
does, values.schema.json included) and `Config.install(dry_run="client")`. kubernetes-validate checks
every rendered object against the Kubernetes OpenAPI schemas (strict: unknown fields fail).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "agentd"
CI_VALUES = ROOT / "helm" / "ci"
RELEASE = "agentd-ci"
NAMESPACE = "agentd-ci"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion), a common one, and the newest
# schema kubernetes-validate ships.
KUBE_VERSIONS = ["1.27.0", "1.30.0", kubernetes_validate.latest_version()]

SECRET_ENV = re.compile(r"(KEY|KEYS|PASSWORD|TOKEN|SECRET|HEADERS)$")


# --- helpers ------------------------------------------------------------------------------------


def load_values(name: str) -> dict[str, Any]:
    return yaml.safe_load((CI_VALUES / name).read_text())


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@pytest.fixture(scope="session")
def chart():
    with helm.Chart.load(CHART) as loaded:
        yield loaded


class Rendered:
    """The objects of one render, by kind and name."""

    def __init__(self, files: dict[str, str]):
        self.files = files
        self.notes = next((text for path, text in files.items() if path.endswith("NOTES.txt")), "")
        self.objects: list[dict[str, Any]] = []
        for path, text in files.items():
            if path.endswith("NOTES.txt"):
                continue
            for doc in yaml.safe_load_all(text):
                if doc:
                    doc["__source__"] = path
                    self.objects.append(doc)

    def kinds(self) -> set[str]:
        return {o["kind"] for o in self.objects}

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {[o['metadata']['name'] for o in found]}"
        return found[0]


def render(chart, values: dict[str, Any] | None = None) -> Rendered:
    return Rendered(chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True))


def agentd_container(r: Rendered) -> dict[str, Any]:
    deployment = r.one("Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "agentd")


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def as_rendered_for(doc: dict[str, Any], version: str) -> dict[str, Any]:
    """`doc` as the chart renders it for Kubernetes `version` (rendering here always sees a
    recent cluster): before 1.30 the preStop sleep action is left out."""
    if tuple(int(p) for p in version.split(".")[:2]) >= (1, 30) or doc.get("kind") != "Deployment":
        return doc
    doc = copy.deepcopy(doc)
    for container in doc["spec"]["template"]["spec"]["containers"]:
        container.pop("lifecycle", None)
    return doc


def pod_specs(r: Rendered) -> list[tuple[str, dict[str, Any]]]:
    specs = []
    for obj in r.objects:
        if obj["kind"] == "Pod":
            specs.append((f"Pod/{obj['metadata']['name']}", obj["spec"]))
        elif obj["kind"] in ("Deployment", "StatefulSet"):
            specs.append((f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]["spec"]))
    return specs


# The example values files of helm/ci: each is linted, installed (dry run), rendered and validated.
EXAMPLES = ["production-values.yaml", "cluster-values.yaml", "sentinel-values.yaml"]

# Scenarios rendered and validated: name -> values.
BUNDLED = {
    "store": {"mode": "bundled", "bundled": {"auth": {"enabled": True}}},
    "secrets": {"existingSecret": "agentd-secrets", "apiKeysKey": "api-keys"},
    "replicaCount": 2,
    "networkPolicy": {"enabled": True, "allowExternal": False, "egress": {"enabled": True}},
}
SCENARIOS: dict[str, dict[str, Any] | None] = {
    "default": None,
    "production": load_values("production-values.yaml"),
    "cluster": load_values("cluster-values.yaml"),
    "sentinel": load_values("sentinel-values.yaml"),
    "bundled-redis": BUNDLED,
    "bundled-redis-no-auth": {"store": {"mode": "bundled"}, "autoscaling": {"enabled": True}},
    "embedded-persistent": {
        "persistence": {"enabled": True, "storageClass": "fast"},
        "secrets": {"existingSecret": "agentd-secrets", "envFromExistingSecret": True},
        "service": {"type": "LoadBalancer", "headless": {"enabled": True}},
        "topologySpreadConstraints": [],
    },
    "external-plain-url": {
        "replicaCount": 2,
        "store": {"mode": "external", "external": {"url": "redis://redis.data.svc:6379/1"}},
        "otel": {"endpoint": "http://collector:4318", "protocol": "http/protobuf"},
    },
    "tls-mutual": {
        "tls": {"enabled": True, "secretName": "agentd-tls", "clientAuth": True},
    },
    "external-url-secret": {
        "replicaCount": 2,
        "store": {"mode": "external", "external": {"urlSecret": {"name": "redis-url", "key": "url"}}},
        "image": {"digest": "sha256:" + "a" * 64},
        "podDisruptionBudget": {"enabled": False},
        "serviceAccount": {"create": False},
        "agentd": {"port": 6000, "listenHost": "::"},
        "service": {"port": 443},
    },
}


@pytest.fixture(scope="session")
def rendered(chart) -> dict[str, Rendered]:
    return {name: render(chart, values) for name, values in SCENARIOS.items()}


# --- lint and render ----------------------------------------------------------------------------


@pytest.mark.parametrize("values_file", [None, *EXAMPLES, BUNDLED])
def test_lint_passes_strict(values_file):
    values = values_file if isinstance(values_file, dict) else load_values(values_file) if values_file else None
    report = helm.lint(CHART, values, strict=True, kube_version="v1.30.0", namespace=NAMESPACE)
    assert report["errors"] == [], report
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert serious == [], serious


def test_app_version_is_the_crate_version(chart):
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())
    assert chart.metadata["appVersion"] == cargo["package"]["version"]


def test_install_dry_run_with_production_values(chart):
    """The full install path (kubeVersion check, schema, templates, hooks split off)."""
    with helm.Config(storage_driver="memory", namespace=NAMESPACE) as cfg:
        release = cfg.install(
            chart, RELEASE, load_values("production-values.yaml"), namespace=NAMESPACE, dry_run="client"
        )
    kinds = {doc["kind"] for doc in yaml.safe_load_all(release["manifest"]) if doc}
    assert {"Deployment", "Service", "ConfigMap", "HorizontalPodAutoscaler", "PodDisruptionBudget",
            "NetworkPolicy", "ServiceAccount"} <= kinds
    assert release["app_version"] == chart.metadata["appVersion"]
    assert "grpcurl" in release["notes"] and "grpc.health.v1.Health/Check" in release["notes"]


@pytest.mark.parametrize("values_file,store_line", [
    ("cluster-values.yaml", "External Redis (Redis Cluster): rediss+cluster://redis-cluster-0."),
    ("sentinel-values.yaml", "External Redis (Sentinel): redis+sentinel://redis-node-0."),
])
def test_install_dry_run_with_redis_ha_values(chart, values_file, store_line):
    with helm.Config(storage_driver="memory", namespace=NAMESPACE) as cfg:
        release = cfg.install(chart, RELEASE, load_values(values_file), namespace=NAMESPACE, dry_run="client")
    kinds = {doc["kind"] for doc in yaml.safe_load_all(release["manifest"]) if doc}
    assert {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy", "ServiceAccount"} <= kinds
    assert "StatefulSet" not in kinds, "an external store deploys no Redis"
    assert store_line in release["notes"]
    assert "$(REDIS_PASSWORD)" not in release["notes"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_manifest_validates_against_kubernetes_schemas(rendered, scenario):
    r = rendered[scenario]
    assert r.objects, "nothing rendered"
    for obj in r.objects:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD's kind: kubernetes-validate has no schema; its own test checks it
        doc = {k: v for k, v in obj.items() if k != "__source__"}
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(as_rendered_for(doc, version), version, strict=True)
            except kubernetes_validate.ValidationError as err:
                pytest.fail(f"{obj['__source__']} {obj['kind']}/{obj['metadata']['name']} "
                            f"is invalid for Kubernetes {version}: {err.message} at {list(err.absolute_path)}")


@pytest.mark.parametrize("scenario,expected", [
    ("default", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget", "Pod"}),
    ("production", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget",
                    "HorizontalPodAutoscaler", "NetworkPolicy", "ServiceMonitor", "Pod"}),
    ("bundled-redis", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget",
                       "StatefulSet", "NetworkPolicy", "Pod"}),
    ("cluster", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget",
                 "HorizontalPodAutoscaler", "NetworkPolicy", "Pod"}),
    ("sentinel", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget",
                  "NetworkPolicy", "Pod"}),
    ("embedded-persistent", {"Deployment", "Service", "ConfigMap", "ServiceAccount", "PodDisruptionBudget",
                             "PersistentVolumeClaim", "Pod"}),
])
def test_rendered_kinds(rendered, scenario, expected):
    assert rendered[scenario].kinds() == expected


def test_every_object_has_standard_labels(rendered):
    for r in rendered.values():
        for obj in r.objects:
            labels = obj["metadata"]["labels"]
            for key in ("helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                        "app.kubernetes.io/version", "app.kubernetes.io/managed-by"):
                assert key in labels, f"{obj['kind']}/{obj['metadata']['name']} lacks {key}"
            assert obj["metadata"]["namespace"] == NAMESPACE


# --- probes and ports ---------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["default", "production", "external-url-secret"])
def test_probes_are_grpc_probes_on_the_service_port(rendered, scenario):
    r = rendered[scenario]
    container = agentd_container(r)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert "grpc" in ports
    grpc_port = ports["grpc"]

    service = r.one("Service", r.one("Deployment")["metadata"]["name"])
    svc_port = next(p for p in service["spec"]["ports"] if p["name"] == "grpc")
    assert svc_port["name"] == "grpc" and svc_port["appProtocol"] == "grpc"
    target = svc_port["targetPort"]
    assert (ports[target] if isinstance(target, str) else target) == grpc_port
    assert service["spec"]["selector"] == r.one("Deployment")["spec"]["selector"]["matchLabels"]

    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container[probe_name]
        handlers = {"grpc", "httpGet", "tcpSocket", "exec"} & probe.keys()
        assert handlers == {"grpc"}, f"{probe_name} must be a native gRPC probe, has {handlers}"
        assert probe["grpc"]["port"] == grpc_port, probe_name

    listen = env_of(container)["AGENTD_LISTEN"]["value"]
    assert listen.endswith(f":{grpc_port}")
    # A store outage must not restart pods: liveness asks the store-independent name.
    assert container["livenessProbe"]["grpc"]["service"] == "liveness"
    assert container["readinessProbe"]["grpc"].get("service", "") == ""


# --- TLS ----------------------------------------------------------------------------------------


def test_tls_mounts_the_secret_read_only_and_sets_the_env(chart, rendered):
    r = render(chart, {"tls": {"enabled": True, "secretName": "agentd-tls"}})
    container = agentd_container(r)
    env = env_of(container)
    assert env["AGENTD_TLS_CERT_FILE"]["value"] == "/etc/agentd-tls/tls.crt"
    assert env["AGENTD_TLS_KEY_FILE"]["value"] == "/etc/agentd-tls/tls.key"
    assert "AGENTD_TLS_CLIENT_CA_FILE" not in env
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    # The whole Secret, no subPath: a renewed certificate reaches the pod and agentd reloads it.
    assert mount == {"name": "tls", "mountPath": "/etc/agentd-tls", "readOnly": True}
    volume = next(v for v in r.one("Deployment")["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "agentd-tls"
    # Off by default: nothing of it rendered.
    default = agentd_container(rendered["default"])
    assert not {"AGENTD_TLS_CERT_FILE", "AGENTD_TLS_KEY_FILE"} & env_of(default).keys()
    assert all(m["name"] != "tls" for m in default["volumeMounts"])


def test_mutual_tls_requires_the_secrets_ca(rendered):
    env = env_of(agentd_container(rendered["tls-mutual"]))
    assert env["AGENTD_TLS_CLIENT_CA_FILE"]["value"] == "/etc/agentd-tls/ca.crt"


@pytest.mark.parametrize("scenario", ["tls-mutual"])
def test_probes_are_tcp_probes_with_tls(rendered, scenario):
    """Kubelet's gRPC probes speak plain text only: with TLS each probe checks the port over TCP."""
    container = agentd_container(rendered[scenario])
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = container[probe_name]
        handlers = {"grpc", "httpGet", "tcpSocket", "exec"} & probe.keys()
        assert handlers == {"tcpSocket"}, f"{probe_name} has {handlers}"
        assert probe["tcpSocket"]["port"] == "grpc"
    assert any(p["name"] == "grpc" for p in container["ports"])


def test_helm_test_pod_speaks_tls_and_presents_a_certificate_for_mutual_tls(chart, rendered):
    (container,) = rendered["tls-mutual"].one("Pod")["spec"]["containers"]
    assert {"-tls", "-tls-no-verify", "-tls-client-cert=/etc/agentd-tls/tls.crt",
            "-tls-client-key=/etc/agentd-tls/tls.key"} <= set(container["args"])
    assert container["volumeMounts"] == [{"name": "tls", "mountPath": "/etc/agentd-tls", "readOnly": True}]
    (container,) = render(chart, {"tls": {"enabled": True, "secretName": "t"}}).one("Pod")["spec"]["containers"]
    assert "-tls" in container["args"] and not any(a.startswith("-tls-client") for a in container["args"])
    assert "volumeMounts" not in container
    (container,) = rendered["default"].one("Pod")["spec"]["containers"]
    assert not any(a.startswith("-tls") for a in container["args"])


def test_notes_use_tls_with_grpcurl(rendered):
    notes = rendered["tls-mutual"].notes
    assert "grpcurl -insecure -cert client.crt -key client.key localhost:50051 list" in notes
    assert "-plaintext" not in notes


def test_tls_needs_a_secret_and_known_keys(chart):
    with pytest.raises(helm.HelmRenderError) as err:
        chart.render({"tls": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE)
    assert "tls.enabled needs tls.secretName" in str(err.value)
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values({"tls": {"secret": "x"}}))


def test_custom_ports_follow_through(rendered):
    r = rendered["external-url-secret"]
    container = agentd_container(r)
    assert env_of(container)["AGENTD_LISTEN"]["value"] == "[::]:6000"
    assert container["ports"][0]["containerPort"] == 6000
    assert r.one("Service")["spec"]["ports"][0]["port"] == 443


def test_termination_grace_is_prestop_predrain_drain_plus_margin(chart):
    r = render(chart, {"agentd": {"preStopSleepSeconds": 2, "preDrainSeconds": 4,
                                  "shutdownGraceSeconds": 40, "terminationGraceMarginSeconds": 7}})
    pod = r.one("Deployment")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 53
    container = agentd_container(r)
    assert env_of(container)["AGENTD_SHUTDOWN_GRACE_SECS"]["value"] == "40"
    assert env_of(container)["AGENTD_PRE_DRAIN_MS"]["value"] == "4000"
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 2}}}
    default = render(chart)
    assert default.one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 38
    assert agentd_container(default)["lifecycle"]["preStop"]["sleep"]["seconds"] == 5
    off = render(chart, {"agentd": {"preStopSleepSeconds": 0}})
    assert "lifecycle" not in agentd_container(off)
    assert off.one("Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 33


def test_startup_does_not_wait_for_the_store(rendered):
    """agentd serves while Redis is down: a pod scheduled during an outage must not be restarted."""
    container = agentd_container(rendered["default"])
    assert container["startupProbe"]["grpc"]["service"] == "liveness"


def test_prestop_sleep_is_left_out_before_kubernetes_1_30():
    """The sleep action is new in 1.30; on older clusters the chart renders without it (and the
    in-process pre-drain still reports NOT_SERVING before the drain)."""
    report = helm.lint(CHART, None, strict=True, kube_version="v1.27.0", namespace=NAMESPACE)
    assert report["errors"] == [], report


# --- image --------------------------------------------------------------------------------------


def test_image_tag_defaults_to_app_version(chart, rendered):
    app_version = chart.metadata["appVersion"]
    assert agentd_container(rendered["default"])["image"] == f"agentd:{app_version}"
    assert agentd_container(rendered["production"])["image"].endswith(f":{app_version}")
    assert rendered["default"].one("Deployment")["metadata"]["labels"]["app.kubernetes.io/version"] == app_version


def test_image_tag_and_digest_overrides(chart, rendered):
    r = render(chart, {"image": {"tag": "0.2.0-rc.1"}})
    assert agentd_container(r)["image"] == "agentd:0.2.0-rc.1"
    assert agentd_container(rendered["external-url-secret"])["image"] == "agentd@sha256:" + "a" * 64


def test_third_party_images_are_pinned(rendered):
    for r in rendered.values():
        for where, spec in pod_specs(r):
            for c in spec["containers"]:
                image = c["image"]
                if "@sha256:" in image:
                    continue
                tag = image.rsplit(":", 1)[-1]
                assert tag != "latest" and re.search(r"\d+\.\d+\.\d+", tag), f"{where}: unpinned {image}"


# --- security -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_no_container_runs_as_root(rendered, scenario):
    specs = pod_specs(rendered[scenario])
    assert any(where.startswith("Pod/") for where, _ in specs), "the helm test pod is checked too"
    for where, spec in specs:
        pod_sc = spec.get("securityContext", {})
        for c in spec["containers"] + spec.get("initContainers", []):
            sc = c.get("securityContext", {})
            effective = {**pod_sc, **sc}
            who = f"{where} container {c['name']}"
            assert effective.get("runAsNonRoot") is True, who
            assert isinstance(effective.get("runAsUser"), int) and effective["runAsUser"] > 0, who
            assert sc.get("readOnlyRootFilesystem") is True, who
            assert sc.get("allowPrivilegeEscalation") is False, who
            assert sc.get("privileged", False) is False, who
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), who
            assert not sc.get("capabilities", {}).get("add"), who
            assert effective.get("seccompProfile", {}).get("type") == "RuntimeDefault", who
        assert spec.get("automountServiceAccountToken") is False, where
        assert not spec.get("hostNetwork") and not spec.get("hostPID"), where


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_secrets_are_referenced_never_inlined(rendered, scenario):
    r = rendered[scenario]
    assert "Secret" not in r.kinds(), "the chart must not create Secrets"
    for where, spec in pod_specs(r):
        for c in spec["containers"]:
            for e in c.get("env", []):
                if SECRET_ENV.search(e["name"]):
                    assert "value" not in e, f"{where}: {e['name']} is inlined"
                    assert "secretKeyRef" in e["valueFrom"], f"{where}: {e['name']} not from a Secret"
                # No literal password in a URL: only a $(VAR) expanded from a secretKeyRef env var.
                assert not re.search(r"://[^/@\s]*:(?!\$\()[^/@\s]*@", e.get("value", "")), f"{where}: {e['name']}"
            for src in c.get("envFrom", []):
                assert set(src) <= {"secretRef", "configMapRef", "prefix"}
    # The agents config names the env vars holding provider keys, never a key.
    config = tomllib.loads(r.one("ConfigMap")["data"]["agentd.toml"])
    for provider in config.get("providers", []):
        assert "api_key_env" in provider and "api_key" not in provider


def test_production_secret_refs(rendered):
    env = env_of(agentd_container(rendered["production"]))
    refs = {name: e["valueFrom"]["secretKeyRef"] for name, e in env.items() if "valueFrom" in e
            and "secretKeyRef" in e["valueFrom"]}
    assert refs["AGENTD_API_KEYS"] == {"name": "agentd-secrets", "key": "api-keys"}
    assert refs["OPENAI_API_KEY"] == {"name": "agentd-secrets", "key": "openai-api-key"}
    assert refs["VLLM_API_KEY"] == {"name": "vllm-credentials", "key": "vllm-api-key"}
    assert refs["REDIS_PASSWORD"] == {"name": "agentd-redis", "key": "password"}
    assert refs["OTEL_EXPORTER_OTLP_HEADERS"] == {"name": "agentd-secrets", "key": "otlp-headers"}
    # The password reaches the URL by the kubelet's $(VAR) expansion, declared before its use.
    names = list(env)
    assert env["AGENTD_STORE_URL"]["value"] == "rediss://:$(REDIS_PASSWORD)@redis-master.data.svc:6380/0"
    assert names.index("REDIS_PASSWORD") < names.index("AGENTD_STORE_URL")


def test_external_redis_plain_url(rendered):
    r = rendered["external-plain-url"]
    env = env_of(agentd_container(r))
    assert env["AGENTD_STORE_URL"]["value"] == "redis://redis.data.svc:6379/1"
    assert "REDIS_PASSWORD" not in env
    assert r.one("Deployment")["spec"]["replicas"] == 2
    assert "StatefulSet" not in r.kinds()


def test_whole_secret_as_env_and_url_from_secret(rendered):
    container = agentd_container(rendered["embedded-persistent"])
    assert container["envFrom"] == [{"secretRef": {"name": "agentd-secrets"}}]
    env = env_of(agentd_container(rendered["external-url-secret"]))
    assert env["AGENTD_STORE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "redis-url", "key": "url"}


def test_cluster_example_store_env(rendered):
    env = env_of(agentd_container(rendered["cluster"]))
    nodes = ",".join(f"redis-cluster-{i}.redis-cluster-headless.data.svc:6379" for i in range(3))
    assert env["AGENTD_STORE_URL"]["value"] == f"rediss+cluster://agentd:$(REDIS_PASSWORD)@{nodes}"
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "agentd-redis", "key": "password"}
    names = list(env)
    assert names.index("REDIS_PASSWORD") < names.index("AGENTD_STORE_URL")
    assert "AGENTD_STORE_WAIT_REPLICAS" not in env and "AGENTD_STORE_WAIT_TIMEOUT_MS" not in env
    assert "StatefulSet" not in rendered["cluster"].kinds()


def test_sentinel_example_store_env(rendered):
    env = env_of(agentd_container(rendered["sentinel"]))
    sentinels = ",".join(f"redis-node-{i}.redis-headless.data.svc:26379" for i in range(3))
    assert env["AGENTD_STORE_URL"]["value"] == f"redis+sentinel://:$(REDIS_PASSWORD)@{sentinels}/mymaster/0"
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "agentd-redis", "key": "password"}
    names = list(env)
    assert names.index("REDIS_PASSWORD") < names.index("AGENTD_STORE_URL")
    assert env["AGENTD_STORE_WAIT_REPLICAS"] == {"name": "AGENTD_STORE_WAIT_REPLICAS", "value": "1"}
    assert env["AGENTD_STORE_WAIT_TIMEOUT_MS"] == {"name": "AGENTD_STORE_WAIT_TIMEOUT_MS", "value": "1000"}
    assert "Every acknowledged write has reached 1 replica(s)" in rendered["sentinel"].notes


PASSWORD = {"name": "agentd-redis", "key": "password"}
# store.external values -> the AGENTD_STORE_URL the chart renders.
URL_FORMS = [
    # Redis Cluster, with and without a password (and an ACL user).
    ({"url": "redis+cluster://h1:6379,h2:6379,h3:6379"}, "redis+cluster://h1:6379,h2:6379,h3:6379"),
    ({"url": "redis+cluster://h1:6379,h2:6379", "passwordSecret": PASSWORD},
     "redis+cluster://:$(REDIS_PASSWORD)@h1:6379,h2:6379"),
    ({"url": "rediss+cluster://h1:6379,h2:6379/", "passwordSecret": PASSWORD, "username": "agentd"},
     "rediss+cluster://agentd:$(REDIS_PASSWORD)@h1:6379,h2:6379/"),
    ({"url": "redis+cluster://[fd00::1]:6379,[fd00::2]:6379", "passwordSecret": PASSWORD},
     "redis+cluster://:$(REDIS_PASSWORD)@[fd00::1]:6379,[fd00::2]:6379"),
    # Sentinel, with and without a password (and an ACL user), with and without a database.
    ({"url": "redis+sentinel://s1:26379,s2:26379/mymaster"}, "redis+sentinel://s1:26379,s2:26379/mymaster"),
    ({"url": "redis+sentinel://s1:26379/mymaster/0", "passwordSecret": PASSWORD, "username": "user"},
     "redis+sentinel://user:$(REDIS_PASSWORD)@s1:26379/mymaster/0"),
    ({"url": "rediss+sentinel://s1:26379,s2:26379,s3:26379/mymaster/3", "passwordSecret": PASSWORD},
     "rediss+sentinel://:$(REDIS_PASSWORD)@s1:26379,s2:26379,s3:26379/mymaster/3"),
    # One node, as before.
    ({"url": "redis://r:6379/2", "passwordSecret": PASSWORD, "username": "agentd"},
     "redis://agentd:$(REDIS_PASSWORD)@r:6379/2"),
]


@pytest.mark.parametrize("external,url", URL_FORMS)
def test_external_store_url_for_each_form(chart, external, url):
    env = env_of(agentd_container(render(chart, {"replicaCount": 2, "store": {"mode": "external", "external": external}})))
    assert env["AGENTD_STORE_URL"] == {"name": "AGENTD_STORE_URL", "value": url}
    if "passwordSecret" in external:
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == PASSWORD
        names = list(env)
        assert names.index("REDIS_PASSWORD") < names.index("AGENTD_STORE_URL")
    else:
        assert "REDIS_PASSWORD" not in env
    assert "AGENTD_STORE_WAIT_REPLICAS" not in env and "AGENTD_STORE_WAIT_TIMEOUT_MS" not in env


@pytest.mark.parametrize("external,wait", [
    # Nothing by default, nor when only the timeout is set: agentd's defaults apply (no WAIT).
    ({"url": "redis+sentinel://s1:26379/mymaster"}, None),
    ({"url": "redis+sentinel://s1:26379/mymaster", "waitTimeoutMs": 2000}, None),
    ({"url": "redis+cluster://h1:6379,h2:6379", "waitReplicas": 0, "waitTimeoutMs": 2000}, None),
    # Both variables as soon as waitReplicas > 0, the timeout defaulting to 500 ms.
    ({"url": "redis+sentinel://s1:26379,s2:26379/mymaster/1", "waitReplicas": 1}, ("1", "500")),
    ({"url": "rediss+sentinel://s1:26379/mymaster", "passwordSecret": PASSWORD, "waitReplicas": 2,
      "waitTimeoutMs": 60000}, ("2", "60000")),
    ({"url": "redis://r:6379/0", "waitReplicas": 1, "waitTimeoutMs": 250}, ("1", "250")),
    # A URL from a Secret: the chart cannot see its scheme; agentd checks it at start-up.
    ({"urlSecret": {"name": "redis-url", "key": "url"}, "waitReplicas": 1}, ("1", "500")),
])
def test_wait_env_only_when_waiting_for_replicas(chart, external, wait):
    r = render(chart, {"replicaCount": 2, "store": {"mode": "external", "external": external}})
    env = env_of(agentd_container(r))
    if wait is None:
        assert "AGENTD_STORE_WAIT_REPLICAS" not in env and "AGENTD_STORE_WAIT_TIMEOUT_MS" not in env
    else:
        assert (env["AGENTD_STORE_WAIT_REPLICAS"]["value"], env["AGENTD_STORE_WAIT_TIMEOUT_MS"]["value"]) == wait
        names = list(env)
        assert names.index("AGENTD_STORE_URL") < names.index("AGENTD_STORE_WAIT_REPLICAS")


def test_wait_values_are_ignored_without_an_external_store(chart):
    for store in ({"mode": "bundled"}, {"mode": "embedded"}):
        store = deep_merge(store, {"external": {"url": "redis+cluster://h1:6379", "waitReplicas": 1}})
        env = env_of(agentd_container(render(chart, {"store": store})))
        assert "AGENTD_STORE_WAIT_REPLICAS" not in env


def test_notes_tell_which_external_store_and_how_writes_are_acknowledged(chart, rendered):
    assert "External Redis (Redis Cluster): rediss+cluster://" in rendered["cluster"].notes
    assert "External Redis (one node): redis://redis.data.svc:6379/1" in rendered["external-plain-url"].notes
    assert "External Redis, URL from Secret redis-url (key url)." in rendered["external-url-secret"].notes
    no_wait = render(chart, {"store": {"mode": "external", "external": {"url": "redis+sentinel://s1:26379/m"}}})
    assert "a failover may lose the last ones" in no_wait.notes
    assert "store.external.waitReplicas" in no_wait.notes
    assert "a failover may lose" not in rendered["sentinel"].notes


def test_schema_enforces_hardening(chart):
    for override in (
        {"securityContext": {"runAsNonRoot": False}},
        {"securityContext": {"readOnlyRootFilesystem": False}},
        {"securityContext": {"capabilities": {"drop": ["NET_RAW"]}}},
        {"podSecurityContext": {"runAsUser": 0}},
        {"podSecurityContext": {"runAsNonRoot": False}},
        {"store": {"bundled": {"securityContext": {"allowPrivilegeEscalation": True}}}},
    ):
        with pytest.raises(helm.HelmValuesError):
            chart.render(override, name=RELEASE, namespace=NAMESPACE)


# --- schema -------------------------------------------------------------------------------------


def test_bad_values_file_is_rejected_by_the_schema(chart):
    bad = load_values("bad-values.yaml")
    with pytest.raises(helm.HelmValuesError) as err:
        chart.render(bad, name=RELEASE, namespace=NAMESPACE)
    message = str(err.value)
    for where in ("/replicaCount", "/store/mode", "/securityContext/runAsNonRoot", "imageTag"):
        assert where in message, f"schema error does not name {where}: {message}"
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(bad)
    report = helm.lint(CHART, bad, namespace=NAMESPACE)
    assert report["errors"], "lint must fail on bad values"
    with helm.Config(storage_driver="memory", namespace=NAMESPACE) as cfg:
        with pytest.raises(helm.HelmError):
            cfg.install(chart, RELEASE, bad, namespace=NAMESPACE, dry_run="client")


def test_defaults_and_ci_values_pass_the_schema(chart):
    chart.validate_schema(chart.values)
    for name in EXAMPLES:
        chart.validate_schema(chart.merge_values(load_values(name)))


def test_every_value_is_documented():
    """Every leaf of values.yaml carries a helm-docs style "# --" comment, its own or its block's."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    key_re = re.compile(r"^(\s*)([A-Za-z][\w.-]*):(.*)$")
    stack: list[tuple[int, bool]] = []  # (indent, documented) of the enclosing keys
    undocumented = []
    scalar_block_indent = None
    for i, line in enumerate(lines):
        if scalar_block_indent is not None:
            if line.strip() == "" or len(line) - len(line.lstrip()) > scalar_block_indent:
                continue
            scalar_block_indent = None
        m = key_re.match(line)
        if not m:
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        comments = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("#"):
            comments.append(lines[j].strip())
            j -= 1
        documented = any(c.startswith("# --") for c in comments) or any(d for _, d in stack)
        nxt = next((l for l in lines[i + 1:] if l.strip() and not l.strip().startswith("#")), "")
        is_group = rest == "" and key_re.match(nxt) is not None and len(nxt) - len(nxt.lstrip()) > indent
        if not is_group and not documented:
            undocumented.append(f"line {i + 1}: {key}")
        if rest in ("|", ">", "|-", ">-"):
            scalar_block_indent = indent
        stack.append((indent, documented))
    assert undocumented == [], undocumented


@pytest.mark.parametrize("override", [
    {"imageTag": "x"},
    {"agentd": {"prot": 1}},
    {"store": {"external": {"uri": "redis://x"}}},
    {"probes": {"liveness": {"path": "/healthz"}}},
    {"secrets": {"providerKeys": [{"name": "A", "secretKey": "k", "value": "inline"}]}},
    {"networkPolicy": {"egress": {"allowAll": True}}},
    {"store": {"external": {"sentinel": {"masterName": "mymaster"}}}},
])
def test_schema_rejects_unknown_keys(chart, override):
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(chart.merge_values(override))


@pytest.mark.parametrize("external,where", [
    ({"url": "redis+sentinal://s1:26379/mymaster"}, "/store/external/url"),
    ({"url": "redis-cluster://h1:6379,h2:6379"}, "/store/external/url"),
    ({"url": "h1:6379"}, "/store/external/url"),
    ({"waitReplicas": -1}, "/store/external/waitReplicas"),
    ({"waitReplicas": "1"}, "/store/external/waitReplicas"),
    ({"waitReplicas": 1.5}, "/store/external/waitReplicas"),
    ({"waitTimeoutMs": 0}, "/store/external/waitTimeoutMs"),
    ({"waitTimeoutMs": 60001}, "/store/external/waitTimeoutMs"),
])
def test_schema_rejects_bad_external_store_values(chart, external, where):
    with pytest.raises(helm.HelmValuesError) as err:
        chart.render({"store": {"mode": "external", "external": external}}, name=RELEASE, namespace=NAMESPACE)
    assert where in str(err.value)


@pytest.mark.parametrize("external", [
    {"url": "rediss+cluster://h1:6379"},
    {"url": "rediss+sentinel://s1:26379/mymaster/15"},
    {"url": "redis+sentinel://s1:26379/mymaster", "waitReplicas": 2, "waitTimeoutMs": 60000},
    {"url": "redis://h:6379/0", "waitReplicas": 1, "waitTimeoutMs": 1},
])
def test_schema_accepts_the_store_url_forms_and_wait_bounds(chart, external):
    chart.validate_schema(chart.merge_values({"store": {"mode": "external", "external": external}}))


# --- store --------------------------------------------------------------------------------------


def test_bundled_redis_is_a_statefulset_with_a_pvc(rendered):
    r = rendered["bundled-redis"]
    sts = r.one("StatefulSet")
    redis_name = sts["metadata"]["name"]
    assert sts["spec"]["replicas"] == 1
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "8Gi"
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    assert {"name": "data", "mountPath": "/data"} in container["volumeMounts"]
    assert container["image"].startswith("redis:")
    assert "--requirepass" in container["args"] and "$(REDIS_PASSWORD)" in container["args"]
    assert env_of(container)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "agentd-secrets"
    # Services: one for clients, one governing the StatefulSet.
    services = {s["metadata"]["name"]: s for s in r.all("Service")}
    assert sts["spec"]["serviceName"] in services
    assert services[sts["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    assert redis_name in services
    # agentd points at it with the password from the Secret, and selects only its own pods.
    env = env_of(agentd_container(r))
    assert env["AGENTD_STORE_URL"]["value"] == f"redis://:$(REDIS_PASSWORD)@{redis_name}:6379/0"
    agentd_selector = r.one("Deployment")["spec"]["selector"]["matchLabels"]
    redis_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert not agentd_selector.items() <= redis_labels.items(), "agentd's selector must not match Redis pods"
    assert r.one("Deployment")["spec"]["strategy"]["type"] == "RollingUpdate"


def test_upgrading_agentd_does_not_restart_the_bundled_redis(chart, rendered):
    before = rendered["bundled-redis"].one("StatefulSet")["spec"]
    after = render(chart, deep_merge(BUNDLED, {"image": {"tag": "0.2.0"}, "agentd": {"config": "# new"}}))
    assert after.one("StatefulSet")["spec"] == before
    assert checksum(after) != checksum(rendered["bundled-redis"])


def test_bundled_redis_without_auth(rendered):
    r = rendered["bundled-redis-no-auth"]
    container = r.one("StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert "--requirepass" not in container["args"] and "env" not in container
    redis_name = r.one("StatefulSet")["metadata"]["name"]
    assert env_of(agentd_container(r))["AGENTD_STORE_URL"]["value"] == f"redis://{redis_name}:6379/0"
    assert "no password" in r.notes


@pytest.mark.parametrize("override", [
    {"replicaCount": 2},
    {"autoscaling": {"enabled": True}},
])
def test_embedded_store_with_several_replicas_fails_clearly(chart, override):
    with pytest.raises(helm.HelmRenderError) as err:
        chart.render(override, name=RELEASE, namespace=NAMESPACE)
    message = str(err.value)
    assert "store.mode=embedded is single-writer" in message
    assert "store.mode=external" in message


def test_embedded_store_is_single_writer(rendered):
    for scenario in ("default", "embedded-persistent"):
        deployment = rendered[scenario].one("Deployment")
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"]["type"] == "Recreate"
        assert "AGENTD_STORE_URL" not in env_of(agentd_container(rendered[scenario]))
    volumes = {v["name"]: v for v in rendered["embedded-persistent"].one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    pvc = rendered["embedded-persistent"].one("PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert "emptyDir" in {k for v in rendered["default"].one("Deployment")["spec"]["template"]["spec"]["volumes"]
                          if v["name"] == "data" for k in v}


@pytest.mark.parametrize("override,needle", [
    ({"store": {"mode": "external"}}, "store.external.url"),
    ({"store": {"mode": "external", "external": {"url": "redis://:pw@h:6379/0",
                                                 "passwordSecret": {"name": "s", "key": "k"}}}},
     "must not carry credentials"),
    ({"store": {"mode": "external", "external": {"url": "redis://user:pw@h:6379/0"}}}, "must not carry credentials"),
    ({"secrets": {"apiKeysKey": "api-keys"}}, "secrets.existingSecret"),
    ({"secrets": {"providerKeys": [{"name": "OPENAI_API_KEY", "secretKey": "k"}]}}, "names no Secret"),
    ({"store": {"mode": "bundled", "bundled": {"auth": {"enabled": True}}}}, "store.bundled.auth.enabled needs a Secret"),
    ({"store": {"mode": "external", "external": {"url": "redis://r:6379"}}, "persistence": {"enabled": True},
      "replicaCount": 3}, "ReadWriteOnce"),
    # Redis Cluster: WAIT is refused, and so is a database, a path, a query or a host without a port.
    ({"store": {"mode": "external", "external": {"url": "redis+cluster://h1:6379,h2:6379", "waitReplicas": 1}}},
     "store.external.waitReplicas=1 is not supported with a redis+cluster:// URL"),
    ({"store": {"mode": "external", "external": {"url": "rediss+cluster://h1:6379", "waitReplicas": 2,
                                                 "passwordSecret": {"name": "s", "key": "k"}}}},
     "store.external.waitReplicas=2 is not supported with a redis+cluster:// URL"),
    ({"store": {"mode": "external", "external": {"url": "redis+cluster://h1:6379,h2:6379/0"}}},
     "a redis+cluster:// URL lists seed nodes as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+cluster://h1:6379?read_from_replicas=true"}}},
     "a redis+cluster:// URL lists seed nodes as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+cluster://h1,h2:6379"}}},
     "a redis+cluster:// URL lists seed nodes as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+cluster://u:pw@h1:6379,h2:6379"}}},
     "must not carry credentials"),
    ({"store": {"mode": "external", "external": {"url": "redis+sentinel://:pw@s1:26379/mymaster",
                                                 "passwordSecret": {"name": "s", "key": "k"}}}},
     "must not carry credentials"),
    # Sentinel: the master name is required, the database is a number, nothing after it.
    ({"store": {"mode": "external", "external": {"url": "redis+sentinel://s1:26379,s2:26379"}}},
     "a redis+sentinel:// URL lists the Sentinels as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+sentinel://s1:26379/mymaster/zero"}}},
     "a redis+sentinel:// URL lists the Sentinels as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+sentinel://s1:26379/mymaster/0/1"}}},
     "a redis+sentinel:// URL lists the Sentinels as host:port"),
    ({"store": {"mode": "external", "external": {"url": "redis+sentinel://s1/mymaster"}}},
     "a redis+sentinel:// URL lists the Sentinels as host:port"),
])
def test_inconsistent_values_fail_with_a_clear_message(chart, override, needle):
    with pytest.raises(helm.HelmRenderError) as err:
        chart.render(override, name=RELEASE, namespace=NAMESPACE)
    assert needle in str(err.value)
    assert ":pw@" not in str(err.value), "a message must not echo a password"


# --- config rollout -----------------------------------------------------------------------------


def checksum(r: Rendered) -> str:
    return r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


def test_config_checksum_rolls_pods_on_config_change(chart, rendered):
    base = checksum(rendered["default"])
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert checksum(render(chart)) == base, "the checksum must be stable"
    changed = chart.values["agentd"]["config"].replace("You are a helpful assistant.", "Be brief.")
    assert checksum(render(chart, {"agentd": {"config": changed}})) != base
    assert checksum(render(chart, {"resources": {"requests": {"cpu": "1"}}})) == base


def test_config_is_mounted_from_the_configmap(rendered):
    r = rendered["default"]
    container = agentd_container(r)
    assert env_of(container)["AGENTD_CONFIG"]["value"] == "/etc/agentd/agentd.toml"
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["config"]["mountPath"] == "/etc/agentd" and mounts["config"]["readOnly"] is True
    assert mounts["data"]["mountPath"] == env_of(container)["AGENTD_DATA_DIR"]["value"] == "/var/lib/agentd"
    volumes = {v["name"]: v for v in r.one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == r.one("ConfigMap")["metadata"]["name"]
    config = tomllib.loads(r.one("ConfigMap")["data"]["agentd.toml"])
    assert config["agents"][0]["id"] == "assistant"
    assert env_of(container)["AGENTD_LOG_FORMAT"]["value"] == "json"


def test_the_playground_is_off_unless_enabled(chart, rendered):
    assert "AGENTD_PLAYGROUND" not in env_of(agentd_container(rendered["default"]))
    on = render(chart, {"agentd": {"playground": True}})
    assert env_of(agentd_container(on))["AGENTD_PLAYGROUND"]["value"] == "true"


# --- production features ------------------------------------------------------------------------


def test_production_scaling_and_disruption(rendered):
    r = rendered["production"]
    deployment = r.one("Deployment")
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": deployment["metadata"]["name"]}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    pdb = r.one("PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 2, "selector": deployment["spec"]["selector"]}
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for c in spread:
        assert c["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_production_otel_env(rendered):
    env = env_of(agentd_container(rendered["production"]))
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == "http://otel-collector.observability.svc:4317"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"]["value"] == "grpc"
    assert env["OTEL_SERVICE_NAME"]["value"] == "agentd-ci"
    assert env["OTEL_TRACES_SAMPLER"]["value"] == "parentbased_traceidratio"
    assert env["OTEL_TRACES_SAMPLER_ARG"]["value"] == "0.2"
    attrs = env["OTEL_RESOURCE_ATTRIBUTES"]["value"].split(",")
    assert "deployment.environment=production" in attrs and "k8s.pod.name=$(POD_NAME)" in attrs
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in env_of(agentd_container(rendered["default"]))


def test_network_policy_admits_clients_and_the_test_pod(rendered):
    r = rendered["production"]
    policy = r.one("NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == r.one("Deployment")["spec"]["selector"]["matchLabels"]
    rule, metrics_rule = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "grpc", "protocol": "TCP"}]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert metrics_rule["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "observability"}
    client_labels = [p["podSelector"]["matchLabels"] for p in rule["from"] if "podSelector" in p]
    test_pod_labels = r.one("Pod")["metadata"]["labels"]
    assert any(labels.items() <= test_pod_labels.items() for labels in client_labels)
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    # With the bundled Redis, Redis only admits agentd, and agentd may reach it.
    b = rendered["bundled-redis"]
    redis_policy = b.one("NetworkPolicy", b.one("StatefulSet")["metadata"]["name"])
    (redis_rule,) = redis_policy["spec"]["ingress"]
    assert redis_rule["from"] == [{"podSelector": {"matchLabels": b.one("Deployment")["spec"]["selector"]["matchLabels"]}}]


def test_metrics_port_env_annotations_and_service(rendered):
    r = rendered["default"]
    container = agentd_container(r)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == 9464
    assert env_of(container)["AGENTD_METRICS_LISTEN"]["value"] == "0.0.0.0:9464"
    annotations = r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == "9464"
    assert annotations["prometheus.io/path"] == "/metrics"
    service_ports = {p["name"]: p for p in r.one("Service")["spec"]["ports"]}
    assert service_ports["metrics"]["port"] == 9464 and service_ports["metrics"]["targetPort"] == "metrics"
    # IPv6 listen host and a custom port follow through.
    v6 = rendered["external-url-secret"]
    assert env_of(agentd_container(v6))["AGENTD_METRICS_LISTEN"]["value"] == "[::]:9464"


def test_metrics_can_be_turned_off(chart):
    r = render(chart, {"metrics": {"enabled": False}})
    container = agentd_container(r)
    assert [p["name"] for p in container["ports"]] == ["grpc"]
    assert "AGENTD_METRICS_LISTEN" not in env_of(container)
    assert "prometheus.io/scrape" not in r.one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert [p["name"] for p in r.one("Service")["spec"]["ports"]] == ["grpc"]


def test_service_monitor_scrapes_the_metrics_port(chart):
    r = render(chart, {"metrics": {"serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "10s",
                                                      "labels": {"release": "kube-prometheus-stack"}}},
                       "networkPolicy": {"enabled": True, "allowExternal": False,
                                         "ingressFrom": []}})
    monitor = r.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = r.one("Service", r.one("Deployment")["metadata"]["name"])
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}]
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}
    with pytest.raises(Exception, match="interval"):
        render(chart, {"metrics": {"serviceMonitor": {"enabled": True, "interval": "soon"}}})


def test_any_source_may_scrape_by_default(chart):
    r = render(chart, {"networkPolicy": {"enabled": True}})
    _, metrics_rule = r.one("NetworkPolicy")["spec"]["ingress"]
    assert metrics_rule == {"ports": [{"port": "metrics", "protocol": "TCP"}]}


def test_metrics_scrapers_can_be_restricted(chart):
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    r = render(chart, {"networkPolicy": {"enabled": True}, "metrics": {"ingressFrom": peers}})
    _, metrics_rule = r.one("NetworkPolicy")["spec"]["ingress"]
    assert metrics_rule == {"ports": [{"port": "metrics", "protocol": "TCP"}], "from": peers}


def test_headless_service_for_client_side_balancing(rendered):
    services = rendered["production"].all("Service")
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    assert len(headless) == 1 and headless[0]["spec"]["ports"][0]["appProtocol"] == "grpc"


def test_helm_test_pod_checks_health_through_the_service(rendered):
    r = rendered["default"]
    pod = r.one("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    service = r.one("Service")
    addr = f"-addr={service['metadata']['name']}.{NAMESPACE}.svc:{service['spec']['ports'][0]['port']}"
    assert container["command"] == ["/ko-app/grpc-health-probe"]
    assert addr in container["args"]


def test_notes_show_grpcurl_commands(rendered):
    notes = rendered["production"].notes
    assert "kubectl --namespace agentd-ci port-forward service/agentd-ci 50051:50051" in notes
    assert "grpcurl -plaintext localhost:50051 list" in notes
    assert 'authorization: Bearer $AGENTD_API_KEY' in notes
    assert "helm test agentd-ci" in notes


@pytest.mark.parametrize("scenario", ["default", "production", "bundled-redis"])
def test_rendered_config_is_accepted_by_agentd(rendered, scenario, tmp_path):
    """The ConfigMap's agentd.toml passes the binary's own check (unknown keys, agents, tools)."""
    import os
    import subprocess

    binary = os.environ.get("AGENTD_BIN", str(ROOT / "target" / "debug" / "agentd"))
    assert os.path.exists(binary), f"{binary} is missing: run `cargo build` first (scripts/test.sh does)"
    import tomllib

    config = tmp_path / "agentd.toml"
    text = rendered[scenario].one("ConfigMap")["data"]["agentd.toml"]
    config.write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    # The pod gets each provider key from a Secret (providerKeys / envFromExistingSecret); the
    # check also requires them to be set, so they are stand-ins here.
    for provider in tomllib.loads(text).get("providers", []):
        if "api_key_env" in provider:
            env[provider["api_key_env"]] = "stand-in-key"
    checked = subprocess.run(
        [binary, "--check-config", "--config", str(config)], env=env, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr


# --- the store env as agentd reads it -----------------------------------------------------------


def agentd_check_config(rendered_env: dict[str, dict[str, Any]], tmp_path: Path) -> subprocess.CompletedProcess:
    """`agentd --check-config` with the chart's default agents config and the AGENTD_STORE_* env vars
    of a render, each $(VAR) expanded as the kubelet does (a stand-in for a value from a Secret)."""
    binary = os.environ.get("AGENTD_BIN", str(ROOT / "target" / "debug" / "agentd"))
    assert os.path.exists(binary), f"{binary} is missing: run `cargo build` first (scripts/test.sh does)"
    config = tmp_path / "agentd.toml"
    config.write_text(yaml.safe_load((CHART / "values.yaml").read_text())["agentd"]["config"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["OPENAI_API_KEY"] = "stand-in-key"
    stand_ins = {name: "stand-in-password" for name, e in rendered_env.items() if "valueFrom" in e}
    for name, e in rendered_env.items():
        if name.startswith("AGENTD_STORE_") and "value" in e:
            env[name] = re.sub(r"\$\((\w+)\)", lambda m: stand_ins[m.group(1)], e["value"])
    return subprocess.run([binary, "--check-config", "--config", str(config)], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("scenario", ["production", "cluster", "sentinel", "external-plain-url", "bundled-redis"])
def test_rendered_store_env_is_accepted_by_agentd(rendered, scenario, tmp_path):
    env = env_of(agentd_container(rendered[scenario]))
    assert "AGENTD_STORE_URL" in env
    checked = agentd_check_config(env, tmp_path)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("external", [external for external, _ in URL_FORMS] + [
    {"url": "redis+sentinel://s1:26379/mymaster", "passwordSecret": PASSWORD, "waitReplicas": 2, "waitTimeoutMs": 60000},
])
def test_every_store_url_form_is_accepted_by_agentd(chart, external, tmp_path):
    env = env_of(agentd_container(render(chart, {"replicaCount": 2, "store": {"mode": "external", "external": external}})))
    checked = agentd_check_config(env, tmp_path)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("external", [
    # Accepted by both.
    {"url": "redis+cluster://a:7000,b:7001"},
    {"url": "rediss+cluster://a:7000/"},
    {"url": "redis+sentinel://s1:26379,s2:26379/mymaster"},
    {"url": "rediss+sentinel://s1:26379/my-master.prod/15/"},
    {"url": "redis+sentinel://s1:26379/mymaster", "waitReplicas": 1},
    # Refused by both: the chart at render time, agentd at start-up.
    {"url": "redis+cluster://a"},
    {"url": "redis+cluster://a:7000,b"},
    {"url": "redis+cluster://a:7000/0"},
    {"url": "redis+cluster://a:7000?read_from_replicas=true"},
    {"url": "redis+cluster://a:7000,b:7001", "waitReplicas": 1},
    {"url": "redis+sentinel://s1:26379"},
    {"url": "redis+sentinel://s1:26379/"},
    {"url": "redis+sentinel://s1:26379?x=1"},
    {"url": "redis+sentinel://s1:26379/mymaster/x"},
    {"url": "redis+sentinel://s1:26379/mymaster/1/2"},
    {"url": "redis+sentinel://s1/mymaster"},
])
def test_the_chart_refuses_the_store_urls_agentd_refuses(chart, external, tmp_path):
    """The render-time checks mirror agentd's own: a URL the chart lets through starts, and a URL
    agentd would refuse (CrashLoopBackOff) is refused by `helm install` instead."""
    values = {"replicaCount": 2, "store": {"mode": "external", "external": external}}
    try:
        env = env_of(agentd_container(render(chart, values)))
        rendered_ok = True
    except helm.HelmRenderError:
        rendered_ok = False
        env = {"AGENTD_STORE_URL": {"name": "AGENTD_STORE_URL", "value": external["url"]}}
        if external.get("waitReplicas"):
            env["AGENTD_STORE_WAIT_REPLICAS"] = {"name": "AGENTD_STORE_WAIT_REPLICAS", "value": str(external["waitReplicas"])}
    checked = agentd_check_config(env, tmp_path)
    assert rendered_ok == (checked.returncode == 0), (rendered_ok, checked.stderr)


def test_a_tenant_config_passes_through_with_keys_from_secrets_and_a_jwks_volume(chart):
    # The README's "With tenants" values: the config file carries the tenants, their keys come
    # from Secret keys as the variables it names, the JWKS from a mounted ConfigMap.
    config = (
        '[[auth.tenants]]\nname = "acme"\nresource_prefixes = ["acme/"]\napi_key_env = "ACME_API_KEYS"\n\n'
        '[auth.jwt]\njwks_file = "/etc/agentd/jwks/jwks.json"\naudience = "agentd"\n'
    )
    r = render(
        chart,
        {
            "secrets": {
                "existingSecret": "agentd-secrets",
                "providerKeys": [{"name": "ACME_API_KEYS", "secretKey": "acme-api-keys"}],
            },
            "extraVolumes": [{"name": "jwks", "configMap": {"name": "agentd-jwks"}}],
            "extraVolumeMounts": [{"name": "jwks", "mountPath": "/etc/agentd/jwks", "readOnly": True}],
            "agentd": {"config": config},
        },
    )
    rendered_config = tomllib.loads(r.one("ConfigMap")["data"]["agentd.toml"])
    assert rendered_config["auth"]["tenants"][0]["resource_prefixes"] == ["acme/"]
    assert rendered_config["auth"]["jwt"]["jwks_file"] == "/etc/agentd/jwks/jwks.json"
    container = agentd_container(r)
    key = env_of(container)["ACME_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert key == {"name": "agentd-secrets", "key": "acme-api-keys"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["jwks"]["mountPath"] == "/etc/agentd/jwks"
    volumes = {v["name"]: v for v in r.one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["jwks"]["configMap"]["name"] == "agentd-jwks"
