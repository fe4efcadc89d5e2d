# The fan-out plan for the fanout plays (module_utils/fanout/plan.py).
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import plan as fanout_plan


def slime_fanout_plan(storages, holders=(), external_seed=None, failed=(), port=8765):
    """storages: [{name, node, address}] in storage order -> the plan, plus `by_node`: {node: {role, name,
    upstreams: [{name, url}], children}} for every node that serves or pulls."""
    try:
        plan = fanout_plan.plan(list(storages), holders=list(holders), external_seed=external_seed or None,
                                failed=list(failed))
    except fanout_plan.PlanError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    by_node = {}
    nodes = {s["name"]: s["node"] for s in storages}
    for seed in plan["seeds"]:
        if seed["name"] in plan["servers"]:
            by_node[nodes.get(seed["name"], seed["name"])] = {
                "role": "seed", "name": seed["name"], "address": seed["address"], "upstreams": [],
                "children": plan["servers"][seed["name"]]["children"]}
    for name, puller in plan["pullers"].items():
        by_node[puller["node"]] = {
            "role": "pull", "name": name, "address": puller["address"], "children": puller["children"],
            "upstreams": [{"name": u["name"], "url": "http://%s:%d" % (u["address"], int(port))}
                          for u in puller["upstreams"]]}
    plan["by_node"] = by_node
    return plan


def slime_fanout_storages(storage_layout, hostvars):
    """[{name, node, address}] from the facts play's slime_storage_layout: one entry per storage, its leader and
    the leader's fleet address (slime_cluster_info.addresses)."""
    result = []
    for name, info in dict(storage_layout).items():
        leader = info["leader"]
        addresses = (hostvars[leader].get("slime_cluster_info") or {}).get("addresses") or {}
        result.append({"name": name, "node": leader, "address": addresses.get(leader)})
    return result


def slime_fanout_holders(storages, hostvars, seed, play_hosts, probe="__fanout_probe"):
    """Names of the storages that hold a verified copy: the seed's, and those whose leader's probe said so.
    Leaders no longer in the play (failed) are left out."""
    result = []
    for entry in storages:
        node = entry["node"]
        if node not in play_hosts:
            continue
        probed = hostvars[node].get(probe) or {}
        if node == seed or probed.get("holds"):
            result.append(entry["name"])
    return result


def slime_fanout_failed(storages, play_hosts):
    """Names of the storages whose leader is no longer in the play."""
    return [entry["name"] for entry in storages if entry["node"] not in play_hosts]


class FilterModule:
    def filters(self):
        return {"slime_fanout_plan": slime_fanout_plan, "slime_fanout_storages": slime_fanout_storages,
                "slime_fanout_holders": slime_fanout_holders, "slime_fanout_failed": slime_fanout_failed}
