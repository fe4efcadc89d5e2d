# The argument spec that matches doc fragment mtslime.posttrain.ray: the options every
# module that talks to a Ray head shares, declared once.
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import DEFAULT_DASHBOARD_URL


def ray_argument_spec(request_timeout=30):
    return dict(
        dashboard_url=dict(type="str", default=DEFAULT_DASHBOARD_URL),
        request_timeout=dict(type="int", default=request_timeout),
        use_proxy=dict(type="bool", default=False),
    )
