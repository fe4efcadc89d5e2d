"""The crash-loop rule (module_utils/job/crash_loop.py) and the attempt history (module_utils/job/attempts.py):
the counter on its own, then ray_job against FakeRay with attempt logs and end records on disk."""
from __future__ import annotations

import json

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import attempts, crash_loop
from ansible_collections.mtslime.posttrain.plugins.modules import ray_job

# pylint: disable=unused-import  # followers and warned: pytest fixtures, used by name
from job.test_ray_job import EXP, OURS, base_args, followers, warned  # noqa: F401 (fixtures)
# pylint: enable=unused-import


def rec(n, status, step, exception=None):
    return {"submission_id": "%s-attempt-%d" % (EXP, n), "attempt": n, "status": status, "step": step,
            "exception": exception}


# -- the counter ---------------------------------------------------------------------------------
def test_two_failures_at_the_same_step_count_two():
    loop = crash_loop.count([rec(1, "FAILED", 7), rec(2, "FAILED", 7)])
    assert loop == {"count": 2, "step": 7, "attempts": ["qwen3-8B-attempt-1", "qwen3-8B-attempt-2"]}


def test_an_attempt_past_the_failure_step_resets_the_count():
    loop = crash_loop.count([rec(1, "FAILED", 7), rec(2, "FAILED", 7), rec(3, "FAILED", 12)])
    assert loop["count"] == 1 and loop["step"] == 12 and loop["attempts"] == ["qwen3-8B-attempt-3"]


def test_an_earlier_failure_does_not_pass_the_step():
    # resumed from an older checkpoint, it died sooner: still not past step 7
    loop = crash_loop.count([rec(1, "FAILED", 7), rec(2, "FAILED", 5), rec(3, "FAILED", None)])
    assert loop["count"] == 3 and loop["step"] == 7


def test_success_resets_and_stops_and_lost_attempts_neither_count_nor_reset():
    assert crash_loop.count([rec(1, "FAILED", 7), rec(2, "SUCCEEDED", 7)])["count"] == 0
    loop = crash_loop.count([rec(1, "FAILED", 7), rec(2, "STOPPED", 6), rec(3, "LOST", 7), rec(4, "FAILED", 7)])
    assert loop["count"] == 2 and loop["attempts"] == ["qwen3-8B-attempt-1", "qwen3-8B-attempt-4"]
    # a stopped attempt that got further resets
    assert crash_loop.count([rec(1, "FAILED", 7), rec(2, "STOPPED", 9), rec(3, "FAILED", 9)])["count"] == 1


def test_failures_before_the_first_step():
    loop = crash_loop.count([rec(1, "FAILED", None), rec(2, "FAILED", None)])
    assert loop["count"] == 2 and loop["step"] is None
    assert crash_loop.streak_text(loop) == "before their first step"


def test_describe_names_the_exception_line_and_hint():
    record = dict(rec(3, "FAILED", 7, "RuntimeError: boom"), exception_line=40, hint="Lower it.", faq="Q4")
    assert crash_loop.describe(record) == (
        "qwen3-8B-attempt-3 FAILED after step 7: RuntimeError: boom (log line 40) -- FAQ Q4: Lower it.")
    assert "before its first step" in crash_loop.describe(rec(1, "FAILED", None))


# -- logs and files ----------------------------------------------------------------------------------
def steps(first, last):
    return "".join("step %d: {'train/loss': 0.5, 'train/grad_norm': 1.0}\n" % s for s in range(first, last + 1))


CRASH = (
    "Traceback (most recent call last):\n"
    '  File "/home/slime/train.py", line 660, in main\n'
    "    raise RuntimeError(\"stand-in crash at step %d\" % step)\n"
    "RuntimeError: stand-in crash at step {step}\n"
)
RANKED = (
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/home/slime/slime/backends/megatron_utils/loss.py", line 255, in loss\n'
    "[rank0]: KeyError: 'rollout/log_probs'\n"
    "[rank0]:[W1201 10:00:01.123456789 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() "
    "was not called before program exit, which can leak resources.\n"
)
HANDLED = (
    "(RolloutManager pid=45) [2026-12-01 10:00:00] fully_async_rollout.py:191 - fully-async: process task raised\n"
    "(RolloutManager pid=45) Traceback (most recent call last):\n"
    '(RolloutManager pid=45)   File "/home/slime/slime/rollout/fully_async_rollout.py", line 187, in run\n'
    "(RolloutManager pid=45) httpx.ReadTimeout: timed out\n"
)


