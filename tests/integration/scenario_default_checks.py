"""Checks of the molecule `default` scenario (the guide's single node), run by its verify
step against the live test bed: real Docker, real Ray in the training container, and the
stand-in train.py / converter / mthreads-gmi (tests/standins/, they replace the GPU programs).

Run by molecule/default/verify.yml; not collected by a plain `pytest tests/integration`
(the file name does not start with test_), because it needs the scenario converged."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import time
import urllib.request

import pytest

from runner import run_playbook

INVENTORY = "molecule/default/inventory"
ROOT = "/tmp/mtslime-molecule-default"
DATA = ROOT + "/data"
SAVE = DATA + "/checkpoints/Qwen3-8B_slime"
CONTROL = DATA + "/standin-control.json"
FIXTURES = ROOT + "/fixtures"
API = "http://127.0.0.1:8772"
CONTAINER = "slime_rl"
LOGS = "/home/slime/musa_example/qwen_32b_sherry/logs"

pytestmark = pytest.mark.docker


def jobs():
    with urllib.request.urlopen(API + "/api/jobs/", timeout=10) as answer:
        return json.load(answer)


def ours():
    return sorted((j for j in jobs() if (j.get("metadata") or {}).get("mtslime_experiment") == "qwen3-8B"),
                  key=lambda j: j.get("start_time") or 0)


def active():
    return [j for j in ours() if j["status"] in ("PENDING", "RUNNING")]


def wait(predicate, timeout=120, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(1)
    raise AssertionError("timed out waiting for " + what)


def in_container(command):
    return subprocess.run(["docker", "exec", CONTAINER, "bash", "-c", command],
                          capture_output=True, text=True, check=False)


def tracker():
    with open(os.path.join(SAVE, "latest_checkpointed_iteration.txt")) as handle:
        return int(handle.read().strip())


def control(**knobs):
    """The stand-ins' knobs: the job reads /data/standin-control.json (runtime_env), the
    converter run by the convert role reads the container's default /etc/mtslime-standin.json."""
    with open(CONTROL, "w") as handle:
        json.dump(knobs, handle)
    subprocess.run(["docker", "exec", "-i", CONTAINER, "bash", "-c", "cat > /etc/mtslime-standin.json"],
                   input=json.dumps(knobs), text=True, check=False)


def site(*args):
    return run_playbook("site.yml", INVENTORY, *args)


def first_step_of(submission_id):
    log = in_container("grep -m1 -oE 'step [0-9]+:' %s/qwen3-8B.%s.log" % (LOGS, submission_id)).stdout
    return int(log.split()[1].rstrip(":")) if log else None


@pytest.fixture(autouse=True)
def no_knobs():
    control()
    yield
    control()


def test_rerun_changes_nothing_and_keeps_the_same_job():
    before = wait(active, what="an active job")
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    assert run.failed_hosts() == {}
    assert run.changed_hosts() == {}, run.changed_tasks()
    assert [j["submission_id"] for j in active()] == [j["submission_id"] for j in before]


def test_check_mode_on_the_converged_node_predicts_no_change():
    run = site("--check", "--diff")
    assert run.rc == 0, run.stdout[-3000:]
    assert run.changed_hosts() == {}, run.changed_tasks()


def test_status_playbook_shows_the_progress():
    wait(lambda: tracker() >= 2, what="a first checkpoint")
    run = run_playbook("playbooks/status.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    line = [item["msg"] for r in run.results("Print one line per cluster") for item in r.get("results", [r])
            if "msg" in item]
    assert line and "RUNNING" in line[0] and "step " in line[0] and "reward " in line[0], line
    with open(ROOT + "/rendered/status.json") as handle:
        status = json.load(handle)
    assert status[0]["step"] is not None and status[0]["manifest"]


def test_crash_then_rerun_resumes_after_the_last_checkpoint():
    job = wait(active, what="an active job")[-1]["submission_id"]
    step_now = wait(lambda: int(in_container(
        "grep -oE 'step [0-9]+:' %s/qwen3-8B.log | tail -1 | grep -oE '[0-9]+'" % LOGS).stdout or 0),
        what="a step line")
    control(crash_at_step=step_now + 5)
    wait(lambda: next((j for j in ours() if j["submission_id"] == job and j["status"] == "FAILED"), None),
         what="the crash")
    control()
    last = tracker()
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    new = wait(active, what="the new attempt")[-1]["submission_id"]
    assert new != job and new.startswith("qwen3-8B-attempt-")
    first = wait(lambda: first_step_of(new), what="the new attempt's first step")
    assert first == last + 1, (first, last)
    assert in_container("test -s %s/qwen3-8B.%s.log" % (LOGS, job)).returncode == 0, "the crashed attempt's log was kept"


