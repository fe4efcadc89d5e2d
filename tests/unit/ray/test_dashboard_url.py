"""The one definition of the dashboard URL (plugins/filter/ray.py) and the ray_cluster wait that
prints progress (plugins/action/ray_cluster.py)."""
from __future__ import annotations

import subprocess

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.action import ray_cluster as action
from ansible_collections.mtslime.posttrain.plugins.filter.ray import ray_dashboard_url
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter
from fake_clock import Clock


def test_dashboard_url_is_the_heads_loopback_view():
    assert ray_dashboard_url(8772) == "http://127.0.0.1:8772"
    assert ray_dashboard_url("28772") == "http://127.0.0.1:28772"
    assert ray_dashboard_url(8772, "10.0.0.1") == "http://10.0.0.1:8772"
    assert ray_dashboard_url(8772, "::1") == "http://[::1]:8772"


@pytest.mark.parametrize("bad", [0, 65536, "x", None, True])
def test_a_bad_port_names_the_variable(bad):
    with pytest.raises(AnsibleFilterError, match=r"ray_dashboard_port is .*; set it to a TCP port number"):
        ray_dashboard_url(bad)


def test_no_other_place_builds_the_dashboard_url():
    """Roles and playbooks this branch owns use the filter (others: see the merge notes)."""
    found = subprocess.run(
        ["git", "grep", "-n", "http://127.0.0.1:{{ ray_dashboard_port", "--",
         "roles/ray_head", "playbooks/teardown.yml"],
        capture_output=True, text=True, check=False,
    ).stdout
    assert found == ""


def probe_result(gpus, ready=False):
    return {"ready": ready, "up": True, "gpus": float(gpus), "missing_nodes": [] if ready else ["10.0.0.2"],
            "missing_gpus": 0 if ready else 16 - gpus, "hints": [], "head": {"ip": "10.0.0.1"},
            "dashboard_url": "http://127.0.0.1:8772",
            "progress": "%d/2 nodes, %d/16 GPUs registered%s" % (2 if ready else 1, gpus,
                                                                 "" if ready else "; waiting for 10.0.0.2")}


def waiter(results):
    clock, said, calls = Clock(), [], []

    def call(name, args):
        calls.append((name, dict(args)))
        return results[min(len(calls) - 1, len(results) - 1)]

    return Waiter(call, said.append, clock=clock, sleep=clock.sleep), said, calls


ARGS = {"gcs_address": "10.0.0.1:64379", "dashboard_url": "http://127.0.0.1:8772", "expected_gpus": 16,
        "expected_nodes": ["10.0.0.1", "10.0.0.2"], "timeout": 600, "interval": 5}


def test_the_wait_probes_with_timeout_zero_and_says_progress_every_30s():
    results = [probe_result(8)] * 14 + [probe_result(16, ready=True)]
    wait, said, calls = waiter(results)
    result = action.wait(wait, ARGS, 600, 5)
    assert not result.get("failed") and result["ready"] and result["elapsed"] == 70
    assert all(name == "mtslime.posttrain.ray_cluster" and args["timeout"] == 0 for name, args in calls)
    assert said[0] == "1/2 nodes, 8/16 GPUs registered; waiting for 10.0.0.2 (waited 0s of 10m00s)"
    assert len(said) == 4 and said[-1] == "2/2 nodes, 16/16 GPUs registered (after 1m10s)"


def test_the_wait_fails_at_the_timeout_naming_what_is_missing():
    wait, said, calls = waiter([probe_result(8)])
    result = action.wait(wait, ARGS, 60, 5)
    assert result["failed"] and said
    assert result["msg"] == (
        "ray_cluster: after 60s the cluster at http://127.0.0.1:8772 is incomplete: nodes not registered: 10.0.0.2; "
        "8 of expected_gpus 16 GPUs missing (8 registered). Start Ray on the missing nodes with "
        "`ray start --address=10.0.0.1:64379` and check that Ray sees their GPUs "
        "(`ray status --address=10.0.0.1:64379`).")


def test_a_failed_probe_ends_the_wait_as_it_is():
    wait, said, calls = waiter([{"failed": True, "msg": "ray_cluster: gcs_address: bad"}])
    assert action.wait(wait, ARGS, 60, 5) == {"failed": True, "msg": "ray_cluster: gcs_address: bad"}
