"""Checks of the molecule `fleet` scenario, run by its verify step against the live fleet: four SSH
nodes (ssh-node test image: sshd on a non-default port, only the test's key, a non-root user with
become, fleet-node4 only through fleet-node3 as a jump host), each with its training container made
through the node's SSH + Docker, real Ray, one 2-node cluster ("pair", shared /data) and two
single-node clusters, the stand-in train.py as the job.

Not collected by a plain `pytest tests/integration` (needs the scenario converged). The tests run in
file order; each leaves the fleet converged with every job running."""
from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
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
# The fan-out (slime_fanout_artifacts: [data, model, convert]): the seed is the first storage's first node (Ansible
# orders the group's own hosts before its children's), whose storage fetches and converts; the others receive.
SEED = "fleet-node3"
STORAGES = {"fleet-node3": ROOT + "/node3", "fleet-node4": ROOT + "/node4", "fleet-node1": ROOT + "/shared-pair"}
ARTIFACTS = {"data": "AIME_data.tgz", "model": "models/Qwen3-8B", "convert": "LLMs/MCORE/Qwen3-8B_slime"}
FANOUT_PORT = 8765
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


def _by_host(run, task, every=False):
    """{host: the last result (every: all results)} of the task named `task` (ok or failed)."""
    found = {}
    for event in run.events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and data.get("task") == task:
            found.setdefault(data["host"], []).append(data.get("res") or {})
    return found if every else {host: results[-1] for host, results in found.items()}


def _record(storage, path):
    with open(os.path.join(STORAGES[storage], path) + ".fanout.json", encoding="utf-8") as handle:
        return json.load(handle)


def _digests(root, path):
    """{relative file: sha256} of the artifact at root/path (a file or a directory)."""
    top = os.path.join(root, path)
    files = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, dummy, names in os.walk(top) for f in names]
    out = {}
    for name in files:
        with open(name, "rb") as handle:
            out[os.path.relpath(name, top)] = hashlib.sha256(handle.read()).hexdigest()
    return out


def _tc(node, script):
    """tc in the node's network namespace (its training container shares it); the nodes have NET_ADMIN."""
    out = docker("exec", NODES[node][0], "sh", "-ec", script)
    assert out.returncode == 0, out.stderr
    return out


def _spread_results(run, host):
    return [r["result"] for r in _by_host(run, "Wait for the spread (bytes, rate and upstream of each node)",
                                          every=True).get(host, []) if r.get("finished")]


def test_each_node_is_reached_only_as_its_inventory_says():
    for node, (dummy, address, port, dummy, dummy) in NODES.items():
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
    for node, (node_container, dummy, dummy, training, dummy) in NODES.items():
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


