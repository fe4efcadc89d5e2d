# The Ray dashboard's URL, defined once: every role and playbook that talks to the head's
# dashboard (the Jobs API) from the head itself builds it with this filter.
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import DASHBOARD_PORT, LOOPBACK

# The head's own view of its dashboard is LOOPBACK: it answers whether ray_dashboard_host is
# 127.0.0.1 (the default here) or 0.0.0.0 (the guide's).


def ray_dashboard_url(port, host=LOOPBACK):
    """'http://<host>:<port>' for ray_dashboard_port; a bad port fails naming the variable."""
    try:
        number = int(port)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(port, bool) or not 0 < number < 65536:
        raise AnsibleFilterError(
            "ray_dashboard_url: ray_dashboard_port is %r; set it to a TCP port number (1-65535, guide %d)"
            % (port, DASHBOARD_PORT)
        )
    host = str(host or LOOPBACK)
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "http://%s:%d" % (host, number)


class FilterModule:
    def filters(self):
        return {"ray_dashboard_url": ray_dashboard_url}
