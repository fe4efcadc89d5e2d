# The fleet's layout from each node's variables: training clusters (head first) and shared storages.
# One implementation for the facts play's filters and for the configuration check.
from __future__ import annotations

import ipaddress


def is_ip(value):
    try:
        ipaddress.ip_address(str(value))
        return True
    except ValueError:
        return False


def node_address(node):
    """slime_node_ip, else ansible_host when it is a non-loopback IP, else the default IPv4 fact."""
    explicit = node.get("slime_node_ip")
    if explicit:
        return str(explicit)
    host = node.get("ansible_host")
    if host and is_ip(host) and not ipaddress.ip_address(str(host)).is_loopback:
        return str(host)
    default = node.get("ansible_default_ipv4") or {}
    return default.get("address") if isinstance(default, dict) else None


def cluster_of(name, node):
    return str(node.get("slime_cluster") or name)


def storage_of(name, node):
    return str(node.get("slime_storage") or name)


def clusters(node_vars, nodes, groups=None, gpus=None):
    """{cluster: {name, head, workers, nodes, size, gpus, addresses}}.

    node_vars: {node: mapping with slime_cluster, slime_node_ip, ansible_host, ...}. The head is the
    first node, in the order of the group named like the cluster when there is one, else in the
    order of `nodes`. gpus: {node: int} (default: int(slime_gpus_per_node))."""
    groups = groups or {}
    members = {}
    for name in nodes:
        members.setdefault(cluster_of(name, node_vars[name]), []).append(name)
    result = {}
    for cluster, names in members.items():
        order = [n for n in groups.get(cluster, []) if n in names]
        names = order + [n for n in names if n not in order]
        counts = {n: (gpus or {}).get(n, node_vars[n].get("slime_gpus_per_node")) for n in names}
        result[cluster] = {
            "name": cluster,
            "head": names[0],
            "workers": names[1:],
            "nodes": names,
            "size": len(names),
            "gpus": counts,
            "addresses": {n: node_address(node_vars[n]) for n in names},
        }
    return result


def storages(node_vars, nodes):
    """{storage: {name, leader, nodes}}: the first node of a storage prepares what is shared."""
    result = {}
    for name in nodes:
        result.setdefault(storage_of(name, node_vars[name]), []).append(name)
    return {storage: {"name": storage, "leader": names[0], "nodes": names} for storage, names in result.items()}
