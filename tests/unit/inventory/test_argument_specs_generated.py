"""Each role's meta/argument_specs.yml is what tools/argument_specs.py makes of the schema and the defaults today:
the types have one source (plugins/plugin_utils/inventory/variables.py)."""
from __future__ import annotations

import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("argument_specs_tool", os.path.join(REPO, "tools", "argument_specs.py"))
TOOL = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(TOOL)


@pytest.mark.parametrize("role", sorted(TOOL.ROLE_OPTIONS))
def test_the_committed_argument_spec_is_the_generated_one(role):
    with open(TOOL.path_of(role), encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == TOOL.render(role), (
        "roles/%s/meta/argument_specs.yml differs from what the schema makes of it: run tools/argument_specs.py"
        % role)


def test_an_option_takes_type_choices_and_default_from_the_schema_and_the_defaults():
    option = TOOL.option("ray_head_restart")
    assert option == {"description": "What to do with a Ray that differs.", "type": "str",
                      "choices": ["when_idle", "never", "force"], "default": "when_idle"}
    assert TOOL.option("slime_fanout_artifacts")["choices"] == ["data", "model", "convert", "image"]
    assert TOOL.option("slime_cluster_info")["required"] is True  # computed by the facts play: no default
    assert TOOL.option("model_hf_token")["no_log"] is True


def test_a_changed_schema_type_shows_as_a_difference(monkeypatch):
    from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import Str

    monkeypatch.setattr(TOOL.BY_NAME["ray_num_cpus"], "type", Str())
    assert "ray_num_cpus:\n        description: ray start --num-cpus.\n        type: str\n" in TOOL.render("ray_head")
    with open(TOOL.path_of("ray_head"), encoding="utf-8") as handle:
        assert TOOL.render("ray_head") != handle.read()
