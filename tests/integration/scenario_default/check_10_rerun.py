"""A converged node: a rerun and a rerun under --check --diff change nothing; status.yml reports."""
from __future__ import annotations

import json

from default_bed import INVENTORY, ROOT, active, run_playbook, site, tracker, wait


def test_rerun_changes_nothing_and_keeps_the_same_job():
    before = wait(active, what="an active job")
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    assert run.failed_hosts() == {}
    assert run.changed_hosts() == {}, run.changed_tasks()
    assert [j["submission_id"] for j in active()] == [j["submission_id"] for j in before]


def test_check_mode_on_the_converged_node_predicts_no_change():
    run = site("--check", "--diff")
    assert run.rc == 0, run.stdout[-3000:]
    assert run.changed_hosts() == {}, run.changed_tasks()


def test_status_playbook_shows_the_progress():
    wait(lambda: tracker() >= 2, what="a first checkpoint")
    run = run_playbook("playbooks/status.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    line = [item["msg"] for r in run.results("Print one line per cluster") for item in r.get("results", [r])
            if "msg" in item]
    assert line and "RUNNING" in line[0] and "step " in line[0] and "reward " in line[0], line
    with open(ROOT + "/rendered/status.json") as handle:
        status = json.load(handle)
    cluster = status["clusters"][0]  # docs/status.md
    assert cluster["last"]["step"] is not None and cluster["manifest"]["path"]
