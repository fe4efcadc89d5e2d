"""storage_lock: the lock file side (take, renew, take over, release), the takeover rules (a dead pid on this
controller, an expired lease from another, a live holder waited for with who holds it), and the action's loop
on a real directory with a fake clock."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible_collections.mtslime.posttrain.plugins.action.storage_lock import acquire
from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock as storage_lease
from ansible_collections.mtslime.posttrain.plugins.modules import storage_lock as module
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.prepare import lock_rules
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter
from fake_clock import Clock


def holder(run="run1", node="node1", controller="ctl", pid=None, start=None):
    pid = os.getpid() if pid is None else pid
    return {"token": "%s/%s" % (run, node), "run_id": run, "node": node, "controller": controller,
            "controller_pid": pid, "controller_pid_start": lock_rules.process_start(pid) if start is None else start}


def dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_take_renew_release(tmp_path):
    lock = str(tmp_path / "model.lock")
    status, record = storage_lease.acquire(lock, holder(), 300, "downloading", {"jid": "1.2"}, now=100)
    assert status == "taken" and record["since"] == 100 and record["doing_data"] == {"jid": "1.2"}
    status, record = storage_lease.acquire(lock, holder(), 300, now=150)
    assert status == "ours" and record["renewed"] == 150 and record["since"] == 100
    status, record = storage_lease.acquire(lock, holder(run="run2"), 300, now=160)
    assert status == "held" and record["run_id"] == "run1"
    storage_lease.renew(lock, "run1/node1", doing="50% done", now=170)
    assert storage_lease.read(lock)["doing"] == "50% done"
    with pytest.raises(LookupError):
        storage_lease.renew(lock, "run2/node1")
    assert storage_lease.release(lock, "run2/node1")[0] is False and os.path.isdir(lock)
    assert storage_lease.release(lock, "run1/node1")[0] is True and not os.path.exists(lock)


def test_take_over_only_the_dead_holder(tmp_path):
    lock = str(tmp_path / "ckpt.lock")
    storage_lease.acquire(lock, holder(run="dead"), 300, "converting", {"jid": "9.9"}, now=0)
    # A second waiter that also judged "dead/node1" dead comes too late: the lock is the first's now.
    status, previous = storage_lease.take_over(lock, "dead/node1", holder(run="first"), 300, now=10)
    assert status == "taken" and previous["doing_data"] == {"jid": "9.9"}
    status, current = storage_lease.take_over(lock, "dead/node1", holder(run="second"), 300, now=11)
    assert status == "held" and current["run_id"] == "first"


def test_a_lock_without_record_is_dead_after_a_minute(tmp_path):
    lock = tmp_path / "data.lock"
    lock.mkdir()
    record = storage_lease.read(str(lock))
    mtime = os.stat(lock).st_mtime
    assert lock_rules.judge(record, holder(run="me"), mtime + 10)[0] == lock_rules.LIVE
    assert lock_rules.judge(record, holder(run="me"), mtime + 61)[0] == lock_rules.UNKNOWN_DEAD
    status, dummy = storage_lease.take_over(str(lock), "", holder(run="me"), 300, now=mtime + 61)
    assert status == "taken" and storage_lease.read(str(lock))["run_id"] == "me"


def test_rule_dead_pid_on_this_controller():
    record = dict(holder(run="old", pid=dead_pid()), renewed=0, lease=300)
    verdict, reason = lock_rules.judge(record, holder(run="new"), 10)
    assert verdict == lock_rules.DEAD and "no longer runs" in reason


def test_rule_reused_pid_is_dead():
    record = dict(holder(run="old", pid=os.getpid(), start=1), renewed=0, lease=300)
    verdict, reason = lock_rules.judge(record, holder(run="new"), 10)
    assert verdict == lock_rules.DEAD and "another process" in reason


def test_rule_live_pid_on_this_controller_even_with_an_old_lease():
    record = dict(holder(run="old"), renewed=0, lease=300)
    assert lock_rules.judge(record, holder(run="new"), 10_000)[0] == lock_rules.LIVE


def test_rule_other_controller_lease():
    record = dict(holder(run="old", controller="elsewhere", pid=1), renewed=1000, lease=300)
    assert lock_rules.judge(record, holder(run="new"), 1200) == (lock_rules.LIVE, "its lease runs 1m40s more")
    verdict, reason = lock_rules.judge(record, holder(run="new"), 1400)
    assert verdict == lock_rules.EXPIRED and "lease ran out 1m40s ago" in reason


def test_describe_names_holder_since_and_doing():
    record = dict(holder(run="r7", node="n3", controller="ctl", pid=42), since=0, doing="converting, 30%")
    text = lock_rules.describe(record, 95)
    assert text == ("held by run r7 of node n3 (controller ctl, pid 42) since 1970-01-01 00:00:00 UTC (1m35s ago), "
                    "doing: converting, 30%")


def loop(tmp_path, mine, timeout=120, on_call=None):
    """The action's loop against the module on a real directory, with a fake clock."""
    clock, said = Clock(1000.0), []

    def execute(margs):
        if on_call:
            on_call(clock.now)
        return module.run(dict({"state": "acquired", "lease": 300, "doing": "", "doing_data": None,
                                "take_over": None}, **margs), False, now=clock.now)

    waiter = Waiter(lambda _n, a: execute(a), said.append, clock=clock, sleep=clock.sleep)
    margs = {"path": str(tmp_path / "m.lock"), "holder": mine}
    return acquire(execute, waiter, mine, margs, timeout, 5), said, clock


