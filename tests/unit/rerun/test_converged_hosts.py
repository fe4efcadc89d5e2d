"""Which nodes the fast path ends: whole clusters whose every node answered converged; the fan-out's seed only
when every node of the play did."""
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.filter.rerun import slime_converged_hosts
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet.converged import ended

CLUSTERS = {"n1": ["n1", "n2"], "n2": ["n1", "n2"], "n3": ["n3"], "n4": ["n4"]}
HOSTS = ["n1", "n2", "n3", "n4"]


def test_a_cluster_ends_only_when_every_node_of_it_answered_converged():
    answers = {"n1": True, "n2": False, "n3": True, "n4": True}
    assert ended(answers, CLUSTERS, HOSTS) == ["n3", "n4"]
    assert ended(dict(answers, n2=True), CLUSTERS, HOSTS) == HOSTS


def test_a_node_that_did_not_answer_keeps_its_cluster_running():
    assert ended({"n1": True, "n3": True}, CLUSTERS, HOSTS) == ["n3"]


def test_the_seed_ends_only_when_every_node_does():
    answers = {"n1": True, "n2": False, "n3": True, "n4": True}
    assert ended(answers, CLUSTERS, HOSTS, seed="n3") == ["n4"]
    assert ended(dict(answers, n2=True), CLUSTERS, HOSTS, seed="n3") == HOSTS


def test_the_filter_reads_the_probe_and_the_cluster_of_each_node():
    hostvars = {
        "n1": {"__converged": {"converged": True}, "slime_cluster_info": {"nodes": ["n1", "n2"]}},
        "n2": {"__converged": {"skipped": True}, "slime_cluster_info": {"nodes": ["n1", "n2"]}},
        "n3": {"__converged": {"converged": True}, "slime_cluster_info": {"nodes": ["n3"]}},
        "n4": {"slime_cluster_info": {"nodes": ["n4"]}},
    }
    assert slime_converged_hosts(hostvars, HOSTS, "") == ["n3"]
    with pytest.raises(AnsibleFilterError, match="slime_converged_hosts: 'n5'"):
        slime_converged_hosts(hostvars, HOSTS + ["n5"])
