"""The converged record (module_utils/rerun/record.py) and the module that writes and replays it
(plugins/modules/converged.py): what makes a node's last full run stand for this run, and what does not."""
from __future__ import annotations

import datetime
import json
import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.rerun import record
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files as supervisor_files
from ansible_collections.mtslime.posttrain.plugins.modules import converged

ID = "0123456789abcdef" * 4
MOUNTINFO = ("812 790 0:52 / / rw,relatime master:1 - overlay overlay rw\n"
             "830 812 8:1 /var/lib/docker/containers/%s/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw\n" % ID)
NOW = datetime.datetime(2026, 12, 5, 6, 0, 0, tzinfo=datetime.timezone.utc)


def test_the_container_id_is_read_from_docker_s_mounts_and_none_outside_a_container():
    assert record.container_id(MOUNTINFO) == ID
    assert record.container_id("24 1 8:1 / / rw - ext4 /dev/sda1 rw\n") is None
    assert record.container_id("") is None


def _record(**changes):
    return dict(record.document("inputs-1", ID, [{"stage": "data", "task": "dataset_check", "args": {"files": []}}],
                                None), **changes)


@pytest.mark.parametrize("changes, inputs, container, state, why", [
    ({}, "inputs-2", ID, None, "the inventory or the collection differs"),
    ({}, "inputs-1", "f" * 64, None,
     "the training container is not the one the last full run checked (0123456789ab, now ffffffffffff)"),
    ({}, "inputs-1", None, None, "now none"),
    ({"supervisor": "/s/state.json"}, "inputs-1", ID, None, "the supervisor has no state.json (/s/state.json)"),
    ({"supervisor": "/s/state.json"}, "inputs-1", ID,
     {"enabled": True, "last_check": "2026-12-05T05:00:00Z", "next_check": "2026-12-05T05:01:00Z", "interval": 60},
     "the supervisor's keeper has not checked since 2026-12-05T05:00:00Z"),
])
def test_a_record_does_not_stand_for_other_inputs_another_container_or_a_stopped_keeper(
        changes, inputs, container, state, why):
    assert why in record.precondition(_record(**changes), inputs, container, state, NOW)


def test_a_record_stands_when_everything_is_the_same_and_the_keeper_is_on_time():
    state = {"enabled": True, "last_check": "2026-12-05T05:59:30Z", "next_check": "2026-12-05T06:00:30Z",
             "interval": 60}
    assert record.precondition(_record(supervisor="/s/state.json"), "inputs-1", ID, state, NOW) == ""
    assert not supervisor_files.overdue(state, NOW)
    assert supervisor_files.overdue(dict(state, next_check="2026-12-05T04:00:00Z"), NOW)


@pytest.mark.parametrize("text, why", [
    (None, "no record of a full run on this node"),
    ("{torn", "is not JSON (torn or edited)"),
    (json.dumps({"schema_version": 0, "checks": []}), "of another version of the collection"),
    (json.dumps({"schema_version": record.SCHEMA_VERSION}), "lists no checks"),
])
def test_a_missing_torn_or_foreign_record_is_not_used(tmp_path, text, why):
    path = tmp_path / "converged.json"
    if text is not None:
        path.write_text(text)
    found, reason = record.load(str(path))
    assert found is None and why in reason


def test_the_replay_stops_at_the_first_check_that_fails_or_would_change():
    checks = [{"stage": s, "task": t, "args": {"n": i}} for i, (s, t) in enumerate(
        [("data", "dataset_check"), ("ray_head", "ray_start"), ("train_job", "ray_job"), ("retention", "x")])]
    seen = []

    def run(task, args, environment):  # pylint: disable=unused-argument
        seen.append((task, args))
        return {"ray_start": {"changed": True, "actions": ["ray stop", "ray start --head"]}}.get(task, {})

    stages, why = record.replay({"checks": checks}, run)
    assert why == "ray_head: would change (ray stop; ray start --head)"
    assert [task for task, _args in seen] == ["dataset_check", "ray_start"]
    assert all(args["_ansible_check_mode"] is True for _task, args in seen)
    assert stages == {"data": {"passed": True, "why": ""}, "ray_head": {"passed": False, "why": why[10:]}}


@pytest.mark.parametrize("result, passed", [
    ({}, True), ({"changed": False, "problems": []}, True), ({"failed": True, "msg": "x"}, False),
    ({"changed": True}, False), ({"problems": ["a.parquet: missing"]}, False),
])
def test_a_check_passes_only_when_it_neither_failed_nor_would_change_nor_found_problems(result, passed):
    assert record.check_passed(result)[0] is passed


def test_recording_twice_writes_once_and_the_probe_replays_the_recorded_task(run_module, tmp_path, monkeypatch):
    """The replay runs the real dataset_check task, in a child forked from the probe, on a file this test writes."""
    monkeypatch.setattr(record, "this_container", lambda mountinfo=record.MOUNTINFO: None)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"input": "q%d" % i, "label": "1"}) + "\n" for i in range(4)))
    path = str(tmp_path / "run" / "converged.json")
    args = {"state": "recorded", "path": path, "inputs": "inputs-1",
            "checks": [{"stage": "data", "task": "dataset_check",
                        "args": {"files": [str(data)], "input_key": "input", "label_key": "label",
                                 "min_rows": 1}}]}
    result, failed = run_module(converged, args, check_mode=True)
    assert not failed and result["written"] is True and not os.path.exists(path)
    result, failed = run_module(converged, args)
    # The record is a cache: writing it is not a change of the node.
    assert not failed and result["written"] is True and result["changed"] is False
    assert oct((tmp_path / "run" / "converged.json").stat().st_mode & 0o777) == "0o600"
    result, failed = run_module(converged, args)
    assert not failed and result["written"] is False and result["changed"] is False

    # The probe's children run the task's own main(), which must end as a module ends (run_module's patches of
    # AnsibleModule's exit_json and fail_json undone); the probe is called as main() calls it.
    monkeypatch.undo()
    monkeypatch.setattr(record, "this_container", lambda mountinfo=record.MOUNTINFO: None)
    probe = {"path": path, "inputs": "inputs-1", "timeout": 60}
    result = converged.probe(probe, None)
    assert result["converged"] is True, result
    assert result["stages"] == {"data": {"passed": True, "why": ""}}

    data.write_text(json.dumps({"question": "no input column"}) + "\n")
    result = converged.probe(probe, None)
    assert result["converged"] is False and result["why"].startswith("data: "), result

    result = converged.probe(dict(probe, inputs="inputs-2"), None)
    assert result["converged"] is False and "differs from the last full run" in result["why"]


def test_a_record_naming_a_task_the_supervisor_does_not_run_is_refused(run_module, tmp_path):
    result, failed = run_module(converged, {"state": "recorded", "path": str(tmp_path / "c.json"), "inputs": "i",
                                            "checks": [{"stage": "x", "task": "shell", "args": {}}]})
    assert failed and "checks name tasks the supervisor does not run: shell" in result["msg"]
    assert not (tmp_path / "c.json").exists()


def test_a_check_with_an_expectation_passes_only_when_its_result_says_so():
    expect = {"holds": True}
    assert record.check_passed({"holds": True, "changed": False}, expect) == (True, "")
    passed, why = record.check_passed({"holds": False, "actions": ["/data/models/Qwen3-8B lacks it"]}, expect)
    assert not passed and why == "holds is False, not True (/data/models/Qwen3-8B lacks it)"
