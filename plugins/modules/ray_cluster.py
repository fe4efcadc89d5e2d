#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_cluster
short_description: Check a Ray cluster through its GCS port and its dashboard, and wait for nodes and GPUs
version_added: "0.1.0"
description:
  - Checks the two ports that the guide's FAQ Q1 tells apart. The GCS port (C(ray start --port), C(ray_gcs_port))
    gets a TCP connection and the HTTP/2 preface; Ray's GCS answers with an HTTP/2 SETTINGS frame (gRPC).
    The dashboard (C(ray start --dashboard-port), C(ray_dashboard_port)) gets C(GET /api/version) and
    C(GET /api/gcs_healthz).
  - Lists the nodes Ray knows with their IP address, state and GPU/CPU totals from the State API
    C(GET /api/v0/nodes) (falling back to the dashboard's C(GET /nodes?view=summary)), and compares them with
    O(expected_nodes) and O(expected_gpus).
  - With O(timeout=0) (the default) it probes once and reports; it never fails because nodes or GPUs are missing,
    so a role can use it as the one probe of a converged node. It fails only on bad parameters.
  - With O(timeout) above 0 it polls every O(interval) seconds until Ray answers on both ports and every expected
    node and GPU is registered, and fails at the timeout naming the missing nodes and how many GPUs are missing.
  - A port mix-up (the GCS port given as O(dashboard_url), or the dashboard port as O(gcs_address)) is recognised
    from the protocol that answers and reported in RV(hints).
options:
  expected_nodes:
    description: IP addresses of the nodes that must be registered and alive (the first column of the guide's hostfile).
    type: list
    elements: str
    default: []
  expected_gpus:
    description:
      - Total number of GPUs that must be registered on alive nodes (8 on the guide's single node).
        Not checked when unset.
    type: int
  timeout:
    description:
      - Seconds to wait for the cluster to be complete. V(0) probes once and never fails for missing nodes or GPUs.
      - While it waits, the action plugin prints the progress line (nodes and GPUs registered, which are missing)
        at least every 30 s, and at the timeout fails naming what is missing.
    type: int
    default: 0
  interval:
    description: Seconds between two probes while waiting.
    type: int
    default: 5
  request_timeout:
    default: 5
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
  - mtslime.posttrain.ray
  - mtslime.posttrain.ray.GCS
seealso:
  - module: mtslime.posttrain.ray_job
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Probe the head once (never fails for missing nodes)
  mtslime.posttrain.ray_cluster:
    gcs_address: "127.0.0.1:{{ ray_gcs_port }}"
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
  register: ray_probe

- name: Start the head only when it is not up
  ansible.builtin.command: >-
    ray start --head --dashboard-host=0.0.0.0 --dashboard-port={{ ray_dashboard_port }} --port={{ ray_gcs_port }}
    --num-cpus=64
  when: not ray_probe.up

- name: Wait until every node and GPU of the hostfile is registered
  mtslime.posttrain.ray_cluster:
    gcs_address: "{{ slime_cluster_info.addresses[slime_cluster_info.head] }}:{{ ray_gcs_port }}"
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
    expected_nodes: "{{ slime_cluster_info.addresses.values() | list }}"
    expected_gpus: 8
    timeout: 300
    interval: 5
"""

RETURN = r"""
up:
  description: Ray answers on both ports (the GCS speaks gRPC and the dashboard reaches the GCS).
  returned: always
  type: bool
ready:
  description: RV(up) and every expected node and GPU is registered.
  returned: always
  type: bool
gcs_ok:
  description: The GCS port accepts TCP connections and does not answer as an HTTP/1 server.
  returned: always
  type: bool
gcs_protocol:
  description:
    - What answered on the GCS port, V(grpc), V(http) (that is a dashboard, not the GCS), V(unknown),
      or null when closed.
  returned: always
  type: str
dashboard_ok:
  description: C(/api/version) answered and C(/api/gcs_healthz) said C(success).
  returned: always
  type: bool
ray_version:
  description: The Ray version the dashboard reports.
  returned: always
  type: str
  sample: 2.60.0
nodes:
  description: Every node Ray knows, alive or dead.
  returned: always
  type: list
  elements: dict
  contains:
    node_id:
      description: Ray's node id.
      type: str
    ip:
      description: The node's IP address.
      type: str
    alive:
      description: The node's state is C(ALIVE).
      type: bool
    is_head:
      description: The node is the head node.
      type: bool
    resources:
      description: Registered C(GPU) and C(CPU) totals.
      type: dict
gpus:
  description: GPUs registered on alive nodes.
  returned: always
  type: float
cpus:
  description: CPUs registered on alive nodes.
  returned: always
  type: float
dashboard_url:
  description: The dashboard URL used (normalised).
  returned: always
  type: str
missing_nodes:
  description: Expected node IPs that are not registered and alive.
  returned: always
  type: list
  elements: str
missing_gpus:
  description: How many GPUs are missing to reach O(expected_gpus).
  returned: always
  type: int
progress:
  description: One line for people.
  returned: always
  type: str
  sample: 2/3 nodes, 8/16 GPUs registered; waiting for 10.0.0.3
head:
  description: The head node's IP address and the two ports.
  returned: always
  type: dict
  sample: {ip: 10.121.38.2, gcs_port: 64379, dashboard_port: 8772, node_id: "bde22..."}
hints:
  description: Sentences about what is wrong with the addresses (port mix-ups, nothing listening, proxies).
  returned: always
  type: list
  elements: str
errors:
  description: The last error of each port probe, when one failed.
  returned: always
  type: dict
elapsed:
  description: Seconds spent probing and waiting.
  returned: always
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import (
    PORT_HINT,
    RayApiError,
    RayClient,
    normalize_url,
    parse_hostport,
    probe_port,
    url_port,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import GCS_PORT, ray_argument_spec
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.cluster_text import failure_message, progress_line


def probe(client, gcs_host, gcs_port, expected_nodes, expected_gpus, request_timeout):
    result = {
        "gcs_ok": False,
        "gcs_protocol": None,
        "dashboard_ok": False,
        "ray_version": None,
        "nodes": [],
        "gpus": 0.0,
        "cpus": 0.0,
        "hints": [],
        "errors": {},
    }
    gcs = probe_port(gcs_host, gcs_port, timeout=request_timeout)
    result["gcs_protocol"] = gcs["protocol"]
    if not gcs["open"]:
        result["errors"]["gcs"] = "%s:%d: %s" % (gcs_host, gcs_port, gcs["error"])
    elif gcs["protocol"] == "http":
        result["errors"]["gcs"] = "%s:%d answers HTTP/1: that is a dashboard port, not the GCS" % (gcs_host, gcs_port)
        result["hints"].append(
            "gcs_address %s:%d answers HTTP/1: it is a dashboard port, not the GCS." % (gcs_host, gcs_port)
        )
    else:
        result["gcs_ok"] = True

    try:
        version = client.version()
        result["ray_version"] = version.get("ray_version")
        healthy = client.gcs_healthz()
        result["dashboard_ok"] = bool(healthy)
        if not healthy:
            result["errors"]["dashboard"] = (
                "%s/api/gcs_healthz did not say 'success': the dashboard cannot reach the GCS" % client.url
            )
        result["nodes"] = [
            {
                "node_id": node["node_id"],
                "ip": node["ip"],
                "hostname": node["hostname"],
                "state": node["state"],
                "alive": node["alive"],
                "is_head": node["is_head"],
                "resources": node["resources"],
            }
            for node in client.nodes()
        ]
    except RayApiError as exc:
        result["errors"]["dashboard"] = str(exc.message)
        if exc.hint and exc.hint not in result["hints"]:
            result["hints"].append(exc.hint)
    if not result["gcs_ok"] and result["dashboard_ok"] and gcs["protocol"] != "http":
        result["hints"].append(
            "the dashboard answers but %s:%d does not: check gcs_address against `ray start --port` "
            "(%d in the guide)"
            % (gcs_host, gcs_port, GCS_PORT)
        )

    if result["hints"] and not any(PORT_HINT in hint for hint in result["hints"]):
        result["hints"].append(PORT_HINT)

    alive = [node for node in result["nodes"] if node["alive"]]
    result["gpus"] = sum(node["resources"]["GPU"] for node in alive)
    result["cpus"] = sum(node["resources"]["CPU"] for node in alive)
    alive_ips = set(node["ip"] for node in alive)
    result["missing_nodes"] = [ip for ip in expected_nodes if ip not in alive_ips]
    missing = 0
    if expected_gpus is not None:
        missing = max(0, int(round(expected_gpus - result["gpus"])))
    result["missing_gpus"] = missing
    result["up"] = result["gcs_ok"] and result["dashboard_ok"]
    result["ready"] = result["up"] and not result["missing_nodes"] and not missing
    return result


def head_of(result, gcs_host, gcs_port, dashboard_url):
    head = {"ip": None, "node_id": None, "gcs_port": gcs_port, "dashboard_port": url_port(dashboard_url)}
    for node in result["nodes"]:
        if node["is_head"] and node["alive"]:
            head.update(ip=node["ip"], node_id=node["node_id"])
            break
    if head["ip"] is None:
        head["ip"] = gcs_host
    return head


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expected_nodes=dict(type="list", elements="str", default=[]),
            expected_gpus=dict(type="int"),
            timeout=dict(type="int", default=0),
            interval=dict(type="int", default=5),
            **ray_argument_spec(request_timeout=5, gcs_address=True)
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = []
    gcs_host = gcs_port = None
    try:
        gcs_host, gcs_port = parse_hostport(params["gcs_address"])
    except ValueError as exc:
        problems.append("gcs_address: %s" % exc)
    dashboard_url = None
    try:
        dashboard_url = normalize_url(params["dashboard_url"])
    except ValueError as exc:
        problems.append("dashboard_url: %s" % exc)
    if gcs_port is not None and dashboard_url is not None and url_port(dashboard_url) == gcs_port:
        problems.append(
            "dashboard_url %s and gcs_address %s use the same port %d; they are two different ports. %s"
            % (dashboard_url, params["gcs_address"], gcs_port, PORT_HINT)
        )
    if params["expected_gpus"] is not None and params["expected_gpus"] < 0:
        problems.append("expected_gpus is %d; give a number of GPUs >= 0" % params["expected_gpus"])
    if params["timeout"] < 0:
        problems.append("timeout is %d; give seconds >= 0 (0 = probe once)" % params["timeout"])
    if params["interval"] < 1:
        problems.append("interval is %d; give seconds >= 1" % params["interval"])
    if params["request_timeout"] < 1:
        problems.append("request_timeout is %d; give seconds >= 1" % params["request_timeout"])
    expected_nodes = [ip.strip() for ip in params["expected_nodes"] if ip and ip.strip()]
    if problems:
        module.fail_json(msg="ray_cluster: " + "; ".join(problems))

    client = RayClient(dashboard_url, timeout=params["request_timeout"], use_proxy=params["use_proxy"])
    start = time.time()
    deadline = start + params["timeout"]
    while True:
        result = probe(client, gcs_host, gcs_port, expected_nodes, params["expected_gpus"], params["request_timeout"])
        remaining = deadline - time.time()
        if result["ready"] or params["timeout"] == 0 or remaining <= 0:
            break
        time.sleep(min(params["interval"], remaining))
    result["dashboard_url"] = dashboard_url
    result["head"] = head_of(result, gcs_host, gcs_port, dashboard_url)
    result["progress"] = progress_line(result, expected_nodes, params["expected_gpus"])
    result["elapsed"] = round(time.time() - start, 1)
    result["changed"] = False

    if params["timeout"] > 0 and not result["ready"]:
        module.fail_json(msg=failure_message(result, params, dashboard_url, gcs_port), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
