"""lib.zip (module_utils/supervise/bundle.py, cli.py, tasks.py): the same bytes for the same code, and a module's
work run from it by a Python without Ansible, as the supervisor runs it in the training container."""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import bundle, tasks


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("supervisor") / "lib.zip"
    path.write_bytes(bundle.build(bundle.payload_entries()))
    return str(path)


def test_the_same_code_gives_the_same_bytes():
    entries = bundle.payload_entries()
    assert bundle.build(entries) == bundle.build(dict(reversed(list(entries.items()))))
    changed = dict(entries)
    changed["ansible_collections/mtslime/posttrain/plugins/module_utils/supervise/tick.py"] += b"\n"
    assert bundle.build(changed) != bundle.build(entries)


def test_the_library_holds_every_task_and_no_module_file(library):
    names = zipfile.ZipFile(library).namelist()
    assert "__main__.py" in names and "ansible/module_utils/basic.py" in names
    for task in tasks.TASKS.values():
        assert task.__name__.replace(".", "/") + ".py" in names
    assert not [n for n in names if "/plugins/modules/" in n]
    assert all(info.date_time == bundle.DATE for info in zipfile.ZipFile(library).infolist())


def test_a_task_runs_from_the_library_without_ansible_installed(library, tmp_path):
    """-I: the interpreter ignores PYTHONPATH and user site, so only lib.zip provides ansible."""
    done = subprocess.run([sys.executable, "-I", library, "task", "job_notify"], capture_output=True, text=True,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": {
                              "experiment": "e", "host": "h", "manifest_dir": str(tmp_path),
                              "command": "cat > %s/got.json" % tmp_path,
                              "lost_workers": [{"ip": "10.0.0.2", "since": "2026-12-03T00:00:00Z"}]}}),
                          check=False, cwd=str(tmp_path))
    result = tasks.result_of("job_notify", done.stdout, done.stderr, done.returncode)
    assert result.get("changed") is True, (result, done.stderr[-2000:])
    got = json.loads((tmp_path / "got.json").read_text())
    assert got["event"] == "worker_lost" and got["node"] == "10.0.0.2"


def test_a_task_that_fails_is_a_failed_result_with_its_message(library, tmp_path):
    result = tasks.run(library, "checkpoint_retention", {"save_dir": str(tmp_path), "keep": -1})
    assert result["failed"] and "keep is -1" in result["msg"]


def test_a_task_that_prints_no_result_says_how_it_ended():
    result = tasks.result_of("ray_job", "", "Traceback (most recent call last):\nKeyError: 'x'\n", 1)
    assert result == {"failed": True, "msg": "ray_job ended with rc 1 and no result: Traceback (most recent call "
                                             "last): / KeyError: 'x'"}


def test_an_unknown_command_is_refused_with_the_usage(library):
    done = subprocess.run([sys.executable, "-I", library, "tock", "/x"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage: python3 lib.zip keep DIR | tick DIR | task NAME" in done.stderr


def test_job_supervise_carries_everything_lib_zip_runs():
    """Ansible puts into a module's payload the module_utils its imports reach; job_supervise's payload becomes
    lib.zip, so every file the keeper, a check and each task run must be reached from install.py."""
    from ansible_collections.mtslime.posttrain.plugins.plugin_utils.imports import module_utils_closure

    closure = set(module_utils_closure(["supervise/install.py"]))
    needed = {"supervise/%s.py" % name for name in ("cli", "keeper", "tick", "tasks", "docker_api", "lease", "files")}
    needed |= {task.__name__.split(".module_utils.")[1].replace(".", "/") + ".py" for task in tasks.TASKS.values()}
    assert needed <= closure, sorted(needed - closure)
