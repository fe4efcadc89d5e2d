#!/usr/bin/env python
"""What each way of reaching a training container on an SSH node costs, per module call.

One SSH node (the ssh-node test image: sshd, sudo, the Docker CLI on this machine's engine) with a
training container (training-suite image) in its network namespace, and the same play of CALLS no-op
module calls (`ansible.builtin.ping`) plus one `ansible.builtin.template` (a file transfer), each measured
run starting without an SSH master (after a warm-up run), through:

  node       ansible.builtin.ssh to the node itself (the floor: what a module call over SSH costs)
  ssh_docker mtslime.posttrain.ssh_docker: the node's SSH connection, `sudo -n docker exec -i` on the node
  python     ansible.builtin.ssh with ansible_python_interpreter = a script on the node that runs
             `sudo -n docker exec -i <c> python3 "$@"`
  docker_ssh community.docker.docker with DOCKER_HOST=ssh://<alias> and an SSH config generated from
             the inventory (Port, User, IdentityFile, ControlMaster), the docker CLI on the controller
  docker_ssh_nomux  the same without ControlMaster (the Docker CLI's ssh:// transport as it comes)

For each: wall time of the play, per module call, the SSH connections (sshd's "Accepted publickey") and
sessions ("Starting session") the node saw, and whether the file transfer worked. The runs share one
warm SSH master where the option can use one. Usage (Docker, under the shared lock):
    .venv/bin/python bench/ssh_options.py [CALLS]        (default 20; results in /tmp/mtslime-bench-ssh/)
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
ROOT = "/tmp/mtslime-bench-ssh-options"
NETWORK, SUBNET, ADDRESS, PORT = "mtslime-bench-opt", "172.31.248.0/24", "172.31.248.11", 2222
NODE, CONTAINER = "mtslime-bench-opt-node", "mtslime-bench-opt-train"


def sh(*argv, check=True, **kwargs):
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kwargs)


def up():
    down()
    os.makedirs(ROOT + "/ssh", mode=0o700)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ROOT + "/ssh/key")
    shutil.copy(ROOT + "/ssh/key.pub", ROOT + "/ssh/authorized_keys")
    sh("docker", "network", "create", "--subnet", SUBNET, NETWORK)
    sh("docker", "run", "-d", "--name", NODE, "--pid", "host", "--network", NETWORK, "--ip", ADDRESS,
       "-v", "/var/run/docker.sock:/var/run/docker.sock",
       "-v", ROOT + "/ssh/authorized_keys:/run/ssh-node/authorized_keys:ro",
       "mtslime-test/ssh-node:current", "/usr/local/sbin/ssh-node", str(PORT))
    sh("docker", "run", "-d", "--name", CONTAINER, "--network", "container:" + NODE,
       "mtslime-test/training-suite:current", "sleep", "inf")
    # "python": Ansible runs the interpreter as one word, so the container's Python is a script on the node.
    sh("docker", "exec", NODE, "sh", "-c", "printf '#!/bin/sh\\nexec sudo -n docker exec -i %s python3 \"$@\"\\n' "
       "> /usr/local/bin/container-python && chmod 755 /usr/local/bin/container-python" % CONTAINER)
    # "docker_ssh": the Docker CLI's ssh transport runs `docker system dial-stdio` as the login user, with no
    # sudo: that user must be in the group of the engine's socket.
    gid = str(os.stat("/var/run/docker.sock").st_gid)
    sh("docker", "exec", NODE, "sh", "-c", "getent group {0} >/dev/null || groupadd -g {0} docker; "
       "usermod -aG $(getent group {0} | cut -d: -f1) tester".format(gid))
    for dummy in range(50):
        if "OpenSSH" in sh("bash", "-c", "timeout 1 bash -c 'head -c 20 < /dev/tcp/%s/%d'" % (ADDRESS, PORT),
                           check=False).stdout:
            break
        time.sleep(0.2)
    with open(ROOT + "/ssh/config", "w") as handle:
        # What the docker CLI's ssh:// transport reads: everything comes from the SSH config, generated here
        # from the inventory's values, since the CLI reads no Ansible variable.
        handle.write("Host bench-node\n  HostName %s\n  Port %d\n  User tester\n  IdentityFile %s/ssh/key\n"
                     "  IdentitiesOnly yes\n  UserKnownHostsFile %s/ssh/known_hosts\n"
                     "  StrictHostKeyChecking accept-new\n"
                     "  ControlMaster auto\n  ControlPersist 30m\n  ControlPath %s/ssh/cm-%%r@%%h:%%p\n"
                     % (ADDRESS, PORT, ROOT, ROOT, ROOT))
        # The same without connection reuse: what the Docker CLI's ssh:// transport does unless told otherwise.
        handle.write("Host bench-node-nomux\n  HostName %s\n  Port %d\n  User tester\n  IdentityFile %s/ssh/key\n"
                     "  IdentitiesOnly yes\n  UserKnownHostsFile %s/ssh/known_hosts\n"
                     "  StrictHostKeyChecking accept-new\n  ControlMaster no\n" % (ADDRESS, PORT, ROOT, ROOT))


def close_masters():
    for folder in (ROOT + "/cp", ROOT + "/ssh"):  # the SSH masters of both kinds
        for name in (os.listdir(folder) if os.path.isdir(folder) else []):
            path = os.path.join(folder, name)
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                sh("ssh", "-o", "ControlPath=" + path, "-O", "exit", "x", check=False)


def down():
    close_masters()
    sh("docker", "rm", "-f", CONTAINER, NODE, check=False)
    sh("docker", "network", "rm", NETWORK, check=False)
    shutil.rmtree(ROOT, ignore_errors=True)


def sshd_counts():
    log = sh("docker", "exec", NODE, "cat", "/var/log/sshd.log").stdout.splitlines()
    return (sum("Accepted publickey" in line for line in log), sum("Starting session" in line for line in log))


OPTIONS = {
    "node": {"ansible_connection": "ssh"},
    "ssh_docker": {"ansible_connection": "mtslime.posttrain.ssh_docker", "ansible_ssh_docker_container": CONTAINER,
                   "ansible_ssh_docker_sudo": True, "ansible_python_interpreter": "python3"},
    "python": {"ansible_connection": "ssh", "ansible_python_interpreter": "/usr/local/bin/container-python"},
    # (ansible_user is the docker exec user here; the SSH login comes from the generated config)
    "docker_ssh": {"ansible_connection": "community.docker.docker", "ansible_host": CONTAINER, "ansible_user": "root",
                   "ansible_docker_extra_args": "-H ssh://bench-node", "ansible_python_interpreter": "python3"},
    "docker_ssh_nomux": {"ansible_connection": "community.docker.docker", "ansible_host": CONTAINER,
                         "ansible_user": "root",
                         "ansible_docker_extra_args": "-H ssh://bench-node-nomux",
                         "ansible_python_interpreter": "python3"},
}


def play(calls):
    tasks = [{"name": "no-op %d" % i, "ansible.builtin.ping": {}} for i in range(calls)]
    tasks.append({"name": "a file transfer", "ansible.builtin.template": {"src": ROOT + "/t.j2", "dest": "/tmp/t.txt",
                                                                          "mode": "0644"},
                  "ignore_errors": True, "register": "t"})
    tasks.append({"name": "result",
                  "ansible.builtin.debug": {"msg": "TRANSFER={{ 'ok' if t is succeeded else 'failed' }}"}})
    path = ROOT + "/play.yml"
    with open(path, "w") as handle:
        json.dump([{"hosts": "bench", "gather_facts": False, "tasks": tasks}], handle)
    with open(ROOT + "/t.j2", "w") as handle:
        handle.write("{{ inventory_hostname }}\n")
    return path


def run(option, playbook):
    host = {"ansible_host": ADDRESS, "ansible_port": PORT, "ansible_user": "tester",
            "ansible_ssh_private_key_file": ROOT + "/ssh/key", "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_ssh_common_args": "-o UserKnownHostsFile=%s/ssh/known_hosts" % ROOT}
    host.update(OPTIONS[option])
    inventory = ROOT + "/inventory-%s.json" % option
    with open(inventory, "w") as handle:
        json.dump({"bench": {"hosts": {"bench-node": host}}}, handle)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"),
               ANSIBLE_SSH_CONTROL_PATH_DIR=ROOT + "/cp", ANSIBLE_NOCOLOR="1",
               DOCKER_CONFIG=ROOT + "/docker-config")
    # The docker CLI's ssh transport runs plain `ssh`: point it at the generated config.
    env["PATH"] = ROOT + "/bin" + os.pathsep + BIN + os.pathsep + os.environ["PATH"]
    os.makedirs(ROOT + "/bin", exist_ok=True)
    with open(ROOT + "/bin/ssh", "w") as handle:
        handle.write("#!/bin/sh\nexec /usr/bin/ssh -F %s/ssh/config \"$@\"\n" % ROOT)
    os.chmod(ROOT + "/bin/ssh", 0o755)
    close_masters()  # each measured run opens its own connections
    before = sshd_counts()
    start = time.monotonic()
    done = sh(os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook, check=False, env=env, cwd=REPO)
    elapsed = time.monotonic() - start
    after = sshd_counts()
    landed = [where for where, name in (("container", CONTAINER), ("node", NODE))
              if sh("docker", "exec", name, "rm", "/tmp/t.txt", check=False).returncode == 0]
    ok = done.returncode == 0 or "TRANSFER=" in done.stdout
    return {"option": option, "rc": done.returncode, "wall_s": round(elapsed, 2), "ran": ok,
            "connections": after[0] - before[0], "sessions": after[1] - before[1],
            "transfer": "ok" if "TRANSFER=ok" in done.stdout else "failed",
            "file_landed_in": ",".join(landed) or "nowhere",
            "tail": "" if ok else done.stdout[-1500:]}


def main():
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    up()
    try:
        playbook = play(calls)
        rows = []
        for option in OPTIONS:
            run(option, playbook)  # warm: first connection, interpreter, image layers in the page cache
            row = run(option, playbook)
            row["per_call_ms"] = round(1000 * row["wall_s"] / (calls + 1), 1)
            rows.append(row)
            print("%-16s %6.2f s  %6.1f ms/call  connections %3d  sessions %4d  file transfer %s (in %s)%s" % (
                option, row["wall_s"], row["per_call_ms"], row["connections"], row["sessions"], row["transfer"],
                row["file_landed_in"],
                "" if row["ran"] else "  (FAILED: %s)" % row["tail"][-300:]))
            sys.stdout.flush()
        with open("/tmp/mtslime-bench-ssh-options.json", "w") as handle:
            json.dump({"calls": calls, "rows": rows}, handle, indent=2)
        print("results: /tmp/mtslime-bench-ssh-options.json")
    finally:
        down()


if __name__ == "__main__":
    main()
