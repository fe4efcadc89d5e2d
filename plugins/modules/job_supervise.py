#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_supervise
short_description: Install, configure or disable the training cluster's supervisor on a node
version_added: "0.1.0"
description:
  - "Writes the supervisor of a training cluster (docs/recovery.md) into O(directory): C(lib.zip), the code (the
    payload this module runs with: Ansible's module_utils and this collection's, byte-for-byte the same for the same
    version) and C(config.json) (mode 0600), the arguments the roles gave M(mtslime.posttrain.ray_start),
    M(mtslime.posttrain.ray_job), M(mtslime.posttrain.checkpoint_retention) and M(mtslime.posttrain.job_notify)."
  - "The keeper container (C(<container>-supervisor), made by the container role) runs one check every O(interval)
    seconds inside the training container O(container): on the head the Ray head as ray_start keeps it, every node
    back, then the job as ray_job keeps it (a FAILED or lost job resubmitted from the last complete iteration, the
    crash-loop rule obeyed), word of events, retention; on a worker, Ray joined again when its processes are gone."
  - "O(state=disabled) sets C(enabled) false under the job's lease, so no check acts after it returns
    (playbooks/stop.yml runs it before it stops the job)."
  - Returns the supervisor's last check (C(state.json)).
options:
  directory:
    description: The supervisor's directory, the same path in the training container and the keeper container.
    type: path
    required: true
  state:
    description: C(enabled) writes the code and configuration; C(disabled) turns the checks off.
    type: str
    choices: [enabled, disabled]
    default: enabled
  role:
    description: The node's role in its training cluster.
    type: str
    choices: [head, worker]
    default: head
  interval:
    description: Seconds between two checks (train_job_supervise_interval), 5 or more.
    type: int
    default: 60
  container:
    description: The training container the checks run in.
    type: str
    default: slime_rl
  python:
    description: The training container's Python, which runs C(lib.zip).
    type: str
    default: python3
  environment:
    description: Environment of the tasks a check runs (the Ray start's environment).
    type: dict
    default: {}
  ray_start:
    description: The arguments of M(mtslime.posttrain.ray_start) for this node; unset keeps those configured before
      (a run that skipped the Ray stage).
    type: dict
  ray_job:
    description: The arguments of M(mtslime.posttrain.ray_job) (state running); required on the head when enabled.
    type: dict
  checkpoint_retention:
    description: The arguments of M(mtslime.posttrain.checkpoint_retention); unset, a check prunes nothing.
    type: dict
  job_notify:
    description: The arguments of M(mtslime.posttrain.job_notify) (webhook URLs are secrets); unset, no word is sent.
    type: dict
  lease_wait:
    description: With O(state=disabled), seconds to wait for a check that holds the job's lease.
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
  - Runs in the training container (the train_job stage's connection).
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
# roles/train_job/tasks/main.yml passes the arguments of its own ray_job task and of the ray_head role's ray_start
- name: Supervise the job of the head
  mtslime.posttrain.job_supervise:
    directory: /home/slime/musa_example/qwen_32b_sherry/logs/supervisor
    role: head
    interval: 60
    container: slime_rl
    ray_start:
      role: head
      gcs_address: 10.0.0.1:6379
      node_ip: 10.0.0.1
      num_gpus: 8
      num_cpus: 64
    ray_job:
      experiment: qwen3-8B
      argv: [--actor-num-nodes, "1"]

- name: Turn supervision off before stopping the job
  mtslime.posttrain.job_supervise:
    directory: /home/slime/musa_example/qwen_32b_sherry/logs/supervisor
    state: disabled
"""

RETURN = r"""
directory:
  description: The supervisor's directory.
  returned: always
  type: str
actions:
  description: Sentences saying what was written (or would be) and why.
  returned: always
  type: list
  elements: str
library_sha256:
  description: The SHA-256 of C(lib.zip) as this version of the collection writes it.
  returned: when O(state=enabled)
  type: str
supervisor:
  description: "The last check (C(state.json)): C(last_check), C(next_check), C(decision) (C(action), C(message),
    C(time), C(job)), C(enabled), C(role); empty before the first check."
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import install


def main():
    install.main(AnsibleModule(**install.module_kwargs()))


if __name__ == "__main__":
    main()
