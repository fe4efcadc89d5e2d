"""The first-step wait (action job_first_step, plugin_utils/job/first_step.py): its decisions on real
train_progress results (slime_log.summarize_text on logs in the real shapes), its messages, its warnings
for errors the job survives, and its progress lines (the Waiter with a fake clock)."""
from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.mtslime.posttrain.plugins.action import job_first_step as action
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.slime import summarize_text
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.job import first_step
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter
from fake_clock import Clock

LOG = "/w/logs/qwen3-8B.log"
SID = "qwen3-8B-attempt-2"
HANDLED = (
    "(RolloutManager pid=45) [2026-12-01 10:00:00] fully_async_rollout.py:191 - fully-async: process task raised\n"
    "(RolloutManager pid=45) Traceback (most recent call last):\n"
    '(RolloutManager pid=45)   File "/home/slime/slime/rollout/fully_async_rollout.py", line 187, in run\n'
    "(RolloutManager pid=45) httpx.ReadTimeout: timed out\n"
)
OOM = (
    "Traceback (most recent call last):\n"
    '  File "/home/slime/train.py", line 80, in <module>\n'
    "torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 2.00 GiB\n"
)
PG_WAIT = ("(raylet) Waiting for placement group of 8 GPUs (elapsed 90s): 4 GPUs registered with Ray, "
           "2 available.\n")
STEP = "step 6: {'train/loss': 0.5, 'train/grad_norm': 1.0}\n"


def progress(text, status=None):
    return summarize_text(text, tail_lines=0, context_lines=0, status=status)


# -- decisions ----------------------------------------------------------------------------------------
def test_a_step_line_ends_the_wait():
    verdict, message = first_step.decide(SID, "RUNNING", progress(HANDLED + STEP), LOG)
    assert verdict == first_step.DONE and message == "job qwen3-8B-attempt-2 reached step 6 (first step 6)"


def test_a_handled_traceback_of_a_running_job_is_not_the_failure():
    found = progress(HANDLED, "RUNNING")
    verdict, message = first_step.decide(SID, "RUNNING", found, LOG)
    assert verdict == first_step.WAIT
    assert message == "job qwen3-8B-attempt-2 RUNNING, 4 log lines, no training step yet"
    errors = first_step.errors_of(found)
    assert [e["line"] for e in errors] == ["httpx.ReadTimeout: timed out"]
    assert first_step.survived_warning(SID, "RUNNING", errors[0], LOG) == (
        "job qwen3-8B-attempt-2 logged an error line but is RUNNING, so the wait goes on "
        "(/w/logs/qwen3-8B.log line 4): httpx.ReadTimeout: timed out")


def test_the_same_log_fails_once_the_job_is_failed_naming_the_exception_and_the_hint():
    found = progress(OOM, "FAILED")
    verdict, message = first_step.decide(SID, "FAILED", found, LOG)
    assert verdict == first_step.FAILED
    assert message.startswith(
        "job qwen3-8B-attempt-2 is FAILED before its first step: torch.OutOfMemoryError: MUSA out of memory. "
        "Tried to allocate 2.00 GiB (/w/logs/qwen3-8B.log line 3) -- FAQ Q4: Device memory ran out.")
    assert "Traceback (most recent call last)" not in message


def test_a_stopped_job_without_an_error_line_says_so():
    verdict, message = first_step.decide(SID, "STOPPED", progress("starting\n"), LOG)
    assert verdict == first_step.FAILED
    assert message == ("job qwen3-8B-attempt-2 is STOPPED before its first step; its log /w/logs/qwen3-8B.log has "
                       "no error line")


def test_no_log_yet_waits_and_a_failed_job_without_log_fails():
    assert first_step.decide(SID, "PENDING", None, LOG, "log_file does not exist (yet)") == (
        first_step.WAIT, "job qwen3-8B-attempt-2 PENDING, no log yet (log_file does not exist (yet))")
    verdict, message = first_step.decide(SID, "FAILED", None, LOG)
    assert verdict == first_step.FAILED and "no log at /w/logs/qwen3-8B.log" in message


def test_waiting_for_gpus_says_how_many_are_missing_and_why():
    found = progress(PG_WAIT, "RUNNING")
    verdict, message = first_step.decide(SID, "RUNNING", found, LOG)
    assert verdict == first_step.WAIT
    assert ("slime has waited 90s for a placement group of 8 GPUs: Ray has 4 registered, 2 available; 6 missing "
            "(4 not registered with Ray, 2 registered but in use)") in message
    text = first_step.timeout_message(SID, "RUNNING", found, LOG, "5m00s")
    assert text.startswith("no training step of job qwen3-8B-attempt-2 after 5m00s (train_job_first_step_timeout); "
                           "it is RUNNING; 1 log lines")
    assert "6 missing" in text and "ray status" in text and "the job was left as it is" in text


def test_the_submitted_job_is_found_in_the_list():
    listed = {"submission_id": "qwen3-8B-attempt-3", "status": "RUNNING",
              "jobs": [{"submission_id": SID, "status": "FAILED"}, {"submission_id": "qwen3-8B-attempt-3",
                                                                    "status": "RUNNING"}]}
    assert first_step.job_status(listed, SID) == (SID, "FAILED")
    assert first_step.job_status(listed) == ("qwen3-8B-attempt-3", "RUNNING")
    assert first_step.job_status({"jobs": []}, SID) == (SID, None)


