"""The prepare flow's decisions (plugin_utils/prepare/flow.py): verify when another run finished, adopt the
producer an interrupted run of this node left running (or that finished), produce otherwise; and
move_into_place, its last step (what was there is moved aside to a name aside.py gives)."""
from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.filter.prepare import slime_prepare_adoptable, slime_prepare_job_id
from ansible_collections.mtslime.posttrain.plugins.modules import move_into_place
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.prepare.flow import decide, producer_job_id

TAKEN_OVER = {"status": "taken", "waited": 0,
              "previous": {"run_id": "r1", "node": "n1", "doing_data": {"jid": "123.45", "temp": "/x.converting"}}}


def test_done_after_waiting_only_verifies():
    decision = decide(True, {"status": "taken", "waited": 42.0}, "n1")
    assert decision["action"] == "verify" and "another run finished it while this one waited" in decision["why"]


def test_done_without_waiting_only_verifies():
    assert decide(True, {"status": "taken", "waited": 0}, "n1")["action"] == "verify"


def test_done_wins_over_a_job_to_adopt():
    assert decide(True, TAKEN_OVER, "n1", {"finished": False, "alive": True})["action"] == "verify"


def test_running_job_of_a_dead_run_is_adopted():
    decision = decide(False, TAKEN_OVER, "n1", {"finished": False, "alive": True, "progress": "running 0:01:00"})
    assert decision == {"action": "adopt", "jid": "123.45", "why": decision["why"]}
    assert "still runs (running 0:01:00)" in decision["why"] and "instead of starting a second one" in decision["why"]


def test_finished_job_of_a_dead_run_is_adopted_for_its_output():
    decision = decide(False, TAKEN_OVER, "n1", {"finished": True, "job_failed": False})
    assert decision["action"] == "adopt" and "finished: checking its output" in decision["why"]


def test_failed_died_or_unknown_job_is_produced_again():
    assert decide(False, TAKEN_OVER, "n1", {"finished": True, "job_failed": True})["action"] == "produce"
    died = decide(False, TAKEN_OVER, "n1", {"finished": False, "alive": False})
    assert died["action"] == "produce" and "died" in died["why"]
    gone = decide(False, TAKEN_OVER, "n1", {"msg": "no status file"})
    assert gone["action"] == "produce" and "left no status" in gone["why"]


def test_a_job_of_another_node_is_not_adoptable():
    assert slime_prepare_adoptable(TAKEN_OVER, "n2") == ""
    assert slime_prepare_adoptable(TAKEN_OVER, "n1") == "123.45"
    assert decide(False, TAKEN_OVER, "n2", None)["action"] == "produce"


def test_no_previous_holder_produces():
    assert decide(False, {"status": "taken", "waited": 0}, "n1") == {
        "action": "produce", "jid": None, "why": "it is missing or fails its check"}


def args(src, dest, **extra):
    base = {"src": str(src), "dest": str(dest), "reason": "failed-check", "merge": False, "drop": []}
    base.update(extra)
    return base


def test_move_moves_the_old_copy_aside_and_drops_markers(tmp_path, run_module):
    src, dest = tmp_path / "model.partial", tmp_path / "model"
    src.mkdir()
    (src / "config.json").write_text("new")
    (src / ".mtslime-expected-bytes").write_text("3")
    dest.mkdir()
    (dest / "config.json").write_text("old")
    result, failed = run_module(move_into_place, args(src, dest, drop=[".mtslime-expected-bytes"]))
    assert not failed and result["changed"]
    aside = result["moved_aside"][0]["to"]
    assert aside.startswith(str(dest) + ".failed-check-") and open(aside + "/config.json").read() == "old"
    assert sorted(os.listdir(dest)) == ["config.json"] and not src.exists()
    assert "moved %s aside to %s" % (dest, aside) in result["actions"]


def test_move_check_mode_changes_nothing(tmp_path, run_module):
    src, dest = tmp_path / "a.tmp", tmp_path / "a"
    src.mkdir()
    dest.mkdir()
    result, failed = run_module(move_into_place, args(src, dest), check_mode=True)
    assert not failed and result["changed"] and src.exists() and dest.exists()
    assert result["moved_aside"][0]["to"].startswith(str(dest) + ".failed-check-")


def test_move_merge_keeps_identical_and_moves_differing_aside(tmp_path, run_module):
    dest = tmp_path / "data"
    src = dest / ".mtslime-extract"
    src.mkdir(parents=True)
    (dest / "same.jsonl").write_text("1")
    (dest / "edited.jsonl").write_text("mine")
    (src / "same.jsonl").write_text("1")
    (src / "edited.jsonl").write_text("theirs")
    (src / "new.jsonl").write_text("n")
    result, failed = run_module(move_into_place, args(src, dest, merge=True, reason="replaced"))
    assert not failed
    assert [a["path"] for a in result["moved_aside"]] == [str(dest / "edited.jsonl")]
    assert open(result["moved_aside"][0]["to"]).read() == "mine"
    assert (dest / "edited.jsonl").read_text() == "theirs" and (dest / "new.jsonl").read_text() == "n"
    assert not src.exists()


def test_move_without_src_is_a_no_op(tmp_path, run_module):
    result, failed = run_module(move_into_place, args(tmp_path / "none", tmp_path / "x"))
    assert not failed and not result["changed"]


def test_the_producer_job_is_the_async_result_job_id_or_none_for_a_foreground_producer():
    assert producer_job_id({"ansible_job_id": 123.45, "started": 1, "finished": 0}) == "123.45"
    assert producer_job_id({}) == "" and producer_job_id(None) == "" and slime_prepare_job_id(None) == ""


@pytest.mark.parametrize("result, how", [
    ({"changed": True, "rc": 0, "stdout": ""}, "did not run in the background"),
    ({"changed": False, "skipped": True, "false_condition": "x"}, "was skipped"),
])
def test_a_producer_result_without_a_job_id_is_refused_naming_the_option(result, how):
    with pytest.raises(AnsibleFilterError) as caught:
        slime_prepare_job_id(result)
    assert str(caught.value).startswith("_prepare_job: ") and how in str(caught.value)
    assert "async: <seconds> and poll: 0" in str(caught.value)
