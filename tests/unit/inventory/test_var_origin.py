"""Where a host's variable comes from (plugins/plugin_utils/inventory/var_origin.py), on a real Ansible inventory: group
vars inline and in group_vars/, host vars inline and in host_vars/, extra vars, the collection's defaults, with file
and line."""
from __future__ import annotations

import re
import textwrap

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.var_origin import Origins, short


@pytest.fixture
def inventory(tmp_path):
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "hosts.yml").write_text(textwrap.dedent("""\
        all:
          children:
            slime_nodes:
              children:
                cluster_a:
                  hosts:
                    a1: {slime_experiment: mine}
                    a2: {}
                cluster_b:
                  hosts:
                    a2: {}
                    b1: {}
        """))
    (tmp_path / "group_vars" / "all" / "train.yml").write_text("slime_experiment: qwen3-8B\nslime_flag: true\n")
    (tmp_path / "group_vars" / "cluster_a.yml").write_text("slime_cluster: cluster_a\n")
    (tmp_path / "group_vars" / "cluster_b.yml").write_text("slime_cluster: cluster_b\n")
    (tmp_path / "host_vars" / "b1.yml").write_text("slime_flag: false\n")
    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(tmp_path / "hosts.yml")])
    variables = VariableManager(loader=loader, inventory=manager)
    return HostVars(manager, variables, loader)


def test_a_group_value_names_the_group_vars_file_and_line(inventory):
    text = Origins(inventory).describe("a2", "slime_experiment")
    assert text.startswith("from group_vars/all (") and "group_vars/all/train.yml:1" in text


def test_a_host_value_says_it_differs_from_the_groups(inventory):
    text = Origins(inventory).describe("a1", "slime_experiment")
    assert text.startswith("from host a1 (inventory)") and "hosts.yml:7" in text
    assert "the group value (group_vars/all" in text and "is 'qwen3-8B'" in text


def test_untagged_values_still_get_their_layer(inventory):
    # booleans carry no file tag, but the layer that sets them is known
    text = Origins(inventory).describe("b1", "slime_flag")
    assert text.startswith("from host_vars/b1") and "the group value (group_vars/all) is True" in text


def test_every_group_that_names_a_cluster(inventory):
    settings = Origins(inventory).groups_setting("a2", "slime_cluster")
    assert sorted((g, str(v)) for g, v in settings) == [("cluster_a", "cluster_a"), ("cluster_b", "cluster_b")]
    assert Origins(inventory).groups_setting("a1", "slime_cluster") == [("cluster_a", "cluster_a")]


def test_a_variable_no_inventory_sets_comes_from_the_collections_default(inventory):
    loader = DataLoader()
    origins = Origins(inventory, defaults.load(loader))
    assert re.fullmatch(r"from the collection's default \(roles/settings/defaults/main/container.yml:\d+\)",
                        origins.describe("a1", "container_recreate"))
    # an untagged default (a boolean) names its file; the inventory's value outranks the default
    assert origins.describe("a1", "container_enabled") == (
        "from the collection's default (roles/settings/defaults/main/container.yml)")
    assert origins.describe("a2", "slime_experiment").startswith("from group_vars/all (")


def test_a_variable_set_nowhere(inventory):
    assert Origins(inventory).describe("a1", "slime_node_ip") == (
        "not set in the inventory, and the collection has no default for it")


def test_short_keeps_newlines_visible_and_cuts_long_values():
    assert short("a\nb") == "'a\\nb'"
    assert short("x" * 200, 20).endswith("...") and len(short("x" * 200, 20)) == 20
