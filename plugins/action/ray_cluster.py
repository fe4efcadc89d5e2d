# Controller side of mtslime.posttrain.ray_cluster (documentation in plugins/modules/ray_cluster.py).
# With timeout 0 the module runs once, as it is. With a timeout, this plugin waits instead of
# the module: it calls the module with timeout 0 every `interval` seconds and prints the
# progress line (nodes and GPUs registered, which are missing) at least every 30 s, so a
# wait never leaves the terminal silent; at the timeout it fails naming what is missing.
from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import parse_hostport
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.cluster_text import failure_message
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import DEFAULT_GCS_ADDRESS
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter

MODULE = "mtslime.posttrain.ray_cluster"


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def wait(waiter, args, timeout, interval):
    """The module's result after waiting for a complete cluster (failed at the timeout)."""
    probe_args = dict(args, timeout=0)
    result, waited, timed_out = waiter.until(
        MODULE,
        probe_args,
        done=lambda r: bool(r.get("ready")),
        describe=lambda r: r.get("progress") or "no answer yet",
        timeout=timeout,
        interval=interval,
    )
    if result.get("failed"):
        return result
    result = dict(result)
    result["elapsed"] = round(waited, 1)
    if timed_out:
        try:
            gcs_port = parse_hostport(args.get("gcs_address") or DEFAULT_GCS_ADDRESS)[1]
        except ValueError:
            gcs_port = 0
        params = dict(args, timeout=timeout, gcs_address=args.get("gcs_address") or DEFAULT_GCS_ADDRESS)
        result["failed"] = True
        result["msg"] = failure_message(result, params, result.get("dashboard_url"), gcs_port)
    return result


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        timeout = _int(args.get("timeout"), 0)
        interval = max(1, _int(args.get("interval"), 5))
        if timeout <= 0:
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        result.update(wait(Waiter.for_action(self, task_vars), args, timeout, interval))
        return result
