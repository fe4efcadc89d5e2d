"""train_metrics and module_utils/metric_series on the two-attempt fixture logs of
tests/unit/data/report/ (real line format: Ray and logger prefixes, ANSI codes, nan/inf,
a crash, a resume from iteration 19; see make_logs.py there)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import metric_series
from ansible_collections.mtslime.posttrain.plugins.modules import train_metrics

DATA = Path(__file__).parents[1] / "data" / "report"


@pytest.fixture
def logs(tmp_path):
    directory = tmp_path / "logs"
    directory.mkdir()
    for path in sorted(DATA.glob("*.log.txt")):
        shutil.copy(path, directory / path.name[: -len(".txt")])
    os.symlink("qwen3-8B.qwen3-8B-attempt-2.log", directory / "qwen3-8B.log")
    return directory


def run(run_module, logs, **extra):
    args = {"log_dir": str(logs), "model_name": "qwen3-8B", "experiment": "qwen3-8B"}
    args.update(extra)
    return run_module(train_metrics, args)


def test_every_attempt_in_order_with_its_span_and_checkpoint(run_module, logs):
    result, failed = run(run_module, logs)
    assert not failed and not result["changed"]
    attempts = result["attempts"]
    assert [a["submission_id"] for a in attempts] == ["qwen3-8B-attempt-1", "qwen3-8B-attempt-2"]
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert (attempts[0]["first_rollout"], attempts[0]["last_rollout"]) == (1, 23)
    assert (attempts[1]["first_step"], attempts[1]["last_step"]) == (20, 45)
    assert [a["loaded_iteration"] for a in attempts] == [0, 19]
    assert attempts[1]["loaded_from"] == "/data/checkpoints/Qwen3-8B_slime"
    assert attempts[0]["unparsed_metric_lines"] == 0 and attempts[0]["metric_lines"] > 100


def test_resumes_are_joined_and_redone_rollouts_kept_apart(run_module, logs):
    result, dummy = run(run_module, logs)
    reward = result["series"]["rollout/raw_reward"]
    ids = [p[0] for p in reward["points"]]
    assert ids == list(range(1, 46)), "one point per rollout, in order, across both attempts"
    assert {p[2] for p in reward["points"] if p[0] < 20} == {0}
    assert {p[2] for p in reward["points"] if p[0] >= 20} == {1}
    assert [p[0] for p in reward["superseded"]] == [20, 21, 22, 23] and {p[2] for p in reward["superseded"]} == {0}
    assert reward["kind"] == "rollout" and reward["axis"] == "rollout" and reward["count"] == 45


def test_nan_and_inf_are_kept_as_gaps_not_dropped(run_module, logs):
    result, dummy = run(run_module, logs)
    reward = result["series"]["rollout/raw_reward"]
    assert [p for p in reward["points"] if p[0] == 12] == [[12, "nan", 0]]
    assert reward["non_finite"] == 1
    tokens = result["series"]["perf/tokens_per_gpu_per_sec"]
    assert [p[1] for p in tokens["points"] if p[0] == 17] == ["inf"]


def test_the_report_metrics_and_only_those_by_default(run_module, logs):
    result, dummy = run(run_module, logs)
    assert sorted(result["series"]) == [
        "eval/aime24", "eval/aime24-pass@8", "eval/aime25", "eval/aime25-pass@8",
        "passrate/pass@1", "passrate/pass@2", "passrate/pass@4", "passrate/pass@8",
        "perf/actor_train_tok_per_s", "perf/step_time", "perf/tokens_per_gpu_per_sec",
        "rollout/raw_reward", "rollout/response_len/mean", "rollout/response_lengths",
    ]
    assert "eval/aime24-truncated_ratio" in result["available_metrics"]
    assert "train/grad_norm" in result["available_metrics"]
    evals = result["series"]["eval/aime24"]
    assert [p[0] for p in evals["points"]] == [4, 9, 14, 19, 24, 29, 34, 39, 44]


def test_extra_metrics_from_step_lines_use_the_step_axis(run_module, logs):
    result, dummy = run(run_module, logs, extra_metrics=["train/grad_norm", "train/ppo_kl"])
    kl = result["series"]["train/ppo_kl"]
    assert kl["axis"] == "step" and kl["points"][0] == [1, "nan", 0]


def test_a_long_series_is_downsampled_and_says_so(run_module, logs):
    result, dummy = run(run_module, logs, max_points=10)
    reward = result["series"]["rollout/raw_reward"]
    assert reward["downsampled"]["from"] == 45 and reward["downsampled"]["every"] == 5
    ids = [p[0] for p in reward["points"]]
    assert len(ids) <= 15
    assert 12 in ids, "the gap survives"
    assert {1, 19, 20, 45} <= set(ids), "each attempt's first and last point survive"


def test_explicit_submission_ids_and_missing_logs(run_module, logs):
    result, failed = run(run_module, logs, submission_ids=["qwen3-8B-attempt-2", "qwen3-8B-attempt-3"])
    assert not failed
    assert [a["submission_id"] for a in result["attempts"]] == ["qwen3-8B-attempt-2"]
    assert result["missing_logs"] == ["qwen3-8B-attempt-3"]


def test_hand_started_jobs_are_placed_by_their_date(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    line = "(MegatronTrainRayActor pid=1) [%s] train_metric_utils.py:135 - rollout %d: {'rollout/raw_reward': %s}\n"
    (logs / "qwen3-8B.qwen3-8B-attempt-1.log").write_text(line % ("2026-09-20 10:00:00", 0, "0.1"))
    (logs / "qwen3-8B.qwen3-8B_20260920-110000.log").write_text(line % ("2026-09-20 11:00:00", 1, "0.2"))
    (logs / "qwen3-8B.qwen3-8B-attempt-2.log").write_text(line % ("2026-09-20 12:00:00", 2, "0.3"))
    (logs / "qwen3-8B.other-attempt-1.log").write_text(line % ("2026-09-20 09:00:00", 5, "0.9"))
    found, dummy = metric_series.attempt_logs(str(logs), "qwen3-8B", "qwen3-8B")
    assert [entry[0] for entry in found] == ["qwen3-8B-attempt-1", "qwen3-8B_20260920-110000", "qwen3-8B-attempt-2"]
    series = metric_series.experiment_series(str(logs), "qwen3-8B", "qwen3-8B")["series"]
    assert [p[:2] for p in series["rollout/raw_reward"]["points"]] == [[0, 0.1], [1, 0.2], [2, 0.3]]


def test_a_run_of_the_guides_own_script_is_one_attempt(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "qwen3-8B.log").write_text("[2026-09-20 10:00:00] model.py:918 - rollout 3: {'rollout/raw_reward': 0.5}\n")
    result = metric_series.experiment_series(str(logs), "qwen3-8B", "qwen3-8B")
    assert [a["submission_id"] for a in result["attempts"]] == ["qwen3-8B (guide log)"]
    assert result["series"]["rollout/raw_reward"]["points"] == [[3, 0.5, 0]]


def test_a_torn_last_line_is_counted_not_fatal(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "qwen3-8B.qwen3-8B-attempt-1.log").write_text(
        "(MegatronTrainRayActor pid=1) [2026-09-20 10:00:00] x.py:1 - rollout 0: {'rollout/raw_reward': 0.5}\n"
        "(MegatronTrainRayActor pid=1) [2026-09-20 10:01:00] x.py:1 - rollout 1: {'rollout/raw_reward': 0.")
    result = metric_series.experiment_series(str(logs), "qwen3-8B", "qwen3-8B")
    assert result["attempts"][0]["unparsed_metric_lines"] == 1
    assert result["series"]["rollout/raw_reward"]["points"] == [[0, 0.5, 0]]


def test_no_log_yet_is_an_empty_result(run_module, tmp_path):
    (tmp_path / "logs").mkdir()
    result, failed = run(run_module, tmp_path / "logs")
    assert not failed and result["attempts"] == [] and result["series"] == {}


@pytest.mark.parametrize(
    "extra, words",
    [
        ({"log_dir": "/nonexistent/logs"}, ["log_dir /nonexistent/logs is not a directory", "slime_log_dir"]),
        ({"max_points": -1}, ["max_points is -1"]),
        ({"extra_metrics": ["k%d" % i for i in range(21)]}, ["extra_metrics has 21 keys", "at most 20"]),
        ({"model_name": "a/b"}, ["model_name 'a/b'", "slime_model_name"]),
    ],
)
def test_bad_input_names_the_option(run_module, logs, extra, words):
    result, failed = run(run_module, logs, **extra)
    assert failed
    for word in words:
        assert word in result["msg"], result["msg"]
