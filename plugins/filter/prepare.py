# Filters of the prepare flow (roles/prepare): its decisions (plugin_utils/prepare/flow.py).
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.prepare import flow as prepare_flow


def slime_prepare_decision(target_done, lock, node, producer=None):
    """{action: verify|adopt|produce, jid, why} once the flow holds the lock."""
    return prepare_flow.decide(bool(target_done), lock or {}, node, producer or None)


def slime_prepare_adoptable(lock, node):
    """The async job id that a dead run of this node left running, or an empty string."""
    return prepare_flow.adoptable_job(lock or {}, node) or ""


def slime_prepare_job_id(job):
    """The async job id in the produce step's registered result, "" for {}; a result without one is refused."""
    try:
        return prepare_flow.producer_job_id(job or {})
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {
            "slime_prepare_decision": slime_prepare_decision,
            "slime_prepare_adoptable": slime_prepare_adoptable,
            "slime_prepare_job_id": slime_prepare_job_id,
        }
