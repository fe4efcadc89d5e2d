# Private to mtslime.posttrain: the options every module that talks to a Ray head shares. Their
# defaults are module_utils/ray/common.py's, whose ray_argument_spec() is the matching argument spec; ansible-test
# reads these attributes as plain strings, so the ports are written out (tests/unit/ray/test_ray_options.py
# checks they render the spec's defaults).
from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  dashboard_url:
    description:
      - The Ray dashboard of the head, which also serves the Jobs API (C(ray start --dashboard-port),
        C(ray_dashboard_port), the guide's port 8772), as seen from where the module runs; a missing C(http://)
        is added. Not the GCS port (64379 in the guide; FAQ Q1).
    type: str
    default: http://127.0.0.1:8772
  request_timeout:
    description: Seconds each HTTP request to the dashboard (or TCP connection to the GCS) may take.
    type: int
    default: 30
  use_proxy:
    description:
      - Whether requests to the dashboard go through the node's HTTP proxy (E(http_proxy)). Off by default, like
        the guide's C(no_proxy=127.0.0.1), because a proxy usually cannot reach the head.
    type: bool
    default: false
"""

    GCS = r"""
options:
  gcs_address:
    description:
      - The head's GCS address, C(host:port) (C(ray start --port), C(ray_gcs_port), the guide's port 64379); the
        address that C(ray status --address) takes and that workers join.
    type: str
    default: 127.0.0.1:64379
"""
