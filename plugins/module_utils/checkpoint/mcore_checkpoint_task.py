# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The mcore_checkpoint module's work (plugins/modules/mcore_checkpoint.py holds its documentation):
main(module) runs it for a CheckpointModule (or a plain AnsibleModule) made with module_kwargs(). The
supervisor runs the same function with the arguments the role gave the module (module_utils/supervise)."""
from __future__ import annotations

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import aside_name, move_aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, text_diff
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.mcore import (
    CONVERSION_RECORD,
    inspect_checkpoint,
    read_conversion_record,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_point

MODULE = "mcore_checkpoint"


class CheckpointModule(AnsibleModule):
    """AnsibleModule whose results keep their own `state`: the stock add_path_info
    (run on every result that has `path`) would replace it with 'directory'."""

    def add_path_info(self, kwargs):
        return kwargs


def record_text(record):
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def fail_message(state, info, params):
    path = info["path"]
    if state == "absent":
        return ("%s does not exist: no converted checkpoint there; run the conversion first or set path to the "
                "converted checkpoint" % path)
    if state == "interrupted":
        return info["message"]
    if state == "stale":
        return (
            "%s is a complete checkpoint converted from another model: recorded fingerprint %s in %s, expected %s; "
            "move it aside (move_aside_if: [stale]) and rerun the conversion"
            % (path, info["fingerprint_recorded"], info["record_file"], params["fingerprint"])
        )
    return "%s already holds a complete checkpoint (tracker %s); move it aside or choose another path" % (
        path, info["tracker"])


def module_kwargs():
    return dict(
        argument_spec=dict(
            path=dict(type="path", required=True),
            expect=dict(type="str", choices=["release", "training", "auto"], default="auto"),
            fingerprint=dict(type="str"),
            record_fingerprint=dict(type="str"),
            record_extra=dict(type="dict"),
            move_aside_if=dict(type="list", elements="str", choices=["interrupted", "stale", "complete"], default=[]),
            fail_on=dict(
                type="list", elements="str", choices=["absent", "interrupted", "stale", "complete"], default=[]
            ),
        ),
        supports_check_mode=True,
    )


def keep_results(module):
    """`module`, returning its results as CheckpointModule does: a plain AnsibleModule (supervise/tasks.run_here
    makes one from module_kwargs()) gets the same add_path_info, on the instance."""
    if not isinstance(module, CheckpointModule):
        module.add_path_info = lambda kwargs: kwargs
    return module


def main(module):
    module = keep_results(module)
    params = module.params
    move_if = params["move_aside_if"] or []
    fail_on = params["fail_on"] or []

    problems = []
    if params["record_fingerprint"] is not None and move_if:
        problems.append("record_fingerprint and move_aside_if cannot be used in the same task (record after the "
                        "conversion, move aside before it)")
    if ("stale" in move_if or "stale" in fail_on) and not params["fingerprint"]:
        problems.append("'stale' in move_aside_if or fail_on needs the fingerprint option (the fingerprint of the HF "
                        "model the conversion should come from)")
    if problems:
        module.fail_json(msg="%s: %s" % (MODULE, "; ".join(problems)), path=params["path"])

    info = inspect_checkpoint(params["path"], expect=params["expect"])
    path = info["path"]
    info["resume_iteration"] = resume_point(path) if info["kind"] == "training" else None
    if info["resume_iteration"] is not None and info["state"] == "interrupted":
        info["message"] = info["message"][:-1] + " (a resume loads iteration %d)." % info["resume_iteration"]
    record_file = os.path.join(path, CONVERSION_RECORD)
    record = read_conversion_record(path) if os.path.isdir(path) else None
    recorded = record.get("fingerprint") if record else None
    matches = None
    if params["fingerprint"] is not None and recorded is not None:
        matches = recorded == params["fingerprint"]
    info.update(
        changed=False,
        state_after=info["state"],
        record_file=record_file,
        record=record,
        fingerprint_recorded=recorded,
        fingerprint_matches=matches,
        moved_to=None,
        actions=[],
    )
    states = {info["state"]}
    if info["state"] == "complete" and matches is False:
        states.add("stale")
    if info["state"] == "complete" and params["fingerprint"] is not None and recorded is None:
        info["actions"].append(
            "no fingerprint recorded in %s: cannot tell which model %s was converted from" % (record_file, path))

    # Fail before changing anything; say every reason in one message.
    errors = [fail_message(state, info, params) for state in ("absent", "interrupted", "stale", "complete")
              if state in states and state in fail_on]
    if params["record_fingerprint"] is not None and info["state"] != "complete":
        errors.append(
            "cannot record fingerprint in %s: the checkpoint is %s (%s)"
            % (record_file, info["state"], info["message"])
        )
    if errors:
        module.fail_json(msg="%s: %s" % (MODULE, " ".join(e if e.endswith(".") else e + "." for e in errors)), **info)

    reason = next(
        (state for state in ("interrupted", "stale", "complete") if state in states and state in move_if), None)
    if reason:
        if module.check_mode:
            target = aside_name(path, reason)
            info["actions"].append("would move %s (%s) aside to %s" % (path, reason, target))
        else:
            try:
                target = move_aside(path, reason)
            except OSError as exc:
                module.fail_json(
                    msg="%s: cannot move %s aside: %s; check permissions on %s"
                    % (MODULE, path, exc, os.path.dirname(path)),
                    **info
                )
            info["actions"].append("moved %s (%s) aside to %s" % (path, reason, target))
        info.update(changed=True, moved_to=target, state_after="absent")
        info["diff"] = {
            "before": "%s: %s\n" % (path, reason),
            "after": "%s: absent (moved to %s)\n" % (path, target),
            "before_header": path,
            "after_header": path,
        }

    if params["record_fingerprint"] is not None:
        extra = params["record_extra"] or {}
        unchanged = (
            record is not None
            and record.get("fingerprint") == params["record_fingerprint"]
            and (record.get("extra") or {}) == extra
        )
        if unchanged:
            info["actions"].append(
                "fingerprint %s already recorded in %s" % (params["record_fingerprint"], record_file))
        else:
            new_record = {
                "fingerprint": params["record_fingerprint"],
                "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tracker": info["tracker"],
                "extra": extra,
                "written_by": "mtslime.posttrain.mcore_checkpoint",
            }
            before = record_text(record) if record is not None else ""
            if not module.check_mode:
                try:
                    atomic_write(record_file, record_text(new_record), mode=0o644)
                except OSError as exc:
                    module.fail_json(
                        msg="%s: cannot write %s: %s; check permissions on %s" % (MODULE, record_file, exc, path),
                        **info
                    )
            info["actions"].append(
                "%s fingerprint %s in %s"
                % ("would record" if module.check_mode else "recorded", params["record_fingerprint"], record_file)
            )
            info.update(changed=True, record=new_record, fingerprint_recorded=params["record_fingerprint"])
            if params["fingerprint"] is not None:
                info["fingerprint_matches"] = params["record_fingerprint"] == params["fingerprint"]
            info["diff"] = text_diff(before, record_text(new_record), record_file)

    if not info["actions"]:
        info["actions"].append("%s: %s" % (path, info["message"]))
    module.exit_json(**info)
