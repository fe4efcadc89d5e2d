"""The ssh_docker connection's command line and its reading of sudo / Docker CLI failures, and the
stage target that chooses it."""
from __future__ import annotations

import shlex

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.filter.connection import slime_stage_target
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.connection.container_exec import Wrapper


def test_the_command_runs_in_the_container_through_the_nodes_docker():
    wrapper = Wrapper(container="slime_rl", sudo=True)
    inner = "/bin/sh -c '/usr/bin/python3 && sleep 0'"
    line = wrapper.command(inner)
    assert shlex.split(line) == ["sudo", "-n", "--", "docker", "exec", "-i", "-u", "root", "slime_rl",
                                 "/bin/sh", "-c", inner]
    assert Wrapper(container="c1").argv("true")[:2] == ["docker", "exec"]


def test_a_hostile_container_name_stays_one_word():
    line = Wrapper(container="x; rm -rf / #").command("true")
    assert shlex.split(line)[5] == "x; rm -rf / #"


def test_no_container_is_refused():
    with pytest.raises(ValueError, match="ansible_ssh_docker_container"):
        Wrapper(container="").argv("true")


@pytest.mark.parametrize("stderr, advice", [
    ("sudo: a password is required\n", "passwordless sudo"),
    ("Error response from daemon: No such container: slime_rl\n", "--tags container"),
    ("Error response from daemon: Container 3f2a is not running\n", "container_name"),
    ("permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
     "Get ...: connect: permission denied\n", "docker group"),
    ("bash: line 1: docker: command not found\n", "ansible_ssh_docker_executable"),
    ("sudo: docker: command not found\n", "Docker CLI"),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?\n",
     "systemctl start docker"),
    ("tester is not in the sudoers file.  This incident will be reported.\n", "docker group"),
])
def test_what_the_node_said_is_turned_into_the_setting_to_fix(stderr, advice):
    problem = Wrapper(container="slime_rl", sudo=True).problem(1, b"", stderr.encode())
    assert problem and advice in problem and stderr.strip()[:40] in problem


def test_a_module_that_ran_and_failed_is_not_a_connection_problem():
    wrapper = Wrapper(container="slime_rl")
    assert wrapper.problem(0, b"", b"sudo: a password is required") is None
    assert wrapper.problem(1, b'{"failed": true, "msg": "No such container: in a message"}', b"") is None
    assert wrapper.problem(1, b"Traceback ...\nValueError: x", b"") is None


def node(**changes):
    base = {"name": "n1", "connection": "ssh", "host": "10.0.0.1", "become": True, "python": "/usr/bin/python3",
            "docker_user": "deploy", "docker_extra_args": ""}
    base.update(changes)
    return base


def test_an_ssh_node_keeps_its_ssh_settings_and_runs_the_stages_in_its_container():
    target = slime_stage_target(node(), {"enabled": True, "name": "slime_rl", "python": "python3",
                                         "docker_sudo": "true"})
    assert target == {"connection": "mtslime.posttrain.ssh_docker", "host": "10.0.0.1", "become": False,
                      "python": "python3", "container": "slime_rl", "docker_sudo": True, "docker_user": "root",
                      "docker_extra_args": ""}


def test_a_local_node_keeps_the_docker_connection_of_the_guide():
    for connection in ("local", "ansible.builtin.local", "community.docker.docker"):
        target = slime_stage_target(node(connection=connection),
                                    {"enabled": True, "name": "slime_rl", "docker_sudo": True})
        assert target["connection"] == "community.docker.docker"
        assert target["host"] == "slime_rl" and target["docker_extra_args"] == "" and not target["docker_sudo"]


def test_without_a_container_the_stages_run_on_the_node_as_it_is_reached():
    target = slime_stage_target(node(), {"enabled": "false", "name": "slime_rl"})
    assert target["connection"] == "ssh" and target["host"] == "10.0.0.1" and target["become"] is True
    assert target["python"] == "/usr/bin/python3" and target["container"] == ""


def test_values_are_data_not_yaml():
    tricky = "10.0.0.1\nconnection: local"
    target = slime_stage_target(node(host=tricky), {"enabled": True, "name": "a: b\nhost: evil"})
    assert target["host"] == tricky and target["container"] == "a: b\nhost: evil"
    assert target["connection"] == "mtslime.posttrain.ssh_docker"


@pytest.mark.parametrize("container, match", [
    ({"enabled": True, "name": ""}, "container_name"),
    ({"enabled": "maybe", "name": "x"}, "container_enabled"),
    ({"enabled": True, "name": "x", "docker_sudo": "sometimes"}, "container_docker_sudo"),
])
def test_bad_values_name_the_variable(container, match):
    with pytest.raises(AnsibleFilterError, match=match):
        slime_stage_target(node(), container)


