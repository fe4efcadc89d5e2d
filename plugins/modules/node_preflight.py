#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_preflight
short_description: Check in one call what a node needs before the training stages, reporting every failing reason
version_added: "0.1.0"
description:
  - Checks the node host (not the training container) for what the stages need, read-only, and reports
    every failure in one message, numbered, with the variable to change and the fix. Findings that do not
    stop the stages (shared memory larger than RAM) are Ansible warnings and RV(preflight_warnings).
  - "Accelerators: C(mthreads-gmi) (MUSA) or C(nvidia-smi) (CUDA) on the node host, the devices with model name,
    UUID, frame-buffer memory and driver version (RV(accelerator)), counted against O(accelerator.expected_count)
    and O(accelerator.expected_memory_mib). C(mthreads-gmi) is read from its plain table first, the one format seen
    in public captures of many versions (UUIDs added from C(-q --json)); only when the table lists no device are
    C(-q --json), C(-q) and C(-L) tried, and devices read from C(-q) text or C(-L) (no public capture) come with
    RV(accelerator.verified=false) and a warning. C(Error: No MT GPU device found.) (exit code 0) means zero devices.
    C(nvidia-smi) is asked for a C(--query-gpu) CSV (again without a field an old driver rejects), then C(-L).
    A MUSA card that shows 32768 MiB where 49152 MiB is expected (an MTT S4000) gets the IOMMU hint (Moore Threads'
    FAQ: IOMMU on, PCIe ACS redirect off, mt-container-toolkit bound to Docker). With O(checks=[accelerator]) this
    is the node's accelerator report alone."
  - "Docker: the engine must answer C(GET /_ping) with C(OK) on its socket; its version comes from C(/version).
    The C(docker) client program is not needed. With O(docker.required), the node's Python must have the
    C(requests) package, which the container role's C(community.docker) modules import on the node."
  - "Disk: free space at each path, or at its nearest existing parent, must cover what is going to be put there;
    paths on one filesystem must fit together."
  - "Shared memory: the container's C(--shm-size) is compared with the node's C(MemTotal) (a warning, not a failure)."
  - "Ports: each must be free, or held by Ray (C(gcs_server), C(raylet), the Ray dashboard, C(ray::) workers), which
    the Ray stage takes over. Any other holder is named with its pid and command."
  - "Commands: programs that must be on E(PATH)."
