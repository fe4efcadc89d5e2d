# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The converged record (job/names.py converged_record): what the last full site.yml run checked on a node, so that
the next run's first call on the node can ask again, in one round trip, and a cluster whose nodes all answer
"nothing differs" ends there (docs/performance.md, docs/architecture.md "The fast path").

  {"schema_version": 1,
   "inputs": the digest of the cluster's inventory values and of the collection (plugin_utils/inventory/inputs.py),
   "container": the id of the training container the run checked, or null on a node (container_enabled false),
   "checks": [{"stage": "data", "task": "dataset_check", "args": {...}, "environment": {...}, "expect": {...}}, ...],
   "supervisor": the supervisor's state.json, or null when the cluster is not supervised}

The checks are the stages' own tasks (supervise/tasks.py) with the arguments their roles gave them, replayed in
check mode; a check passes when its result is neither failed nor changed, lists no problems and says what its
`expect` names (the fan-out's probe: holds true). The record is written only by a full run that reached the end of
the training job's play on the node.
Standard library only; Python 3.8+."""
from __future__ import annotations

import json
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import read_text
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files as supervisor_files

SCHEMA_VERSION = 1
MOUNTINFO = "/proc/self/mountinfo"
# Docker bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from /var/lib/docker/containers/<id>/.
_CONTAINER_ID = re.compile(r"/containers/([0-9a-f]{64})/")


def container_id(mountinfo_text):
    """The id of the Docker container this process runs in, from its mountinfo; None outside a container."""
    found = _CONTAINER_ID.search(mountinfo_text or "")
    return found.group(1) if found else None


def this_container(mountinfo=MOUNTINFO):
    return container_id(read_text(mountinfo, ""))


def document(inputs, container, checks, supervisor):
    return {"schema_version": SCHEMA_VERSION, "inputs": inputs, "container": container,
            "checks": [dict(check) for check in checks], "supervisor": supervisor}


def text(record):
    """The record's exact text: a run that records the same checks writes nothing."""
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def load(path):
    """(record, why): the record, or None and why it cannot be used."""
    raw = read_text(path)
    if raw is None:
        return None, "no record of a full run on this node (%s: first run, or a new run directory)" % path
    try:
        record = json.loads(raw)
    except ValueError:
        return None, "the record %s is not JSON (torn or edited)" % path
    if not isinstance(record, dict) or record.get("schema_version") != SCHEMA_VERSION:
        return None, "the record %s is of another version of the collection" % path
    if not isinstance(record.get("checks"), list):
        return None, "the record %s lists no checks" % path
    return record, ""


def check_passed(result, expect=None):
    """A replayed check's verdict: (passed, why). `expect` ({key: value}) names what else its result must say (the
    fan-out's probe: holds true)."""
    if result.get("failed"):
        return False, result.get("msg") or "failed"
    if result.get("problems"):
        return False, "; ".join(str(p) for p in result["problems"])
    if result.get("changed"):
        actions = [str(a) for a in result.get("actions") or [] if a]
        return False, "would change (%s)" % "; ".join(actions) if actions else "would change"
    for key, value in sorted((expect or {}).items()):
        if result.get(key) != value:
            actions = [str(a) for a in result.get("actions") or [] if a]
            detail = " (%s)" % "; ".join(actions) if actions else ""
            return False, "%s is %r, not %r%s" % (key, result.get(key), value, detail)
    return True, ""


def precondition(record, inputs, container, supervisor_state, now=None):
    """Why the record's checks cannot stand for this run ("" when they can be replayed): other inputs, another
    container, or a supervisor whose keeper stopped checking."""
    if record.get("inputs") != inputs:
        return "the inventory or the collection differs from the last full run's"
    if record.get("container") != container:
        return "the training container is not the one the last full run checked (%s, now %s)" % (
            (record.get("container") or "none")[:12], (container or "none")[:12])
    supervisor = record.get("supervisor")
    if supervisor:
        if not isinstance(supervisor_state, dict):
            return "the supervisor has no state.json (%s)" % supervisor
        if supervisor_state.get("enabled") and supervisor_files.overdue(supervisor_state, now):
            return "the supervisor's keeper has not checked since %s (next check was due %s)" % (
                supervisor_state.get("last_check"), supervisor_state.get("next_check"))
    return ""


def replay(record, run):
    """Each check, in the record's order, through `run(task, args, environment)`, until one does not pass.
    Returns (stages, why): {stage: {"passed", "why"}} and the first failure ("" when every check passed)."""
    stages = {}
    for check in record["checks"]:
        stage = check.get("stage") or check.get("task")
        result = run(check["task"], dict(check.get("args") or {}, _ansible_check_mode=True),
                     check.get("environment") or {})
        passed, why = check_passed(result, check.get("expect"))
        stages[stage] = {"passed": passed, "why": why}
        if not passed:
            return stages, "%s: %s" % (stage, why)
    return stages, ""
