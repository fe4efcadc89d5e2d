"""The roles' meta/argument_specs.yml and the inventory schema (plugins/plugin_utils/inventory/variables.py) agree:
every option is in the schema (or computed by the plays), with the same type, elements and choices, and every
default (argument spec, the collection's defaults in roles/settings) passes the schema's check."""
from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import BY_NAME, COMPUTED
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import Choice, List

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")))


def _yaml(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return yaml.safe_load(handle) or {}


def options(role):
    specs = _yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"]
    for entry, spec in specs.items():
        for name, option in (spec.get("options") or {}).items():
            yield entry, name, option


def role_options():
    # Options named _<role>_* are an internal role's parameters (roles/prepare), set by the calling roles,
    # never by the inventory.
    return [(role, entry, name, option) for role in ROLES for entry, name, option in options(role)
            if not name.startswith("_")]


def is_template(value):
    return isinstance(value, str) and "{{" in value


@pytest.mark.parametrize("role,entry,name,option", role_options(),
                         ids=["%s:%s:%s" % (r, e, n) for r, e, n, _o in role_options()])
def test_argument_spec_option_agrees_with_the_schema(role, entry, name, option):
    if name in COMPUTED:
        return
    assert name in BY_NAME, "%s (role %s) is not in plugins/plugin_utils/inventory/variables.py: add it there" % (
        name, role)
    var = BY_NAME[name]
    assert option.get("type", "str") == var.type.spec_type, "%s: argument spec type %s, schema %s" % (
        name, option.get("type", "str"), var.type.spec_type)
    if isinstance(var.type, List) and var.type.elements is not None:
        assert option.get("elements") == var.type.elements.spec_type, name
    if isinstance(var.type, Choice):
        assert list(option.get("choices") or []) == list(var.type.choices), name
    if "default" in option and not is_template(option["default"]) and not (
            isinstance(option["default"], list) and any(is_template(v) for v in option["default"])):
        assert var.check(option["default"]) is None, "%s: default %r: %s" % (name, option["default"],
                                                                             var.check(option["default"]))
    if var.secret:
        assert option.get("no_log") is True or name == "container_registry", "%s is a secret: no_log: true" % name


@pytest.mark.parametrize("name", sorted(defaults.load()))
def test_each_default_is_a_schema_variable_and_passes_its_check(name):
    value = defaults.load()[name]
    assert name in BY_NAME, "%s (%s) is not in the schema" % (name, defaults.sources()[name])
    if not defaults.is_template(value):
        assert BY_NAME[name].check(value) is None, "%s: %s" % (name, BY_NAME[name].check(value))


def test_only_the_settings_role_holds_defaults_of_inventory_variables():
    """One home per value: no role but roles/settings sets a default of an inventory variable."""
    for path in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "**", "*.yml"), recursive=True):
        if "/roles/settings/" in path:
            continue
        names = [n for n in _yaml(os.path.relpath(path, REPO)) if not n.startswith("_")]
        where = os.path.relpath(path, REPO)
        assert names == [], "%s sets %s: move it to roles/settings/defaults/main/" % (where, names)
