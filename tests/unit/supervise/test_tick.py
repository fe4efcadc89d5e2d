"""One check of the supervisor (module_utils/supervise/tick.py) with the tasks it runs replaced by recorded
results: which task runs when, what it is given, what is decided, logged and written. The tasks themselves are
the modules' own code (tests/unit/job, ray, checkpoint); test_cli.py runs them through lib.zip."""
from __future__ import annotations

import json

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files, lease, tick

HEAD_START = {"role": "head", "gcs_address": "10.0.0.1:6379", "expected_nodes": ["10.0.0.1", "10.0.0.2"],
              "expected_gpus": 16}
UP = {"changed": False, "action": "keep", "ready": True,
      "nodes": [{"ip": "10.0.0.1", "alive": True}, {"ip": "10.0.0.2", "alive": True}]}


class Tasks:
    """Answers each task with the next result given for it, and records the calls."""

    def __init__(self, **answers):
        self.answers = {name: list(results) for name, results in answers.items()}
        self.calls = []

    def __call__(self, library, name, args, environment=None):
        self.calls.append((name, args, environment))
        return self.answers[name].pop(0)

    def names(self):
        return [call[0] for call in self.calls]


def configure(directory, **extra):
    config = {"enabled": True, "role": "head", "interval": 30, "container": "slime_rl", "python": "python3",
              "environment": {"SLIME_HOST_IP": "10.0.0.1"}, "ray_start": HEAD_START,
              "ray_job": {"experiment": "e", "state": "running", "lease_dir": str(directory / files.LEASE)}}
    config.update(extra)
    (directory / files.CONFIG).write_text(files.config_text(config))


def check(directory, tasks, now=1_800_000_000):
    found = tick.Check(str(directory), run=tasks, clock=lambda: now, probe=lambda ports: {"processes": 0})
    action, message = found.decide()
    return action, message, found.record(action, message)


def logged(directory):
    path = directory / files.LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_failed_job_is_resubmitted_by_the_job_task_with_its_own_arguments(tmp_path):
    configure(tmp_path)
    tasks = Tasks(ray_start=[UP], ray_job=[{"changed": True, "argv": ["--load", "/s"], "submission_id": "e-attempt-3",
                                            "attempt": 3, "status": "PENDING", "resumed_from_iteration": 40}])
    action, message, state = check(tmp_path, tasks)
    assert (action, message) == (tick.SUBMITTED, "submitted e-attempt-3 (attempt 3) resuming from iteration 40")
    assert tasks.names() == ["ray_start", "ray_job"]
    name, args, environment = tasks.calls[1]
    # the check holds the lease itself: the task is given none, else it would wait for this very check
    assert args["lease_dir"] is None and args["experiment"] == "e" and environment == {"SLIME_HOST_IP": "10.0.0.1"}
    assert state["decision"]["job"] == {"submission_id": "e-attempt-3", "status": "PENDING", "attempt": 3,
                                        "resumed_from_iteration": 40}
    assert state["next_check"] == files.now_iso(1_800_000_030) and state["enabled"] is True
    assert [entry["action"] for entry in logged(tmp_path)] == [tick.SUBMITTED]
    assert not (tmp_path / files.LEASE).exists(), "the lease is released after the check"


def test_an_unchanged_decision_is_logged_once(tmp_path):
    configure(tmp_path)
    kept = {"changed": False, "submission_id": "e-attempt-1", "status": "RUNNING"}
    for now in (1, 2, 3):
        check(tmp_path, Tasks(ray_start=[UP], ray_job=[dict(kept)]), now=now)
    assert [(e["action"], e["message"]) for e in logged(tmp_path)] == [(tick.KEPT, "e-attempt-1 RUNNING")]
    state = json.loads((tmp_path / files.STATE).read_text())
    assert state["last_check"] == files.now_iso(3) and state["last_change"] == files.now_iso(1)


def test_a_restarted_head_is_started_and_the_job_left_to_the_next_check(tmp_path):
    configure(tmp_path)
    tasks = Tasks(ray_start=[{"changed": True, "action": "start", "reason": "no Ray runs on this node"}])
    action, message, dummy = check(tmp_path, tasks)
    assert action == tick.RAY_STARTED and message.startswith("start: no Ray runs on this node")
    assert tasks.names() == ["ray_start"]