# -- the poll and the wait -----------------------------------------------------------------------------
class Script:
    """execute() answers from a list of (status, log text or None) per poll."""

    def __init__(self, polls):
        self.polls = list(polls)
        self.calls = []
        self.current = None

    def __call__(self, module_name, module_args):
        self.calls.append((module_name, dict(module_args)))
        if module_name == "mtslime.posttrain.ray_job":
            self.current = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
            return {"submission_id": SID, "status": self.current[0],
                    "jobs": [{"submission_id": SID, "status": self.current[0]}]}
        text = self.current[1]
        if text is None:
            return {"failed": True, "msg": "train_progress: log_file %s does not exist (yet)" % LOG}
        return progress(text, module_args.get("status"))


ARGS = {"dashboard_url": "http://127.0.0.1:8772", "experiment": "qwen3-8B", "submission_id": SID, "log_file": LOG}


def wait(polls, timeout=300, interval=15):
    script, clock, said, warned = Script(polls), Clock(), [], []
    poll = action.Poll(script, ARGS, warned.append)
    waiter = Waiter(poll, said.append, clock=clock, sleep=clock.sleep)
    last, waited, timed_out = waiter.until("x", {}, done=lambda r: r.get("verdict") != first_step.WAIT,
                                           describe=lambda r: poll.message, timeout=timeout, interval=interval)
    return poll, said, warned, timed_out, script


def test_a_survived_traceback_is_warned_once_and_the_wait_ends_at_the_step():
    poll, said, warned, timed_out, script = wait(
        [("PENDING", None), ("RUNNING", HANDLED), ("RUNNING", HANDLED), ("RUNNING", HANDLED + STEP)])
    assert not timed_out and poll.verdict == first_step.DONE
    assert len(warned) == 1 and "httpx.ReadTimeout: timed out" in warned[0] and "is RUNNING" in warned[0]
    # the log is read with the job's status, so train_progress speaks of the error as a warning
    assert [a.get("status") for m, a in script.calls if m == "mtslime.posttrain.train_progress"] == [
        "PENDING", "RUNNING", "RUNNING", "RUNNING"]
    # progress at the first poll, then at least every 30 s, and the end
    assert said[0] == "job qwen3-8B-attempt-2 PENDING, no log yet (train_progress: log_file /w/logs/qwen3-8B.log " \
                      "does not exist (yet)) (waited 0s of 5m00s)"
    assert said[-1] == "job qwen3-8B-attempt-2 reached step 6 (first step 6) (after 45s)"


def test_progress_is_printed_at_least_every_30_seconds():
    poll, said, warned, timed_out, script = wait([("RUNNING", PG_WAIT)], timeout=120, interval=10)
    assert timed_out
    times = [line.rsplit("(waited ", 1)[1].split(" of")[0] for line in said]
    assert times == ["0s", "30s", "1m00s", "1m30s"]
    assert all("6 missing" in line for line in said)


def test_the_wait_fails_when_the_job_fails_and_not_before():
    poll, said, warned, timed_out, script = wait([("RUNNING", HANDLED), ("FAILED", HANDLED + OOM)])
    assert poll.verdict == first_step.FAILED and not timed_out
    assert "is FAILED before its first step: torch.OutOfMemoryError" in poll.message
    assert len(warned) == 1  # the handled one, while it ran; the fatal one is the failure, not a warning


# -- the action plugin ---------------------------------------------------------------------------------
def run_action(args, polls, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.get_name.return_value = "Wait for the first training step"
    plugin = action.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None,
                                 shared_loader_obj=None)
    script = Script(polls)
    with mock.patch.object(action.ActionModule, "_execute_module",
                           lambda self, module_name, module_args, task_vars: script(module_name, module_args)), \
            mock.patch("time.sleep"):
        return plugin.run(task_vars={"inventory_hostname": "localhost"})


def test_the_action_reports_the_step_and_the_survived_errors():
    result = run_action(dict(ARGS, interval=1), [("RUNNING", HANDLED + STEP)])
    assert not result.get("failed") and result["msg"] == "job qwen3-8B-attempt-2 reached step 6 (first step 6)"
    assert result["last_step"] == 6 and result["status"] == "RUNNING"
    assert [e["line"] for e in result["survived_errors"]] == [2]  # where the traceback starts
    assert "(/w/logs/qwen3-8B.log line 2): httpx.ReadTimeout: timed out" in result["survived_errors"][0]["warning"]


def test_the_action_fails_with_the_exception_when_the_job_failed():
    result = run_action(dict(ARGS, interval=1), [("FAILED", OOM)])
    assert result["failed"] and result["msg"].startswith(
        "job_first_step: job qwen3-8B-attempt-2 is FAILED before its first step: torch.OutOfMemoryError")


def test_the_action_checks_its_arguments_and_skips_in_check_mode():
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="timeout is 0 and interval 15.0; give timeout >= 1"):
        run_action(dict(ARGS, timeout=0), [("RUNNING", STEP)])
    with pytest.raises(AnsibleActionFail, match="log_file is required"):
        run_action({k: v for k, v in ARGS.items() if k != "log_file"}, [("RUNNING", STEP)])
    assert run_action(ARGS, [("RUNNING", STEP)], check_mode=True)["skipped"]
