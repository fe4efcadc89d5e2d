"""mtslime.posttrain.mcore_checkpoint: state report, fingerprint record/compare, move aside, fail_on."""

from __future__ import annotations

import json
import os

from ckpt_layouts import ckpt_dir, tracker

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore, mcore_checkpoint_task
from ansible_collections.mtslime.posttrain.plugins.modules import mcore_checkpoint as module


def conversion(tmp_path, fingerprint=None):
    save = str(tmp_path / "Qwen3-8B_slime")
    ckpt_dir(os.path.join(save, "release"))
    tracker(save, "release")
    if fingerprint:
        with open(os.path.join(save, mcore.CONVERSION_RECORD), "w") as handle:
            json.dump({"fingerprint": fingerprint, "recorded_at": "2026-08-21T00:00:00Z", "extra": {}}, handle)
    return save


def interrupted(tmp_path):
    """Converter died before renaming iter_0000001/ to release/."""
    save = str(tmp_path / "Qwen3-8B_slime")
    ckpt_dir(os.path.join(save, "iter_0000001"))
    tracker(save, "1")
    return save


def siblings(save):
    parent, name = os.path.split(save)
    return sorted(n for n in os.listdir(parent) if n.startswith(name + "."))


def test_reports_complete_conversion(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "expect": "release"})
    assert not failed and not result["changed"]
    assert result["state"] == "complete" and result["state_after"] == "complete"
    assert result["signature"] is None
    for key in (
        "tracker",
        "iterations",
        "complete_iterations",
        "latest_iteration",
        "resume_iteration",
        "release",
        "dataset_state",
        "dataset_state_file",
        "message",
        "path",
    ):
        assert key in result
    assert result["fingerprint_recorded"] is None and result["fingerprint_matches"] is None
    assert result["moved_to"] is None
    assert result["actions"]


def test_reports_interrupted_signature(run_module, tmp_path):
    save = interrupted(tmp_path)
    result, failed = run_module(module, {"path": save})
    assert not failed and not result["changed"]
    assert result["state"] == "interrupted"
    assert result["signature"]["code"] == "iter_dir_not_renamed"
    assert os.path.isdir(save)


def test_reports_training_dir(run_module, tmp_path):
    save = str(tmp_path / "run")
    for it in (19, 39):
        ckpt_dir(os.path.join(save, "iter_%07d" % it))
    tracker(save, "39")
    result, failed = run_module(module, {"path": save, "expect": "training"})
    assert not failed
    assert result["latest_iteration"] == 39 and result["resume_iteration"] == 39
    assert result["dataset_state"] is False
    os.makedirs(os.path.join(save, "rollout"))
    open(os.path.join(save, "rollout", "global_dataset_state_dict_39.pt"), "wb").close()
    result, dummy = run_module(module, {"path": save})
    assert result["kind"] == "training" and result["dataset_state"] is False  # 0 bytes: no data cursor
    with open(os.path.join(save, "rollout", "global_dataset_state_dict_39.pt"), "wb") as handle:
        handle.write(b"\x80\x04state")
    result, dummy = run_module(module, {"path": save})
    assert result["dataset_state"] is True and result["tracker_empty"] is False


def test_the_resume_iteration_is_the_resume_rules(run_module, tmp_path):
    # 39 is complete and named by the tracker but has no data cursor; 19 has one: a resume loads 19,
    # and the inspection says the same as the job plan (resume_plan).
    from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_plan

    save = str(tmp_path / "run")
    for it in (19, 39):
        ckpt_dir(os.path.join(save, "iter_%07d" % it))
    tracker(save, "39")
    os.makedirs(os.path.join(save, "rollout"))
    with open(os.path.join(save, "rollout", "global_dataset_state_dict_19.pt"), "wb") as handle:
        handle.write(b"\x80\x04state")
    result, failed = run_module(module, {"path": save, "expect": "training"})
    assert not failed and result["state"] == "complete"
    assert result["resume_iteration"] == 19 == resume_plan(save)["resume_iteration"]
    release, dummy = run_module(module, {"path": conversion(tmp_path / "c"), "expect": "release"})
    assert release["resume_iteration"] is None


