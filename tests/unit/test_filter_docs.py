"""Every filter of plugins/filter/*.py has its documentation, plugins/filter/<name>.yml (what ansible-doc reads),
naming it and documenting exactly its parameters; its examples are taken from the collection's roles and
playbooks. tests/collection-build renders the same files with ansible-doc from the installed collection."""
from __future__ import annotations

import functools
import importlib
import inspect
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FILTER_DIR = REPO / "plugins" / "filter"


def _filters():
    """{filter name: function}, from each plugin's FilterModule().filters()."""
    found = {}
    for path in sorted(FILTER_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        plugin = importlib.import_module("ansible_collections.mtslime.posttrain.plugins.filter." + path.stem)
        for name, function in plugin.FilterModule().filters().items():
            assert name not in found, "filter %s is defined twice (%s)" % (name, path.name)
            found[name] = function
    return found


FILTERS = _filters()


def _doc(name):
    path = FILTER_DIR / ("%s.yml" % name)
    assert path.is_file(), "filter %s has no documentation: write plugins/filter/%s.yml" % (name, name)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@functools.cache
def _usage_lines():
    """Every stripped line of the roles and playbooks (where the examples come from)."""
    lines = set()
    for top in ("roles", "playbooks"):
        for path in (REPO / top).rglob("*"):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2"):
                lines.update(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return lines


def test_the_plugins_define_filters():
    assert len(FILTERS) >= 25 and "slime_argv" in FILTERS and "ray_dashboard_url" in FILTERS


def test_every_doc_file_belongs_to_a_filter():
    docs = {path.stem for path in FILTER_DIR.glob("*.yml")}
    assert docs - set(FILTERS) == set(), "doc files without a filter"


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_doc_names_the_filter_and_has_every_part(name):
    doc = _doc(name)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    documentation = doc["DOCUMENTATION"]
    assert documentation["name"] == name
    assert documentation["short_description"] and documentation["description"]
    assert documentation["author"] == ["mtslime.posttrain contributors"]
    assert documentation["version_added"] in ("0.1.0", "0.2.0")
    assert "mtslime.posttrain.%s" % name in doc["EXAMPLES"]
    assert doc["RETURN"]["_value"]["description"] and doc["RETURN"]["_value"]["type"]


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_doc_documents_exactly_the_parameters(name):
    """_input is the piped value; every other parameter is an option of its own name, in the signature's order,
    required exactly when it has no default, with the function's default."""
    documentation = _doc(name)["DOCUMENTATION"]
    parameters = list(inspect.signature(FILTERS[name]).parameters.values())
    expected = ["_input"] + [p.name for p in parameters[1:]]
    assert [part.strip() for part in documentation["positional"].split(",")] == expected
    options = documentation["options"]
    assert list(options) == expected, "options must be the parameters, _input first, in order"
    for parameter, option in zip(parameters, expected):
        spec = options[option]
        assert spec.get("description") and spec.get("type"), "%s: %s needs a description and a type" % (name, option)
        has_default = parameter.default is not inspect.Parameter.empty
        assert bool(spec.get("required")) is not has_default, "%s: %s required is wrong" % (name, option)
        if has_default and parameter.default is not None:
            default = parameter.default
            assert spec.get("default") == (list(default) if isinstance(default, tuple) else default), (name, option)
        elif has_default:
            assert spec.get("default") is None, (name, option)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_examples_are_the_collections_own_usage(name):
    """The examples are lines of the roles and playbooks: every line but comments (which name the file, or show a
    result with the filter's short name), and every line that calls the filter by its full name."""
    usage = _usage_lines()
    lines = [line.strip() for line in _doc(name)["EXAMPLES"].splitlines() if line.strip()]
    calls = [line for line in lines if "mtslime.posttrain.%s" % name in line]
    assert calls, "%s: no example calls the filter" % name
    assert [line for line in lines if (line in calls or not line.startswith("#")) and line not in usage] == []
