"""ray_job against FakeRay (fake_ray.py): every state transition, duplicates, files,
manifests, resume from a training save dir (real module_utils/mcore.inspect_checkpoint on
layouts written here), the log follower (Python fallback) and check mode."""

from __future__ import annotations

import io
import json
import os
import shlex
import signal
import stat
import time
import zipfile

import ckpt_layouts
import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import logs as job_logs
from ansible_collections.mtslime.posttrain.plugins.modules import ray_job
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import ray_job_task

EXP = "qwen3-8B"
ENTRY = (
    "python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 4 --rollout-num-gpus 4 "
    "--hf-checkpoint /data/models/Qwen3-8B --ref-load /data/LLMs/MCORE/Qwen3-8B_slime "
    "--load /data/LLMs/MCORE/Qwen3-8B_slime --save /tmp/Qwen3-8B_slime/ --save-interval 200"
)
ARGV = shlex.split(ENTRY)[2:]  # what the role passes: the list after the default prefix python3 train.py
OURS = {"mtslime_experiment": EXP}


@pytest.fixture
def warned(monkeypatch):
    """The warnings the module gave through AnsibleModule.warn."""
    from ansible.module_utils import basic

    seen = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: seen.append(text))
    return seen


@pytest.fixture
def followers(tmp_path):
    """Kill every follower the tests started (their pid files are under tmp_path)."""
    yield
    for pid_file in tmp_path.rglob(".*.follower.pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def save_dir_with(tmp_path, complete=(2, 5), tracker="5", partial=()):
    """A training --save dir as Megatron and slime write it (slime.md §4.2), from real torch_dist metadata."""
    return ckpt_layouts.save_dir(tmp_path / "save", complete, tracker, partial)


def base_args(fake, tmp_path, **extra):
    run_dir = tmp_path / "run"
    args = {
        "dashboard_url": fake.url,
        "experiment": EXP,
        "argv": ARGV,
        "runtime_env": {"env_vars": {"MUSA_PATCH_PATH": "/home/megatron-lm-musa-patch"}},
        "files": [
            {"path": str(run_dir / "run-qwen3-8B.sh"), "content": "#!/bin/bash\necho run\n", "mode": "0755"},
            {"path": str(run_dir / "hostfile"), "content": "10.121.38.2 slots=8\n"},
        ],
        "manifest": {"image": "registry.mthreads.com/mcctest/training-suite:v2.1.6", "image_id": "sha256:abc"},
        "log_file": str(run_dir / "logs" / "qwen3-8B.log"),
        "log_follower": "python",
        "follow_interval": 1,
        "stop_timeout": 5,
        "request_timeout": 5,
    }
    if "entrypoint" in extra:  # the older form, a string
        del args["argv"]
    args.update(extra)
    return args


def wait_for(predicate, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# -- none -> submit; then RUNNING / PENDING -> no-op -----------------------------------------
def test_no_job_submits_attempt_1_and_a_second_run_changes_nothing(run_module, fake, tmp_path, followers):
    args = base_args(fake, tmp_path)
    result, failed = run_module(ray_job, args, diff=True)
    assert not failed, result["msg"] if failed else ""
    assert result["changed"] and result["submission_id"] == "qwen3-8B-attempt-1" and result["attempt"] == 1
    assert result["status"] == "PENDING" and result["resumed_from_iteration"] is None
    job = fake.jobs["qwen3-8B-attempt-1"]
    assert job["entrypoint"] == ENTRY
    assert job["runtime_env"] == {"env_vars": {"MUSA_PATCH_PATH": "/home/megatron-lm-musa-patch"}}
    manifest = tmp_path / "run" / "manifests" / "qwen3-8B-attempt-1.json"
    assert job["metadata"] == {"mtslime_experiment": EXP, "mtslime_attempt": "1", "mtslime_manifest": str(manifest)}
    assert result["manifest_file"] == str(manifest)
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o640
    doc = json.loads(manifest.read_text())
    assert doc["submission_id"] == "qwen3-8B-attempt-1" and doc["entrypoint"] == ENTRY and doc["resume"] is None
    assert (
        doc["manifest"]["image_id"] == "sha256:abc" and doc["runtime_env"] == job["runtime_env"] and doc["submitted_at"]
    )
    assert (tmp_path / "run" / "hostfile").read_text() == "10.121.38.2 slots=8\n"
    assert stat.S_IMODE((tmp_path / "run" / "run-qwen3-8B.sh").stat().st_mode) == 0o755
    assert sorted(result["files_changed"]) == sorted(f["path"] for f in args["files"])
    assert (
        result["diff"][0]["after"]
        == "experiment qwen3-8B: qwen3-8B-attempt-1 submitted, from the checkpoint in its entrypoint\n"
    )
    assert any(a.startswith("submitted qwen3-8B-attempt-1 (attempt 1)") for a in result["actions"])
    assert result["jobs"] == [
        {
            "submission_id": "qwen3-8B-attempt-1",
            "attempt": 1,
            "status": "PENDING",
            "start_time": result["start_time"],
            "end_time": None,
            "driver_exit_code": None,
        }
    ]
    assert result["active"] == ["qwen3-8B-attempt-1"]
    assert result["follower"] == {"kind": "python", "what": "started"} and result["follower_pid"]
    assert len(fake.submitted()) == 1

    again, failed = run_module(ray_job, args)
    assert not failed and not again["changed"], again["actions"]
    assert again["submission_id"] == "qwen3-8B-attempt-1" and again["status"] == "PENDING"
    assert again["follower"]["what"] == "kept" and again["follower_pid"] == result["follower_pid"]
    fake.set_status("qwen3-8B-attempt-1", "RUNNING")
    third, dummy = run_module(ray_job, args)
    assert not third["changed"] and third["status"] == "RUNNING" and third["message"] == "Job is currently running."
    assert len(fake.submitted()) == 1


def test_running_job_is_left_alone(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-2", "RUNNING", OURS)
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS, start_time=1)
    args = base_args(fake, tmp_path, files=None, log_file=None, manifest=None)
    result, failed = run_module(ray_job, args)
    assert not failed and not result["changed"]
    assert result["submission_id"] == "qwen3-8B-attempt-2" and result["attempt"] == 2 and result["status"] == "RUNNING"
    assert [j["submission_id"] for j in result["jobs"]] == ["qwen3-8B-attempt-1", "qwen3-8B-attempt-2"]
    assert fake.submitted() == []


def test_pending_job_is_left_alone(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "PENDING", OURS)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert not failed and not result["changed"] and result["status"] == "PENDING"
    assert fake.submitted() == []


def test_succeeded_job_means_finished(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "SUCCEEDED", OURS)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, manifest=None))
    assert not failed and not result["changed"]
    assert result["status"] == "SUCCEEDED" and result["message"].startswith("finished: qwen3-8B-attempt-1 succeeded")
    assert result["driver_exit_code"] == 0 and result["end_time"].endswith("Z") and result["end_time_ms"]
    assert result["follower_pid"] is None and fake.submitted() == []


