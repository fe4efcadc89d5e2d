# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The manifest of a submission: what ran (image, versions as found in the container, the
accelerators, the exact argv and entrypoint, the resume), as JSON next to the run script."""
from __future__ import annotations

import json
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, sha256_text
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import names
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import JobError


def manifest_dir(configured, files):
    """The manifest directory: `configured`, else manifests/ next to the first run file, else None."""
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    if files:
        return names.manifest_dir(os.path.dirname(os.path.abspath(os.path.expanduser(files[0]["path"]))))
    return None


def found_in_container(run_command, commands):
    """Output of each manifest command (run with `run_command(argv) -> (rc, out, err)`): the
    versions as installed where the job runs; a failed command records its rc and error."""
    found = {}
    for name, command in sorted((commands or {}).items()):
        rc, out, err = run_command(["/bin/bash", "-c", command])
        found[name] = out.strip() if rc == 0 and out.strip() else {"rc": rc, "error": (err or out).strip()[-500:]}
    return found


def file_records(files):
    return [{"path": os.path.abspath(os.path.expanduser(f["path"])), "sha256": sha256_text(f["content"])}
            for f in files or []]


def write(path, document):
    """Write the manifest (mode 0640, its directory 0750), atomically."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
        atomic_write(path, json.dumps(document, indent=2, sort_keys=True, default=str) + "\n", mode=0o640)
    except OSError as exc:
        raise JobError("cannot write the manifest %s: %s" % (path, exc.strerror or exc)) from None
