#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: validate_config
short_description: Check the whole inventory against its typed schema before anything touches a node
version_added: "0.1.0"
description:
  - Runs on the controller, needs no facts and touches no node. Reads every inventory variable the collection uses
    (docs/configuration.md lists them with their types) for each node, templated as the plays would see it, and
    reports every problem at once, one message each, naming the variable, the host and where its value comes from
    (extra vars, the host, or a group, with file and line), the value, the rule and the fix.
  - "Types: names (C(^[A-Za-z0-9][A-Za-z0-9._-]*$)) for what becomes a file name, container name, job id or shell
    word; absolute, normalised paths of a safe character set; ports 1-65535 and counts as integers (no booleans,
    no floats); booleans as YAML booleans; lists and dicts where they are expected; train.py flags typed as slime's
    and Megatron's parsers type them (known_flags.json), switches as YAML booleans."
  - "Rules between values: paths a container uses lie under its mounts; the data, Hugging Face model, converted
    checkpoint, save, work and log directories are neither equal nor nested (the log dir may lie in the work dir,
    as in the guide), after the C(slime_train_args_overrides), and across every cluster on a shared storage (save
    dirs and container run dirs belong to one cluster); ports distinct per node; a cluster is homogeneous in
    accelerator vendor and GPU count, shares its cluster-wide values, and a node belongs to exactly one cluster."
  - "Each cluster's training configuration, as slime, Megatron and SGLang check it at start-up: the GPU split, TP x PP
    x CP, TP against the heads and the query groups (by O(hosts)' C(slime_megatron_tp_above_query_groups)), SGLang
    engine TP against the heads, the batch arithmetic (global batch divisible by micro-batch x data-parallel size),
    sampling ranges (greedy eval is fine), eval and save dependencies, and unknown flags."
  - Never fails by itself; the result says which clusters are invalid, so that each stops alone.
options:
  hosts:
    description: The nodes to check (default the play's hosts); the cluster layout is built from all of them.
    type: list
    elements: str
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
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the inventory
  mtslime.posttrain.validate_config:
    hosts: "{{ groups['slime_nodes'] }}"
  register: __validate
  run_once: true

- name: Refuse the configuration of this node's cluster, on its head
  ansible.builtin.fail:
    msg: "{{ __validate.clusters[__validate.hosts[inventory_hostname]].msg }}"
  when: __validate.hosts[inventory_hostname] in __validate.failed_clusters
"""

RETURN = r"""
problems:
  description: Every problem found, one message each.
  returned: always
  type: list
  elements: str
clusters:
  description: "Per cluster: C(head), C(nodes), its C(problems) and C(msg), the numbered list (empty when valid)."
  returned: always
  type: dict
failed_clusters:
  description: Names of the clusters with problems.
  returned: always
  type: list
  elements: str
hosts:
  description: "The cluster of each host, C({host: cluster})."
  returned: always
  type: dict
inputs:
  description: "C({host: digest}): the templated values of every collection variable on every node of the host's
    cluster and the collection's files, hashed (C(plugin_utils/inventory/inputs.py)); M(mtslime.posttrain.converged)
    records it and compares it."
  returned: always
  type: dict
"""
