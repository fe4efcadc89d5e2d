"""The Ray options (dashboard_url, request_timeout, use_proxy, gcs_address) are declared once: doc fragment
mtslime.posttrain.ray documents them, module_utils/ray/common.py's ray_argument_spec() is their argument spec,
and every module that takes them uses both. The guide's Ray ports are written in common.py only."""
from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible.module_utils import basic

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import common

REPO = Path(__file__).resolve().parents[3]
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")
RAY_OPTIONS = set(common.ray_argument_spec(gcs_address=True))


class Spec(Exception):
    pass


def argument_spec(name, monkeypatch):
    """The argument_spec a module gives AnsibleModule (its main() stopped right there)."""
    module = importlib.import_module("ansible_collections.mtslime.posttrain.plugins.modules." + name)
    if not hasattr(module, "main"):
        return {}  # the documentation of an action plugin

    def capture(self, *args, **kwargs):
        raise Spec(kwargs.get("argument_spec") or args[0])

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    try:
        module.main()
    except Spec as spec:
        return spec.args[0]
    raise AssertionError("%s: main() did not build an AnsibleModule" % name)


@functools.cache
def rendered():
    """Every module's documentation as ansible-doc renders it, doc fragments merged."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / "collections"))
    out = subprocess.run(
        ["ansible-doc", "-t", "module", "--json"] + ["mtslime.posttrain." + m for m in MODULES],
        capture_output=True, text=True, check=True, env=env,
    ).stdout
    return {name.rsplit(".", 1)[1]: value["doc"] for name, value in json.loads(out).items()}


def own_documentation(name):
    """A module's DOCUMENTATION as written, before the fragments are merged."""
    source = (REPO / "plugins" / "modules" / (name + ".py")).read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "DOCUMENTATION":
            return yaml.safe_load(node.value.value)
    return {}


@pytest.mark.parametrize("name", MODULES)
def test_a_module_with_ray_options_takes_them_from_the_fragment_and_the_spec(name, monkeypatch):
    spec = argument_spec(name, monkeypatch)
    documented = rendered()[name].get("options") or {}
    shared = RAY_OPTIONS & (set(spec) | set(documented))
    if name in ("job_first_step",):  # an action plugin: the documented options are passed on to ray_job
        assert set(documented) >= set(common.ray_argument_spec())
        return
    if not shared or name == "ray_start" and shared == {"gcs_address"}:
        return
    fragments = own_documentation(name).get("extends_documentation_fragment") or []
    assert "mtslime.posttrain.ray" in fragments, "%s: add doc fragment mtslime.posttrain.ray" % name
    expected = common.ray_argument_spec(
        request_timeout=spec["request_timeout"]["default"],
        gcs_address="mtslime.posttrain.ray.GCS" in fragments,
    )
    for option, value in expected.items():
        assert spec.get(option) == value, "%s: %s must come from ray_argument_spec()" % (name, option)
        assert documented[option]["default"] == value["default"], "%s: %s: documented default" % (name, option)
        assert documented[option]["type"] == value["type"]
    # the module's own DOCUMENTATION restates nothing but a request_timeout default of its own
    own = own_documentation(name).get("options") or {}
    for option in RAY_OPTIONS & set(own):
        if name == "ray_start" and option == "gcs_address":
            continue  # required there (the head to join), so not the fragment's defaulted option
        assert option == "request_timeout" and set(own[option]) == {"default"}, (
            "%s: %s is declared again; the doc fragment mtslime.posttrain.ray documents it" % (name, option)
        )


def test_the_fragment_renders_the_defaults_of_the_spec():
    options = rendered()["ray_cluster"]["options"]
    assert options["dashboard_url"]["default"] == "http://127.0.0.1:%d" % common.DASHBOARD_PORT
    assert options["gcs_address"]["default"] == "127.0.0.1:%d" % common.GCS_PORT
    assert rendered()["ray_job"]["options"]["request_timeout"]["default"] == 30


PORT = re.compile(r"\b(%d|%d)\b" % (common.DASHBOARD_PORT, common.GCS_PORT))
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def literal_ports(path):
    """(line, text) of every number or string of a Python file that writes a guide port, apart from docstrings
    and a module's DOCUMENTATION/EXAMPLES/RETURN (prose and samples)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.add(id(body[0].value))
        if isinstance(node, ast.Assign) and {getattr(t, "id", None) for t in node.targets} & DOC_NAMES:
            skip.add(id(node.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip and PORT.search(str(node.value)):
            found.append((node.lineno, str(node.value)[:80]))
    return found


def test_no_file_of_the_collection_writes_the_ray_ports_but_common():
    home = REPO / "plugins" / "module_utils" / "ray" / "common.py"
    offenders = {}
    for path in sorted((REPO / "plugins").rglob("*.py")):
        if path != home and literal_ports(path):
            offenders[str(path.relative_to(REPO))] = literal_ports(path)
    assert offenders == {}, "use the constants of module_utils/ray/common.py"
    assert literal_ports(home), "common.py is where the ports are written"
