"""The controller-side wait used by every waiting action plugin (plugins/plugin_utils/waiting.py)."""
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter, duration
from fake_clock import Clock


def make(results, say_every=30):
    clock = Clock()
    said = []
    calls = []

    def call(name, args):
        calls.append((name, args))
        return results[min(len(calls) - 1, len(results) - 1)]

    return Waiter(call, said.append, clock=clock, sleep=clock.sleep, say_every=say_every), said, calls, clock


def test_done_at_once_says_nothing():
    waiter, said, calls, dummy = make([{"done": True}])
    result, waited, timed_out = waiter.until("m", {}, lambda r: r["done"], lambda r: "x", timeout=60, interval=5)
    assert result == {"done": True} and not timed_out and said == [] and len(calls) == 1


def test_progress_is_said_at_once_then_at_least_every_30s():
    results = [{"done": False, "n": i} for i in range(30)] + [{"done": True, "n": 30}]
    waiter, said, calls, clock = make(results)
    result, waited, timed_out = waiter.until("m", {}, lambda r: r["done"], lambda r: "n=%d" % r["n"], 600, 5)
    assert not timed_out and result["n"] == 30
    assert said[0].startswith("n=0 (waited 0s of 10m00s)")
    # 150 s of waiting, 5 s apart: said at 0, 30, 60, 90, 120 and once when done
    assert len(said) == 6, said
    assert said[-1] == "n=30 (after 2m30s)"


def test_timeout_returns_the_last_result():
    waiter, said, calls, clock = make([{"done": False}])
    result, waited, timed_out = waiter.until("m", {}, lambda r: r["done"], lambda r: "held", timeout=20, interval=5)
    assert timed_out and waited >= 20 and said


def test_failed_result_stops_the_wait():
    waiter, said, calls, dummy = make([{"done": False}, {"failed": True, "msg": "boom"}])
    result, waited, timed_out = waiter.until("m", {}, lambda r: r.get("done"), lambda r: "x", 60, 5)
    assert result["failed"] and not timed_out and len(calls) == 2


def test_duration():
    assert [duration(s) for s in (0, 59, 60, 3599, 3600, 7325)] == ["0s", "59s", "1m00s", "59m59s", "1h00m", "2h02m"]