def test_action_takes_over_a_dead_run_at_once(tmp_path):
    storage_lease.acquire(str(tmp_path / "m.lock"), holder(run="dead", pid=dead_pid()), 300, "converting",
                          {"jid": "77.1"}, now=999)
    result, said, clock = loop(tmp_path, holder(run="new"))
    assert result["status"] == "taken" and result["waited"] == 0 and said == []
    assert result["previous"]["doing_data"]["jid"] == "77.1" and "no longer runs" in result["taken_over_because"]
    assert "took over the lock" in result["warnings"][0]


def test_action_takes_over_an_expired_lease_of_another_controller(tmp_path):
    storage_lease.acquire(str(tmp_path / "m.lock"), holder(run="far", controller="other", pid=1), 300, now=0)
    result, said, dummy = loop(tmp_path, holder(run="new"))
    assert result["status"] == "taken" and "lease ran out" in result["taken_over_because"]


def test_action_waits_for_a_live_holder_saying_who_then_takes_it(tmp_path):
    lock = str(tmp_path / "m.lock")
    storage_lease.acquire(lock, holder(run="live"), 300, "converting, last: saving shard 3", now=900)

    def release_later(now):
        if now >= 1100 and os.path.exists(lock):
            storage_lease.release(lock, "live/node1")

    result, said, clock = loop(tmp_path, holder(run="new"), on_call=release_later)
    assert result["status"] == "taken" and result["waited"] == 100
    assert len(said) >= 4, said  # at 0, 30, 60, 90 s and when taken
    assert "held by run live of node node1" in said[0] and "doing: converting, last: saving shard 3" in said[0]
    assert said[-1].startswith("took the lock") and "(after 1m40s)" in said[-1]


def test_action_gives_up_after_the_timeout_naming_the_holder(tmp_path):
    storage_lease.acquire(str(tmp_path / "m.lock"), holder(run="live"), 300, "downloading", now=900)
    result, said, dummy = loop(tmp_path, holder(run="new"), timeout=60)
    assert result["failed"] and "gave up after 1m00s" in result["msg"]
    assert "held by run live" in result["msg"] and "doing: downloading" in result["msg"]
    assert "_lock_timeout" in result["msg"]


def test_module_main_release_and_check_mode(tmp_path, run_module):
    lock = str(tmp_path / "m.lock")
    args = {"path": lock, "holder": holder()}
    result, failed = run_module(module, args, check_mode=True)
    assert not failed and result["status"] == "taken" and not os.path.exists(lock)
    result, failed = run_module(module, args)
    assert not failed and result["changed"] and json.load(open(os.path.join(lock, "holder.json")))["run_id"] == "run1"
    result, failed = run_module(module, dict(args, state="renewed", doing="half way"))
    assert not failed and result["holder"]["doing"] == "half way"
    result, failed = run_module(module, dict(args, state="released"))
    assert not failed and result["status"] == "released" and not os.path.exists(lock)
    result, failed = run_module(module, dict(args, state="renewed"))
    assert failed and "not held by run1/node1" in result["msg"]


def test_module_without_holder_says_to_use_the_action(tmp_path, run_module):
    result, failed = run_module(module, {"path": str(tmp_path / "m.lock")})
    assert failed and "through its action" in result["msg"]