def test_an_unsupported_connection_names_the_fix():
    with pytest.raises(AnsibleFilterError, match="n1: .*ansible_connection is 'winrm'.*container_enabled: false"):
        slime_stage_target(node(connection="winrm"), {"enabled": True, "name": "slime_rl"})


def load_connection(variables):
    """The plugin as ansible-playbook's loader makes it: its documented options registered under its FQCN, the
    name set before __init__ (the tests import the collection from sys.path, so the FQCN search is skipped)."""
    from ansible.playbook.play_context import PlayContext
    from ansible.plugins.loader import connection_loader

    from ansible_collections.mtslime.posttrain.plugins.connection import ssh_docker

    name = "mtslime.posttrain.ssh_docker"
    connection_loader._load_config_defs(name, ssh_docker, ssh_docker.__file__)
    connection = object.__new__(ssh_docker.Connection)
    connection._load_name = name
    connection.__init__(PlayContext(), None)
    connection.set_options(var_options=variables)
    return connection


def test_the_plugin_takes_the_nodes_ssh_settings_and_wraps_every_command(monkeypatch):
    from ansible.plugins.connection import ssh

    connection = load_connection({
        "ansible_host": "10.0.0.7", "ansible_port": 62216, "ansible_user": "deploy",
        "ansible_ssh_private_key_file": "/keys/fleet", "ansible_ssh_common_args": "-o ProxyJump=ops@bastion",
        "ansible_ssh_docker_container": "slime_rl", "ansible_ssh_docker_sudo": True,
    })
    seen = {}

    def fake_run(self, cmd, in_data, sudoable=True, checkrc=True):
        seen["cmd"] = [c.decode() if isinstance(c, bytes) else c for c in cmd]
        seen["in_data"] = in_data
        return 0, b'{"ping": "pong"}', b""

    monkeypatch.setattr(ssh.Connection, "_run", fake_run)
    rc, out, dummy = connection.exec_command("/bin/sh -c 'python3 && sleep 0'", in_data=b"module")
    assert rc == 0 and out == b'{"ping": "pong"}' and seen["in_data"] == b"module"
    argv = " ".join(seen["cmd"])
    for option in ('User="deploy"', "Port=62216", 'IdentityFile="/keys/fleet"', "ProxyJump=ops@bastion"):
        assert option in argv
    assert seen["cmd"][-2] == "10.0.0.7"
    assert shlex.split(seen["cmd"][-1])[:9] == ["sudo", "-n", "--", "docker", "exec", "-i", "-u", "root", "slime_rl"]
    # Action code sees the container's user (for ~ and file modes); ssh logs in as the node's user.
    assert connection.get_option("remote_user") == "root" and connection.user == "deploy"


def test_a_docker_failure_on_the_node_is_an_unreachable_node_with_the_fix(monkeypatch):
    from ansible.errors import AnsibleConnectionFailure
    from ansible.plugins.connection import ssh

    connection = load_connection({"ansible_host": "10.0.0.7", "ansible_user": "deploy",
                                  "ansible_ssh_docker_container": "slime_rl"})
    monkeypatch.setattr(ssh.Connection, "_run",
                        lambda self, cmd, in_data, sudoable=True, checkrc=True:
                        (1, b"", b"Error response from daemon: No such container: slime_rl\n"))
    with pytest.raises(AnsibleConnectionFailure, match="container slime_rl on 10.0.0.7 .*deploy.*--tags container"):
        connection.exec_command("true")


def test_files_move_through_the_container_not_the_nodes_file_system(monkeypatch, tmp_path):
    from ansible.plugins.connection import ssh

    connection = load_connection({"ansible_host": "10.0.0.7", "ansible_ssh_docker_container": "slime_rl"})
    commands = []

    def fake_run(self, cmd, in_data, sudoable=True, checkrc=True):
        commands.append((cmd[-1].decode() if isinstance(cmd[-1], bytes) else cmd[-1], in_data))
        return 0, b"content", b""

    monkeypatch.setattr(ssh.Connection, "_run", fake_run)
    monkeypatch.setattr(ssh.Connection, "_bare_run", lambda *a, **k: pytest.fail("sftp/scp must not be used"))
    source = tmp_path / "in.txt"
    source.write_bytes(b"data")
    connection.put_file(str(source), "/tmp/out.txt")
    connection.fetch_file("/tmp/out.txt", str(tmp_path / "back.txt"))
    assert shlex.split(commands[0][0])[5:7] == ["slime_rl", "/bin/sh"] and "dd of=/tmp/out.txt" in commands[0][0]
    assert commands[0][1] == b"data" and "dd if=/tmp/out.txt" in commands[1][0]
    assert (tmp_path / "back.txt").read_bytes() == b"content"
