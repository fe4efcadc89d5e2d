"""The model role end to end on this machine, without Docker (tests/integration/playbooks/stage_local.yml): two
local nodes share one storage and the model comes from a directory on the node (model_source: node_dir). The
first node copies it through the prepare flow (lock, look again, produce, check, move, release), the other checks
it; a rerun changes nothing and skips the work in one task per node; check mode changes nothing either way; a
model that fails its check (a truncated shard) is copied again and the bad one moved aside, never deleted."""
from __future__ import annotations

import os
import re
import sys

from local_stage import PLAYBOOK, inventory, ran
from runner import REPO, run_playbook

sys.path.insert(0, os.path.join(REPO, "tests", "unit", "artifacts"))
from test_hf_model_check import MODEL_ARGS, make_model  # noqa: E402


def models(tmp_path):
    return sorted(os.listdir(tmp_path / "models"))


def test_copied_once_through_the_prepare_flow_then_converged_and_a_bad_model_moved_aside(tmp_path):
    hosts = inventory(tmp_path, "model", {
        "slime_hf_model_dir": str(tmp_path / "models" / "Qwen3-8B"), "slime_model_args": MODEL_ARGS,
        "model_source": "node_dir", "model_id": "Qwen/Qwen3-8B", "model_poll_interval": 1,
        "model_source_dir": make_model(str(tmp_path / "source" / "Qwen3-8B"))})
    target = tmp_path / "models" / "Qwen3-8B"

    check = run_playbook(PLAYBOOK, hosts, "--check", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert "Would fetch Qwen/Qwen3-8B from node_dir" in check.stdout and not target.exists()
    waiting = [ran(check, host, "Say which model check waits for a real run") for host in ("n1", "n2")]
    assert [len(w) for w in waiting] == [1, 1]
    assert "because n1 would fetch it first" in waiting[1][0]["event_data"]["res"]["msg"]

    first = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert first.rc == 0, first.stdout[-3000:]
    assert len(ran(first, "n1", "Copy the model from a directory on the node")) == 1
    assert not ran(first, "n2", "Take the lock"), "the storage's other node only checks"
    assert [len(ran(first, host, "Check the model that was downloaded")) for host in ("n1", "n2")] == [1, 1]
    assert models(tmp_path) == ["Qwen3-8B"], "no lock, no temporary directory left"
    assert "it is missing or fails its check" in first.stdout

    again = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
    assert not [e for e in again.events if "mtslime.posttrain.prepare" in (e.get("event_data") or {}).get("role", "")]
    check = run_playbook(PLAYBOOK, hosts, "--check", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert not ran(check, "n2", "Say which model check waits for a real run")

    shard = target / "model-00002-of-00003.safetensors"
    size = shard.stat().st_size
    os.truncate(shard, size - 8)
    third = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert third.rc == 0, third.stdout[-3000:]
    aside = [name for name in models(tmp_path) if re.match(r"Qwen3-8B\.failed-check-", name)]
    assert len(aside) == 1 and models(tmp_path) == sorted(["Qwen3-8B"] + aside), models(tmp_path)
    assert shard.stat().st_size == size and (tmp_path / "models" / aside[0] / shard.name).stat().st_size == size - 8
    assert "moved aside: %s -> " % target in third.stdout
