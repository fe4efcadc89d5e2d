"""Run the collection's playbooks through ansible-runner, with the repo's ansible.cfg,
and return what tests need: rc, per-host stats, the task events and the output."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import ansible_runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


@dataclass
class PlaybookRun:
    rc: int
    stats: dict
    stdout: str
    events: list = field(default_factory=list)

    def changed_hosts(self):
        return {host: count for host, count in (self.stats.get("changed") or {}).items() if count}

    def failed_hosts(self):
        failed = dict(self.stats.get("failures") or {})
        failed.update(self.stats.get("dark") or {})
        return {host: count for host, count in failed.items() if count}

    def changed_tasks(self):
        return [
            "%s: %s" % (e["event_data"].get("host"), e["event_data"].get("task"))
            for e in self.events
            if e.get("event") == "runner_on_ok" and (e["event_data"].get("res") or {}).get("changed")
        ]

    def results(self, task_substring):
        return [
            e["event_data"].get("res") or {}
            for e in self.events
            if e.get("event") in ("runner_on_ok", "runner_on_failed")
            and task_substring in (e["event_data"].get("task") or "")
        ]


def run_playbook(playbook, inventory, *args, extravars=None, timeout=1800):
    """ansible-playbook <playbook> -i <inventory> <args> through ansible-runner."""
    private = tempfile.mkdtemp(prefix="mtslime-runner-")
    env = {
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "collections"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
    }
    result = ansible_runner.run(
        private_data_dir=private,
        playbook=os.path.join(REPO, playbook),
        inventory=os.path.join(REPO, inventory),
        cmdline=" ".join(args),
        extravars=extravars or {},
        envvars=env,
        quiet=True,
        timeout=timeout,
    )
    stdout = result.stdout.read() if result.stdout else ""
    return PlaybookRun(rc=result.rc, stats=result.stats or {}, stdout=stdout, events=list(result.events))


def ctrl_c(proc, grace=5, timeout=60):
    """What Ctrl-C in the terminal does: SIGINT to the run's process group (started with
    start_new_session=True). A second one follows when the run goes on after `grace` seconds, as a user
    presses it again: Python drops a KeyboardInterrupt raised while the interpreter runs a finaliser, so
    ansible-playbook loses one SIGINT now and then, and after the first its handler is the default one.
    Returns the exit code (SIGKILL after `timeout`)."""
    for wait in (grace, timeout):
        os.killpg(proc.pid, signal.SIGINT)
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()
