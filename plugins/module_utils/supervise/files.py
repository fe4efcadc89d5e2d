# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The supervisor's directory (train_job_supervise; docs/recovery.md): the names of its files and how each is
read and written. The directory is on the node's storage (under the run's log dir, a mount of the training
container), so it outlives the container; the keeper container mounts it at the same path.

  config.json     what to supervise: the role's arguments for each task, written by job_supervise (0600: it
                  may hold webhook URLs)
  lib.zip         the code: ansible.module_utils and this collection's module_utils, as the modules run them
  state.json      the last check: when, its decision, the job, the next check
  decisions.log   every decision, one JSON line each
  job.lease/      the lease a site.yml run and the supervisor take before they act on the job (prepare/lock.py)
Standard library only; Python 3.8+."""
from __future__ import annotations

import datetime
import json
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write

CONFIG = "config.json"
LIBRARY = "lib.zip"
STATE = "state.json"
LOG = "decisions.log"
LEASE = "job.lease"
SCHEMA_VERSION = 1
# decisions.log is moved to decisions.log.1 past this size (one older file is kept)
LOG_LIMIT = 8 * 1024 * 1024


def path(directory, name):
    return os.path.join(directory, name)


def now_iso(epoch=None):
    moment = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc) if epoch is not None else \
        datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def overdue(state, now=None):
    """Whether a state.json's check is more than one interval past its next_check (the keeper is not running).
    A state without a readable next_check is not overdue."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        due = datetime.datetime.strptime(state["next_check"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
        return (now - due).total_seconds() > int(state.get("interval") or 60)
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def write_json(file_path, document, mode=0o600):
    atomic_write(file_path, json.dumps(document, indent=2, sort_keys=True) + "\n", mode=mode)


def config_text(config):
    """config.json's exact text: job_supervise compares it with the file to decide `changed`."""
    return json.dumps(dict(config, schema_version=SCHEMA_VERSION), indent=2, sort_keys=True) + "\n"


def log_decision(directory, entry):
    """Append one decision ({time, host, role, decision, ...}) to decisions.log."""
    log = path(directory, LOG)
    try:
        if os.path.getsize(log) > LOG_LIMIT:
            os.replace(log, log + ".1")
    except OSError:
        pass
    line = json.dumps(entry, sort_keys=True) + "\n"
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
