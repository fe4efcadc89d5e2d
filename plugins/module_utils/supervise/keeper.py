# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The keeper: the loop of the `<container>-supervisor` container (restart policy unless-stopped, the node's
engine socket mounted, no network). Docker brings it back after an engine restart or a reboot; every
interval it starts the training container when that stopped (a restart of the engine leaves it exited) and
runs one check (tick.py) inside it. It re-executes itself when job_supervise wrote a new lib.zip.
Standard library only; Python 3.8+."""
from __future__ import annotations

import hashlib
import os
import sys
import time

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import read_json_object
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import docker_api, files

IDLE_SECONDS = 5
TICK_TIMEOUT = 3600


def _digest(file_path):
    try:
        with open(file_path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


class Keeper:
    def __init__(self, directory, engine, clock=time.time, out=sys.stdout):
        self.directory = directory
        self.engine, self.clock, self.out = engine, clock, out
        self.library = files.path(directory, files.LIBRARY)
        self.started_with = _digest(self.library)
        self.said = None

    def say(self, action, message, log=True):
        """Print a decision, and log it when it differs from the last one said."""
        self.out.write("%s %s: %s\n" % (files.now_iso(self.clock()), action, message))
        self.out.flush()
        if log and (action, message) != self.said and os.path.isdir(self.directory):
            files.log_decision(self.directory, {"time": files.now_iso(self.clock()), "role": "keeper",
                                                "action": action, "message": message})
        self.said = (action, message)

    def upgraded(self):
        return _digest(self.library) not in (None, self.started_with)

    def once(self):
        """One round; returns the seconds to wait before the next."""
        config = read_json_object(files.path(self.directory, files.CONFIG))
        if config is None:
            self.say("not_configured", "waiting for %s (site.yml writes it)" % files.CONFIG, log=False)
            return IDLE_SECONDS
        interval = int(config.get("interval") or 60)
        enabled = bool(config.get("enabled"))
        name = config["container"]
        try:
            found = self.engine.inspect(name)
            if found is None:
                self.say("container_absent", "the training container %s does not exist; site.yml makes it" % name)
                return interval
            state = found.get("State") or {}
            if not state.get("Running"):
                if not enabled:
                    self.say("disabled", "supervision is disabled (playbooks/stop.yml); the training container %s "
                                         "is left %s" % (name, state.get("Status")))
                    return interval
                self.engine.start(name)
                self.say("container_started", "started the training container %s (%s since %s, exit code %s)" % (
                    name, state.get("Status"), state.get("FinishedAt"), state.get("ExitCode")))
            # disabled, the check only records so (state.json), acting on nothing
            code, out, err = self.engine.exec_run(
                name, [config.get("python") or "python3", self.library, "tick", self.directory], TICK_TIMEOUT)
        except docker_api.DockerError as exc:
            self.say("engine_error", str(exc))
            return interval
        line = (out or "").strip().splitlines()[-1:] or (err or "").strip().splitlines()[-1:] or ["no output"]
        self.say("check", "rc %s: %s" % (code, line[0]), log=code != 0)
        return interval


def main(directory, engine=None, sleep=time.sleep):
    keeper = Keeper(directory, engine or docker_api.Engine())
    while True:
        if keeper.upgraded():
            keeper.say("upgraded", "lib.zip changed: the keeper starts again with it")
            os.execv(sys.executable, [sys.executable, keeper.library, "keep", directory])
        sleep(keeper.once())
