#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: async_progress
short_description: Report the progress of a long asynchronous task (elapsed time, bytes, last log line)
version_added: "0.1.0"
description:
  - Reads the status file of a task started with C(async) and C(poll=0), and what that task writes,
    and returns one line of progress that the C(mtslime.posttrain.cluster_recap) callback prints on every retry.
  - Use it in an C(until) loop instead of M(ansible.builtin.async_status) when the task writes a log
    (a conversion) or a directory of growing files (a download).
  - When the task has finished it returns the task's own result and, if it failed, the first error line of the log.
options:
  jid:
    description: The C(ansible_job_id) returned by the asynchronous task.
    type: str
    required: true
  log_file:
    description:
      Log file the task writes. Its last line is shown while the task runs; its first error line when it fails.
    type: path
  watch_path:
    description: File or directory the task fills (a download). Its size so far is shown.
    type: path
  expected_bytes:
    description: Size that O(watch_path) will have when the task is done, to show a percentage.
    type: int
  expected_bytes_file:
    description:
      A file holding that size, written by the task once it knows it (for example M(mtslime.posttrain.hf_download)).
    type: path
  lock:
    description:
      - The storage lock (M(mtslime.posttrain.storage_lock)) the task's producer works under, as C(path) and C(token)
        (the lock's C(holder.token)). Every poll renews its lease and records the progress line as what the holder
        is doing, so runs waiting for the lock show it, and runs on other controllers know the holder is alive.
    type: dict
  async_dir:
    description: Directory of the asynchronous status files (the C(ansible_async_dir) of the task).
    type: path
    default: ~/.ansible_async
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Convert (long work, in the background)
  ansible.builtin.command: /usr/bin/convert.sh
  async: 7200
  poll: 0
  register: convert_job

- name: Wait for the conversion, showing elapsed time and the last log line
  mtslime.posttrain.async_progress:
    jid: "{{ convert_job.ansible_job_id }}"
    log_file: /home/slime/tools/Qwen3-8B_slime.log
  register: convert_wait
  until: convert_wait.finished
  retries: 720
  delay: 10
"""

RETURN = r"""
finished:
  description: Whether the asynchronous task has ended.
  returned: always
  type: bool
elapsed:
  description: Seconds since the task started.
  returned: always
  type: float
progress:
  description:
    - "One line for people, for example C(running 0:03:12, 4.1 GiB of 16.4 GiB (25%), last: saving shard 3)."
    - "C(last) is the last line of O(log_file) that says how far the task got: Python's warnings (C(file.py:12:
      FutureWarning: ...) and the C(  warnings.warn() line under it), torch's C([W...]) warnings and the launcher's
      noise are passed over. With O(lock) it is also the lock holder's C(doing) line that waiting runs show."
  returned: always
  type: str
last_line:
  description: Last non-empty line of O(log_file).
  returned: when O(log_file) is set
  type: str
bytes:
  description: Current size of O(watch_path).
  returned: when O(watch_path) is set
  type: int
alive:
  description:
    - Whether the task's process (its C(async_wrapper)) still runs on this node. A task that is not finished and
      not alive was killed with its node or container; it never finishes.
  returned: always
  type: bool
job_failed:
  description: The task ended and failed (non-zero rc or a module failure).
  returned: always
  type: bool
job_rc:
  description: Return code of the finished task, when it had one (not C(rc), which would make this task fail).
  returned: when finished
  type: int
result:
  description: The finished task's own result (for a command, C(rc), C(stdout), C(stderr), C(cmd)).
  returned: when finished
  type: dict
first_error:
  description:
    - "First error line of O(log_file): C(lineno), C(line), C(context) (the lines after it), C(exception),
      C(exception_lineno) and C(rank). For a Python traceback C(exception) is the exception line that ends it,
      however long the traceback (the last exception of a chain), and C(rank) the rank that raised it. Under
      torch's launcher the C([rank0]: ) prefix is removed and the launcher's noise (c10d's
      C(destroy_process_group()) warning, torchrun's agent lines) is never an error."
  returned: when the task failed and O(log_file) is set
  type: dict
fatal_error:
  description:
    - "The exception line (C(Xxx: message), rank prefix removed) of the last traceback in O(log_file) that is not
      torchrun's own C(ChildFailedError) (the root-cause rank's when torchrun names it): what made the task fail.
      Keys C(lineno), C(line), C(exception), C(type), C(rank), C(traceback_start), C(task)."
  returned: when the task failed and O(log_file) has a traceback
  type: dict
