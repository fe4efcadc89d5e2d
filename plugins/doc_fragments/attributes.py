# Private to mtslime.posttrain: standard `attributes` for the collection's modules.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description:
      Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation indicates no change.
      - This assumes that the system controlled/queried by the module has not changed in a relevant way.
"""

    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
    details:
      - This action does not modify state.
"""

    CONTROLLER_ACTION = r"""
options: {}
attributes:
  action:
    description: Indicates this has a corresponding action plugin that runs on the controller.
    support: full
    details: Runs on the controller only; nothing is executed on the nodes.
  idempotent:
    support: full
"""
