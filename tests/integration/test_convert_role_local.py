"""The convert role end to end on this machine, without Docker (tests/integration/playbooks/stage_local.yml): two
local nodes share one storage; the conversion runs the stand-ins of the GPU programs, torchrun and
convert_hf_to_torch_dist.py with the stand-in torch (tests/standins/rootfs), from the controller's PATH and
PYTHONPATH. The first node converts through the prepare flow (an async producer: its job recorded in the lock,
waited for with progress), the other checks the checkpoint; a rerun changes nothing; check mode changes nothing."""
from __future__ import annotations

import os
import socket
import sys

from local_stage import PLAYBOOK, inventory, ran
from runner import REPO, run_playbook

sys.path.insert(0, os.path.join(REPO, "tests", "unit", "artifacts"))
from test_hf_model_check import MODEL_ARGS, make_model  # noqa: E402

ROOTFS = os.path.join(REPO, "tests", "standins", "rootfs")


def test_converted_once_through_the_prepare_flow_then_converged(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", ROOTFS + "/usr/local/bin" + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("PYTHONPATH", ROOTFS + "/opt/venv/lib/python3.11/site-packages")
    monkeypatch.setenv("MTSLIME_STANDIN_CUDA", "1")
    monkeypatch.setenv("MTSLIME_STANDIN_CONTROL", str(tmp_path / "no-control.json"))
    monkeypatch.setenv("MTSLIME_STANDIN_CONVERT_SECONDS", "2")
    with socket.socket() as sock:  # torchrun's rendezvous port: a free one, other runs may share this machine
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = tmp_path / "models" / "Qwen3-8B_torch_dist"
    hosts = inventory(tmp_path, "convert", {
        "slime_dir": ROOTFS + "/home/slime", "slime_megatron_dir": ROOTFS + "/home/Megatron-LM",
        "slime_musa_patch_dir": ROOTFS + "/home/megatron-lm-musa-patch/musa_patch",
        "slime_hf_model_dir": make_model(str(tmp_path / "models" / "Qwen3-8B")),
        "slime_mcore_dir": str(target), "slime_model_args": MODEL_ARGS,
        "convert_script": ROOTFS + "/home/slime/tools/convert_hf_to_torch_dist.py", "convert_nproc_per_node": 1,
        "convert_log_file": str(tmp_path / "convert.log"), "convert_master_port": port, "convert_extra_args": [],
        "convert_poll_interval": 1,
        # a CUDA node: the converter runs unpatched (the MUSA patch would rewrite the stand-in's file)
        "slime_accelerator_profile": {"process_group_backend": "nccl", "patch_converter": False}})

    check = run_playbook(PLAYBOOK, hosts, "--check", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert not target.exists()
    said = ran(check, "n1", "Say what will be done")[0]["event_data"]["res"]["msg"]
    assert "it would be converted with `torchrun" in said
    waiting = [ran(check, host, "Say which checkpoint check waits for a real run") for host in ("n1", "n2")]
    assert [len(w) for w in waiting] == [1, 1]
    assert "because n1 would convert it first" in waiting[1][0]["event_data"]["res"]["msg"]

    first = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert first.rc == 0, first.stdout[-3000:]
    assert len(ran(first, "n1", "Start the conversion")) == 1 and not ran(first, "n2", "Start the conversion")
    assert ran(first, "n1", "Note the producer in the lock"), "the async job is recorded for a run taking over"
    assert [r["state"] for r in first.results("Check the checkpoint in place")] == ["complete", "complete"]
    assert (target / "latest_checkpointed_iteration.txt").read_text().strip() == "release"
    assert sorted(os.listdir(tmp_path / "models")) == ["Qwen3-8B", "Qwen3-8B_torch_dist"], "no lock, no temp"

    again = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
    assert not ran(again, "n1", "Take the lock")
    check = run_playbook(PLAYBOOK, hosts, "--check", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert not ran(check, "n1", "Say which checkpoint check waits for a real run")
