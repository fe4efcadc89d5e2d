"""storage_lock: take, retake, wait, time out, take over a stale lock, release."""
from __future__ import annotations

import json
import os
import time

from ansible_collections.mtslime.posttrain.plugins.modules import storage_lock as module


def args(tmp_path, **extra):
    base = {"path": str(tmp_path / ".model.lock"), "owner": "node1-run1", "timeout": 1, "interval": 1}
    base.update(extra)
    return base


def test_take_and_retake(tmp_path, run_module):
    result, failed = run_module(module, args(tmp_path))
    assert not failed and result["changed"] and result["holder"]["owner"] == "node1-run1"
    again, failed = run_module(module, args(tmp_path))
    assert not failed and not again["changed"]


def test_held_by_another_times_out_naming_the_holder(tmp_path, run_module):
    run_module(module, args(tmp_path, owner="node2-run9"))
    result, failed = run_module(module, args(tmp_path))
    assert failed
    assert "held by node2-run9" in result["msg"] and "remove" in result["msg"] and ".model.lock" in result["msg"]


def test_stale_lock_is_taken_over(tmp_path, run_module):
    run_module(module, args(tmp_path, owner="dead-run"))
    record = tmp_path / ".model.lock" / "owner.json"
    data = json.loads(record.read_text())
    data["since"] = time.time() - 100
    record.write_text(json.dumps(data))
    result, failed = run_module(module, args(tmp_path, stale_after=10))
    assert not failed and result["taken_over"]["owner"] == "dead-run"
    assert json.loads(record.read_text())["owner"] == "node1-run1"


def test_release_only_by_the_owner(tmp_path, run_module):
    run_module(module, args(tmp_path))
    other, _ = run_module(module, args(tmp_path, owner="someone", state="released"))
    assert not other["changed"] and os.path.isdir(tmp_path / ".model.lock")
    mine, _ = run_module(module, args(tmp_path, state="released"))
    assert mine["changed"] and not os.path.exists(tmp_path / ".model.lock")
    again, _ = run_module(module, args(tmp_path, state="released"))
    assert not again["changed"]


def test_check_mode_takes_nothing(tmp_path, run_module):
    result, failed = run_module(module, args(tmp_path), check_mode=True)
    assert not failed and result["changed"] and not os.path.exists(tmp_path / ".model.lock")


def test_missing_parent_directory(tmp_path, run_module):
    result, failed = run_module(module, {"path": str(tmp_path / "no" / ".lock"), "owner": "x"})
    assert failed and "does not exist" in result["msg"]
