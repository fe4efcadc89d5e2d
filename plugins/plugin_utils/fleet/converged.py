# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""Which nodes the fast path ends (playbooks/plays/converged.yml): the nodes of every training cluster whose every
node answered "nothing differs from the last full run". A cluster with a node that did not answer (failed earlier,
unreachable, its container down) or answered otherwise runs every stage on every node. The fan-out's seed ends only
when every node of the play ended: the fan-out plays need it to seed the others."""
from __future__ import annotations


def ended(answers, clusters, play_hosts, seed=""):
    """The hosts of `play_hosts` (in its order) that the fast path ends.
    answers: {host: whether its probe said converged}; clusters: {host: the nodes of its training cluster};
    seed: the fan-out's seed node, or "" without fan-out."""
    def cluster_converged(host):
        return all(answers.get(node) is True for node in clusters.get(host) or [host])

    every = all(cluster_converged(host) for host in play_hosts)
    return [host for host in play_hosts if cluster_converged(host) and (host != seed or every)]