def test_the_fleet_converted_once_and_every_storage_holds_checked_copies():
    # Only the seed ran the converter (the prepare flow keeps one log per conversion in the container) ...
    count = "ls /home/slime/tools/ | grep -c '^Qwen3-8B_slime\\..*\\.log$'"
    conversions = {node: in_training(node, count).stdout.strip() for node in NODES}
    assert conversions == {node: "1" if node == SEED else "0" for node in NODES}, conversions
    # ... and fetched the data and the model from the origin: the fixture server's log names only its address.
    served = docker("logs", "mtslime-fleet-fixtures")
    origin = [line for line in (served.stdout + served.stderr).splitlines() if "GET /" in line]
    assert origin and {line.split()[1] for line in origin} == {NODES[SEED][1]}, origin[-10:]
    # Every storage holds the seed's copy of each artifact (the records name one manifest) ...
    for path in ARTIFACTS.values():
        ids = {storage: _record(storage, path)["id"] for storage in STORAGES}
        assert len(set(ids.values())) == 1, (path, ids)
        for storage in STORAGES:
            assert _digests(STORAGES[SEED], path) == _digests(STORAGES[storage], path), (storage, path)
    # ... that the stage plays' own checks accept, on every node, with one model fingerprint the conversion matches.
    run = run_playbook("site.yml", INVENTORY, "--tags", "data,model,convert")
    assert run.rc == 0 and run.changed_hosts() == {}, run.changed_tasks() or run.stdout[-3000:]
    models = _by_host(run, "Check the Hugging Face model")
    data = _by_host(run, "Check the training and eval data")
    checkpoints = _by_host(run, "Inspect the converted checkpoint")
    assert set(models) == set(data) == set(checkpoints) == set(NODES), (models.keys(), data.keys(), checkpoints.keys())
    assert len({r["fingerprint"] for r in models.values()}) == 1, models
    for node in NODES:
        assert not data[node].get("failed"), data[node]
        assert checkpoints[node]["state"] == "complete" and checkpoints[node]["fingerprint_matches"] is True, \
            checkpoints[node]
    # The rerun only probed: every storage but the seed's holds the copy, nobody spread anything.
    probes = _by_host(run, "Look whether each storage already holds this copy", every=True)
    assert sorted(probes) == ["fleet-node1", "fleet-node4"], probes.keys()
    assert all(r["holds"] for results in probes.values() for r in results) and len(probes["fleet-node1"]) == 3
    assert not _by_host(run, "Spread (every node of the plan at once")


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
    dummy, address, port, dummy, dummy = NODES[node]
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
        try:
            os.kill(pid, 15)
        except ProcessLookupError:  # a session that ended meanwhile
            pass
    wait(lambda: not _sshd_processes(node_container), timeout=20, what="sshd to stop on fleet-node2")
    start = time.monotonic()
    cut = run_playbook("site.yml", INVENTORY)
    cut_s = time.monotonic() - start
    assert cut.rc != 0
    assert set(cut.failed_hosts()) == {"fleet-node1", "fleet-node2"}, cut.failed_hosts()
    assert not cut.changed_hosts(), (cut.changed_tasks(), _answers(cut))
    cut_message = r"fleet-node2 \(tester@172\.31\.250\.12:2222\): cannot connect over SSH: .*sshd.*ansible_port"
    assert any(re.search(cut_message, m) for m in messages(cut, "fleet-node2")), messages(cut, "fleet-node2")
    assert any("cluster pair: node(s) fleet-node2 failed earlier" in m for m in messages(cut, "fleet-node1"))
    assert "pair: FAILED" in cut.stdout and "fleet-node3: up" in cut.stdout and "fleet-node4: up" in cut.stdout
    assert len(active_jobs("fleet-node1")) == 1, "the pair's job keeps running while its worker's SSH is down"

    assert docker("exec", node_container, "/usr/sbin/sshd", "-E", "/var/log/sshd.log").returncode == 0
    start = time.monotonic()
    back = run_playbook("site.yml", INVENTORY)
    back_s = time.monotonic() - start
    assert back.rc == 0 and back.changed_hosts() == {}, (back.changed_tasks(), _answers(back)) or back.stdout[-3000:]
    print("rerun with fleet-node2's SSH cut: %.1f s; after it is back: %.1f s" % (cut_s, back_s))