# -- FAILED / STOPPED -> a new attempt -------------------------------------------------------
def test_failed_job_gets_a_new_attempt_resumed_from_the_save_dir(run_module, fake, tmp_path, followers):
    save = save_dir_with(tmp_path, complete=(2, 5), tracker="5", partial=(8,))
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    args = base_args(fake, tmp_path, resume={"save_dir": str(save)})
    result, failed = run_module(ray_job, args, diff=True)
    assert not failed, result.get("msg")
    assert result["changed"] and result["submission_id"] == "qwen3-8B-attempt-2" and result["attempt"] == 2
    assert result["resumed_from_iteration"] == 5
    expected = ENTRY.replace("--load /data/LLMs/MCORE/Qwen3-8B_slime", "--load %s" % save)
    assert "--ref-load /data/LLMs/MCORE/Qwen3-8B_slime" in expected
    job = fake.jobs["qwen3-8B-attempt-2"]
    assert job["entrypoint"] == expected == result["entrypoint"]
    assert job["metadata"]["mtslime_resumed_from"] == "5"
    assert result["resume"]["state"] == "complete" and result["resume"]["dataset_state"] is True
    assert "resuming from iteration 5 of %s" % save in result["diff"][0]["after"]
    assert "latest job qwen3-8B-attempt-1 FAILED" in result["diff"][0]["before"]
    doc = json.loads(open(result["manifest_file"]).read())
    assert doc["resumed_from_iteration"] == 5 and doc["previous_job"]["status"] == "FAILED"
    assert doc["entrypoint_given"] == ENTRY and doc["entrypoint"] == expected


def test_stopped_job_gets_attempt_after_the_highest_seen(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    fake.add_job("qwen3-8B-attempt-3", "STOPPED")  # no metadata: ours by its id
    fake.add_job("qwen3-8B_20260920-120000", "FAILED", OURS)  # the run script's id: no attempt number
    result, failed = run_module(
        ray_job,
        base_args(
            fake, tmp_path, files=None, log_file=None, manifest=None, resume={"save_dir": str(tmp_path / "nothing")}
        ),
    )
    assert not failed and result["changed"]
    assert result["submission_id"] == "qwen3-8B-attempt-4"
    assert result["resume"]["state"] == "absent" and result["resumed_from_iteration"] is None
    assert fake.jobs["qwen3-8B-attempt-4"]["entrypoint"] == ENTRY
    assert [j["attempt"] for j in result["jobs"]] == [1, 3, None, 4]


def test_resume_adds_load_when_absent(run_module, fake, tmp_path):
    save = save_dir_with(tmp_path, complete=(7,), tracker="7")
    fake.add_job("qwen3-8B-attempt-1", "STOPPED", OURS)
    args = base_args(
        fake,
        tmp_path,
        files=None,
        log_file=None,
        manifest=None,
        entrypoint="python3 train.py --save x",
        resume={"save_dir": str(save)},
    )
    result, dummy = run_module(ray_job, args)
    assert fake.jobs["qwen3-8B-attempt-2"]["entrypoint"] == "python3 train.py --save x --load %s" % save
    assert result["resumed_from_iteration"] == 7


def test_resume_without_tracker_writes_it(run_module, fake, tmp_path):
    save = save_dir_with(tmp_path, complete=(5,), tracker=None)  # complete iteration but no tracker
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None, resume={"save_dir": str(save)})
    )
    assert not failed, result.get("msg")
    assert result["resumed_from_iteration"] == 5
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "5"
    assert any(a.startswith("wrote %s/latest_checkpointed_iteration.txt: 5" % save) for a in result["actions"])


