# Controller side: the decisions of the prepare flow (roles/prepare), in one pure
# function so they are tested once. The flow, for the data, the model and the
# converted checkpoint alike:
#   lock -> look at the target again -> verify | adopt | produce -> check -> move -> release
# After the lock is taken the target is inspected again, since another run may have
# finished it while this one waited: then the run only verifies. When the lock was
# taken over from a dead run of this node whose producer (an async job: the
# conversion, the download) still runs, or finished well, the run adopts it: it waits
# for that job, with progress, instead of starting a second one. Otherwise it produces.
from __future__ import annotations

from typing import Any, Final, Literal, Mapping, TypedDict

VERIFY: Final = "verify"
ADOPT: Final = "adopt"
PRODUCE: Final = "produce"


class Decision(TypedDict):
    """What the flow does once it holds the lock (the filter slime_prepare_decision returns it as a dict)."""

    action: Literal["verify", "adopt", "produce"]
    jid: str | None  # the async job waited for: the adopted one (adopt), else None
    why: str  # printed by the flow: "<target>: <why>."


def adoptable_job(lock: Mapping[str, Any] | None, node: str) -> str | None:
    """The async job id a dead holder of this node left running, or None. Only a
    producer on this node can be adopted: its status file is in this node's async dir."""
    previous = (lock or {}).get("previous") or {}
    jid = (previous.get("doing_data") or {}).get("jid")
    if jid and previous.get("node") == node:
        return str(jid)
    return None


def producer_job_id(job: Mapping[str, Any] | None) -> str:
    """The async job id of the producer the caller's produce step started (the prepare role's option
    _prepare_job: that task's registered result), or "" for a producer that ran in the foreground ({}).
    A result without a job id is the caller's mistake: the flow would move a half-made output into place,
    so it is refused, naming the option."""
    if not job:
        return ""
    jid = job.get("ansible_job_id")
    if jid:
        return str(jid)
    how = "was skipped" if job.get("skipped") else "did not run in the background"
    raise ValueError("_prepare_job: the registered result of the produce step's task has no ansible_job_id (the task "
                     "%s); pass the result of a task with async: <seconds> and poll: 0, or {} for a producer that "
                     "runs in the foreground" % how)


def decide(target_done: bool, lock: Mapping[str, Any] | None, node: str,
           producer: Mapping[str, Any] | None = None) -> Decision:
    """What the flow does once it holds the lock.

    target_done: the target passed its inspection after the lock was taken;
    lock: the storage_lock result; producer: the async_progress result for
    adoptable_job(lock, node), when there is one."""
    waited = float((lock or {}).get("waited") or 0)
    previous = (lock or {}).get("previous") or {}
    if target_done:
        if waited or previous:
            why = "another run finished it while this one %s: only verifying" % (
                "waited for the lock" if waited else "was away")
        else:
            why = "it is complete: only verifying"
        return {"action": VERIFY, "jid": None, "why": why}
    jid = adoptable_job(lock, node)
    if jid and producer:
        if "finished" not in producer:  # no status file: the job's node or container was replaced
            return {"action": PRODUCE, "jid": None,
                    "why": "the interrupted run %s's job %s left no status (%s): starting again" % (
                        previous.get("run_id", "?"), jid, producer.get("msg", "unknown"))}
        if producer.get("finished") and not producer.get("job_failed"):
            return {"action": ADOPT, "jid": jid,
                    "why": "the interrupted run %s's job %s finished: checking its output" % (
                        previous.get("run_id", "?"), jid)}
        if not producer.get("finished") and producer.get("alive", True) and not producer.get("failed"):
            return {"action": ADOPT, "jid": jid,
                    "why": "the interrupted run %s's job %s still runs (%s): waiting for it instead of starting "
                           "a second one" % (previous.get("run_id", "?"), jid, producer.get("progress", ""))}
        state = "failed" if producer.get("job_failed") else "died"
        return {"action": PRODUCE, "jid": None,
                "why": "the interrupted run %s's job %s %s: starting again" % (previous.get("run_id", "?"), jid, state)}
    return {"action": PRODUCE, "jid": None, "why": "it is missing or fails its check"}
