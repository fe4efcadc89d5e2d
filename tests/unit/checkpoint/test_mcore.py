"""module_utils/checkpoint/mcore.py: the layouts of slime.md §1.4 (conversion) and §4.2 (training save dir), and the
completeness rule on the byte ranges of REAL torch_dist metadata (tests/unit/data/dcp/)."""
from __future__ import annotations

import json
import os

import pytest
from ckpt_layouts import (
    LAYOUTS, PINNED, RECENT, ckpt_dir, conversion, cut, data_state, layout_files, shard_names, tracker, training,
)

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_point
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.layout import (
    dataset_state_ok, iterations_of, read_tracker)


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


def test_complete_conversion_in_the_recent_layout_without_common_pt(tmp_path):
    save = os.path.join(str(tmp_path), "c")
    ckpt_dir(os.path.join(save, "release"), layout=RECENT)
    assert "common.pt" not in os.listdir(os.path.join(save, "release"))
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
    assert "the save stopped between .metadata and metadata.json" in info["message"]
    assert "before its final rename" not in info["message"]


def test_empty_tracker_is_no_tracker(tmp_path):
    save = conversion(tmp_path)
    tracker(save, "")
    info = mcore.inspect_checkpoint(save, expect="release")
    assert code(info) == "no_tracker" and info["tracker"] is None and info["tracker_empty"] is True
    assert "empty (0 bytes)" in info["signature"]["detail"]
    assert read_tracker(save) == (None, None)


def test_training_dir_without_tracker_is_not_told_to_rerun_the_conversion(tmp_path):
    save = training(tmp_path, latest=None)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert code(info) == "no_tracker"
    assert "conversion" not in info["message"]
    assert "resumes by the resume rule" in info["message"]


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


@pytest.mark.parametrize("missing,signature,phrase", [
    ("metadata.json", "missing_metadata_json", "metadata.json is missing"),
    (".metadata", "missing_metadata_json", ".metadata is missing"),
    ("distcp", "torn_shards", "__0_0.distcp is missing"),
])
def test_release_missing_part(tmp_path, missing, signature, phrase):
    save = str(tmp_path / "c")
    release = ckpt_dir(
        os.path.join(save, "release"),
        metadata_json=missing != "metadata.json",
        dcp_metadata=missing != ".metadata",
        shards=missing != "distcp",
    )
    assert os.path.isdir(release)
    tracker(save, "release")
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "interrupted"
    assert code(info) == signature
    assert phrase in info["signature"]["detail"]
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
    assert "latest_complete_iteration" not in info, "which iteration a resume loads is resume.resume_point's alone"
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
    assert resume_point(save) == 39
    assert "iter_0000059/" in info["signature"]["detail"]
    assert "the next job (site.yml) resumes by the resume rule" in info["message"]


def test_training_tracker_points_to_incomplete_iter(tmp_path):
    save = training(tmp_path)
    ckpt_dir(os.path.join(save, "iter_0000059"), metadata_json=False)
    tracker(save, "59")
    info = mcore.inspect_checkpoint(save, expect="training")
    assert code(info) == "missing_metadata_json"
    assert info["iterations"] == [19, 39, 59]
    assert info["complete_iterations"] == [19, 39]
    assert info["incomplete_iterations"] == [59]
    assert resume_point(save) == 39


def test_training_incomplete_iter_beyond_tracker_is_ignored(tmp_path):
    save = training(tmp_path)
    ckpt_dir(os.path.join(save, "iter_0000059"), metadata_json=False)  # died while saving 59
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "complete"
    assert resume_point(save) == 39
    assert info["incomplete_iterations"] == [59]


def test_a_resume_loads_the_newest_complete_iteration_with_a_data_cursor(tmp_path):
    # 59 is complete and the tracker names it, but slime's data cursor of 59 was never written (a kill after
    # the tracker): a resume loads 39 (resume_point), not the tracker's or the newest complete iteration.
    save = training(tmp_path, iters=(19, 39, 59), latest=59)
    os.remove(os.path.join(save, "rollout", "global_dataset_state_dict_59.pt"))
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["complete_iterations"] == [19, 39, 59]
    assert resume_point(save) == 39


