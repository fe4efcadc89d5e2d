"""ray_start as Ansible runs it: the head's probe against FakeRay (dashboard, jobs) and FakeGcs
(GCS port), the node probe from a fake /proc, `ray start` / `ray stop` through a patched
run_command; plus the node probe itself (module_utils/ray/node_probe.py)."""
from __future__ import annotations

import os

import pytest
from ansible.module_utils import basic

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import node_probe as ray_node_probe
from ansible_collections.mtslime.posttrain.plugins.modules import ray_start
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import ray_start_task
from fake_ray import FakeGcs, FakeRay, free_port, node


@pytest.fixture
def head():
    dashboard = FakeRay(nodes=[node("127.0.0.1", head=True)])
    gcs = FakeGcs()
    yield dashboard, gcs
    dashboard.close()
    gcs.close()


@pytest.fixture
def node_probe(monkeypatch):
    """What the node shows (processes, recorded address, busy ports): no Ray by default."""
    shown = {"processes": 0, "process_list": [], "recorded_address": "", "recorded_answers": False, "listening": []}
    monkeypatch.setattr(ray_start_task, "probe_node", lambda ports: dict(shown))
    return shown


@pytest.fixture
def commands(monkeypatch):
    ran = []
    answers = {}

    def run_command(self, cmd, **kwargs):
        ran.append(list(cmd))
        return answers.get(cmd[1], (0, "%s done\n" % " ".join(cmd[:2]), ""))

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return ran, answers


def head_args(dashboard_url, gcs_address, **extra):
    args = {"role": "head", "gcs_address": gcs_address, "dashboard_url": dashboard_url, "node_ip": "127.0.0.1",
            "num_gpus": 8, "num_cpus": 64, "expected_nodes": ["127.0.0.1"], "expected_gpus": 8,
            "request_timeout": 2}
    args.update(extra)
    return args


def nothing_listening():
    """A dashboard URL and GCS address on which nothing listens."""
    return "http://127.0.0.1:%d" % free_port(), "127.0.0.1:%d" % free_port()


def test_converged_head_is_left_alone_and_reports_its_nodes_and_jobs(run_module, head, node_probe, commands):
    dashboard, gcs = head
    dashboard.add_job("qwen3-8B-attempt-1", status="RUNNING")
    dashboard.add_job("old", status="FAILED")
    node_probe.update(processes=12, recorded_address=gcs.address, recorded_answers=True)
    result, failed = run_module(ray_start, head_args(dashboard.url, gcs.address))
    assert not failed and not result["changed"] and result["action"] == "keep"
    assert result["cmd"] == [] and result["rc"] == 0 and commands[0] == []
    assert result["up"] and result["ready"] and result["active_jobs"] == ["qwen3-8B-attempt-1"]
    assert [n["ip"] for n in result["nodes"]] == ["127.0.0.1"] and result["ray_version"] == "2.60.0"
    assert result["actions"][0].startswith("left Ray alone: the Ray head on")
    assert "diff" not in result


def test_a_slow_dashboard_behind_a_live_gcs_is_asked_again_before_any_decision(run_module, head, node_probe,
                                                                               commands, monkeypatch):
    dashboard, gcs = head
    dashboard.add_job("qwen3-8B-attempt-1", status="RUNNING")
    node_probe.update(processes=12, recorded_address=gcs.address, recorded_answers=True)
    real_probe, calls = ray_start_task.probe_head, []

    def slow_then_up(*args):
        calls.append(1)
        return real_probe(*args) if len(calls) > 2 else {"up": False, "head_node": None, "nodes": [],
                                                         "active_jobs": [], "ray_version": None}

    monkeypatch.setattr(ray_start_task, "probe_head", slow_then_up)
    monkeypatch.setattr(ray_start_task.time, "sleep", lambda s: None)
    result, failed = run_module(ray_start, head_args(dashboard.url, gcs.address))
    assert not failed and result["action"] == "keep" and result["active_jobs"] == ["qwen3-8B-attempt-1"]
    assert len(calls) == 3 and commands[0] == []


def test_a_dashboard_that_never_answers_behind_a_live_gcs_is_refused_after_the_grace(run_module, node_probe,
                                                                                     commands, monkeypatch):
    gcs = FakeGcs()
    try:
        node_probe.update(processes=12, recorded_address=gcs.address, recorded_answers=True)
        monkeypatch.setattr(ray_start_task, "DASHBOARD_GRACE_SECONDS", 0.2)
        monkeypatch.setattr(ray_start_task.time, "sleep", lambda s: None)
        dashboard_url = "http://127.0.0.1:%d" % free_port()
        result, failed = run_module(ray_start, head_args(dashboard_url, gcs.address))
    finally:
        gcs.close()
    assert failed and result["action"] == "refuse" and commands[0] == []
    assert "answers but its dashboard" in result["msg"] and "rerun in a minute" in result["msg"]