def test_tracker_naming_an_incomplete_iteration_resumes_from_the_last_complete_one(
    run_module, fake, tmp_path, warned
):
    save = save_dir_with(tmp_path, complete=(2, 5), tracker="8", partial=(8,))
    before = ckpt_layouts.listing(save)
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    args = base_args(fake, tmp_path, files=None, log_file=None, manifest=None, resume={"save_dir": str(save)})
    predicted, failed = run_module(ray_job, args, check_mode=True)
    assert not failed and predicted["resumed_from_iteration"] == 5
    assert ckpt_layouts.listing(save) == before and fake.submitted() == []
    assert [m["path"] for m in predicted["resume"]["moved_to"]] == [
        str(save / "iter_0000008"), str(save / "latest_checkpointed_iteration.txt")]
    assert any(a.startswith("would move %s aside to %s.incomplete-" % (save / "iter_0000008", save / "iter_0000008"))
               for a in predicted["actions"])
    result, failed = run_module(ray_job, args)
    assert not failed, result.get("msg")
    assert result["resumed_from_iteration"] == 5 and result["resume"]["state"] == "interrupted"
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "5"
    moved = result["resume"]["moved_to"]
    assert [m["path"] for m in moved] == [str(save / "iter_0000008"), str(save / "latest_checkpointed_iteration.txt")]
    assert all(os.path.exists(m["to"]) for m in moved) and not (save / "iter_0000008").exists()
    assert any(a.startswith("moved %s aside to %s" % (moved[0]["path"], moved[0]["to"])) for a in result["actions"])
    assert fake.jobs["qwen3-8B-attempt-2"]["metadata"]["mtslime_resumed_from"] == "5"
    said = [w for w in warned if w.startswith("resume.save_dir %s: moved aside, never deleted: " % save)]
    assert said and moved[0]["to"] in said[-1] and said[-1].endswith("the job resumes from iteration 5")
    assert any(w.startswith("resume.save_dir %s: would move aside" % save) for w in warned)


def test_interrupted_first_save_starts_over_with_a_warning(run_module, fake, tmp_path, warned):
    save = save_dir_with(tmp_path, complete=(), tracker=None, partial=(2,))
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None, resume={"save_dir": str(save)})
    )
    assert not failed and result["changed"] and result["resumed_from_iteration"] is None
    assert fake.jobs["qwen3-8B-attempt-1"]["entrypoint"] == ENTRY
    assert any("holds no complete iteration: the job starts from the converted checkpoint" in w for w in warned)
    assert result["resume"]["moved_to"][0]["path"] == str(save / "iter_0000002")


# -- refusing duplicates -------------------------------------------------------------------------
def test_hand_submitted_job_with_our_metadata_counts_as_ours(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B_20260920-120000", "RUNNING", OURS)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert not failed and not result["changed"]
    assert result["submission_id"] == "qwen3-8B_20260920-120000" and result["attempt"] is None
    assert fake.submitted() == []


def test_foreign_train_job_blocks_a_submission(run_module, fake, tmp_path):
    fake.add_job("raysubmit_abc123", "RUNNING", {}, entrypoint="python3 train.py --actor-num-nodes 1")
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert failed
    assert "refusing to submit a job for experiment qwen3-8B" in result["msg"]
    assert "raysubmit_abc123 (RUNNING, entrypoint: python3 train.py --actor-num-nodes 1)" in result["msg"]
    assert "ray job stop" in result["msg"] and fake.submitted() == []


def test_another_experiments_job_blocks_too(run_module, fake, tmp_path):
    fake.add_job("qwen3-32B-attempt-1", "PENDING", {"mtslime_experiment": "qwen3-32B"}, entrypoint="python3 train.py")
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert failed and "qwen3-32B-attempt-1 (PENDING, experiment qwen3-32B" in result["msg"]


def test_foreign_jobs_that_are_not_training_do_not_block(run_module, fake, tmp_path):
    fake.add_job("raysubmit_x", "RUNNING", {}, entrypoint="python3 eval.py")
    fake.add_job("old", "SUCCEEDED", {}, entrypoint="python3 train.py")
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-1"


def test_several_active_jobs_are_reported_with_a_warning(run_module, fake, tmp_path, warned):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    fake.add_job("qwen3-8B_20260920-120000", "RUNNING", OURS)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert not failed and not result["changed"]
    assert result["active"] == ["qwen3-8B-attempt-1", "qwen3-8B_20260920-120000"]
    assert any("2 active jobs" in w for w in warned)


def test_a_concurrent_submission_is_not_repeated(run_module, fake, tmp_path, warned, monkeypatch):
    """The id appears between the job list and the POST: reported, never posted twice."""
    real_list = ray_job_task.RayClient.list_jobs

    def list_then_race(self):
        jobs = real_list(self)
        fake.add_job("qwen3-8B-attempt-1", "PENDING", OURS)
        return jobs

    monkeypatch.setattr(ray_job_task.RayClient, "list_jobs", list_then_race)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert not failed and not result["changed"] and result["submission_id"] == "qwen3-8B-attempt-1"
    assert any("another run submitted it" in w for w in warned)
    assert fake.submitted() == []


def test_entrypoint_is_needed_to_submit(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, entrypoint=None, files=None, log_file=None, manifest=None)
    )
    assert failed and "entrypoint is required to submit attempt 2 of experiment qwen3-8B" in result["msg"]
    assert "qwen3-8B-attempt-1 FAILED" in result["msg"]


