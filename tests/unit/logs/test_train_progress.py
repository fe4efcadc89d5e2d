"""train_progress and module_utils/logs/slime.py on recorded slime-format logs
(tests/unit/data/logs/*.txt: .txt because the repository ignores *.log)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import faq as slime_faq, slime as slime_log
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.scan import FirstErrorScanner, first_error
from ansible_collections.mtslime.posttrain.plugins.modules import train_progress
from fake_ray import FakeRay

LOGS = Path(__file__).parents[1] / "data" / "logs"


def log(name):
    return str(LOGS / ("%s.txt" % name))


# -- line parsing ------------------------------------------------------------------------------
def test_clean_line_removes_every_prefix():
    raw = "\x1b[36m(MegatronTrainRayActor pid=3001)\x1b[0m [2026-09-20 12:03:05] model.py:918 - step 1: {'a': 1}"
    assert slime_log.clean_line(raw) == "step 1: {'a': 1}"
    assert (
        slime_log.clean_line("(RolloutManager pid=45, ip=10.0.0.2) [2026-09-20 12:00:00] x.py:1 - eval 4: {}")
        == "eval 4: {}"
    )
    assert (
        slime_log.clean_line(
            "(SGLangEngine pid=4002) [2026-09-20 12:01:23 TP0] Capture end. [repeated 3x across cluster]"
        )
        == "Capture end."
    )
    assert slime_log.clean_line("(pid=12) hello") == "hello"
    assert slime_log.message_of("(RolloutManager pid=45, ip=10.0.0.2) x")[:2] == ("x", "pid=45")


def test_parse_payload_handles_nan_inf_and_numpy_scalars():
    payload = slime_log.parse_payload(
        "{'a': nan, 'b': inf, 'c': -inf, 'd': 1e-06, 'e': -3, 'f': np.float64(0.5), 'g': [1, 2], 'h': True, 'i': None}"
    )
    assert math.isnan(payload["a"]) and payload["b"] == math.inf and payload["c"] == -math.inf
    assert payload["d"] == 1e-06 and payload["e"] == -3 and payload["f"] == 0.5 and payload["g"] == [1, 2]
    assert payload["h"] is True and payload["i"] is None
    assert slime_log.parse_payload("{'a': __import__('os')}") is None
    assert slime_log.parse_payload("not a dict") is None
    assert slime_log.json_safe(payload)["a"] == "nan" and slime_log.json_safe(payload)["c"] == "-inf"


def test_parse_metric():
    kind, ident, payload = slime_log.parse_metric(
        "(X pid=1) [2026-09-20 12:00:00] m.py:1 - passrate 3: {'passrate/pass@1': 0.5}"
    )
    assert (kind, ident, payload) == ("passrate", 3, {"passrate/pass@1": 0.5})
    assert slime_log.parse_metric("stepped 3: {}") is None


# -- whole logs ------------------------------------------------------------------------------------
def test_normal_run_with_nan_and_inf(run_module):
    result, failed = run_module(train_progress, {"log_file": log("normal_run"), "tail_lines": 3})
    assert not failed and not result["changed"]
    assert result["last_step"] == 6 and result["steps"] == 6 and result["last_rollout"] == 6
    assert result["reward"] == 0.40625
    assert result["pass_at_k"] == {"pass@1": 0.40625, "pass@2": 0.5687, "pass@4": 0.6906, "pass@8": 0.7719}
    assert result["eval_rollout"] == 4 and result["eval"]["eval/aime"] == pytest.approx(0.26666, abs=1e-4)
    assert result["eval"]["eval/aime-pass@8"] == pytest.approx(0.4333, abs=1e-4)
    assert result["throughput"] == {
        "perf/tokens_per_gpu_per_sec": 1221.0,
        "perf/actor_train_tok_per_s": 2413.5,
        "perf/step_time": 95.6,
        "perf/wait_time_ratio": 0.52,
    }
    assert result["train"]["train/loss"] == "nan" and result["train"]["train/grad_norm"] == "inf"
    assert result["last_checkpoint"] == 5 and result["last_checkpoint_dir"] == "/tmp/Qwen3-8B_slime/"
    assert result["loaded_checkpoint"]["iteration"] == 0
    assert result["first_error"] is None and result["hint"] is None and result["waiting_for_gpus"] is None
    assert result["fatal_error"] is None and result["first_step"] == 1
    assert len(result["tail"]) == 3 and result["tail"][-1].startswith("(SGLangEngine pid=4001)")
    assert result["progress"] == (
        "step 6 (6 steps logged), reward 0.4062, pass@8 0.7719, eval aime 0.2667 @ rollout 4, 1221 tok/s/GPU, "
        "checkpoint 5"
    )
    json.dumps(result, allow_nan=False)  # no bare NaN/Infinity reaches Ansible


def test_rollout_nan_reward_is_a_string(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("(MegatronTrainRayActor pid=1) rollout 0: {'rollout/raw_reward': nan}\n")
    assert slime_log.summarize_file(str(path))["reward"] == "nan"


def test_resumed_run(run_module):
    result, failed = run_module(train_progress, {"log_file": log("resumed_run")})
    assert not failed
    assert result["loaded_checkpoint"] == {"iteration": 5, "path": "/tmp/Qwen3-8B_slime", "lineno": 21}
    assert result["last_step"] == 9 and result["steps"] == 4 and result["last_checkpoint"] == 8
    assert result["first_step"] == 6  # resumed from iteration 5: slime starts at rollout 5 + 1
    assert result["eval_rollout"] == 9 and result["first_error"] is None and result["fatal_error"] is None


def test_scheduler_dead_after_an_oom_points_at_the_oom(run_module):
    """FAQ Q2: the first error is the OOM; the fatal one is the driver's RayTaskError ending in 'scheduler is
    dead', a consequence, so the hint is the OOM's (Q4's order)."""
    result, failed = run_module(train_progress, {"log_file": log("oom_scheduler_dead")})
    assert not failed
    first = result["first_error"]
    assert first["kind"] == "oom" and first["faq"] == "Q4"
    assert "torch.OutOfMemoryError: MUSA out of memory" in first["line"] and first["lineno"] == 46
    assert first["exception"].startswith("torch.OutOfMemoryError")
    assert first["context_start"] == 41 and first["context"][5] == first["line"]
    fatal = result["fatal_error"]
    assert fatal["exception"] == "RuntimeError: Rank 0 scheduler is dead. Please check if there are relevant logs."
    assert (fatal["lineno"], fatal["traceback_start"], fatal["kind"]) == (57, 53, "scheduler_dead")
    assert fatal["task"] == "ray::RolloutManager.generate()" and fatal["type"] == "RuntimeError"
    assert result["hint_from"] == "first_error"
    hint = result["hint"]
    order = [
        hint.index(flag)
        for flag in (
            "--sglang-mem-fraction-static",
            "--rollout-batch-size",
            "--rollout-max-response-len",
            "--max-tokens-per-gpu",
        )
    ]
    assert order == sorted(order)
    assert result["last_step"] == 2 and result["status"] is None
    # without a status it is not called failed; the exception and its cause are named
    assert result["progress"].startswith("step 2 (2 steps logged), reward 0.3438")
    assert "; error at line 57: RuntimeError: Rank 0 scheduler is dead" in result["progress"]
    assert "(caused by line 46: torch.OutOfMemoryError: MUSA out of memory" in result["progress"]
    failed_line = slime_log.progress_line(result, "FAILED")
    assert failed_line.startswith("FAILED after step 2: RuntimeError: Rank 0 scheduler is dead.")
    assert "[in ray::RolloutManager.generate()] (line 57); caused by line 46: torch.OutOfMemoryError" in failed_line
    assert "-- FAQ Q4: Device memory ran out." in failed_line and "Traceback" not in failed_line


def test_the_errors_are_found_beyond_max_bytes(run_module):
    result, _ = run_module(train_progress, {"log_file": log("oom_scheduler_dead"), "max_bytes": 300})
    assert result["first_error"]["kind"] == "oom" and result["first_error"]["lineno"] == 46
    assert result["fatal_error"]["lineno"] == 57
    assert result["bytes_read"] == 300 and result["bytes"] > 300
    assert result["last_step"] is None  # the metrics only come from the last 300 bytes
    assert result["steps"] == 2 and result["first_step"] == 1  # but step lines are counted over the whole log


def test_musa_error_900_while_capturing_graphs(run_module):
    result, _ = run_module(train_progress, {"log_file": log("graph_capture_musa900"), "context_lines": 8})
    first = result["first_error"]
    assert first["kind"] == "graph_capture" and "MUSA error 900" in first["line"]
    assert "--sglang-disable-cuda-graph" in result["hint"] and "--sglang-cuda-graph-max-bs" in result["hint"]
    assert any("Capturing batches" in line for line in first["context"])
    # the driver's last line is the fatal exception (no header above it in this log), a consequence
    fatal = result["fatal_error"]
    assert (fatal["lineno"], fatal["traceback_start"], fatal["kind"]) == (40, None, "scheduler_dead")
    assert result["hint_from"] == "first_error"


def test_long_placement_group_wait(run_module):
    result, _ = run_module(train_progress, {"log_file": log("placement_group_wait")})
    assert result["first_error"] is None and result["fatal_error"] is None
    wait = result["waiting_for_gpus"]
    assert {k: wait[k] for k in ("needed", "elapsed", "registered", "available", "lineno")} == {
        "needed": 8,
        "elapsed": 330,
        "registered": 4.0,
        "available": 4.0,
        "lineno": 18,
    }
    assert (wait["missing"], wait["unregistered"], wait["busy"]) == (4.0, 4.0, 0.0)
    assert wait["message"] == (
        "slime has waited 330s for a placement group of 8 GPUs: Ray has 4 registered, 4 available; "
        "4 missing (4 not registered with Ray)"
    )
    assert result["hint_from"] == "waiting_for_gpus"
    assert "waits without a time limit for a placement group of 8 GPUs" in result["hint"]
    assert "4 of the GPUs are not registered with Ray at all" in result["hint"]
    assert result["progress"] == "waiting 330s for 8 GPUs (4 registered, 4 available, 4 missing)"
    running, _ = run_module(train_progress, {"log_file": log("placement_group_wait"), "status": "running"})
    assert running["progress"] == "RUNNING: waiting 330s for 8 GPUs (4 registered, 4 available, 4 missing)"
    assert running["status"] == "RUNNING"


def test_a_wait_for_gpus_held_by_another_job(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text(
        "[2026-09-20 12:00:06] placement_group.py:125 - Creating placement group with 8 GPUs...\n"
        "[2026-09-20 12:00:36] placement_group.py:64 - Waiting for placement group of 8 GPUs (elapsed 30s): "
        "8 GPUs registered with Ray, 0.4 available.\n"
    )
    wait = slime_log.summarize_file(str(path))["waiting_for_gpus"]
    assert (wait["missing"], wait["unregistered"], wait["busy"]) == (7.6, 0.0, 7.6)
    assert wait["message"].endswith("; 7.6 missing (7.6 registered but in use)")


WAIT_LINE = (
    "[2026-09-20 12:00:30] placement_group.py:64 - Waiting for placement group of 8 GPUs (elapsed 30s): "
    "4 GPUs registered with Ray, 4 available.\n"
)


def test_a_wait_followed_by_training_is_over(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text(WAIT_LINE + "(MegatronTrainRayActor pid=1) step 1: {'train/loss': 0.1}\n")
    assert slime_log.summarize_file(str(path))["waiting_for_gpus"] is None


def test_a_wait_ends_when_slime_lists_the_placed_bundles(tmp_path):
    """slime prints no 'ready' line; once the group is placed it logs each bundle (placement_group.py L92)."""
    path = tmp_path / "x.txt"
    path.write_text(
        WAIT_LINE
        + "[2026-09-20 12:00:41] placement_group.py:92 -   bundle    0, actual_bundle_index:    0, node: 10.0.0.2, "
        "gpu: 0\n"
    )
    assert slime_log.summarize_file(str(path))["waiting_for_gpus"] is None


def test_hf_validate_args(run_module):
    result, _ = run_module(train_progress, {"log_file": log("hf_validate_args")})
    first = result["first_error"]
    assert first["kind"] == "hf_validate" and first["line"] == "Traceback (most recent call last):"
    assert first["exception"].startswith("AssertionError: hf_validate_args failed: hidden_size")
    assert result["fatal_error"]["exception"] == first["exception"] and result["hint_from"] == "fatal_error"
    assert "MODEL_ARGS" in result["hint"] and "config.json" in result["hint"]


@pytest.mark.parametrize(
    "line, kind, words",
    [
        (
            "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to",
            "ray_ports",
            "64379",
        ),
        ("(RolloutManager pid=2) httpx.ConnectError: All connection attempts failed", "router_connect", "no_proxy"),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/data/models/data/x.parquet'",
            "missing_path",
            "docker -v",
        ),
        (
            "(MegatronTrainRayActor pid=1) RuntimeError: Rank 0 scheduler is dead. Please check if there are logs.",
            "scheduler_dead",
            "SGLangEngine",
        ),
        (
            "torch.distributed.DistBackendError: MCCL error in: ProcessGroupMCCL.cpp:1971, unhandled system error",
            "collective",
            "MCCL",
        ),
        ("RuntimeError: MUSA error: an illegal memory access was encountered", "device_error", "mem-fraction"),
        ("ValueError: something else", "error", None),
    ],
)
def test_hint_table(tmp_path, line, kind, words):
    path = tmp_path / "x.txt"
    path.write_text("starting\n%s\n" % line)
    result = slime_log.summarize_file(str(path))
    assert result["first_error"]["kind"] == kind
    if words:
        assert words in result["hint"]
    else:
        assert result["hint"] is None


def test_hints_are_data():
    kinds = [entry["kind"] for entry in slime_faq.HINTS]
    assert kinds.index("graph_capture") < kinds.index("oom") < kinds.index("scheduler_dead")
    for entry in slime_faq.HINTS:
        assert set(entry) >= {"kind", "faq", "error", "hint"}
    assert slime_faq.CONSEQUENCE_KINDS == {"router_connect", "collective", "scheduler_dead"}


def test_benign_lines_are_not_errors():
    lines = [
        "(MegatronTrainRayActor pid=3001)   exit_on_missing_checkpoint ...................... False",
        "/usr/lib/python3/x.py:1: UserWarning: something",
        "Exception ignored in: <function Pool.__del__ at 0x7f>",
        "(SGLangEngine pid=1) [2026-09-20 12:01:15 TP0] Load weight end. avail mem=30.21 GB",
    ]
    assert slime_log.summarize_text("\n".join(lines))["first_error"] is None


# -- through the Jobs API ------------------------------------------------------------------------------
def test_reads_the_log_through_the_jobs_api(run_module):
    fake = FakeRay()
    try:
        fake.add_job("qwen3-8B-attempt-1", "FAILED", {"mtslime_experiment": "qwen3-8B"})
        fake.logs["qwen3-8B-attempt-1"] = Path(log("graph_capture_musa900")).read_text()
        result, failed = run_module(train_progress, {"dashboard_url": fake.url, "submission_id": "qwen3-8B-attempt-1"})
        assert not failed and result["job_status"] == "FAILED"
        assert result["first_error"]["kind"] == "graph_capture"
        assert result["source"] == fake.url + "/api/jobs/qwen3-8B-attempt-1/logs"
        missing, failed = run_module(train_progress, {"dashboard_url": fake.url, "submission_id": "nope"})
        assert failed and "submission_id nope is not known to %s" % fake.url in missing["msg"]
    finally:
        fake.close()


def test_summarize_text_honours_max_bytes():
    text = Path(log("normal_run")).read_text()
    result = slime_log.summarize_text(text, max_bytes=2000)
    assert result["bytes_read"] == 2000 and result["steps"] == 6 and result["last_step"] in (None, 6)


# -- failures name the variable -------------------------------------------------------------------------
def test_missing_log_file_fails_naming_it(run_module, tmp_path):
    result, failed = run_module(train_progress, {"log_file": str(tmp_path / "logs" / "qwen3-8B.log")})
    assert failed and "log_file %s does not exist" % (tmp_path / "logs" / "qwen3-8B.log") in result["msg"]


def test_bad_numbers_fail_naming_them(run_module, tmp_path):
    result, failed = run_module(train_progress, {"log_file": log("normal_run"), "max_bytes": -1, "tail_lines": -2})
    assert failed and "max_bytes is -1" in result["msg"] and "tail_lines is -2" in result["msg"]


def test_log_file_and_submission_id_exclude_each_other(run_module):
    result, failed = run_module(
        train_progress, {"log_file": log("normal_run"), "submission_id": "x", "dashboard_url": "http://127.0.0.1:1"}
    )
    assert failed and "mutually exclusive" in result["msg"]


# -- the logs/scan.py extension ---------------------------------------------------------------------------
def test_first_error_scanner_matches_first_error():
    lines = ["ok\n", "fine\n", "Traceback (most recent call last):\n", "  File x\n", "ValueError: bad\n", "later\n"]
    scanner = FirstErrorScanner(context=5, before=2)
    for line in lines:
        scanner.feed(line)
    found = scanner.result()
    plain = first_error(lines, context=5)
    assert (found["lineno"], found["line"], found["context"]) == (plain["lineno"], plain["line"], plain["context"])
    assert found["before"] == ["ok", "fine"]


def test_log_file_that_is_a_directory_fails(run_module, tmp_path):
    result, failed = run_module(train_progress, {"log_file": str(tmp_path)})
    assert failed and "log_file %s is a directory" % tmp_path in result["msg"]


def test_bad_dashboard_url_fails_naming_it(run_module):
    result, failed = run_module(train_progress, {"dashboard_url": "ray://x:1", "submission_id": "a"})
    assert failed and result["msg"].startswith("train_progress: dashboard_url:")


def test_jobs_api_on_the_gcs_port_fails_with_the_faq_hint(run_module):
    from fake_ray import FakeGcs

    gcs = FakeGcs()
    try:
        result, failed = run_module(
            train_progress,
            {"dashboard_url": "http://127.0.0.1:%d" % gcs.port, "submission_id": "a", "request_timeout": 3},
        )
    finally:
        gcs.close()
    assert failed and "reading the log of a failed" in result["msg"] and "FAQ Q1" in result["msg"]
