# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
name: ssh_docker
short_description: Run tasks inside a Docker container on a node reached over SSH
version_added: "0.2.0"
description:
  - Connects to the node exactly like C(ansible.builtin.ssh) (same options, same variables, same ControlMaster
    socket, so one persistent SSH connection serves both the node's tasks and the container's), and runs every
    command inside the container through the node's own Docker CLI, as
    C([sudo -n] docker exec -i -u <user> <container> /bin/sh -c '<command>').
  - Modules therefore run with the container's Python; with pipelining they are piped through that one SSH session.
    Files (templates, copies, non-pipelined modules) move over the same channel with C(dd) inside the container
    (the C(piped) transfer method is forced, since C(sftp)/C(scp) would write to the node's file system).
  - Every option of C(ansible.builtin.ssh) applies too (C(ansible_host), C(ansible_port), C(ansible_user),
    C(ansible_ssh_private_key_file), C(ansible_ssh_common_args) with C(ProxyJump), C(ssh_args), pipelining,
    timeouts...); they are not repeated here. See C(ansible-doc -t connection ansible.builtin.ssh).
  - The collection's facts play sets the options below for its stage plays (C(slime_stage)); the node needs a
    Docker CLI and, for a user outside the C(docker) group, passwordless C(sudo) for it. The controller needs only
    the OpenSSH client.
author: mtslime.posttrain contributors (!UNKNOWN)
options:
  docker_container:
    description: Name or id of the container on the node.
    type: string
    required: true
    vars:
      - name: ansible_ssh_docker_container
  docker_container_user:
    description: User that runs the commands inside the container (C(docker exec -u)).
    type: string
    default: root
    vars:
      - name: ansible_ssh_docker_user
  docker_sudo:
    description:
      - Run the Docker CLI through C(sudo -n) on the node, for a login user outside the C(docker) group.
      - C(sudo) must not ask for a password (the module's data is on standard input).
    type: boolean
    default: false
    vars:
      - name: ansible_ssh_docker_sudo
  docker_executable:
    description: The Docker CLI on the node.
    type: string
    default: docker
    vars:
      - name: ansible_ssh_docker_executable
notes:
  - Become is not used inside the container (commands already run as O(docker_container_user)).
"""

EXAMPLES = r"""
# Set by the collection's facts play for the stage plays; by hand it looks like this:
# node1 ansible_host=10.0.0.11 ansible_port=62216 ansible_user=deploy
#       ansible_connection=mtslime.posttrain.ssh_docker ansible_ssh_docker_container=slime_rl
#       ansible_ssh_docker_sudo=true ansible_python_interpreter=python3
"""

from ansible.errors import AnsibleConnectionFailure  # noqa: E402  (documentation first, as Ansible plugins do)
from ansible.plugins.connection import ssh  # noqa: E402
from ansible.plugins.loader import connection_loader  # noqa: E402
from ansible.utils.display import Display  # noqa: E402

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.connection import container_exec  # noqa: E402

display = Display()


def _adopt_ssh_options(load_name):
    """Give this plugin every option of ansible.builtin.ssh besides its own: the inherited code reads them
    with get_option(). Copied from the ssh plugin's loaded definitions, so they follow the installed
    ansible-core instead of a copy of its documentation."""
    mine = ssh.C.config.get_configuration_definitions("connection", load_name)
    if "ssh_args" in mine:
        return
    connection_loader.get("ssh", class_only=True)
    parent = {}
    for name in ("ssh", "ansible.builtin.ssh", "ansible_collections.ansible.builtin.plugins.connection.ssh"):
        parent = ssh.C.config.get_configuration_definitions("connection", name)
        if parent:
            break
    if not parent:
        raise AnsibleConnectionFailure("mtslime.posttrain.ssh_docker: the options of ansible.builtin.ssh are missing")
    merged = dict(parent)
    merged.update(mine)
    ssh.C.config.initialize_plugin_configuration_definitions("connection", load_name, merged)


class Connection(ssh.Connection):
    """ansible.builtin.ssh to the node, then `docker exec` into the container for every command."""

    transport = "mtslime.posttrain.ssh_docker"
    has_pipelining = True
    _building_ssh_command = False

    def __init__(self, *args, **kwargs):
        _adopt_ssh_options(getattr(self, "_load_name", None) or "mtslime.posttrain.ssh_docker")
        super().__init__(*args, **kwargs)

    def get_option(self, option, hostvars=None):
        # The action code asks for remote_user to expand `~` and set file modes: inside the container that is
        # the container's user. The ssh command line (_build_command) logs in as the node's user.
        if option == "remote_user" and not self._building_ssh_command:
            return super().get_option("docker_container_user", hostvars)
        return super().get_option(option, hostvars)

    def _build_command(self, binary, subsystem, *other_args):
        self._building_ssh_command = True
        try:
            return super()._build_command(binary, subsystem, *other_args)
        finally:
            self._building_ssh_command = False

    def _wrapper(self):
        return container_exec.Wrapper(
            container=self.get_option("docker_container"),
            user=self.get_option("docker_container_user"),
            sudo=self.get_option("docker_sudo"),
            docker=self.get_option("docker_executable"),
        )

    def exec_command(self, cmd, in_data=None, sudoable=True):
        wrapper = self._wrapper()
        host = self.get_option("host") or self._play_context.remote_addr
        display.vvv("DOCKER EXEC in %s: %s" % (wrapper.container, cmd), host=host)
        returncode, stdout, stderr = super().exec_command(wrapper.command(cmd), in_data=in_data, sudoable=sudoable)
        problem = wrapper.problem(returncode, stdout, stderr)
        if problem:
            raise AnsibleConnectionFailure(
                "docker exec into container %s on %s (SSH user %s): %s"
                % (wrapper.container, host, self.user or "from the SSH configuration", problem)
            )
        return returncode, stdout, stderr

    def put_file(self, in_path, out_path):
        self.set_option("ssh_transfer_method", "piped")
        return super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self.set_option("ssh_transfer_method", "piped")
        return super().fetch_file(in_path, out_path)
