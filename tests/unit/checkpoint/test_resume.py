"""The one resume rule (checkpoint/resume.py: resume_plan / apply_resume_plan) on training save dirs rebuilt from real
torch_dist metadata: every branch, the moves (never a deletion) and the tracker rewrite, check mode."""
from __future__ import annotations

import os

import pytest
from ckpt_layouts import LAYOUTS, RECENT, ckpt_dir, cut, data_state, listing, tracker, training

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import layout
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import resume as resume_rule


def read_tracker(save):
    with open(os.path.join(save, layout.TRACKER)) as handle:
        return handle.read()


def accounted_for(before, save, moved):
    """Every file that existed before is still at its place or under a path the apply reported."""
    after = set(listing(save))
    moved_map = {os.path.relpath(m["path"], save): os.path.relpath(m["to"], save) for m in moved}
    missing = []
    for name in before:
        if name in after:
            continue
        owner = next((src for src in moved_map if name == src or name.startswith(src + os.sep)), None)
        if owner is None or not os.path.exists(os.path.join(save, moved_map[owner] + name[len(owner):])):
            missing.append(name)
    return missing


def resume(save):
    plan = resume_rule.resume_plan(save)
    before = listing(save)
    done = resume_rule.apply_resume_plan(plan)
    assert accounted_for(before, save, done["moved"]) == []
    again = resume_rule.resume_plan(save)
    assert again["moves"] == [] and again["tracker"] is None, "applying the plan settles the save dir"
    assert again["resume_iteration"] == plan["resume_iteration"]
    return plan, done


def moved_names(plan):
    return [(os.path.basename(m["path"]), m["reason"]) for m in plan["moves"]]


def test_absent_save_dir(tmp_path):
    plan = resume_rule.resume_plan(str(tmp_path / "none"))
    assert plan["resume_iteration"] is None and plan["moves"] == [] and plan["tracker"] is None
    assert "does not exist yet" in plan["message"] and plan["warnings"] == []
    assert resume_rule.apply_resume_plan(plan) == {"actions": [], "moved": []}


def test_empty_save_dir(tmp_path):
    (tmp_path / "run").mkdir()
    plan = resume_rule.resume_plan(str(tmp_path / "run"))
    assert plan["resume_iteration"] is None and plan["moves"] == [] and "no checkpoint yet" in plan["message"]


def test_a_file_instead_of_a_dir_is_a_warning(tmp_path):
    (tmp_path / "run").write_text("x")
    plan = resume_rule.resume_plan(str(tmp_path / "run"))
    assert plan["resume_iteration"] is None and plan["moves"] == [] and "not a directory" in plan["warnings"][0]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_sound_save_dir_resumes_from_the_tracker_and_moves_nothing(tmp_path, layout):
    save = training(tmp_path, layout=layout)
    plan = resume_rule.resume_plan(save)
    assert plan["resume_iteration"] == 39 and plan["data_state"] is True
    assert plan["moves"] == [] and plan["tracker"] is None and plan["warnings"] == []
    assert plan["dataset_state_file"] == os.path.join(save, "rollout", "global_dataset_state_dict_39.pt")
    assert plan["message"] == (
        "resuming from iteration 39 of %s: the newest complete iteration with slime's data cursor." % save)
    assert resume_rule.apply_resume_plan(plan) == {"actions": [], "moved": []}


def test_tracker_iteration_without_metadata(tmp_path):
    save = training(tmp_path)
    os.remove(os.path.join(save, "iter_0000039", ".metadata"))
    plan, done = resume(save)
    assert plan["resume_iteration"] == 19 and plan["data_state"] is True
    assert moved_names(plan) == [("iter_0000039", "incomplete"), ("global_dataset_state_dict_39.pt", "incomplete"),
                                 (layout.TRACKER, "incomplete")]
    assert plan["tracker"] == {"before": "39", "after": "19"}
    assert "iter_0000039/ is incomplete: .metadata is missing" in plan["moves"][0]["why"]
    assert read_tracker(save) == "19"
    assert [os.path.basename(m["to"]).split("-")[0] for m in done["moved"]] == [
        "iter_0000039.incomplete", "global_dataset_state_dict_39.pt.incomplete", layout.TRACKER + ".incomplete"]
    assert all(os.path.exists(m["to"]) for m in done["moved"])
    assert any(a.startswith("wrote %s: 19 (was '39')" % os.path.join(save, layout.TRACKER)) for a in done["actions"])


