"""job_supervise (module_utils/supervise/install.py), run as Ansible runs it: lib.zip and config.json written
once (0644, 0600), unchanged on a rerun, predicted under check mode; disabling under the job's lease; bad
values refused naming the option."""
from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.mtslime.posttrain.plugins.modules import job_supervise
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import files, lease


def args(directory, **extra):
    return dict({"directory": str(directory), "role": "head", "interval": 30, "ray_start": {"role": "head"},
                 "ray_job": {"experiment": "e"}, "job_notify": {"webhooks": ["https://hooks.example/secret"]}},
                **extra)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_enable_writes_once_then_changes_nothing(run_module, tmp_path):
    directory = tmp_path / "supervisor"
    predicted, failed = run_module(job_supervise, args(directory), check_mode=True)
    assert not failed and predicted["changed"] and not directory.exists()
    assert [a.split(" (")[0] for a in predicted["actions"]] == [
        "would write %s" % (directory / files.LIBRARY), "would write %s" % (directory / files.CONFIG)]
    done, failed = run_module(job_supervise, args(directory))
    assert not failed and done["changed"]
    assert mode(directory / files.CONFIG) == 0o600 and mode(directory / files.LIBRARY) == 0o644
    config = json.loads((directory / files.CONFIG).read_text())
    assert config["enabled"] is True and config["interval"] == 30 and config["ray_job"] == {"experiment": "e"}
    again, failed = run_module(job_supervise, args(directory))
    assert not failed and not again["changed"] and again["library_sha256"] == done["library_sha256"]
    changed, dummy = run_module(job_supervise, args(directory, interval=60))
    assert changed["changed"] and changed["actions"] == [
        "wrote %s (supervision settings changed)" % (directory / files.CONFIG)]


def test_disable_turns_checks_off_under_the_lease_and_is_idempotent(run_module, tmp_path):
    run_module(job_supervise, args(tmp_path))
    done, failed = run_module(job_supervise, {"directory": str(tmp_path), "state": "disabled"})
    assert not failed and done["changed"]
    assert json.loads((tmp_path / files.CONFIG).read_text())["enabled"] is False
    assert not (tmp_path / files.LEASE).exists()
    again, dummy = run_module(job_supervise, {"directory": str(tmp_path), "state": "disabled"})
    assert not again["changed"]


def test_disable_waits_for_a_check_and_names_it(run_module, tmp_path):
    run_module(job_supervise, args(tmp_path))
    lease.take(str(tmp_path / files.LEASE), "supervisor", "a supervisor check", wait=0)
    result, failed = run_module(job_supervise, {"directory": str(tmp_path), "state": "disabled", "lease_wait": 0})
    assert failed and "held by supervisor" in result["msg"] and "lease_wait (0 s)" in result["msg"]
    assert json.loads((tmp_path / files.CONFIG).read_text())["enabled"] is True


def test_disable_without_configuration_does_nothing(run_module, tmp_path):
    result, failed = run_module(job_supervise, {"directory": str(tmp_path), "state": "disabled"})
    assert not failed and not result["changed"] and not os.listdir(tmp_path)


@pytest.mark.parametrize("bad, message", [
    ({"interval": 2}, "interval is 2 s (train_job_supervise_interval); give 5 or more"),
    ({"ray_job": None}, "the head's supervisor needs ray_job"),
    ({"directory": "relative/dir"}, "directory relative/dir is relative"),
])
def test_bad_values_are_refused_naming_them(run_module, tmp_path, bad, message):
    result, failed = run_module(job_supervise, dict(args(tmp_path), **bad))
    assert failed and message in result["msg"]
    assert not (tmp_path / files.CONFIG).exists()


def test_a_run_without_the_ray_stage_keeps_the_ray_start_configured_before(run_module, tmp_path):
    run_module(job_supervise, args(tmp_path, ray_start={"role": "head", "gcs_address": "10.0.0.1:6379"}))
    without = args(tmp_path)
    without.pop("ray_start")
    result, failed = run_module(job_supervise, without)
    assert not failed and not result["changed"]
    assert json.loads((tmp_path / files.CONFIG).read_text())["ray_start"]["gcs_address"] == "10.0.0.1:6379"
