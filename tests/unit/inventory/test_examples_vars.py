"""Every variable a module's EXAMPLES template names exists: an inventory variable (the default inventory, a
role's defaults or vars, the schema in plugins/plugin_utils/inventory/variables.py), a fact the plays compute, a
result some play or role registers or sets, a result registered earlier in the same EXAMPLES, or one of
Ansible's own variables. An example that names a variable nobody sets cannot be copied."""
from __future__ import annotations

import glob
import os
import re

import pytest
import yaml

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import BY_NAME, COMPUTED

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py")))
ANSIBLE = {"inventory_hostname", "ansible_host", "ansible_become", "groups", "hostvars", "omit", "item",
           "playbook_dir", "ansible_facts", "lookup", "query", "now"}
# Jinja words, tests and filters that look like names inside an expression.
JINJA = {"true", "false", "none", "and", "or", "not", "in", "is", "if", "else", "defined", "undefined",
         "default", "int", "bool", "string", "list", "length", "join", "map", "select", "selectattr", "first",
         "last", "b64decode", "from_yaml", "from_json", "to_json", "combine", "quote", "succeeded", "failed",
         "extract", "sum", "values", "items", "keys"}


def _yaml_docs():
    for path in glob.glob(os.path.join(REPO, "playbooks", "**", "*.yml"), recursive=True) + glob.glob(
            os.path.join(REPO, "roles", "*", "tasks", "*.yml")) + glob.glob(
            os.path.join(REPO, "roles", "*", "handlers", "*.yml")):
        with open(path) as handle:
            yield yaml.safe_load(handle)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def known_names():
    names = set(BY_NAME) | set(COMPUTED) | ANSIBLE
    for path in glob.glob(os.path.join(REPO, "roles", "settings", "defaults", "main", "*.yml")) + glob.glob(
            os.path.join(REPO, "roles", "*", "defaults", "main.yml")) + glob.glob(
            os.path.join(REPO, "roles", "*", "vars", "main.yml")):
        with open(path) as handle:
            names |= set(yaml.safe_load(handle) or {})
    for doc in _yaml_docs():
        for task in _walk(doc):
            if isinstance(task.get("register"), str):
                names.add(task["register"])
            for key in ("ansible.builtin.set_fact", "set_fact"):
                if isinstance(task.get(key), dict):
                    names |= set(task[key])
    return names


KNOWN = known_names()


def examples(module):
    with open(os.path.join(REPO, "plugins", "modules", module + ".py")) as handle:
        match = re.search(r'^EXAMPLES = r"""(.*?)"""', handle.read(), re.S | re.M)
    assert match, "%s has no EXAMPLES" % module
    return match.group(1)


def unknown_names(text):
    registered = set(re.findall(r"^\s*register:\s*(\w+)", text, re.M))
    found = []
    for expression in re.findall(r"\{\{(.*?)\}\}", text, re.S):
        bare = re.sub(r"'[^']*'|\"[^\"]*\"", "''", expression)
        bare = re.sub(r"\|\s*[\w.]+", "|", bare)  # filter names (mtslime.posttrain.x) are not variables
        for name in re.findall(r"(?<![\w.])([A-Za-z_]\w*)", bare):
            if name not in KNOWN and name not in JINJA and name not in registered and name not in found:
                found.append(name)
    return found


def test_unknown_names_are_found():
    text = (
        '- x:\n    a: "{{ slime_head_ip }}:{{ ray_gcs_port }}"\n  register: r\n'
        '- y:\n    b: "{{ r.x | default(\'z\') }}"\n'
        '- z:\n    c: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"\n'
    )
    assert unknown_names(text) == ["slime_head_ip"]


@pytest.mark.parametrize("module", MODULES)
def test_examples_name_only_variables_that_exist(module):
    assert unknown_names(examples(module)) == [], "%s EXAMPLES name variables that nothing sets" % module