@pytest.mark.parametrize("size", [0, 5])
def test_torn_shards_of_the_tracker_iteration(tmp_path, size):
    save = training(tmp_path, iters=(3, 6, 9), latest=9, layout=RECENT)
    cut(os.path.join(save, "iter_0000009", "__0_0.distcp"), size)
    cut(os.path.join(save, "iter_0000009", "__1_1.distcp"), size)
    plan, dummy = resume(save)
    assert plan["resume_iteration"] == 6
    assert "__0_0.distcp is %d bytes, .metadata records" % size in plan["moves"][0]["why"]
    assert "shards are torn" in plan["moves"][0]["why"]
    assert read_tracker(save) == "6"


def test_newest_iteration_without_data_cursor(tmp_path):
    save = training(tmp_path, iters=(19, 39))
    os.remove(os.path.join(save, "rollout", "global_dataset_state_dict_39.pt"))
    plan, dummy = resume(save)
    assert plan["resume_iteration"] == 19 and plan["data_state"] is True
    assert moved_names(plan) == [("iter_0000039", "no-data-state"), (layout.TRACKER, "no-data-state")]
    assert "slime's data cursor rollout/global_dataset_state_dict_39.pt is missing" in plan["moves"][0]["why"]
    assert plan["warnings"] == []
    assert read_tracker(save) == "19"


def test_no_iteration_has_a_data_cursor_resumes_the_newest_with_a_warning(tmp_path):
    save = training(tmp_path, dataset_state=False)
    plan = resume_rule.resume_plan(save)
    assert plan["resume_iteration"] == 39 and plan["data_state"] is False and plan["moves"] == []
    assert plan["tracker"] is None
    assert len(plan["warnings"]) == 1 and "the prompt order starts over" in plan["warnings"][0]
    assert "it has no data cursor" in plan["message"]


def test_an_empty_data_cursor_counts_as_none(tmp_path):
    save = training(tmp_path)
    data_state(save, 39, payload=b"")
    plan = resume_rule.resume_plan(save)
    assert plan["resume_iteration"] == 19
    assert moved_names(plan) == [("iter_0000039", "no-data-state"),
                                 ("global_dataset_state_dict_39.pt", "no-data-state"),
                                 (layout.TRACKER, "no-data-state")]


def test_nothing_complete_starts_from_the_converted_checkpoint(tmp_path):
    save = training(tmp_path, iters=(3, 6), latest=6)
    os.remove(os.path.join(save, "iter_0000003", "metadata.json"))
    cut(os.path.join(save, "iter_0000006", "__0_1.distcp"), 5)
    plan, done = resume(save)
    assert plan["resume_iteration"] is None and plan["data_state"] is False
    assert moved_names(plan) == [("iter_0000006", "incomplete"), ("iter_0000003", "incomplete"),
                                 ("global_dataset_state_dict_3.pt", "incomplete"),
                                 ("global_dataset_state_dict_6.pt", "incomplete"), (layout.TRACKER, "incomplete")]
    assert plan["tracker"] == {"before": "6", "after": None}
    assert "starts from the converted checkpoint" in plan["warnings"][0]
    assert plan["message"].startswith(plan["warnings"][0])
    assert not os.path.exists(os.path.join(save, layout.TRACKER)) and len(done["moved"]) == 5


def test_an_empty_tracker_is_rewritten(tmp_path):
    save = training(tmp_path)
    tracker(save, "")
    plan, done = resume(save)
    assert plan["resume_iteration"] == 39 and plan["tracker"] == {"before": None, "after": "39"}
    assert moved_names(plan) == [(layout.TRACKER, "incomplete")] and "the tracker is empty" in plan["moves"][0]["why"]
    assert read_tracker(save) == "39" and os.path.getsize(done["moved"][0]["to"]) == 0


def test_no_tracker_is_written(tmp_path):
    save = training(tmp_path, latest=None)
    plan, dummy = resume(save)
    assert plan["resume_iteration"] == 39 and plan["moves"] == [] and plan["tracker"] == {"before": None, "after": "39"}
    assert read_tracker(save) == "39"


def test_a_garbage_tracker_is_moved_aside_and_rewritten(tmp_path):
    save = training(tmp_path)
    tracker(save, "thirty-nine")
    plan, dummy = resume(save)
    assert plan["tracker"] == {"before": "thirty-nine", "after": "39"}
    assert moved_names(plan) == [(layout.TRACKER, "incomplete")]


