"""The first play's message for a node that cannot be reached or used: it names the host, where it
was reached, and the inventory setting to fix."""
from __future__ import annotations

import pytest

from ansible_collections.mtslime.posttrain.plugins.filter.connection import slime_access_problem

NODE = {"name": "gpu-07", "host": "10.0.0.7", "port": "62216", "user": "deploy",
        "private_key_file": "~/.ssh/fleet", "ssh_common_args": "", "python": "/usr/bin/python3"}


def unreachable(msg):
    return {"unreachable": True, "changed": False, "msg": "Task failed: Failed to connect to the host via ssh: " + msg}


@pytest.mark.parametrize("ssh_said, expected", [
    ("ssh: connect to host 10.0.0.7 port 62216: Connection refused", "ansible_port (now 62216)"),
    ("ssh: connect to host 10.0.0.7 port 62216: Connection timed out", "check ansible_host and ansible_port"),
    ("ssh: connect to host 10.0.0.7 port 62216: No route to host", "ProxyJump"),
    ("ssh: Could not resolve hostname gpu-07.example: Name or service not known", "fix ansible_host"),
    ("deploy@10.0.0.7: Permission denied (publickey).", "ansible_ssh_private_key_file (now ~/.ssh/fleet)"),
    ("@@@@@@@@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n...\r\n"
     "Host key verification failed.", "ssh-keygen -R '[10.0.0.7]:62216'"),
    ("Warning: Identity file ~/.ssh/fleet not accessible: No such file or directory.\r\nno such identity",
     "does not exist on the controller"),
    ("@ WARNING: UNPROTECTED PRIVATE KEY FILE! @ ... bad permissions", "chmod 600 ~/.ssh/fleet"),
    ("kex_exchange_identification: read: Connection reset by peer", "sshd log"),
    ("something nobody has seen", "check ansible_host, ansible_port, ansible_user"),
])
def test_each_ssh_failure_names_the_host_and_the_setting(ssh_said, expected):
    message = slime_access_problem(unreachable(ssh_said), NODE)
    assert message.startswith("gpu-07 (deploy@10.0.0.7:62216): cannot connect over SSH: ")
    assert expected in message
    assert "Task failed" not in message


def test_a_failing_jump_host_is_named_as_such():
    node = dict(NODE, ssh_common_args="-o ProxyJump=ops@bastion.example:22")
    message = slime_access_problem(unreachable(
        "ssh: connect to host 192.0.2.9 port 22: Connection refused\r\nConnection closed by UNKNOWN port 65535"), node)
    assert "the jump host ops@bastion.example:22 refused" in message and "ansible_ssh_common_args" in message
    message = slime_access_problem(unreachable("Connection closed by UNKNOWN port 65535"), node)
    assert "through the jump host ops@bastion.example:22" in message


def docker(rc, stderr, sudo=True):
    return {"changed": False, "user": "deploy", "docker": {"required": True, "ok": False, "sudo": sudo,
                                                           "cmd": ["sudo", "-n", "--", "docker", "version"],
                                                           "rc": rc, "stdout": "", "stderr": stderr}}


def test_a_user_without_docker_rights_is_told_about_the_group_and_become():
    message = slime_access_problem(docker(1, "permission denied while trying to connect to the Docker daemon "
                                             "socket at unix:///var/run/docker.sock", sudo=False), NODE)
    assert message.startswith("gpu-07 (deploy@10.0.0.7:62216): the training container is managed through")
    assert "docker group" in message and "ansible_become: true" in message


def test_sudo_that_wants_a_password_is_named():
    message = slime_access_problem(docker(1, "sudo: a password is required"), NODE)
    assert "with sudo -n (container_docker_sudo)" in message and "NOPASSWD" in message


def test_an_unknown_docker_failure_shows_the_command():
    message = slime_access_problem(docker(3, "weird"), NODE)
    assert "`sudo -n -- docker version` failed with rc 3: weird" in message


def test_a_failed_probe_names_the_interpreter_or_become():
    missing = {"failed": True, "msg": "The module failed to execute correctly, you probably need to set the "
               "interpreter.", "module_stderr": "/bin/sh: 1: /usr/bin/python3: not found"}
    assert "ansible_python_interpreter (now /usr/bin/python3)" in slime_access_problem(missing, NODE)
    become = {"failed": True, "msg": "Task failed: Missing sudo password"}
    assert "ansible_become_password" in slime_access_problem(become, NODE)


def test_a_node_that_answers_is_fine():
    assert slime_access_problem({"changed": False, "user": "deploy",
                                 "docker": {"required": True, "ok": True}}, NODE) == ""
    assert slime_access_problem({"changed": False, "docker": {"required": False, "ok": True}}, NODE) == ""
    assert slime_access_problem({"skipped": True}, NODE) == ""
