# Controller-side: validates a training cluster's configuration without
# touching any node (documentation in plugins/modules/validate_config.py).
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training_config import validate


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset((
        "cluster", "nodes", "addresses", "actor_num_nodes", "actor_gpus_per_node", "rollout_num_gpus",
        "train_args", "overrides", "model_args", "ports", "paths", "known_flags_extra",
    ))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        config = dict(self._task.args)
        problems = validate(config)
        result.update(changed=False, problems=problems, cluster=config.get("cluster"))
        if problems:
            numbered = "\n".join("(%d) %s" % (i, text) for i, text in enumerate(problems, 1))
            result.update(failed=True, msg="%d problem(s) in the training configuration of cluster %s:\n%s"
                          % (len(problems), config.get("cluster"), numbered))
        else:
            result["msg"] = "training configuration of cluster %s is valid" % config.get("cluster")
        return result
