#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: accelerator_info
short_description: Find the node's Moore Threads (MUSA) or NVIDIA (CUDA) GPUs and check their count and memory
version_added: "0.1.0"
description:
  - Runs C(mthreads-gmi) (MUSA) or C(nvidia-smi) (CUDA) on the node host and returns the devices it lists,
    with model name, UUID, frame-buffer memory and driver version.
  - "C(mthreads-gmi) is read from its plain table first, the one format seen in public captures of many versions
    (UUIDs are added from C(-q --json) when it lists as many devices; a different count is a warning). Only when the
    table lists no device are C(-q --json), C(-q) and C(-L) (C(GPU 0: ...) or C(GPU 0 : ... (UUID : ...)), UUIDs with
    or without C(GPU-)) tried; C(-q) text and C(-L) have no public capture, so devices read from them come with
    RV(accelerator.verified=false) and a warning. C(Error: No MT GPU device found.) (printed with exit code 0) means
    zero devices, with its own message."
  - "C(nvidia-smi) is asked for a C(--query-gpu) CSV (asked again without a field that an old driver rejects with exit
    code 2, C(Field \"x\" is not a valid field to query.)), then C(-L); with more than one device C(nvidia-smi topo -m)
    tells whether NVLink joins them (its ANSI-underlined header is read as plain text)."
  - "Compares what it finds with O(expected_count) and O(expected_memory_mib) and returns every
    difference as a sentence in RV(problems). A MUSA card that shows 32768 MiB where 49152 MiB is
    expected (always so for an MTT S4000) gets the IOMMU hint (IOMMU off; containers may then see 0
    devices, error 801; Moore Threads' FAQ: IOMMU on, PCIe ACS redirect off, mt-container-toolkit bound to Docker)."
  - Run it on the host, not in the training container; inside a container C(mthreads-gmi) may print nothing.
options:
  vendor:
    description:
      - Which accelerator to look for. V(auto) tries MUSA, then CUDA.
      - The per-host override, usually C(slime_accelerator) in the inventory.
    type: str
    choices: [auto, musa, cuda]
    default: auto
  tool_dir:
    description:
      - Directory searched for C(mthreads-gmi) / C(nvidia-smi) before E(PATH) (C(slime_accelerator_tool_dir)).
    type: path
  expected_count:
    description: Number of devices the node must have (C(slime_gpus_per_node)). Not checked when unset.
    type: int
  expected_memory_mib:
    description:
      - Frame-buffer memory each device must have at least, in MiB (49152 for an MTT S4000, 81920 for an S5000).
        Not checked when unset or when the tool does not report memory.
    type: int
  fail_on_mismatch:
    description: Fail the task when RV(problems) is not empty, with all problems in one message.
    type: bool
    default: false
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
seealso:
  - module: mtslime.posttrain.node_preflight
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Find the accelerators of this node
  mtslime.posttrain.accelerator_info:
    vendor: "{{ slime_accelerator | default('auto') }}"
    tool_dir: "{{ slime_accelerator_tool_dir | default(omit) }}"
    expected_count: "{{ slime_gpus_per_node }}"
    expected_memory_mib: 49152
    fail_on_mismatch: true
  register: accel

- name: Use the count that was found
  ansible.builtin.debug:
    msg: "{{ accel.accelerator.count }} x {{ accel.accelerator.devices[0].name }} ({{ accel.accelerator.vendor }})"
"""

RETURN = r"""
accelerator:
  description: What was found.
  returned: always
  type: dict
  contains:
    vendor:
      description: V(musa) or V(cuda); null when V(auto) found no tool.
      type: str
    tool:
      description: C(mthreads-gmi) or C(nvidia-smi).
      type: str
    tool_path:
      description: Absolute path of the tool that was run; null when it was not found.
      type: str
    count:
      description: Number of devices listed.
      type: int
    devices:
      description: "One dict per device: C(index), C(name), C(uuid), C(memory_total_mib) (null when the format has no
        memory)."
      type: list
      elements: dict
    driver_version:
      description: Driver version the tool reports, when it does.
      type: str
    source_format:
      description: "Output the devices were read from: V(table), V(json), V(query), V(list) (mthreads-gmi) or V(csv),
        V(list) (nvidia-smi)."
      type: str
    command:
      description: The command line whose output was used.
      type: str
    verified:
      description: Whether the devices were read from a format recorded from the real tool (V(false) for
        C(mthreads-gmi -q) text and C(-L), reconstructed without a public capture); null without devices.
      type: bool
    no_device:
      description: "C(mthreads-gmi)'s own C(Error: No MT GPU device found.) when it printed that (zero devices)."
      type: str
    nvlink:
      description: Whether C(nvidia-smi topo -m) shows NVLink between the GPUs; null when not asked or not known.
      type: bool
    warnings:
      description: What the probe found doubtful (an unverified format, two formats that disagree on the count).
      type: list
      elements: str
    tool_output:
      description: First non-empty line the tool printed (useful when it listed no devices).
      type: str
    attempts:
      description: Every command tried, with its rc, the format and the number of devices read.
      type: list
      elements: dict
    searched:
      description: The vendors looked for, in order (V(musa), V(cuda)).
      type: list
      elements: str
problems:
  description: "Sentences naming each difference from what was expected, with the variable to change and the fix."
  returned: always
  type: list
  elements: str
  sample:
    - "found 4 MUSA devices (MTT S4000) but slime_gpus_per_node is 8; ..."
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.accelerator import (
    failure_message,
    probe,
    problems_for,
)

ARGUMENT_SPEC = dict(
    vendor=dict(type="str", choices=["auto", "musa", "cuda"], default="auto"),
    tool_dir=dict(type="path"),
    expected_count=dict(type="int"),
    expected_memory_mib=dict(type="int"),
    fail_on_mismatch=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    result = probe(params["vendor"], params["tool_dir"])
    for warning in result.get("warnings") or []:
        module.warn(warning)
    problems = problems_for(
        result, params["vendor"], params["tool_dir"], params["expected_count"], params["expected_memory_mib"]
    )
    if problems and params["fail_on_mismatch"]:
        module.fail_json(
            msg=failure_message("accelerator check failed", problems), accelerator=result, problems=problems
        )
    module.exit_json(changed=False, accelerator=result, problems=problems)


if __name__ == "__main__":
    main()
