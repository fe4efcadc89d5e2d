"""ray_cluster against FakeRay (dashboard) and FakeGcs (GCS port) from fake_ray.py."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.mtslime.posttrain.plugins.modules import ray_cluster
from fake_ray import FakeGcs, FakeRay, free_port, node


@pytest.fixture
def cluster():
    dashboard = FakeRay(nodes=[node("10.0.0.1", head=True)])
    gcs = FakeGcs()
    yield dashboard, gcs
    dashboard.close()
    gcs.close()


def args(dashboard, gcs, **extra):
    base = {"gcs_address": gcs.address, "dashboard_url": dashboard.url, "request_timeout": 3}
    base.update(extra)
    return base


def test_up_and_ready(run_module, cluster):
    dashboard, gcs = cluster
    result, failed = run_module(ray_cluster, args(dashboard, gcs, expected_nodes=["10.0.0.1"], expected_gpus=8))
    assert not failed and not result["changed"]
    assert result["up"] and result["ready"] and result["gcs_ok"] and result["dashboard_ok"]
    assert result["gcs_protocol"] == "grpc" and result["ray_version"] == "2.60.0"
    assert (
        result["gpus"] == 8 and result["cpus"] == 64 and result["missing_nodes"] == [] and result["missing_gpus"] == 0
    )
    assert result["head"] == {
        "ip": "10.0.0.1",
        "node_id": result["nodes"][0]["node_id"],
        "gcs_port": gcs.port,
        "dashboard_port": int(dashboard.url.rsplit(":", 1)[1]),
    }
    assert result["nodes"][0] == {
        "node_id": result["nodes"][0]["node_id"],
        "ip": "10.0.0.1",
        "hostname": "10.0.0.1",
        "state": "ALIVE",
        "alive": True,
        "is_head": True,
        "resources": {"GPU": 8.0, "CPU": 64.0},
    }
    assert result["progress"] == "1/1 nodes, 8/8 GPUs registered (Ray 2.60.0)"


def test_timeout_zero_reports_missing_nodes_without_failing(run_module, cluster):
    dashboard, gcs = cluster
    dashboard.nodes.append(node("10.0.0.2", state="DEAD"))
    result, failed = run_module(
        ray_cluster, args(dashboard, gcs, expected_nodes=["10.0.0.1", "10.0.0.2", "10.0.0.3"], expected_gpus=24)
    )
    assert not failed
    assert result["up"] and not result["ready"]
    assert result["missing_nodes"] == ["10.0.0.2", "10.0.0.3"] and result["missing_gpus"] == 16 and result["gpus"] == 8
    assert result["progress"] == "1/3 nodes, 8/24 GPUs registered; waiting for 10.0.0.2, 10.0.0.3; 16 GPUs missing"


def test_timeout_fails_naming_missing_nodes_and_gpus(run_module, cluster):
    dashboard, gcs = cluster
    result, failed = run_module(
        ray_cluster,
        args(dashboard, gcs, expected_nodes=["10.0.0.1", "10.0.0.3"], expected_gpus=16, timeout=1, interval=1),
    )
    assert failed
    assert "nodes not registered: 10.0.0.3" in result["msg"]
    assert "8 of expected_gpus 16 GPUs missing (8 registered)" in result["msg"]
    assert "ray start --address=10.0.0.1:%d" % gcs.port in result["msg"]
    assert result["missing_nodes"] == ["10.0.0.3"]


def test_waits_until_the_node_joins(run_module, cluster):
    dashboard, gcs = cluster
    timer = threading.Timer(1.0, lambda: dashboard.nodes.append(node("10.0.0.3")))
    timer.start()
    try:
        result, failed = run_module(
            ray_cluster,
            args(dashboard, gcs, expected_nodes=["10.0.0.1", "10.0.0.3"], expected_gpus=16, timeout=20, interval=1),
        )
    finally:
        timer.cancel()
    assert not failed and result["ready"] and result["gpus"] == 16
    assert result["progress"] == "2/2 nodes, 16/16 GPUs registered (Ray 2.60.0)"
    assert result["elapsed"] >= 1


def test_nothing_running_is_reported_not_failed(run_module):
    result, failed = run_module(
        ray_cluster,
        {
            "gcs_address": "127.0.0.1:%d" % free_port(),
            "dashboard_url": "http://127.0.0.1:%d" % free_port(),
            "request_timeout": 2,
        },
    )
    assert not failed
    assert not result["up"] and not result["gcs_ok"] and not result["dashboard_ok"]
    assert result["progress"].startswith("Ray is not up (GCS: 127.0.0.1:")
    assert "connection refused" in result["progress"]
    assert any("ray start --head" in hint for hint in result["hints"])


def test_nothing_running_with_timeout_fails_with_the_addresses(run_module):
    gcs_port, dash_port = free_port(), free_port()
    result, failed = run_module(
        ray_cluster,
        {
            "gcs_address": "127.0.0.1:%d" % gcs_port,
            "dashboard_url": "http://127.0.0.1:%d" % dash_port,
            "timeout": 1,
            "interval": 1,
            "request_timeout": 1,
        },
    )
    assert failed
    assert (
        "Ray did not answer within 1s at gcs_address 127.0.0.1:%d and dashboard_url http://127.0.0.1:%d"
        % (gcs_port, dash_port)
        in result["msg"]
    )


def test_swapped_ports_are_recognised(run_module, cluster):
    """FAQ Q1: the GCS port given as dashboard_url and the dashboard port as gcs_address."""
    dashboard, gcs = cluster
    dash_port = int(dashboard.url.rsplit(":", 1)[1])
    result, failed = run_module(
        ray_cluster,
        {
            "gcs_address": "127.0.0.1:%d" % dash_port,
            "dashboard_url": "http://127.0.0.1:%d" % gcs.port,
            "request_timeout": 3,
        },
    )
    assert not failed and not result["up"]
    assert result["gcs_protocol"] == "http" and not result["gcs_ok"]
    assert "GCS port, not the dashboard" in result["errors"]["dashboard"]
    assert "it is a dashboard port, not the GCS" in result["hints"][0]
    assert sum("FAQ Q1" in hint for hint in result["hints"]) == 1


def test_dead_nodes_do_not_count(run_module, cluster):
    dashboard, gcs = cluster
    dashboard.nodes.append(node("10.0.0.2", gpus=8, state="DEAD"))
    result, dummy = run_module(ray_cluster, args(dashboard, gcs, expected_gpus=16))
    assert result["gpus"] == 8 and result["missing_gpus"] == 8
    assert [n["alive"] for n in result["nodes"]] == [True, False]
    assert result["progress"] == "1 node, 8/16 GPUs registered; 8 GPUs missing"


def test_unhealthy_gcs_behind_the_dashboard(run_module, cluster):
    dashboard, gcs = cluster
    dashboard.healthz = "GCS unreachable"
    result, failed = run_module(ray_cluster, args(dashboard, gcs))
    assert not failed and not result["dashboard_ok"] and not result["up"]
    assert "gcs_healthz" in result["errors"]["dashboard"]


def test_summary_fallback(run_module, cluster):
    dashboard, gcs = cluster
    dashboard.state_api = False
    result, dummy = run_module(ray_cluster, args(dashboard, gcs, expected_nodes=["10.0.0.1"]))
    assert result["ready"] and result["gpus"] == 8


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"gcs_address": "10.0.0.1"}, ["gcs_address", "no port"]),
        ({"gcs_address": "http://10.0.0.1:64379"}, ["gcs_address", "is a URL"]),
        ({"dashboard_url": "ray://10.0.0.1:10001"}, ["dashboard_url", "scheme"]),
        ({"dashboard_url": "http://10.0.0.1:64379", "gcs_address": "10.0.0.1:64379"}, ["same port 64379", "FAQ Q1"]),
        ({"expected_gpus": -1}, ["expected_gpus is -1"]),
        ({"timeout": -5, "interval": 0}, ["timeout is -5", "interval is 0"]),
        ({"request_timeout": 0}, ["request_timeout is 0"]),
    ],
)
def test_bad_parameters_fail_naming_the_variable(run_module, bad, words):
    result, failed = run_module(ray_cluster, bad)
    assert failed
    for word in words:
        assert word in result["msg"]


def test_check_mode_is_the_same_probe(run_module, cluster):
    dashboard, gcs = cluster
    result, failed = run_module(ray_cluster, args(dashboard, gcs), check_mode=True)
    assert not failed and result["up"] and not result["changed"]
