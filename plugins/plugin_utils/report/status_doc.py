# Controller side: the status of each training cluster as data, in the shape that
# docs/status.md documents and docs/status.schema.json fixes (schema_version below).
# Built from what the nodes returned: ray_job state=status (the job, its attempts and a
# crash loop), train_progress (the last values, the first error), mcore_checkpoint
# expect=training (the save directory) and the attempt's manifest.
#
# Versioning: a field may be added without changing SCHEMA_VERSION; a field removed,
# renamed, or changed in type or meaning raises it.
from __future__ import annotations

import base64
import datetime
import json
import math
import re
import shlex

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules as job_rules
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files as supervisor_files

SCHEMA_VERSION = 2
# job.status beside Ray's (job/rules.py): no job of the experiment, or the job could not be read.
NO_JOB, NOT_READ = "NONE", "UNKNOWN"
NON_FINITE = ("nan", "inf", "-inf")
ATTEMPT_FIELDS = ("submission_id", "attempt", "status", "submitted_at", "ended_at", "first_step", "last_step",
                  "exception", "hint", "resumed_from_iteration", "data_state", "log")
CHECKPOINT_FIELDS = ("state", "tracker", "latest_iteration", "resume_iteration", "complete_iterations",
                     "incomplete_iterations", "dataset_state", "message")
THROUGHPUT = {
    "perf/tokens_per_gpu_per_sec": "rollout_tokens_per_gpu_per_s",
    "perf/actor_train_tok_per_s": "train_tokens_per_s",
    "perf/step_time": "step_time_s",
    "perf/wait_time_ratio": "wait_time_ratio",
}


def _failed(result):
    """A module failure, also under `failed_when: false` (status.yml reads with it, so that one cluster's
    failure does not stop the others): Ansible then sets failed to false, but the module's `msg` stays,
    and these modules (ray_job, train_progress, mcore_checkpoint, slurp) give no `msg` when they succeed."""
    return bool(result.get("failed") or (result.get("failed_when_result") is False and result.get("msg")))


def _usable(result):
    """A registered result that ran and did not fail, else None."""
    if not isinstance(result, dict) or not result or result.get("skipped") or _failed(result):
        return None
    return result


def _why_not(result, what):
    if not isinstance(result, dict) or not result:
        return "%s was not read" % what
    if result.get("skipped"):
        return "%s was not read (%s)" % (what, result.get("skip_reason") or "skipped")
    if _failed(result):
        return "%s: %s" % (what, result.get("msg") or "failed")
    return None


def metric(value):
    """A number, one of 'nan', 'inf', '-inf', or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, str) and value in NON_FINITE:
        return value
    return None


def _integer(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value):
    return value if isinstance(value, str) and value else None


# -- parts --------------------------------------------------------------------------------------
# Container states (playbooks/plays/container_state.yml) in which the head's job can be read: a running training
# container, or none needed (container_enabled: false: node).
STAGES_RUN = ("running", "node", "unknown")


def containers_part(containers):
    """{node: state} of the cluster's training containers, or None when they were not read."""
    if not isinstance(containers, dict):
        return None
    return {str(node): _text(state) or "unknown" for node, state in containers.items()}


def container_missing(containers, node):
    """Why `node` has no running training container (so no Ray and no job in it), or None."""
    state = (containers or {}).get(node) or "unknown"
    if state in STAGES_RUN:
        return None
    if state == "absent":
        return "no training container on %s" % node
    return "the training container of %s is %s, not running" % (node, state)


def job_part(job, missing=None):
    usable = _usable(job)
    if usable is None and missing:
        return {"submission_id": None, "attempt": None, "status": "NONE",
                "message": "%s: no Ray and no job run there" % missing, "start_time": None, "end_time": None,
                "driver_exit_code": None, "dashboard_url": None, "error": None}
    if usable is None:
        return {"submission_id": None, "attempt": None, "status": NOT_READ, "message": "", "start_time": None,
                "end_time": None, "driver_exit_code": None, "dashboard_url": None,
                "error": _why_not(job, "the job (ray_job state=status)")}
    return {
        "submission_id": _text(usable.get("submission_id")),
        "attempt": _integer(usable.get("attempt")),
        "status": _text(usable.get("status")) or NO_JOB,
        "message": usable.get("message") or "",
        "start_time": _text(usable.get("start_time")),
        "end_time": _text(usable.get("end_time")),
        "driver_exit_code": _integer(usable.get("driver_exit_code")),
        "dashboard_url": _text(usable.get("dashboard_url")),
        "error": None,
    }


