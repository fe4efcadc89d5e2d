# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""`python3 lib.zip keep DIR` (the keeper container's loop), `tick DIR` (one check, in the training
container), `task NAME` (one module's work, arguments on stdin).
Standard library only; Python 3.8+."""
from __future__ import annotations

import sys

USAGE = "usage: python3 lib.zip keep DIR | tick DIR | task NAME"


def main(argv=None):
    """The exit status (lib.zip's __main__.py exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "task":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import tasks
        if argv[1] in tasks.TASKS:
            tasks.run_here(argv[1])
            return 0
    elif len(argv) == 2 and argv[0] == "tick":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import tick
        code, line = tick.main(argv[1])
        sys.stdout.write(line + "\n")
        return code
    elif len(argv) == 2 and argv[0] == "keep":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import keeper
        return keeper.main(argv[1])
    sys.stderr.write(USAGE + "\n")
    return 2