class Bed:
    """A run dir as ray_job leaves it: manifests/, logs/ with one file per attempt."""

    def __init__(self, fake, tmp_path):
        self.fake, self.tmp = fake, tmp_path
        self.run = tmp_path / "run"
        self.manifests = self.run / "manifests"
        self.logs = self.run / "logs"
        self.manifests.mkdir(parents=True)
        self.logs.mkdir(parents=True)

    def sid(self, n):
        return "%s-attempt-%d" % (EXP, n)

    def attempt(self, n, status, log, in_ray=True):
        (self.manifests / ("%s.json" % self.sid(n))).write_text(json.dumps({"submission_id": self.sid(n)}))
        (self.logs / ("qwen3-8B.%s.log" % self.sid(n))).write_text(log)
        if in_ray:
            self.fake.add_job(self.sid(n), status, OURS)

    def args(self, **extra):
        return base_args(self.fake, self.tmp, **extra)

    def end(self, n):
        return attempts.read_end(str(self.manifests), self.sid(n))


@pytest.fixture
def bed(fake, tmp_path):
    return Bed(fake, tmp_path)


def test_history_reads_the_exception_line_not_the_header_and_skips_launcher_noise(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(steps(1, 7) + RANKED)
    found = attempts.read_log(str(log))
    assert found["step"] == 7 and found["exception"] == "KeyError: 'rollout/log_probs'"
    log.write_text(steps(1, 3) + HANDLED + steps(4, 7) + CRASH.format(step=8))
    found = attempts.read_log(str(log))
    assert found["exception"] == "RuntimeError: stand-in crash at step 8"
    assert found["survived"]["line"] == "httpx.ReadTimeout: timed out"
    log.write_text(steps(1, 3) + HANDLED + steps(4, 7))
    found = attempts.read_log(str(log))
    assert found["exception"] is None and found["step"] == 7


def test_second_failure_at_the_same_step_refuses_with_the_history(run_module, fake, bed, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args())
    assert failed and fake.submitted() == []
    msg = result["msg"]
    assert "2 attempts in a row failed without passing step 7 (max_failures_at_step is 2), so attempt 3 is not" in msg
    assert "qwen3-8B-attempt-1 FAILED after step 7: RuntimeError: stand-in crash at step 8 (log line 11)" in msg
    assert "qwen3-8B-attempt-2 FAILED after step 7: RuntimeError: stand-in crash at step 8" in msg
    assert "-e train_job_retry=true" in msg and "train_job_max_failures_at_step" in msg
    assert result["crash_loop"]["blocked"] and result["crash_loop"]["count"] == 2
    # the ends are recorded, for a rerun after a head restart
    assert bed.end(1)["status"] == "FAILED" and bed.end(2)["step"] == 7
    assert bed.end(2)["exception"] == "RuntimeError: stand-in crash at step 8"
    # nothing else was written: no manifest of attempt 3
    assert not (bed.manifests / "qwen3-8B-attempt-3.json").exists()


def test_retry_submits_one_more_attempt_and_the_next_failure_refuses_again(run_module, fake, bed, warned,
                                                                           followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args(retry=True))
    assert not failed, result.get("msg")
    assert result["submission_id"] == "qwen3-8B-attempt-3" and len(fake.submitted()) == 1
    assert any("retry is set: submitting one more attempt although 2 attempts failed without passing step 7" in w
               for w in warned)
    assert result["previous_attempt"]["exception"] == "RuntimeError: stand-in crash at step 8"
    fake.set_status("qwen3-8B-attempt-3", "FAILED")
    (bed.logs / "qwen3-8B.qwen3-8B-attempt-3.log").write_text(steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args())
    assert failed and "3 attempts in a row failed without passing step 7" in result["msg"]
    assert len(fake.submitted()) == 1


def test_one_failure_submits_and_reports_the_previous_end(run_module, fake, bed, warned, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + RANKED)
    result, failed = run_module(ray_job, bed.args())
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-2"
    prev = result["previous_attempt"]
    assert prev["status"] == "FAILED" and prev["step"] == 7 and prev["exception"] == "KeyError: 'rollout/log_probs'"
    text = ("previous attempt: qwen3-8B-attempt-1 FAILED after step 7: KeyError: 'rollout/log_probs' (log line 10)"
            "; 1 of 2 failures without passing step 7")
    assert any(w.startswith(text) for w in warned) and any(a.startswith(text) for a in result["actions"])


def test_progress_past_the_failure_step_submits(run_module, fake, bed, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 12) + CRASH.format(step=13))
    result, failed = run_module(ray_job, bed.args())
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-3"
    assert result["crash_loop"]["count"] == 1 and result["crash_loop"]["step"] == 12