def attempts_part(job):
    """ray_job's `attempts` (interface 3); from its `jobs` list when an older ray_job has none."""
    usable = _usable(job) or {}
    records = usable.get("attempts")
    if not isinstance(records, list):
        records = [
            {"submission_id": j.get("submission_id"), "attempt": j.get("attempt"), "status": j.get("status"),
             "submitted_at": j.get("start_time"), "ended_at": j.get("end_time")}
            for j in usable.get("jobs") or [] if isinstance(j, dict)
        ]
    attempts = []
    for record in records:
        if not isinstance(record, dict):
            continue
        item = {name: record.get(name) for name in ATTEMPT_FIELDS}
        for name in ("submission_id", "status", "submitted_at", "ended_at", "exception", "hint", "log"):
            item[name] = _text(item[name])
        for name in ("attempt", "first_step", "last_step", "resumed_from_iteration"):
            item[name] = _integer(item[name])
        item["data_state"] = item["data_state"] if isinstance(item["data_state"], bool) else None
        attempts.append(item)
    return attempts


def crash_loop_part(job):
    loop = (_usable(job) or {}).get("crash_loop")
    if not isinstance(loop, dict):
        return None
    return {"count": _integer(loop.get("count")) or 0, "step": _integer(loop.get("step")),
            "limit": _integer(loop.get("limit"))}


def evals(values):
    """{'eval/aime': 0.3, 'eval/aime-pass@8': 0.47, ...} -> {'aime': {score, pass_at_k, truncated_ratio}}."""
    sets = {}
    for key, value in (values or {}).items():
        match = re.match(r"^eval/([^/]+?)(?:-(pass@\d+)|-(truncated_ratio))?$", str(key))
        if not match:
            continue
        entry = sets.setdefault(match.group(1), {"score": None, "pass_at_k": {}, "truncated_ratio": None})
        if match.group(2):
            entry["pass_at_k"][match.group(2)] = metric(value)
        elif match.group(3):
            entry["truncated_ratio"] = metric(value)
        else:
            entry["score"] = metric(value)
    return sets


def last_part(progress, log_file):
    usable = _usable(progress)
    if usable is None:
        return {"step": None, "steps": 0, "rollout": None, "reward": None, "pass_at_k": {}, "eval": {},
                "eval_rollout": None, "throughput": {}, "last_checkpoint": None, "loaded_checkpoint": None,
                "waiting_for_gpus": None, "first_error": None, "hint": None, "progress": None,
                "log_file": log_file, "error": _why_not(progress, "the log (train_progress)")}
    error = usable.get("first_error")
    throughput = usable.get("throughput") or {}
    loaded = usable.get("loaded_checkpoint")
    waiting = usable.get("waiting_for_gpus")
    return {
        "step": _integer(usable.get("last_step")),
        "steps": _integer(usable.get("steps")) or 0,
        "rollout": _integer(usable.get("last_rollout")),
        "reward": metric(usable.get("reward")),
        "pass_at_k": {str(k): metric(v) for k, v in (usable.get("pass_at_k") or {}).items()},
        "eval": evals(usable.get("eval")),
        "eval_rollout": _integer(usable.get("eval_rollout")),
        "throughput": {THROUGHPUT[k]: metric(v) for k, v in throughput.items() if k in THROUGHPUT},
        "last_checkpoint": _integer(usable.get("last_checkpoint")),
        "loaded_checkpoint": (
            {"iteration": _integer(loaded.get("iteration")), "path": _text(loaded.get("path"))}
            if isinstance(loaded, dict) else None
        ),
        "waiting_for_gpus": (
            {k: waiting.get(k) for k in ("needed", "registered", "available", "elapsed")}
            if isinstance(waiting, dict) else None
        ),
        "first_error": (
            {k: error.get(k) for k in ("lineno", "line", "exception", "exception_lineno", "rank", "kind", "faq")}
            if isinstance(error, dict) else None
        ),
        "hint": _text(usable.get("hint")),
        "progress": _text(usable.get("progress")),
        "log_file": _text(usable.get("source")) or log_file,
        "error": None,
    }


