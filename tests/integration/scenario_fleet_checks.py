"""Checks of the molecule `fleet` scenario, run by its verify step against the live fleet:
four node containers on a private network with real Ray, one 2-node cluster ("pair",
shared /data) and two single-node clusters, the stand-in train.py as the job.

Not collected by a plain `pytest tests/integration` (needs the scenario converged)."""
from __future__ import annotations

import json
import subprocess
import time

import pytest

from runner import run_playbook

INVENTORY = "molecule/fleet/inventory"
HEADS = {"pair": "mtslime-fleet-node1", "fleet-node3": "mtslime-fleet-node3", "fleet-node4": "mtslime-fleet-node4"}
WORKER = "mtslime-fleet-node2"

pytestmark = pytest.mark.docker


def on(container, command):
    return subprocess.run(["docker", "exec", container, "bash", "-c", command], capture_output=True, text=True)


def api(container, path):
    out = on(container, "curl -s --max-time 10 http://127.0.0.1:8772%s" % path)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout else None


def nodes(container):
    answer = api(container, "/api/v0/nodes?limit=100&detail=false") or {}
    found = ((answer.get("data") or {}).get("result") or {}).get("result") or []
    return [n for n in found if n.get("state") == "ALIVE"]


def active_jobs(container):
    return [j for j in (api(container, "/api/jobs/") or []) if j["status"] in ("PENDING", "RUNNING")]


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


def test_the_two_node_head_sees_both_nodes_and_their_gpus():
    alive = wait(lambda: [n for n in nodes(HEADS["pair"])] if len(nodes(HEADS["pair"])) == 2 else None,
                 what="two alive nodes on the pair's head")
    assert sorted(n["node_ip"] for n in alive) == ["172.31.250.11", "172.31.250.12"]
    assert gpus(alive) == 16
    # slime prints no "placement group is ready" line; it trains only once its 16-GPU group is placed.
    log = "/home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log"
    wait(lambda: on(HEADS["pair"], "grep -qE ' - step [0-9]+: ' %s" % log).returncode == 0,
         what="a step line of the pair's 16-GPU job")


def test_every_cluster_runs_its_own_job():
    for cluster, head in HEADS.items():
        jobs = wait(lambda: active_jobs(head), what="a job on " + cluster)
        assert len(jobs) == 1 and jobs[0]["metadata"]["mtslime_experiment"] == "qwen3-8B-" + cluster
    assert api(WORKER, "/api/jobs/") is None, "the worker runs no dashboard of its own"


def test_shared_storage_was_prepared_once():
    converted = on(HEADS["pair"], "ls /home/slime/tools/ | grep -c '^Qwen3-8B_slime\\..*\\.log$'").stdout.strip()
    assert converted == "1"
    assert on(WORKER, "ls /home/slime/tools/ | grep -c '^Qwen3-8B_slime\\..*\\.log$'").stdout.strip() == "0"
    assert on(WORKER, "test -f /data/LLMs/MCORE/Qwen3-8B_slime/release/metadata.json").returncode == 0


def test_a_stopped_worker_recovers_and_the_other_clusters_are_untouched():
    job = active_jobs(HEADS["pair"])[0]["submission_id"]
    assert on(WORKER, "ray stop --force").returncode == 0
    wait(lambda: next((j for j in api(HEADS["pair"], "/api/jobs/") if j["submission_id"] == job
                       and j["status"] == "FAILED"), None), what="the pair's job to fail without its worker")
    run = run_playbook("site.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-4000:]
    changed = run.changed_hosts()
    assert set(changed) <= {"fleet-node1", "fleet-node2"}, run.changed_tasks()
    assert "fleet-node2" in changed
    assert len(nodes(HEADS["pair"])) == 2 and gpus(nodes(HEADS["pair"])) == 16
    new = wait(lambda: active_jobs(HEADS["pair"]), what="the pair's new attempt")[0]
    assert new["submission_id"] != job and new["metadata"].get("mtslime_resumed_from") is not None
    again = run_playbook("site.yml", INVENTORY)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