# -- files ------------------------------------------------------------------------------------
def test_files_unchanged_then_changed_while_running(run_module, fake, tmp_path, warned, followers):
    args = base_args(fake, tmp_path)
    first, dummy = run_module(ray_job, args)
    assert first["changed"]
    fake.set_status("qwen3-8B-attempt-1", "RUNNING")
    same, dummy = run_module(ray_job, args)
    assert not same["changed"] and same["files_changed"] == []
    args["files"][1]["content"] = "10.121.38.9 slots=8\n"
    changed, failed = run_module(ray_job, args, diff=True)
    hostfile = args["files"][1]["path"]
    assert not failed and changed["changed"] and changed["files_changed"] == [hostfile]
    assert open(hostfile).read() == "10.121.38.9 slots=8\n"
    note = [a for a in changed["actions"] if "keeps its arguments" in a]
    assert note and "qwen3-8B-attempt-1 is RUNNING" in note[0] and "playbooks/stop.yml" in note[0]
    assert any("keeps its arguments" in w for w in warned)
    assert (
        changed["diff"][0]["before"] == "10.121.38.2 slots=8\n"
        and changed["diff"][0]["after"] == "10.121.38.9 slots=8\n"
    )
    assert fake.jobs["qwen3-8B-attempt-1"]["status"] == "RUNNING" and len(fake.submitted()) == 1


def test_file_mode_change_alone_is_a_change(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "SUCCEEDED", OURS)
    args = base_args(fake, tmp_path, log_file=None)
    run_module(ray_job, args)
    args["files"][0]["mode"] = "0700"
    result, dummy = run_module(ray_job, args, diff=True)
    assert result["changed"] and result["files_changed"] == [args["files"][0]["path"]]
    assert stat.S_IMODE(os.stat(args["files"][0]["path"]).st_mode) == 0o700
    assert result["diff"][0]["after"] == "mode 0700\n"


def test_bad_file_mode_fails_naming_the_file(run_module, fake, tmp_path):
    args = base_args(fake, tmp_path)
    args["files"][0]["mode"] = "rwx"
    result, failed = run_module(ray_job, args)
    assert failed and "files[0] (%s): mode 'rwx'" % args["files"][0]["path"] in result["msg"]


# -- working_dir package --------------------------------------------------------------------------
def test_local_working_dir_is_uploaded_and_submitted_as_gcs_uri(run_module, fake, tmp_path):
    work = tmp_path / "slime"
    (work / "logs").mkdir(parents=True)
    (work / "train.py").write_text("print('hi')\n")
    (work / "logs" / "big.log").write_text("x" * 100)
    env = {"working_dir": str(work), "excludes": ["logs/"], "env_vars": {"A": "1"}}
    result, failed = run_module(ray_job, base_args(fake, tmp_path, runtime_env=env, log_file=None))
    assert not failed
    submitted = fake.jobs["qwen3-8B-attempt-1"]["runtime_env"]
    assert (
        submitted["working_dir"].startswith("gcs://_ray_pkg_")
        and submitted["excludes"] == ["logs/"]
        and submitted["env_vars"] == {"A": "1"}
    )
    name = submitted["working_dir"][len("gcs://") :]
    assert zipfile.ZipFile(io.BytesIO(fake.packages[name])).namelist() == ["train.py"]
    assert result["working_dir_package"]["uploaded"] and result["runtime_env"] == submitted
    doc = json.loads(open(result["manifest_file"]).read())
    assert doc["working_dir"] == str(work) and doc["runtime_env"]["working_dir"] == submitted["working_dir"]

    fake.set_status("qwen3-8B-attempt-1", "FAILED")
    second, dummy = run_module(ray_job, base_args(fake, tmp_path, runtime_env=env, log_file=None))
    assert second["submission_id"] == "qwen3-8B-attempt-2" and not second["working_dir_package"]["uploaded"]
    assert [m for m, _p in fake.requests].count("PUT") == 1


