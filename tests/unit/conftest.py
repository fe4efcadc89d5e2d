"""Helpers to run a module's main() in-process and capture its result."""
from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from fake_ray import FakeGcs, FakeRay
from ansible.module_utils.testing import patch_module_args


class ModuleExit(Exception):
    def __init__(self, result, failed):
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs, failed=False)


def _fail_json(self, msg, **kwargs):
    kwargs["msg"] = msg
    kwargs["failed"] = True
    raise ModuleExit(kwargs, failed=True)


@pytest.fixture
def run_module(monkeypatch):
    """run_module(module, args, check_mode=False, diff=False) -> (result, failed).

    Runs `module.main()` with `args` as the task arguments, the way Ansible would,
    and returns the dict passed to exit_json/fail_json."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def runner(module, args, check_mode=False, diff=False):
        full = dict(args)
        full["_ansible_check_mode"] = check_mode
        full["_ansible_diff"] = diff
        with patch_module_args(full):
            try:
                module.main()
            except ModuleExit as done:
                json.dumps(done.result, default=str)  # results must be serialisable
                return done.result, done.failed
        raise AssertionError("module returned without exit_json/fail_json")

    return runner


@pytest.fixture
def fake():
    """A fake Ray dashboard/Jobs API on a free loopback port (fake_ray.py)."""
    server = FakeRay()
    yield server
    server.close()


@pytest.fixture
def gcs():
    """A fake Ray GCS port (fake_ray.py)."""
    server = FakeGcs()
    yield server
    server.close()
