#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_start
short_description: Start a Ray head, join a worker to it, leave a converged Ray alone, or refuse (guide §5.1)
version_added: "0.2.0"
description:
  - Wraps C(ray start) the way the cephadm-ansible modules wrap their CLI. It first probes the node, read-only and
    fast (no C(ray status), which takes 40 s to fail on a dead head) - Ray's processes, the cluster address Ray
    recorded at C(ray start) (C(/tmp/ray/ray_current_cluster)) and whether it answers, which of the Ray ports
    something listens on - and, on a head, its GCS (gRPC) and dashboard, the nodes registered and the jobs that
    are PENDING or RUNNING (C(job_rules.is_active)).
  - "It then decides (C(module_utils/ray/start_rules.py)): V(keep) - a head up on the configured ports with the
    configured address, GPUs and CPUs, or a worker its head lists alive with its GPUs, is left alone;
    V(start) / V(join) - nothing runs, so C(ray start --head ...) or C(ray start --address ...) runs;
    V(restart) - C(ray stop) then C(ray start), for a head that differs, the remains of a dead head, or a worker
    attached elsewhere; V(refuse) - the module fails, naming why and the fix."
  - C(ray stop) never runs while a job runs on the cluster unless O(restart=force) (the guide's own
    C(ray stop --force)); C(--force) is used otherwise only on the remains of a Ray whose GCS is gone.
  - A configured port that something listens on while no Ray runs here is refused at once (the preflight,
    M(mtslime.posttrain.node_preflight), names the process).
  - A head whose recorded GCS answers while its dashboard does not (still starting, or a loaded node) is asked
    again every 3 s for up to 25 s before it is judged; only then is it refused as a head that cannot list its jobs.
  - Check mode reports the decision and the commands that would run.
options:
  role:
    description: V(head) starts the cluster; V(worker) joins O(gcs_address).
    type: str
    choices: [head, worker]
    required: true
  gcs_address:
    description: The head's GCS, C(ip:port) (C(ray start --port), C(ray_gcs_port)).
    type: str
    required: true
  node_ip:
    description: This node's address (C(--node-ip-address), the hostfile's first column).
    type: str
    required: true
  num_gpus:
    description: C(--num-gpus), the node's accelerators.
    type: int
    required: true
  num_cpus:
    description: C(--num-cpus) (C(ray_num_cpus), guide 64).
    type: int
    required: true
  dashboard_host:
    description:
      - C(--dashboard-host) of a head (C(ray_dashboard_host)). Its C(--dashboard-port) is the port of O(dashboard_url).
    type: str
    default: 127.0.0.1
  extra_args:
    description: More C(ray start) arguments (C(ray_head_start_extra_args)).
    type: list
    elements: str
    default: []
  restart:
    description:
      - V(when_idle) restarts a Ray that differs only when no job runs; V(never) refuses; V(force) restarts it even
        under a job (C(ray stop --force)).
    type: str
    choices: [when_idle, never, force]
    default: when_idle
  expected_nodes:
    description: On a head, the node addresses of the cluster; RV(ready) says whether all are registered.
    type: list
    elements: str
    default: []
  expected_gpus:
    description: On a head, the cluster's GPUs; RV(ready) says whether all are registered.
    type: int
  cluster_nodes:
    description: On a worker, the nodes the head registered (RV(nodes) of the head's C(ray_start) result).
    type: list
    elements: dict
    default: []
  cluster_active_jobs:
    description: On a worker, the cluster's active jobs (RV(active_jobs) of the head's C(ray_start) result).
    type: list
    elements: str
    default: []
  request_timeout:
    default: 5
extends_documentation_fragment:
  - mtslime.posttrain.ray
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
notes:
  - On a head, O(dashboard_url) is the head's own view of its dashboard (loopback).
seealso:
  - module: mtslime.posttrain.ray_cluster
  - module: mtslime.posttrain.node_preflight
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Start the Ray head, or leave it alone
  mtslime.posttrain.ray_start:
    role: head
    gcs_address: "10.121.38.2:{{ ray_gcs_port }}"
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
    node_ip: 10.121.38.2
    num_gpus: 8
    num_cpus: 64
    expected_nodes: [10.121.38.2, 10.121.38.3]
    expected_gpus: 16
  register: head

- name: Join the head, or leave this worker alone
  mtslime.posttrain.ray_start:
    role: worker
    gcs_address: "10.121.38.2:{{ ray_gcs_port }}"
    node_ip: 10.121.38.3
    num_gpus: 8
    num_cpus: 64
    cluster_nodes: "{{ hostvars['node1'].head.nodes }}"
    cluster_active_jobs: "{{ hostvars['node1'].head.active_jobs }}"
"""

RETURN = r"""
action:
  description: V(keep), V(start), V(join), V(restart) or V(refuse).
  returned: always
  type: str
reason:
  description: Why, in one sentence (with the fix for a refusal, in RV(fix)).
  returned: always
  type: str
  sample: no Ray runs on this node
fix:
  description: What to change when the module refuses; null otherwise.
  returned: always
  type: str
cmd:
  description: The last command run (or that would run under check mode), as a list; empty for V(keep).
  returned: always
  type: list
  elements: str
  sample: [ray, start, --head, --port, "64379", --dashboard-port, "8772"]
rc:
  description: Its return code (0 when nothing ran).
  returned: always
  type: int
stdout:
  description: Its standard output.
  returned: always
  type: str
stderr:
  description: Its standard error.
  returned: always
  type: str
start:
  description: When the first command started.
  returned: when a command ran
  type: str
end:
  description: When the last command ended.
  returned: when a command ran
  type: str
delta:
  description: How long the commands took.
  returned: when a command ran
  type: str
commands:
  description: Every command run (or planned, in check mode), in order, each with C(cmd), C(rc), C(stdout), C(stderr).
  returned: always
  type: list
  elements: dict
probe:
  description: What the node showed (Ray processes, recorded cluster address and whether it answers, busy ports).
  returned: always
  type: dict
up:
  description: On a head, whether Ray answered on both configured ports before any action.
  returned: always
  type: bool
ready:
  description: On a head left alone, every expected node and GPU was registered; false after a start.
  returned: always
  type: bool
nodes:
  description:
    - On a head, the nodes registered (as M(mtslime.posttrain.ray_cluster) lists them); empty after a (re)start,
      since a new head knows no worker yet. Workers read it as O(cluster_nodes).
  returned: always
  type: list
  elements: dict
active_jobs:
  description: On a head, the submission ids of the PENDING or RUNNING jobs (empty after a (re)start).
  returned: always
  type: list
  elements: str
ray_version:
  description: The Ray version the head's dashboard reported, when it answered.
  returned: always
  type: str
actions:
  description: What was done, for people.
  returned: always
  type: list
  elements: str
diff:
  description: The node's Ray before and after.
  returned: when changed
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import ray_start_task


def main():
    ray_start_task.main(AnsibleModule(**ray_start_task.module_kwargs()))


if __name__ == "__main__":
    main()
