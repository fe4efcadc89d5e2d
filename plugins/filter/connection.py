# Filters for how the collection reaches each node and its training container.
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.connection import ssh_diagnosis, stage_target


def slime_stage_target(node, container):
    """Where the stage plays of a node run: {connection, host, become, python, container, docker_sudo,
    docker_user, docker_extra_args} (plugin_utils/connection/stage_target.py)."""
    try:
        return stage_target.stage_target(dict(node), dict(container))
    except stage_target.StageTargetError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def slime_access_problem(result, node):
    """The message for a node that the first play could not reach or use ('' when it is fine)."""
    return ssh_diagnosis.access_problem(result, dict(node)) or ""


class FilterModule:
    def filters(self):
        return {
            "slime_stage_target": slime_stage_target,
            "slime_access_problem": slime_access_problem,
        }
