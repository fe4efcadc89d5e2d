# The collection's defaults of the inventory variables: the role defaults of mtslime.posttrain.settings
# (roles/settings/defaults/main/<topic>.yml), which every play loads and the archive carries. Inventory values
# override them (role defaults rank lowest). The configuration check, the messages that say where a value comes
# from, the filters that read another node's value and the generated docs and argument specs read them here.
from __future__ import annotations

import glob
import os

import yaml

ROLE = "settings"
# roles/settings/defaults/main/, from plugins/plugin_utils/inventory/ (the repository or the installed collection).
DIRECTORY = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))), "roles", ROLE, "defaults", "main")
LABEL = "roles/%s/defaults/main/" % ROLE
_CACHE: dict = {}


def files():
    """The topic files, in the order Ansible reads them (sorted by name)."""
    return sorted(glob.glob(os.path.join(DIRECTORY, "*.yml")))


def load(loader=None):
    """{variable: raw value}. With Ansible's DataLoader the values carry their file and line (Origin tags)."""
    key = "tagged" if loader is not None else "plain"
    if key not in _CACHE:
        values = {}
        for path in files():
            if loader is not None:
                data = loader.load_from_file(path)
            else:
                with open(path, encoding="utf-8") as handle:
                    data = yaml.safe_load(handle)
            values.update(data or {})
        _CACHE[key] = values
    return _CACHE[key]


def sources():
    """{variable: the topic file that sets it, relative to the collection root}."""
    found = {}
    for path in files():
        with open(path, encoding="utf-8") as handle:
            for name in yaml.safe_load(handle) or {}:
                found[name] = LABEL + os.path.basename(path)
    return found


def is_template(value):
    """A default that Ansible templates (it refers to other variables)."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(is_template(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(is_template(v) for v in value)
    return False


def node_value(hostvars, node, name):
    """Another node's value of `name`: its inventory value, else the collection's default. `hostvars` holds only
    inventory values and facts (no role defaults), so a filter that compares nodes reads their values here."""
    view = hostvars[node]
    if name in view:
        return view[name]
    default = load().get(name)
    if is_template(default):
        raise ValueError("the default of %s (%s) is a template, which cannot be read for another node" % (
            name, LABEL))
    return default
