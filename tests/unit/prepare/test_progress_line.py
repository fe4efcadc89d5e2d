"""The last progress line of a producer's log (logs/scan.py last_progress_line), which async_progress shows as
"last:" and writes into the prepare lock as the holder's "doing" line: a log that ends in warnings shows the line
before them. The warnings are formatted by Python's own warnings module, as the converter's log has them."""
from __future__ import annotations

import json
import warnings

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import scan
from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock as storage_lease
from ansible_collections.mtslime.posttrain.plugins.modules import async_progress as module
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.prepare import lock_rules

TORCH = "/usr/local/lib/python3.10/dist-packages/torch"
WARNINGS = (
    warnings.formatwarning("`save_state_dict` is deprecated and will be removed in future versions. Please use "
                           "`save` instead.", FutureWarning, TORCH + "/distributed/checkpoint/state_dict_saver.py",
                           144, "warnings.warn(")
    + warnings.formatwarning("CUDA initialization: Found no NVIDIA driver on your system.", UserWarning,
                             TORCH + "/cuda/__init__.py", 129, "return torch._C._cuda_getDeviceCount() > 0")
    + "[rank0]:[W1201 10:00:41.512345678 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was "
      "not called before program exit, which can leak resources.\n"
    + "WARNING:megatron.core.utils:fused_indices_to_multihot has reached end of life.\n"
)


def test_the_warnings_are_what_python_prints():
    lines = WARNINGS.splitlines()
    assert lines[0].endswith("FutureWarning: `save_state_dict` is deprecated and will be removed in future "
                             "versions. Please use `save` instead.") and lines[1] == "  warnings.warn("
    assert lines[3] == "  return torch._C._cuda_getDeviceCount() > 0"


def test_a_log_ending_in_warnings_gives_the_line_before_them(tmp_path):
    log = tmp_path / "convert.log"
    log.write_text("loading model.safetensors\n\x1b[32msaving shard 3 of 8\x1b[0m\n" + WARNINGS)
    assert scan.last_line(str(log)) == "WARNING:megatron.core.utils:fused_indices_to_multihot has reached end of life."
    assert scan.last_progress_line(str(log)) == "saving shard 3 of 8"


def test_a_log_of_warnings_only_has_no_progress_line(tmp_path):
    log = tmp_path / "convert.log"
    log.write_text(WARNINGS + "\n\n")
    assert scan.last_progress_line(str(log)) is None


@pytest.mark.parametrize(
    "lines, progress",
    [
        (["[rank0]: saving shard 3"], True),
        (["  warnings.warn("], False),  # the header was cut off by the tail read
        (["x.py:3: UserWarning: y", "  z = f()"], False),
        (["x.py:3: UserWarning: y", "step 3"], True),
        (["  File \"x.py\", line 3, in f"], True),  # a traceback says where the program is
        (["W1201 10:00:02.000000 123 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 5"], False),
        (["Warning: the tokenizer has no pad token"], False),
        (["   "], False),
    ],
)
def test_is_progress(lines, progress):
    assert scan.is_progress(lines, len(lines) - 1) is progress


def test_the_lock_holders_doing_line_is_the_last_progress_line(tmp_path, run_module, monkeypatch):
    monkeypatch.setattr(module, "wrapper_alive", lambda jid: True)
    (tmp_path / "j1").write_text(json.dumps({"started": 1, "finished": 0, "ansible_job_id": "j1"}))
    log = tmp_path / "convert.log"
    log.write_text("loading model.safetensors\nsaving shard 3 of 8\n" + WARNINGS)
    lock = str(tmp_path / "ckpt.lock")
    storage_lease.acquire(lock, {"token": "r/n", "run_id": "run-1", "node": "node1"}, 300, "converting", now=0)
    result, failed = run_module(module, {"jid": "j1", "async_dir": str(tmp_path), "log_file": str(log),
                                         "lock": {"path": lock, "token": "r/n"}})
    assert not failed and result["progress"].endswith(", last: saving shard 3 of 8")
    assert result["last_line"].startswith("WARNING:megatron.core.utils")
    record = storage_lease.read(lock)
    shown = lock_rules.describe(record, record["renewed"])
    assert shown.startswith("held by run run-1 of node node1") and shown.endswith(", last: saving shard 3 of 8")
    assert "warnings.warn" not in shown