# ---- fingerprint ----


def test_record_fingerprint_writes_once(run_module, tmp_path):
    save = conversion(tmp_path)
    args = {
        "path": save,
        "expect": "release",
        "record_fingerprint": "sha256:aaa",
        "record_extra": {"hf_checkpoint": "/data/models/Qwen3-8B"},
    }
    result, failed = run_module(module, args, diff=True)
    assert not failed and result["changed"]
    record_file = os.path.join(save, ".mtslime_conversion.json")
    with open(record_file) as handle:
        record = json.load(handle)
    assert record["fingerprint"] == "sha256:aaa"
    assert record["extra"] == {"hf_checkpoint": "/data/models/Qwen3-8B"}
    assert record["recorded_at"].endswith("Z")
    assert result["fingerprint_recorded"] == "sha256:aaa"
    assert result["diff"]["before"] == "" and "sha256:aaa" in result["diff"]["after"]
    assert any("recorded fingerprint sha256:aaa" in a for a in result["actions"])
    # the record does not disturb the state
    assert result["state"] == "complete"

    again, dummy = run_module(module, args)
    assert not again["changed"]
    with open(record_file) as handle:
        assert json.load(handle)["recorded_at"] == record["recorded_at"]

    changed, dummy = run_module(module, dict(args, record_fingerprint="sha256:bbb"))
    assert changed["changed"]
    assert '"sha256:aaa"' in changed["diff"]["before"] and '"sha256:bbb"' in changed["diff"]["after"]
    assert mcore.inspect_checkpoint(save)["state"] == "complete"


def test_record_fingerprint_check_mode(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "record_fingerprint": "sha256:aaa"}, check_mode=True)
    assert not failed and result["changed"]
    assert not os.path.exists(os.path.join(save, ".mtslime_conversion.json"))
    assert any(a.startswith("would record") for a in result["actions"])


def test_record_fingerprint_refuses_incomplete(run_module, tmp_path):
    save = interrupted(tmp_path)
    result, failed = run_module(module, {"path": save, "record_fingerprint": "sha256:aaa"})
    assert failed
    assert "cannot record fingerprint" in result["msg"]
    assert os.path.join(save, ".mtslime_conversion.json") in result["msg"]
    assert "iter_dir_not_renamed" in result["msg"]
    assert not os.path.exists(os.path.join(save, ".mtslime_conversion.json"))


def test_fingerprint_compare(run_module, tmp_path):
    save = conversion(tmp_path, fingerprint="sha256:aaa")
    same, dummy = run_module(module, {"path": save, "fingerprint": "sha256:aaa"})
    assert same["fingerprint_matches"] is True and same["fingerprint_recorded"] == "sha256:aaa"
    other, dummy = run_module(module, {"path": save, "fingerprint": "sha256:bbb"})
    assert other["fingerprint_matches"] is False
    assert not other["changed"]


def test_fingerprint_not_recorded(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "fingerprint": "sha256:aaa", "move_aside_if": ["stale"]})
    assert not failed and not result["changed"]
    assert result["fingerprint_matches"] is None
    assert any("no fingerprint recorded" in a for a in result["actions"])
    assert os.path.isdir(save)


# ---- move aside ----


def test_move_aside_interrupted(run_module, tmp_path):
    save = interrupted(tmp_path)
    result, failed = run_module(module, {"path": save, "move_aside_if": ["interrupted"]}, diff=True)
    assert not failed and result["changed"]
    assert result["moved_to"].startswith(save + ".interrupted-")
    assert result["state"] == "interrupted" and result["state_after"] == "absent"
    assert not os.path.exists(save)
    assert os.path.isdir(os.path.join(result["moved_to"], "iter_0000001"))
    assert result["moved_to"] in result["diff"]["after"]
    assert any("moved %s" % save in a for a in result["actions"])
    # idempotent: now absent, nothing to move
    again, dummy = run_module(module, {"path": save, "move_aside_if": ["interrupted"]})
    assert not again["changed"] and again["state"] == "absent" and again["moved_to"] is None


