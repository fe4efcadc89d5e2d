"""module_utils/mcore.py: the layouts of slime.md §1.4 (conversion) and §4.2 (training save dir)."""
from __future__ import annotations

import json
import os
import time

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils import mcore

METADATA = {"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch", "common_backend_version": 1}


def ckpt_dir(path, ranks=8, metadata_json=True, dcp_metadata=True, common=True):
    """A torch_dist checkpoint dir as Megatron writes it (files are tiny stand-ins)."""
    os.makedirs(path, exist_ok=True)
    if common:
        with open(os.path.join(path, "common.pt"), "wb") as handle:
            handle.write(b"PK\x03\x04common")
    for rank in range(ranks):
        with open(os.path.join(path, "__%d_0.distcp" % rank), "wb") as handle:
            handle.write(b"\x00" * 16)
    if dcp_metadata:
        with open(os.path.join(path, ".metadata"), "wb") as handle:
            handle.write(b"\x80\x04dcp")
    if metadata_json:
        with open(os.path.join(path, "metadata.json"), "w") as handle:
            json.dump(METADATA, handle)
    return path


def tracker(path, text):
    with open(os.path.join(path, "latest_checkpointed_iteration.txt"), "w") as handle:
        handle.write(text)


def conversion(root, name="Qwen3-8B_slime"):
    """Finished conversion: tracker 'release' (no newline) + complete release/."""
    save = os.path.join(str(root), name)
    ckpt_dir(os.path.join(save, "release"))
    tracker(save, "release")
    return save


def training(root, iters=(19, 39), latest=39, dataset_state=True, name="run"):
    save = os.path.join(str(root), name)
    for it in iters:
        ckpt_dir(os.path.join(save, "iter_%07d" % it), ranks=4)
        if dataset_state:
            os.makedirs(os.path.join(save, "rollout"), exist_ok=True)
            with open(os.path.join(save, "rollout", "global_dataset_state_dict_%d.pt" % it), "wb") as handle:
                handle.write(b"state")
    if latest is not None:
        tracker(save, str(latest))
    return save


def code(info):
    return info["signature"]["code"] if info["signature"] else None


# ---- conversion output (§1.3-1.4) ----

def test_complete_conversion(tmp_path):
    save = conversion(tmp_path)
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "complete"
    assert info["signature"] is None
    assert info["tracker"] == "release"
    assert info["latest_iteration"] == 0
    assert info["release"] is True
    assert info["iterations"] == [] and info["complete_iterations"] == []
    assert info["dataset_state"] is False and info["dataset_state_file"] is None
    assert info["path"] == save
    assert "complete" in info["message"] and save in info["message"]
    assert mcore.inspect_checkpoint(save)["state"] == "complete"
    assert mcore.inspect_checkpoint(save)["kind"] == "release"


def test_complete_conversion_without_common_pt(tmp_path):
    save = os.path.join(str(tmp_path), "c")
    ckpt_dir(os.path.join(save, "release"), common=False)
    tracker(save, "release\n")
    assert mcore.inspect_checkpoint(save, expect="release")["state"] == "complete"


def test_trailing_slash_and_tilde_paths(tmp_path, monkeypatch):
    save = conversion(tmp_path)
    assert mcore.inspect_checkpoint(save + "/")["path"] == save
    monkeypatch.setenv("HOME", str(tmp_path))
    assert mcore.inspect_checkpoint("~/Qwen3-8B_slime")["state"] == "complete"


def test_absent(tmp_path):
    info = mcore.inspect_checkpoint(str(tmp_path / "nothing"), expect="release")
    assert info["state"] == "absent"
    assert info["signature"] is None
    assert info["tracker"] is None and info["latest_iteration"] is None
    assert "does not exist" in info["message"]


def test_empty_dir(tmp_path):
    save = tmp_path / "empty"
    save.mkdir()
    info = mcore.inspect_checkpoint(str(save))
    assert info["state"] == "interrupted"
    assert code(info) == "empty_dir"
    assert str(save) in info["message"] and "empty_dir" in info["message"]