def test_history_from_files_only_after_a_head_restart(run_module, fake, bed, followers):
    # attempt 1's end was recorded by an earlier run; attempt 2's not (the head restarted first):
    # Ray knows neither, its log ends with an exception, so it counts as FAILED from the log.
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8), in_ray=False)
    attempts.write_end(str(bed.manifests), dict(rec(1, "FAILED", 7, "RuntimeError: stand-in crash at step 8"),
                                                status_from="ray"))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8), in_ray=False)
    result, failed = run_module(ray_job, bed.args())
    assert failed and fake.submitted() == []
    assert "2 attempts in a row failed without passing step 7" in result["msg"]
    assert [r["status_from"] for r in result["attempts_history"]] == ["ray", "log"]
    assert bed.end(2)["status_from"] == "log"


def test_an_attempt_that_ray_forgot_without_an_exception_is_lost_and_not_counted(run_module, fake, bed, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8), in_ray=False)
    bed.attempt(2, "FAILED", steps(6, 7), in_ray=False)  # killed with the head: no traceback
    result, failed = run_module(ray_job, bed.args())
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-3"
    assert result["previous_attempt"]["status"] == "LOST" and result["crash_loop"]["count"] == 1


def test_a_handled_traceback_is_not_the_exception_of_the_attempt(run_module, fake, bed, followers):
    bed.attempt(1, "STOPPED", steps(1, 3) + HANDLED + steps(4, 7))
    result, failed = run_module(ray_job, bed.args())
    assert not failed
    prev = result["previous_attempt"]
    assert prev["status"] == "STOPPED" and prev["exception"] is None
    assert prev["survived"]["line"] == "httpx.ReadTimeout: timed out"


def test_check_mode_records_nothing_and_still_refuses(run_module, fake, bed):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args(), check_mode=True)
    assert failed and "so attempt 3 is not submitted" in result["msg"]
    assert bed.end(1) is None and bed.end(2) is None


def test_zero_means_no_limit_and_a_negative_limit_is_refused(run_module, fake, bed, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args(max_failures_at_step=-1))
    assert failed and "max_failures_at_step is -1; give 0 (no limit) or more" in result["msg"]
    result, failed = run_module(ray_job, bed.args(max_failures_at_step=0))
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-3"


def test_a_torn_end_record_is_not_trusted(run_module, fake, bed, followers):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8), in_ray=False)
    (bed.manifests / "qwen3-8B-attempt-1.end.json").write_text("")
    result, failed = run_module(ray_job, bed.args())
    assert not failed and result["previous_attempt"]["status_from"] == "log"
    assert bed.end(1)["status"] == "FAILED"


def test_status_returns_every_attempt_and_the_count_and_writes_nothing(run_module, fake, bed):
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "RUNNING", steps(6, 9))
    args = dict(bed.args(state="status", files=None), manifest_dir=str(bed.manifests))
    result, failed = run_module(ray_job, args)
    assert not failed
    first, second = result["attempts"]
    assert first["status"] == "FAILED" and first["last_step"] == 7
    assert first["exception"] == "RuntimeError: stand-in crash at step 8"
    assert second["status"] == "RUNNING" and second["first_step"] == 6 and second["last_step"] == 9
    assert result["crash_loop"]["count"] == 1 and result["crash_loop"]["limit"] == 2
    assert bed.end(1) is None
    from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report import status_doc
    assert status_doc.crash_loop_part(result) == {"count": 1, "step": 7, "limit": 2}
    assert status_doc.attempts_part(result)[0]["exception"] == "RuntimeError: stand-in crash at step 8"


def test_train_job_retry_may_come_from_the_command_line_as_a_string():
    from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import VARS

    var = next(v for v in VARS if v.name == "train_job_retry")
    assert var.check("true") is None and var.check(True) is None and var.check("False") is None
    assert "must be true or false" in var.check("maybe")
