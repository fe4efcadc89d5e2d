#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_lock
short_description: A lock on shared storage that names its holder and dies with it
version_added: "0.1.0"
description:
  - Takes, renews or releases a lock directory on the storage the work writes to (C(<target>.lock) next to the
    model directory, the converted checkpoint or the data), in one short call that never waits. Creating a
    directory is atomic on local file systems and on NFS, so two nodes or two runs can never both take it.
  - The lock holds C(holder.json), the record of its holder - the run id, the node, the controller host and the
    pid and start time of its C(ansible-playbook), when it was taken, the lease (renewed by every progress poll
    of the holder), what the holder is doing and what a run taking it over needs to adopt the work.
  - The waiting, and the decision that a holder is dead, are the controller's (the action plugin of the same name,
    so an interrupted run leaves no waiting process on the node); this module is the file side.
    Call it through the action, with O(run_id); O(holder) and O(take_over) are set by the action.
options:
  path:
    description: The lock directory, for example C(/data/models/Qwen3-8B.lock). Its parent must exist.
    type: path
    required: true
  state:
    description:
      - C(acquired) takes the lock (waiting, through the action, for a live holder; taking over a dead one).
      - C(renewed) extends the lease and updates O(doing); fails when the lock is no longer ours.
      - C(released) gives it back (nothing when it is not ours).
    type: str
    choices: [acquired, renewed, released]
    default: acquired
  run_id:
    description: The run (C(slime_run_id)); with the node it identifies the holder. Used by the action.
    type: str
  holder:
    description: The holder record (token, run id, node, controller, controller pid). Set by the action.
    type: dict
  lease:
    description: Seconds one renewal keeps the lock alive for runs on other controllers.
    type: int
    default: 300
  doing:
    description: What the holder is doing, shown to runs that wait for the lock.
    type: str
    default: ""
  doing_data:
    description: What a run taking the lock over needs to adopt the work (C(jid) of the producer, C(temp) directory).
    type: dict
  take_over:
    description: The token of a holder the controller found dead; replaced by ours if it still holds the lock.
    type: str
  timeout:
    description: Seconds the action waits for a live holder before failing (with who holds it).
    type: int
    default: 600
  interval:
    description: Seconds between two looks while the action waits.
    type: int
    default: 5
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether the lock could be taken, without taking it.
  diff_mode:
    support: none
  idempotent:
    support: full
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Take the model directory's lock (waits, saying who holds it, at most 10 minutes)
  mtslime.posttrain.storage_lock:
    path: /data/models/Qwen3-8B.lock
    run_id: "{{ slime_run_id }}"
    doing: downloading Qwen/Qwen3-8B into /data/models/Qwen3-8B.partial
    timeout: 600

- name: Give it back
  mtslime.posttrain.storage_lock:
    path: /data/models/Qwen3-8B.lock
    run_id: "{{ slime_run_id }}"
    state: released
"""

RETURN = r"""
status:
  description: C(taken), C(ours) (already held by this run), C(held) (by someone else), C(released), C(not-held).
  returned: always
  type: str
holder:
  description: The holder record after the call (empty when released).
  returned: always
  type: dict
previous:
  description: The record of the dead holder whose lock was taken over (its C(doing_data) names the work to adopt).
  returned: when a dead holder's lock was taken over
  type: dict
taken_over_because:
  description: Why the previous holder counts as dead (its process no longer runs, its lease ran out).
  returned: when a dead holder's lock was taken over
  type: str
node_now:
  description: The node's clock (epoch seconds), against which C(renewed) and C(since) are read.
  returned: always
  type: float
waited:
  description: Seconds spent waiting for the lock (action).
  returned: with state=acquired
  type: float
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock as storage_lease


def run(params, check_mode, now=None):
    """The result of one call; raises LookupError (renewing a lock that is not ours)."""
    now = time.time() if now is None else now
    path = params["path"].rstrip("/")
    holder = params.get("holder") or {}
    token = holder.get("token")
    if not token:
        raise ValueError("storage_lock: holder.token is missing; call the module through its action "
                         "(mtslime.posttrain.storage_lock with run_id)")
    state = params["state"]
    result = dict(changed=False, node_now=now)
    if state == "released":
        record = storage_lease.read(path)
        if record is None or record.get("token") != token:
            return dict(result, status="not-held", holder=record or {})
        if not check_mode:
            storage_lease.release(path, token)
        return dict(result, changed=True, status="released", holder={})
    if state == "renewed":
        if check_mode:
            return dict(result, status="ours", holder=storage_lease.read(path) or {})
        record = storage_lease.renew(path, token, doing=params.get("doing") or None,
                                     doing_data=params.get("doing_data"), now=now, lease=params["lease"])
        return dict(result, status="ours", holder=record)
    if check_mode:
        record = storage_lease.read(path)
        if record is None or record.get("token") == token:
            return dict(result, status="taken", holder=record or dict(holder))
        if params.get("take_over") is not None and (record.get("token") or "") == params["take_over"]:
            return dict(result, status="taken", holder=dict(holder), previous=record)
        return dict(result, status="held", holder=record)
    if params.get("take_over") is not None:
        status, record = storage_lease.take_over(path, params["take_over"], holder, params["lease"],
                                                 params.get("doing"), params.get("doing_data"), now=now)
        if status == "taken":
            return dict(result, changed=True, status="taken", holder=storage_lease.read(path), previous=record)
        if status == "held":
            return dict(result, status="held", holder=record or {})
    status, record = storage_lease.acquire(path, holder, params["lease"], params.get("doing"),
                                           params.get("doing_data"), now=now)
    return dict(result, changed=status == "taken", status=status, holder=record)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["acquired", "renewed", "released"], default="acquired"),
            run_id=dict(type="str"),
            holder=dict(type="dict"),
            lease=dict(type="int", default=300),
            doing=dict(type="str", default=""),
            doing_data=dict(type="dict"),
            take_over=dict(type="str"),
            timeout=dict(type="int", default=600),
            interval=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    parent = os.path.dirname(module.params["path"].rstrip("/"))
    if not os.path.isdir(parent):
        module.fail_json(msg="storage_lock: the directory %s that should hold the lock %s does not exist"
                         % (parent, module.params["path"]))
    try:
        module.exit_json(**run(module.params, module.check_mode))
    except (LookupError, ValueError, OSError) as error:
        module.fail_json(msg="storage_lock: %s" % error)


if __name__ == "__main__":
    main()
