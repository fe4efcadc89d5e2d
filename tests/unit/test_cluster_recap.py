"""The cluster recap callback: one line per training cluster, with what the fast path's probe answered."""
from __future__ import annotations

import types

from ansible_collections.mtslime.posttrain.plugins.callback.cluster_recap import CallbackModule


class Display:
    def __init__(self):
        self.lines = []

    def banner(self, text):
        self.lines.append("== " + text)

    def display(self, text, color=None):
        self.lines.append(text)


def result(host, action, res, args=None, task="a task"):
    return types.SimpleNamespace(
        _host=types.SimpleNamespace(get_name=lambda: host), _result=res,
        _task=types.SimpleNamespace(action=action, args=args or {}, get_name=lambda: task, ignore_unreachable=False))


def recap(*results, failed=()):
    callback = CallbackModule()
    callback._display = Display()  # pylint: disable=protected-access
    for one in results:
        callback.v2_runner_on_ok(one)
    for one in failed:
        callback.v2_runner_on_failed(one)
    callback.v2_playbook_on_stats(None)
    return callback._display.lines  # pylint: disable=protected-access


def placed(host, cluster, nodes):
    return result(host, "ansible.builtin.set_fact",
                  {"ansible_facts": {"slime_cluster_info": {"name": cluster, "nodes": nodes}}})


def probed(host, converged, why):
    return result(host, "mtslime.posttrain.converged", {"converged": converged, "why": why, "stages": {}})


def test_each_cluster_says_what_the_fast_path_found():
    lines = recap(
        placed("n1", "pair", ["n1", "n2"]), placed("n2", "pair", ["n1", "n2"]), placed("n3", "n3", ["n3"]),
        placed("n4", "n4", ["n4"]),
        probed("n1", True, "nothing differs from the last full run (6 checks passed)"),
        probed("n2", False, "data: dataset_check: 1 problem in 1 of 3 files"), probed("n3", True, "nothing differs"),
        result("n4", "mtslime.posttrain.ray_job", {"submission_id": "slime-1", "status": "RUNNING"}),
        # the record's result (state recorded) is no answer of the probe
        result("n4", "mtslime.posttrain.converged", {"converged": False, "why": "recorded 6 checks", "written": True},
               args={"state": "recorded"}))
    assert lines == [
        "== CLUSTER RECAP",
        "n3: up (n3) - nothing differs from the last full run: every stage skipped",
        "n4: up (n4) - job slime-1 RUNNING",
        "pair: up (n1, n2) - every stage ran, n2: data: dataset_check: 1 problem in 1 of 3 files",
    ]


def test_a_failed_cluster_names_its_failure_and_what_the_probe_found():
    lines = recap(placed("n1", "n1", ["n1"]), probed("n1", False, "ray_head: would change (ray start --head)"),
                  failed=[result("n1", "mtslime.posttrain.ray_start", {"msg": "port 6379 is taken"},
                                 task="Start the Ray head")])
    assert lines[1] == ("n1: FAILED (1/1 node(s)) - n1, task 'Start the Ray head': port 6379 is taken - every stage "
                        "ran, n1: ray_head: would change (ray start --head)")
