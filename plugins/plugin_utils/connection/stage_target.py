# Where the stage plays of a node run, as data (never a rendered YAML file: a value cannot rewrite it).
#   - inside the training container, on a node reached over SSH: mtslime.posttrain.ssh_docker, which keeps
#     the node's own SSH settings and connection and runs `[sudo -n] docker exec` on the node;
#   - inside the training container, on the controller itself (local) or on a node that is a container of the
#     controller's engine: community.docker.docker with the controller's Docker CLI;
#   - on the node itself when container_enabled is false: the node's own connection, unchanged.
from __future__ import annotations

SSH_CONNECTIONS = {"ssh", "ansible.builtin.ssh", "ansible.legacy.ssh", "smart"}
CONTROLLER_DOCKER_CONNECTIONS = {
    "local", "ansible.builtin.local", "ansible.legacy.local", "docker", "community.docker.docker",
}
SSH_DOCKER = "mtslime.posttrain.ssh_docker"


class StageTargetError(ValueError):
    pass


def _flag(value, what):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0", ""):
        return False
    raise StageTargetError("%s must be true or false, got %r" % (what, value))


def stage_target(node, container):
    """node: {name, connection, host, become, python, docker_user, docker_extra_args} as the inventory
    gives them; container: {enabled, name, python, docker_sudo}. Returns {connection, host, become,
    python, container, docker_sudo, docker_user, docker_extra_args}."""
    name = node.get("name") or node.get("host")
    connection = str(node.get("connection") or "ssh")
    if not _flag(container.get("enabled", True), "container_enabled"):
        return {
            "connection": connection,
            "host": node.get("host"),
            "become": _flag(node.get("become", False), "ansible_become"),
            "python": node.get("python"),
            "container": "",
            "docker_sudo": False,
            "docker_user": node.get("docker_user") or "root",
            "docker_extra_args": node.get("docker_extra_args") or "",
        }
    container_name = container.get("name")
    if not isinstance(container_name, str) or not container_name.strip():
        raise StageTargetError("%s: container_name must be the training container's name, got %r"
                               % (name, container_name))
    target = {
        "become": False,
        "python": container.get("python") or "python3",
        "container": container_name,
        "docker_user": "root",
        "docker_extra_args": "",
    }
    if connection in SSH_CONNECTIONS:
        target.update(connection=SSH_DOCKER, host=node.get("host"),
                      docker_sudo=_flag(container.get("docker_sudo", False), "container_docker_sudo"))
    elif connection in CONTROLLER_DOCKER_CONNECTIONS:
        target.update(connection="community.docker.docker", host=container_name, docker_sudo=False)
    else:
        raise StageTargetError(
            "%s: the stages inside the training container need a node reached by ssh (or local); its "
            "ansible_connection is %r. Use ansible_connection: ssh for this node, or container_enabled: false "
            "to run the stages on the node itself" % (name, connection)
        )
    return target
