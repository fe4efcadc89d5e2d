"""meta/execution-environment.yml (ansible-builder) installs what pyproject.toml pins for the controller, and its
requirement files are found both relative to meta/ (ansible-builder create) and relative to the collection root
(ansible-builder's introspection of an installed collection)."""

import os
import tomllib

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    with open(os.path.join(REPO, "meta", "execution-environment.yml"), encoding="utf-8") as handle:
        return project, yaml.safe_load(handle)


def requirement_lines(path):
    with open(path, encoding="utf-8") as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith("#")]


def test_python_requirements_are_the_controller_dependencies():
    project, ee = load()
    assert ee["version"] == 3
    assert requirement_lines(os.path.join(REPO, "meta", ee["dependencies"]["python"])) == project["dependencies"]


def test_ansible_core_and_runner_are_pyproject_pins():
    project, ee = load()
    core = [dep for dep in project["dependencies"] if dep.startswith("ansible-core")]
    runner = [dep for dep in project["optional-dependencies"]["test"] if dep.startswith("ansible-runner")]
    assert [ee["dependencies"]["ansible_core"]["package_pip"]] == core
    assert [ee["dependencies"]["ansible_runner"]["package_pip"]] == runner


def test_requirement_files_resolve_from_meta_and_from_the_collection_root():
    dependencies = load()[1]["dependencies"]
    for key in ("python", "system"):
        from_meta = os.path.join(REPO, "meta", dependencies[key])
        from_root = os.path.join(REPO, dependencies[key])
        assert os.path.isfile(from_meta) and os.path.exists(from_root), key
        assert os.path.samefile(from_meta, from_root), "%s: %s and %s differ" % (key, from_meta, from_root)
