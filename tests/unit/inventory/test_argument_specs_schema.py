"""The roles' meta/argument_specs.yml and the inventory schema (plugins/plugin_utils/inventory/variables.py) agree:
every option is in the schema (or computed by the plays), with the same type, elements and choices, and every
default (argument spec, role defaults, default inventory) passes the schema's check."""
from __future__ import annotations

import glob
import os

import pytest
import yaml

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


@pytest.mark.parametrize("role", ROLES)
def test_role_defaults_pass_the_schema(role):
    path = os.path.join("roles", role, "defaults", "main.yml")
    for name, value in _yaml(path).items():
        if name.startswith("_"):  # an internal role's parameter (see role_options)
            continue
        assert name in BY_NAME, "%s (%s) is not in the schema" % (name, path)
        if not is_template(value) and not (isinstance(value, list) and any(is_template(v) for v in value)):
            assert BY_NAME[name].check(value) is None, "%s: %s" % (name, BY_NAME[name].check(value))


def test_schema_defaults_agree_with_the_files():
    """A Var's documented default (for a role not merged yet) is the one its role sets, once it does."""
    files = {}
    for path in glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")) + glob.glob(
            os.path.join(REPO, "inventory", "group_vars", "all", "*.yml")):
        with open(path) as handle:
            files.update(yaml.safe_load(handle) or {})
    for name, var in BY_NAME.items():
        if var.has_default and name in files:
            assert files[name] == var.default, "%s: the files say %r, the schema %r" % (name, files[name], var.default)
        if var.has_default:
            assert var.check(var.default) is None, name