def test_relative_working_dir_is_relative_to_the_run_dir(run_module, fake, tmp_path):
    (tmp_path / "run" / "code").mkdir(parents=True)
    (tmp_path / "run" / "code" / "train.py").write_text("x\n")
    result, failed = run_module(ray_job, base_args(fake, tmp_path, runtime_env={"working_dir": "code"}, log_file=None))
    assert not failed and result["working_dir_package"]["directory"] == str(tmp_path / "run" / "code")


def test_missing_working_dir_fails_naming_it(run_module, fake, tmp_path):
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, runtime_env={"working_dir": "/nonexistent/slime"}, log_file=None)
    )
    assert failed and "runtime_env.working_dir /nonexistent/slime is not a directory" in result["msg"]
    assert fake.submitted() == []


# -- stopped / status ------------------------------------------------------------------------------
def test_stopped_stops_every_active_job_and_waits(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    fake.add_job("qwen3-8B-attempt-2", "RUNNING", OURS)
    fake.add_job("qwen3-8B_20260920-120000", "PENDING", OURS)
    result, failed = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped"}, diff=True)
    assert not failed and result["changed"]
    assert (
        fake.jobs["qwen3-8B-attempt-2"]["status"] == "STOPPED"
        and fake.jobs["qwen3-8B_20260920-120000"]["status"] == "STOPPED"
    )
    assert result["active"] == [] and result["status"] == "STOPPED"
    assert "asked Ray to stop qwen3-8B-attempt-2" in result["actions"]
    assert result["diff"][0]["after"] == "qwen3-8B-attempt-2 STOPPED\nqwen3-8B_20260920-120000 STOPPED\n"
    again, dummy = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped"})
    assert not again["changed"] and again["message"] == "no active job of experiment qwen3-8B"


def test_stopped_with_nothing_active(run_module, fake, tmp_path):
    result, failed = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped"})
    assert not failed and not result["changed"] and result["submission_id"] is None


def test_stopped_without_ray_on_the_node_has_nothing_to_stop(run_module, fake, monkeypatch):
    url = fake.url
    fake.close()  # nothing answers there any more
    monkeypatch.setattr(ray_job_task, "ray_processes", lambda: [])
    result, failed = run_module(ray_job, {"dashboard_url": url, "experiment": EXP, "state": "stopped"})
    assert not failed and not result["changed"] and result["submission_id"] is None
    assert result["message"] == "no Ray runs on this node (no Ray process, nothing answers at %s): no job can run, " \
                                "nothing to stop" % url
    # a Ray process that does not answer (a wrong port, a dashboard not up yet) is a failure, not "nothing to stop"
    monkeypatch.setattr(ray_job_task, "ray_processes", lambda: [(42, "gcs_server")])
    result, failed = run_module(ray_job, {"dashboard_url": url, "experiment": EXP, "state": "stopped"})
    assert failed and "cannot list the jobs at %s" % url in result["msg"]
    # status still says that it could not read the job
    monkeypatch.setattr(ray_job_task, "ray_processes", lambda: [])
    result, failed = run_module(ray_job, {"dashboard_url": url, "experiment": EXP, "state": "status"})
    assert failed and "cannot list the jobs" in result["msg"]


def test_stop_timeout_names_the_job(run_module, fake):
    fake.stop_after = None  # Ray never reaches a terminal state
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    result, failed = run_module(
        ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped", "stop_timeout": 1}
    )
    assert failed and "qwen3-8B-attempt-1 still RUNNING 1s after the stop request (stop_timeout)" in result["msg"]


def test_status_reports_the_latest_and_writes_nothing(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS, exit_code=3)
    args = base_args(fake, tmp_path, state="status")
    result, failed = run_module(ray_job, args)
    assert not failed and not result["changed"]
    assert (
        result["submission_id"] == "qwen3-8B-attempt-1"
        and result["status"] == "FAILED"
        and result["driver_exit_code"] == 3
    )
    assert "exit code 3" in result["message"]
    assert not (tmp_path / "run").exists() and fake.submitted() == []


def test_status_without_jobs(run_module, fake):
    result, failed = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "status"})
    assert not failed and result["status"] is None and "no job of experiment qwen3-8B" in result["message"]