def test_training_without_tracker(tmp_path):
    save = training(tmp_path, latest=None)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert code(info) == "no_tracker"
    assert info["latest_iteration"] is None
    assert resume_point(save) == 39


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


def test_read_conversion_record(tmp_path):
    save = conversion(tmp_path)
    assert mcore.read_conversion_record(save) is None
    with open(os.path.join(save, mcore.CONVERSION_RECORD), "w") as handle:
        handle.write("{not json")
    assert mcore.read_conversion_record(save) is None
    with open(os.path.join(save, mcore.CONVERSION_RECORD), "w") as handle:
        json.dump({"fingerprint": "abc"}, handle)
    assert mcore.read_conversion_record(save) == {"fingerprint": "abc"}


# ---- the completeness rule on byte ranges (real torch_dist metadata) ----

@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_real_layout_is_complete(tmp_path, layout):
    path = ckpt_dir(tmp_path / "iter_0000019", layout=layout)
    check = mcore.check_checkpoint_dir(path)
    assert check["complete"] and check["problems"] == [] and check["stage"] == "complete"
    assert check["shards"] == len(shard_names(layout))
    assert check["shard_bytes"] == sum(size for name, size in layout_files(layout).items() if name.endswith(".distcp"))


@pytest.mark.parametrize("layout", (PINNED, RECENT, "torch_two_ranks_gloo"))
def test_two_shards_per_rank(layout):
    names = shard_names(layout)
    assert names == ["__0_0.distcp", "__0_1.distcp", "__1_0.distcp", "__1_1.distcp"]


def test_recent_megatron_writes_no_common_pt_and_the_pinned_one_does():
    assert "common.pt" in layout_files(PINNED) and "common.pt" not in layout_files(RECENT)


@pytest.mark.parametrize("size", [0, 5])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_shard_cut_short_is_torn(tmp_path, layout, size):
    path = ckpt_dir(tmp_path / "iter_0000019", layout=layout)
    last = shard_names(layout)[-1]
    needed = layout_files(layout)[last]
    cut(os.path.join(path, last), size)
    check = mcore.check_checkpoint_dir(path)
    assert not check["complete"] and check["stage"] == "torn"
    assert check["problems"] == ["%s is %d bytes, .metadata records %d bytes in it" % (last, size, needed)]


def test_a_shard_one_byte_short_is_torn_and_a_longer_one_is_fine(tmp_path):
    path = ckpt_dir(tmp_path / "iter_0000019")
    first = shard_names()[0]
    size = layout_files()[first]
    cut(os.path.join(path, first), size - 1)
    assert not mcore.is_complete_checkpoint_dir(path)
    cut(os.path.join(path, first), size + 100)
    assert mcore.is_complete_checkpoint_dir(path)


def test_a_missing_shard(tmp_path):
    path = ckpt_dir(tmp_path / "iter_0000019")
    os.remove(os.path.join(path, "__1_1.distcp"))
    check = mcore.check_checkpoint_dir(path)
    assert check["problems"] == ["__1_1.distcp is missing"] and check["stage"] == "torn"


def test_a_shard_the_metadata_does_not_name_is_not_needed(tmp_path):
    path = ckpt_dir(tmp_path / "iter_0000019")
    with open(os.path.join(path, "__7_0.distcp"), "wb") as handle:
        handle.write(b"x")
    assert mcore.is_complete_checkpoint_dir(path)


@pytest.mark.parametrize("content,phrase,stage", [
    (b"", ".metadata is empty (0 bytes)", "damaged_metadata"),
    (b"garbage that is no pickle", ".metadata is not a readable pickle", "damaged_metadata"),
    (b"\x80\x04K\x05.", ".metadata holds int, not torch.distributed.checkpoint.metadata.Metadata", "damaged_metadata"),
])
def test_empty_or_garbage_metadata(tmp_path, content, phrase, stage):
    path = ckpt_dir(tmp_path / "iter_0000019")
    with open(os.path.join(path, ".metadata"), "wb") as handle:
        handle.write(content)
    check = mcore.check_checkpoint_dir(path)
    assert not check["complete"] and check["stage"] == stage
    assert any(p.startswith(phrase) for p in check["problems"]), check["problems"]


