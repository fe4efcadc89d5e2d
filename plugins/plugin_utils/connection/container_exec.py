# Controller side of the ssh_docker connection: the command line that runs a command inside the training
# container on a node, and what the node's sudo / Docker CLI meant when that command could not even start.
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# (pattern at the start of an output line, what to tell the user). Checked only when the command failed
# before anything ran inside the container (no module output).
_PROBLEMS = [
    (
        r"sudo: (a password is required|a terminal is required)",
        "sudo on the node asks for a password, and the container stages run `sudo -n docker exec` with the "
        "module on standard input. Allow the user passwordless sudo for the Docker CLI (sudoers: "
        "`<user> ALL=(root) NOPASSWD: /usr/bin/docker`), or add the user to the node's docker group and set "
        "container_docker_sudo: false",
    ),
    (
        r".*(is not in the sudoers file|is not allowed to run sudo)",
        "the user may not use sudo on the node: add the user to the node's docker group and set "
        "container_docker_sudo: false (or ansible_become: false), or give it passwordless sudo",
    ),
    (
        r"(sudo: )?(/bin/sh: \d+: )?(.*: )?docker: (command )?not found",
        "the node has no Docker CLI on the login PATH: install Docker on the node, or set "
        "ansible_ssh_docker_executable to the CLI's path",
    ),
    (
        r".*permission denied while trying to connect to the [Dd]ocker daemon",
        "the user may not use the node's Docker engine: add it to the node's docker group, or set "
        "ansible_become: true (with passwordless sudo) so the collection runs docker through sudo",
    ),
    (
        r".*Cannot connect to the Docker daemon",
        "the node's Docker engine is not running: start it (systemctl start docker) and rerun",
    ),
    (
        r".*(No such container|is not running|is paused|is restarting)",
        "the training container is not running on the node: rerun with the container stage "
        "(--tags container) or check container_name for this node",
    ),
]
_COMPILED = [(re.compile(pattern), advice) for pattern, advice in _PROBLEMS]


@dataclass(frozen=True)
class Wrapper:
    container: str
    user: str = "root"
    sudo: bool = False
    docker: str = "docker"

    def argv(self, command):
        """The node-side argv that runs `command` (a shell command line) inside the container."""
        if not self.container:
            raise ValueError("no container given (ansible_ssh_docker_container)")
        prefix = ["sudo", "-n", "--"] if self.sudo else []
        return prefix + [self.docker, "exec", "-i", "-u", self.user, self.container, "/bin/sh", "-c", command]

    def command(self, command):
        """The same, as one command line for the node's login shell (every word quoted)."""
        return " ".join(shlex.quote(word) for word in self.argv(command))

    def problem(self, returncode, stdout, stderr):
        """Advice when the command failed in sudo or the Docker CLI, before it ran in the container;
        None when it ran (whatever its result)."""
        if returncode == 0:
            return None
        text = "\n".join(
            part.decode("utf-8", "replace") if isinstance(part, bytes) else str(part or "")
            for part in (stderr, stdout)
        )
        if text.lstrip().startswith("{"):
            return None
        for line in text.splitlines():
            line = line.strip()
            for pattern, advice in _COMPILED:
                if pattern.match(line):
                    return "%s (the node said: %s)" % (advice, line[:300])
        return None
