"""Whether a process is Ray's (module_utils/ray/processes.py), the one rule of the preflight's port check and the
Ray node probe, over real Ray command lines and a fake /proc."""
from __future__ import annotations

import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import processes


@pytest.mark.parametrize(
    "args,comm,ray",
    [
        (
            ["/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/gcs/gcs_server", "--log_dir=/tmp/ray"],
            "gcs_server",
            True,
        ),
        (
            ["/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet", "--raylet_socket_name=x"],
            "raylet",
            True,
        ),
        (
            [
                "/usr/bin/python3",
                "-u",
                "/usr/local/lib/python3.10/dist-packages/ray/dashboard/dashboard.py",
                "--host=0.0.0.0",
                "--port=8772",
            ],
            "python3",
            True,
        ),
        (["/usr/bin/python3", "-u", "/opt/conda/lib/python3.10/site-packages/ray/dashboard/agent.py"], "python3", True),
        (["ray::RolloutManager.generate"], "ray::RolloutMan", True),
        (["ray::IDLE"], "ray::IDLE", True),
        (["python3", "-m", "http.server", "8772"], "python3", False),
        # a log reader names Ray's programs but is not Ray (the node probe's former substring rule said it was)
        (["tail", "-f", "/tmp/ray/session_latest/logs/gcs_server.out"], "tail", False),
        (["/usr/sbin/sshd", "-D"], "sshd", False),
        (["grafana-server", "--homepath=/usr/share/grafana", "dashboard"], "grafana", False),
        ([], "", False),
    ],
)
def test_is_ray(args, comm, ray):
    assert processes.is_ray(args, comm) is ray


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(text.encode())


def test_ray_processes_walks_proc_with_the_same_rule(tmp_path):
    proc = str(tmp_path)
    write(proc + "/101/cmdline", "/opt/ray/core/src/ray/gcs/gcs_server\0--log_dir=/tmp/ray\0")
    write(proc + "/102/cmdline", "/usr/bin/python3\0-m\0http.server\08772\0")
    write(proc + "/103/cmdline", "")  # a zombie or kernel thread: no command line, not counted
    write(proc + "/103/comm", "ray::IDLE\n")
    # a shell that only names Ray's programs in its arguments is not Ray
    write(proc + "/104/cmdline", "pgrep\0-f\0gcs_server|raylet\0")
    write(proc + "/105/cmdline", "/usr/bin/python3\0-u\0/usr/lib/python3/dist-packages/ray/dashboard/agent.py\0")
    write(proc + "/106/cmdline", "/usr/bin/python3\0-u\0/usr/lib/python3/dist-packages/ray/dashboard/agent.py\0")
    write(proc + "/self/cmdline", "ray::self")
    found = processes.ray_processes(proc, me=106)
    assert [pid for pid, _ in found] == [101, 105]
    assert found[0][1] == "/opt/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp/ray"
    assert processes.ray_processes(str(tmp_path / "none")) == []
