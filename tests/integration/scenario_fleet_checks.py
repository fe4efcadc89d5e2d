"""Checks of the molecule `fleet` scenario, run by its verify step against the live fleet: four SSH
nodes (ssh-node test image: sshd on a non-default port, only the test's key, a non-root user with
become, fleet-node4 only through fleet-node3 as a jump host), each with its training container made
through the node's SSH + Docker, real Ray, one 2-node cluster ("pair", shared /data) and two
single-node clusters, the stand-in train.py as the job.

Not collected by a plain `pytest tests/integration` (needs the scenario converged). The tests run in
file order; each leaves the fleet converged with every job running."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time

import pytest
import yaml

from runner import REPO, run_playbook

INVENTORY = "molecule/fleet/inventory"
ROOT = "/tmp/mtslime-molecule-fleet"
KEY = ROOT + "/ssh/id_ed25519"
KNOWN_HOSTS = ROOT + "/ssh/known_hosts"
NODES = {  # inventory name: (node container, address, sshd port, training container, dashboard port)
    "fleet-node1": ("mtslime-fleet-node1", "172.31.250.11", 2222, "mtslime-fleet-train1", 8772),
    "fleet-node2": ("mtslime-fleet-node2", "172.31.250.12", 2222, "mtslime-fleet-train2", 8772),
    "fleet-node3": ("mtslime-fleet-node3", "172.31.250.13", 62216, "mtslime-fleet-train3", 8772),
    "fleet-node4": ("mtslime-fleet-node4", "172.31.250.14", 2222, "mtslime-fleet-train4", 28772),
}
HEADS = {"pair": "fleet-node1", "fleet-node3": "fleet-node3", "fleet-node4": "fleet-node4"}
# Actions that run on the controller without a module call on the node.
CONTROLLER_ACTIONS = {
    "set_fact", "debug", "assert", "fail", "meta", "include_tasks", "import_tasks", "include_role",
    "import_role", "validate_argument_spec", "group_by", "add_host", "include_vars",
    "validate_config", "controller_files",
}

pytestmark = pytest.mark.docker


def docker(*argv):
    return subprocess.run(["docker", *argv], capture_output=True, text=True, check=False)


def in_training(node, command):
    return docker("exec", NODES[node][3], "bash", "-c", command)


def ssh(node_address, port, command, *options):
    return subprocess.run(
        ["ssh", "-i", KEY, "-p", str(port), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
         "-o", "ControlPath=none", "-o", "UserKnownHostsFile=" + KNOWN_HOSTS, "-o", "StrictHostKeyChecking=accept-new",
         *options, "tester@" + node_address, command],
        capture_output=True, text=True, check=False, timeout=60)


def api(node, path):
    port = NODES[node][4]
    out = in_training(node, "curl -s --max-time 10 http://127.0.0.1:%d%s" % (port, path))
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout else None


def alive_nodes(node):
    answer = api(node, "/api/v0/nodes?limit=100&detail=false") or {}
    found = ((answer.get("data") or {}).get("result") or {}).get("result") or []
    return [n for n in found if n.get("state") == "ALIVE"]


def active_jobs(node):
    return [j for j in (api(node, "/api/jobs/") or []) if j["status"] in ("PENDING", "RUNNING")]


def wait(predicate, timeout=180, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(2)
    raise AssertionError("timed out waiting for " + what)


def gpus(alive):
    return sum(float((n.get("resources_total") or {}).get("GPU", 0)) for n in alive)


def sshd_log(node):
    return docker("exec", NODES[node][0], "cat", "/var/log/sshd.log").stdout.splitlines()


def module_calls(run, host):
    calls = 0
    for event in run.events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            continue
        data = event["event_data"]
        action = (data.get("resolved_action") or data.get("task_action") or "").rsplit(".", 1)[-1]
        if data.get("host") == host and action not in CONTROLLER_ACTIONS:
            calls += 1
    return calls


def messages(run, host):
    return [(e["event_data"].get("res") or {}).get("msg") or "" for e in run.events
            if e.get("event") in ("runner_on_failed", "runner_on_unreachable") and e["event_data"].get("host") == host]


def test_each_node_is_reached_only_as_its_inventory_says():
    for node, (_, address, port, _, _) in NODES.items():
        if node == "fleet-node4":
            continue
        assert ssh(address, port, "true").returncode == 0, node
        assert ssh(address, 22, "true").returncode != 0, "%s must not answer on port 22" % node
        assert "password" not in ssh(address, port, "true", "-o", "PreferredAuthentications=password").stdout
    # fleet-node4 takes the key only from fleet-node3's address: directly it is refused ...
    direct = ssh("172.31.250.14", 2222, "true")
    assert direct.returncode == 255 and "Permission denied" in direct.stderr, direct.stderr
    # ... and through fleet-node3 as the jump host it answers.
    jumped = ssh("172.31.250.14", 2222, "hostname", "-F", ROOT + "/ssh/config", "-o", "ProxyJump=fleet-jump")
    assert jumped.returncode == 0 and jumped.stdout.strip() == "mtslime-fleet-node4", jumped.stderr
    # The login user is not root and cannot use Docker without become.
    who = ssh("172.31.250.11", 2222,
              "id -u; docker ps >/dev/null 2>&1 && echo docker-ok; sudo -n docker ps -q >/dev/null && echo sudo-ok")
    assert who.stdout.split() == ["1000", "sudo-ok"], who.stdout + who.stderr


def test_every_stage_ran_inside_the_training_container_made_through_the_node():
    for node, (node_container, _, _, training, _) in NODES.items():
        inspect = json.loads(docker("inspect", training).stdout)[0]
        node_id = json.loads(docker("inspect", node_container).stdout)[0]["Id"]
        assert inspect["HostConfig"]["NetworkMode"] in ("container:" + node_id, "container:" + node_container)
        assert inspect["State"]["Running"]
        # The converted checkpoint, Ray (ray_head stage) and on the heads the run files (train_job stage) are
        # in the training container ...
        assert in_training(node, "test -f /data/LLMs/MCORE/Qwen3-8B_slime/release/metadata.json").returncode == 0
        assert in_training(node, "pgrep -x raylet").returncode == 0, node
        if node in HEADS.values():
            run_script = "/home/slime/musa_example/qwen_32b_sherry/run-qwen3-8B.sh"
            assert in_training(node, "test -f " + run_script).returncode == 0, node
        # ... and nothing of slime is on the node itself.
        assert docker("exec", node_container, "test", "-e", "/home/slime").returncode != 0
        # Every stage's module ran through the node's sshd (sessions of the login user).
        assert any("Starting session: command for tester" in line for line in sshd_log(node)), node


def test_the_two_node_head_sees_both_nodes_and_their_gpus():
    alive = wait(lambda: alive_nodes("fleet-node1") if len(alive_nodes("fleet-node1")) == 2 else None,
                 what="two alive nodes on the pair's head")
    assert sorted(n["node_ip"] for n in alive) == ["172.31.250.11", "172.31.250.12"]
    assert gpus(alive) == 16
    # slime prints no "placement group is ready" line; it trains only once its 16-GPU group is placed.
    log = "/home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log"
    wait(lambda: in_training("fleet-node1", "grep -qE ' - step [0-9]+: ' %s" % log).returncode == 0,
         what="a step line of the pair's 16-GPU job")


def test_every_cluster_runs_its_own_job():
    for cluster, head in HEADS.items():
        jobs = wait(lambda head=head: active_jobs(head), what="a job on " + cluster)
        assert len(jobs) == 1 and jobs[0]["metadata"]["mtslime_experiment"] == "qwen3-8B-" + cluster
    assert api("fleet-node2", "/api/jobs/") is None, "the worker runs no dashboard of its own"


def test_shared_storage_was_prepared_once():
    count = "ls /home/slime/tools/ | grep -c '^Qwen3-8B_slime\\..*\\.log$'"
    assert in_training("fleet-node1", count).stdout.strip() == "1"
    assert in_training("fleet-node2", count).stdout.strip() == "0"
    assert in_training("fleet-node2", "test -f /data/LLMs/MCORE/Qwen3-8B_slime/release/metadata.json").returncode == 0


def test_a_rerun_makes_no_more_ssh_connections_than_module_calls():
    before = {node: len(sshd_log(node)) for node in NODES}
    start = time.monotonic()
    run = run_playbook("site.yml", INVENTORY)
    elapsed = time.monotonic() - start
    assert run.rc == 0 and run.changed_hosts() == {}, run.changed_tasks() or run.stdout[-3000:]
    report = []
    for node in NODES:
        new = sshd_log(node)[before[node]:]
        connections = sum("Accepted publickey for tester" in line for line in new)
        sessions = sum("Starting session: command for tester" in line for line in new)
        calls = module_calls(run, node)
        report.append("%s: %d module calls, %d SSH connection(s), %d session(s)" % (node, calls, connections, sessions))
        assert 0 < calls and connections <= calls, report[-1]
        if node != "fleet-node3":  # fleet-node3 also carries fleet-node4's jump connection
            assert connections <= 1, report[-1]
    print("rerun in %.1f s; %s" % (elapsed, "; ".join(report)))


def _alias(node, **changes):
    _, address, port, _, _ = NODES[node]
    host = {"ansible_host": address, "ansible_port": port, "slime_node_ip": address,
            "ansible_ssh_common_args": "-o UserKnownHostsFile=%s -o ControlPath=none" % KNOWN_HOSTS}
    host.update(changes)
    return host


def test_nodes_that_cannot_be_reached_or_used_fail_alone_naming_the_setting_to_fix():
    work = tempfile.mkdtemp(prefix="mtslime-fleet-access-")
    other_key = os.path.join(work, "other_key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other_key], check=True)
    wrong_known = os.path.join(work, "known_hosts")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(work, "hk")], check=True)
    with open(os.path.join(work, "hk.pub")) as handle:
        with open(wrong_known, "w") as out:
            out.write("[172.31.250.11]:2222 " + " ".join(handle.read().split()[:2]) + "\n")
    hosts = {
        "reachable": _alias("fleet-node1"),
        "wrong-key": _alias("fleet-node1", ansible_ssh_private_key_file=other_key),
        "wrong-port": _alias("fleet-node1", ansible_port=2299),
        "changed-host-key": _alias("fleet-node1", ansible_ssh_common_args="-o UserKnownHostsFile=%s -o ControlPath=none"
                                   % wrong_known),
        "no-docker-rights": _alias("fleet-node1", ansible_become=False),
    }
    inventory = os.path.join(work, "inventory")
    os.makedirs(os.path.join(inventory, "group_vars"))
    os.symlink(os.path.join(REPO, INVENTORY, "group_vars", "all"), os.path.join(inventory, "group_vars", "all"))
    with open(os.path.join(REPO, INVENTORY, "group_vars", "slime_nodes.yml")) as handle:
        common = yaml.safe_load(handle)
    common.update(fleet_root=ROOT, fleet_fixture_url="http://172.31.250.5:8080")
    with open(os.path.join(inventory, "group_vars", "slime_nodes.yml"), "w") as handle:
        yaml.safe_dump(common, handle)
    with open(os.path.join(inventory, "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}}}}, handle)
    run = run_playbook("playbooks/plays/facts.yml", inventory)
    assert set(run.failed_hosts()) == set(hosts) - {"reachable"}, run.stdout[-3000:]
    expected = {
        "wrong-key": r"wrong-key \(tester@172\.31\.250\.11:2222\): cannot connect over SSH: .*"
                     r"ansible_ssh_private_key_file",
        "wrong-port": r"wrong-port \(tester@172\.31\.250\.11:2299\): cannot connect over SSH: .*"
                      r"ansible_port \(now 2299\)",
        "changed-host-key": r"changed-host-key .*host key .*ssh-keygen -R '\[172\.31\.250\.11\]:2222'",
        "no-docker-rights": r"no-docker-rights .*docker group.*ansible_become",
    }
    for host, pattern in expected.items():
        found = [m for m in messages(run, host) if re.search(pattern, m)]
        assert found, "%s: %s" % (host, messages(run, host))
        # In the first play: the node never gathered facts.
        assert not [e for e in run.events if e["event_data"].get("host") == host
                    and e["event_data"].get("task") == "Gathering Facts" and e.get("event") == "runner_on_ok"]


def _sshd_processes(node_container):
    top = docker("top", node_container, "-eo", "pid,args").stdout.splitlines()[1:]
    return [int(line.split()[0]) for line in top if re.match(r"(sshd[: ]|/usr/sbin/sshd)", line.split(None, 1)[1])]


def test_a_node_whose_ssh_is_cut_stops_only_its_cluster_and_recovers():
    node_container = NODES["fleet-node2"][0]
    pids = _sshd_processes(node_container)
    assert pids, "no sshd on " + node_container
    for pid in pids:  # the listener and the sessions of the master connection
        os.kill(pid, 15)
    wait(lambda: not _sshd_processes(node_container), timeout=20, what="sshd to stop on fleet-node2")
    start = time.monotonic()
    cut = run_playbook("site.yml", INVENTORY)
    cut_s = time.monotonic() - start
    assert cut.rc != 0
    assert set(cut.failed_hosts()) == {"fleet-node1", "fleet-node2"}, cut.failed_hosts()
    assert not cut.changed_hosts(), cut.changed_tasks()
    cut_message = r"fleet-node2 \(tester@172\.31\.250\.12:2222\): cannot connect over SSH: .*sshd.*ansible_port"
    assert any(re.search(cut_message, m) for m in messages(cut, "fleet-node2")), messages(cut, "fleet-node2")
    assert any("cluster pair: node(s) fleet-node2 failed earlier" in m for m in messages(cut, "fleet-node1"))
    assert "pair: FAILED" in cut.stdout and "fleet-node3: up" in cut.stdout and "fleet-node4: up" in cut.stdout
    assert len(active_jobs("fleet-node1")) == 1, "the pair's job keeps running while its worker's SSH is down"

    assert docker("exec", node_container, "/usr/sbin/sshd", "-E", "/var/log/sshd.log").returncode == 0
    start = time.monotonic()
    back = run_playbook("site.yml", INVENTORY)
    back_s = time.monotonic() - start
    assert back.rc == 0 and back.changed_hosts() == {}, back.changed_tasks() or back.stdout[-3000:]
    print("rerun with fleet-node2's SSH cut: %.1f s; after it is back: %.1f s" % (cut_s, back_s))


def test_a_stopped_worker_recovers_and_the_other_clusters_are_untouched():
    job = active_jobs("fleet-node1")[0]["submission_id"]
    assert in_training("fleet-node2", "ray stop --force").returncode == 0
    wait(lambda: next((j for j in api("fleet-node1", "/api/jobs/") if j["submission_id"] == job
                       and j["status"] == "FAILED"), None), what="the pair's job to fail without its worker")
    run = run_playbook("site.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-4000:]
    changed = run.changed_hosts()
    assert set(changed) <= {"fleet-node1", "fleet-node2"}, run.changed_tasks()
    assert "fleet-node2" in changed
    assert len(alive_nodes("fleet-node1")) == 2 and gpus(alive_nodes("fleet-node1")) == 16
    new = wait(lambda: active_jobs("fleet-node1"), what="the pair's new attempt")[0]
    assert new["submission_id"] != job and new["metadata"].get("mtslime_resumed_from") is not None