options:
  accelerator:
    description: What accelerators the node must have.
    type: dict
    default: {}
    suboptions:
      vendor:
        description: V(auto), V(musa) or V(cuda) (C(slime_accelerator)).
        type: str
        choices: [auto, musa, cuda]
        default: auto
      tool_dir:
        description:
          Directory searched for C(mthreads-gmi) / C(nvidia-smi) before E(PATH) (C(slime_accelerator_tool_dir)).
        type: path
      expected_count:
        description: Number of devices the node must have (C(slime_gpus_per_node)).
        type: int
      expected_memory_mib:
        description: Memory each device must have at least, in MiB (49152 for an MTT S4000).
        type: int
      required:
        description: When false, accelerator problems are warnings instead of failures.
        type: bool
        default: true
  docker:
    description: The Docker engine the stages start the training container with.
    type: dict
    default: {}
    suboptions:
      required:
        description: When false, an unreachable engine is a warning instead of a failure.
        type: bool
        default: true
      socket:
        description: "Engine address: C(unix:///path/to/docker.sock) or C(tcp://host:port) (plain HTTP)."
        type: str
        default: unix:///var/run/docker.sock
  disk:
    description: Paths that must have free space.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Where the data will go; need not exist yet (its nearest existing parent is measured).
        type: path
        required: true
      need_bytes:
        description: "Space needed, in bytes or as a size such as C(32g) or C(16GiB)."
        type: raw
        required: true
      what:
        description: "What needs the space, for the message, e.g. C(the Qwen3-8B HF model, 16 GiB)."
        type: str
      var:
        description: Variable that sets the path, named in the message.
        type: str
      projection:
        description:
          - "For a training save dir: the run's checkpoints, O(disk[].projection.num_rollout) /
            O(disk[].projection.save_interval) saves (plus the last rollout) of O(disk[].need_bytes) each (or the
            size of the newest complete iteration already there), counted from the tracker's iteration, minus what
            retention deletes, against the free space."
          - A run that does not fit is a warning with the figures and the C(train_job_keep_checkpoints) that would
            fit, not a failure.
        type: dict
        suboptions:
          num_rollout:
            description: C(--num-rollout).
            type: int
            required: true
          save_interval:
            description: C(--save-interval).
            type: int
            required: true
          keep:
            description: C(train_job_keep_checkpoints) (V(0) = keep all).
            type: int
            default: 0
          prune:
            description: C(train_job_prune); V(trash) keeps pruned checkpoints on the same disk.
            type: str
            choices: [trash, delete]
            default: trash
          size_from:
            description: "Where O(disk[].need_bytes) comes from, for the warning (for example
              C(estimated from slime_model_args: ... parameters x 14 bytes) or C(preflight_checkpoint_gib))."
            type: str
            default: need_bytes
  shm:
    description: Shared memory the training container gets.
    type: dict
    suboptions:
      size:
        description: "Docker-style size (C(500g), C(2g), C(512m) or bytes), as given to C(docker run --shm-size)."
        type: raw
        required: true
      var:
        description: Variable that sets the size, named in the warning.
        type: str
  ports:
    description: TCP ports the node must have free (or held by Ray).
    type: list
    elements: dict
    default: []
    suboptions:
      port:
        description: Port number.
        type: int
        required: true
      what:
        description: What uses the port, for the message (C(Ray GCS), C(Ray dashboard / jobs API)).
        type: str
      var:
        description: Variable that sets the port (C(ray_gcs_port), C(ray_dashboard_port)), named in the message.
        type: str
  commands:
    description: Programs that must be on E(PATH) of the node.
    type: list
    elements: str
    default: []
  checks:
    description:
      - The checks to run; the others are reported in RV(checks) with C(skipped) and are not probed at all
        (V([ports]) reads only C(/proc), without the accelerator tool or the Docker engine).
      - C(disk), C(shm), C(ports) and C(commands) are also skipped when their option is empty.
    type: list
    elements: str
    choices: [accelerator, docker, disk, shm, ports, commands]
    default: [accelerator, docker, disk, shm, ports, commands]
    version_added: "0.2.0"
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
notes:
  - Run it with C(become) so that the owners of busy ports can be named; without it other users' processes stay
    anonymous.
  - Sockets are looked up in C(/proc/net/tcp) and C(/proc/net/tcp6) of the node's network namespace, which the
    C(--net host) training container shares.
seealso:
  - module: mtslime.posttrain.ray_start
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Check the node before any stage
  mtslime.posttrain.node_preflight:
    accelerator:
      vendor: "{{ slime_accelerator | default('auto') }}"
      tool_dir: "{{ slime_accelerator_tool_dir | default(omit) }}"
      expected_count: "{{ slime_gpus_per_node }}"
      expected_memory_mib: 49152
    docker:
      socket: unix:///var/run/docker.sock
    disk:
      - path: /data/models/Qwen3-8B
        need_bytes: 17g
        what: the Qwen3-8B HF model (16 GiB)
        var: slime_hf_model_dir
      - path: /data/LLMs/MCORE/Qwen3-8B_slime
        need_bytes: 17g
        what: the torch_dist checkpoint (16 GiB)
        var: slime_mcore_dir
    shm:
      size: 500g
      var: container_shm_size
    ports:
      - {port: 64379, what: Ray GCS, var: ray_gcs_port}
      - {port: 8772, what: Ray dashboard / jobs API, var: ray_dashboard_port}
  become: true
  register: preflight

- name: Only name who holds the Ray ports (no accelerator tool, no Docker engine)
  mtslime.posttrain.node_preflight:
    checks: [ports]
    ports:
      - {port: "{{ ray_gcs_port }}", what: Ray GCS, var: ray_gcs_port}
      - {port: "{{ ray_dashboard_port }}", what: Ray dashboard / jobs API, var: ray_dashboard_port}
  become: true
