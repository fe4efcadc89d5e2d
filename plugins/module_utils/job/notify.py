# Word of what happened to a training job (train_job_notify): which events a result of ray_job
# (or of node_preflight) holds, the message each makes, the sent-once record, and the delivery to
# webhooks (a JSON POST, retried with backoff) and to a command (the event JSON on its stdin).
#
# The events are read from what the job's own rules decided, never decided again here:
# - attempt_failed: an attempt whose status is FAILED in the attempt history (crash_loop.py /
#   attempts.py: ray_job's attempts_history, or attempts with state=status);
# - resubmitted: ray_job submitted attempt N after an attempt that did not succeed (previous_attempt);
# - crash_loop_stopped: the crash-loop rule refused to submit (crash_loop.blocked);
# - finished: the reported job SUCCEEDED (the plan's FINISHED);
# - disk_projection_exceeded: node_preflight's projection of the run's checkpoints does not fit;
# - worker_lost: the supervisor's check found a node of the cluster gone from the Ray head (supervise/tick.py).
# Each event has a key (event and attempt, or node and path); <manifest dir>/<experiment>.notified.json
# (mode 0600, next to the attempt records) keeps, per key, the targets it was delivered to, so a
# rerun sends nothing twice. Targets are named by a hash, never by their URL.
# Standard library only; Python 3.8+.
from __future__ import annotations

import datetime
import hashlib
import json
import os
import subprocess
import time
import urllib.error

from ansible.module_utils.urls import open_url

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.crash_loop import describe, streak_text
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import ACTIVE, FAILED, SUCCEEDED

EVENTS = ("attempt_failed", "resubmitted", "crash_loop_stopped", "finished", "disk_projection_exceeded", "worker_lost")
STATE_SUFFIX = ".notified.json"
RETRY_STATUS = (408, 425, 429, 500, 502, 503, 504)


def state_file(manifest_dir, experiment):
    return os.path.join(manifest_dir, experiment + STATE_SUFFIX)


def read_state(path):
    """{key: [target ids]} of what was delivered; {} when the file is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    sent = found.get("sent") if isinstance(found, dict) else None
    return {k: list(v) for k, v in sent.items() if isinstance(v, list)} if isinstance(sent, dict) else {}


def write_state(path, sent):
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    atomic_write(path, json.dumps({"sent": sent}, indent=2, sort_keys=True) + "\n", mode=0o600)


def target_id(kind, value):
    """A name for a target that does not reveal it: webhook:<12 hex of its sha256>, or command:<...>."""
    return "%s:%s" % (kind, hashlib.sha256(value.encode("utf-8")).hexdigest()[:12])


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _step(record):
    return record.get("step", record.get("last_step"))


def _attempt_event(name, record, key=None):
    return {
        "event": name,
        "key": key or "%s:%s" % (name, record.get("submission_id")),
        "job_id": record.get("submission_id"),
        "attempt": record.get("attempt"),
        "step": _step(record),
        "exception": record.get("exception"),
        "detail": describe(dict(record, step=_step(record))) if record.get("submission_id") else None,
    }


def job_events(result):
    """The events a ray_job result (state running, failed or not, or state status) holds, oldest first."""
    result = result or {}
    events = []
    history = result.get("attempts_history") or result.get("attempts") or []
    for record in history:
        if isinstance(record, dict) and record.get("status") == FAILED:
            events.append(_attempt_event("attempt_failed", record))
    loop = result.get("crash_loop") or {}
    if loop.get("blocked") and loop.get("attempts"):
        last = loop["attempts"][-1]
        by_id = {r.get("submission_id"): r for r in history if isinstance(r, dict)}
        event = _attempt_event("crash_loop_stopped", by_id.get(last, {"submission_id": last}),
                               key="crash_loop_stopped:%s" % last)
        event["detail"] = "%d attempts in a row failed %s (limit %s); no new attempt is submitted until the cause " \
                          "is fixed and the play reruns with -e train_job_retry=true" % (
                              loop.get("count", 0), streak_text(loop), loop.get("limit"))
        events.append(event)
    previous = result.get("previous_attempt") or {}
    submitted = result.get("argv") is not None and result.get("status") in ACTIVE + ("WOULD_SUBMIT",)
    if submitted and previous and previous.get("status") != SUCCEEDED and result.get("submission_id"):
        event = _attempt_event("resubmitted", {"submission_id": result["submission_id"],
                                               "attempt": result.get("attempt")})
        event["step"] = result.get("resumed_from_iteration")
        event["detail"] = "after %s %s, %s" % (
            previous.get("submission_id"), previous.get("status"),
            "resuming from iteration %d" % result["resumed_from_iteration"]
            if result.get("resumed_from_iteration") is not None else "from the converted checkpoint")
        events.append(event)
    if result.get("status") == SUCCEEDED and result.get("submission_id"):
        last = history[-1] if history and isinstance(history[-1], dict) else {}
        record = last if last.get("submission_id") == result["submission_id"] else {
            "submission_id": result["submission_id"], "attempt": result.get("attempt")}
        event = _attempt_event("finished", dict(record, exception=None))
        event["detail"] = "%s SUCCEEDED%s" % (result["submission_id"], " at %s" % result["end_time"]
                                              if result.get("end_time") else "")
        events.append(event)
    return events


def preflight_events(results):
    """disk_projection_exceeded events from node_preflight results {node: result}."""
    events = []
    for node in sorted(results or {}):
        checks = (results[node] or {}).get("checks") or {}
        for row in (checks.get("disk") or {}).get("items") or []:
            projection = row.get("projection") or {}
            if projection.get("ok") is False:
                events.append({
                    "event": "disk_projection_exceeded", "key": "disk_projection_exceeded:%s:%s" % (
                        node, row.get("path")),
                    "job_id": None, "attempt": None, "step": None, "exception": None, "node": node,
                    "detail": projection.get("warning") or "the run's checkpoints do not fit in %s" % row.get("path"),
                })
    return events


def worker_events(lost):
    """worker_lost events from the supervisor's [{ip, since}] of nodes gone from the Ray head; one per loss."""
    return [{"event": "worker_lost", "key": "worker_lost:%s:%s" % (item.get("ip"), item.get("since")),
             "job_id": None, "attempt": None, "step": None, "exception": None, "node": item.get("ip"),
             "detail": "node %s left the Ray head at %s; the supervisor waits for it to join again before the job "
                       "is resubmitted" % (item.get("ip"), item.get("since"))}
            for item in lost or []]