"""

import datetime
import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock as storage_lease
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes, tree_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.scan import (
    fatal_error_in_file,
    first_error_in_file,
    last_line,
    last_progress_line,
)


def path_size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return tree_bytes(path)


def read_status(status_file):
    """The async status file holds {"started": 1, "finished": 0} while the task runs
    and the task's result once it ends. A half-written file reads as running."""
    try:
        with open(status_file, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def wrapper_alive(jid, proc="/proc"):
    """Whether an async_wrapper process of job `jid` runs (its argv holds the job id's first part)."""
    prefix = str(jid).split(".")[0]
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return True  # no /proc: cannot tell, assume it runs
    for pid in pids:
        try:
            with open(os.path.join(proc, pid, "cmdline"), "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if any(b"async_wrapper" in word for word in argv) and prefix.encode() in argv:
            return True
    return False


def describe(finished, elapsed, size, expected, line):
    parts = ["finished" if finished else "running", str(datetime.timedelta(seconds=int(elapsed)))]
    text = "%s %s" % tuple(parts)
    if size is not None:
        text += ", %s" % human_bytes(size)
        if expected:
            text += " of %s (%d%%)" % (human_bytes(expected), min(100, int(100 * size / expected)))
    if line:
        text += ", last: %s" % (line if len(line) <= 160 else line[:157] + "...")
    return text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            jid=dict(type="str", required=True),
            log_file=dict(type="path"),
            watch_path=dict(type="path"),
            expected_bytes=dict(type="int"),
            expected_bytes_file=dict(type="path"),
            async_dir=dict(type="path", default="~/.ansible_async"),
            lock=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    status_file = os.path.join(os.path.expanduser(params["async_dir"]), params["jid"])
    if not os.path.exists(status_file):
        module.fail_json(
            msg="async_progress: no status file %s for job %s; the task was not started with async on this host, "
            "or its async_dir differs (set async_dir to the task's ansible_async_dir)" % (status_file, params["jid"])
        )
    status = read_status(status_file) or {"started": 1, "finished": 0}
    # Like ansible.builtin.async_status: a result without "started" is the finished task's own.
    finished = bool(status.get("finished")) or "started" not in status
    elapsed = max(0.0, time.time() - os.stat(status_file).st_mtime) if not finished else 0.0
    if finished and status.get("start") and status.get("end"):
        fmt = "%Y-%m-%d %H:%M:%S.%f"
        start, end = (datetime.datetime.strptime(status[key], fmt) for key in ("start", "end"))
        elapsed = (end - start).total_seconds()

    result = dict(changed=False, finished=finished, elapsed=round(elapsed, 1), job_failed=False)
    line = None
    if params["log_file"]:
        result["last_line"] = last_line(params["log_file"]) or ""
        line = last_progress_line(params["log_file"])
    size = None
    if params["watch_path"]:
        size = path_size(params["watch_path"]) if os.path.exists(params["watch_path"]) else 0
        result["bytes"] = size
    expected = params["expected_bytes"]
    if not expected and params["expected_bytes_file"]:
        try:
            with open(params["expected_bytes_file"], encoding="utf-8") as handle:
                expected = int(handle.read().strip() or 0)
        except (OSError, ValueError):
            expected = None
    result["progress"] = describe(finished, elapsed, size, expected, line)
    result["alive"] = finished or wrapper_alive(params["jid"])
    if not finished and not result["alive"]:
        result["progress"] = "died (no process of async job %s runs), %s" % (params["jid"], result["progress"])
    lock = params["lock"]
    if lock and lock.get("path") and not module.check_mode:
        try:
            storage_lease.renew(lock["path"], lock.get("token"), doing=result["progress"])
        except LookupError as error:
            module.fail_json(msg="async_progress: %s; another run took the lock over while this one waited. "
                             "Rerun to see what it did." % error, **result)

    if finished:
        job_result = {k: v for k, v in status.items() if k not in ("invocation",)}
        result["result"] = job_result
        if "rc" in status:
            result["job_rc"] = status["rc"]
        result["job_failed"] = bool(status.get("failed")) or status.get("rc", 0) != 0
        if result["job_failed"] and params["log_file"]:
            error = first_error_in_file(params["log_file"])
            if error:
                result["first_error"] = error
            fatal = fatal_error_in_file(params["log_file"])
            if fatal:
                result["fatal_error"] = fatal
    module.exit_json(**result)


if __name__ == "__main__":
    main()
