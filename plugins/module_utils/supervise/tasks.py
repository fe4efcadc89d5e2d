# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The modules' work the supervisor runs, each in a process of its own as Ansible runs a module: the task's
arguments as JSON on stdin, an AnsibleModule made as the module makes it, the result as the JSON it prints.
The arguments are the ones the roles gave the modules (config.json), so a check decides by the same code
with the same inputs as a site.yml run.
Standard library only; Python 3.8+."""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import dataset_check_task, hf_model_check_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore_checkpoint_task, retention_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import fanout_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify_task, ray_job_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import ray_start_task

TASKS = {
    "ray_start": ray_start_task,
    "ray_job": ray_job_task,
    "checkpoint_retention": retention_task,
    "job_notify": notify_task,
    "dataset_check": dataset_check_task,
    "hf_model_check": hf_model_check_task,
    "mcore_checkpoint": mcore_checkpoint_task,
    "fanout": fanout_task,
}
TIMEOUT = 1800


def run_here(name):
    """`python3 lib.zip task NAME`: the module's main() on the arguments read from stdin."""
    from ansible.module_utils.basic import AnsibleModule

    task = TASKS[name]
    sys.argv = sys.argv[:1]  # Ansible's argument loader then reads stdin
    task.main(AnsibleModule(**task.module_kwargs()))


def result_of(name, stdout, stderr, rc):
    """The module's result: the last JSON object it printed, or a failure that says how it ended."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    tail = " / ".join((stderr or stdout or "").strip().splitlines()[-3:]) or "no output"
    return {"failed": True, "msg": "%s ended with rc %s and no result: %s" % (name, rc, tail)}


def run(library, name, args, environment=None, timeout=TIMEOUT, runner=subprocess.run):
    """The result of task `name` on `args`, run by `library` (lib.zip) in a process of its own."""
    env = dict(os.environ, **{str(k): str(v) for k, v in (environment or {}).items()})
    try:
        done = runner([sys.executable, library, "task", name], input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
                      capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"failed": True, "msg": "%s did not end within %d s" % (name, timeout)}
    return result_of(name, done.stdout, done.stderr, done.returncode)


def run_forked(name, args, environment=None, timeout=TIMEOUT):
    """As run(), in a child forked from this process, which has imported every task already: the fast path's probe
    replays several tasks in one module call, where a fresh interpreter importing lib.zip costs about 0.35 s a task."""
    from ansible.module_utils import basic

    sys.stdout.flush()
    sys.stderr.flush()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _run_in_child(basic, name, args, environment, write_fd)
    os.close(write_fd)
    try:
        output, timed_out = _read_until_closed(read_fd, timeout)
    finally:
        os.close(read_fd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    dummy, status = os.waitpid(pid, 0)
    if timed_out:
        return {"failed": True, "msg": "%s did not end within %d s" % (name, timeout)}
    text = output.decode("utf-8", "replace")
    return result_of(name, text, text, os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))


def _run_in_child(basic, name, args, environment, write_fd):
    """The forked child: the task's main() with its output (stdout and stderr) into write_fd; never returns."""
    code = 70
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # pylint: disable=consider-using-with
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # pylint: disable=consider-using-with
        os.environ.update({str(k): str(v) for k, v in (environment or {}).items()})
        # Where AnsibleModule reads its arguments when they are loaded already (this process's module loaded its own).
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()  # pylint: disable=protected-access
        basic._ANSIBLE_PROFILE = "legacy"  # pylint: disable=protected-access
        task = TASKS[name]
        task.main(basic.AnsibleModule(**task.module_kwargs()))
        code = 0
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
    except BaseException:  # pylint: disable=broad-exception-caught
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)  # pylint: disable=protected-access


def _read_until_closed(fd, timeout):
    """(bytes read from fd until its writer closed it, whether `timeout` seconds passed first)."""
    chunks, deadline = [], time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks), True
            if selector.select(left):
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b"".join(chunks), False
                chunks.append(chunk)
