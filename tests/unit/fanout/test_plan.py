"""module_utils/fanout/plan.py: which storage pulls from which when an artifact is spread."""
from __future__ import annotations

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import plan as fp


def fleet(n):
    return [{"name": "s%d" % i, "node": "n%d" % i, "address": "10.0.0.%d" % i} for i in range(1, n + 1)]


def test_one_seed_makes_one_pipelined_chain_with_fallbacks_up_to_the_seed():
    plan = fp.plan(fleet(4), holders=["s1"])
    assert plan["chains"] == [["s2", "s3", "s4"]]
    assert plan["pullers"]["s2"]["parent"] == "s1"
    assert [u["name"] for u in plan["pullers"]["s4"]["upstreams"]] == ["s3", "s2", "s1"]
    assert plan["pullers"]["s4"]["upstreams"][0]["address"] == "10.0.0.3"
    assert plan["servers"] == {"s1": {"address": "10.0.0.1", "children": ["s2"]},
                               "s2": {"address": "10.0.0.2", "children": ["s3"]},
                               "s3": {"address": "10.0.0.3", "children": ["s4"]}}
    assert plan["done"] == ["s1"] and plan["skipped"] == []
    # every storage receives at most one copy and sends at most one
    assert all(len(s["children"]) == 1 for s in plan["servers"].values())


def test_several_holders_share_the_work_in_parallel_chains():
    plan = fp.plan(fleet(8), holders=["s1", "s5"])
    assert plan["chains"] == [["s2", "s4", "s7"], ["s3", "s6", "s8"]]
    assert plan["pullers"]["s6"]["upstreams"][-1]["name"] == "s5"
    assert fp.plan(fleet(8), holders=["s1", "s5"], max_chains=1)["chains"] == [["s2", "s3", "s4", "s6", "s7", "s8"]]


def test_air_gapped_the_controller_seeds_only_when_no_storage_holds_a_copy():
    seed = {"name": "controller", "address": "10.0.0.254"}
    plan = fp.plan(fleet(3), holders=[], external_seed=seed)
    assert plan["seeds"][0]["name"] == "controller"
    assert plan["chains"] == [["s1", "s2", "s3"]]
    assert plan["servers"]["controller"]["children"] == ["s1"]
    # once a storage holds it, the fleet seeds itself (a rerun after a partial spread)
    plan = fp.plan(fleet(3), holders=["s2"], external_seed=seed)
    assert [s["name"] for s in plan["seeds"]] == ["s2"] and plan["chains"] == [["s1", "s3"]]


def test_failed_storages_are_left_out_and_the_rest_go_on():
    plan = fp.plan(fleet(4), holders=["s1"], failed=["s3"])
    assert plan["chains"] == [["s2", "s4"]] and plan["skipped"] == ["s3"]
    assert "s3" not in plan["pullers"] and "s3" not in plan["servers"]
    # a failed holder does not seed
    plan = fp.plan(fleet(3), holders=["s1", "s2"], failed=["s1"])
    assert [s["name"] for s in plan["seeds"]] == ["s2"] and plan["chains"] == [["s3"]]


def test_nothing_to_do_when_every_storage_holds_it():
    plan = fp.plan(fleet(3), holders=["s1", "s2", "s3"])
    assert plan["pullers"] == {} and plan["servers"] == {} and plan["chains"] == []
    assert "s1" not in plan["pullers"] and "s1" not in plan["servers"]


def test_roles():
    plan = fp.plan(fleet(3), holders=["s1"])
    assert "s1" in plan["servers"] and "s1" not in plan["pullers"]
    assert "s3" in plan["pullers"] and plan["pullers"]["s3"]["children"] == []


@pytest.mark.parametrize("storages, kwargs, words", [
    (fleet(2), {"holders": []}, ["no storage holds", "controller"]),
    (fleet(2), {"holders": ["s9"]}, ["unknown storages s9"]),
    ([{"name": "s1", "node": "n1", "address": None}], {"holders": []}, ["slime_node_ip", "n1"]),
    (fleet(1) + fleet(1), {"holders": ["s1"]}, ["listed twice"]),
])
def test_bad_input_is_refused_with_the_fix(storages, kwargs, words):
    with pytest.raises(fp.PlanError) as err:
        fp.plan(storages, **kwargs)
    for word in words:
        assert word in str(err.value)
