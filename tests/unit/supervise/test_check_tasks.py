"""The check modules as supervisor tasks: dataset_check, hf_model_check, mcore_checkpoint and fanout's probe run by
tasks.run from a lib.zip built by bundle.py, each in a process of its own, on the inputs their own unit tests build,
give the result the module gives in-process (the conftest's run_module) on the same arguments."""
from __future__ import annotations

import json
import os

import pytest
from artifacts.test_dataset_check import verl_rows, write_jsonl, write_parquet
from artifacts.test_hf_model_check import MODEL_ARGS, make_model
from checkpoint.test_mcore_checkpoint import conversion, interrupted
from fanout.test_fanout import PIECE, artifact

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import bundle, tasks
from ansible_collections.mtslime.posttrain.plugins.modules import (
    dataset_check,
    fanout,
    hf_model_check,
    mcore_checkpoint,
)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("supervisor") / "lib.zip"
    path.write_bytes(bundle.build(bundle.payload_entries()))
    return str(path)


def from_library(library, name, args):
    """tasks.run's result less what only a real AnsibleModule run adds (the module's arguments echoed back)."""
    result = tasks.run(library, name, args, timeout=120)
    assert "invocation" in result, result  # the module's own exit_json / fail_json, not tasks.py's failure
    return {k: v for k, v in result.items() if k != "invocation"}


def in_process(run_module, module, args):
    result, failed = run_module(module, args)
    assert result.get("failed", False) is failed
    return json.loads(json.dumps(result))  # tuples as lists, as the JSON from the library has them


def test_the_three_check_tasks_are_registered():
    assert tasks.TASKS["dataset_check"].__name__.endswith(".module_utils.artifacts.dataset_check_task")
    assert tasks.TASKS["hf_model_check"].__name__.endswith(".module_utils.artifacts.hf_model_check_task")
    assert tasks.TASKS["mcore_checkpoint"].__name__.endswith(".module_utils.checkpoint.mcore_checkpoint_task")


def test_dataset_check_from_the_library(library, run_module, tmp_path):
    train = write_parquet(tmp_path / "amt_math17k_d_qweninstruct.parquet", verl_rows(20))
    jsonl = write_jsonl(tmp_path / "dapo.jsonl", [{"prompt": "Solve %d" % i, "label": str(i)} for i in range(7)])
    args = {"files": [{"path": train, "role": "train"},
                      {"path": jsonl, "role": "eval", "label_key": "label", "reward_type": "deepscaler"}]}
    result = from_library(library, "dataset_check", args)
    assert result == in_process(run_module, dataset_check, args)
    assert "failed" not in result and result["changed"] is False and result["problems"] == []
    assert [f["rows"] for f in result["files"]] == [20, 7] and result["totals"]["rows"] == 27
    assert len(result["files"][0]["fingerprint"]) == 64

    no_label = write_jsonl(tmp_path / "no_label.jsonl", [{"prompt": "Solve %d" % i} for i in range(3)])
    args = {"files": [train, no_label]}
    result = from_library(library, "dataset_check", args)
    assert result == in_process(run_module, dataset_check, args)
    assert result["failed"] is True
    assert result["msg"].startswith("dataset_check: 1 problem in 1 of 2 files: (1) %s: column 'reward_model' "
                                    "missing" % no_label)


def test_hf_model_check_from_the_library(library, run_module, tmp_path):
    model = make_model(str(tmp_path / "Qwen3-8B"))
    args = {"path": model, "model_args": MODEL_ARGS}
    result = from_library(library, "hf_model_check", args)
    assert result == in_process(run_module, hf_model_check, args)
    assert "failed" not in result and result["shards"] == 3 and len(result["fingerprint"]) == 64

    os.unlink(os.path.join(model, "tokenizer_config.json"))
    args = {"path": model, "model_args": dict(MODEL_ARGS, **{"hidden-size": 1})}
    result = from_library(library, "hf_model_check", args)
    assert result == in_process(run_module, hf_model_check, args)
    assert result["failed"] is True
    assert result["msg"].startswith("hf_model_check: %s: 2 problems: (1) config.json hidden_size" % model)


