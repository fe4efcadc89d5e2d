"""Checkpoint retention: the selection rule (module_utils/checkpoint/retention.py) as a pure function,
and the checkpoint_retention module on save directories laid out as Megatron writes them."""
from __future__ import annotations

import os
import random

import ckpt_layouts
import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import retention
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import is_aside
from ansible_collections.mtslime.posttrain.plugins.modules import checkpoint_retention


# -- the rule -------------------------------------------------------------------------------------
def facts(complete, incomplete=(), tracker=None, tracker_mtime=100.0, mtimes=None, resume=None):
    mtimes = mtimes or {}
    items = [{"iteration": i, "complete": True, "mtime": mtimes.get(i, 50.0 + i * 0.01), "path": "/s/iter_%07d" % i}
             for i in complete]
    items += [{"iteration": i, "complete": False, "mtime": mtimes.get(i, 50.0), "path": "/s/iter_%07d" % i}
              for i in incomplete]
    items.sort(key=lambda item: item["iteration"])
    if resume is None and complete:  # every cursor there: the resume rule loads the newest complete iteration
        resume = max(complete)
    return {"save_dir": "/s", "exists": True, "tracker_iteration": tracker, "tracker_mtime": tracker_mtime,
            "resume_iteration": resume, "iterations": items}


def test_keep_zero_keeps_everything():
    decision = retention.plan(facts(range(1, 11), tracker=10), keep=0)
    assert decision["prune"] == [] and decision["keep"] == list(range(1, 11))
    assert "train_job_keep_checkpoints is 0" in decision["message"]


def test_keeps_the_newest_n_and_prunes_the_older_ones():
    decision = retention.plan(facts(range(1, 11), tracker=10), keep=3)
    assert decision["keep"] == [8, 9, 10]
    assert decision["prune"] == [1, 2, 3, 4, 5, 6, 7]
    assert "the tracker names it" in decision["protected"][10]
    assert "the newest complete one" in decision["protected"][10]


def test_never_the_iteration_a_resume_would_load_when_the_trackers_is_torn():
    # tracker 8, but iter_0000008 lacks metadata.json (killed while writing it): a resume loads 7
    decision = retention.plan(facts(range(1, 8), incomplete=[8], tracker=8), keep=1)
    assert 7 in decision["keep"] and "a resume would load it" in decision["protected"][7]
    assert 8 not in decision["prune"], "incomplete iterations are the resume rule's, never pruned here"
    assert decision["prune"] == [1, 2, 3, 4, 5, 6]


def test_never_an_iteration_the_running_job_loaded_from():
    decision = retention.plan(facts(range(1, 11), tracker=10), keep=2, protect=[3])
    assert decision["keep"] == [3, 9, 10]
    assert decision["protected"][3] == ["the running job loaded it"]


@pytest.mark.parametrize(
    "case, state",
    [
        ("an iteration above the tracker", facts(range(1, 6), incomplete=[6], tracker=5)),
        ("a complete iteration above the tracker (tracker not written yet)", facts(range(1, 7), tracker=5)),
        ("an incomplete iteration newer than the tracker",
         facts(range(1, 6), incomplete=[3], tracker=5, mtimes={3: 200.0})),
        ("a tracker older than the newest iteration dir", facts(range(1, 6), tracker=5, mtimes={5: 300.0})),
        ("no tracker yet and an incomplete first save", facts([], incomplete=[0], tracker=None)),
    ],
)
def test_never_while_a_save_is_in_progress(case, state):
    decision = retention.plan(state, keep=1)
    assert decision["prune"] == [], case
    if state["iterations"] and any(i["complete"] for i in state["iterations"]):
        assert decision["blocked"] and "a save may be running" in decision["blocked"], case


