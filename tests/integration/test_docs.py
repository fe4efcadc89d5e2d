"""Every module and role documents itself: ansible-doc renders each module and each role's
argument spec, and every role variable is documented and has a value (role defaults or
the default inventory), so ansible-core can validate it before a role's first task."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import COMPUTED

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py")))
ROLES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "roles", "*")))
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))


def ansible_doc(*args):
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "--json", *args], capture_output=True, text=True,
                          env=ENV, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("module", MODULES)
def test_module_documentation_renders(module):
    doc = ansible_doc("mtslime.posttrain.%s" % module)["mtslime.posttrain.%s" % module]
    assert doc["doc"]["short_description"] and doc["examples"] and doc["return"] is not None
    assert "check_mode" in doc["doc"].get("attributes", {}), "check mode support is documented"


@pytest.mark.parametrize("role", ROLES)
def test_role_argument_spec_renders(role):
    doc = ansible_doc("-t", "role", "mtslime.posttrain.%s" % role)["mtslime.posttrain.%s" % role]
    assert doc["entry_points"]["main"]["options"]


def _yaml(*parts):
    path = os.path.join(REPO, *parts)
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def inventory_values():
    values = {}
    for path in glob.glob(os.path.join(REPO, "inventory", "group_vars", "all", "*.yml")):
        with open(path) as handle:
            values.update(yaml.safe_load(handle) or {})
    return values


@pytest.mark.parametrize("role", ROLES)
def test_every_role_variable_is_documented_and_has_a_value(role):
    specs = _yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"]
    documented = set()
    for entry in specs.values():
        documented |= set(entry.get("options", {}))
    defaults = set(_yaml("roles", role, "defaults", "main.yml"))
    assert defaults <= documented, "in defaults/main.yml but not in argument_specs: %s" % (defaults - documented)
    inventory = set(inventory_values())
    main = specs["main"].get("options", {})
    for name, option in main.items():
        if name.startswith("_"):  # an internal role's parameter, set by the calling role (roles/prepare)
            continue
        if option.get("required"):
            assert name in inventory or name in COMPUTED, (
                "%s: required but not in the default inventory" % name
            )
        else:
            assert name in defaults or name in inventory or "default" in option, "%s has no value" % name
