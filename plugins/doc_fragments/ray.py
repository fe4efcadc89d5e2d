# Private to mtslime.posttrain: the options every module that talks to a Ray head shares.
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  dashboard_url:
    description:
      - The Ray dashboard of the head, which also serves the Jobs API (the guide's port 8772), as seen from where
        the module runs. Not the GCS port (64379 in the guide).
    type: str
    default: http://127.0.0.1:8772
  request_timeout:
    description: Seconds each HTTP request to the dashboard may take.
    type: int
    default: 30
  use_proxy:
    description:
      - Whether requests to the dashboard go through the node's HTTP proxy. Off by default, like the guide's
        C(no_proxy=127.0.0.1), because a proxy usually cannot reach the head.
    type: bool
    default: false
"""
