#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_lock
short_description: A lock on shared storage, so two runs never write the same files
version_added: "0.1.0"
description:
  - Takes or releases a lock directory on the storage the work writes to (for example next to the model directory
    on a shared C(/data)). Creating a directory is atomic on local file systems and on NFS, so two nodes or two
    playbook runs can never both hold it.
  - The holder is recorded in C(owner.json) inside the lock. A lock held by another owner is waited for; one older
    than O(stale_after) is taken over, with a warning that names the previous holder.
options:
  path:
    description: The lock directory, for example C(/data/models/.Qwen3-8B.lock).
    type: path
    required: true
  state:
    description: C(acquired) takes the lock (waiting for it), C(released) gives it back.
    type: str
    choices: [acquired, released]
    default: acquired
  owner:
    description: Who holds the lock; the same owner may take it again. Use something unique per run and node.
    type: str
    required: true
  timeout:
    description: Seconds to wait for a lock held by someone else before failing.
    type: int
    default: 3600
  stale_after:
    description: Seconds after which a lock is considered left behind by a run that died, and taken over.
    type: int
    default: 86400
  interval:
    description: Seconds between two looks while waiting.
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
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Take the model directory's lock
  mtslime.posttrain.storage_lock:
    path: /data/models/.Qwen3-8B.lock
    owner: "{{ inventory_hostname }}-{{ slime_run_id }}"

- name: Give it back
  mtslime.posttrain.storage_lock:
    path: /data/models/.Qwen3-8B.lock
    owner: "{{ inventory_hostname }}-{{ slime_run_id }}"
    state: released
"""

RETURN = r"""
holder:
  description: The owner record of the lock after the call (empty when released).
  returned: always
  type: dict
waited:
  description: Seconds spent waiting for the lock.
  returned: always
  type: float
taken_over:
  description: The record of a stale holder whose lock was taken over.
  returned: when a stale lock was taken over
  type: dict
"""

import json
import os
import shutil
import socket
import time

from ansible.module_utils.basic import AnsibleModule

RECORD = "owner.json"


def read_record(path):
    try:
        with open(os.path.join(path, RECORD), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        try:
            return {"owner": "unknown", "since": os.stat(path).st_mtime}
        except OSError:
            return None


def write_record(path, owner):
    record = {"owner": owner, "host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    tmp = os.path.join(path, RECORD + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(tmp, os.path.join(path, RECORD))
    return record


def try_take(path, owner, stale_after, check_mode):
    """(taken, record, taken_over): take the lock if free, ours, or stale."""
    try:
        if not check_mode:
            os.mkdir(path, 0o755)
            return True, write_record(path, owner), None
        if not os.path.exists(path):
            return True, {"owner": owner}, None
    except FileExistsError:
        pass
    record = read_record(path)
    if record is None:
        return False, None, None
    if record.get("owner") == owner:
        return True, record, None
    if time.time() - float(record.get("since", 0)) > stale_after:
        if not check_mode:
            return True, write_record(path, owner), record
        return True, {"owner": owner}, record
    return False, record, None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["acquired", "released"], default="acquired"),
            owner=dict(type="str", required=True),
            timeout=dict(type="int", default=3600),
            stale_after=dict(type="int", default=86400),
            interval=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = p["path"]
    parent = os.path.dirname(path.rstrip("/"))
    if not os.path.isdir(parent):
        module.fail_json(
            msg="storage_lock: the directory %s that should hold the lock %s does not exist" % (parent, path)
        )

    if p["state"] == "released":
        record = read_record(path)
        if record is None:
            module.exit_json(changed=False, holder={}, waited=0.0)
        if record.get("owner") != p["owner"]:
            module.warn("lock %s is held by %s, not by %s; left in place" % (path, record.get("owner"), p["owner"]))
            module.exit_json(changed=False, holder=record, waited=0.0)
        if not module.check_mode:
            shutil.rmtree(path)
        module.exit_json(changed=True, holder={}, waited=0.0)

    start = time.time()
    existing = read_record(path) if os.path.exists(path) else None
    while True:
        taken, record, stale = try_take(path, p["owner"], p["stale_after"], module.check_mode)
        if taken:
            break
        waited = time.time() - start
        if waited >= p["timeout"]:
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float((record or {}).get("since", 0))))
            module.fail_json(
                msg="storage_lock: %s is held by %s (host %s, since %s) and was not released within %d s. Another run "
                    "is writing there; wait for it, or remove %s if that run is gone."
                    % (path, (record or {}).get("owner"), (record or {}).get("host", "?"), since, p["timeout"], path),
                holder=record or {}, waited=round(waited, 1))
        time.sleep(max(1, p["interval"]))
    result = dict(changed=not (existing and existing.get("owner") == p["owner"]), holder=record,
                  waited=round(time.time() - start, 1))
    if stale:
        result["taken_over"] = stale
        module.warn("took over the lock %s from %s (held since %s, older than stale_after)" % (
            path, stale.get("owner"), time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stale.get("since", 0))))))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