TITLES = {
    "attempt_failed": "attempt %(attempt)s failed",
    "resubmitted": "attempt %(attempt)s submitted",
    "crash_loop_stopped": "crash loop: not resubmitted",
    "finished": "training finished",
    "disk_projection_exceeded": "checkpoints will not fit on disk",
    "worker_lost": "a worker left the cluster",
}


def text_of(event, experiment, cluster, host):
    """One message that reads well in Slack, Mattermost and Teams: a bold title line, then the detail."""
    title = TITLES[event["event"]] % {"attempt": event.get("attempt") if event.get("attempt") is not None else "?"}
    where = "cluster %s, head %s" % (cluster, host) if cluster else "head %s" % host
    if event.get("node") and event["node"] != host:
        where += ", node %s" % event["node"]
    lines = ["*[%s] %s* (%s)" % (experiment, title, where)]
    if event.get("detail"):
        lines.append(event["detail"])
    if event.get("exception") and event["exception"] not in (event.get("detail") or ""):
        lines.append("exception: %s" % event["exception"])
    return "\n".join(lines)


def payload(event, experiment, cluster, host, now=None):
    """The JSON document sent: `text` for the chat tools, and the structured fields."""
    return {
        "text": text_of(event, experiment, cluster, host),
        "event": event["event"],
        "experiment": experiment,
        "cluster": cluster,
        "host": host,
        "node": event.get("node") or host,
        "job_id": event.get("job_id"),
        "attempt": event.get("attempt"),
        "step": event.get("step"),
        "exception": event.get("exception"),
        "time": now or _now(),
    }


def post(url, document, retries=3, backoff=1.0, timeout=10, sleep=time.sleep):
    """POST `document` as JSON: (True, None), or (False, why) after `retries` tries more on a network error or a
    status in RETRY_STATUS, waiting backoff, 2*backoff, ... seconds. Never raises; `why` never holds the URL."""
    body = json.dumps(document).encode("utf-8")
    why = None
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff * (2 ** (attempt - 1)))
        try:
            answer = open_url(url, data=body, method="POST", headers={"Content-Type": "application/json"},
                              timeout=timeout, follow_redirects="safe")
            answer.read()
            return True, None
        except urllib.error.HTTPError as exc:
            why = "HTTP %d %s" % (exc.code, exc.reason)
            if exc.code not in RETRY_STATUS:
                break
        except Exception as exc:  # a webhook must never fail the play: every error is reported, none raised
            why = "%s: %s" % (type(exc).__name__, getattr(exc, "reason", None) or exc)
        why = why.replace(url, "<webhook>")
    return False, "%s (after %d tries)" % (why.replace(url, "<webhook>"), attempt + 1)


def run_command(command, document, timeout=60):
    """Run `command` (/bin/sh -c) with the event JSON on stdin: (True, None) or (False, why). Never raises."""
    try:
        done = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(document).encode("utf-8"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout, check=False)
    except Exception as exc:  # the play goes on; the failure is reported
        return False, "%s: %s" % (type(exc).__name__, exc)
    if done.returncode:
        err = (done.stderr or done.stdout or b"").decode("utf-8", "replace").strip()
        return False, "exit %d%s" % (done.returncode, ": " + err[-300:] if err else "")
    return True, None


def deliver(events, targets, sent, send, context, check=False):
    """Send each event not yet delivered to a target. targets: [(id, value)]; send(id, value, document) ->
    (ok, why); sent: {key: [ids]} (updated in place). Returns one report per event:
    {event, key, job_id, text, delivered: [ids], failed: [{target, error}], already: [ids], would_send: [ids]}."""
    reports = []
    for event in events:
        document = payload(event, **context)
        done = sent.get(event["key"], [])
        report = {"event": event["event"], "key": event["key"], "job_id": event.get("job_id"),
                  "text": document["text"], "delivered": [], "failed": [],
                  "already": [tid for tid, _value in targets if tid in done], "would_send": []}
        for tid, value in targets:
            if tid in done:
                continue
            if check:
                report["would_send"].append(tid)
                continue
            ok, why = send(tid, value, document)
            if ok:
                report["delivered"].append(tid)
                sent.setdefault(event["key"], []).append(tid)
            else:
                report["failed"].append({"target": tid, "error": why})
        reports.append(report)
    return reports
