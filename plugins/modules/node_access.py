#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_access
short_description: Probe that the node answers and that its login user can drive the node's Docker engine
version_added: "0.2.0"
description:
  - The first task of the collection's first play, on each node, with C(become) off, so it sees the rights of the
    login user (C(ansible_user)) that the container stages will use.
  - When O(docker.required), runs C([sudo -n] docker version) exactly as the C(mtslime.posttrain.ssh_docker)
    connection will run C(docker exec), and reports the result; it does not fail on a Docker problem. The facts
    play turns a bad result (or an unreachable node) into one message naming the host and the setting to fix
    (the C(mtslime.posttrain.slime_access_problem) filter).
options:
  docker:
    description: What to probe of the node's Docker.
    type: dict
    default: {}
    suboptions:
      required:
        description: Probe the Docker CLI and engine (the node runs a training container).
        type: bool
        default: false
      sudo:
        description: Run the CLI through C(sudo -n) (C(container_docker_sudo)).
        type: bool
        default: false
      executable:
        description: The Docker CLI (C(ansible_ssh_docker_executable)).
        type: str
        default: docker
      timeout:
        description: Seconds the probe may take.
        type: int
        default: 20
      container:
        description: The training container whose state to report (C(container_name)), with the same CLI and
          C(sudo) whether or not O(docker.required); the fast path asks inside it only when it runs.
        type: str
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
seealso:
  - module: mtslime.posttrain.node_preflight
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Reach the node and check the Docker rights of its login user
  mtslime.posttrain.node_access:
    docker:
      required: true
      sudo: "{{ ansible_become | default(false) }}"
  become: false
  ignore_unreachable: true
  register: __access
"""

RETURN = r"""
user:
  description: The login user on the node.
  returned: always
  type: str
python:
  description: Version of the Python that ran the module.
  returned: always
  type: str
docker:
  description: The Docker probe.
  returned: always
  type: dict
  contains:
    required:
      description: Whether it was probed.
      type: bool
    ok:
      description: The CLI reached the engine (always true when not required).
      type: bool
    sudo:
      description: Whether C(sudo -n) was used.
      type: bool
    cmd:
      description: The command that ran.
      type: list
      elements: str
    rc:
      description: Its exit code (null when it could not start).
      type: int
    stdout:
      description: The engine's version, when it answered.
      type: str
    stderr:
      description: What the CLI (or sudo) said.
      type: str
    container_state:
      description: Docker's status of O(docker.container) (V(running), V(exited), ...), V(absent) when there is
        none, V(unknown) when Docker could not be asked, empty when not asked.
      type: str
"""

import getpass
import platform
import subprocess

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(
    docker=dict(
        type="dict",
        default={},
        options=dict(
            required=dict(type="bool", default=False),
            sudo=dict(type="bool", default=False),
            executable=dict(type="str", default="docker"),
            timeout=dict(type="int", default=20),
            container=dict(type="str"),
        ),
    ),
)


def probe_docker(executable, sudo, timeout):
    cmd = (["sudo", "-n", "--"] if sudo else []) + [executable, "version", "--format", "{{.Server.Version}}"]
    found = dict(required=True, sudo=sudo, cmd=cmd, rc=None, stdout="", stderr="", ok=False)
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except FileNotFoundError:
        found["stderr"] = "%s: command not found" % cmd[0]
        return found
    except subprocess.TimeoutExpired:
        found["stderr"] = "Cannot connect to the Docker daemon: no answer within %d s" % timeout
        return found
    found.update(rc=done.returncode, stdout=done.stdout.decode("utf-8", "replace").strip(),
                 stderr=done.stderr.decode("utf-8", "replace").strip())
    found["ok"] = done.returncode == 0 and bool(found["stdout"])
    return found


def container_state(executable, sudo, name, timeout):
    """Docker's status of container `name`, "absent", or "unknown" when the CLI could not say."""
    inspect = [executable, "container", "inspect", "--format", "{{.State.Status}}", name]
    cmd = (["sudo", "-n", "--"] if sudo else []) + inspect
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    status = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode == 0 and status:
        return status
    return "absent" if b"no such" in done.stderr.lower() else "unknown"


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    docker = module.params["docker"] or {}
    if docker.get("required"):
        result = probe_docker(docker.get("executable") or "docker", bool(docker.get("sudo")),
                              docker.get("timeout") or 20)
    else:
        result = dict(required=False, ok=True, sudo=False, cmd=[], rc=None, stdout="", stderr="")
    result["container_state"] = container_state(docker.get("executable") or "docker", bool(docker.get("sudo")),
                                                docker["container"], docker.get("timeout") or 20) \
        if docker.get("container") else ""
    module.exit_json(changed=False, user=getpass.getuser(), python=platform.python_version(), docker=result)


if __name__ == "__main__":
    main()