def test_a_stopped_worker_recovers_and_the_other_clusters_are_untouched():
    job = active_jobs("fleet-node1")[0]["submission_id"]
    assert in_training("fleet-node2", "ray stop --force").returncode == 0
    wait(lambda: next((j for j in api("fleet-node1", "/api/jobs/") if j["submission_id"] == job
                       and j["status"] == "FAILED"), None), what="the pair's job to fail without its worker")
    run = run_playbook("site.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-4000:]
    changed = run.changed_hosts()
    assert set(changed) <= {"fleet-node1", "fleet-node2"}, (run.changed_tasks(), _answers(run))
    assert "fleet-node2" in changed
    assert len(alive_nodes("fleet-node1")) == 2 and gpus(alive_nodes("fleet-node1")) == 16
    new = wait(lambda: active_jobs("fleet-node1"), what="the pair's new attempt")[0]
    assert new["submission_id"] != job and new["metadata"].get("mtslime_resumed_from") is not None


def test_a_node_whose_fanout_link_is_cut_mid_spread_fails_alone_and_the_rerun_resumes_it():
    node, model = "fleet-node4", os.path.join(STORAGES["fleet-node4"], ARTIFACTS["model"])
    partial_state = model + ".fanout-partial/state.json"
    moved = model + ".fleet-check-moved-%d" % time.time()
    os.rename(model, moved)  # the test's copy; the fan-out brings the seed's (kept for the comparison)
    # The seed sends fan-out pieces at 12 Mbit/s, so the 25 MB model takes about 17 s to cross.
    _tc(SEED, "tc qdisc add dev eth0 root handle 1: htb default 10;"
              "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit;"
              "tc class add dev eth0 parent 1: classid 1:30 htb rate 12mbit ceil 12mbit;"
              "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip sport %d 0xffff flowid 1:30"
              % FANOUT_PORT)
    runs = {}
    try:
        thread = threading.Thread(target=lambda: runs.update(cut=run_playbook(
            "site.yml", INVENTORY, extravars={"slime_fanout_stall_timeout": 20})))
        start = time.monotonic()
        thread.start()

        def pieces():
            try:
                with open(partial_state, encoding="utf-8") as handle:
                    return len(json.load(handle)["have"])
            except (OSError, ValueError, KeyError):
                return 0
        wait(lambda: pieces() >= 2, timeout=240, what="fleet-node4 to hold 2 pieces of the model")
        have = pieces()
        assert not os.path.exists(model), "the model arrived before the cut (the rate limit did not hold)"
        # Cut fleet-node4's fan-out link: every packet it sends to a fan-out port is dropped (its SSH goes on).
        _tc(node, "tc qdisc add dev eth0 root handle 1: htb default 10;"
                  "tc class add dev eth0 parent 1: classid 1:10 htb rate 10gbit;"
                  "tc class add dev eth0 parent 1: classid 1:30 htb rate 1mbit;"
                  "tc qdisc add dev eth0 parent 1:30 handle 30: pfifo limit 0;"
                  "tc filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport %d 0xffff flowid 1:30"
                  % FANOUT_PORT)
        thread.join(900)
        cut_s = time.monotonic() - start
    finally:
        for host in (SEED, node):
            docker("exec", NODES[host][0], "tc", "qdisc", "del", "dev", "eth0", "root")
    cut = runs["cut"]
    assert cut.rc != 0 and set(cut.failed_hosts()) == {node}, cut.failed_hosts() or cut.stdout[-3000:]
    assert not cut.changed_hosts(), (cut.changed_tasks(), _answers(cut))
    said = [m for m in messages(cut, node) if re.search(
        r"model fan-out on fleet-node4: fanout fleet-node4: no upstream gave a piece for 20 s .*rerun to resume", m)]
    assert said, messages(cut, node)
    assert "fleet-node4: FAILED" in cut.stdout and "fleet-node3: up" in cut.stdout and "pair: up" in cut.stdout
    kept = pieces()
    assert kept >= have and not os.path.exists(model), "a cut spread keeps its pieces and puts nothing in place"

    start = time.monotonic()
    back = run_playbook("site.yml", INVENTORY)
    back_s = time.monotonic() - start
    assert back.rc == 0, back.stdout[-3000:]
    assert set(back.changed_hosts()) == {node}, (back.changed_tasks(), _answers(back))
    (spread,) = _spread_results(back, node)
    assert spread["resumed_pieces"] == kept and spread["received"] < spread["total"], spread
    assert spread["sources"] == {SEED: spread["received"]}, spread
    assert _digests(STORAGES[node], ARTIFACTS["model"]) == _digests(STORAGES[SEED], ARTIFACTS["model"])
    assert not os.path.exists(model + ".fanout-partial") and not glob.glob(model + ".replaced-*")
    assert "fleet-node4: up" in back.stdout
    print("spread cut after %d pieces: failed run %.1f s; the rerun resumed %d of 7 pieces in %.1f s" % (
        have, cut_s, spread["resumed_pieces"], back_s))


def test_a_corrupted_copy_is_refused_replaced_and_kept_aside_and_the_other_nodes_are_untouched():
    node = "fleet-node1"  # the pair's storage, pulled by its first node; fleet-node2 shares it
    model = os.path.join(STORAGES[node], ARTIFACTS["model"])
    shard = os.path.join(model, "model-00002-of-00003.safetensors")
    with open(shard, "r+b") as handle:  # flip bytes in the weights, the size unchanged
        handle.seek(4 << 20)
        data = handle.read(16)
        handle.seek(4 << 20)
        handle.write(bytes(b ^ 0xFF for b in data))
    bad = _digests(STORAGES[node], ARTIFACTS["model"])
    run = run_playbook("site.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    # fleet-node2, the seed and fleet-node4: changed=0
    assert set(run.changed_hosts()) == {node}, (run.changed_tasks(), _answers(run))
    probe = [r for r in _by_host(run, "Look whether each storage already holds this copy", every=True)[node]
             if r["id"] == _record(SEED, ARTIFACTS["model"])["id"]]
    assert probe and probe[0]["holds"] is False, probe
    (spread,) = _spread_results(run, node)
    assert spread["received"] == spread["total"] and spread["moved_aside"], spread
    assert _digests(STORAGES[node], ARTIFACTS["model"]) == _digests(STORAGES[SEED], ARTIFACTS["model"])
    # The refused copy is kept aside (moved, not deleted), as it was.
    aside = glob.glob(model + ".replaced-*")
    assert len(aside) == 1 and _digests(os.path.dirname(aside[0]), os.path.basename(aside[0])) == bad, aside
    assert os.path.normpath(spread["moved_aside"]).endswith(os.path.basename(aside[0])), spread["moved_aside"]


def _keepers():
    names = [NODES[node][3] + "-supervisor" for node in NODES]
    found = docker("inspect", "-f", "{{.Name}} {{.State.Running}}", *names).stdout.split()
    return dict(zip([n.lstrip("/") for n in found[::2]], found[1::2]))


def test_with_the_supervisor_a_restarted_worker_container_rejoins_and_the_job_resumes_unaided():
    """train_job_supervise on (docs/recovery.md): after its training container's restart, the worker's keeper joins
    it to the head again, and the pair's job runs on (the same attempt when it outlived the loss, else the next one,
    resumed); no ansible-playbook runs between the fault and the check. Then supervision is turned off again (the
    keepers are removed) for the checks that follow."""
    supervised = ("-e", "train_job_supervise=true", "-e", "train_job_supervise_interval=10")
    run = run_playbook("site.yml", INVENTORY, *supervised)
    assert run.rc == 0, run.stdout[-4000:]
    assert set(_keepers().values()) == {"true"} and len(_keepers()) == 4, _keepers()
    job = wait(lambda: active_jobs("fleet-node1"), what="the pair's job")[0]["submission_id"]
    worker_ip = NODES["fleet-node2"][1]
    before = {n["node_id"] for n in alive_nodes("fleet-node1") if n.get("node_ip") == worker_ip}
    log = "/home/slime/musa_example/qwen_32b_sherry/logs/supervisor/decisions.log"
    joins = in_training("fleet-node2", "cat %s" % log).stdout.count('"joined"')
    assert docker("restart", "-t", "5", NODES["fleet-node2"][3]).returncode == 0
    restarted = time.time()
    wait(lambda: in_training("fleet-node2", "cat %s" % log).stdout.count('"joined"') > joins, timeout=120,
         what="the worker's keeper to join it again")
    wait(lambda: [n for n in alive_nodes("fleet-node1") if n.get("node_ip") == worker_ip
                  and n["node_id"] not in before] and gpus(alive_nodes("fleet-node1")) == 16, timeout=120,
         what="the worker back on the head (a new Ray node) with 16 GPUs in all")
    back = time.time() - restarted
    running = wait(lambda: active_jobs("fleet-node1"), timeout=300, what="the pair's job")[0]
    if running["submission_id"] != job:
        assert running["metadata"].get("mtslime_resumed_from") is not None, running
    print("the worker rejoined %.0f s after its container restarted; the pair's job: %s %s" % (
        back, running["submission_id"], "(the same attempt)" if running["submission_id"] == job else "(resumed)"))
    off = run_playbook("site.yml", INVENTORY, "-e", "train_job_supervise=false")
    assert off.rc == 0, off.stdout[-4000:]
    assert _keepers() == {}


PROBE_TASK = "Ask each node whether anything differs from its last full run"
WORK_DIR = "/home/slime/musa_example/qwen_32b_sherry"


def _probe_calls(run, host):
    """Module calls on the host but fact gathering (the scenario caches facts in memory only, so every run gathers;
    with the repository's ansible.cfg a rerun reads them from its cache)."""
    facts = sum(1 for e in run.events if e.get("event") == "runner_on_ok" and e["event_data"].get("host") == host
                and (e["event_data"].get("resolved_action") or e["event_data"].get("task_action") or "").rsplit(
                    ".", 1)[-1] in ("gather_facts", "setup"))
    return module_calls(run, host) - facts


def _answers(run):
    """{host: (converged, why)} of the fast path's probe in `run`."""
    return {host: (bool(res.get("converged")), res.get("why") or res.get("msg") or "")
            for host, res in _by_host(run, PROBE_TASK).items()}


def _flip_bytes(path, offset=0):
    with open(path, "r+b") as handle:
        handle.seek(offset)
        data = handle.read(16)
        handle.seek(offset)
        handle.write(bytes(b ^ 0xFF for b in data))


def _drift_data():
    path = os.path.join(STORAGES["fleet-node4"], "models/data/aime_2025.parquet")
    os.rename(path, path + ".drift")
    return lambda: os.path.isfile(path)


def _drift_convert():
    root = os.path.join(STORAGES["fleet-node4"], ARTIFACTS["convert"])
    shard = max((os.path.join(d, f) for d, dummy, names in os.walk(root) for f in names),
                key=os.path.getsize)  # a weights file: the checkpoint's layout and metadata stay as they are
    before = _digests(STORAGES[SEED], ARTIFACTS["convert"])
    _flip_bytes(shard, os.path.getsize(shard) // 2)
    return lambda: _digests(STORAGES["fleet-node4"], ARTIFACTS["convert"]) == before


def _drift_ray():
    assert in_training("fleet-node3", "ray stop --force").returncode == 0
    return lambda: len(alive_nodes("fleet-node3")) == 1 and active_jobs("fleet-node3")


def _drift_run_file():
    path = WORK_DIR + "/hostfile"
    before = in_training("fleet-node4", "cat %s" % path).stdout
    assert in_training("fleet-node4", "echo '# edited by hand' >> %s" % path).returncode == 0
    return lambda: in_training("fleet-node4", "cat %s" % path).stdout == before


def _drift_container():
    assert docker("stop", "-t", "5", NODES["fleet-node3"][3]).returncode == 0
    return lambda: docker("inspect", "-f", "{{.State.Running}}", NODES["fleet-node3"][3]).stdout.strip() == "true" \
        and active_jobs("fleet-node3")


DRIFTS = [  # (stage, node made to drift, what the probe says, the drift; returns whether the rerun fixed it)
    ("data", "fleet-node4", "data: ", _drift_data),
    ("convert", "fleet-node4", "fanout convert: holds is False", _drift_convert),
    ("ray_head", "fleet-node3", "ray_head: ", _drift_ray),
    ("train_job", "fleet-node4", "train_job: would change", _drift_run_file),
    ("container", "fleet-node3", None, _drift_container),
]


def test_the_fast_path_ends_converged_clusters_and_a_drifted_stage_is_fixed_by_the_same_rerun():
    """slime_fast_path, on by default (docs/architecture.md "The fast path"): a full run records each node's checks
    (the run before this one ran with other extra vars), the next run asks each node once and ends every cluster
    there (2 module calls per node, changed=0); then one stage at a time is made to drift on one single-node cluster:
    the same rerun finds it, runs that cluster's stages and fixes it, while the other clusters end after their one
    call. The probe of the container stage is not asked at all (its container does not run), so that cluster runs
    every stage too."""
    recorded = run_playbook("site.yml", INVENTORY)
    # The record is a cache: writing it is no change of the node.
    assert recorded.rc == 0 and recorded.changed_hosts() == {}, recorded.changed_tasks() or recorded.stdout[-4000:]
    start = time.monotonic()
    fast = run_playbook("site.yml", INVENTORY)
    fast_s = time.monotonic() - start
    assert fast.rc == 0 and fast.changed_hosts() == {}, fast.changed_tasks() or fast.stdout[-4000:]
    assert all(converged for converged, dummy in _answers(fast).values()) and len(_answers(fast)) == 4, _answers(fast)
    calls = {node: _probe_calls(fast, node) for node in NODES}
    assert calls == {node: 2 for node in NODES}, calls  # node_access, converged
    assert "skipping: no hosts matched" in fast.stdout
    report = ["converged rerun %.1f s, module calls %s" % (fast_s, calls)]

    for stage, node, said, drift in DRIFTS:
        fixed = drift()
        start = time.monotonic()
        run = run_playbook("site.yml", INVENTORY)
        elapsed = time.monotonic() - start
        assert run.rc == 0, (stage, run.stdout[-4000:])
        answers = _answers(run)
        if said is None:
            assert node not in answers, (stage, answers)
        else:
            assert not answers[node][0] and answers[node][1].startswith(said), (stage, answers[node])
        for other in (n for n in NODES if n != node):
            assert answers[other][0], (stage, other, answers[other])
            if other != SEED:  # the fan-out's seed stays in the fan-out plays while another cluster runs them
                assert _probe_calls(run, other) == 2, (stage, other, _probe_calls(run, other))
        assert set(run.changed_hosts()) <= {node}, (stage, run.changed_tasks())
        wait(fixed, timeout=300, what="the %s drift on %s to be fixed" % (stage, node))
        calls_there = module_calls(run, node)
        report.append("%s drift on %s: %.1f s, %d module calls there" % (stage, node, elapsed, calls_there))
    print("; ".join(report))
    assert os.path.isfile(os.path.join(STORAGES["fleet-node4"], "models/data/aime_2025.parquet.drift"))