def checkpoint_part(checkpoint, save_dir):
    usable = _usable(checkpoint)
    part = {name: None for name in CHECKPOINT_FIELDS}
    part.update(save_dir=save_dir or None, complete_iterations=[], incomplete_iterations=[], error=None)
    if not save_dir:
        part["error"] = "no save dir (the run has no --save)"
        return part
    if usable is None:
        part["error"] = _why_not(checkpoint, "the save dir (mcore_checkpoint)")
        return part
    for name in CHECKPOINT_FIELDS:
        part[name] = usable.get(name)
    part["complete_iterations"] = [i for i in usable.get("complete_iterations") or [] if _integer(i) is not None]
    part["incomplete_iterations"] = [i for i in usable.get("incomplete_iterations") or [] if _integer(i) is not None]
    part["dataset_state"] = bool(usable.get("dataset_state"))
    part["save_dir"] = usable.get("path") or save_dir
    return part


def manifest_part(job, slurped):
    path = _text((_usable(job) or {}).get("manifest_file"))
    part = {"path": path, "data": None, "error": None}
    if not path:
        return part
    usable = _usable(slurped)
    if usable is None:
        part["error"] = _why_not(slurped, "the manifest")
        return part
    try:
        data = json.loads(base64.b64decode(usable.get("content") or "").decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        part["error"] = "the manifest %s is not JSON: %s" % (path, exc)
        return part
    part["data"] = data if isinstance(data, dict) else None
    return part


def tensorboard_part(log_dir, port=6006, container=None, ssh_host=None, ssh_user=None, ssh_port=None):
    """The command that shows the guide's TensorBoard logs on the head, and the SSH tunnel
    that reaches it from the user's computer (as the guide's §6.2 does for the dashboard)."""
    if not log_dir:
        return None
    serve = ["tensorboard", "--logdir", log_dir, "--host", "127.0.0.1", "--port", str(int(port))]
    if container:
        serve = ["docker", "exec", "-it", container] + serve
    target = "%s@%s" % (ssh_user or "<user>", ssh_host or "<head>")
    tunnel = ["ssh"] + (["-p", str(int(ssh_port))] if ssh_port and int(ssh_port) != 22 else [])
    tunnel += ["-N", "-L", "%d:127.0.0.1:%d" % (int(port), int(port))]
    quoted = " ".join(shlex.quote(part) for part in serve)
    ssh = " ".join(shlex.quote(part) for part in tunnel) + " " + (
        target if "<" in target else shlex.quote(target))
    return {"log_dir": log_dir, "port": int(port), "command": quoted, "tunnel": ssh,
            "url": "http://localhost:%d" % int(port)}


# -- the whole --------------------------------------------------------------------------------------
def _num(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)


def summary_line(cluster):
    """The one line per cluster that status.yml prints."""
    job, last = cluster["job"], cluster["last"]
    parts = ["%s: %s %s" % (cluster["cluster"], job["submission_id"] or "no job", job["status"])]
    parts.append("step %s" % _num(last["step"]))
    parts.append("reward %s" % _num(last["reward"]))
    parts.append("pass@1 %s" % _num(last["pass_at_k"].get("pass@1")))
    scores = " ".join("%s=%s" % (name, _num(entry["score"])) for name, entry in sorted(last["eval"].items()))
    parts.append("eval %s" % (scores or "-"))
    parts.append("tokens/s %s" % _num(last["throughput"].get("rollout_tokens_per_gpu_per_s",
                                                             last["throughput"].get("train_tokens_per_s"))))
    checkpoint = cluster["checkpoint"]
    if checkpoint.get("resume_iteration") is not None:
        parts.append("checkpoint %d" % checkpoint["resume_iteration"])
    loop = cluster.get("crash_loop")
    if loop and loop.get("count"):
        parts.append("crash loop %d/%s at step %s" % (loop["count"], _num(loop.get("limit")), _num(loop.get("step"))))
    text = ", ".join(parts)
    ended = [a for a in cluster.get("attempts") or [] if not job_rules.is_active(a)]
    end = ended[-1] if ended else None
    if end and end.get("status") != job_rules.SUCCEEDED and end.get("exception"):
        # the exception line that ended the latest ended attempt (not a traceback's header)
        text += ", %s %s %s: %s" % (end["submission_id"], end["status"],
                                    "after step %s" % end["last_step"] if end.get("last_step") is not None
                                    else "before its first step", end["exception"][:200])
    error = last.get("first_error")
    if error:
        line = (error.get("exception") or error.get("line") or "")[:200]
        where = " [rank %s]" % error["rank"] if error.get("rank") is not None else ""
        if job_rules.is_active(job):
            text += ", warning: the job goes on after an error in its log: %s%s" % (line, where)
        elif not end or line != (end.get("exception") or "")[:200]:
            text += ", error: %s%s" % (line, where)
    elif job.get("error"):
        text += ", %s" % job["error"][:200]
    supervisor = cluster.get("supervisor")
    if supervisor:
        decision = supervisor.get("decision") or {}
        text += ", supervisor %s" % ("off (playbooks/stop.yml)" if not supervisor["enabled"] and decision else
                                     "%s at %s: %s" % ("OVERDUE, last check" if supervisor["overdue"] else "checked",
                                                       supervisor["last_check"], decision.get("action"))
                                     if decision else supervisor.get("error") or "no check yet")
    missing = [container_missing(cluster.get("containers"), node) for node in cluster.get("nodes") or []]
    if any(missing):
        text += ", %s" % "; ".join(m for m in missing if m)
    return text


def supervisor_part(slurped, supervised, now=None):
    """The supervisor's last check from its slurped state.json; None when the cluster is not supervised. A check
    more than one interval past its next_check is overdue (the keeper is not running)."""
    if not supervised:
        return None
    part = {"enabled": False, "last_check": None, "next_check": None, "overdue": False, "decision": None,
            "error": None}
    state = None
    if isinstance(slurped, dict) and slurped.get("content"):
        try:
            state = json.loads(base64.b64decode(slurped["content"]).decode("utf-8"))
        except ValueError:
            state = None
    if not isinstance(state, dict):
        part["error"] = "no check yet (%s)" % ((slurped or {}).get("msg") or "state.json not read")
        return part
    part.update(enabled=bool(state.get("enabled")), last_check=state.get("last_check"),
                next_check=state.get("next_check"), decision=state.get("decision"))
    part["overdue"] = part["enabled"] and supervisor_files.overdue(state, now)
    return part


def _not_read(result, missing):
    """A result that was skipped because the head has no running container says so."""
    if missing and (not isinstance(result, dict) or not result or result.get("skipped")):
        return {"skipped": True, "skip_reason": missing}
    return result


def cluster_status(job=None, progress=None, checkpoint=None, manifest=None, cluster=None, head=None,
                   experiment=None, log_file=None, save_dir=None, tensorboard=None, report=None, containers=None,
                   supervisor=None):
    cluster = cluster or {}
    head = head or cluster.get("head")
    containers = containers_part(containers)
    missing = container_missing(containers, head)
    progress = _not_read(progress, missing)
    if save_dir:
        checkpoint = _not_read(checkpoint, missing)
    status = {
        "cluster": str(cluster.get("name") or head or ""),
        "head": head,
        "nodes": list(cluster.get("nodes") or ([head] if head else [])),
        "experiment": experiment,
        "containers": containers,
        "job": job_part(job, missing),
        "attempts": attempts_part(job),
        "crash_loop": crash_loop_part(job),
        "last": last_part(progress, log_file),
        "checkpoint": checkpoint_part(checkpoint, save_dir),
        "manifest": manifest_part(job, manifest),
        "tensorboard": tensorboard,
        "report": report,
        "supervisor": supervisor,
    }
    status["line"] = summary_line(status)
    return status


def document(clusters, generated_at=None):
    """The whole status.json: {schema_version, generated_at, clusters}."""
    when = generated_at or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"schema_version": SCHEMA_VERSION, "generated_at": when,
            "clusters": sorted((c for c in clusters or [] if c), key=lambda c: c["cluster"])}