"""

RETURN = r"""
ready:
  description: No check failed (warnings allowed).
  returned: always
  type: bool
failures:
  description: One sentence per failed check, with the variable to change and the fix.
  returned: always
  type: list
  elements: str
preflight_warnings:
  description:
    - Findings that do not stop the stages (shared memory larger than RAM, a check that is not O(docker.required)).
    - The same messages are issued as Ansible warnings, so they also appear in the task's C(warnings)
      (a key Ansible reserves and rewrites, hence this separate plain list).
  returned: always
  type: list
  elements: str
accelerator:
  description:
    - What the accelerator probe found (the play keeps it as C(slime_node_accelerator), which the Ray head's
      C(--num-gpus), the container check and the job manifest read).
    - Empty when C(accelerator) is not in O(checks).
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
checks:
  description:
    - "One entry per check (C(accelerator), C(docker), C(disk), C(shm), C(ports), C(commands)), each with C(ok) and
      C(detail); C(skipped) when the check was not asked for (not in O(checks), or its option empty)."
    - "C(docker) adds C(version), C(api_version), C(runtimes), C(python_requests); C(disk), C(ports) and
      C(commands) add C(items);
      C(shm) adds C(size_bytes) and C(mem_total_bytes); a C(disk) item with O(disk[].projection) adds C(projection)
      (C(saves_total), C(saves_remaining), C(checkpoint_bytes), C(at_end), C(need_bytes), C(free_bytes), C(ok),
      C(fits_keep), C(warning))."
  returned: always
  type: dict
  sample:
    ports:
      ok: false
      detail: "1 of 2 ports busy"
      items:
        - {port: 8772, what: Ray dashboard, state: foreign, pid: 4242, command: "python3 -m http.server 8772"}
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.accelerator import (
    failure_message,
    probe,
    problems_for,
    tools_for,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.docker_engine import check_docker
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.disk import check_disk, check_shm
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.ports import check_ports


def check_commands(names):
    failures = []
    rows = []
    for name in names:
        path = shutil.which(name)
        rows.append(dict(name=name, path=path))
        if not path:
            failures.append(
                "command %s not found on PATH (%s); install it on the node" % (name, os.environ.get("PATH", ""))
            )
    return failures, dict(ok=not failures, detail="%d of %d found" % (len(rows) - len(failures), len(rows)), items=rows)


# ---------------------------------------------------------------- main

CHECKS = ("accelerator", "docker", "disk", "shm", "ports", "commands")

ARGUMENT_SPEC = dict(
    accelerator=dict(
        type="dict",
        default={},
        apply_defaults=True,
        options=dict(
            vendor=dict(type="str", choices=["auto", "musa", "cuda"], default="auto"),
            tool_dir=dict(type="path"),
            expected_count=dict(type="int"),
            expected_memory_mib=dict(type="int"),
            required=dict(type="bool", default=True),
        ),
    ),
    docker=dict(
        type="dict",
        default={},
        apply_defaults=True,
        options=dict(
            required=dict(type="bool", default=True),
            socket=dict(type="str", default="unix:///var/run/docker.sock"),
        ),
    ),
    disk=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(
            path=dict(type="path", required=True),
            need_bytes=dict(type="raw", required=True),
            what=dict(type="str"),
            var=dict(type="str"),
            projection=dict(
                type="dict",
                options=dict(
                    num_rollout=dict(type="int", required=True),
                    save_interval=dict(type="int", required=True),
                    keep=dict(type="int", default=0),
                    prune=dict(type="str", choices=["trash", "delete"], default="trash"),
                    size_from=dict(type="str", default="need_bytes"),
                ),
            ),
        ),
    ),
    shm=dict(type="dict", options=dict(size=dict(type="raw", required=True), var=dict(type="str"))),
    ports=dict(
        type="list",
        elements="dict",
        default=[],
        options=dict(port=dict(type="int", required=True), what=dict(type="str"), var=dict(type="str")),
    ),
    commands=dict(type="list", elements="str", default=[]),
    checks=dict(type="list", elements="str", choices=list(CHECKS), default=list(CHECKS)),
)


