# Controller side of the run's report (documentation in plugins/modules/train_report.py):
# the train_metrics module reads every attempt's log on the head, then the PNG and the
# HTML page are drawn and written here, on the controller.
from __future__ import annotations

import os
import re

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_bytes
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report.html import page
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report.plot import PlotUnavailable, render_png

MODULE_ARGS = ("log_dir", "model_name", "experiment", "submission_ids", "extra_metrics", "max_points")
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.@+-]+$")


def subtitle(metrics, status):
    attempts = metrics.get("attempts") or []
    firsts = [a["first_rollout"] for a in attempts if a.get("first_rollout") is not None]
    lasts = [a["last_rollout"] for a in attempts if a.get("last_rollout") is not None]
    text = "%d attempt%s" % (len(attempts), "" if len(attempts) == 1 else "s")
    if firsts:
        text += ", rollouts %d-%d" % (min(firsts), max(lasts))
    if status:
        job = status.get("job") or {}
        text += "; job %s %s" % (job.get("submission_id") or "-", job.get("status") or "")
        step = (status.get("last") or {}).get("step")
        if step is not None:
            text += ", step %s" % step
        iteration = (status.get("checkpoint") or {}).get("resume_iteration")
        if iteration is not None:
            text += "; a resume loads checkpoint iter %s" % iteration
    return text


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(MODULE_ARGS + ("dest", "name", "status", "title"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        dest = args.get("dest")
        if not dest or not os.path.isabs(str(dest)):
            raise AnsibleActionFail("train_report: dest must be an absolute directory on the controller, got %r "
                                    "(report_dir)" % (dest,))
        status = args.get("status") or None
        if status is not None and not isinstance(status, dict):
            raise AnsibleActionFail("train_report: status must be the cluster's status dict (slime_status), got %s"
                                    % type(status).__name__)
        name = str(args.get("name") or (status or {}).get("cluster") or task_vars.get("inventory_hostname"))
        if not SAFE_NAME.match(name):
            raise AnsibleActionFail("train_report: name %r cannot be a file name; use letters, digits and . _ - @ +"
                                    % name)
        module_args = {key: args[key] for key in MODULE_ARGS if args.get(key) is not None}
        metrics = self._execute_module(module_name="mtslime.posttrain.train_metrics", module_args=module_args,
                                       task_vars=task_vars)
        if metrics.get("failed"):
            result.update(failed=True, msg=metrics.get("msg"), metrics=metrics)
            return result

        recorded = {a.get("submission_id"): a for a in (status or {}).get("attempts") or []}
        attempts = [dict(a, status=(recorded.get(a["submission_id"]) or {}).get("status"))
                    for a in metrics.get("attempts") or []]
        title = str(args.get("title") or "%s on %s" % (args.get("experiment"), name))
        try:
            png, info = render_png(metrics.get("series") or {}, attempts, title, subtitle(metrics, status),
                                   extra_metrics=args.get("extra_metrics") or ())
        except PlotUnavailable as exc:
            raise AnsibleActionFail("train_report: %s" % exc) from exc
        text = page(status or _empty_status(name, args), png, metrics, info, title)

        paths = {"png": os.path.join(str(dest), name + ".png"), "html": os.path.join(str(dest), name + ".html")}
        contents = {"png": png, "html": text.encode("utf-8")}
        actions, written = [], []
        for kind in ("png", "html"):
            if read_bytes(paths[kind]) == contents[kind]:
                continue
            written.append(paths[kind])
            actions.append("%s %s" % ("would write" if self._task.check_mode else "wrote", paths[kind]))
            if not self._task.check_mode:
                os.makedirs(str(dest), mode=0o750, exist_ok=True)
                atomic_write(paths[kind], contents[kind], mode=0o640)
        result.update(
            changed=bool(written),
            actions=actions,
            png=paths["png"],
            html=paths["html"],
            panels=info["panels"],
            width=info["width"],
            height=info["height"],
            attempts=metrics.get("attempts") or [],
            missing_logs=metrics.get("missing_logs") or [],
            points={key: s.get("count") for key, s in (metrics.get("series") or {}).items()},
            available_metrics=metrics.get("available_metrics") or [],
        )
        return result


def _empty_status(name, args):
    """The page's frame when no status was passed (the report run on its own)."""
    from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report.status_doc import cluster_status

    return cluster_status(cluster={"name": name}, head=name, experiment=args.get("experiment"))
