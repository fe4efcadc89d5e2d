# Private to mtslime.posttrain: the options every module that talks to a Ray head shares. Their
# defaults come from module_utils/ray/common.py, whose ray_argument_spec() is the matching argument spec.
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import (
    DASHBOARD_PORT,
    DEFAULT_DASHBOARD_URL,
    DEFAULT_GCS_ADDRESS,
    GCS_PORT,
)


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  dashboard_url:
    description:
      - The Ray dashboard of the head, which also serves the Jobs API (C(ray start --dashboard-port),
        C(ray_dashboard_port), the guide's port %(dash)d), as seen from where the module runs; a missing C(http://)
        is added. Not the GCS port (%(gcs)d in the guide; FAQ Q1).
    type: str
    default: %(dashboard_url)s
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
""" % dict(dash=DASHBOARD_PORT, gcs=GCS_PORT, dashboard_url=DEFAULT_DASHBOARD_URL)

    # The head's GCS, for the modules that probe it as well.
    GCS = r"""
options:
  gcs_address:
    description:
      - The head's GCS address, C(host:port) (C(ray start --port), C(ray_gcs_port), the guide's port %(gcs)d); the
        address that C(ray status --address) takes and that workers join.
    type: str
    default: %(gcs_address)s
""" % dict(gcs=GCS_PORT, gcs_address=DEFAULT_GCS_ADDRESS)
