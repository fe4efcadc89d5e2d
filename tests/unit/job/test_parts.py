"""The pieces of ray_job, each on its own: results (job/result.py), run files, manifest, stop, submit
helpers and the log follower's bookkeeping (job/logs.py). The whole module is tests/unit/job/test_ray_job.py."""
from __future__ import annotations

import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import (
    logs as job_logs,
    result as job_result,
    stop as job_stop,
    submit as job_submit,
    manifest,
    run_files,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import JobError
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import RayApiError


# -- job/result.py ---------------------------------------------------------------------------
def test_outcomes_add_up_in_order():
    first = job_result.outcome(changed=False, fields={"a": 1, "b": 1}, actions=["x"], warnings=["w"])
    second = job_result.outcome(changed=True, fields={"b": 2}, actions=["y"], warnings=["w", "v"], job={"s": 1})
    total = job_result.combine([first, None, second])
    assert total["changed"] and total["fields"] == {"a": 1, "b": 2} and total["actions"] == ["x", "y"]
    assert total["warnings"] == ["w", "v"] and total["job"] == {"s": 1}


def test_job_fields_take_the_manifest_from_the_metadata():
    fields = job_result.job_fields({"submission_id": "e-attempt-2", "_attempt": 2, "status": "RUNNING",
                                    "start_time": 1796014000000, "message": "m" * 5000,
                                    "metadata": {"mtslime_manifest": "/r/manifests/e-attempt-2.json"}})
    assert fields["attempt"] == 2 and fields["start_time"] == "2026-11-30T04:46:40.000Z"
    assert fields["manifest_file"] == "/r/manifests/e-attempt-2.json" and len(fields["message"]) == 4003
    assert job_result.job_fields(None) == {}


def test_the_experiments_jobs_after_the_task_use_the_newest_records():
    ours = [{"submission_id": "e-attempt-1", "_attempt": 1, "status": "RUNNING", "start_time": 5}]
    jobs, active = job_result.experiment_jobs(ours, [{"submission_id": "e-attempt-1", "status": "STOPPED",
                                                      "start_time": 5},
                                                     {"submission_id": "e-attempt-2", "_attempt": 2,
                                                      "status": "PENDING"}])
    assert [(j["submission_id"], j["attempt"], j["status"]) for j in jobs] == [
        ("e-attempt-1", 1, "STOPPED"), ("e-attempt-2", 2, "PENDING")]
    assert active == ["e-attempt-2"]


# -- run_files -------------------------------------------------------------------------------
def test_run_files_are_written_once_and_predicted_in_check_mode(tmp_path):
    files = [{"path": str(tmp_path / "run" / "a.sh"), "content": "x\n", "mode": "0750"}]
    predicted = run_files.sync(files, check_mode=True)
    assert predicted["changed"] and not (tmp_path / "run").exists()
    assert predicted["actions"] == ["would write %s (content)" % files[0]["path"]]
    written = run_files.sync(files, check_mode=False)
    assert written["fields"]["files_changed"] == [files[0]["path"]]
    assert oct(os.stat(files[0]["path"]).st_mode & 0o777) == "0o750"
    assert not run_files.sync(files, check_mode=False)["changed"]
    files[0]["mode"] = "0700"
    again = run_files.sync(files, check_mode=False)
    assert again["actions"] == ["wrote %s (mode 0700)" % files[0]["path"]]
    assert again["diffs"][0]["after"] == "mode 0700\n"


def test_run_file_problems_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"files\[0\] \(/x\): mode 'rw' is not an octal mode like '0644'"):
        run_files.parse_mode("rw", "files[0] (/x)")
    with pytest.raises(JobError, match="files: files\\[0\\]: %s is a directory; give the path of a file" % tmp_path):
        run_files.sync([{"path": str(tmp_path), "content": ""}], check_mode=False)
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() != 0:
        with pytest.raises(JobError, match="cannot write"):
            run_files.sync([{"path": str(tmp_path / "ro" / "f"), "content": "x"}], check_mode=False)


# -- manifest --------------------------------------------------------------------------------
def test_manifest_commands_record_output_or_the_error():
    def run_command(argv):
        assert argv[:2] == ["/bin/bash", "-c"]
        return (0, " 2.5.0\n", "") if "torch" in argv[2] else (127, "", "sglang: not found\n")
    found = manifest.found_in_container(run_command, {"torch": "torch --v", "sglang": "sglang --v"})
    assert found == {"torch": "2.5.0", "sglang": {"rc": 127, "error": "sglang: not found"}}


def test_the_manifest_directory_and_a_write_that_fails(tmp_path):
    assert manifest.manifest_dir(None, [{"path": "/run/hostfile"}]) == "/run/manifests"
    assert manifest.manifest_dir(None, []) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(JobError, match="cannot write the manifest %s/m/x.json" % blocker):
        manifest.write(str(blocker / "m" / "x.json"), {})
    manifest.write(str(tmp_path / "m" / "x.json"), {"a": 1})
    assert (tmp_path / "m" / "x.json").read_text() == '{\n  "a": 1\n}\n'


# -- job/stop.py -----------------------------------------------------------------------------
class Client:
    def __init__(self, states, stop_error=None):
        self.states = states
        self.stop_error = stop_error
        self.stopped = []

    def stop_job(self, sid):
        if self.stop_error:
            raise self.stop_error
        self.stopped.append(sid)
        return True

    def get_job(self, sid):
        return {"submission_id": sid, "status": self.states[sid].pop(0) if len(self.states[sid]) > 1
                else self.states[sid][0]}


