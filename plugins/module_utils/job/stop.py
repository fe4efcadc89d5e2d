# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""state=stopped: ask Ray to stop every active job of the experiment and wait until each ended."""
from __future__ import annotations

import time

from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import JobError, reported
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import STOPPED, TERMINAL
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import RayApiError


def stop(client, url, experiment, active, latest, timeout, check_mode, sleep=time.sleep, clock=time.time):
    if not active:
        part = reported(latest)
        part["fields"]["message"] = "no active job of experiment %s" % experiment
        return part
    names = ", ".join("%s (%s)" % (j["submission_id"], j.get("status")) for j in active)
    diff = {
        "before": "".join("%s %s\n" % (j["submission_id"], j.get("status")) for j in active),
        "after": "".join("%s STOPPED\n" % j["submission_id"] for j in active),
        "before_header": "ray job",
        "after_header": "ray job",
    }
    if check_mode:
        part = reported(active[-1], message="would stop %s" % names)
        part.update(changed=True, actions=["would stop %s" % names], diffs=[diff])
        return part
    actions = []
    for job in active:
        sid = job["submission_id"]
        try:
            stopped = client.stop_job(sid)
        except RayApiError as exc:
            if exc.status == 404:
                actions.append("%s vanished before it could be stopped" % sid)
                continue
            raise JobError("stopping %s failed: %s" % (sid, exc), error=exc.to_dict()) from None
        actions.append("asked Ray to stop %s" % sid if stopped else "%s had already ended" % sid)
    deadline = clock() + timeout
    pending = {job["submission_id"]: job for job in active}
    final = {}
    while pending:
        for sid in list(pending):
            try:
                details = client.get_job(sid)
            except RayApiError as exc:
                raise JobError("checking %s after the stop failed: %s" % (sid, exc), error=exc.to_dict()) from None
            if details is None or details.get("status") in TERMINAL:
                ended = details or dict(pending[sid], status=STOPPED)
                final[sid] = dict(ended, _attempt=pending[sid].get("_attempt"))
                del pending[sid]
            else:
                pending[sid] = dict(details, _attempt=pending[sid].get("_attempt"))
        if not pending or clock() >= deadline:
            break
        sleep(min(1.0, max(0.1, deadline - clock())))
    if pending:
        raise JobError(
            "%s still %s %ds after the stop request (stop_timeout); Ray may still be tearing down its actors: rerun "
            "later, raise stop_timeout, or look at the job in the dashboard %s"
            % (", ".join(pending), "/".join(sorted(set(j.get("status") or "?" for j in pending.values()))), timeout,
               url),
            actions=actions,
        )
    actions.extend("%s is %s" % (sid, job.get("status")) for sid, job in final.items())
    part = reported(final[active[-1]["submission_id"]], message="stopped %s" % ", ".join(final))
    part.update(changed=True, actions=actions, diffs=[diff], seen=list(final.values()))
    return part
