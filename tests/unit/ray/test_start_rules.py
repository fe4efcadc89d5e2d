"""Every decision of ray_start (plugins/module_utils/ray/start_rules.py) and its message."""
from __future__ import annotations

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.start_rules import (
    decide,
    message,
    start_argv,
    stop_argv,
)

HEAD_START = [
    "ray", "start", "--head", "--port", "64379", "--dashboard-port", "8772", "--dashboard-host", "127.0.0.1",
    "--num-cpus", "64", "--num-gpus", "8", "--node-ip-address", "10.0.0.1", "--disable-usage-stats",
]
WORKER_JOIN = [
    "ray", "start", "--address", "10.0.0.1:64379",
    "--num-cpus", "64", "--num-gpus", "8", "--node-ip-address", "10.0.0.2", "--disable-usage-stats",
]


def want(role="head", restart="when_idle", **extra):
    base = dict(role=role, gcs_address="10.0.0.1:64379", gcs_port=64379, dashboard_port=8772,
                dashboard_host="127.0.0.1", node_ip="10.0.0.1" if role == "head" else "10.0.0.2",
                num_gpus=8, num_cpus=64, extra_args=[], restart=restart)
    base.update(extra)
    return base


def head_node(ip="10.0.0.1", gpus=8.0, cpus=64.0):
    return {"ip": ip, "alive": True, "is_head": True, "resources": {"GPU": gpus, "CPU": cpus}}


def up(head=None, jobs=(), **extra):
    probe = {"processes": 12, "recorded_address": "10.0.0.1:64379", "recorded_answers": True,
             "listening": [64379, 8772], "up": True, "head_node": head or head_node(), "active_jobs": list(jobs)}
    probe.update(extra)
    return probe


def down(**extra):
    probe = {"processes": 0, "recorded_address": "", "recorded_answers": False, "listening": [], "up": False,
             "head_node": None, "active_jobs": []}
    probe.update(extra)
    return probe


# ---------------------------------------------------------------- the commands

def test_start_argv_is_the_guides_command_for_a_head_and_a_worker():
    assert start_argv(want()) == HEAD_START
    assert start_argv(want("worker")) == WORKER_JOIN
    assert start_argv(want(extra_args=["--object-store-memory", "1000"]))[-2:] == ["--object-store-memory", "1000"]
    assert stop_argv(False) == ["ray", "stop"] and stop_argv(True) == ["ray", "stop", "--force"]


# ---------------------------------------------------------------- head

def test_head_nothing_running_starts():
    decision = decide(down(), want())
    assert decision == {"action": "start", "reason": "no Ray runs on this node", "fix": None, "commands": [HEAD_START]}
    assert message(decision) == "no Ray runs on this node"


def test_head_up_as_configured_is_left_alone_even_under_a_job():
    decision = decide(up(jobs=["qwen3-8B-attempt-1"]), want())
    assert decision["action"] == "keep" and decision["commands"] == []
    assert decision["reason"] == "the Ray head on 10.0.0.1:64379 is up with the configured address, GPUs and CPUs"


def test_head_that_differs_is_restarted_when_idle_gently():
    decision = decide(up(head=head_node(gpus=4.0, cpus=32.0)), want())
    assert decision["action"] == "restart"
    assert decision["commands"] == [["ray", "stop"], HEAD_START]
    assert decision["reason"] == (
        "the Ray head on 10.0.0.1:64379 is up but differs from the configuration: 4 GPUs (configured 8); "
        "32 CPUs (configured ray_num_cpus 64)")


def test_head_that_differs_in_address_names_it():
    decision = decide(up(head=head_node(ip="10.9.9.9")), want())
    assert "address 10.9.9.9 (configured 10.0.0.1)" in decision["reason"]
    assert "address unknown (configured 10.0.0.1)" in decide(up(head={"resources": {}}), want())["reason"]


def test_head_that_differs_under_a_job_is_refused_naming_the_job_and_the_fix():
    decision = decide(up(head=head_node(gpus=4.0), jobs=["qwen3-8B-attempt-2"]), want())
    assert decision["action"] == "refuse" and decision["commands"] == []
    assert message(decision) == (
        "the Ray head on 10.0.0.1:64379 is up but differs from the configuration: 4 GPUs (configured 8); "
        "job(s) qwen3-8B-attempt-2 run on it and would die. "
        "Fix: wait for them or stop them (playbooks/stop.yml), or set ray_head_restart: force")


