# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""job_supervise's work: write the supervisor's code (lib.zip) and configuration (config.json) when they differ,
or disable supervision under the job's lease, and report the supervisor's last check (state.json).
Standard library only; Python 3.8+."""
from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_bytes, read_json_object
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import bundle, files, lease
# What lib.zip runs: imported here so that Ansible puts it into this module's payload, which becomes lib.zip.
# pylint: disable-next=unused-import
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import cli, keeper, tasks, tick  # noqa: F401

TASK_OPTIONS = ("ray_start", "ray_job", "checkpoint_retention", "job_notify")


def config_of(params):
    config = {name: params[name] for name in TASK_OPTIONS if params.get(name) is not None}
    config.update(enabled=params["state"] == "enabled", role=params["role"], interval=params["interval"],
                  container=params["container"], python=params["python"], environment=params["environment"] or {})
    return config


def _write(file_path, data, mode, check_mode, actions, why):
    if read_bytes(file_path) == (data.encode("utf-8") if isinstance(data, str) else data):
        return False
    actions.append("%s %s (%s)" % ("would write" if check_mode else "wrote", file_path, why))
    if not check_mode:
        atomic_write(file_path, data, mode=mode)
    return True


def enable(params, check_mode):
    """{changed, actions}: lib.zip and config.json as they should be."""
    directory = params["directory"]
    actions = []
    if not check_mode:
        os.makedirs(directory, mode=0o750, exist_ok=True)
    library = bundle.build(bundle.payload_entries())
    changed = _write(files.path(directory, files.LIBRARY), library, 0o644, check_mode, actions,
                     "the supervisor's code, from this version of the collection")
    config = config_of(params)
    before = read_bytes(files.path(directory, files.CONFIG))
    if "ray_start" not in config:
        # a run that skipped the ray_head stage (--tags train_job) keeps the Ray start the last full run wrote
        previous = read_json_object(files.path(directory, files.CONFIG)) or {}
        if previous.get("ray_start"):
            config["ray_start"] = previous["ray_start"]
    text = files.config_text(config)
    changed = _write(files.path(directory, files.CONFIG), text, 0o600, check_mode, actions,
                     "supervision %s" % ("enabled" if before is None or
                                         not json.loads(before.decode("utf-8", "replace") or "{}").get("enabled")
                                         else "settings changed")) or changed
    return {"changed": changed, "actions": actions, "library_sha256": hashlib.sha256(library).hexdigest()}


def disable(params, check_mode):
    """{changed, actions}: config.json's `enabled` false, written under the job's lease so that no check of the
    supervisor acts after it; nothing to do when there is no configuration."""
    directory = params["directory"]
    config_path = files.path(directory, files.CONFIG)
    config = read_json_object(config_path)
    if not config or not config.get("enabled"):
        return {"changed": False, "actions": []}
    if check_mode:
        return {"changed": True, "actions": ["would disable supervision in %s" % config_path]}
    with lease.held(files.path(directory, files.LEASE), "job_supervise state=disabled", "disabling supervision",
                    wait=params["lease_wait"]):
        config["enabled"] = False
        atomic_write(config_path, files.config_text(config), mode=0o600)
    return {"changed": True, "actions": ["disabled supervision in %s: no check acts until site.yml enables it"
                                         % config_path]}


def main(module):
    params = module.params
    if params["interval"] < 5:
        module.fail_json(msg="job_supervise: interval is %d s (train_job_supervise_interval); give 5 or more"
                         % params["interval"])
    if params["state"] == "enabled" and params["role"] == "head" and not params["ray_job"]:
        module.fail_json(msg="job_supervise: the head's supervisor needs ray_job (the job task's arguments)")
    if not os.path.isabs(params["directory"]):
        module.fail_json(msg="job_supervise: directory %s is relative; give an absolute path" % params["directory"])
    try:
        done = enable(params, module.check_mode) if params["state"] == "enabled" else disable(params,
                                                                                              module.check_mode)
    except lease.LeaseBusy as busy:
        module.fail_json(msg="job_supervise: %s, longer than lease_wait (%d s)" % (busy, params["lease_wait"]))
    except OSError as exc:
        module.fail_json(msg="job_supervise: %s: %s" % (exc.filename or params["directory"], exc.strerror or exc))
    state = read_json_object(files.path(params["directory"], files.STATE)) or {}
    module.exit_json(directory=params["directory"], supervisor=state, **done)


def module_kwargs():
    return dict(
        argument_spec=dict(
            directory=dict(type="path", required=True),
            state=dict(type="str", choices=["enabled", "disabled"], default="enabled"),
            role=dict(type="str", choices=["head", "worker"], default="head"),
            interval=dict(type="int", default=60),
            container=dict(type="str", default="slime_rl"),
            python=dict(type="str", default="python3"),
            environment=dict(type="dict", default={}),
            ray_start=dict(type="dict"),
            ray_job=dict(type="dict"),
            checkpoint_retention=dict(type="dict"),
            job_notify=dict(type="dict", no_log=True),
            lease_wait=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