ACTIVE = [{"submission_id": "e-attempt-1", "status": "RUNNING", "_attempt": 1}]


def test_stop_waits_until_the_job_ended():
    client = Client({"e-attempt-1": ["RUNNING", "STOPPED"]})
    part = job_stop.stop(client, "http://h:8772", "e", ACTIVE, ACTIVE[0], 10, False, sleep=lambda s: None)
    assert part["changed"] and client.stopped == ["e-attempt-1"]
    assert part["fields"]["status"] == "STOPPED" and part["fields"]["attempt"] == 1
    assert part["actions"] == ["asked Ray to stop e-attempt-1", "e-attempt-1 is STOPPED"]


def test_stop_in_check_mode_and_with_nothing_active():
    client = Client({})
    part = job_stop.stop(client, "u", "e", ACTIVE, ACTIVE[0], 10, True)
    assert part["actions"] == ["would stop e-attempt-1 (RUNNING)"] and client.stopped == []
    assert job_stop.stop(client, "u", "e", [], None, 10, False)["fields"]["message"] == "no active job of experiment e"


def test_stop_failures_name_the_job_and_the_fix():
    clock = iter(range(0, 100, 5))
    with pytest.raises(JobError, match="e-attempt-1 still RUNNING 10s after the stop request .*raise stop_timeout"):
        job_stop.stop(Client({"e-attempt-1": ["RUNNING"]}), "u", "e", ACTIVE, None, 10, False,
                      sleep=lambda s: None, clock=lambda: next(clock))
    with pytest.raises(JobError, match="stopping e-attempt-1 failed: refused"):
        job_stop.stop(Client({}, stop_error=RayApiError("refused", status=500)), "u", "e", ACTIVE, None, 10, False)
    vanished = job_stop.stop(Client({"e-attempt-1": ["STOPPED"]}, stop_error=RayApiError("gone", status=404)), "u",
                             "e", ACTIVE, None, 10, False, sleep=lambda s: None)
    assert vanished["actions"][0] == "e-attempt-1 vanished before it could be stopped"


# -- job/submit.py helpers -------------------------------------------------------------------
def test_a_relative_working_dir_is_found_next_to_the_run_files(tmp_path):
    (tmp_path / "slime").mkdir()
    files = [{"path": str(tmp_path / "run" / "hostfile")}]
    assert job_submit.local_working_dir({"working_dir": "../slime"}, files) == str(tmp_path / "slime")
    assert job_submit.local_working_dir({"working_dir": "gcs://_ray_pkg_x.zip"}, files) is None
    with pytest.raises(JobError, match="runtime_env.working_dir nope is not a directory on this node"):
        job_submit.local_working_dir({"working_dir": "nope"}, files)


def test_the_metadata_names_experiment_attempt_manifest_and_resume():
    request = job_submit.Request("e", ["--x"], ["python3", "train.py"], metadata={"mtslime_cluster": "c", "n": 1})
    assert job_submit.job_metadata(request, 3, "/m/e-attempt-3.json", 5) == {
        "mtslime_cluster": "c", "n": "1", "mtslime_experiment": "e", "mtslime_attempt": "3",
        "mtslime_manifest": "/m/e-attempt-3.json", "mtslime_resumed_from": "5"}
    assert "mtslime_resumed_from" not in job_submit.job_metadata(request, 1, None, None)


# -- job/logs.py -------------------------------------------------------------------------------
def test_the_follower_files_and_its_python_command(tmp_path):
    follower = job_logs.Follower(lambda name: None, str(tmp_path / "logs" / "m.log"), "http://h:8772", "auto", 3)
    assert follower.attempt_file("e-attempt-1") == str(tmp_path / "logs" / "m.e-attempt-1.log")
    assert follower.kind()[0] == "python"
    cmd, env = follower.command("e-attempt-1", "python")
    assert cmd[1:] == [str(tmp_path / "logs" / ".m.follower.py"), "http://h:8772", "e-attempt-1",
                       str(tmp_path / "logs" / "m.e-attempt-1.log"), "3"] and env == {}
    assert 'USAGE = "usage: log_follower.py' in job_logs.follower_source()


def test_follower_problems_are_named(tmp_path):
    wanted_ray = job_logs.Follower(lambda name: "/bin/sed" if name == "sed" else None, str(tmp_path / "m.log"), "u",
                                   "ray", 3)
    with pytest.raises(ValueError, match="log_follower=ray but the ray CLI is not on PATH"):
        wanted_ray.kind()
    (tmp_path / "d.log").mkdir()
    follower = job_logs.Follower(lambda name: None, str(tmp_path / "d.log"), "u", "python", 3)
    with pytest.raises(JobError, match="log follower: log_file .*d.log is a directory"):
        job_logs.follow(follower, {"submission_id": "e-attempt-1", "status": "RUNNING"}, "python", True)


def test_no_follower_and_status_report_without_starting_one(tmp_path):
    follower = job_logs.Follower(lambda name: None, str(tmp_path / "m.log"), "u", "python", 3)
    job = {"submission_id": "e-attempt-1", "status": "RUNNING"}
    part = job_logs.follow(follower, job, "none", False)
    assert not part["changed"] and part["fields"]["follower"] == {"kind": None, "what": "none"}
    assert job_logs.status(follower, job)["fields"]["follower_pid"] is None
    assert not list(tmp_path.iterdir())
    assert not job_logs.alive(None, "x") and not job_logs.alive(os.getpid(), "no such token in my cmdline")
