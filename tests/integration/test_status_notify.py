"""train_job_notify through playbooks/status.yml without Docker, against the stand-in cluster of status_bed.py
(fake Ray Jobs API, the fixture logs of two attempts): a real local webhook and a real command get the failed
attempt once, a rerun sends nothing, the job's success is sent, and the URL shows nowhere."""
from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest
import yaml
from local_webhook import Hook
from status_bed import REPO, make_bed


@pytest.fixture
def bed(tmp_path):
    made = make_bed(tmp_path)
    hook = Hook()
    events = os.path.join(str(tmp_path), "events.jsonl")
    values_file = os.path.join(made.inventory, "group_vars", "slime_nodes.yml")
    values = yaml.safe_load(open(values_file))
    values["train_job_notify"] = {"webhooks": [hook.url], "command": "cat >> %s; echo >> %s" % (events, events)}
    yaml.safe_dump(values, open(values_file, "w"))
    made.hook, made.events = hook, events
    yield made
    hook.close()
    made.ray.close()


def status(bed):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    proc = subprocess.run(["ansible-playbook", "playbooks/status.yml", "-i", bed.inventory, "--skip-tags", "report",
                           "-e", "status_file=%s" % os.path.join(bed.root, "status.json")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def commanded(bed):
    return [json.loads(line) for line in open(bed.events).read().splitlines() if line] \
        if os.path.exists(bed.events) else []


def test_status_sends_each_event_once_and_never_shows_the_url(bed):
    first = status(bed)
    assert [(b["event"], b["job_id"]) for b in bed.hook.bodies] == [("attempt_failed", "qwen3-8B-attempt-1")]
    assert [(d["event"], d["host"]) for d in commanded(bed)] == [("attempt_failed", "localhost")]
    assert bed.hook.bodies[0]["text"].startswith("*[qwen3-8B] attempt 1 failed* (cluster localhost, head localhost)")
    state = os.path.join(bed.work, "manifests", "qwen3-8B.notified.json")
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600

    again = status(bed)
    assert len(bed.hook.bodies) == 1 and len(commanded(bed)) == 1

    bed.ray.set_status("qwen3-8B-attempt-2", "SUCCEEDED")
    status(bed)
    assert [b["event"] for b in bed.hook.bodies] == ["attempt_failed", "finished"]
    assert [d["event"] for d in commanded(bed)] == ["attempt_failed", "finished"]

    secret = "SECRET-TOKEN-123"
    status_json = open(os.path.join(bed.root, "status.json")).read()
    for text in (first.stdout, first.stderr, again.stdout, open(state).read(), status_json):
        assert secret not in text
