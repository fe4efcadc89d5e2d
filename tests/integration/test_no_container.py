"""status.yml, stop.yml, teardown.yml and render.yml on a node whose training container does not exist (nothing run
yet, or removed), does not run (exited), or runs without Ray: each says so and ends well, instead of failing to reach
the container. The training container is the locally built training-suite test image running `sleep infinity`
(no Ray in it); the node is this machine (the molecule default inventory)."""
from __future__ import annotations

import json
import os
import subprocess

import jsonschema
import pytest

from runner import REPO, run_playbook

pytestmark = pytest.mark.docker

IMAGE = "mtslime-test/training-suite:current"
NAME = "mtslime-no-container-test"
INVENTORY = "molecule/default/inventory"
SCHEMA = json.load(open(os.path.join(REPO, "docs", "status.schema.json")))


def docker(*args, check=True):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def container():
    """The container's name; none exists when the test starts, and none is left behind."""
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    docker("rm", "-f", NAME, check=False)
    yield NAME
    docker("rm", "-f", NAME, check=False)


def start(name):
    docker("run", "-d", "--name", name, IMAGE, "sleep", "infinity")


def play(playbook, tmp_path, *args, **extra):
    values = {"container_name": NAME, "slime_render_dir": str(tmp_path / "rendered"),
              "container_archive_dir": str(tmp_path / "archive")}
    values.update(extra)
    return run_playbook(playbook, INVENTORY, *args, extravars=values, timeout=600)


def messages(run, task):
    """The messages of a task's results (of each item, for a loop)."""
    found = []
    for result in run.results(task):
        found += [item.get("msg") for item in result["results"]] if "results" in result else [result.get("msg")]
    return found


def status(tmp_path):
    run = play("playbooks/status.yml", tmp_path)
    assert run.rc == 0 and not run.failed_hosts(), run.stdout[-3000:]
    data = json.load(open(tmp_path / "rendered" / "status.json"))
    jsonschema.validate(data, SCHEMA)
    return run, data["clusters"][0]


def test_without_a_container_status_stop_teardown_and_render_say_so(container, tmp_path):
    run, cluster = status(tmp_path)
    line = "localhost: no job NONE, step -, reward -, pass@1 -, eval -, tokens/s -, no training container on localhost"
    assert messages(run, "Print one line per cluster") == [line]
    assert cluster["containers"] == {"localhost": "absent"} and cluster["line"] == line
    assert cluster["job"]["status"] == "NONE" and cluster["job"]["error"] is None
    assert cluster["job"]["message"] == "no training container on localhost: no Ray and no job run there"
    assert cluster["last"]["error"] == "the log (train_progress) was not read (no training container on localhost)"

    stop = play("playbooks/stop.yml", tmp_path)
    assert stop.rc == 0, stop.stdout[-3000:]
    assert messages(stop, "Say that there is nothing to stop") == [
        "node localhost has no training container %s: no Ray and no training job run there, nothing to stop" % NAME]

    down = play("playbooks/teardown.yml", tmp_path, teardown_ray=True, teardown_container=True)
    assert down.rc == 0 and down.changed_hosts() == {}, down.stdout[-3000:]
    assert messages(down, "Say that there is no Ray to stop") == [
        "node localhost has no training container %s: no Ray runs there, nothing to stop" % NAME]
    assert messages(down, "Say that there is no container to remove") == [
        "node localhost has no training container %s: nothing to remove" % NAME]

    render = play("playbooks/render.yml", tmp_path, render_dir=str(tmp_path / "review"))
    assert render.rc == 0, render.stdout[-3000:]
    assert (tmp_path / "review" / "localhost" / "hostfile").exists()
    assert docker("inspect", NAME, check=False).returncode != 0, "nothing created a container"


def test_an_exited_container_has_no_job_and_teardown_removes_it(container, tmp_path):
    start(container)
    docker("stop", "-t", "1", container)
    run, cluster = status(tmp_path)
    assert cluster["containers"] == {"localhost": "exited"} and cluster["job"]["status"] == "NONE"
    assert cluster["line"].endswith(", the training container of localhost is exited, not running")

    stop = play("playbooks/stop.yml", tmp_path)
    assert stop.rc == 0, stop.stdout[-3000:]
    assert messages(stop, "Say that there is nothing to stop") == [
        "the training container %s of node localhost is exited, not running: no Ray and no training job run there, "
        "nothing to stop" % NAME]

    down = play("playbooks/teardown.yml", tmp_path, teardown_ray=True, teardown_container=True)
    assert down.rc == 0, down.stdout[-3000:]
    assert docker("inspect", container, check=False).returncode != 0, "the container was removed"


def test_a_running_container_without_ray(container, tmp_path):
    start(container)
    run, cluster = status(tmp_path)
    assert cluster["containers"] == {"localhost": "running"} and cluster["job"]["status"] == "UNKNOWN"
    assert "cannot list the jobs at http://127.0.0.1:8772" in cluster["job"]["error"]

    stop = play("playbooks/stop.yml", tmp_path)
    assert stop.rc == 0, stop.stdout[-3000:]
    assert messages(stop, "Say what the stop found") == [
        "cluster localhost: no Ray runs on this node (no Ray process, nothing answers at http://127.0.0.1:8772): no "
        "job can run, nothing to stop"]
    assert docker("inspect", "-f", "{{.State.Running}}", container).stdout.strip() == "true"
