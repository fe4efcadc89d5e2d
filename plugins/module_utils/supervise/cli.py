# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""`python3 lib.zip keep DIR` (the keeper container's loop), `tick DIR` (one check, in the training
container), `task NAME` (one module's work, arguments on stdin).
Standard library only; Python 3.8+."""
from __future__ import annotations

import sys

USAGE = "usage: python3 lib.zip keep DIR | tick DIR | task NAME"


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "task":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import tasks
        if argv[1] in tasks.TASKS:
            tasks.run_here(argv[1])
            return
    elif len(argv) == 2 and argv[0] == "tick":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import tick
        sys.exit(tick.main(argv[1]))
    elif len(argv) == 2 and argv[0] == "keep":
        from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import keeper
        sys.exit(keeper.main(argv[1]))
    sys.stderr.write(USAGE + "\n")
    sys.exit(2)
