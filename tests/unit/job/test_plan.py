"""module_utils/job/plan.py: the one decision (attempt, resume, argv as a list), as a library and as
the program the rendered run script runs from its .mtslime/ copy."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import ckpt_layouts
import pytest
import yaml

from ansible_collections.mtslime.posttrain.plugins.filter.slime import slime_module_utils_copies
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import plan as job_plan

REPO = os.path.abspath(os.path.join(os.path.dirname(job_plan.__file__), "..", "..", ".."))
EXP = "qwen3-8B"
OURS = {"mtslime_experiment": EXP}
ARGV = ["--ref-load", "/ckpt", "--load", "/ckpt", "--save", "/save"]


def job(sid, status, metadata=None, start=1, entrypoint="python3 train.py"):
    return {"submission_id": sid, "status": status, "metadata": metadata or {}, "start_time": start,
            "entrypoint": entrypoint}


def save_dir(tmp_path, complete=(2, 5), tracker="5", partial=()):
    return ckpt_layouts.save_dir(tmp_path / "save", complete, tracker, partial)


# -- the decision ------------------------------------------------------------------------
def test_no_job_means_attempt_1():
    decision = job_plan.decide([], EXP)
    assert decision["action"] == "submit" and decision["submission_id"] == "qwen3-8B-attempt-1"


def test_an_active_job_of_ours_is_kept_whoever_submitted_it():
    decision = job_plan.decide([job("qwen3-8B_20260101-000000", "RUNNING", OURS)], EXP)
    assert decision["action"] == "keep" and decision["active"][0]["submission_id"] == "qwen3-8B_20260101-000000"


def test_a_succeeded_latest_job_means_finished():
    jobs = [job("qwen3-8B-attempt-1", "FAILED", start=1), job("qwen3-8B-attempt-2", "SUCCEEDED", start=2)]
    assert job_plan.decide(jobs, EXP)["action"] == "finished"


def test_a_foreign_training_job_refuses_and_the_message_names_it():
    decision = job_plan.decide([job("raysubmit_1", "RUNNING")], EXP)
    assert decision["action"] == "refuse"
    text = job_plan.nothing_to_submit(decision, EXP, "http://h:8772")
    assert "raysubmit_1 (RUNNING, entrypoint: python3 train.py)" in text and "ray job stop" in text


def test_the_next_attempt_follows_rays_and_the_nodes_records(tmp_path):
    (tmp_path / "qwen3-8B.qwen3-8B-attempt-7.log").write_text("")
    (tmp_path / "qwen3-8B-attempt-3.json").write_text("{}")
    (tmp_path / "other-attempt-9.json").write_text("{}")
    decision = job_plan.decide([job("qwen3-8B-attempt-4", "FAILED")], EXP, [str(tmp_path), str(tmp_path / "none")])
    assert decision["attempt"] == 8 and decision["submission_id"] == "qwen3-8B-attempt-8"


# -- the argv stays a list -----------------------------------------------------------------
@pytest.mark.parametrize("argv, expected", [
    (["--load", "/a", "--save", "/b"], ["--load", "/s", "--save", "/b"]),
    (["--load=/a"], ["--load=/s"]),
    (["--ref-load", "/a"], ["--ref-load", "/a", "--load", "/s"]),
    (["--load-optim", "x", "--load", "/a b"], ["--load-optim", "x", "--load", "/s"]),
    (["--save", "/b", "--load"], ["--save", "/b", "--load", "/s"]),
])
def test_set_flag_edits_tokens(argv, expected):
    assert job_plan.set_flag(argv, "--load", "/s") == expected


def test_the_entrypoint_is_quoted_once_at_the_end():
    assert (job_plan.entrypoint(["python3", "train.py"], ["--save", "/d ir/$(x)"])
            == "python3 train.py --save '/d ir/$(x)'")


# -- resume --------------------------------------------------------------------------------
def test_resume_sets_load_to_the_save_dir_and_moves_the_torn_iteration_aside(tmp_path):
    save = save_dir(tmp_path, tracker="8", partial=(8,))
    predicted = job_plan.resume(str(save), "--load", ARGV, check_mode=True)
    assert (save / "iter_0000008").exists() and predicted["info"]["resumed_from_iteration"] == 5
    done = job_plan.resume(str(save), "--load", ARGV)
    assert done["argv"] == ["--ref-load", "/ckpt", "--load", str(save), "--save", "/save"]
    assert not (save / "iter_0000008").exists() and (save / "latest_checkpointed_iteration.txt").read_text() == "5"
    assert any("aside, never deleted" in w for w in done["warnings"])
    assert job_plan.how(done["info"]) == "resuming from iteration 5 of %s" % save


def test_no_complete_iteration_keeps_the_argv(tmp_path):
    save = save_dir(tmp_path, complete=(), tracker=None)
    done = job_plan.resume(str(save), "--load", ARGV)
    assert done["argv"] == ARGV and done["info"]["resumed_from_iteration"] is None
    assert job_plan.how(done["info"]) == "from the checkpoint in its entrypoint"


# -- the program ---------------------------------------------------------------------------
def run_main(args, jobs):
    out, err = io.BytesIO(), io.StringIO()
    code = job_plan.main(args, out=out, err=err, fetch=lambda url: jobs)
    return code, out.getvalue().split(b"\0")[:-1], err.getvalue()


def test_next_prints_the_id_and_the_argv_nul_separated(tmp_path):
    save = save_dir(tmp_path)
    code, out, err = run_main(["next", "--dashboard", "http://h:8772", "--experiment", EXP, "--save-dir", str(save),
                               "--", "python3", "train.py", "--load", "/ckpt", "--x", "a b"],
                              [job("qwen3-8B-attempt-1", "FAILED", OURS)])
    assert code == 0, err
    assert out == [b"qwen3-8B-attempt-2", b"python3", b"train.py", b"--load", str(save).encode(), b"--x", b"a b"]
    assert "attempt 2: qwen3-8B-attempt-2 resuming from iteration 5" in err


@pytest.mark.parametrize("jobs, code, text", [
    ([job("qwen3-8B-attempt-1", "RUNNING", OURS)], 3, "already active: qwen3-8B-attempt-1 (RUNNING)"),
    ([job("qwen3-8B-attempt-1", "SUCCEEDED", OURS)], 3, "finished: qwen3-8B-attempt-1 succeeded"),
    ([job("raysubmit_1", "PENDING")], 4, "refusing to submit"),
])
def test_next_submits_nothing_when_the_plan_says_so(jobs, code, text):
    got, out, err = run_main(["next", "--dashboard", "http://h:8772", "--experiment", EXP, "--", "x"], jobs)
    assert (got, out) == (code, []) and text in err


def test_next_names_a_dashboard_that_does_not_answer():
    def refused(url):
        raise OSError("connection refused")
    err = io.StringIO()
    assert job_plan.main(["next", "--dashboard", "http://h:1", "--experiment", EXP, "--", "x"], out=io.BytesIO(),
                         err=err, fetch=refused) == 1
    assert err.getvalue() == "cannot list the jobs at http://h:1: connection refused\n"


@pytest.mark.parametrize("args, text", [
    ([], "usage: job/plan.py next"),
    (["next", "--dashboard", "u", "--experiment", EXP], "usage"),
    (["next", "--dashboard", "u", "--", "x"], "--dashboard, --experiment and the argv after -- are required"),
    (["next", "--colour", "red", "--", "x"], "unknown option or missing value: --colour"),
])
def test_bad_usage_exits_64_naming_the_problem(args, text):
    err = io.StringIO()
    assert job_plan.main(args, out=io.BytesIO(), err=err, fetch=lambda url: []) == 64
    assert text in err.getvalue()


def test_the_run_directorys_copies_run_standalone(fake, tmp_path):
    """The role renders the job plan and what it imports into <work_dir>/.mtslime/ (roles/train_job/vars/main.yml,
    filter slime_module_utils_copies); with only them and the standard library, the program plans against a real
    HTTP dashboard."""
    with open(os.path.join(REPO, "roles", "train_job", "vars", "main.yml")) as handle:
        entry = yaml.safe_load(handle)["_train_job_plan_entry"]
    copy = tmp_path / ".mtslime"
    for item in slime_module_utils_copies([entry], str(copy)):
        os.makedirs(os.path.dirname(item["path"]), exist_ok=True)
        with open(item["path"], "w") as handle:
            handle.write(item["content"])
    save = save_dir(tmp_path)
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    proc = subprocess.run([sys.executable, "-S", "-E", str(copy / entry), "next", "--dashboard", fake.url,
                           "--experiment", EXP, "--save-dir", str(save), "--", "python3", "train.py", "--load", "/c"],
                          capture_output=True, timeout=60, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.split(b"\0")[:-1] == [b"qwen3-8B-attempt-2", b"python3", b"train.py", b"--load",
                                             str(save).encode()]
