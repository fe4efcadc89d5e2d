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

# typing's List/Dict (not list[...]): these classes are built at import on the nodes' Python 3.8.
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, TypedDict


class PlanError(ValueError):
    pass


class Storage(TypedDict):
    """A storage of the plan: its name, its leader node and the leader's fleet address."""

    name: str
    node: str
    address: str


class Upstream(TypedDict):
    name: str
    address: str


class Puller(TypedDict):
    """A storage that pulls: from `parent` first, then the `upstreams` further up its chain, nearest first."""

    node: str
    address: str
    parent: str
    upstreams: List[Upstream]
    children: List[str]


class Server(TypedDict):
    """A storage (or the external seed) that serves its `children`."""

    address: str
    children: List[str]


class Plan(TypedDict):
    seeds: List[Storage]
    chains: List[List[str]]
    pullers: Dict[str, Puller]
    servers: Dict[str, Server]
    done: List[str]
    skipped: List[str]


def _check_storages(storages: Sequence[Mapping[str, Any]]) -> None:
    names = set()
    for entry in storages:
        for key in ("name", "node", "address"):
            if not entry.get(key):
                raise PlanError("fanout plan: storage %r has no %s (set slime_node_ip for node %s)"
                                % (entry.get("name"), key, entry.get("node")))
        if entry["name"] in names:
            raise PlanError("fanout plan: storage %s is listed twice" % entry["name"])
        names.add(entry["name"])


def plan(storages: Sequence[Mapping[str, Any]], holders: Iterable[str] = (),
         external_seed: Optional[Mapping[str, Any]] = None, failed: Iterable[str] = (),
         max_chains: Optional[int] = None) -> Plan:
    """The spreading plan.

    storages: ordered list of Storage {name, node, address} (the storage's leader node and its fleet address),
    checked here.
    holders: names of storages with a verified copy (seeds).
    external_seed: {name, address} of a seed outside the fleet (the controller), used when no storage holds one.
    failed: names of storages to leave out (unreachable, failed earlier); they keep whatever they have.
    max_chains: at most this many chains (default: one per seed).

    Returns the Plan: `chains` the storage names of each seed's chain, `servers` everyone that must serve (seeds
    and pullers with children), `done` the storages that already hold a copy, `skipped` the failed ones that
    lack one."""
    _check_storages(storages)
    by_name: Dict[str, Storage] = {s["name"]: {"name": s["name"], "node": s["node"], "address": s["address"]}
                                   for s in storages}
    held, left_out = set(holders), set(failed)
    unknown = (held | left_out) - set(by_name)
    if unknown:
        raise PlanError("fanout plan: unknown storages %s" % ", ".join(sorted(unknown)))
    seeds = [by_name[s["name"]] for s in storages if s["name"] in held and s["name"] not in left_out]
    lacking = [s for s in storages if s["name"] not in held and s["name"] not in left_out]
    if not seeds and lacking:
        if not external_seed or not external_seed.get("address"):
            raise PlanError("fanout plan: no storage holds a verified copy and no external seed is given; fetch the "
                            "artifact on one storage first, or set the controller as the source")
        seeds = [{"name": external_seed.get("name", "controller"), "node": external_seed.get("name", "controller"),
                  "address": external_seed["address"]}]
    count = min(len(seeds), max_chains or len(seeds), len(lacking))
    chains: List[List[str]] = [[] for dummy in range(count)]
    for index, entry in enumerate(lacking):
        chains[index % count].append(entry["name"])

    pullers: Dict[str, Puller] = {}
    servers: Dict[str, Server] = {}
    for seed, chain in zip(seeds, chains):
        line: List[Upstream] = [{"name": seed["name"], "address": seed["address"]}]
        for name in chain:
            member = by_name[name]
            upstreams = list(reversed(line))
            pullers[name] = {"node": member["node"], "address": member["address"], "parent": upstreams[0]["name"],
                             "upstreams": upstreams, "children": []}
            line.append({"name": name, "address": member["address"]})
        for position, name in enumerate(chain):
            if position + 1 < len(chain):
                pullers[name]["children"].append(chain[position + 1])
        if chain:
            servers[seed["name"]] = {"address": seed["address"], "children": [chain[0]]}
        for name in chain:
            if pullers[name]["children"]:
                servers[name] = {"address": pullers[name]["address"], "children": list(pullers[name]["children"])}
    return {
        "seeds": [Storage(name=s["name"], node=s["node"], address=s["address"]) for s in seeds],
        "chains": chains,
        "pullers": pullers,
        "servers": servers,
        "done": [s["name"] for s in storages if s["name"] in held],
        "skipped": [s["name"] for s in storages if s["name"] in left_out and s["name"] not in held],
    }