def test_metadata_cut_in_the_middle(tmp_path):
    path = ckpt_dir(tmp_path / "iter_0000019")
    cut(os.path.join(path, ".metadata"), os.path.getsize(os.path.join(path, ".metadata")) // 2)
    assert mcore.check_checkpoint_dir(path)["stage"] == "damaged_metadata"


@pytest.mark.parametrize("content,phrase", [
    ("", "metadata.json is empty (0 bytes)"),
    ("{\"sharded_backend\": ", "metadata.json is not valid JSON"),
    ("[1]", "metadata.json is not a JSON object"),
])
def test_empty_or_bad_metadata_json(tmp_path, content, phrase):
    path = ckpt_dir(tmp_path / "iter_0000019")
    with open(os.path.join(path, "metadata.json"), "w") as handle:
        handle.write(content)
    check = mcore.check_checkpoint_dir(path)
    assert not check["complete"] and check["stage"] == "no_metadata_json"
    assert any(p.startswith(phrase) for p in check["problems"]), check["problems"]
    assert mcore.describe_stage(check) == "the save stopped between .metadata and metadata.json"


def test_stages_follow_the_write_order(tmp_path):
    nothing = str(tmp_path / "a")
    os.makedirs(nothing)
    assert mcore.check_checkpoint_dir(nothing)["stage"] == "no_shards"
    shards = ckpt_dir(tmp_path / "b", dcp_metadata=False, metadata_json=False)
    assert mcore.check_checkpoint_dir(shards)["stage"] == "shards"
    assert mcore.check_checkpoint_dir(str(tmp_path / "none"))["stage"] == "no_directory"


def test_empty_metadata_json_makes_the_iteration_incomplete_in_the_lists(tmp_path):
    save = training(tmp_path, iters=(19, 39, 59), latest=39)
    with open(os.path.join(save, "iter_0000059", "metadata.json"), "w"):
        pass
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["complete_iterations"] == [19, 39] and info["incomplete_iterations"] == [59]
    assert info["iteration_problems"] == {"59": ["metadata.json is empty (0 bytes)"]}


def test_torn_tracker_iteration_is_reported_as_torn(tmp_path):
    save = training(tmp_path)
    cut(os.path.join(save, "iter_0000039", "__0_0.distcp"), 5)
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "interrupted" and code(info) == "torn_shards"
    assert "__0_0.distcp is 5 bytes" in info["message"] and resume_point(save) == 19


def test_torn_converted_checkpoint(tmp_path):
    save = conversion(tmp_path, layout=RECENT)
    cut(os.path.join(save, "release", "__1_0.distcp"), 0)
    info = mcore.inspect_checkpoint(save, expect="release")
    assert info["state"] == "interrupted" and code(info) == "torn_shards" and info["release"] is False
    assert "__1_0.distcp is 0 bytes" in info["message"]


def test_empty_data_cursor_is_no_data_state(tmp_path):
    save = training(tmp_path)
    data_state(save, 39, payload=b"")
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["dataset_state"] is False and info["dataset_state_iterations"] == [19]


def test_a_torn_zip_data_cursor_is_no_data_state(tmp_path):
    import zipfile

    save = training(tmp_path)
    path = data_state(save, 39, payload=b"")
    with zipfile.ZipFile(path, "w") as archive:  # torch.save's format since 1.6
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    assert dataset_state_ok(save, 39)
    cut(path, os.path.getsize(path) - 10)
    assert not dataset_state_ok(save, 39)


def test_a_save_made_while_the_directory_is_read_is_judged_not_a_crash(tmp_path, monkeypatch):
    # A live run saves iteration 42 and moves the tracker to it between the listing and the tracker's read.
    save = training(tmp_path, iters=(19, 39, 42), latest=42)
    listed = iterations_of
    monkeypatch.setattr(mcore.layout, "iterations_of", lambda path: [it for it in listed(path) if it != 42])
    info = mcore.inspect_checkpoint(save, expect="training")
    assert info["state"] == "complete" and info["latest_iteration"] == 42
    assert info["complete_iterations"][-1] == 42