def test_head_that_differs_under_a_job_with_force_is_stopped_with_force():
    decision = decide(up(head=head_node(gpus=4.0), jobs=["j"]), want(restart="force"))
    assert decision["action"] == "restart" and decision["commands"] == [["ray", "stop", "--force"], HEAD_START]


def test_head_that_differs_with_never_is_refused():
    decision = decide(up(head=head_node(gpus=4.0)), want(restart="never"))
    assert decision["action"] == "refuse"
    assert decision["fix"] == "ray_head_restart is never; set it to when_idle to restart the head"


def test_head_another_live_ray_on_other_ports_is_left_alone():
    probe = down(processes=9, recorded_address="10.0.0.1:6379", recorded_answers=True)
    decision = decide(probe, want())
    assert decision["action"] == "refuse"
    assert message(decision) == (
        "Ray is running on this node (9 processes, cluster 10.0.0.1:6379), but not on the configured ports "
        "(ray_gcs_port 64379, ray_dashboard_port 8772); it may run someone's job, so it is left alone. "
        "Fix: point ray_gcs_port / ray_dashboard_port at it, stop it yourself, "
        "or set ray_head_restart: force to stop it")


def test_head_another_live_ray_with_force_is_stopped():
    probe = down(processes=9, recorded_address="10.0.0.1:6379", recorded_answers=True)
    decision = decide(probe, want(restart="force"))
    assert decision["action"] == "restart" and decision["commands"] == [["ray", "stop", "--force"], HEAD_START]
    assert decision["reason"].endswith("; ray_head_restart is force")


def test_head_gcs_alive_but_dashboard_silent_is_refused_since_jobs_cannot_be_listed():
    probe = down(processes=9, recorded_address="10.0.0.1:64379", recorded_answers=True)
    decision = decide(probe, want())
    assert decision["action"] == "refuse"
    assert message(decision) == (
        "the Ray GCS on 10.0.0.1:64379 answers but its dashboard (ray_dashboard_port 8772) does not, so the running "
        "jobs cannot be listed. Fix: it may still be starting: rerun in a minute; look at "
        "`ray status --address 10.0.0.1:64379`; or set ray_head_restart: force to restart it")
    assert decide(probe, want(restart="force"))["commands"][0] == ["ray", "stop", "--force"]


def test_head_remains_of_a_dead_head_are_cleared_with_force_then_started():
    probe = down(processes=3, recorded_address="10.0.0.1:64379", recorded_answers=False)
    decision = decide(probe, want())
    assert decision["action"] == "restart" and decision["commands"] == [["ray", "stop", "--force"], HEAD_START]
    assert decision["reason"] == (
        "the remains of a dead Ray head are running (3 processes, its GCS 10.0.0.1:64379 does not answer, "
        "so no job can run)")
    without_record = decide(down(processes=3), want())
    assert "its GCS 10.0.0.1:64379 does not answer" in without_record["reason"]


def test_head_remains_but_jobs_listed_are_never_stopped_with_force():
    probe = down(processes=3, recorded_address="", recorded_answers=False, active_jobs=["j1", "j2"])
    decision = decide(probe, want())
    assert decision["action"] == "refuse" and decision["commands"] == []
    assert message(decision) == (
        "the Ray head on 10.0.0.1:64379 does not answer on both ports, but job(s) j1, j2 are listed as running. "
        "Fix: wait for them or stop them (playbooks/stop.yml), or set ray_head_restart: force")


def test_head_port_taken_by_another_program_is_refused_before_anything_starts():
    decision = decide(down(listening=[8772]), want())
    assert decision["action"] == "refuse" and decision["commands"] == []
    assert message(decision) == (
        "port 8772 (ray_dashboard_port) is already listening on this node, but no Ray runs here: another program "
        "holds it. Fix: run the preflight (it is part of the ray_head tag; `--tags preflight` alone names the "
        "process and its pid), then stop that program or change the port variable")
    both = decide(down(listening=[64379, 8772]), want())
    assert both["reason"].startswith("port 64379 (ray_gcs_port) and 8772 (ray_dashboard_port) is already")


# ---------------------------------------------------------------- worker

