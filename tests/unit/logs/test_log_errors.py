"""First error, fatal error, hint and progress line on logs shaped like the real programs' output
(shared/reference/real-programs.md, "Logs"; fixtures in tests/unit/data/logs, see its README):
rank-prefixed tracebacks and launcher noise, RayTaskError lines, logs that start mid-traceback,
tracebacks and OOMs that a running job survives."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import slime as slime_log
from ansible_collections.mtslime.posttrain.plugins.modules import train_progress
from fake_ray import FakeRay

LOGS = Path(__file__).parents[1] / "data" / "logs"
NCCL_WARNING = (
    "[rank0]:[W1201 10:00:41.512345678 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not "
    "called before program exit, which can leak resources. For more info, please see "
    "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())"
)


def log(name):
    return str(LOGS / ("%s.txt" % name))


def summarize(tmp_path, lines):
    path = tmp_path / "x.txt"
    path.write_text("\n".join(lines) + "\n")
    return slime_log.summarize_file(str(path))


# -- under torch's launcher -------------------------------------------------------------------
def test_rank_prefixed_conversion_names_the_root_cause_ranks_exception(run_module):
    """torchrun: two ranks fail, c10d warns at exit, torchrun raises ChildFailedError and names rank 0 as the
    root cause. The cause is rank 0's AssertionError; neither the warning nor ChildFailedError picks the hint."""
    result, failed = run_module(train_progress, {"log_file": log("convert_rank_prefixed")})
    assert not failed
    first = result["first_error"]
    assert (first["lineno"], first["line"], first["rank"]) == (6, "[rank0]: Traceback (most recent call last):", 0)
    expected = "AssertionError: model.layers.0.self_attn.q_norm.weight not found in the Megatron model"
    assert first["exception"] == expected
    assert first["kind"] == "error" and first["faq"] is None
    fatal = result["fatal_error"]
    # rank 2's KeyError comes later in the log, but torchrun's summary names rank 0 as the root cause
    assert (fatal["lineno"], fatal["rank"], fatal["traceback_start"]) == (14, 0, 6)
    assert fatal["exception"] == first["exception"] and fatal["type"] == "AssertionError"
    assert fatal["line"].startswith("[rank0]: AssertionError:")
    assert fatal["kind"] == "error" and result["hint"] is None and result["hint_from"] is None
    assert result["progress"] == (
        "no training step logged yet; error at line 14: AssertionError: model.layers.0.self_attn.q_norm.weight "
        "not found in the Megatron model [rank 0]"
    )
    assert slime_log.progress_line(result, "FAILED") == (
        "FAILED: AssertionError: model.layers.0.self_attn.q_norm.weight not found in the Megatron model [rank 0] "
        "(line 14)"
    )
    assert "ChildFailedError" not in slime_log.progress_line(result, "FAILED")


@pytest.mark.parametrize(
    "exception",
    ["AssertionError: micro batch size must divide the global batch", "KeyError: 'model.embed_tokens.weight'"],
)
def test_a_plain_exception_followed_by_the_nccl_warning_gets_no_collective_hint(tmp_path, exception):
    result = summarize(
        tmp_path,
        [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/home/slime/train.py", line 98, in <module>',
            "[rank0]:     train(args)",
            "[rank0]: " + exception,
            NCCL_WARNING,
            "E1201 10:00:42.300000 4120 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
            "local_rank: 0 (pid: 4130) of binary: /usr/bin/python3",
        ],
    )
    assert result["first_error"]["kind"] == "error" and result["first_error"]["exception"] == exception
    assert result["fatal_error"]["exception"] == exception and result["fatal_error"]["kind"] == "error"
    assert result["hint"] is None
    assert "MCCL" not in slime_log.progress_line(result, "FAILED")


def test_launcher_noise_alone_is_no_error(tmp_path):
    result = summarize(
        tmp_path,
        [
            "W1201 10:00:00.123000 4120 torch/distributed/run.py:792] *****************************************",
            NCCL_WARNING,
            "W1201 10:00:42.001000 4120 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4131 "
            "closing signal SIGTERM",
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 17966) of "
            "binary: /usr/bin/python3",
        ],
    )
    assert result["first_error"] is None and result["fatal_error"] is None and result["hint"] is None


def test_childfailederror_alone_is_a_first_error_but_never_the_fatal_one(tmp_path):
    """A worker killed by a signal prints no traceback: only torchrun's ChildFailedError is left."""
    result = summarize(
        tmp_path,
        [
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "tools/convert_hf_to_torch_dist.py FAILED",
            "Root Cause (first observed failure):",
            "[0]:",
            "  rank      : 0 (local_rank: 0)",
            "  exitcode  : -9 (pid: 4130)",
        ],
    )
    assert result["first_error"]["exception"] == "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"
    assert result["fatal_error"] is None
    assert slime_log.progress_line(result, "FAILED").startswith("FAILED; no exception after the last step; first error")


