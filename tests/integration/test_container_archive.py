"""The container role on an air-gapped node: the image comes from a `docker save` archive
on the controller, is loaded on the node and runs; a configured digest that the image
does not have stops the role before any container is created, naming the variable.

Runs the collection's site.yml (--tags container) on this machine's real Docker engine
with the locally built training-suite test image."""
from __future__ import annotations

import json

import pytest

from runner import run_playbook
from training_container import container_values, docker

pytestmark = pytest.mark.docker

IMAGE = "mtslime-test/training-suite:current"
ARCHIVED = "mtslime-test/from-archive:1"
NAME = "mtslime-archive-test"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    path = tmp_path_factory.mktemp("archive") / "training-suite.tar"
    docker("tag", IMAGE, ARCHIVED)
    docker("save", "-o", str(path), ARCHIVED)
    docker("rmi", ARCHIVED)
    yield path
    docker("rm", "-f", NAME, check=False)
    docker("rmi", ARCHIVED, check=False)


def container_play(tmp_path, **extra):
    values = container_values(NAME, ARCHIVED, tmp_path, **extra)
    return run_playbook("site.yml", "molecule/default/inventory", "--tags", "container", extravars=values)


def test_image_is_loaded_from_the_archive_and_runs(archive, tmp_path):
    run = container_play(tmp_path, container_image_archive=str(archive))
    assert run.rc == 0, run.stdout[-3000:]
    assert any("Load the image archive" in t for t in run.changed_tasks()), run.changed_tasks()
    state = json.loads(docker("inspect", NAME).stdout)[0]
    assert state["State"]["Running"] and state["Config"]["Image"] == ARCHIVED
    again = container_play(tmp_path, container_image_archive=str(archive))
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
    docker("rm", "-f", NAME)


def test_a_digest_the_image_does_not_have_stops_before_creating(archive, tmp_path):
    wrong = "sha256:" + "0" * 64
    run = container_play(tmp_path, container_image_archive=str(archive), container_image_digest=wrong)
    assert run.rc != 0
    text = " ".join(run.stdout.split())
    assert "container_image_digest %s" % wrong in text
    assert docker("inspect", NAME, check=False).returncode != 0, "no container was created"