def test_the_rule_holds_for_any_save_dir():
    rng = random.Random(7)
    for dummy in range(500):
        numbers = sorted(rng.sample(range(0, 60), rng.randint(0, 12)))
        complete = [n for n in numbers if rng.random() < 0.8]
        incomplete = [n for n in numbers if n not in complete]
        tracker = rng.choice(numbers + [None]) if numbers else None
        mtimes = {n: rng.uniform(0, 120) for n in numbers}
        resume = rng.choice(complete) if complete else None
        state = facts(complete, incomplete, tracker=tracker, tracker_mtime=rng.uniform(0, 120), mtimes=mtimes,
                      resume=resume)
        protect = rng.sample(complete, min(len(complete), rng.randint(0, 2)))
        keep = rng.randint(0, 5)
        decision = retention.plan(state, keep, protect)
        pruned = set(decision["prune"])
        assert pruned <= set(complete)
        assert not pruned & set(protect)
        if complete:
            assert max(complete) not in pruned
        assert tracker not in pruned
        assert state["resume_iteration"] not in pruned
        if keep:
            assert len([i for i in complete if i not in pruned]) >= min(keep, len(complete))
        if retention.save_in_progress(state) or keep == 0:
            assert not pruned


# -- the module on real directories ------------------------------------------------------------------
def save_dir(root, iterations=range(1, 9), tracker=None, incomplete=()):
    save = root / "save"
    for number in list(iterations) + list(incomplete):
        path = save / ("iter_%07d" % number)
        # real torch_dist metadata (tests/unit/data/dcp/): the judge checks the shards against it
        ckpt_layouts.ckpt_dir(path, metadata_json=number not in incomplete)
        (save / "rollout").mkdir(exist_ok=True)
        (save / "rollout" / ("global_dataset_state_dict_%d.pt" % number)).write_bytes(b"d")
    last = tracker if tracker is not None else max(iterations)
    tracker_file = save / "latest_checkpointed_iteration.txt"
    tracker_file.write_text(str(last))
    newest = max(os.stat(p).st_mtime for p in save.iterdir())
    os.utime(tracker_file, (newest + 1, newest + 1))
    return save


def iterations_in(save):
    return sorted(p.name for p in save.iterdir() if p.name.startswith("iter_"))


def test_check_mode_predicts_and_changes_nothing(run_module, tmp_path):
    save = save_dir(tmp_path)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 3}, check_mode=True, diff=True)
    assert not failed and result["changed"]
    assert result["pruned"] == [1, 2, 3, 4, 5] and result["kept"] == [6, 7, 8]
    assert all(a.startswith("would move ") for a in result["actions"])
    assert "iter_0000001\n" in result["diff"]["before"] and "iter_0000001" not in result["diff"]["after"]
    assert len(iterations_in(save)) == 8 and not (tmp_path / "save.trash").exists()


def test_moves_pruned_iterations_and_their_data_state_to_the_trash(run_module, tmp_path):
    save = save_dir(tmp_path)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 3})
    assert not failed and result["changed"], result
    assert iterations_in(save) == ["iter_0000006", "iter_0000007", "iter_0000008"]
    trash = tmp_path / "save.trash"
    assert result["trash_dir"] == str(trash)
    names = sorted(os.listdir(trash))
    assert len(names) == 10 and all(is_aside(n) and ".pruned-" in n for n in names), names
    assert any(n.startswith("iter_0000001.pruned-") for n in names)
    assert any(n.startswith("global_dataset_state_dict_1.pt.pruned-") for n in names)
    assert sorted(os.listdir(save / "rollout")) == ["global_dataset_state_dict_%d.pt" % i for i in (6, 7, 8)]
    assert {m["path"] for m in result["moved"]} >= {str(save / "iter_0000001")}
    real = os.path.join(ckpt_layouts.DATA, ckpt_layouts.PINNED)
    one = sum(ckpt_layouts.layout_files().values()) + sum(
        os.path.getsize(os.path.join(real, name)) for name in (".metadata", "metadata.json"))
    assert result["bytes_pruned"] == 5 * one
    assert result["trash_bytes"] >= result["bytes_pruned"] and "the trash" in result["message"]
    again, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 3})
    assert not failed and not again["changed"] and again["pruned"] == []