# -- Ray's RayTaskError ---------------------------------------------------------------------------
def test_a_log_that_starts_mid_traceback_with_a_raytaskerror(run_module):
    result, _ = run_module(train_progress, {"log_file": log("ray_task_error_mid_traceback")})
    first = result["first_error"]
    assert first["lineno"] == 10 and first["kind"] == "oom"
    assert first["exception"].startswith("ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor")
    fatal = result["fatal_error"]
    # the remote exception that ends the RayTaskError is the cause
    assert (fatal["lineno"], fatal["traceback_start"], fatal["type"]) == (17, None, "torch.OutOfMemoryError")
    assert fatal["task"] == "ray::MegatronTrainRayActor.train()" and fatal["kind"] == "oom"
    assert result["hint_from"] == "fatal_error" and "--sglang-mem-fraction-static" in result["hint"]
    failed = slime_log.progress_line(result, "FAILED")
    assert failed.startswith("FAILED: torch.OutOfMemoryError: MUSA out of memory. Tried to allocate 1.16 GiB.")
    assert "[in ray::MegatronTrainRayActor.train()] (line 17) -- FAQ Q4: Device memory ran out." in failed


def test_a_raytaskerror_line_on_its_own_is_an_error_and_the_fatal_one(tmp_path):
    line = (
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::RolloutManager.generate() (pid=2801, ip=10.121.38.2, "
        "actor_id=0c1d, repr=<slime.ray.rollout.RolloutManager object at 0x7f>)"
    )
    result = summarize(tmp_path, ["(MegatronTrainRayActor pid=3001) step 3: {'train/loss': 0.1}", line])
    assert result["first_error"]["lineno"] == 2 and result["first_error"]["kind"] == "oom"
    fatal = result["fatal_error"]
    assert fatal["exception"] == line and fatal["task"] == "ray::RolloutManager.generate()"
    assert result["fatal_error"]["kind"] == "oom" and result["hint_from"] == "fatal_error"


# -- errors a job survives -------------------------------------------------------------------------
def test_a_recovered_oom_and_a_handled_traceback_followed_by_more_steps(run_module):
    result, _ = run_module(train_progress, {"log_file": log("survived_errors")})
    first = result["first_error"]
    assert first["lineno"] == 39 and first["kind"] == "oom" and "Decode out of memory happened" in first["line"]
    assert result["fatal_error"] is None  # both were followed by training steps
    assert result["last_step"] == 6 and result["steps"] == 6
    running, _ = run_module(train_progress, {"log_file": log("survived_errors"), "status": "RUNNING"})
    assert running["progress"] == (
        "RUNNING: step 6 (6 steps logged), reward 0.4062, pass@8 0.7719, eval aime 0.2667 @ rollout 4, 1221 tok/s/GPU, "
        "checkpoint 5; warning: error at line 39: Decode out of memory happened. #retracted_reqs: 4, "
        "#new_token_ratio: 0.7000 -> 1.0000"
    )
    assert not running["progress"].startswith("FAILED") and "failed" not in running["progress"]
    # if the job then dies without a traceback, the status says so and the log's first error is named
    assert slime_log.progress_line(result, "FAILED").startswith(
        "FAILED after step 6; no exception after the last step; first error (line 39): Decode out of memory happened."
    )
    succeeded = slime_log.progress_line(result, "SUCCEEDED")
    assert succeeded.startswith("SUCCEEDED: step 6") and "warning: error at line 39" in succeeded


def test_a_handled_traceback_names_its_exception_not_its_header(tmp_path):
    result = summarize(
        tmp_path,
        [
            "(RolloutManager pid=2801) Traceback (most recent call last):",
            '(RolloutManager pid=2801)   File "/home/slime/slime/rollout/rm_hub/math_dapo_utils.py", line 233, in x',
            "(MegatronTrainRayActor pid=3001) [2026-09-20 12:06:28] model.py:918 - step 4: {'train/loss': 0.1}",
            "(RolloutManager pid=2801) func_timeout.exceptions.FunctionTimedOut: Function _grade timed out after 5 s.",
            "(MegatronTrainRayActor pid=3001) [2026-09-20 12:07:35] model.py:918 - step 5: {'train/loss': 0.1}",
        ],
    )
    expected = "func_timeout.exceptions.FunctionTimedOut: Function _grade timed out after 5 s."
    assert result["first_error"]["exception"] == expected
    assert result["fatal_error"] is None
    assert slime_log.progress_line(result, "RUNNING").endswith(
        "; warning: error at line 1: func_timeout.exceptions.FunctionTimedOut: Function _grade timed out after 5 s."
    )


def test_the_last_traceback_after_the_last_step_is_fatal(tmp_path):
    result = summarize(
        tmp_path,
        [
            "(RolloutManager pid=2801) Traceback (most recent call last):",
            '(RolloutManager pid=2801)   File "x.py", line 1, in y',
            "(RolloutManager pid=2801) ValueError: handled",
            "(MegatronTrainRayActor pid=3001) step 4: {'train/loss': 0.1}",
            "(MegatronTrainRayActor pid=3001) Traceback (most recent call last):",
            '(MegatronTrainRayActor pid=3001)   File "/home/slime/slime/backends/megatron_utils/model.py", line 9',
            "(MegatronTrainRayActor pid=3001) RuntimeError: stand-in crash at step 5",
        ],
    )
    assert result["first_error"]["exception"] == "ValueError: handled"
    fatal = result["fatal_error"]
    assert (fatal["exception"], fatal["actor_pid"], fatal["traceback_start"]) == (
        "RuntimeError: stand-in crash at step 5",
        3001,
        5,
    )
    assert slime_log.progress_line(result, "FAILED") == (
        "FAILED after step 4: RuntimeError: stand-in crash at step 5 (line 7)"
    )
    assert slime_log.progress_line(result, "RUNNING") == (
        "RUNNING: step 4 (1 steps logged); warning: error at line 7: RuntimeError: stand-in crash at step 5"
    )


def test_chained_exceptions_end_with_the_last_one(tmp_path):
    result = summarize(
        tmp_path,
        [
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in f',
            "KeyError: 'x'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in f',
            "ValueError: no x",
        ],
    )
    # the chain's last exception is the one that propagated: the first error names it, at its own line
    first = result["first_error"]
    assert (first["lineno"], first["exception"], first["exception_lineno"]) == (1, "ValueError: no x", 9)
    assert (result["fatal_error"]["exception"], result["fatal_error"]["traceback_start"]) == ("ValueError: no x", 1)


def test_a_stopped_job(tmp_path):
    result = summarize(tmp_path, ["(MegatronTrainRayActor pid=3001) step 4: {'train/loss': 0.1}"])
    assert slime_log.progress_line(result, "STOPPED") == "STOPPED after step 4; the log has no error line"
    assert slime_log.progress_line(result, "stopped") == "STOPPED after step 4; the log has no error line"


# -- the module's status option -------------------------------------------------------------------
def test_status_must_be_a_ray_status(run_module):
    result, failed = run_module(train_progress, {"log_file": log("normal_run"), "status": "CRASHED"})
    assert failed and "status is 'CRASHED'; give one of Ray's job statuses (PENDING, RUNNING" in result["msg"]


def test_the_jobs_api_status_decides(run_module):
    fake = FakeRay()
    try:
        fake.add_job("qwen3-8B-attempt-1", "RUNNING", {"mtslime_experiment": "qwen3-8B"})
        fake.logs["qwen3-8B-attempt-1"] = Path(log("survived_errors")).read_text()
        result, failed = run_module(train_progress, {"dashboard_url": fake.url, "submission_id": "qwen3-8B-attempt-1"})
        assert not failed and result["status"] == "RUNNING" and result["job_status"] == "RUNNING"
        assert result["progress"].startswith("RUNNING: step 6") and "; warning: error at line 39" in result["progress"]
        fake.add_job("qwen3-8B-attempt-2", "FAILED", {"mtslime_experiment": "qwen3-8B"})
        fake.logs["qwen3-8B-attempt-2"] = Path(log("ray_task_error_mid_traceback")).read_text()
        result, failed = run_module(train_progress, {"dashboard_url": fake.url, "submission_id": "qwen3-8B-attempt-2"})
        assert result["progress"].startswith("FAILED: torch.OutOfMemoryError")
        # an explicit status wins over the job's own
        result, failed = run_module(
            train_progress,
            {"dashboard_url": fake.url, "submission_id": "qwen3-8B-attempt-2", "status": "RUNNING"},
        )
        assert result["progress"].startswith("RUNNING: no training step logged yet; warning: error at line 17")
    finally:
        fake.close()


def test_a_survived_error_is_not_the_cause_of_a_later_fatal_one(tmp_path):
    """An OOM that SGLang recovered from, more steps, then an unrelated crash: the OOM's hint is not given."""
    result = summarize(
        tmp_path,
        [
            "(SGLangEngine pid=4002) [2026-09-20 12:04:40 TP0] Decode out of memory happened. #retracted_reqs: 4",
            "(MegatronTrainRayActor pid=3001) step 3: {'train/loss': 0.1}",
            "Traceback (most recent call last):",
            '  File "/home/slime/train.py", line 98, in <module>',
            "ValueError: --eval-interval must be positive",
        ],
    )
    assert result["first_error"]["kind"] == "oom" and result["fatal_error"]["kind"] == "error"
    assert result["hint"] is None and result["hint_from"] is None
    assert slime_log.progress_line(result, "FAILED") == (
        "FAILED after step 3: ValueError: --eval-interval must be positive (line 5)"
    )
