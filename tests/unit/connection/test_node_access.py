"""mtslime.posttrain.node_access: the first play's probe of the login user's Docker rights."""
from __future__ import annotations

import os
import stat

from ansible_collections.mtslime.posttrain.plugins.modules import node_access


def fake_docker(tmp_path, body):
    path = tmp_path / "docker"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_user_who_can_use_docker(run_module, tmp_path):
    docker = fake_docker(tmp_path, 'echo "$@" > %s/args; echo 20.10.24' % tmp_path)
    result, failed = run_module(node_access, {"docker": {"required": True, "executable": docker}}, check_mode=True)
    assert not failed and not result["changed"]
    assert result["docker"]["ok"] and result["docker"]["stdout"] == "20.10.24"
    assert (tmp_path / "args").read_text().split() == ["version", "--format", "{{.Server.Version}}"]
    assert result["user"] and result["python"].count(".") == 2


def test_permission_denied_is_reported_not_failed(run_module, tmp_path):
    docker = fake_docker(tmp_path, "echo 'permission denied while trying to connect to the Docker daemon socket' >&2; "
                                   "exit 1")
    result, failed = run_module(node_access, {"docker": {"required": True, "executable": docker}})
    assert not failed
    assert result["docker"]["ok"] is False and result["docker"]["rc"] == 1
    assert "permission denied" in result["docker"]["stderr"]


def test_sudo_is_used_when_asked(run_module, tmp_path, monkeypatch):
    sudo = fake_docker(tmp_path, 'printf "%%s " "$@" > %s/sudo-args; echo "sudo: a password is required" >&2; exit 1'
                       % tmp_path)
    os.rename(sudo, str(tmp_path / "sudo"))
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    result, failed = run_module(node_access, {"docker": {"required": True, "sudo": True}})
    assert not failed and result["docker"]["cmd"][:4] == ["sudo", "-n", "--", "docker"]
    assert (tmp_path / "sudo-args").read_text().split()[:3] == ["-n", "--", "docker"]
    assert result["docker"]["stderr"] == "sudo: a password is required"


def test_a_missing_cli_and_a_hanging_engine(run_module, tmp_path):
    result, dummy = run_module(node_access, {"docker": {"required": True, "executable": str(tmp_path / "nope")}})
    assert result["docker"]["stderr"].endswith("command not found") and not result["docker"]["ok"]
    slow = fake_docker(tmp_path, "sleep 5")
    result, dummy = run_module(node_access, {"docker": {"required": True, "executable": slow, "timeout": 1}})
    assert "no answer within 1 s" in result["docker"]["stderr"]


def test_nothing_is_probed_when_no_container_is_managed(run_module):
    result, failed = run_module(node_access, {})
    assert not failed and result["docker"] == {"required": False, "ok": True, "sudo": False, "cmd": [], "rc": None,
                                               "stdout": "", "stderr": "", "container_state": ""}


def test_the_training_container_s_state_is_reported_for_the_fast_path(run_module, tmp_path):
    docker = fake_docker(tmp_path, 'case "$1" in version) echo 24.0.7;; container) echo "$@" > %s/args; '
                                   'case "$5" in slime_rl) echo running;; *) echo "Error: No such container: $5" >&2; '
                                   'exit 1;; esac;; esac' % tmp_path)
    result, failed = run_module(node_access, {"docker": {"executable": docker, "container": "slime_rl"}})
    assert not failed and result["docker"]["container_state"] == "running"
    assert (tmp_path / "args").read_text().split() == ["container", "inspect", "--format", "{{.State.Status}}",
                                                       "slime_rl"]
    result, _failed = run_module(node_access,
                                 {"docker": {"required": True, "executable": docker, "container": "other"}})
    assert result["docker"]["ok"] and result["docker"]["container_state"] == "absent"
    result, _failed = run_module(node_access,
                                 {"docker": {"executable": str(tmp_path / "none"), "container": "slime_rl"}})
    assert result["docker"]["container_state"] == "unknown"
    result, _failed = run_module(node_access, {"docker": {"executable": docker}})
    assert result["docker"]["container_state"] == ""
