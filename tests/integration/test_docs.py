"""Every module and role documents itself: ansible-doc renders each module and each role's
argument spec, and every role variable is documented and has a value (its role's own defaults or
the collection's, roles/settings), so ansible-core can validate it before a role's first task."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest
import yaml
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults as collection_defaults
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
    # roles/settings holds only defaults; its entry point is not main, so loading it validates nothing
    assert doc["entry_points"]["defaults" if role == "settings" else "main"]["options"]


def _yaml(*parts):
    path = os.path.join(REPO, *parts)
    if not os.path.exists(path):
        return {}
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


@pytest.mark.parametrize("role", [r for r in ROLES if r != "settings"])
def test_every_role_variable_is_documented_and_has_a_value(role):
    specs = _yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"]
    documented = set()
    for entry in specs.values():
        documented |= set(entry.get("options", {}))
    own = set(_yaml("roles", role, "defaults", "main.yml"))
    assert own <= documented, "in defaults/main.yml but not in argument_specs: %s" % (own - documented)
    inventory = set(collection_defaults.load())
    main = specs["main"].get("options", {})
    for name, option in main.items():
        if name.startswith("_"):  # an internal role's parameter, set by the calling role (roles/prepare)
            continue
        if option.get("required"):
            assert name in inventory or name in COMPUTED, (
                "%s: required but has no default in roles/settings/defaults/main/" % name
            )
        else:
            assert name in own or name in inventory or "default" in option, "%s has no value" % name
