"""site.yml under --check --diff on a bare node with this machine's Docker engine and the locally built
training-suite test image (its GPU programs are stand-ins): first with no container (the container play says it
would create it, the stages wait for it), then with only the container made (no data, no model, no checkpoint,
no Ray inside): every stage says what it would do inside it and none fails; check mode writes nothing under /data."""
from __future__ import annotations

import os

import pytest

from runner import run_playbook
from training_container import container_values, docker

pytestmark = pytest.mark.docker

IMAGE = "mtslime-test/training-suite:current"
NAME = "mtslime-checkmode-test"
STAGES = "data,model,convert,ray_head,train_job"


@pytest.fixture
def node(tmp_path):
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    docker("rm", "-f", NAME, check=False)
    (tmp_path / "data").mkdir()
    yield container_values(NAME, IMAGE, tmp_path)
    docker("rm", "-f", NAME, check=False)


def tree(root):
    return sorted(os.path.join(d, f) for d, dirs, files in os.walk(root) for f in dirs + files)


def oks(run, task):
    return [(e["event_data"].get("res") or {}).get("msg", "") for e in run.events
            if e.get("event") == "runner_on_ok" and task in (e["event_data"].get("task") or "")]


def test_check_diff_before_the_container_then_before_every_stage(node, tmp_path):
    inventory = "molecule/default/inventory"
    bare = run_playbook("site.yml", inventory, "--check", "--diff", "--skip-tags", "preflight", extravars=node)
    assert bare.rc == 0 and bare.failed_hosts() == {}, bare.stdout[-4000:]
    assert "would be created from %s" % IMAGE in " ".join(oks(bare, "Say what would change"))
    assert docker("inspect", NAME, check=False).returncode != 0, "check mode created no container"

    made = run_playbook("site.yml", inventory, "--tags", "container", extravars=node)
    assert made.rc == 0, made.stdout[-4000:]
    before = tree(tmp_path / "data")  # the container's run directories, mounted from /data/mtslime/runs
    check = run_playbook("site.yml", inventory, "--check", "--diff", "--tags", STAGES, "--skip-tags", "preflight",
                         extravars=node)
    assert check.rc == 0 and check.failed_hosts() == {}, check.stdout[-4000:]
    assert "/data/models/data/aime_2025.parquet" in oks(check, "Say which data checks wait for a real run")[0]
    assert oks(check, "Say which model check waits for a real run")
    assert oks(check, "Say which checkpoint check waits for a real run")
    assert len(oks(check, "Say why the job is not looked at")) == 1
    assert tree(tmp_path / "data") == before, "check mode wrote nothing under /data"