def test_move_aside_check_mode_predicts(run_module, tmp_path):
    save = interrupted(tmp_path)
    result, failed = run_module(module, {"path": save, "move_aside_if": ["interrupted"]}, check_mode=True)
    assert not failed and result["changed"]
    assert result["moved_to"].startswith(save + ".interrupted-")
    assert os.path.isdir(save) and siblings(save) == []
    assert any(a.startswith("would move") for a in result["actions"])


def test_move_aside_suffix_when_name_taken(run_module, tmp_path, monkeypatch):
    fixed = 1787000000.0
    monkeypatch.setattr(aside.time, "time", lambda: fixed)
    save = interrupted(tmp_path)
    first, dummy = run_module(module, {"path": save, "move_aside_if": ["interrupted"]})
    interrupted(tmp_path)
    second, dummy = run_module(module, {"path": save, "move_aside_if": ["interrupted"]})
    assert second["moved_to"] == first["moved_to"] + ".1"
    assert len(siblings(save)) == 2


def test_move_aside_stale(run_module, tmp_path):
    save = conversion(tmp_path, fingerprint="sha256:old")
    result, failed = run_module(
        module, {"path": save, "fingerprint": "sha256:new", "move_aside_if": ["interrupted", "stale"]}
    )
    assert not failed and result["changed"]
    assert result["fingerprint_matches"] is False
    assert ".stale-" in result["moved_to"]
    assert os.path.isfile(os.path.join(result["moved_to"], ".mtslime_conversion.json"))


def test_complete_matching_is_kept(run_module, tmp_path):
    save = conversion(tmp_path, fingerprint="sha256:aaa")
    result, dummy = run_module(
        module, {"path": save, "fingerprint": "sha256:aaa", "move_aside_if": ["interrupted", "stale"]}
    )
    assert not result["changed"] and result["moved_to"] is None and os.path.isdir(save)


def test_absent_is_never_moved(run_module, tmp_path):
    result, failed = run_module(module, {"path": str(tmp_path / "none"), "move_aside_if": ["interrupted"]})
    assert not failed and not result["changed"] and result["state"] == "absent"


# ---- fail_on and argument checks ----


def test_fail_on_interrupted_names_path_signature_fix(run_module, tmp_path):
    save = interrupted(tmp_path)
    result, failed = run_module(
        module, {"path": save, "fail_on": ["interrupted", "absent"], "move_aside_if": ["interrupted"]}
    )
    assert failed
    assert save in result["msg"]
    assert "iter_dir_not_renamed" in result["msg"]
    assert "fix: move the directory aside and rerun the conversion" in result["msg"]
    assert os.path.isdir(save) and siblings(save) == []  # fail_on wins, nothing moved


def test_fail_on_absent(run_module, tmp_path):
    missing = str(tmp_path / "Qwen3-8B_slime")
    result, failed = run_module(module, {"path": missing, "fail_on": ["absent"]})
    assert failed
    assert (
        missing in result["msg"] and "does not exist" in result["msg"] and "run the conversion first" in result["msg"]
    )


def test_fail_on_nested_release(run_module, tmp_path):
    save = conversion(tmp_path)
    ckpt_dir(os.path.join(save, "release", "iter_0000001"))
    result, failed = run_module(module, {"path": save, "fail_on": ["interrupted"]})
    assert failed and "nested_release" in result["msg"] and save in result["msg"]


