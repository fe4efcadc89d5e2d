# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The run directory's files (run script, runtime_env.yaml, hostfile, the .mtslime/ copies) kept as
rendered: which differ in content or mode, their diffs, and the atomic writes."""
from __future__ import annotations

import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_text, text_diff
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import JobError, outcome


def parse_mode(value, name):
    if value is None or value == "":
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if not re.match(r"^0?[0-7]{3,4}$", text):
        raise ValueError("%s: mode %r is not an octal mode like '0644'" % (name, value))
    return int(text, 8)


def plan_files(files):
    """The files that differ: [{path, content, mode, before, before_mode, content_changed, mode_changed}]."""
    plans = []
    for index, item in enumerate(files or []):
        path = os.path.abspath(os.path.expanduser(item["path"]))
        mode = parse_mode(item.get("mode"), "files[%d] (%s)" % (index, path))
        if os.path.isdir(path):
            raise ValueError("files[%d]: %s is a directory; give the path of a file" % (index, path))
        before = read_text(path)
        before_mode = os.stat(path).st_mode & 0o7777 if before is not None else None
        content_changed = before != item["content"]
        mode_changed = mode is not None and before_mode is not None and before_mode != mode
        if content_changed or mode_changed:
            plans.append({
                "path": path,
                "content": item["content"],
                "mode": mode if mode is not None else (before_mode if before_mode is not None else 0o644),
                "before": before,
                "before_mode": before_mode,
                "content_changed": content_changed,
                "mode_changed": mode_changed,
            })
    return plans


def apply_files(plans):
    for plan in plans:
        os.makedirs(os.path.dirname(plan["path"]), exist_ok=True)
        atomic_write(plan["path"], plan["content"], mode=plan["mode"])


def file_diffs(plans):
    diffs = []
    for plan in plans:
        if plan["content_changed"]:
            diffs.append(text_diff(plan["before"], plan["content"], plan["path"]))
        if plan["mode_changed"]:
            diffs.append({
                "before": "mode %04o\n" % plan["before_mode"],
                "after": "mode %04o\n" % plan["mode"],
                "before_header": plan["path"] + " (mode)",
                "after_header": plan["path"] + " (mode)",
            })
    return diffs


def sync(files, check_mode):
    """Write the files that differ (not in check mode). The outcome's fields hold files_changed."""
    try:
        plans = plan_files(files)
    except (ValueError, OSError) as exc:
        raise JobError("files: %s" % exc) from None
    actions = []
    for plan in plans:
        what = "content" if plan["content_changed"] else ""
        if plan["mode_changed"]:
            what = (what + " and " if what else "") + "mode %04o" % plan["mode"]
        actions.append("%s %s (%s)" % ("would write" if check_mode else "wrote", plan["path"], what))
    if plans and not check_mode:
        try:
            apply_files(plans)
        except OSError as exc:
            raise JobError("cannot write %s: %s" % (exc.filename or "a file of files", exc.strerror or exc)) from None
    return outcome(changed=bool(plans), fields={"files_changed": [plan["path"] for plan in plans]}, actions=actions,
                   diffs=file_diffs(plans))