def test_a_lost_worker_holds_the_job_back_and_is_sent_word_of_once_per_loss(tmp_path):
    configure(tmp_path, job_notify={"experiment": "e", "host": "h", "manifest_dir": str(tmp_path)})
    half = dict(UP, ready=False, nodes=[{"ip": "10.0.0.1", "alive": True}, {"ip": "10.0.0.2", "alive": False}])
    tasks = Tasks(ray_start=[half, half], job_notify=[{"actions": ["sent"]}, {"actions": []}])
    first = check(tmp_path, tasks, now=100)
    second = check(tmp_path, tasks, now=200)
    assert first[0] == second[0] == tick.WAITING_FOR_NODES and "10.0.0.2" in first[1]
    assert "ray_job" not in tasks.names()
    sent = [args["lost_workers"] for name, args, dummy in tasks.calls if name == "job_notify"]
    # the same loss (the time it was first seen) both times: job_notify's sent-once record sends it once
    assert sent == [[{"ip": "10.0.0.2", "since": files.now_iso(100)}]] * 2


def test_a_crash_loop_refusal_is_its_own_decision_and_word_goes_out(tmp_path):
    configure(tmp_path, job_notify={"experiment": "e", "host": "h", "manifest_dir": str(tmp_path)})
    refused = {"failed": True, "msg": "ray_job: 2 attempts in a row failed at step 200", "crash_loop": {
        "blocked": True, "count": 2}}
    tasks = Tasks(ray_start=[UP], ray_job=[refused], job_notify=[{"actions": ["sent crash_loop_stopped"]}])
    action, message, state = check(tmp_path, tasks)
    assert (action, message) == (tick.CRASH_LOOP_STOPPED, refused["msg"])
    assert tasks.calls[-1][1]["job"] == refused and state["decision"]["notified"] == ["sent crash_loop_stopped"]


def test_retention_runs_after_the_job_and_protects_the_iteration_it_resumed_from(tmp_path):
    configure(tmp_path, checkpoint_retention={"save_dir": "/s", "keep": 3})
    submitted = {"changed": True, "argv": [], "submission_id": "e-attempt-2", "attempt": 2,
                 "resumed_from_iteration": 7}
    tasks = Tasks(ray_start=[UP], ray_job=[submitted],
                  checkpoint_retention=[{"changed": True, "message": "kept 3, moved 2"}])
    dummy, dummy2, state = check(tmp_path, tasks)
    assert tasks.calls[-1][1] == {"save_dir": "/s", "keep": 3, "protect": [7]}
    assert state["decision"]["retention"] == "kept 3, moved 2"


def test_a_disabled_supervisor_runs_nothing(tmp_path):
    configure(tmp_path, enabled=False)
    tasks = Tasks()
    action, message, state = check(tmp_path, tasks)
    assert action == tick.DISABLED and "playbooks/stop.yml" in message and tasks.calls == []
    assert state["enabled"] is False


def test_a_lease_held_by_a_site_run_leaves_the_job_to_it(tmp_path):
    configure(tmp_path)
    holder = lease.take(str(tmp_path / files.LEASE), "ansible-playbook ray_job state=running", "keeping e running",
                        wait=0)
    try:
        tasks = Tasks()
        action, message, dummy = check(tmp_path, tasks)
    finally:
        lease.lock.release(str(tmp_path / files.LEASE), holder["token"])
    assert action == tick.LEFT_TO_OTHER and "ansible-playbook ray_job state=running" in message
    assert tasks.calls == []


def test_without_configuration_the_check_says_what_writes_it(tmp_path):
    action, message, dummy = check(tmp_path, Tasks())
    assert action == tick.NOT_CONFIGURED and "site.yml" in message


@pytest.mark.parametrize("processes, expected", [(3, tick.KEPT), (0, tick.JOINED)])
def test_a_worker_joins_again_only_when_its_ray_is_gone(tmp_path, processes, expected):
    configure(tmp_path, role="worker", ray_start={"role": "worker", "gcs_address": "10.0.0.1:6379"})
    tasks = Tasks(ray_start=[{"changed": True, "action": "join", "reason": "worker is not registered"}])
    found = tick.Check(str(tmp_path), run=tasks, clock=lambda: 1, probe=lambda ports: {"processes": processes})
    action, dummy = found.decide()
    assert action == expected
    assert tasks.names() == ([] if processes else ["ray_start"])


def test_a_failed_job_task_is_recorded_and_the_next_check_tries_again(tmp_path):
    configure(tmp_path)
    tasks = Tasks(ray_start=[UP, UP], ray_job=[{"failed": True, "msg": "ray_job: cannot list the jobs"},
                                               {"changed": False, "submission_id": "e-attempt-1", "status": "RUNNING"}])
    assert check(tmp_path, tasks)[:2] == (tick.JOB_FAILED, "ray_job: cannot list the jobs")
    assert check(tmp_path, tasks)[0] == tick.KEPT
    assert [e["action"] for e in logged(tmp_path)] == [tick.JOB_FAILED, tick.KEPT]
