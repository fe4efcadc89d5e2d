# The Ray options every module that talks to a Ray head shares, declared once: the guide's ports
# (§5.1: `ray start --head --port=64379 --dashboard-port=8772`), the defaults built from them, and the
# argument spec that matches doc fragment mtslime.posttrain.ray. No other file of the collection
# writes these ports; the inventory's ray_gcs_port and ray_dashboard_port are what the roles pass.
from __future__ import annotations

GCS_PORT = 64379
DASHBOARD_PORT = 8772
# Ray's own default GCS port, which people also give for the dashboard by mistake.
RAY_DEFAULT_GCS_PORT = 6379
LOOPBACK = "127.0.0.1"
DEFAULT_DASHBOARD_URL = "http://%s:%d" % (LOOPBACK, DASHBOARD_PORT)
DEFAULT_GCS_ADDRESS = "%s:%d" % (LOOPBACK, GCS_PORT)


def ray_argument_spec(request_timeout=30, gcs_address=False):
    """The options of doc fragment mtslime.posttrain.ray (and mtslime.posttrain.ray.GCS with gcs_address).
    `request_timeout` is the one default a module may set otherwise (its doc then says `default:`)."""
    spec = dict(
        dashboard_url=dict(type="str", default=DEFAULT_DASHBOARD_URL),
        request_timeout=dict(type="int", default=request_timeout),
        use_proxy=dict(type="bool", default=False),
    )
    if gcs_address:
        spec["gcs_address"] = dict(type="str", default=DEFAULT_GCS_ADDRESS)
    return spec