# -- check mode -------------------------------------------------------------------------------
def test_check_mode_predicts_and_writes_nothing(run_module, fake, tmp_path):
    save = save_dir_with(tmp_path, complete=(5,), tracker="5")
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    work = tmp_path / "slime"
    work.mkdir()
    (work / "train.py").write_text("x\n")
    args = base_args(fake, tmp_path, resume={"save_dir": str(save)}, runtime_env={"working_dir": str(work)})
    result, failed = run_module(ray_job, args, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert result["status"] == "WOULD_SUBMIT" and result["submission_id"] == "qwen3-8B-attempt-2"
    assert result["resumed_from_iteration"] == 5
    assert "would submit qwen3-8B-attempt-2 (attempt 2) resuming from iteration 5" in " ".join(result["actions"])
    assert any(a.startswith("would upload working_dir") for a in result["actions"])
    assert any(a.startswith("would start the python log follower") for a in result["actions"])
    assert fake.submitted() == [] and fake.packages == {} and "PUT" not in [m for m, dummy in fake.requests]
    assert not (tmp_path / "run").exists()


def test_check_mode_stop_stops_nothing(run_module, fake):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    result, dummy = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped"},
                               check_mode=True)
    assert result["changed"] and result["actions"] == ["would stop qwen3-8B-attempt-1 (RUNNING)"]
    assert fake.jobs["qwen3-8B-attempt-1"]["status"] == "RUNNING" and not fake.stopping


# -- the log follower ------------------------------------------------------------------------------
def test_follower_copies_the_log_and_is_restarted_when_dead(run_module, fake, tmp_path, followers):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    fake.logs["qwen3-8B-attempt-1"] = "step 1: {'train/loss': 0.1}\n\x1b[32mcolored\x1b[0m\n"
    args = base_args(fake, tmp_path, files=None, manifest=None)
    log_file = tmp_path / "run" / "logs" / "qwen3-8B.log"
    attempt_log = tmp_path / "run" / "logs" / "qwen3-8B.qwen3-8B-attempt-1.log"
    first, failed = run_module(ray_job, args)
    assert not failed and first["changed"] and first["follower"] == {"kind": "python", "what": "started"}
    assert first["attempt_log"] == str(attempt_log)
    assert os.readlink(log_file) == attempt_log.name
    pid_file = tmp_path / "run" / "logs" / ".qwen3-8B.follower.pid"
    assert pid_file.read_text().split() == [str(first["follower_pid"]), "qwen3-8B-attempt-1", "python"]
    assert (tmp_path / "run" / "logs" / ".qwen3-8B.follower.py").exists()
    assert wait_for(lambda: attempt_log.exists() and "colored" in attempt_log.read_text())
    assert attempt_log.read_text() == "step 1: {'train/loss': 0.1}\ncolored\n"

    kept, dummy = run_module(ray_job, args)
    assert not kept["changed"] and kept["follower"]["what"] == "kept" and kept["follower_pid"] == first["follower_pid"]

    os.killpg(first["follower_pid"], signal.SIGKILL)
    assert wait_for(lambda: not job_logs.alive(first["follower_pid"], "qwen3-8B-attempt-1"))
    restarted, dummy = run_module(ray_job, args)
    assert restarted["changed"] and restarted["follower"]["what"] == "restarted"
    assert restarted["follower_pid"] != first["follower_pid"]
    assert any(a.startswith("restarted the python log follower of qwen3-8B-attempt-1") for a in restarted["actions"])

    fake.logs["qwen3-8B-attempt-1"] += "the end\n"
    fake.set_status("qwen3-8B-attempt-1", "SUCCEEDED")
    assert wait_for(lambda: not job_logs.alive(restarted["follower_pid"], "qwen3-8B-attempt-1"))
    assert attempt_log.read_text().endswith("the end\n")
    done, dummy = run_module(ray_job, args)
    assert not done["changed"] and done["status"] == "SUCCEEDED"


def test_a_new_attempt_gets_its_own_log_and_the_old_one_stays(run_module, fake, tmp_path, followers):
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    old = logs / "qwen3-8B.qwen3-8B-attempt-1.log"
    old.write_text("attempt 1 log\n")
    os.symlink(old.name, logs / "qwen3-8B.log")
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, manifest=None))
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-2"
    assert os.readlink(logs / "qwen3-8B.log") == "qwen3-8B.qwen3-8B-attempt-2.log"
    assert old.read_text() == "attempt 1 log\n"


def test_a_regular_log_file_is_moved_aside(run_module, fake, tmp_path, followers):
    fake.add_job("qwen3-8B_20260920-120000", "RUNNING", OURS)
    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    (logs / "qwen3-8B.log").write_text("written by the run script\n")
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, manifest=None))
    assert not failed and result["changed"]
    moved = result["moved_to"]
    assert (
        moved.startswith(str(logs / "qwen3-8B.log.previous-")) and open(moved).read() == "written by the run script\n"
    )
    assert os.readlink(logs / "qwen3-8B.log") == "qwen3-8B.qwen3-8B_20260920-120000.log"


