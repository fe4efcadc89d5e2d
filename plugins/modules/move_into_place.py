#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: move_into_place
short_description: Move checked output from its temporary directory into place, moving what was there aside
version_added: "0.1.0"
description:
  - The last step of the prepare flow (roles/prepare). O(src), produced and checked next to the target, becomes
    O(dest). What O(dest) held before is moved aside to C(<dest>.<reason>-<UTC time>)
    (plugins/module_utils/artifacts/aside.py), never deleted, and every such path is returned and printed.
  - With O(merge), O(src) is a directory of files that go into the directory O(dest) one by one (the data files);
    a file that is there and differs is moved aside first, one that is there and identical stays.
options:
  src:
    description: The checked output (a directory next to O(dest)).
    type: path
    required: true
  dest:
    description: The target.
    type: path
    required: true
  reason:
    description: The word in the name of what is moved aside (C(failed-check), C(stale), C(replaced), C(interrupted)).
    type: str
    default: replaced
  merge:
    description: Move the entries of O(src) into the directory O(dest) instead of O(src) itself.
    type: bool
    default: false
  drop:
    description: Names of the producer's own bookkeeping files inside O(src), removed before the move.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details: Returns what would be moved, and where.
  diff_mode:
    support: full
  idempotent:
    support: full
    details: Without O(src) there is nothing to do (C(changed=false)).
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Move the checked download into place
  mtslime.posttrain.move_into_place:
    src: /data/models/Qwen3-8B.partial
    dest: /data/models/Qwen3-8B
    reason: failed-check
    drop: [.mtslime-expected-bytes]
"""

RETURN = r"""
moved_aside:
  description: Every path moved aside, as C({path, to}).
  returned: always
  type: list
  elements: dict
moved:
  description: What was moved into place (O(dest), or with O(merge) each file).
  returned: always
  type: list
  elements: str
actions:
  description: What was done, one line each.
  returned: always
  type: list
  elements: str
"""

import filecmp
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import aside_name, move_aside


def plan(src, dest, merge):
    """[(from, to, existing_differs, identical)] for the moves."""
    if not merge:
        return [(src, dest, os.path.lexists(dest), False)]
    steps = []
    for name in sorted(os.listdir(src)):
        source, target = os.path.join(src, name), os.path.join(dest, name)
        if not os.path.lexists(target):
            steps.append((source, target, False, False))
        elif os.path.isfile(source) and os.path.isfile(target) and filecmp.cmp(source, target, shallow=False):
            steps.append((source, target, False, True))
        else:
            steps.append((source, target, True, False))
    return steps


def run(params, check_mode):
    src, dest = params["src"].rstrip("/"), params["dest"].rstrip("/")
    result = dict(changed=False, moved_aside=[], moved=[], actions=[])
    if not os.path.isdir(src) and not os.path.lexists(src):
        result["actions"].append("nothing to move: %s does not exist" % src)
        return result
    for name in params["drop"]:
        marker = os.path.join(src, name)
        if os.path.isfile(marker) and not check_mode:
            os.unlink(marker)
    if params["merge"] and not check_mode:
        os.makedirs(dest, exist_ok=True)
    for source, target, replace, identical in plan(src, dest, params["merge"] and os.path.isdir(src)):
        if identical:
            result["actions"].append("%s is already in place, identical" % target)
            if not check_mode:
                os.unlink(source)
            continue
        if replace:
            to = aside_name(target, params["reason"]) if check_mode else move_aside(target, params["reason"])
            result["moved_aside"].append({"path": target, "to": to})
            result["actions"].append("moved %s aside to %s" % (target, to))
        if not check_mode:
            os.rename(source, target)
        result["moved"].append(target)
        result["actions"].append("moved %s into place as %s" % (source, target))
    if params["merge"] and not check_mode and os.path.isdir(src) and not os.listdir(src):
        os.rmdir(src)
    result["changed"] = bool(result["moved"] or result["moved_aside"])
    result["diff"] = {"before": "\n".join(a["path"] for a in result["moved_aside"]) + "\n",
                      "after": "\n".join(result["moved"]) + "\n"}
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            reason=dict(type="str", default="replaced"),
            merge=dict(type="bool", default=False),
            drop=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module.params, module.check_mode))
    except OSError as error:
        module.fail_json(msg="move_into_place: %s" % error)


if __name__ == "__main__":
    main()
