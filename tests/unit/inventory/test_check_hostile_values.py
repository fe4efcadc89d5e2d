"""Every variable of the schema, and every flag of the default training arguments, given values of the wrong
type, sign or shape: the configuration check answers with problems that name the variable (or accepts the
value), and never raises."""
from __future__ import annotations

import copy
import functools

import pytest
from guide_values import host_values

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.check import check
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import VARS

HOSTILE = (
    0, -5, -1, 2 ** 70, 1.5, -0.5, float("nan"), True, False, None,
    [], [1, "a"], [None], [[1]], [{"a": 1}], ["/data:/data", 5],
    {}, {"a": 1}, {1: 2}, {"a": [1]}, {"a": {"b": None}}, {"ROLLOUT_ARGS": {"num-rollout": [1, {}]}},
    "", "-1", "line\nbreak", "a'b\"c", "$(id)", "/data/x:", ":", "/x:/y:zz", "1e400",
)
# Values a flag's parser may be handed in slime_train_args / slime_model_args / the overrides.
HOSTILE_FLAG_VALUES = (0, -5, 2 ** 70, 1.5, -0.5, True, None, [], [1, "a"], [None], [[1]], {}, {"a": 1}, "",
                       "line\nbreak", "a'b\"c", "abc", "nan")


@functools.lru_cache(maxsize=1)
def _defaults():
    return host_values(["localhost"])


def problems_with(name, value):
    values = copy.deepcopy(_defaults())
    values["localhost"][name] = value
    return [p.text() for p in check(["localhost"], values)]


@pytest.mark.parametrize("var", VARS, ids=[v.name for v in VARS])
def test_every_variable_with_hostile_values_gives_problems_not_errors(var):
    for value in HOSTILE:
        found = problems_with(var.name, value)  # raises on a bug: the test fails naming the value
        if var.check(value):
            assert any(t.startswith(var.name + " ") for t in found), (value, found)
            assert all("Fix:" in t for t in found), found


def _flag_targets():
    defaults = _defaults()["localhost"]
    targets = [("slime_train_args", group, flag) for group, flags in defaults["slime_train_args"].items()
               for flag in flags]
    return targets + [("slime_model_args", None, flag) for flag in defaults["slime_model_args"]]


@pytest.mark.parametrize("variable,group,flag", _flag_targets(), ids=str)
def test_every_default_flag_with_hostile_values_gives_problems_not_errors(variable, group, flag):
    for value in HOSTILE_FLAG_VALUES:
        values = copy.deepcopy(_defaults())
        args = values["localhost"][variable]
        (args[group] if group else args)[flag] = value
        check(["localhost"], values)
        values = copy.deepcopy(_defaults())
        values["localhost"]["slime_train_args_overrides"] = {flag: value}
        check(["localhost"], values)


# -- the values of the report, and their messages ------------------------------------------------------------
def test_an_integer_out_of_its_range():
    found = problems_with("slime_gpus_per_node", 0)
    assert "slime_gpus_per_node = 0 (host localhost): must be an integer >= 1, <= 1024. Fix: set " \
           "slime_gpus_per_node to a whole number, unquoted and without decimals (integer >= 1, <= 1024)." in found
    # the GPU budget is not computed from a count that is wrong itself
    assert not any("GPUs" in t and t.startswith("slime_actor_gpus_per_node") for t in found), found
    assert problems_with("data_lock_timeout", -1) == [
        "data_lock_timeout = -1 (host localhost): must be an integer >= 1. Fix: set data_lock_timeout to a whole "
        "number, unquoted and without decimals (integer >= 1)."]


def test_a_negative_count_among_the_training_arguments():
    values = copy.deepcopy(_defaults())
    values["localhost"]["slime_train_args"]["ROLLOUT_ARGS"]["num-rollout"] = -5
    assert [p.text() for p in check(["localhost"], values)] == [
        "slime_train_args.ROLLOUT_ARGS['num-rollout'] = -5 (host localhost): cluster localhost: --num-rollout must "
        "be >= 1. Fix: set --num-rollout to 1 or more."]


def test_a_number_where_a_path_belongs():
    assert problems_with("container_archive_dir", -1) == [
        "container_archive_dir = -1 (host localhost): must be an absolute path (a string), not an integer. Fix: set "
        "container_archive_dir to an absolute, normalised path such as /data/checkpoints/my-run."]


def test_a_number_among_the_volumes():
    assert problems_with("container_volumes", ["/data:/data", 5]) == [
        "container_volumes = ['/data:/data', 5] (host localhost): item 1 (5) must be a string "
        "host:container[:mode], not an integer. Fix: make container_volumes a YAML list (lines starting with '- ') "
        "of bind mount `host:container[:mode]`, both absolute paths."]


def test_a_number_where_an_ip_address_belongs():
    text = problems_with("slime_node_ip", 5)[0]
    assert text.startswith("slime_node_ip = 5 (host localhost): must be an IP address (a string such as 10.0.0.11)")
