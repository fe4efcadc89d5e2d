"""The events of job_notify read from ray_job's own results against FakeRay (not hand-made dicts): a refusal of the
crash-loop rule and a resubmission after one failure."""
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify
from ansible_collections.mtslime.posttrain.plugins.modules import ray_job

# pylint: disable=unused-import  # bed, followers and warned: pytest fixtures, used by name
from job.test_crash_loop import CRASH, bed, steps  # noqa: F401 (fixture)
from job.test_ray_job import followers, warned  # noqa: F401 (fixtures)


def test_a_refusal_gives_the_failures_and_the_crash_loop(run_module, bed, followers):  # noqa: F811
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    bed.attempt(2, "FAILED", steps(6, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args())
    assert failed
    events = notify.job_events(result)
    assert [e["key"] for e in events] == ["attempt_failed:qwen3-8B-attempt-1", "attempt_failed:qwen3-8B-attempt-2",
                                          "crash_loop_stopped:qwen3-8B-attempt-2"]
    assert events[0]["step"] == 7 and events[0]["exception"] == "RuntimeError: stand-in crash at step 8"


def test_a_resubmission_gives_the_failure_and_the_new_attempt(run_module, bed, warned, followers):  # noqa: F811
    bed.attempt(1, "FAILED", steps(1, 7) + CRASH.format(step=8))
    result, failed = run_module(ray_job, bed.args())
    assert not failed, result.get("msg")
    events = notify.job_events(result)
    assert [(e["event"], e["job_id"]) for e in events] == [
        ("attempt_failed", "qwen3-8B-attempt-1"), ("resubmitted", "qwen3-8B-attempt-2")]
    assert events[1]["attempt"] == 2 and events[1]["detail"].startswith("after qwen3-8B-attempt-1 FAILED, ")