def test_a_complete_iteration_newer_than_the_tracker_with_its_cursor_is_used(tmp_path):
    save = training(tmp_path, iters=(19, 39), latest=19)
    plan, dummy = resume(save)
    assert plan["resume_iteration"] == 39 and plan["tracker"] == {"before": "19", "after": "39"}
    assert read_tracker(save) == "39"


def test_older_incomplete_iterations_are_left_alone(tmp_path):
    save = training(tmp_path, iters=(19, 39))
    ckpt_dir(os.path.join(save, "iter_0000009"), metadata_json=False)
    plan = resume_rule.resume_plan(save)
    assert plan["resume_iteration"] == 39 and plan["moves"] == []
    assert [r["iteration"] for r in plan["iterations"] if not r["complete"]] == [9]


def test_a_release_tracker_is_not_touched(tmp_path):
    save = str(tmp_path / "c")
    ckpt_dir(os.path.join(save, "release"))
    tracker(save, "release")
    plan = resume_rule.resume_plan(save)
    assert plan["resume_iteration"] is None and plan["moves"] == [] and plan["tracker"] is None
    assert "tracker 'release'" in plan["message"]


def test_check_mode_predicts_and_changes_nothing(tmp_path):
    save = training(tmp_path)
    os.remove(os.path.join(save, "iter_0000039", ".metadata"))
    before = listing(save)
    plan = resume_rule.resume_plan(save)
    actions = resume_rule.describe_actions(plan, check_mode=True)
    assert actions[0].startswith("would move %s aside to %s.incomplete-" % (
        os.path.join(save, "iter_0000039"), os.path.join(save, "iter_0000039")))
    assert actions[-1] == "would write %s/%s: 19" % (save, layout.TRACKER)
    assert listing(save) == before and read_tracker(save) == "39"
    assert all(m["to"].startswith(m["path"] + ".") for m in plan["moves"])


def test_apply_refuses_when_a_job_saved_since_the_plan(tmp_path):
    save = training(tmp_path)
    os.remove(os.path.join(save, "iter_0000039", ".metadata"))
    plan = resume_rule.resume_plan(save)
    tracker(save, "59")
    with pytest.raises(resume_rule.ResumeError, match="changed since the resume plan"):
        resume_rule.apply_resume_plan(plan)
    assert os.path.isdir(os.path.join(save, "iter_0000039"))


def test_a_move_already_done_is_reported_not_repeated(tmp_path):
    save = training(tmp_path)
    os.remove(os.path.join(save, "iter_0000039", ".metadata"))
    plan = resume_rule.resume_plan(save)
    os.rename(os.path.join(save, "rollout", "global_dataset_state_dict_39.pt"), os.path.join(save, "elsewhere.pt"))
    done = resume_rule.apply_resume_plan(plan)
    assert any(a.endswith("global_dataset_state_dict_39.pt is already gone, nothing to move") for a in done["actions"])
    assert read_tracker(save) == "19"


def test_a_failed_move_names_the_path_and_keeps_what_was_done(tmp_path, monkeypatch):
    save = training(tmp_path)
    os.remove(os.path.join(save, "iter_0000039", ".metadata"))
    plan = resume_rule.resume_plan(save)

    def refuse(path, reason, now=None):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(resume_rule.aside, "move_aside", refuse)
    with pytest.raises(resume_rule.ResumeError) as caught:
        resume_rule.apply_resume_plan(plan)
    assert "cannot move %s aside: Permission denied; check the permissions of %s" % (
        os.path.join(save, "iter_0000039"), save) == str(caught.value)
    assert read_tracker(save) == "39"


def test_resume_reads_the_save_dir_through_layout_and_mcores_public_check_only():
    """resume.py lists iterations and cursors with layout.py and judges completeness with mcore.py's public
    functions: no private helper of mcore, no listing of its own."""
    import ast

    with open(resume_rule.__file__) as handle:
        tree = ast.parse(handle.read())
    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "mcore"}
    assert used and not [name for name in used if name.startswith("_")], used
    listings = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                and node.attr in ("listdir", "scandir", "glob", "walk")]
    assert not listings, "resume.py lists directories itself: %s" % listings


def test_resume_point_is_the_plans_resume_iteration(tmp_path):
    save = training(tmp_path, iters=(19, 39, 59), latest=59)
    os.remove(os.path.join(save, "rollout", "global_dataset_state_dict_59.pt"))
    assert resume_rule.resume_point(save) == resume_rule.resume_plan(save)["resume_iteration"] == 39
    assert resume_rule.resume_point(str(tmp_path / "none")) is None
