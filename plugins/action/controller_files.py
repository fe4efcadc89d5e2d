# Controller-side: writes files on the controller without running a module, so
# rendering every node's run files costs no module execution
# (documentation in plugins/modules/controller_files.py).
from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_text


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("dest", "files", "dir_mode", "root"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dest = self._task.args.get("dest")
        files = self._task.args.get("files") or []
        dir_mode = int(str(self._task.args.get("dir_mode", "0750")), 8)
        if not dest or not os.path.isabs(str(dest)):
            raise AnsibleActionFail(
                "controller_files: dest must be an absolute directory on the controller, got %r" % dest
            )
        root = self._task.args.get("root")
        root = os.path.normpath(str(root)) if root else None
        diffs, actions, written = [], [], []
        for item in files:
            name = os.path.basename(item.get("name") or item["path"])
            if root and not item.get("name"):
                relative = os.path.relpath(os.path.normpath(str(item["path"])), root)
                if relative != os.curdir and not relative.startswith(os.pardir + os.sep) and relative != os.pardir:
                    name = relative  # a file in a subdirectory of the run directory (.mtslime/) keeps it
            path = os.path.join(dest, name)
            mode = int(str(item.get("mode", "0640")), 8)
            before = read_text(path)
            current_mode = os.stat(path).st_mode & 0o7777 if before is not None else None
            if before == item["content"] and current_mode == mode:
                continue
            diffs.append(
                {"before": before or "", "after": item["content"], "before_header": path, "after_header": path}
            )
            actions.append("%s %s" % ("would write" if self._task.check_mode else "wrote", path))
            written.append(path)
            if not self._task.check_mode:
                os.makedirs(os.path.dirname(path), mode=dir_mode, exist_ok=True)
                atomic_write(path, item["content"], mode=mode)
        result.update(changed=bool(written), files=written, actions=actions)
        if diffs and self._task.diff:
            result["diff"] = diffs
        return result
