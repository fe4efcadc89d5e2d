# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The checkpoint_retention module's work (plugins/modules/checkpoint_retention.py holds its documentation):
main(module) runs it for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with
the arguments the role gave the module (module_utils/supervise)."""
from __future__ import annotations

import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import retention
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes, tree_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.slime import LOADED, clean_line

LOG_HEAD_BYTES = 8 * 1024 * 1024


def loaded_iteration(log, save_dir):
    """The iteration of the first 'successfully loaded checkpoint from <save_dir>' line of `log`, or None."""
    try:
        with open(log, "rb") as handle:
            head = handle.read(LOG_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    for line in head.splitlines():
        if "successfully loaded checkpoint" not in line:
            continue
        match = LOADED.search(clean_line(line))
        if match and os.path.abspath(match.group("path").rstrip("/")) == os.path.abspath(save_dir):
            return int(match.group("it"))
    return None


def module_kwargs():
    return dict(
        argument_spec=dict(
            save_dir=dict(type="path", required=True),
            keep=dict(type="int", required=True),
            prune=dict(type="str", choices=["trash", "delete"], default="trash"),
            trash_dir=dict(type="path"),
            protect=dict(type="list", elements="int", default=[]),
            job_log=dict(type="path"),
        ),
        supports_check_mode=True,
    )


def main(module):
    params = module.params
    save_dir = os.path.abspath(params["save_dir"]).rstrip(os.sep) or os.sep
    trash_dir = os.path.abspath(params["trash_dir"]) if params["trash_dir"] else retention.default_trash_dir(save_dir)
    problems = []
    if params["keep"] < 0:
        problems.append("keep is %d (train_job_keep_checkpoints); give 0 to keep every checkpoint or the number of "
                        "newest complete ones to keep" % params["keep"])
    if any(i < 0 for i in params["protect"]):
        problems.append("protect holds a negative iteration: %s" % params["protect"])
    if os.path.lexists(save_dir) and not os.path.isdir(save_dir):
        problems.append("save_dir %s is not a directory; point it at the training --save directory" % save_dir)
    if params["prune"] == "trash" and params["keep"] > 0 and os.path.isdir(save_dir):
        why = retention.trash_problem(save_dir, trash_dir)
        if why:
            problems.append("%s; set train_job_trash_dir to a directory on the save dir's filesystem, outside it, "
                            "or train_job_prune: delete" % why)
    if problems:
        module.fail_json(msg="checkpoint_retention: " + "; ".join(problems))

    result = dict(changed=False, save_dir=save_dir, kept=[], pruned=[], protected={}, blocked=None, moved=[],
                  deleted=[], bytes_pruned=0, trash_dir=trash_dir, actions=[])
    if not os.path.isdir(save_dir):
        result.update(message="%s does not exist: no checkpoint to prune" % save_dir,
                      trash_bytes=tree_bytes(trash_dir) if os.path.isdir(trash_dir) else 0)
        module.exit_json(**result)

    protect = list(params["protect"])
    if params["job_log"]:
        loaded = loaded_iteration(params["job_log"], save_dir)
        if loaded is not None:
            protect.append(loaded)
    facts = retention.scan(save_dir)
    decision = retention.plan(facts, params["keep"], protect)
    result.update(kept=decision["keep"], protected={str(k): v for k, v in decision["protected"].items()},
                  blocked=decision["blocked"], message=decision["message"])
    if decision["prune"]:
        try:
            done = retention.apply(facts, decision["prune"], params["prune"], trash_dir, check_mode=module.check_mode)
        except OSError as exc:
            module.fail_json(msg="checkpoint_retention: pruning %s failed at %s: %s; what was moved is listed in "
                             "`moved`" % (save_dir, exc.filename, exc.strerror or exc), **result)
        result.update(changed=True, pruned=decision["prune"], moved=done["moved"], deleted=done["deleted"],
                      bytes_pruned=done["bytes"], actions=done["actions"])
        result["message"] += " (%s %s)" % (human_bytes(done["bytes"]),
                                           "deleted" if params["prune"] == "delete" else "moved to " + trash_dir)
        if module._diff:
            names = ["%s\n" % os.path.basename(i["path"]) for i in facts["iterations"]]
            gone = set(os.path.basename(m["path"]) for m in done["moved"]) | set(
                os.path.basename(p) for p in done["deleted"])
            result["diff"] = {"before": "".join(names), "after": "".join(n for n in names if n.strip() not in gone),
                              "before_header": save_dir, "after_header": save_dir}
    result["trash_bytes"] = tree_bytes(trash_dir) if os.path.isdir(trash_dir) else 0
    if result["trash_bytes"] and not module.check_mode:
        result["message"] += "; the trash %s holds %s" % (trash_dir, human_bytes(result["trash_bytes"]))
    module.exit_json(**result)
