"""filter/fanout.py: the plays' view of the plan (per node, with URLs), holders from the probes, failed leaders."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.filter import fanout as f

LAYOUT = {"nfs": {"name": "nfs", "leader": "a", "nodes": ["a", "b"]}, "c": {"name": "c", "leader": "c", "nodes": ["c"]},
          "d": {"name": "d", "leader": "d", "nodes": ["d"]}}
HOSTVARS = {n: {"slime_cluster_info": {"addresses": {n: "10.0.0.%d" % i}}} for i, n in enumerate("abcd", 1)}


def test_storages_holders_and_plan_by_node():
    storages = f.slime_fanout_storages(LAYOUT, HOSTVARS)
    assert storages == [{"name": "nfs", "node": "a", "address": "10.0.0.1"},
                        {"name": "c", "node": "c", "address": "10.0.0.3"},
                        {"name": "d", "node": "d", "address": "10.0.0.4"}]
    hostvars = dict(HOSTVARS, d=dict(HOSTVARS["d"], __fanout_probe={"holds": True}))
    assert f.slime_fanout_holders(storages, hostvars, "a", ["a", "b", "c", "d"]) == ["nfs", "d"]
    assert f.slime_fanout_holders(storages, hostvars, "a", ["b", "c", "d"]) == ["d"]  # a failed: not a holder
    plan = f.slime_fanout_plan(storages, holders=["nfs"], port=9000)
    assert plan["by_node"]["a"] == {"role": "seed", "name": "nfs", "address": "10.0.0.1", "upstreams": [],
                                    "children": ["c"]}
    assert plan["by_node"]["d"]["upstreams"] == [{"name": "c", "url": "http://10.0.0.3:9000"},
                                                 {"name": "nfs", "url": "http://10.0.0.1:9000"}]
    assert "b" not in plan["by_node"]  # shares the storage of a: no copy of its own
    assert f.slime_fanout_failed(storages, ["a", "c"]) == ["d"]


def test_air_gapped_plan_and_errors_as_filter_errors():
    storages = f.slime_fanout_storages(LAYOUT, HOSTVARS)
    plan = f.slime_fanout_plan(storages, holders=[], external_seed={"name": "controller", "address": "10.0.0.254"})
    assert plan["servers"]["controller"]["children"] == ["nfs"]
    assert plan["by_node"]["a"]["upstreams"][0]["url"] == "http://10.0.0.254:8765"
    with pytest.raises(AnsibleFilterError, match="no storage holds"):
        f.slime_fanout_plan(storages, holders=[])