def test_delete_only_when_asked(run_module, tmp_path):
    save = save_dir(tmp_path)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 2, "prune": "delete"})
    assert not failed and result["pruned"] == [1, 2, 3, 4, 5, 6]
    assert iterations_in(save) == ["iter_0000007", "iter_0000008"]
    assert not (tmp_path / "save.trash").exists()
    assert str(save / "rollout" / "global_dataset_state_dict_1.pt") in result["deleted"]


def test_a_save_in_progress_blocks_pruning(run_module, tmp_path):
    save = save_dir(tmp_path)
    partial = save / "iter_0000009"  # Megatron is writing the next checkpoint: shards, no metadata.json yet
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"s")
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 2})
    assert not failed and not result["changed"]
    assert "iter_0000009/ is newer than the tracker (8)" in result["blocked"]
    assert len(iterations_in(save)) == 9


def test_the_iteration_a_resume_loads_is_kept_with_its_data_cursor(run_module, tmp_path):
    # The data cursors of 6, 7 and 8 were never written (killed after each tracker): the resume rule loads 5,
    # so retention keeps 5 and its cursor, whatever keep says.
    save = save_dir(tmp_path)
    for number in (6, 7, 8):
        (save / "rollout" / ("global_dataset_state_dict_%d.pt" % number)).unlink()
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 2})
    assert not failed and result["kept"] == [5, 7, 8], result
    assert result["protected"]["5"] == ["a resume would load it"]
    assert (save / "iter_0000005").is_dir() and (save / "rollout" / "global_dataset_state_dict_5.pt").is_file()


def test_the_iteration_the_running_job_loaded_is_kept(run_module, tmp_path):
    save = save_dir(tmp_path)
    log = tmp_path / "qwen3-8B.log"
    log.write_text("(MegatronTrainRayActor pid=3001)   successfully loaded checkpoint from %s/ [ t 1/4, p 1/1 ] "
                   "at iteration 2\n" % save)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 2, "job_log": str(log),
                                                       "protect": [4]})
    assert not failed
    assert result["kept"] == [2, 4, 7, 8] and result["protected"]["2"] == ["the running job loaded it"]


def test_an_interrupted_prune_is_finished_by_the_next_run(run_module, tmp_path, monkeypatch):
    save = save_dir(tmp_path)
    real_rename = os.rename
    calls = []

    def dying_rename(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError(5, "Input/output error", src)
        return real_rename(src, dst)

    monkeypatch.setattr(retention.os, "rename", dying_rename)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 3})
    assert failed and "pruning %s failed" % save in result["msg"] and "`moved`" in result["msg"]
    monkeypatch.setattr(retention.os, "rename", real_rename)
    result, failed = run_module(checkpoint_retention, {"save_dir": str(save), "keep": 3})
    assert not failed and iterations_in(save) == ["iter_0000006", "iter_0000007", "iter_0000008"]
    assert len(os.listdir(tmp_path / "save.trash")) == 10


def test_a_missing_save_dir_has_nothing_to_prune(run_module, tmp_path):
    result, failed = run_module(checkpoint_retention, {"save_dir": str(tmp_path / "none"), "keep": 3})
    assert not failed and not result["changed"] and "does not exist" in result["message"]


@pytest.mark.parametrize(
    "args, words",
    [
        ({"keep": -1}, ["keep is -1", "train_job_keep_checkpoints"]),
        ({"keep": 2, "trash_dir": "{save}/trash"}, ["inside the save dir", "train_job_trash_dir", "train_job_prune"]),
        ({"keep": 2, "protect": [-3]}, ["negative iteration"]),
    ],
)
def test_bad_input_fails_with_one_message_and_changes_nothing(run_module, tmp_path, args, words):
    save = save_dir(tmp_path)
    args = {k: (v.format(save=save) if isinstance(v, str) else v) for k, v in args.items()}
    result, failed = run_module(checkpoint_retention, dict(args, save_dir=str(save)))
    assert failed
    for word in words:
        assert word in result["msg"], result["msg"]
    assert len(iterations_in(save)) == 8


def test_a_file_as_save_dir_is_named(run_module, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    result, failed = run_module(checkpoint_retention, {"save_dir": str(path), "keep": 1})
    assert failed and "is not a directory" in result["msg"] and str(path) in result["msg"]
