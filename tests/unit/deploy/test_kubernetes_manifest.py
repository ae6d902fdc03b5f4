"""deploy/kubernetes.yaml: the probes, the drain and the grace period fit together."""
from __future__ import annotations

import os

import pytest
import yaml

from launch.serve import add_parser
from runtime.shutdown import EXIT_MARGIN, plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
MANIFEST = os.path.join(ROOT, "deploy", "kubernetes.yaml")


def _documents() -> dict[str, dict]:
    with open(MANIFEST) as f:
        return {doc["kind"]: doc for doc in yaml.safe_load_all(f)}


@pytest.fixture(scope="module")
def container() -> dict:
    (only,) = _documents()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return only


def _option(container: dict, name: str) -> str:
    for arg in container["command"] + container.get("args", []):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"--{name} is not set")


def test_probes_use_health_for_liveness_and_startup_and_ready_for_readiness(container):
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] in ports
    assert ports["http"] == int(_option(container, "port"))


def test_grace_period_outlasts_the_prestop_sleep_and_the_drain(container):
    spec = _documents()["Deployment"]["spec"]["template"]["spec"]
    sleep_command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep_command[0] == "sleep"
    timeout = float(_option(container, "shutdown-timeout"))
    assert timeout > 0
    window, graceful = plan(timeout, launched=False)
    assert window == timeout
    assert spec["terminationGracePeriodSeconds"] > float(sleep_command[1]) + graceful
    assert graceful >= timeout + EXIT_MARGIN


def test_the_command_is_a_valid_greenfront_serve_command_line(container):
    import argparse
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    ns, extra = parser.parse_known_args(container["command"][1:] + container["args"])
    assert ns.command == "serve" and not extra


def test_service_selects_the_pods_and_targets_their_port(container):
    docs = _documents()
    pod_labels = docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    service = docs["Service"]["spec"]
    assert all(pod_labels.get(k) == v for k, v in service["selector"].items())
    assert docs["Deployment"]["spec"]["selector"]["matchLabels"] == service["selector"]
    names = {p["name"] for p in container["ports"]}
    assert all(p["targetPort"] in names for p in service["ports"])


def test_memory_is_requested_and_limited(container):
    resources = container["resources"]
    assert memory_bytes(resources["limits"]["memory"]) > memory_bytes(
        resources["requests"]["memory"])


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity (``768Mi``, ``1Gi``, ``500M``) in bytes."""
    for suffix, factor in (("Ki", 2 ** 10), ("Mi", 2 ** 20), ("Gi", 2 ** 30), ("K", 10 ** 3),
                           ("M", 10 ** 6), ("G", 10 ** 9)):
        if quantity.endswith(suffix):
            return int(float(quantity[:-len(suffix)]) * factor)
    return int(quantity)
