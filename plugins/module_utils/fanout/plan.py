# Who pulls an artifact from whom when it is spread over a fleet (pure; no I/O).
#
# The unit is a storage: nodes that share one (slime_storage) get one copy, pulled by the storage's leader.
# Storages that hold a verified copy are seeds; an external seed (the controller, for air-gapped fleets) is used
# only when no storage holds one. The storages that lack the artifact are dealt round-robin into one chain per
# seed, and each chain is pipelined: storage k pulls piece by piece from storage k-1 while k-1 is still receiving,
# so every node sends at most one copy and receives one, and N storages take about one copy's time (plus one
# piece per hop). Each puller's upstreams are its chain's earlier members, nearest first, ending at the seed: a
# puller whose parent dies or serves a piece that does not verify goes on from the next one up.
#
# Standard library only; Python 3.8+ (runs on the controller and on nodes).
from __future__ import annotations


class PlanError(ValueError):
    pass


def _check_storages(storages):
    names = set()
    for entry in storages:
        for key in ("name", "node", "address"):
            if not entry.get(key):
                raise PlanError("fanout plan: storage %r has no %s (set slime_node_ip for node %s)"
                                % (entry.get("name"), key, entry.get("node")))
        if entry["name"] in names:
            raise PlanError("fanout plan: storage %s is listed twice" % entry["name"])
        names.add(entry["name"])


def plan(storages, holders=(), external_seed=None, failed=(), max_chains=None):
    """The spreading plan.

    storages: ordered list of {name, node, address} (the storage's leader node and its fleet address).
    holders: names of storages with a verified copy (seeds).
    external_seed: {name, address} of a seed outside the fleet (the controller), used when no storage holds one.
    failed: names of storages to leave out (unreachable, failed earlier); they keep whatever they have.
    max_chains: at most this many chains (default: one per seed).

    Returns {seeds: [{name, node, address}], chains: [[storage names...]], pullers: {storage: {node, address,
    parent, upstreams: [{name, address}], children: [names]}}, servers: {name: {address, children}}, skipped,
    done}: `servers` lists everyone that must serve (seeds and pullers with children), `done` the storages that
    already hold a copy, `skipped` the failed ones that lack one."""
    _check_storages(storages)
    by_name = {s["name"]: s for s in storages}
    failed = set(failed)
    unknown = (set(holders) | failed) - set(by_name)
    if unknown:
        raise PlanError("fanout plan: unknown storages %s" % ", ".join(sorted(unknown)))
    seeds = [by_name[s["name"]] for s in storages if s["name"] in set(holders) and s["name"] not in failed]
    lacking = [s for s in storages if s["name"] not in set(holders) and s["name"] not in failed]
    if not seeds and lacking:
        if not external_seed or not external_seed.get("address"):
            raise PlanError("fanout plan: no storage holds a verified copy and no external seed is given; fetch the "
                            "artifact on one storage first, or set the controller as the source")
        seeds = [{"name": external_seed.get("name", "controller"), "node": external_seed.get("name", "controller"),
                  "address": external_seed["address"]}]
    count = min(len(seeds), max_chains or len(seeds), len(lacking))
    chains = [[] for _ in range(count)]
    for index, entry in enumerate(lacking):
        chains[index % count].append(entry["name"])

    pullers, servers = {}, {}
    for seed, chain in zip(seeds, chains):
        line = [{"name": seed["name"], "address": seed["address"]}]
        for name in chain:
            entry = by_name[name]
            upstreams = list(reversed(line))
            pullers[name] = {"node": entry["node"], "address": entry["address"], "parent": upstreams[0]["name"],
                             "upstreams": upstreams, "children": []}
            line.append({"name": name, "address": entry["address"]})
        for position, name in enumerate(chain):
            if position + 1 < len(chain):
                pullers[name]["children"].append(chain[position + 1])
        if chain:
            servers[seed["name"]] = {"address": seed["address"], "children": [chain[0]]}
        for name in chain:
            if pullers[name]["children"]:
                servers[name] = {"address": pullers[name]["address"], "children": list(pullers[name]["children"])}
    return {
        "seeds": [dict(s) for s in seeds],
        "chains": chains,
        "pullers": pullers,
        "servers": servers,
        "done": [s["name"] for s in storages if s["name"] in set(holders)],
        "skipped": [s["name"] for s in storages if s["name"] in failed and s["name"] not in set(holders)],
    }
