"""module_utils/supervise/docker_api.py against this machine's real Docker engine (/var/run/docker.sock): a
container of the training-suite test image running `sleep infinity` is inspected, exec'd into, stopped and started
again through the API alone; the container is removed at the end."""
from __future__ import annotations

import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise.docker_api import DockerError, Engine
from training_container import docker

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("MTSLIME_TEST_SUITE_IMAGE", "mtslime-test/training-suite:current")
NAME = "mtslime-docker-api-test"
UID = 'while read key value; do [ "$key" = Uid: ] && set -- $value && echo "$FOO $1"; done < /proc/self/status; true'


@pytest.fixture(scope="module")
def container():
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    docker("rm", "-f", NAME, check=False)
    docker("run", "-d", "--name", NAME, IMAGE, "sleep", "infinity")
    yield NAME
    docker("rm", "-f", NAME, check=False)


def test_inspect_exec_stop_and_start_through_the_engine_api(container):
    engine = Engine()
    state = engine.inspect(container)
    assert state["Name"] == "/" + container and state["State"]["Running"] is True
    result = engine.exec_run(container, ["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert result == (3, "out\n", "err\n")
    assert engine.exec_run(container, ["sh", "-c", UID], timeout=30, env={"FOO": "bar"}, user="65534") == (
        0, "bar 65534\n", "")
    docker("stop", "-t", "0", container)
    assert engine.inspect(container)["State"]["Running"] is False
    assert engine.start(container) is True
    assert engine.inspect(container)["State"]["Running"] is True
    assert engine.start(container) is False
    assert engine.inspect("mtslime-docker-api-no-such-container") is None


def test_an_exec_past_its_timeout_is_reported(container):
    with pytest.raises(DockerError, match="timed out after 1 s.*may still be running"):
        Engine().exec_run(container, ["sleep", "30"], timeout=1)


def test_exec_in_a_missing_container_fails_with_the_engine_message():
    with pytest.raises(DockerError) as caught:
        Engine().exec_run("mtslime-docker-api-no-such-container", ["true"], timeout=30)
    assert caught.value.status == 404 and "No such container: mtslime-docker-api-no-such-container" in str(caught.value)
