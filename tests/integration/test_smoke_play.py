"""playbooks/smoke.yml on the training-suite test image (stand-ins for the GPU programs: the converter, torchrun,
torch, transformers; tests/standins/README.md): the 2-layer model is written and converted with the run's
converter, MUSA patch and backend, the checkpoint is judged and the node reported; a rerun and a check-mode run
change nothing; a converter that dies with a traceback is reported with its exception line and the scratch
directory moved aside. The run's data (the container's /data) is never touched.

Runs on this machine's real Docker engine (local node, container made by the container play)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from runner import run_playbook

pytestmark = pytest.mark.docker

IMAGE = os.environ.get("MTSLIME_TEST_SUITE_IMAGE", "mtslime-test/training-suite:current")
NAME = "mtslime-smoke-test"
SCRATCH = "/tmp/mtslime-smoke"


def docker(*args, check=True):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


def in_container(script, check=True):
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
    values = {
        "container_name": NAME,
        "container_image": IMAGE,
        "container_pull": "never",
        "container_privileged": False,
        "container_volumes": ["%s/data:/data" % root],
        "slime_render_dir": str(root / "rendered"),
        "smoke_poll_interval": 1,
    }
    return run_playbook("playbooks/smoke.yml", "molecule/default/inventory", *args, extravars=values, timeout=600)


def message(run, task):
    results = run.results(task)
    assert results, "no result of %r in:\n%s" % (task, run.stdout[-3000:])
    return " ".join(json.dumps(results[-1].get("msg")).split())


def test_smoke_converts_the_2_layer_model_with_the_musa_patch_and_backend(node):
    run = smoke(node)
    assert run.rc == 0, run.stdout[-4000:]
    report = message(run, "Report the smoke run")
    assert "smoke run passed: a 2-layer qwen3 model" in report, report
    assert "--nproc-per-node 2" in report and "--num-layers 2" in report and "--hidden-size 256" in report, report
    assert "checkpoint complete" in report, report
    # what the stand-in image lacks, and the settings that work around it
    advice = message(run, "Say what the stack lacks")
    assert "transformer_engine: ModuleNotFoundError" in advice and "--transformer-impl" in advice, advice
    assert "apex: ModuleNotFoundError" in advice and "--no-gradient-accumulation-fusion" in advice, advice
    # the converter ran patched, with MUSA's process-group backend (the stand-in torch records each group)
    groups = [json.loads(line) for line in in_container("cat /tmp/mtslime-standin-process-groups.jsonl").stdout
              .splitlines()]
    assert {g["backend"] for g in groups[-2:]} == {"musa:mccl,cpu:gloo"} and len(groups) >= 2, groups
    listing = in_container("ls %s %s/mcore %s/hf && cat %s/mcore/latest_checkpointed_iteration.txt"
                           % (SCRATCH, SCRATCH, SCRATCH, SCRATCH)).stdout.split()
    assert {"release", "model.safetensors", "tokenizer.json", "convert.log"} <= set(listing), listing
    assert listing[-1] == "release"
    # the run's /data holds only the empty directories the container play mounts (logs, manifests, tensorboard)
    files = [os.path.join(d, f) for d, _dirs, names in os.walk(node / "data") for f in names]
    assert files == [], "the smoke run wrote into the run's /data: %s" % files


def test_a_rerun_redoes_the_smoke_and_changes_nothing_and_check_mode_only_probes(node):
    run = smoke(node)
    assert run.rc == 0, run.stdout[-4000:]
    assert run.changed_hosts() == {}, run.changed_tasks()
    assert "smoke run passed" in message(run, "Report the smoke run")
    check = smoke(node, "--check")
    assert check.rc == 0 and check.changed_hosts() == {}, check.stdout[-3000:]
    assert not check.results("Convert it with the run's converter") or all(
        r.get("skipped") for r in check.results("Convert it with the run's converter"))
    assert in_container("test -d %s/mcore/release" % SCRATCH, check=False).returncode == 0, "check mode kept it"


def test_a_converter_that_dies_is_reported_with_its_exception_line_and_the_scratch_moved_aside(node):
    in_container("""echo '{"convert_import_error": "pydantic"}' > /etc/mtslime-standin.json""")
    try:
        run = smoke(node)
    finally:
        in_container("rm -f /etc/mtslime-standin.json")
    assert run.rc != 0
    text = message(run, "Report the failed smoke run")
    assert "ModuleNotFoundError: No module named 'pydantic'" in text, text
    assert 'failed at \\"Fail when the converter failed\\"' in text or "Fail when the converter failed" in text, text
    moved = text.split("The scratch was moved to ")[1].split(" ")[0]
    assert moved.startswith(SCRATCH + ".failed-"), text
    assert "Lacks: transformer_engine" in text, text
    kept = in_container("ls %s && grep -h ModuleNotFoundError %s/convert.log" % (moved, moved)).stdout
    assert "hf" in kept and "No module named 'pydantic'" in kept, kept
    assert in_container("test -e %s" % SCRATCH, check=False).returncode != 0
    # the next run passes again in a fresh scratch, the failed one kept
    again = smoke(node)
    assert again.rc == 0, again.stdout[-3000:]
    assert in_container("test -d %s" % moved, check=False).returncode == 0