def check_accelerator(accel):
    """(failures, warnings, check entry, probe result) for the accelerator probe."""
    result = probe(accel["vendor"], accel["tool_dir"])
    problems = problems_for(
        result, accel["vendor"], accel["tool_dir"], accel["expected_count"], accel["expected_memory_mib"]
    )
    failures, warnings = (problems, []) if accel["required"] else ([], list(problems))
    warnings.extend("accelerator: %s" % warning for warning in result.get("warnings") or [])
    if result.get("tool_path"):
        detail = "%d %s device%s via %s" % (
            result["count"],
            result.get("vendor"),
            "" if result["count"] == 1 else "s",
            result.get("command") or result["tool_path"],
        )
    else:
        detail = "no %s found" % " / ".join(tools_for(accel["vendor"]))
    return failures, warnings, dict(ok=not problems, detail=detail, problems=problems), result


def preflight(params):
    """Run the checks in O(checks); returns (failures, warnings, checks, accelerator)."""
    failures, warnings, checks = [], [], {}
    wanted = set(params.get("checks") or CHECKS)

    def skipped(name, detail):
        checks[name] = dict(ok=True, skipped=True, detail=detail)

    result = {}
    if "accelerator" in wanted:
        accel_failures, accel_warnings, checks["accelerator"], result = check_accelerator(params["accelerator"])
        failures.extend(accel_failures)
        warnings.extend(accel_warnings)
    else:
        skipped("accelerator", "not in checks")

    if "docker" in wanted:
        docker = params["docker"]
        docker_failures, checks["docker"] = check_docker(docker)
        (failures if docker["required"] else warnings).extend(docker_failures)
        runtimes = checks["docker"].get("runtimes")
        if result.get("vendor") == "musa" and result["count"] and runtimes is not None and "mthreads" not in runtimes:
            warnings.append(
                "docker: the engine has no mthreads runtime (runtimes: %s); Moore Threads' FAQ wants "
                "mt-container-toolkit bound to Docker (needed for --runtime mthreads containers; a --privileged "
                "container may still see the cards)" % ", ".join(runtimes)
            )
    else:
        skipped("docker", "not in checks")

    if "disk" not in wanted:
        skipped("disk", "not in checks")
    elif params["disk"]:
        disk_failures, checks["disk"] = check_disk(params["disk"])
        failures.extend(disk_failures)
        projections = [row.get("projection") or {} for row in checks["disk"]["items"]]
        warnings.extend(item["warning"] for item in projections if item.get("warning"))
    else:
        skipped("disk", "no paths given")

    if "shm" not in wanted:
        skipped("shm", "not in checks")
    elif params["shm"]:
        shm_failures, shm_warnings, checks["shm"] = check_shm(params["shm"])
        failures.extend(shm_failures)
        warnings.extend(shm_warnings)
    else:
        skipped("shm", "no size given")

    if "ports" not in wanted:
        skipped("ports", "not in checks")
    elif params["ports"]:
        port_failures, checks["ports"] = check_ports(params["ports"])
        failures.extend(port_failures)
    else:
        skipped("ports", "no ports given")

    if "commands" not in wanted:
        skipped("commands", "not in checks")
    elif params["commands"]:
        command_failures, checks["commands"] = check_commands(params["commands"])
        failures.extend(command_failures)
    else:
        skipped("commands", "no commands given")

    return failures, warnings, checks, result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    failures, warnings, checks, accelerator = preflight(module.params)
    for warning in warnings:
        module.warn(warning)
    result = dict(
        changed=False,
        ready=not failures,
        failures=failures,
        preflight_warnings=warnings,
        checks=checks,
        accelerator=accelerator,
    )
    if failures:
        module.fail_json(msg=failure_message("node preflight failed", failures, noun="check"), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