def test_head_missing_a_worker_is_kept_but_not_ready(run_module, head, node_probe, commands):
    dashboard, gcs = head
    result = run_module(ray_start, head_args(dashboard.url, gcs.address, expected_nodes=["127.0.0.1", "10.0.0.2"]))[0]
    assert result["action"] == "keep" and not result["ready"]


def test_no_ray_starts_the_head_and_reports_like_cephadm(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    result, failed = run_module(ray_start, head_args(url, gcs, extra_args=["--object-store-memory", "1000"]))
    assert not failed and result["changed"] and result["action"] == "start"
    port = gcs.rsplit(":", 1)[1]
    expected = ["ray", "start", "--head", "--port", port, "--dashboard-port", url.rsplit(":", 1)[1],
                "--dashboard-host", "127.0.0.1", "--num-cpus", "64", "--num-gpus", "8",
                "--node-ip-address", "127.0.0.1", "--disable-usage-stats", "--object-store-memory", "1000"]
    assert commands[0] == [expected]
    assert result["cmd"] == expected and result["rc"] == 0 and result["stdout"] == "ray start done\n"
    assert result["stderr"] == "" and {"start", "end", "delta"} <= set(result)
    assert result["nodes"] == [] and result["active_jobs"] == [] and not result["ready"]
    assert result["diff"] == {"before": "Ray: not running\n", "after": "Ray: head (%s)\n" % " ".join(expected)}


def test_check_mode_predicts_the_start_and_runs_nothing(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    result, failed = run_module(ray_start, head_args(url, gcs), check_mode=True)
    assert not failed and result["changed"] and result["action"] == "start" and commands[0] == []
    assert result["cmd"][:3] == ["ray", "start", "--head"] and result["commands"] == [{"cmd": result["cmd"]}]
    assert result["actions"][0] == "would start the head: no Ray runs on this node"
    assert result["actions"][1].startswith("would run: ray start --head")


def test_dead_head_remains_are_stopped_with_force_then_started(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    node_probe.update(processes=3, recorded_address=gcs)
    result, failed = run_module(ray_start, head_args(url, gcs))
    assert not failed and result["action"] == "restart"
    assert [c[:3] for c in commands[0]] == [["ray", "stop", "--force"], ["ray", "start", "--head"]]
    assert [r["rc"] for r in result["commands"]] == [0, 0]
    assert result["diff"]["before"] == "Ray: 3 processes, cluster %s\n" % gcs


def test_taken_dashboard_port_is_refused_and_nothing_runs(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    node_probe["listening"] = [int(url.rsplit(":", 1)[1])]
    result, failed = run_module(ray_start, head_args(url, gcs))
    assert failed and result["action"] == "refuse" and commands[0] == [] and not result["changed"]
    port = url.rsplit(":", 1)[1]
    assert result["msg"].startswith("ray_start: port %s (ray_dashboard_port) is already listening" % port)
    assert "Fix: run the preflight" in result["msg"] and result["fix"]


def test_head_that_differs_under_a_job_is_refused(run_module, head, node_probe, commands):
    dashboard, gcs = head
    dashboard.add_job("qwen3-8B-attempt-4", status="PENDING")
    result, failed = run_module(ray_start, head_args(dashboard.url, gcs.address, num_gpus=4))
    assert failed and commands[0] == []
    assert "job(s) qwen3-8B-attempt-4 run on it and would die" in result["msg"]


def test_a_failed_ray_start_fails_with_its_output(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    commands[1]["start"] = (1, "", "ValueError: port busy\n")
    result, failed = run_module(ray_start, head_args(url, gcs))
    assert failed and result["rc"] == 1 and result["stderr"] == "ValueError: port busy\n"
    assert result["msg"] == "ray_start: `%s` failed with rc 1: ValueError: port busy" % " ".join(result["cmd"])


def test_a_failed_stop_does_not_start(run_module, node_probe, commands):
    url, gcs = nothing_listening()
    node_probe.update(processes=3)
    commands[1]["stop"] = (2, "", "cannot stop\n")
    result, failed = run_module(ray_start, head_args(url, gcs))
    assert failed and len(commands[0]) == 1 and result["cmd"] == ["ray", "stop", "--force"]
    assert result["msg"] == "ray_start: `ray stop --force` failed with rc 2: cannot stop"
    commands[1].pop("stop")
    commands[1]["start"] = (1, "", "boom\n")
    result, failed = run_module(ray_start, head_args(url, gcs))
    assert failed and result["msg"].startswith("ray_start: `ray start --head")
    assert "(after `ray stop`): boom" in result["msg"]


def worker_args(**extra):
    args = {"role": "worker", "gcs_address": "10.0.0.1:64379", "node_ip": "10.0.0.2", "num_gpus": 8, "num_cpus": 64}
    args.update(extra)
    return args


def test_worker_listed_by_the_head_is_left_alone(run_module, node_probe, commands):
    nodes = [{"ip": "10.0.0.2", "alive": True, "resources": {"GPU": 8.0, "CPU": 64.0}}]
    result, failed = run_module(ray_start, worker_args(cluster_nodes=nodes))
    assert not failed and result["action"] == "keep" and commands[0] == []


def test_worker_joins_the_head(run_module, node_probe, commands):
    dead = [{"ip": "10.0.0.2", "alive": False, "resources": {"GPU": 8.0}}]
    result, failed = run_module(ray_start, worker_args(cluster_nodes=dead))
    assert not failed and result["action"] == "join"
    assert commands[0] == [["ray", "start", "--address", "10.0.0.1:64379", "--num-cpus", "64", "--num-gpus", "8",
                            "--node-ip-address", "10.0.0.2", "--disable-usage-stats"]]


def test_worker_refuses_to_rejoin_under_the_clusters_job(run_module, node_probe, commands):
    result, failed = run_module(ray_start, worker_args(cluster_active_jobs=["qwen3-8B-attempt-2"]))
    assert failed and commands[0] == [] and "rejoining now would disturb them" in result["msg"]


def test_bad_addresses_fail_naming_the_option(run_module, node_probe, commands):
    result, failed = run_module(ray_start, worker_args(gcs_address="nowhere", num_cpus=0))
    assert failed and result["msg"].startswith("ray_start: gcs_address: ")
    assert "num_cpus >= 1" in result["msg"]


# ---------------------------------------------------------------- the node probe

def write(path, text, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as handle:
        handle.write(text)


TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def test_node_probe_reads_processes_the_recorded_address_and_listening_ports(tmp_path):
    proc = str(tmp_path / "proc")
    write(proc + "/101/cmdline", "/opt/ray/core/src/ray/gcs/gcs_server\0--log_dir=/tmp/ray\0", "w")
    write(proc + "/102/cmdline", "/opt/venv/bin/python3\0-m\0http.server\08772\0")
    write(proc + "/103/cmdline", "ray::IDLE\0")
    write(proc + "/self/cmdline", "x")
    write(proc + "/net/tcp", TCP_HEADER
          + "   0: 0100007F:2244 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
          + "   1: 0100007F:FB7B 0100007F:2244 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n")
    write(proc + "/net/tcp6", TCP_HEADER
          + "   0: 00000000000000000000000000000000:FB7B 00000000000000000000000000000000:0000 0A 0 0 0 0 0 3 1\n")
    cluster = str(tmp_path / "ray_current_cluster")
    write(cluster, "127.0.0.1:%d\n" % free_port())
    found = ray_node_probe.probe_node([8772, 64379, 22], proc=proc, cluster_file=cluster)
    assert found["processes"] == 2 and found["process_list"][0].startswith("101 /opt/ray/core/src/ray/gcs/gcs_server")
    assert found["listening"] == [8772, 64379]
    assert found["recorded_address"].startswith("127.0.0.1:") and found["recorded_answers"] is False


def test_node_probe_without_proc_or_record_finds_nothing(tmp_path):
    found = ray_node_probe.probe_node([8772], proc=str(tmp_path / "none"), cluster_file=str(tmp_path / "none"))
    assert found == {"processes": 0, "process_list": [], "recorded_address": "", "recorded_answers": False,
                     "listening": []}


def test_answers_only_for_a_listening_address():
    gcs = FakeGcs()
    try:
        assert ray_node_probe.answers(gcs.address)
    finally:
        gcs.close()
    assert not ray_node_probe.answers("127.0.0.1:%d" % free_port())
    assert not ray_node_probe.answers("no-port") and not ray_node_probe.answers("")