def manifests():
    return set(in_container("ls /home/slime/musa_example/qwen_32b_sherry/manifests").stdout.split())


def test_killed_head_comes_back_and_the_job_resumes():
    before = manifests()
    assert in_container("ray stop --force").returncode == 0
    run = site()
    assert run.rc == 0, run.stdout[-3000:]
    assert any("Start the Ray head" in t for t in run.changed_tasks()), run.changed_tasks()
    job = wait(active, what="a job on the new head")[-1]
    # Ray forgot the earlier attempts; the new one still gets a new number and its own files.
    assert "%s.json" % job["submission_id"] not in before
    assert "%s.json" % job["submission_id"] in manifests()
    assert job["metadata"].get("mtslime_resumed_from") is not None


def test_conversion_killed_half_way_then_rerun():
    mcore = DATA + "/LLMs/MCORE/Qwen3-8B_slime"
    kept = mcore + ".kept-by-test"
    os.rename(mcore, kept)
    try:
        control(convert_die_at="mid_shards")
        run = site("--tags", "convert")
        assert run.rc != 0
        assert "the conversion failed" in run.stdout and "First error in" in run.stdout
        aside = glob.glob(mcore + ".converting.interrupted-*")
        assert aside and "moved to " + aside[0].replace(DATA, "/data") in run.stdout.replace("\n", " ")
        control()
        again = site("--tags", "convert")
        assert again.rc == 0, again.stdout[-3000:]
        assert os.path.exists(mcore + "/release/metadata.json")
        assert open(mcore + "/latest_checkpointed_iteration.txt").read() == "release"
        assert glob.glob(mcore + ".converting.interrupted-*"), "the interrupted output is kept aside"
        third = site("--tags", "convert")
        assert third.rc == 0 and third.changed_hosts() == {}, third.changed_tasks()
    finally:
        control()
        if not os.path.exists(mcore):
            os.rename(kept, mcore)


def test_download_cut_half_way_then_rerun_completes():
    model = DATA + "/models/Qwen3-8B"
    os.rename(model, model + ".kept-by-test")
    serve_control = os.path.join(FIXTURES, ".serve-control.json")
    try:
        # The first response is cut after 500 bytes, then the server fails every request,
        # so this run ends with a partial download.
        with open(serve_control, "w") as handle:
            json.dump({"cut_after_bytes": 500, "cut_times": 1, "status_after_cuts": 503}, handle)
        run = site("--tags", "model")
        assert run.rc != 0
        assert "downloading Qwen/Qwen3-8B from http failed" in run.stdout
        assert os.path.isdir(model + ".partial") and not os.path.exists(model)
        assert glob.glob(model + ".partial/*.part"), "a partially downloaded file is kept for the rerun"
        os.remove(serve_control)
        again = site("--tags", "model")
        assert again.rc == 0, again.stdout[-3000:]
        assert os.path.exists(model + "/config.json") and not os.path.exists(model + ".partial")
        check = site("--tags", "model,convert")
        assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    finally:
        if os.path.exists(serve_control):
            os.remove(serve_control)
        if not os.path.exists(model):
            os.rename(model + ".kept-by-test", model)


def container_id():
    return subprocess.run(["docker", "inspect", "-f", "{{.Id}}", CONTAINER], capture_output=True, text=True).stdout.strip()


def test_changed_container_flags_never_kill_a_running_job():
    job = wait(active, what="an active job")[-1]["submission_id"]
    before = container_id()
    run = site("-e", "container_shm_size=64g")
    assert run.rc != 0
    text = " ".join(run.stdout.split())
    assert "differs from the configuration" in text and job in text and "container_recreate: force" in text
    assert container_id() == before
    assert [j["submission_id"] for j in active()] == [job]


def test_stop_playbook_stops_the_job_and_keeps_everything():
    job = wait(active, what="an active job")[-1]["submission_id"]
    checkpoints = sorted(os.listdir(SAVE))
    run = run_playbook("playbooks/stop.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    assert next(j for j in ours() if j["submission_id"] == job)["status"] == "STOPPED"
    assert set(checkpoints) <= set(os.listdir(SAVE))
    again = run_playbook("playbooks/stop.yml", INVENTORY)
    assert again.rc == 0 and again.changed_hosts() == {}
    urllib.request.urlopen(API + "/api/version", timeout=5).read()  # Ray stays up
    resumed = site()
    assert resumed.rc == 0
    assert wait(active, what="the resumed job")[-1]["submission_id"] != job
