"""The job's life: a crash and a resume, a killed Ray head, stop.yml."""
from __future__ import annotations

import os
import urllib.request

from default_bed import (
    API, INVENTORY, LOGS, SAVE, active, control, first_step_of, in_container, manifests, ours, run_playbook, site,
    tracker, wait,
)


def test_crash_then_rerun_resumes_after_the_last_checkpoint():
    job = wait(active, what="an active job")[-1]["submission_id"]
    step_now = wait(lambda: int(in_container(
        "grep -oE 'step [0-9]+:' %s/qwen3-8B.log | tail -1 | grep -oE '[0-9]+'" % LOGS).stdout or 0),
        what="a step line")
    control(crash_at_step=step_now + 5)
    wait(lambda: next((j for j in ours() if j["submission_id"] == job and j["status"] == "FAILED"), None),
         what="the crash")
    control()
    last = tracker()
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    new = wait(active, what="the new attempt")[-1]["submission_id"]
    assert new != job and new.startswith("qwen3-8B-attempt-")
    first = wait(lambda: first_step_of(new), what="the new attempt's first step")
    assert first == last + 1, (first, last)
    kept = in_container("test -s %s/qwen3-8B.%s.log" % (LOGS, job))
    assert kept.returncode == 0, "the crashed attempt's log was kept"


def test_killed_head_comes_back_and_the_job_resumes():
    before = manifests()
    assert in_container("ray stop --force").returncode == 0
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    assert any("Start the Ray head" in t for t in run.changed_tasks()), run.changed_tasks()
    job = wait(active, what="a job on the new head")[-1]
    # Ray forgot the earlier attempts; the new one still gets a new number and its own files.
    assert "%s.json" % job["submission_id"] not in before
    assert "%s.json" % job["submission_id"] in manifests()
    assert job["metadata"].get("mtslime_resumed_from") is not None


def test_stop_playbook_stops_the_job_and_keeps_everything():
    job = wait(active, what="an active job")[-1]["submission_id"]
    checkpoints = sorted(os.listdir(SAVE))
    run = run_playbook("playbooks/stop.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    assert next(j for j in ours() if j["submission_id"] == job)["status"] == "STOPPED"
    assert set(checkpoints) <= set(os.listdir(SAVE))
    again = run_playbook("playbooks/stop.yml", INVENTORY)
    assert again.rc == 0 and again.changed_hosts() == {}
    urllib.request.urlopen(API + "/api/version", timeout=5).read()  # Ray stays up
    resumed = site()
    assert resumed.rc == 0
    assert wait(active, what="the resumed job")[-1]["submission_id"] != job
