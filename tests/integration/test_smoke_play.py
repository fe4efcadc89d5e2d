"""playbooks/smoke.yml on the training-suite test image (stand-ins for the GPU programs: the converter, torchrun,
torch, transformers; tests/standins/README.md): the 2-layer model is written and converted with the run's
converter, MUSA patch and backend, the checkpoint is judged and the node reported; a rerun and a check-mode run
change nothing; a converter that dies with a traceback is reported with its exception line and the scratch
directory moved aside. The run's data (the container's /data) is never touched.

Runs on this machine's real Docker engine (local node, container made by the container play)."""
from __future__ import annotations

import json
import os

import pytest

from runner import run_playbook
from training_container import container_values, docker
from smoke_checks import SCRATCH, assert_failure_reported, assert_passed, message

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("MTSLIME_TEST_SUITE_IMAGE", "mtslime-test/training-suite:current")
NAME = "mtslime-smoke-test"


def in_container(script, check=False):
    return docker("exec", NAME, "sh", "-c", script, check=check)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    docker("rm", "-f", NAME, check=False)
    root = tmp_path_factory.mktemp("smoke")
    (root / "data").mkdir()
    yield root
    docker("rm", "-f", NAME, check=False)


def smoke(root, *args):
    values = container_values(NAME, IMAGE, root, smoke_poll_interval=1)
    return run_playbook("playbooks/smoke.yml", "molecule/default/inventory", *args, extravars=values, timeout=600)


def test_smoke_converts_the_2_layer_model_with_the_musa_patch_and_backend(node):
    run = smoke(node)
    report = assert_passed(run, in_container)
    assert "stack: torch 2.5.0+standin (musa x8)" in report, "torch sees the MUSA devices through the patch dir"
    # what the stand-in image lacks, and the settings that work around it
    advice = message(run, "Say what the stack lacks")
    assert "transformer_engine: ModuleNotFoundError" in advice and "--transformer-impl" in advice, advice
    assert "apex: ModuleNotFoundError" in advice and "--no-gradient-accumulation-fusion" in advice, advice
    # the converter ran patched, with MUSA's process-group backend (the stand-in torch records each group)
    groups = [json.loads(line) for line in in_container("cat /tmp/mtslime-standin-process-groups.jsonl").stdout
              .splitlines()]
    assert {g["backend"] for g in groups[-2:]} == {"musa:mccl,cpu:gloo"} and len(groups) >= 2, groups
    # the run's /data holds only the empty directories the container play mounts (logs, manifests, tensorboard)
    files = [os.path.join(d, f) for d, _dirs, names in os.walk(node / "data") for f in names]
    assert files == [], "the smoke run wrote into the run's /data: %s" % files


def test_a_rerun_redoes_the_smoke_and_changes_nothing_and_check_mode_only_probes(node):
    run = smoke(node)
    assert_passed(run, in_container)
    assert run.changed_hosts() == {}, run.changed_tasks()
    check = smoke(node, "--check")
    assert check.rc == 0 and check.changed_hosts() == {}, check.stdout[-3000:]
    assert check.results("Probe the stack") and not check.results("Wait for the smoke conversion"), check.stdout
    assert in_container("test -d %s/mcore/release" % SCRATCH).returncode == 0, "check mode kept it"


def test_a_converter_that_dies_is_reported_with_its_exception_line_and_the_scratch_moved_aside(node):
    in_container("""echo '{"convert_import_error": "pydantic"}' > /etc/mtslime-standin.json""", check=True)
    try:
        run = smoke(node)
    finally:
        in_container("rm -f /etc/mtslime-standin.json")
    moved = assert_failure_reported(run, in_container, "ModuleNotFoundError: No module named 'pydantic'")
    # the next run passes again in a fresh scratch, the failed one kept
    assert_passed(smoke(node), in_container)
    assert in_container("test -d %s" % moved).returncode == 0, "the failed run's scratch is kept"