def test_no_follower_when_asked(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    result, dummy = run_module(ray_job, base_args(fake, tmp_path, files=None, manifest=None, log_follower="none"))
    assert not result["changed"] and result["follower_pid"] is None
    assert not (tmp_path / "run" / "logs").exists()


def test_ray_follower_command_is_the_guides_pipeline(monkeypatch, tmp_path):
    """With the ray CLI and sed on PATH the follower is `ray job logs <id> -f | sed ... > file`."""
    seen = {}

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            seen["cmd"], seen["env"], seen["session"] = cmd, kwargs["env"], kwargs["start_new_session"]
            self.pid = 424242
            self.returncode = None

    class FakeModule:
        def get_bin_path(self, name):
            return {"ray": "/usr/local/bin/ray", "sed": "/bin/sed"}.get(name)

    monkeypatch.setattr(job_logs.subprocess, "Popen", FakePopen)
    follower = job_logs.Follower(
        FakeModule().get_bin_path, str(tmp_path / "logs" / "qwen3-8B.log"), "http://10.0.0.1:8772", "auto", 5
    )
    (tmp_path / "logs").mkdir()
    assert follower.kind()[0] == "ray"
    pid = follower.spawn("qwen3-8B-attempt-1", "ray", "/usr/local/bin/ray", "/bin/sed")
    assert pid == 424242 and seen["session"]
    assert seen["cmd"][:2] == ["/bin/sh", "-c"] and 'job logs "$2" -f 2>&1 |' in seen["cmd"][2]
    assert "s/\\x1B\\[[0-9;?]*[ -/]*[@-~]//g" in seen["cmd"][2]
    assert seen["cmd"][4:] == [
        "/usr/local/bin/ray",
        "qwen3-8B-attempt-1",
        "/bin/sed",
        str(tmp_path / "logs" / "qwen3-8B.qwen3-8B-attempt-1.log"),
    ]
    assert seen["env"]["RAY_ADDRESS"] == "http://10.0.0.1:8772" and "10.0.0.1" in seen["env"]["no_proxy"].split(",")


# -- helpers ---------------------------------------------------------------------------------------
def test_bad_parameters_are_all_named(run_module, fake):
    result, failed = run_module(
        ray_job, {"dashboard_url": "ray://x:1", "experiment": "bad name/", "stop_timeout": 0, "manifest": {"a": 1}}
    )
    assert failed
    for words in ("experiment 'bad name/'", "dashboard_url:", "stop_timeout is 0", "manifest is set but"):
        assert words in result["msg"]


def test_dashboard_on_the_gcs_port_fails_with_the_faq_hint(run_module):
    from fake_ray import FakeGcs

    gcs = FakeGcs()
    try:
        result, failed = run_module(
            ray_job, {"dashboard_url": "http://127.0.0.1:%d" % gcs.port, "experiment": EXP, "request_timeout": 3}
        )
    finally:
        gcs.close()
    assert (
        failed and "cannot list the jobs" in result["msg"] and "GCS port" in result["msg"] and "8772" in result["msg"]
    )
    assert result["error"]["kind"] == "protocol"


# -- every other failure names what is wrong -----------------------------------------------------------
def test_relative_file_path_fails_naming_it(run_module, fake, tmp_path):
    args = base_args(fake, tmp_path)
    args["files"][1]["path"] = "run/hostfile"
    result, failed = run_module(ray_job, args)
    assert failed and "files[1]: path run/hostfile is relative" in result["msg"]


def test_a_directory_in_files_fails_naming_it(run_module, fake, tmp_path):
    args = base_args(fake, tmp_path)
    os.makedirs(args["files"][1]["path"])
    result, failed = run_module(ray_job, args)
    assert failed and "files[1]: %s is a directory" % args["files"][1]["path"] in result["msg"]


def test_log_file_that_is_a_directory_fails_naming_it(run_module, fake, tmp_path):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    args = base_args(fake, tmp_path, files=None, manifest=None)
    os.makedirs(args["log_file"])
    result, failed = run_module(ray_job, args)
    assert failed and "log_file %s is a directory" % args["log_file"] in result["msg"]


def test_ray_follower_without_the_cli_fails_naming_it(run_module, fake, tmp_path, monkeypatch):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, manifest=None, log_follower="ray"))
    assert failed and "log_follower=ray but the ray CLI is not on PATH" in result["msg"]


def test_manifest_dir_that_cannot_be_made_fails_naming_it(run_module, fake, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, log_file=None, manifest_dir=str(blocker / "manifests"))
    )
    assert (
        failed and "cannot write the manifest %s" % (blocker / "manifests" / "qwen3-8B-attempt-1.json") in result["msg"]
    )
    assert fake.submitted() == []


