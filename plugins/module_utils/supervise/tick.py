# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""One check of the supervisor, run in the training container every train_job_supervise_interval seconds
(keeper.py starts it). On the head, under the job's lease (lease.py): the Ray head as ray_start keeps it, every
node back as the cluster needs, then the job as ray_job keeps it (the job plan, the crash-loop rule, the same
attempt records and manifests), word of its events (job_notify) and retention (checkpoint_retention), each
with the arguments its role gave it. On a worker: Ray joined again when its processes are gone (a restarted
container); a worker whose Ray runs is left to the head's view. Every decision goes to state.json and, when
it differs from the last, to decisions.log.
Standard library only; Python 3.8+."""
from __future__ import annotations

import os
import socket
import time

from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import SUCCEEDED
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.node_probe import probe_node
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import read_json_object
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files, lease, tasks

# The decisions (state.json `decision.action`, docs/recovery.md)
DISABLED = "disabled"
NOT_CONFIGURED = "not_configured"
LEFT_TO_OTHER = "left_to_other_run"
RAY_STARTED = "ray_started"
RAY_FAILED = "ray_failed"
WAITING_FOR_NODES = "waiting_for_nodes"
KEPT = "kept"
SUBMITTED = "submitted"
FINISHED = "finished"
CRASH_LOOP_STOPPED = "crash_loop_stopped"
JOB_FAILED = "job_failed"
JOINED = "joined"
ACTIONS = (DISABLED, NOT_CONFIGURED, LEFT_TO_OTHER, RAY_STARTED, RAY_FAILED, WAITING_FOR_NODES, KEPT, SUBMITTED,
           FINISHED, CRASH_LOOP_STOPPED, JOB_FAILED, JOINED)


def _job_of(result):
    return {key: result.get(key) for key in ("submission_id", "status", "attempt", "resumed_from_iteration")
            if result.get(key) is not None}


def missing_nodes(result, expected_nodes):
    alive = set(n.get("ip") for n in result.get("nodes") or [] if n.get("alive"))
    return [ip for ip in expected_nodes if ip not in alive]


def job_decision(result):
    """(action, message) for a ray_job result."""
    if result.get("failed"):
        if (result.get("crash_loop") or {}).get("blocked"):
            return CRASH_LOOP_STOPPED, result.get("msg") or "the crash-loop rule refused to submit"
        return JOB_FAILED, result.get("msg") or "ray_job failed"
    if result.get("changed") and result.get("argv") is not None:
        return SUBMITTED, "submitted %s (attempt %s) %s" % (
            result.get("submission_id"), result.get("attempt"),
            "resuming from iteration %d" % result["resumed_from_iteration"]
            if result.get("resumed_from_iteration") is not None else "from the converted checkpoint")
    if result.get("status") == SUCCEEDED:
        return FINISHED, result.get("message") or "finished"
    return KEPT, "%s %s" % (result.get("submission_id") or "no job", result.get("status") or "")


class Check:
    """One check's inputs (config.json, state.json) and what it decides; `run` is tasks.run."""

    def __init__(self, directory, run=tasks.run, clock=time.time, probe=probe_node):
        self.directory = directory
        self.library = files.path(directory, files.LIBRARY)
        self.config = read_json_object(files.path(directory, files.CONFIG))
        self.previous = read_json_object(files.path(directory, files.STATE)) or {}
        self.run_task, self.clock, self.probe = run, clock, probe
        self.lost = dict(self.previous.get("lost") or {})
        self.extra = {}

    def task(self, name, **overrides):
        args = dict(self.config[name], **overrides)
        return self.run_task(self.library, name, args, environment=self.config.get("environment"))

    def head(self):
        config = self.config
        try:
            with lease.held(files.path(self.directory, files.LEASE), "supervisor", "a supervisor check", wait=0):
                return self._head_under_lease(config)
        except lease.LeaseBusy as busy:
            return LEFT_TO_OTHER, "%s; this check leaves the job to it" % busy

    def _head_under_lease(self, config):
        if not read_json_object(files.path(self.directory, files.CONFIG)).get("enabled"):
            return DISABLED, "supervision was disabled while this check waited"
        started = self.task("ray_start")
        if started.get("failed"):
            return RAY_FAILED, started.get("msg") or "ray_start failed"
        if started.get("changed"):
            return RAY_STARTED, "%s: %s; the job is looked at in the next check, once every node is back" % (
                started.get("action"), started.get("reason"))
        missing = missing_nodes(started, config["ray_start"].get("expected_nodes") or [])
        now = files.now_iso(self.clock())
        self.lost = {ip: self.lost.get(ip, now) for ip in missing}
        if missing or not started.get("ready"):
            self._notify(lost_workers=[{"ip": ip, "since": since} for ip, since in sorted(self.lost.items())])
            return WAITING_FOR_NODES, "waiting for node(s) %s to join the head again before the job is looked at" \
                % (", ".join(missing) or "(GPUs not all registered)")
        result = self.task("ray_job", lease_dir=None)  # this check holds the lease
        self.extra["job"] = _job_of(result)
        action, message = job_decision(result)
        self._notify(job=result)
        if config.get("checkpoint_retention") and not result.get("failed"):
            resumed = result.get("resumed_from_iteration")
            kept = self.task("checkpoint_retention", protect=[resumed] if resumed is not None else [])
            if kept.get("changed") or kept.get("failed"):
                self.extra["retention"] = kept.get("message") or kept.get("msg")
        return action, message

    def _notify(self, **inputs):
        if self.config.get("job_notify"):
            sent = self.task("job_notify", **inputs)
            if sent.get("actions"):
                self.extra["notified"] = sent["actions"]

    def worker(self):
        found = self.probe([])
        if found.get("processes"):
            return KEPT, "Ray runs on this node (%d processes)" % found["processes"]
        joined = self.task("ray_start")
        if joined.get("failed"):
            return RAY_FAILED, joined.get("msg") or "ray_start failed"
        return JOINED, "%s: %s" % (joined.get("action"), joined.get("reason"))

    def decide(self):
        if not self.config:
            return NOT_CONFIGURED, "no %s in %s: site.yml writes it" % (files.CONFIG, self.directory)
        if not self.config.get("enabled"):
            return DISABLED, "supervision is disabled (playbooks/stop.yml); site.yml enables it again"
        return self.head() if self.config.get("role") == "head" else self.worker()

    def record(self, action, message):
        now = self.clock()
        interval = int((self.config or {}).get("interval") or 60)
        decision = dict(self.extra, action=action, message=message, time=files.now_iso(now))
        state = {"schema_version": files.SCHEMA_VERSION, "host": socket.gethostname(),
                 "role": (self.config or {}).get("role"), "enabled": bool((self.config or {}).get("enabled")),
                 "interval": interval, "last_check": files.now_iso(now), "next_check": files.now_iso(now + interval),
                 "decision": decision, "lost": self.lost,
                 "last_change": self.previous.get("last_change")}
        before = self.previous.get("decision") or {}
        if (before.get("action"), before.get("message")) != (action, message) or "retention" in decision:
            state["last_change"] = decision["time"]
            files.log_decision(self.directory, dict(decision, host=state["host"], role=state["role"]))
        if os.path.isdir(self.directory):
            files.write_json(files.path(self.directory, files.STATE), state, mode=0o640)
        return state


def main(directory):
    """(exit status, the decision's line) of one check."""
    check = Check(directory)
    action, message = check.decide()
    check.record(action, message)
    return (0 if action not in (RAY_FAILED, JOB_FAILED) else 1), "%s: %s" % (action, message)
