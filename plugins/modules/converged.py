#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: converged
short_description: Record the checks a full run passed on a node, or ask them again in one call (the fast path)
version_added: "0.2.0"
description:
  - "O(state=recorded) (the last task of the training job's play): writes the record O(path) (mode 0600) of the
    checks this run's stages passed on the node: each stage's own task (M(mtslime.posttrain.dataset_check),
    M(mtslime.posttrain.hf_model_check), M(mtslime.posttrain.mcore_checkpoint), M(mtslime.posttrain.ray_start),
    M(mtslime.posttrain.ray_job), M(mtslime.posttrain.checkpoint_retention)) with the arguments its role gave it,
    the digest O(inputs) of the inventory and the collection, the id of the training container it runs in and the
    supervisor's state file. The same record again writes nothing. The record is the collection's own cache, as
    Ansible's fact cache is: writing it is not reported as a change (C(written) says it), so that a run that changes
    nothing on the node reports C(changed=false) even where the record is new (the first run after an upgrade, a run
    after one with other extra vars)."
  - "O(state=probed) (the first play after the facts): reads the record and, when its inputs are O(inputs), it runs
    in the same container and the supervisor's keeper still checks on time, runs each recorded task again in check
    mode, in the record's order, as the supervisor runs them (C(module_utils/supervise/tasks.py): the same code with
    the same arguments, each in a child process forked from this one), stopping at the first that fails or would
    change something. C(converged) is true when every one passed; C(why) says what differs otherwise. Changes
    nothing."
  - "site.yml ends a training cluster after this call when every node of it is converged (docs/architecture.md,
    The fast path); any other cluster runs every stage as before."
options:
  state:
    description: V(probed) asks; V(recorded) writes the record.
    type: str
    choices: [probed, recorded]
    default: probed
  path:
    description: The record (C(slime_job_files.converged_record), beside the run script).
    type: path
    required: true
  inputs:
    description: The digest of the cluster's inventory values and the collection's files (returned per host by
      M(mtslime.posttrain.validate_config) as C(inputs)).
    type: str
    required: true
  checks:
    description: With O(state=recorded), the stages' checks in the order they ran, each
      C({stage, task, args, environment}); C(task) is a name of C(module_utils/supervise/tasks.py) TASKS.
    type: list
    elements: dict
    default: []
  supervisor:
    description: With O(state=recorded), the supervisor's C(state.json) when the cluster is supervised; the probe then
      also requires that its keeper is not overdue (as status.yml judges it).
    type: path
  timeout:
    description: Seconds one replayed check may take.
    type: int
    default: 300
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
notes:
  - Standard library only on the node; each replayed task runs in a child forked from the module's process (a timeout
    kills it), whose imports it shares.
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Ask each node whether anything differs from the last full run
  mtslime.posttrain.converged:
    path: "{{ slime_job_files.converged_record }}"
    inputs: "{{ __validate.inputs[inventory_hostname] }}"
  register: __converged

- name: Record the checks this run passed
  mtslime.posttrain.converged:
    state: recorded
    path: "{{ slime_job_files.converged_record }}"
    inputs: "{{ __validate.inputs[inventory_hostname] }}"
    checks:
      - stage: data
        task: dataset_check
        args: {files: [/data/models/data/aime-2024.jsonl], input_key: prompt}
"""

RETURN = r"""
converged:
  description: Whether every recorded check passed again (state probed); false after state recorded.
  returned: always
  type: bool
why:
  description: What differs (the record missing, other inputs, another container, an overdue keeper, or the first
    check that failed or would change, with its stage), or what passed.
  returned: always
  type: str
stages:
  description: "C({stage: {passed, why}}) of the checks that ran, in order."
  returned: always
  type: dict
container:
  description: The id of the Docker container the module ran in, or null on a node.
  returned: always
  type: str
written:
  description: Whether the record was written (in check mode, would be); false when it already said the same.
  returned: state recorded
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_json_object, read_text
from ansible_collections.mtslime.posttrain.plugins.module_utils.rerun import record as rerun_record
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import tasks


def probe(params, container):
    record, why = rerun_record.load(params["path"])
    if record is None:
        return {"converged": False, "why": why, "stages": {}}
    supervisor = record.get("supervisor")
    why = rerun_record.precondition(record, params["inputs"], container,
                                    read_json_object(supervisor) if supervisor else None)
    if why:
        return {"converged": False, "why": why, "stages": {}}
    stages, why = rerun_record.replay(record, lambda task, args, env: tasks.run_forked(
        task, args, environment=env, timeout=params["timeout"]))
    return {"converged": not why, "stages": stages,
            "why": why or "nothing differs from the last full run (%d checks passed)" % len(stages)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["probed", "recorded"], default="probed"),
            path=dict(type="path", required=True),
            inputs=dict(type="str", required=True),
            checks=dict(type="list", elements="dict", default=[]),
            supervisor=dict(type="path"),
            timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    params = module.params
    container = rerun_record.this_container()
    if params["state"] == "probed":
        module.exit_json(changed=False, container=container, **probe(params, container))
    unknown = sorted(set(c.get("task") for c in params["checks"]) - set(tasks.TASKS))
    if unknown:
        module.fail_json(msg="converged: checks name tasks the supervisor does not run: %s (known: %s)" % (
            ", ".join(map(str, unknown)), ", ".join(sorted(tasks.TASKS))))
    text = rerun_record.text(rerun_record.document(params["inputs"], container, params["checks"],
                                                   params["supervisor"]))
    written = read_text(params["path"]) != text
    if written and not module.check_mode:
        os.makedirs(os.path.dirname(params["path"]) or ".", exist_ok=True)
        atomic_write(params["path"], text, mode=0o600)
    module.exit_json(changed=False, written=written, converged=False, container=container, stages={},
                     why="recorded %d checks in %s" % (len(params["checks"]), params["path"]))


if __name__ == "__main__":
    main()