def registered(gpus=8.0, alive=True):
    return {"ip": "10.0.0.2", "alive": alive, "is_head": False, "resources": {"GPU": gpus, "CPU": 64.0}}


def test_worker_listed_by_its_head_is_left_alone():
    decision = decide(down(registered=registered(), active_jobs=["j"]), want("worker"))
    assert decision["action"] == "keep"
    assert decision["reason"] == "the head 10.0.0.1:64379 lists this worker (10.0.0.2) alive with its 8 GPUs"


def test_worker_not_running_joins():
    decision = decide(down(registered=None), want("worker"))
    assert decision == {"action": "join", "reason": "worker 10.0.0.2 is not registered with its head 10.0.0.1:64379",
                        "fix": None, "commands": [WORKER_JOIN]}


def test_worker_listed_dead_joins():
    assert decide(down(registered=registered(alive=False)), want("worker"))["action"] == "join"


def test_worker_with_too_few_gpus_is_rejoined():
    probe = down(registered=registered(gpus=4.0), processes=5, recorded_address="10.0.0.1:64379",
                 recorded_answers=True)
    decision = decide(probe, want("worker"))
    assert decision["action"] == "restart" and decision["commands"] == [["ray", "stop"], WORKER_JOIN]
    assert decision["reason"] == ("worker 10.0.0.2 is not registered with its head 10.0.0.1:64379 with its 8 GPUs; "
                                  "its Ray (cluster 10.0.0.1:64379) is stopped and joined again")


def test_worker_under_a_running_job_is_refused():
    decision = decide(down(active_jobs=["qwen3-8B-attempt-3"]), want("worker"))
    assert decision["action"] == "refuse"
    assert message(decision) == (
        "worker 10.0.0.2 is not registered with its head 10.0.0.1:64379, but job(s) qwen3-8B-attempt-3 run on the "
        "cluster; rejoining now would disturb them. Fix: wait for them to end or stop them (playbooks/stop.yml), "
        "then rerun")
    assert decide(down(active_jobs=["j"]), want("worker", restart="force"))["action"] == "join"


def test_worker_attached_to_another_live_cluster_is_stopped_gently_or_refused_with_never():
    probe = down(processes=5, recorded_address="10.9.9.9:64379", recorded_answers=True)
    assert decide(probe, want("worker"))["commands"] == [["ray", "stop"], WORKER_JOIN]
    refused = decide(probe, want("worker", restart="never"))
    assert refused["action"] == "refuse"
    assert message(refused) == (
        "worker 10.0.0.2 is not registered with its head 10.0.0.1:64379; its Ray is attached to another live "
        "cluster 10.9.9.9:64379. Fix: ray_head_restart is never; stop that Ray yourself or set "
        "ray_head_restart: when_idle")


def test_worker_remains_of_a_dead_ray_are_cleared_with_force():
    probe = down(processes=2, recorded_address="10.0.0.1:64379", recorded_answers=False)
    decision = decide(probe, want("worker"))
    assert decision["action"] == "restart" and decision["commands"] == [["ray", "stop", "--force"], WORKER_JOIN]
    assert decision["reason"].endswith("; the remains of its Ray (cluster 10.0.0.1:64379, not answering) are cleared")


@pytest.mark.parametrize("role", ["head", "worker"])
def test_unknown_policy_is_refused(role):
    decision = decide(down(), want(role, restart="sometimes"))
    assert decision["action"] == "refuse"
    assert message(decision) == "ray_head_restart is 'sometimes'. Fix: set it to one of when_idle, never, force"


def test_no_stop_ever_runs_under_a_listed_job_without_force():
    """The hard rule, over every probe shape: with an active job, no decision contains `ray stop`."""
    shapes = [up(jobs=["j"]), up(head=head_node(gpus=1.0), jobs=["j"]),
              down(processes=3, active_jobs=["j"]),
              down(processes=3, recorded_address="10.0.0.1:64379", recorded_answers=True, active_jobs=["j"]),
              down(processes=3, recorded_address="10.0.0.9:1", recorded_answers=True, active_jobs=["j"])]
    for role in ("head", "worker"):
        for policy in ("when_idle", "never"):
            for probe in shapes:
                commands = decide(probe, want(role, restart=policy))["commands"]
                assert not any(c[:2] == ["ray", "stop"] for c in commands), (role, policy, probe)
