"""playbooks/smoke.yml with container_enabled: false on a CUDA node (this machine, local connection): slime,
Megatron, torch, torchrun and transformers are the stand-ins of tests/standins (the stand-in torch simulates CUDA,
MTSLIME_STANDIN_CUDA=1), carried beside the run as on a machine without Docker. The converter is not patched
(CUDA) and its process group is NCCL; the model's config.json is read; nothing of slime is written to. No Docker."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from runner import run_playbook
from smoke_checks import assert_failure_reported, assert_passed, message

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOTFS = os.path.join(REPO, "tests", "standins", "rootfs")
SITE = os.path.join(ROOTFS, "opt", "venv", "lib", "python3.11", "site-packages")


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node without Docker: the stand-in slime copied beside the run, the stand-ins on PATH and PYTHONPATH."""
    shutil.copytree(os.path.join(ROOTFS, "home", "slime"), str(tmp_path / "slime"))
    (tmp_path / "model").mkdir()
    make = os.path.join(REPO, "tests", "fixtures", "make_hf_model.py")
    subprocess.run(["python3", make, str(tmp_path / "model")], check=True, capture_output=True)
    monkeypatch.setenv("PATH", os.path.join(ROOTFS, "usr", "local", "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("PYTHONPATH", SITE)
    monkeypatch.setenv("MTSLIME_STANDIN_CUDA", "1")
    monkeypatch.setenv("MTSLIME_STANDIN_PG_LOG", str(tmp_path / "process-groups.jsonl"))
    monkeypatch.setenv("MTSLIME_STANDIN_CONTROL", str(tmp_path / "control.json"))
    return tmp_path


def node_values(node, **extra):
    """Extra vars for this machine as a CUDA node without a container: slime and the model under `node`,
    Megatron from the stand-ins."""
    return dict({
        "container_enabled": False,
        "slime_accelerator": "cuda",
        "slime_dir": str(node / "slime"),
        "slime_megatron_dir": os.path.join(ROOTFS, "home", "Megatron-LM"),
        "slime_hf_model_dir": str(node / "model"),
        "slime_render_dir": str(node / "rendered"),
    }, **extra)


def smoke(node, *args):
    values = node_values(node, smoke_dir=str(node / "scratch"), smoke_poll_interval=1)
    return run_playbook("playbooks/smoke.yml", "molecule/default/inventory", *args, extravars=values, timeout=300)


def on_node(script):
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)


def test_smoke_on_a_cuda_node_without_a_container(node):
    run = smoke(node)
    assert_passed(run, on_node, config_from=str(node / "model" / "config.json"), scratch=str(node / "scratch"))
    assert run.changed_hosts() == {}, run.changed_tasks()
    assert "stack: torch 2.5.0+standin (cuda x8)" in message(run, "Report the smoke run")
    with open(node / "process-groups.jsonl") as handle:
        groups = [json.loads(line) for line in handle]
    assert len(groups) == 2 and {g["backend"] for g in groups} == {"nccl"}, groups
    converter = os.path.join("tools", "convert_hf_to_torch_dist.py")
    with open(node / "slime" / converter) as mine, open(os.path.join(ROOTFS, "home", "slime", converter)) as orig:
        assert mine.read() == orig.read(), "not patched on CUDA"


def test_a_failure_on_the_node_moves_the_scratch_aside(node):
    (node / "control.json").write_text(json.dumps({"convert_import_error": "pydantic"}))
    run = smoke(node)
    assert_failure_reported(run, on_node, "ModuleNotFoundError: No module named 'pydantic'",
                            scratch=str(node / "scratch"))


def test_the_conversion_itself_runs_through_the_same_start(node):
    """site.yml --tags convert on the same node: the real conversion starts through roles/convert/tasks/start.yml
    too, with the inventory's model, save directory, log and port."""
    values = node_values(node, slime_mcore_dir=str(node / "mcore" / "Qwen3-8B_slime"),
                         convert_log_file=str(node / "convert.log"), convert_poll_interval=1)
    run = run_playbook("site.yml", "molecule/default/inventory", "--tags", "convert", extravars=values, timeout=300)
    assert run.rc == 0, run.stdout[-4000:]
    assert (node / "mcore" / "Qwen3-8B_slime" / "release").is_dir()
    with open(node / "convert.log") as handle:
        assert "converting %s into %s" % (node / "model", node / "mcore" / "Qwen3-8B_slime.converting") in handle.read()


def test_a_smoke_dir_that_is_not_a_scratch_is_refused_and_left_where_it_is(node):
    (node / "scratch").mkdir()
    (node / "scratch" / "notes.txt").write_text("mine")
    run = smoke(node)
    assert run.rc != 0
    text = message(run, "Report the failed smoke run")
    assert "is not a smoke run's scratch directory" in text and "smoke_dir" in text, text
    assert "The scratch was moved" not in text, text
    assert (node / "scratch" / "notes.txt").read_text() == "mine"
    assert not [p for p in os.listdir(node) if p.startswith("scratch.failed-")]