def test_a_refused_submission_fails_with_rays_text(run_module, fake, tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise ray_job_task.RayApiError(
            "Ray dashboard answered HTTP 400",
            url=fake.url + "/api/jobs/",
            method="POST",
            status=400,
            body="Traceback\nTypeError: bad runtime_env\n",
        )

    monkeypatch.setattr(ray_job_task.RayClient, "submit_job", refuse)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert failed and "submitting qwen3-8B-attempt-1 to %s failed" % fake.url in result["msg"]
    assert "TypeError: bad runtime_env" in result["msg"] and result["error"]["status"] == 400


def test_a_failed_upload_fails_naming_the_working_dir(run_module, fake, tmp_path, monkeypatch):
    work = tmp_path / "slime"
    work.mkdir()

    def too_big(self, directory, excludes=None):
        raise ray_job_task.RayApiError("the working_dir package of %s is over Ray's limit" % directory, kind="package")

    monkeypatch.setattr(ray_job_task.RayClient, "upload_working_dir", too_big)
    result, failed = run_module(
        ray_job, base_args(fake, tmp_path, runtime_env={"working_dir": str(work)}, log_file=None)
    )
    assert failed and result["msg"].startswith("ray_job: runtime_env.working_dir %s:" % work)


def test_an_id_taken_by_someone_else_fails(run_module, fake, tmp_path, monkeypatch):
    real_list = ray_job_task.RayClient.list_jobs

    def list_then_race(self):
        jobs = real_list(self)
        fake.add_job("qwen3-8B-attempt-1", "SUCCEEDED", {}, entrypoint="echo other")
        return jobs

    monkeypatch.setattr(ray_job_task.RayClient, "list_jobs", list_then_race)
    result, failed = run_module(ray_job, base_args(fake, tmp_path, files=None, log_file=None, manifest=None))
    assert (
        failed
        and "submission id qwen3-8B-attempt-1 already exists on %s (status SUCCEEDED)" % fake.url in result["msg"]
    )
    assert fake.submitted() == []


def test_a_failed_stop_request_fails_naming_the_job(run_module, fake, monkeypatch):
    fake.add_job("qwen3-8B-attempt-1", "RUNNING", OURS)

    def broken(self, sid):
        raise ray_job_task.RayApiError(
            "Ray dashboard answered HTTP 500", url=fake.url, status=500, body="RuntimeError: agent gone\n"
        )

    monkeypatch.setattr(ray_job_task.RayClient, "stop_job", broken)
    result, failed = run_module(ray_job, {"dashboard_url": fake.url, "experiment": EXP, "state": "stopped"})
    assert failed and "stopping qwen3-8B-attempt-1 failed" in result["msg"] and "agent gone" in result["msg"]


# -- attempts after the head lost its job list; versions recorded at submission -------------
def test_attempt_numbers_continue_after_ray_forgot_its_jobs(run_module, fake, tmp_path, followers):
    """A restarted head lists no jobs; the manifests and logs on disk still count, so an
    earlier attempt's files are never overwritten by a reused id."""
    args = base_args(fake, tmp_path)
    manifests = tmp_path / "run" / "manifests"
    manifests.mkdir(parents=True)
    (manifests / "qwen3-8B-attempt-2.json").write_text("{}")
    logs = tmp_path / "run" / "logs"
    logs.mkdir()
    (logs / "qwen3-8B.qwen3-8B-attempt-3.log").write_text("old attempt\n")
    result, failed = run_module(ray_job, args)
    assert not failed and result["submission_id"] == "qwen3-8B-attempt-4"
    assert (logs / "qwen3-8B.qwen3-8B-attempt-3.log").read_text() == "old attempt\n"


def test_manifest_records_what_the_commands_found(run_module, fake, tmp_path, followers):
    args = base_args(fake, tmp_path, manifest_commands={"slime": "echo 0.3.1+abc", "torch_musa": "exit 3"})
    result, failed = run_module(ray_job, args)
    assert not failed
    doc = json.loads((tmp_path / "run" / "manifests" / "qwen3-8B-attempt-1.json").read_text())
    assert doc["found"]["slime"] == "0.3.1+abc"
    assert doc["found"]["torch_musa"]["rc"] == 3
    again, dummy = run_module(ray_job, args)
    assert not again["changed"]


def test_the_argv_list_is_quoted_once_and_load_is_set_in_the_list(run_module, fake, tmp_path):
    save = save_dir_with(tmp_path)
    fake.add_job("qwen3-8B-attempt-1", "FAILED", OURS)
    argv = ["--load", "/ckpt", "--metadata-key", "a'b $(c)", "--save", str(save)]
    result, failed = run_module(ray_job, base_args(fake, tmp_path, argv=argv, files=None, manifest=None,
                                                   log_file=None, resume={"save_dir": str(save)}))
    assert not failed, result.get("msg")
    assert result["argv"] == ["--load", str(save), "--metadata-key", "a'b $(c)", "--save", str(save)]
    entry = fake.jobs["qwen3-8B-attempt-2"]["entrypoint"]
    assert shlex.split(entry) == ["python3", "train.py"] + result["argv"] and entry == result["entrypoint"]


def test_argv_and_entrypoint_together_or_a_broken_entrypoint_fail(run_module, fake, tmp_path):
    args = base_args(fake, tmp_path)
    args["entrypoint"] = ENTRY
    result, failed = run_module(ray_job, args)
    assert failed and "mutually exclusive: argv|entrypoint" in result["msg"]
    result, failed = run_module(ray_job, base_args(fake, tmp_path, entrypoint="python3 train.py --x 'open"))
    assert failed and "entrypoint: No closing quotation; give the arguments as a list in argv" in result["msg"]
