# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
name: cluster_recap
type: aggregate
short_description: Per training cluster recap, and progress lines while long tasks wait
version_added: "0.1.0"
description:
  - At the end of a run, prints one line per training cluster (the C(slime_cluster_info) fact set by the
    collection's facts play) saying whether it is up, its job and step when known, or which node failed, in which
    task, and why. Where the fast path asked the nodes (M(mtslime.posttrain.converged)), it also says that nothing
    differed and every stage was skipped, or what differed on which node.
  - While a task retries (C(until)), prints the C(progress) line its result carries, so long waits (downloads,
    conversion, Ray nodes joining, the first training step) show how far they are.
requirements:
  - enabled in ansible.cfg (C(callbacks_enabled = mtslime.posttrain.cluster_recap))
"""

from ansible.plugins.callback import CallbackBase


def _short(text, limit=300):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mtslime.posttrain.cluster_recap"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.cluster_of = {}
        self.members = {}
        self.failures = {}
        self.jobs = {}
        self.answers = {}

    def _remember(self, result):
        host = result._host.get_name()
        facts = result._result.get("ansible_facts") or {}
        info = facts.get("slime_cluster_info")
        if isinstance(info, dict) and info.get("name"):
            self.cluster_of[host] = info["name"]
            self.members[info["name"]] = list(info.get("nodes") or [host])
        if result._result.get("submission_id") and "status" in result._result:
            self.jobs[self.cluster_of.get(host, host)] = result._result
        if result._task.action.rsplit(".", 1)[-1] == "converged" and result._task.args.get("state") != "recorded" \
                and "converged" in result._result:
            self.answers[host] = (result._result["converged"] is True, _short(result._result.get("why")))

    def v2_runner_on_ok(self, result):
        self._remember(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if ignore_errors:
            return
        host = result._host.get_name()
        self.failures.setdefault(host, (result._task.get_name(), _short(result._result.get("msg"))))

    def v2_runner_on_unreachable(self, result):
        if result._task.ignore_unreachable:  # the first play's probe; its own message follows
            return
        host = result._host.get_name()
        self.failures.setdefault(host, (result._task.get_name(), "unreachable: " + _short(result._result.get("msg"))))

    def v2_runner_retry(self, result):
        progress = result._result.get("progress")
        if progress:
            self._display.display("  [%s] %s" % (result._host.get_name(), _short(progress, 400)))

    def v2_playbook_on_stats(self, stats):
        if not self.members:
            return
        self._display.banner("CLUSTER RECAP")
        for cluster in sorted(self.members):
            nodes = self.members[cluster]
            failed = [node for node in nodes if node in self.failures]
            if failed:
                node = failed[0]
                task, msg = self.failures[node]
                line = "%s: FAILED (%d/%d node(s)) - %s, task '%s': %s" % (
                    cluster, len(failed), len(nodes), node, task, msg)
                color = "red"
            else:
                line = "%s: up (%s)" % (cluster, ", ".join(nodes))
                job = self.jobs.get(cluster)
                if job:
                    line += " - job %s %s" % (job.get("submission_id"), job.get("status"))
                color = "green"
            self._display.display(line + self._fast_path(nodes), color=color)

    def _fast_path(self, nodes):
        """What the fast path's probe answered for a cluster: '' where it did not ask every node."""
        answers = [(node,) + self.answers[node] for node in nodes if node in self.answers]
        differs = [(node, why) for node, converged, why in answers if not converged]
        if differs:
            return " - every stage ran, %s: %s" % differs[0]
        if answers and len(answers) == len(nodes):
            return " - nothing differs from the last full run: every stage skipped"
        return ""
