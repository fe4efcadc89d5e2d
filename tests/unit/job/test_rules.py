"""The one rule for "ours" and "active" jobs (plugins/module_utils/job/rules.py)."""
from __future__ import annotations

import json

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules as job_rules


def job(sid, status, start=0, experiment=None, entrypoint="python3 train.py --x"):
    return {
        "submission_id": sid,
        "status": status,
        "start_time": start,
        "metadata": {"mtslime_experiment": experiment} if experiment else {},
        "entrypoint": entrypoint,
    }


def test_ours_by_metadata_or_by_attempt_name_and_oldest_first():
    jobs = [
        job("qwen3-8B-attempt-2", "RUNNING", start=20),
        job("qwen3-8B_20261201-101010", "FAILED", start=5, experiment="qwen3-8B"),  # the run script by hand
        job("qwen3-8B-attempt-1", "FAILED", start=10),  # Ray lost the metadata: the name still says it
        job("other-attempt-1", "RUNNING", start=1, experiment="other"),
        job("qwen3-8B-attempt-x", "RUNNING", start=2),  # not an attempt name, no metadata
    ]
    seen = job_rules.classify(jobs, "qwen3-8B")
    assert [j["submission_id"] for j in seen["ours"]] == [
        "qwen3-8B_20261201-101010", "qwen3-8B-attempt-1", "qwen3-8B-attempt-2"]
    assert [j["_attempt"] for j in seen["ours"]] == [None, 1, 2]
    assert [j["submission_id"] for j in seen["active"]] == ["qwen3-8B-attempt-2"]
    assert seen["max_attempt"] == 2
    assert sorted(j["submission_id"] for j in seen["foreign_active"]) == ["other-attempt-1", "qwen3-8B-attempt-x"]
    assert len(seen["any_active"]) == 3


def test_an_experiment_name_is_not_a_pattern():
    assert job_rules.attempt_of("qwen3.8B-attempt-3", "qwen3.8B") == 3
    assert job_rules.attempt_of("qwen3x8B-attempt-3", "qwen3.8B") is None


def test_foreign_jobs_that_do_not_train_do_not_count():
    seen = job_rules.classify([job("raysubmit_1", "RUNNING", entrypoint="python3 -c 'print(1)'")], "qwen3-8B")
    assert seen["foreign_active"] == [] and len(seen["any_active"]) == 1


def test_cli_prints_the_active_ids(monkeypatch, capsys):
    jobs = [job("qwen3-8B-attempt-1", "STOPPED"), job("qwen3-8B-attempt-2", "PENDING"), job("x", "RUNNING")]
    monkeypatch.setattr(job_rules, "fetch_jobs", lambda url, timeout=10: jobs)
    assert job_rules.main(["active", "http://127.0.0.1:8772", "qwen3-8B"]) == 0
    assert json.loads(capsys.readouterr().out) == ["qwen3-8B-attempt-2"]
    assert job_rules.main(["active", "http://127.0.0.1:8772"]) == 0
    assert json.loads(capsys.readouterr().out) == ["qwen3-8B-attempt-2", "x"]


def test_cli_says_when_ray_does_not_answer(monkeypatch, capsys):
    def down(url, timeout=10):
        raise OSError("connection refused")

    monkeypatch.setattr(job_rules, "fetch_jobs", down)
    assert job_rules.main(["active", "http://127.0.0.1:8772"]) == 1
    assert "cannot list the jobs at http://127.0.0.1:8772" in capsys.readouterr().err