def test_mcore_checkpoint_from_the_library(library, run_module, tmp_path):
    """The task's results keep their `state` (CheckpointModule's add_path_info) though run_here makes a plain
    AnsibleModule: no 'directory' state, no owner or mode added."""
    save = conversion(tmp_path / "same", fingerprint="sha256:aaa")
    args = {"path": save, "expect": "release", "fingerprint": "sha256:aaa"}
    result = from_library(library, "mcore_checkpoint", args)
    assert result == in_process(run_module, mcore_checkpoint, args)
    assert result["state"] == "complete" and result["fingerprint_matches"] is True and "owner" not in result

    stale = dict(args, fingerprint="sha256:new", fail_on=["stale"])
    result = from_library(library, "mcore_checkpoint", stale)
    assert result == in_process(run_module, mcore_checkpoint, stale)
    assert result["failed"] is True and result["state"] == "complete"
    assert "converted from another model: recorded fingerprint sha256:aaa" in result["msg"]

    torn = interrupted(tmp_path / "torn")
    args = {"path": torn, "fail_on": ["interrupted"]}
    result = from_library(library, "mcore_checkpoint", args)
    assert result == in_process(run_module, mcore_checkpoint, args)
    assert result["failed"] is True and result["state"] == "interrupted"


def test_mcore_checkpoint_records_and_moves_aside_from_the_library(library, run_module, tmp_path):
    save = conversion(tmp_path / "record")
    args = {"path": save, "record_fingerprint": "sha256:aaa", "record_extra": {"model": "Qwen3-8B"}}
    result = from_library(library, "mcore_checkpoint", args)
    assert result["changed"] is True and result["state"] == "complete"
    with open(os.path.join(save, mcore.CONVERSION_RECORD)) as handle:
        assert json.load(handle)["fingerprint"] == "sha256:aaa"
    again = in_process(run_module, mcore_checkpoint, args)  # the module sees what the task wrote
    assert again["changed"] is False
    assert again["actions"] == ["fingerprint sha256:aaa already recorded in %s"
                                % os.path.join(save, mcore.CONVERSION_RECORD)]

    torn = interrupted(tmp_path / "aside")
    result = from_library(library, "mcore_checkpoint", {"path": torn, "move_aside_if": ["interrupted"]})
    assert result["changed"] is True and result["state"] == "interrupted" and result["state_after"] == "absent"
    assert result["moved_to"].startswith(torn + ".interrupted-") and os.path.isdir(result["moved_to"])
    assert not os.path.exists(torn)


def test_fanout_probe_from_the_library(library, run_module, tmp_path):
    """A copy recorded by state=manifest holds; once a file of it is rewritten with the same size (so with another
    mtime) it no longer does."""
    assert tasks.TASKS["fanout"].__name__.endswith(".module_utils.fanout.fanout_task")
    src = artifact(str(tmp_path / "m"))
    recorded, failed = run_module(fanout, {"state": "manifest", "path": src, "piece_size": PIECE})
    assert not failed and os.path.exists(src + ".fanout.json")
    manifest = recorded["manifest"]
    args = {"state": "probe", "path": src, "manifest": manifest}
    result = from_library(library, "fanout", args)
    assert result == in_process(run_module, fanout, args)
    assert "failed" not in result and result["changed"] is False
    assert result["holds"] is True and result["id"] == manifest["id"] and result["partial_pieces"] == 0
    assert result["actions"] == ["%s holds the copy of manifest %s" % (src, manifest["id"][:12])]

    weights = os.path.join(src, "model.safetensors")
    with open(weights, "rb") as handle:
        flipped = bytes(b ^ 0xFF for b in handle.read())
    with open(weights, "wb") as handle:
        handle.write(flipped)
    # The record keeps whole-second mtimes: make sure the rewrite does not fall in the second it was recorded in.
    info = os.stat(weights)
    os.utime(weights, (info.st_atime, info.st_mtime + 2))
    assert os.path.getsize(weights) == PIECE * 3 + 7
    result = from_library(library, "fanout", args)
    assert result == in_process(run_module, fanout, args)
    assert "failed" not in result and result["changed"] is False
    assert result["holds"] is False and result["partial_pieces"] == 0
    assert result["actions"] == ["%s lacks it (0 pieces of a cut run kept)" % src]