def test_not_a_directory(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    info = mcore.inspect_checkpoint(str(path))
    assert info["state"] == "interrupted" and code(info) == "not_a_directory"


def test_no_tracker(tmp_path):
    save = str(tmp_path / "c")
    ckpt_dir(os.path.join(save, "iter_0000001"), metadata_json=False)
    info = mcore.inspect_checkpoint(save, expect="release")
    assert code(info) == "no_tracker"
    assert info["iterations"] == [1] and info["complete_iterations"] == []
    assert "rerun the conversion" in info["message"]


def test_tracker_1_with_iter_dir_not_renamed(tmp_path):
    save = str(tmp_path / "c")
    ckpt_dir(os.path.join(save, "iter_0000001"))
    tracker(save, "1")
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "interrupted"
    assert code(info) == "iter_dir_not_renamed"
    assert info["latest_iteration"] == 1
    assert info["complete_iterations"] == [1]
    assert "iter_0000001/" in info["signature"]["detail"]
    # auto infers a conversion (no rollout/ dir, only iteration 1)
    auto = mcore.inspect_checkpoint(save)
    assert auto["kind"] == "release" and code(auto) == "iter_dir_not_renamed"


def test_tracker_1_with_rollout_dir_is_a_training_checkpoint_in_auto(tmp_path):
    save = training(tmp_path, iters=(1,), latest=1)
    info = mcore.inspect_checkpoint(save)
    assert info["kind"] == "training"
    assert info["state"] == "complete" and info["latest_iteration"] == 1


def test_tracker_release_with_leftover_iter_dir(tmp_path):
    save = conversion(tmp_path)
    ckpt_dir(os.path.join(save, "iter_0000001"))
    info = mcore.inspect_checkpoint(save, expect="release")
    assert code(info) == "iter_dir_not_renamed"
    # a training save dir accepts a release tracker and ignores iter dirs
    assert mcore.inspect_checkpoint(save, expect="training")["state"] == "complete"


def test_tracker_release_without_release_dir(tmp_path):
    save = str(tmp_path / "c")
    os.makedirs(save)
    tracker(save, "release")
    info = mcore.inspect_checkpoint(save, expect="release")
    assert code(info) == "release_dir_missing"
    assert info["release"] is False
    assert info["latest_iteration"] == 0


@pytest.mark.parametrize("missing", ["metadata.json", ".metadata", "distcp"])
def test_release_missing_metadata(tmp_path, missing):
    save = str(tmp_path / "c")
    release = ckpt_dir(
        os.path.join(save, "release"),
        metadata_json=missing != "metadata.json",
        dcp_metadata=missing != ".metadata",
        ranks=0 if missing == "distcp" else 8,
    )
    assert os.path.isdir(release)
    tracker(save, "release")
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "interrupted"
    assert code(info) == "missing_metadata_json"
    assert (missing if missing != "distcp" else "*.distcp") in info["signature"]["detail"]
    assert info["release"] is False


def test_nested_release(tmp_path):
    save = conversion(tmp_path)
    ckpt_dir(os.path.join(save, "release", "iter_0000001"))
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "interrupted"
    assert code(info) == "nested_release"
    assert "release/" in info["signature"]["detail"] and "iter_0000001" in info["signature"]["detail"]
    assert "empty --save" in info["message"]
    assert mcore.inspect_checkpoint(save)["state"] == "interrupted"


def test_tracker_unreadable(tmp_path):
    save = conversion(tmp_path)
    tracker(save, "garbage\n")
    info = mcore.inspect_checkpoint(save)
    assert code(info) == "tracker_unreadable"
    assert info["tracker"] == "garbage"
    assert info["latest_iteration"] is None
    assert "'garbage'" in info["signature"]["detail"]


def test_conversion_record_is_not_content(tmp_path):
    save = tmp_path / "c"
    save.mkdir()
    (save / mcore.CONVERSION_RECORD).write_text("{}")
    assert code(mcore.inspect_checkpoint(str(save))) == "empty_dir"


# ---- training save dir (§4.2-4.3) ----

def test_training_complete_with_dataset_state(tmp_path):
    save = training(tmp_path)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "complete"
    assert info["kind"] == "training"
    assert info["iterations"] == [19, 39]
    assert info["complete_iterations"] == [19, 39]
    assert info["latest_iteration"] == 39
    assert info["latest_complete_iteration"] == 39
    assert info["dataset_state"] is True
    assert info["dataset_state_file"] == os.path.join(save, "rollout", "global_dataset_state_dict_39.pt")
    assert info["dataset_state_iterations"] == [19, 39]
    assert info["release"] is False
    assert mcore.inspect_checkpoint(save)["kind"] == "training"


def test_training_complete_without_dataset_state(tmp_path):
    save = training(tmp_path, dataset_state=False)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "complete"
    assert info["dataset_state"] is False
    assert info["dataset_state_file"].endswith("global_dataset_state_dict_39.pt")
    assert "data state absent" in info["message"]


def test_training_tracker_points_to_missing_iter(tmp_path):
    save = training(tmp_path, latest=59)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "interrupted"
    assert code(info) == "tracker_points_to_missing_iter"
    assert info["latest_iteration"] == 59
    assert info["latest_complete_iteration"] == 39
    assert "iter_0000059/" in info["signature"]["detail"]
    assert "last complete iteration: 39" in info["message"]


def test_training_tracker_points_to_incomplete_iter(tmp_path):
    save = training(tmp_path)
    ckpt_dir(os.path.join(save, "iter_0000059"), metadata_json=False)
    tracker(save, "59")
    info = mcore.inspect_checkpoint(save, expect="training")
    assert code(info) == "missing_metadata_json"
    assert info["iterations"] == [19, 39, 59]
    assert info["complete_iterations"] == [19, 39]
    assert info["incomplete_iterations"] == [59]
    assert info["latest_complete_iteration"] == 39


def test_training_incomplete_iter_beyond_tracker_is_ignored(tmp_path):
    save = training(tmp_path)
    ckpt_dir(os.path.join(save, "iter_0000059"), metadata_json=False)  # died while saving 59
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "complete"
    assert info["latest_complete_iteration"] == 39
    assert info["incomplete_iterations"] == [59]


def test_training_latest_complete_bounded_by_tracker(tmp_path):
    save = training(tmp_path, iters=(19, 39, 59), latest=39)
    assert mcore.inspect_checkpoint(save, expect="training")["latest_complete_iteration"] == 39


def test_training_without_tracker(tmp_path):
    save = training(tmp_path, latest=None)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert code(info) == "no_tracker"
    assert info["latest_iteration"] is None
    assert info["latest_complete_iteration"] == 39


def test_training_dir_given_expect_release(tmp_path):
    save = training(tmp_path)
    info = mcore.inspect_checkpoint(save, expect="release")
    assert code(info) == "iter_dir_not_renamed"
    assert "expect=training" in info["signature"]["detail"]


def test_bad_expect():
    with pytest.raises(ValueError):
        mcore.inspect_checkpoint("/x", expect="hf")


def test_every_signature_code_has_text():
    for key, (meaning, fix) in mcore.SIGNATURES.items():
        assert meaning and fix, key


# ---- move aside ----

def test_move_aside(tmp_path):
    save = conversion(tmp_path)
    now = time.mktime((2026, 8, 21, 13, 4, 5, 0, 0, -1))
    target = mcore.move_aside(save, "interrupted", now=now)
    assert target == save + ".interrupted-20260821T130405"
    assert not os.path.exists(save)
    assert os.path.isfile(os.path.join(target, "release", "metadata.json"))


def test_move_aside_suffix_when_taken(tmp_path):
    now = time.mktime((2026, 8, 21, 13, 4, 5, 0, 0, -1))
    save = conversion(tmp_path)
    taken = save + ".interrupted-20260821T130405"
    os.makedirs(taken)  # an empty dir: os.rename would silently replace it
    assert mcore.aside_name(save, "interrupted", now=now) == taken + ".1"
    first = mcore.move_aside(save, "interrupted", now=now)
    assert first == taken + ".1"
    conversion(tmp_path)
    second = mcore.move_aside(save + "/", "interrupted", now=now)
    assert second == taken + ".2"
    assert os.path.isdir(taken) and os.listdir(taken) == []
    assert os.path.isdir(os.path.join(first, "release")) and os.path.isdir(os.path.join(second, "release"))


def test_move_aside_cleans_reason_and_refuses_missing(tmp_path):
    save = conversion(tmp_path)
    target = mcore.move_aside(save, "bad reason/x")
    assert os.path.basename(target).startswith("Qwen3-8B_slime.bad-reason-x-")
    with pytest.raises(FileNotFoundError):
        mcore.move_aside(save, "again")


def test_read_conversion_record(tmp_path):
    save = conversion(tmp_path)
    assert mcore.read_conversion_record(save) is None
    with open(os.path.join(save, mcore.CONVERSION_RECORD), "w") as handle:
        handle.write("{not json")
    assert mcore.read_conversion_record(save) is None
    with open(os.path.join(save, mcore.CONVERSION_RECORD), "w") as handle:
        json.dump({"fingerprint": "abc"}, handle)
    assert mcore.read_conversion_record(save) == {"fingerprint": "abc"}
