"""tasks.run_forked: the fast path's replay of a task in a child forked from the module's process gives the result
a process of its own from lib.zip gives (tasks.run), and says how a child that hangs, crashes or exits ended."""
from __future__ import annotations

import os
import time
import types

import pytest
from artifacts.test_dataset_check import verl_rows, write_jsonl, write_parquet

from ansible.module_utils import basic
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import bundle, tasks


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("supervisor") / "lib.zip"
    path.write_bytes(bundle.build(bundle.payload_entries()))
    return str(path)


def without_invocation(result):
    return {k: v for k, v in result.items() if k != "invocation"}


def fake_task(monkeypatch, main, spec=None):
    """TASKS["fake"]: a task module whose main is `main(module)`."""
    task = types.SimpleNamespace(main=main, module_kwargs=lambda: {"argument_spec": spec or {},
                                                                   "supports_check_mode": True})
    monkeypatch.setitem(tasks.TASKS, "fake", task)


def test_a_forked_task_gives_the_result_its_own_process_gives(library, tmp_path):
    train = write_parquet(tmp_path / "train.parquet", verl_rows(12))
    good = {"files": [train], "_ansible_check_mode": True}
    no_label = write_jsonl(tmp_path / "no_label.jsonl", [{"prompt": "Solve %d" % i} for i in range(3)])
    bad = {"files": [train, no_label], "_ansible_check_mode": True}
    for args in (good, bad):
        forked = tasks.run_forked("dataset_check", args, timeout=120)
        assert "invocation" in forked, forked  # the module's own exit_json / fail_json
        assert without_invocation(forked) == without_invocation(tasks.run(library, "dataset_check", args, timeout=120))
    assert forked["failed"] is True and "column 'reward_model' missing" in forked["msg"]


def test_the_arguments_and_environment_reach_the_child_and_leave_this_process_as_it_was(monkeypatch):
    fake_task(monkeypatch, lambda module: module.exit_json(changed=False, seen=module.params["name"],
                                                           home=os.environ.get("MTSLIME_FORKED_TEST"),
                                                           check_mode=module.check_mode),
              spec={"name": {"type": "str", "required": True}})
    args_before, environment_before = basic._ANSIBLE_ARGS, dict(os.environ)  # pylint: disable=protected-access
    result = tasks.run_forked("fake", {"name": "n1", "_ansible_check_mode": True},
                              environment={"MTSLIME_FORKED_TEST": "/opt/x"}, timeout=30)
    assert (result["seen"], result["home"], result["check_mode"]) == ("n1", "/opt/x", True), result
    assert basic._ANSIBLE_ARGS is args_before and dict(os.environ) == environment_before  # pylint: disable=protected-access


def test_a_task_that_fails_is_a_failed_result_with_its_message(monkeypatch):
    fake_task(monkeypatch, lambda module: module.fail_json(msg="fake: the file is torn"))
    result = tasks.run_forked("fake", {}, timeout=30)
    assert result["failed"] is True and result["msg"] == "fake: the file is torn"


def test_a_task_that_crashes_says_how_it_ended(monkeypatch):
    def crash(module):
        raise RuntimeError("a bug in the check")
    fake_task(monkeypatch, crash)
    result = tasks.run_forked("fake", {}, timeout=30)
    assert result["failed"] is True
    assert result["msg"].startswith("fake ended with rc 70 and no result: ") and "RuntimeError: a bug in the check" \
        in result["msg"], result


def test_a_task_that_hangs_is_killed_at_the_timeout(monkeypatch):
    marker = "/tmp/mtslime-forked-hang-%d" % os.getpid()

    def hang(module):
        with open(marker, "w", encoding="utf-8") as handle:
            handle.write(str(os.getpid()))
        time.sleep(60)
    fake_task(monkeypatch, hang)
    try:
        result = tasks.run_forked("fake", {}, timeout=2)
        assert result == {"failed": True, "msg": "fake did not end within 2 s"}
        with open(marker, encoding="utf-8") as handle:
            child = int(handle.read())
        with pytest.raises(ProcessLookupError):  # killed and reaped
            os.kill(child, 0)
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
