# Filters of the fast path (docs/architecture.md, "The fast path").
from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet import converged


def slime_converged_hosts(hostvars, play_hosts, seed=""):
    """The nodes of play_hosts whose clusters the fast path ends, from each node's registered probe (__converged)
    and its cluster (slime_cluster_info.nodes)."""
    try:
        answers, clusters = {}, {}
        for host in play_hosts:
            node = hostvars[host]
            answers[host] = (node.get("__converged") or {}).get("converged") is True
            clusters[host] = list((node.get("slime_cluster_info") or {}).get("nodes") or [host])
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("slime_converged_hosts: %s" % exc) from exc
    return converged.ended(answers, clusters, list(play_hosts), seed or "")


class FilterModule:
    def filters(self):
        return {"slime_converged_hosts": slime_converged_hosts}
