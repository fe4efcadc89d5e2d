#!/usr/bin/env python3
"""Drive the collection from Python: run playbooks/status.yml through ansible-runner and
read the status it writes (docs/status.md; schema docs/status.schema.json).

    .venv/bin/python examples/status_from_python.py -i inventory/ [--no-report] [--json]

Prints one line per training cluster (and where its picture is) and exits with 0 when
every cluster's job is PENDING, RUNNING or SUCCEEDED, 1 when one is not (failed,
stopped, none, or Ray unreachable), 2 when status.yml itself failed: a monitoring script
or a cron job can act on that. `status()` is the part to reuse in your own program.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import ansible_runner

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEALTHY = ("PENDING", "RUNNING", "SUCCEEDED")
SCHEMA_VERSION = 2  # the version this program understands


class StatusError(RuntimeError):
    pass


def status(inventory, status_file=None, report=True, playbook=None, quiet=True):
    """Run status.yml against `inventory` and return the parsed status.json
    ({schema_version, generated_at, clusters: [...]})."""
    private = tempfile.mkdtemp(prefix="mtslime-status-")
    status_file = os.path.abspath(status_file or os.path.join(private, "status.json"))
    env = {
        # ansible-runner starts ansible-playbook from PATH: the one next to this Python.
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "collections"),
        "ANSIBLE_NOCOLOR": "1",
    }
    run = ansible_runner.run(
        private_data_dir=private,
        playbook=playbook or os.path.join(REPO, "playbooks", "status.yml"),
        inventory=os.path.abspath(inventory),
        extravars={"status_file": status_file},
        cmdline="" if report else "--skip-tags report",
        envvars=env,
        quiet=quiet,
    )
    if run.rc != 0:
        tail = run.stdout.read()[-3000:] if run.stdout else ""
        raise StatusError("status.yml failed (rc %s, %s):\n%s" % (run.rc, run.status, tail))
    with open(status_file, encoding="utf-8") as handle:
        data = json.load(handle)
    if data.get("schema_version") != SCHEMA_VERSION:
        raise StatusError("%s has schema_version %r; this program reads %d (docs/status.md)"
                          % (status_file, data.get("schema_version"), SCHEMA_VERSION))
    return data


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-i", "--inventory", default=os.path.join(REPO, "inventory"))
    parser.add_argument("--status-file", help="where status.yml writes the JSON (default: a temporary file)")
    parser.add_argument("--no-report", action="store_true", help="skip the pictures (--skip-tags report)")
    parser.add_argument("--json", action="store_true", help="print the whole status.json")
    args = parser.parse_args(argv)
    try:
        data = status(args.inventory, args.status_file, report=not args.no_report)
    except StatusError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
    unhealthy = []
    for cluster in data["clusters"]:
        if not args.json:
            print(cluster["line"])
            if cluster["report"]:
                print("  picture %s, page %s" % (cluster["report"]["png"], cluster["report"]["html"]))
        if cluster["job"]["status"] not in HEALTHY:
            unhealthy.append(cluster["cluster"])
    if unhealthy:
        print("not running: %s" % ", ".join(unhealthy), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
