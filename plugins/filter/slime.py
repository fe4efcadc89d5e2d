# Filters for the run script's arguments and the fleet's cluster layout.
from __future__ import annotations

import ipaddress
import shlex

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.plugin_utils import train_args as ta


def slime_arg_arrays(groups, overrides=None, model_args=None):
    """[{name, tokens}] for each array of the run script, MODEL_ARGS first when given."""
    merged, _located = ta.apply_overrides(groups, overrides)
    if model_args is not None:
        merged = dict(merged, MODEL_ARGS=dict(model_args))
    return [{"name": name, "tokens": ta.group_tokens(merged[name])} for name in ta.ordered_groups(merged)]


def slime_argv(groups, cluster_args, model_args, overrides=None):
    """train.py's argv, in the guide's order (cluster args, MODEL_ARGS, then the arrays)."""
    return ta.argv(cluster_args, model_args, groups, overrides)


def slime_effective_args(groups, overrides=None):
    """{flag: value} that train.py receives from the arrays (MODEL_ARGS aside)."""
    merged, _located = ta.apply_overrides(groups, overrides)
    return ta.effective_args(merged)


def slime_flag_tokens(flags):
    """argv tokens of a {flag: value} mapping."""
    return ta.group_tokens(flags)


def slime_shell_lines(tokens):
    """Group argv tokens into shell-quoted lines: each flag with its values."""
    lines = []
    for token in tokens:
        quoted = shlex.quote(str(token))
        if str(token).startswith("--") or not lines:
            lines.append(quoted)
        else:
            lines[-1] += " " + quoted
    return lines


def slime_host_path(path, volumes):
    """The node's path behind a container path, through bind mounts `host:container[:mode]`.
    The longest matching mount wins; a path outside every mount is returned unchanged."""
    best = None
    for volume in volumes or []:
        parts = str(volume).split(":")
        if len(parts) < 2:
            continue
        host, inside = parts[0], parts[1].rstrip("/") or "/"
        if path == inside or path.startswith(inside.rstrip("/") + "/"):
            if best is None or len(inside) > len(best[1]):
                best = (host, inside)
    if best is None:
        return path
    host, inside = best
    rest = path[len(inside):].lstrip("/")
    return host.rstrip("/") + ("/" + rest if rest else "") if host != "/" else "/" + rest


def _is_ip(value):
    try:
        ipaddress.ip_address(str(value))
        return True
    except ValueError:
        return False


def _node_address(name, hostvars):
    node = hostvars[name]
    explicit = node.get("slime_node_ip")
    if explicit:
        return str(explicit)
    host = node.get("ansible_host")
    if host and _is_ip(host) and not ipaddress.ip_address(str(host)).is_loopback:
        return str(host)
    default = node.get("ansible_default_ipv4") or {}
    return default.get("address")


def slime_topology(hostvars, nodes, groups=None):
    """{cluster name: {name, head, workers, nodes, size, gpus, addresses}} for the given nodes.

    A node's cluster is its `slime_cluster` variable (set per host, or per group in the
    group's vars); a node without one is a single-node cluster named after itself. The
    head is the first node, in the order of the group named like the cluster when there
    is one, else in inventory order."""
    groups = groups or {}
    clusters = {}
    for name in nodes:
        cluster = hostvars[name].get("slime_cluster") or name
        clusters.setdefault(str(cluster), []).append(name)
    result = {}
    for cluster, members in clusters.items():
        order = [n for n in groups.get(cluster, []) if n in members]
        members = order + [n for n in members if n not in order]
        gpus = {}
        for member in members:
            count = hostvars[member].get("slime_gpus_per_node")
            try:
                gpus[member] = int(count)
            except (TypeError, ValueError):
                raise AnsibleFilterError(
                    "slime_gpus_per_node of %s is %r; set it to the node's GPU count" % (member, count))
        result[cluster] = {
            "name": cluster,
            "head": members[0],
            "workers": members[1:],
            "nodes": members,
            "size": len(members),
            "gpus": gpus,
            "addresses": {member: _node_address(member, hostvars) for member in members},
        }
    return result


def slime_storages(hostvars, nodes):
    """{storage name: {name, leader, nodes}}: nodes that share /data name the same
    `slime_storage`; a node without one has storage of its own. The leader (first
    node) downloads, extracts, preprocesses and converts; the others only check."""
    storages = {}
    for name in nodes:
        storage = str(hostvars[name].get("slime_storage") or name)
        storages.setdefault(storage, []).append(name)
    return {storage: {"name": storage, "leader": members[0], "nodes": members}
            for storage, members in storages.items()}


def slime_save_dir_clashes(hostvars, topology):
    """{cluster: message} for clusters whose heads would write the same save dir on the
    same storage: two trainings would overwrite each other's checkpoints."""
    writers = {}
    for cluster in topology.values():
        head = hostvars[cluster["head"]]
        key = (str(head.get("slime_storage") or cluster["head"]), str(head.get("slime_save_dir")))
        writers.setdefault(key, []).append(cluster["name"])
    clashes = {}
    for (storage, save_dir), clusters in writers.items():
        if len(clusters) < 2:
            continue
        for name in clusters:
            clashes[name] = (
                "clusters %s all save checkpoints to %s on storage %s and would overwrite each other's. Fix: give "
                "each cluster its own slime_save_dir (for example /data/checkpoints/{{ slime_experiment }} with a "
                "slime_experiment per cluster)." % (", ".join(sorted(clusters)), save_dir, storage))
    return clashes


def slime_writer(hostvars, storage, name, value):
    """The node that writes `value` (a path held in variable `name`) on a storage: the
    first of the storage's nodes whose `name` is `value`. The others only check it."""
    for node in storage["nodes"]:
        if hostvars[node].get(name) == value:
            return node
    return storage["leader"]


def slime_collect(hostvars, nodes, name, default=None):
    """{node: that node's variable `name`} (default when it has none)."""
    return {node: hostvars[node].get(name, default) for node in nodes}


class FilterModule:
    def filters(self):
        return {
            "slime_arg_arrays": slime_arg_arrays,
            "slime_argv": slime_argv,
            "slime_effective_args": slime_effective_args,
            "slime_flag_tokens": slime_flag_tokens,
            "slime_shell_lines": slime_shell_lines,
            "slime_host_path": slime_host_path,
            "slime_topology": slime_topology,
            "slime_storages": slime_storages,
            "slime_collect": slime_collect,
            "slime_writer": slime_writer,
            "slime_save_dir_clashes": slime_save_dir_clashes,
        }
