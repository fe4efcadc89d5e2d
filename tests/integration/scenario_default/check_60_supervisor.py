"""Unattended recovery (docs/recovery.md) on the guide's node: site.yml with train_job_supervise turns the
supervisor on (a keeper container beside the training container), then, with no ansible-playbook run between the
fault and the check, a SIGKILLed trainer is resubmitted from the last complete iteration, a `docker restart` of
the training container brings Ray and the job back, stop.yml keeps it from resubmitting, a site.yml run racing it
makes one attempt, and a crash loop stops it after the rule's count with word of it (the exception line) at a
local webhook. Last, site.yml with train_job_supervise false removes the keeper."""
from __future__ import annotations

import json
import subprocess
import time

from check_22_crashloop import crash_ahead_of
from default_bed import (
    CONTAINER, INVENTORY, LOGS, active, control, in_container, manifests, ours, run_playbook, site, wait,
)

INTERVAL = 10
SUPERVISED = ("-e", "train_job_supervise=true", "-e", "train_job_supervise_interval=%d" % INTERVAL)
KEEPER = CONTAINER + "-supervisor"
DIRECTORY = LOGS + "/supervisor"
TASK = "Supervise the cluster (the keeper's checks run the job task's own rules unattended)"


def state():
    found = in_container("cat %s/state.json" % DIRECTORY)
    return json.loads(found.stdout) if found.returncode == 0 and found.stdout.strip() else {}


def decisions():
    found = in_container("cat %s/decisions.log" % DIRECTORY)
    return [json.loads(line) for line in found.stdout.splitlines() if line.strip()]


def keeper_running():
    found = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}} {{.HostConfig.RestartPolicy.Name}} "
                            "{{.HostConfig.NetworkMode}}", KEEPER], capture_output=True, text=True, check=False)
    return found.stdout.split() if found.returncode == 0 else None


def active_other_than(job):
    return [j for j in active() if j["submission_id"] != job]


def test_site_turns_the_supervisor_on_and_a_rerun_changes_nothing():
    run = site(*SUPERVISED)
    assert run.rc == 0, run.stdout[-3000:]
    assert keeper_running() == ["true", "unless-stopped", "none"]
    wait(lambda: state().get("decision", {}).get("action") == "kept", timeout=6 * INTERVAL,
         what="the supervisor's first check")
    again = site(*SUPERVISED)
    # With slime_fast_path the rerun may end after the node's one call (the keeper checks on time), without the task.
    converged = [r.get("converged") for r in again.results("Ask each node whether anything differs")] == [True]
    assert again.rc == 0 and again.changed_hosts() == {}, again.stdout[-3000:]
    assert converged or [r["changed"] for r in again.results(TASK)] == [False], again.stdout[-3000:]


def test_a_killed_trainer_is_resubmitted_without_a_playbook_run():
    job = wait(active, what="an active job")[-1]["submission_id"]
    assert in_container("pkill -KILL -f 'python3 train.py'").returncode == 0
    killed = time.time()
    new = wait(lambda: active_other_than(job), timeout=2 * INTERVAL + 60, what="the supervisor's new attempt")[-1]
    took = time.time() - killed
    assert new["metadata"]["mtslime_resumed_from"] is not None, new["metadata"]
    assert "%s.json" % new["submission_id"] in manifests()
    submitted = [d for d in decisions() if d.get("action") == "submitted"]
    assert submitted and submitted[-1]["job"]["submission_id"] == new["submission_id"], decisions()[-5:]
    print("resubmitted %.0f s after the kill (interval %d s)" % (took, INTERVAL))


def test_a_restarted_training_container_comes_back_with_its_job():
    job = wait(active, what="an active job")[-1]["submission_id"]
    assert subprocess.run(["docker", "restart", "-t", "5", CONTAINER], check=False).returncode == 0
    restarted = time.time()
    back = wait(lambda: [j for j in active() if j["submission_id"] != job], timeout=300,
                what="the job on the restarted container")[-1]
    assert back["metadata"]["mtslime_resumed_from"] is not None
    actions = [d.get("action") for d in decisions()]
    assert "ray_started" in actions, actions[-8:]
    print("job back %.0f s after the restart" % (time.time() - restarted))


def test_stop_turns_it_off_and_nothing_is_resubmitted():
    run = run_playbook("playbooks/stop.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    assert not active()
    count = len(ours())
    time.sleep(3 * INTERVAL + 5)
    assert not active() and len(ours()) == count
    assert state()["enabled"] is False and state()["decision"]["action"] == "disabled"


def test_a_site_run_racing_the_supervisor_makes_one_attempt():
    run = site(*SUPERVISED)
    assert run.rc == 0, run.stdout[-3000:]
    job = wait(active, what="the resumed job")[-1]["submission_id"]
    count = len(ours())
    assert in_container("pkill -KILL -f 'python3 train.py'").returncode == 0
    wait(lambda: next((j for j in ours() if j["submission_id"] == job and j["status"] == "FAILED"), None),
         what="the killed attempt to fail")
    raced = site(*SUPERVISED)
    assert raced.rc == 0, raced.stdout[-3000:]
    time.sleep(2 * INTERVAL + 5)
    assert len(active()) == 1 and len(ours()) == count + 1, [(j["submission_id"], j["status"]) for j in ours()]


def test_a_crash_loop_stops_it_and_word_goes_out_with_the_exception(hook):
    server = hook()
    run = run_playbook("site.yml", INVENTORY, *SUPERVISED, extravars={"train_job_notify": {"webhooks": [server.url]}})
    assert run.rc == 0, run.stdout[-3000:]
    job = wait(active, what="an active job")[-1]["submission_id"]
    try:
        crash = crash_ahead_of(job)
        stopped = wait(lambda: state().get("decision", {}).get("action") == "crash_loop_stopped", timeout=600,
                       what="the supervisor to stop resubmitting")
        assert stopped
    finally:
        control()
    assert not active()
    count = len(ours())
    time.sleep(2 * INTERVAL + 5)
    assert len(ours()) == count, "nothing is resubmitted after the crash loop"
    events = wait(lambda: [b for b in server.bodies if b["event"] == "crash_loop_stopped"], timeout=60,
                  what="the crash_loop_stopped event")
    assert len(events) == 1, events
    assert events[0]["exception"] == "RuntimeError: stand-in crash at step %d" % crash, events[0]
    assert events[0]["exception"] in events[0]["text"]


def test_site_without_supervision_removes_the_keeper():
    run = site("-e", "train_job_supervise=false", "-e", "train_job_retry=true")
    assert run.rc == 0, run.stdout[-3000:]
    assert keeper_running() is None
    assert active(), "the job runs on, unsupervised"