def test_fail_on_stale(run_module, tmp_path):
    save = conversion(tmp_path, fingerprint="sha256:old")
    result, failed = run_module(module, {"path": save, "fingerprint": "sha256:new", "fail_on": ["stale"]})
    assert failed
    assert "sha256:old" in result["msg"] and "sha256:new" in result["msg"]
    assert os.path.join(save, ".mtslime_conversion.json") in result["msg"]
    assert "move_aside_if: [stale]" in result["msg"]


def test_fail_on_complete(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "fail_on": ["complete"]})
    assert failed and save in result["msg"] and "move it aside or choose another path" in result["msg"]


def test_fail_on_not_matching_passes(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "fail_on": ["absent", "interrupted"]})
    assert not failed and result["state"] == "complete"


def test_stale_needs_fingerprint(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(module, {"path": save, "move_aside_if": ["stale"]})
    assert failed and "fingerprint option" in result["msg"] and "move_aside_if" in result["msg"]


def test_record_and_move_exclusive(run_module, tmp_path):
    save = conversion(tmp_path)
    result, failed = run_module(
        module, {"path": save, "record_fingerprint": "x", "move_aside_if": ["interrupted"], "fail_on": ["stale"]}
    )
    assert failed
    assert "record_fingerprint and move_aside_if" in result["msg"]
    assert "fingerprint option" in result["msg"]  # both problems in one message


def test_state_is_not_replaced_by_path_info(tmp_path):
    # AnsibleModule.add_path_info would set state='directory' on any result with `path`
    save = conversion(tmp_path)
    result = mcore_checkpoint_task.CheckpointModule.add_path_info(None, {"path": save, "state": "complete"})
    assert result == {"path": save, "state": "complete"}


def test_a_plain_ansible_module_keeps_the_state_too(tmp_path):
    """supervise/tasks.run_here makes a plain AnsibleModule from module_kwargs(): main() gives it the same
    add_path_info, so its results keep `state` as the module's do."""
    save = conversion(tmp_path)
    with patch_module_args({"path": save}):
        plain = AnsibleModule(**mcore_checkpoint_task.module_kwargs())
    assert plain.add_path_info({"path": save, "state": "complete"})["state"] == "directory"
    kept = mcore_checkpoint_task.keep_results(plain)
    assert kept is plain
    assert plain.add_path_info({"path": save, "state": "complete"}) == {"path": save, "state": "complete"}
    with patch_module_args({"path": save}):
        made = mcore_checkpoint_task.CheckpointModule(**mcore_checkpoint_task.module_kwargs())
    assert mcore_checkpoint_task.keep_results(made) is made and "add_path_info" not in vars(made)


def test_a_torn_converted_checkpoint_is_interrupted_and_moved_aside(run_module, tmp_path):
    """The convert role's probe (expect: release, move_aside_if: [interrupted, stale]) on a shard cut to 5 bytes."""
    save = conversion(tmp_path)
    with open(os.path.join(save, "release", "__0_1.distcp"), "r+b") as handle:
        handle.truncate(5)
    result, failed = run_module(module, {"path": save, "expect": "release", "fail_on": ["interrupted"]})
    assert failed and result["signature"]["code"] == "torn_shards"
    assert "__0_1.distcp is 5 bytes, .metadata records" in result["msg"] and os.path.isdir(save)
    moved, failed = run_module(module, {"path": save, "expect": "release", "move_aside_if": ["interrupted"]})
    assert not failed and moved["moved_to"].startswith(save + ".interrupted-") and moved["moved_to"].endswith("Z")
    assert os.path.getsize(os.path.join(moved["moved_to"], "release", "__0_1.distcp")) == 5


def test_an_empty_metadata_json_in_release_is_interrupted(run_module, tmp_path):
    save = conversion(tmp_path)
    open(os.path.join(save, "release", "metadata.json"), "w").close()
    result, failed = run_module(module, {"path": save, "expect": "release"})
    assert not failed and result["state"] == "interrupted"
    assert "metadata.json is empty (0 bytes)" in result["message"]
    assert "the save stopped between .metadata and metadata.json" in result["message"]
