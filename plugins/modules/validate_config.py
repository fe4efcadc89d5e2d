#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: validate_config
short_description: Validate a training cluster's slime configuration before anything changes
version_added: "0.1.0"
description:
  - Runs on the controller and touches no node. Checks one training cluster's GPU split, parallelism, batch sizes,
    sampling parameters, ports, paths and flag names, and fails with one message that lists every problem,
    each naming the variable(s), the values and the fix.
  - "Rules: actor GPUs (nodes x GPUs per node) + rollout GPUs fit in the cluster's GPUs (with C(--colocate), the larger
    of the two); TP x PP x CP divides the actor GPUs; TP divides the attention heads and the query groups;
    the rollout GPUs are a multiple of the GPUs per engine; rollout_batch_size x n_samples_per_prompt is divisible by
    num_steps_per_rollout and equals global_batch_size x num_steps_per_rollout when both are given;
    temperatures > 0; top-p in (0, 1]; ports distinct and in range; eval data when an eval interval is set; a save dir
    when a save interval is set; absolute paths; no unknown or misspelled train.py flags (slime ignores those silently)."
options:
  cluster:
    description: Name of the training cluster, used in the messages.
    type: str
    required: true
  nodes:
    description: "GPUs of each node of the cluster, C({node name: GPU count})."
    type: dict
    required: true
  addresses:
    description: "IP address of each node, C({node name: address}); a node without one is reported (set C(slime_node_ip))."
    type: dict
    default: {}
  actor_num_nodes:
    description: C(--actor-num-nodes).
    type: int
    required: true
  actor_gpus_per_node:
    description: C(--actor-num-gpus-per-node) (C(slime_actor_gpus_per_node)).
    type: int
    required: true
  rollout_num_gpus:
    description: C(--rollout-num-gpus).
    type: int
    required: true
  train_args:
    description: "The run script's arrays, C({array name: {flag: value}}) (C(slime_train_args))."
    type: dict
    required: true
  overrides:
    description: Single-flag overrides (C(slime_train_args_overrides)).
    type: dict
    default: {}
  model_args:
    description: "MODEL_ARGS as C({flag: value}) (C(slime_model_args))."
    type: dict
    required: true
  ports:
    description: "Ports by variable name, for example C({ray_gcs_port: 64379, ray_dashboard_port: 8772})."
    type: dict
    default: {}
  paths:
    description: Paths by variable name; each must be absolute.
    type: dict
    default: {}
  known_flags_extra:
    description: Flags your slime version has that the built-in list lacks (C(slime_train_known_flags_extra)).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    details: Reads variables only.
  diff_mode:
    support: none
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.CONTROLLER_ACTION
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Validate the training configuration of this cluster
  mtslime.posttrain.validate_config:
    cluster: "{{ slime_cluster_info.name }}"
    nodes: "{{ slime_cluster_info.gpus }}"
    actor_num_nodes: 1
    actor_gpus_per_node: 4
    rollout_num_gpus: 4
    train_args: "{{ slime_train_args }}"
    overrides: "{{ slime_train_args_overrides }}"
    model_args: "{{ slime_model_args }}"
    ports:
      ray_gcs_port: 64379
      ray_dashboard_port: 8772
"""

RETURN = r"""
problems:
  description: Every problem found, one message each.
  returned: always
  type: list
  elements: str
cluster:
  description: The cluster validated.
  returned: always
  type: str
"""
