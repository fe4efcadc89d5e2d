# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The job's log on the node: a detached follower copies the active attempt's log into
<log dir>/<stem>.<submission id>.log, and the guide's log file name is a link to it.

The follower is the guide's pipeline (`ray job logs <id> -f | sed ...`) when the ray CLI and sed
are on PATH, else log_follower.py (copied next to the log from the module's own files)."""
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number

import os
import re
import subprocess
import sys

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import log_follower, names
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import move_aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write, read_text
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import JobError, outcome
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import ACTIVE
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import ansi

FOLLOWER_NAME = "mtslime-log-follower"
# The guide's pipeline, with the values as positional parameters so nothing needs quoting.
RAY_FOLLOWER_SH = '"$1" job logs "$2" -f 2>&1 | "$3" -u -E \'%s\' > "$4"' % ansi.SED_EXPRESSION


def follower_source():
    """The text of module_utils/job/log_follower.py (from the module's zip when run by Ansible)."""
    loader = getattr(log_follower, "__loader__", None)
    source = loader.get_source(log_follower.__name__) if loader is not None else None
    if not source:
        with open(log_follower.__file__, encoding="utf-8") as handle:
            source = handle.read()
    return source


def alive(pid, token):
    """The process exists, is not a zombie, and its command line names `token`."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open("/proc/%d/stat" % pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        if state in ("Z", "X"):
            try:
                os.waitpid(pid, os.WNOHANG)
            except (ChildProcessError, OSError):
                pass
            return False
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except (OSError, IndexError):
        return True  # no /proc: trust kill(0)
    return bool(token) and token in cmdline


class Follower:
    """The follower of one log file: its pid file, its link, and how to start it."""

    def __init__(self, get_bin_path, log_file, url, kind_wanted, interval):
        self.get_bin_path = get_bin_path
        self.log_file = os.path.abspath(os.path.expanduser(log_file))
        self.log_dir = os.path.dirname(self.log_file)
        self.stem = names.stem_of(self.log_file)
        self.pid_file = os.path.join(self.log_dir, ".%s.follower.pid" % self.stem)
        self.script = os.path.join(self.log_dir, ".%s.follower.py" % self.stem)
        self.url = url
        self.kind_wanted = kind_wanted
        self.interval = interval

    def attempt_file(self, sid):
        return names.attempt_log(self.log_dir, self.stem, sid)

    def record(self):
        """(pid, submission_id, kind) from the pid file, or (None, None, None)."""
        parts = (read_text(self.pid_file) or "").split()
        try:
            pid = int(parts[0])
        except (ValueError, IndexError):
            return None, None, None
        return pid, (parts[1] if len(parts) > 1 else None), (parts[2] if len(parts) > 2 else None)

    def current(self, sid):
        pid, recorded, kind = self.record()
        if pid and recorded == sid and alive(pid, sid):
            return pid, kind
        return None, None

    def kind(self):
        if self.kind_wanted == "python":
            return "python", None, None
        ray_bin, sed_bin = self.get_bin_path("ray"), self.get_bin_path("sed")
        if self.kind_wanted == "ray" and not (ray_bin and sed_bin):
            raise ValueError("log_follower=ray but %s is not on PATH" % ("the ray CLI" if not ray_bin else "sed"))
        if ray_bin and sed_bin:
            return "ray", ray_bin, sed_bin
        return "python", None, None

    def link_state(self, sid):
        """'ok' | 'missing' | 'other' (a link elsewhere) | 'file' (a regular file) | 'dir'."""
        target = os.path.basename(self.attempt_file(sid))
        if os.path.islink(self.log_file):
            return "ok" if os.readlink(self.log_file) == target else "other"
        if os.path.isdir(self.log_file):
            return "dir"
        if os.path.lexists(self.log_file):
            return "file"
        return "missing"

    def _link(self, sid):
        os.makedirs(self.log_dir, exist_ok=True)
        tmp = "%s.tmp-link-%d" % (self.log_file, os.getpid())
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(self.attempt_file(sid)), tmp)
        os.replace(tmp, self.log_file)

    def ensure(self, sid, active, check_mode):
        """Keep the follower and the link right for job `sid`.
        Returns {changed, actions, pid, kind, what, moved_to}."""
        out = {"changed": False, "actions": [], "pid": None, "kind": None, "what": "none", "moved_to": None}
        link = self.link_state(sid)
        if link == "dir":
            raise ValueError(
                "log_file %s is a directory; give the path of the log file (e.g. .../logs/qwen3-8B.log)" % self.log_file
            )
        pid, kind = self.current(sid)
        out["pid"], out["kind"] = pid, kind
        if not active:
            out["what"] = "running" if pid else "none"
            return out
        if link != "ok":
            out["changed"] = True
            if link == "file":
                out["actions"].append("%s %s aside (a regular file, probably written by the run script)"
                                      % ("would move" if check_mode else "moved", self.log_file))
                if not check_mode:
                    out["moved_to"] = move_aside(self.log_file, "previous")
            out["actions"].append("%s %s -> %s" % ("would link" if check_mode else "linked", self.log_file,
                                                   os.path.basename(self.attempt_file(sid))))
            if not check_mode:
                self._link(sid)
        if pid:
            out["what"] = "kept"
            return out
        restart = self.record()[1] == sid
        out["changed"] = True
        out["what"] = "restarted" if restart else "started"
        verb = ("would " if check_mode else "") + ("restart" if restart else "start")
        if not check_mode:
            verb += "ed"
        kind, ray_bin, sed_bin = self.kind()
        out["kind"] = kind
        if check_mode:
            out["actions"].append("%s the %s log follower of %s into %s" % (verb, kind, sid, self.attempt_file(sid)))
            return out
        # A follower of an earlier submission is left alone: it writes only its own attempt's
        # file and ends with its job (killing it could cut the last lines of that log).
        os.makedirs(self.log_dir, exist_ok=True)
        out["pid"] = self.spawn(sid, kind, ray_bin, sed_bin)
        out["actions"].append(
            "%s the %s log follower of %s into %s (pid %d)" % (verb, kind, sid, self.attempt_file(sid), out["pid"])
        )
        return out

    def command(self, sid, kind, ray_bin=None, sed_bin=None):
        """(argv, extra environment) of the follower."""
        target = self.attempt_file(sid)
        if kind == "ray":
            return ["/bin/sh", "-c", RAY_FOLLOWER_SH, FOLLOWER_NAME, ray_bin, sid, sed_bin, target], \
                {"RAY_ADDRESS": self.url}
        return [sys.executable or "python3", self.script, self.url, sid, target, str(self.interval)], {}

    def spawn(self, sid, kind, ray_bin=None, sed_bin=None):
        env = dict(os.environ)
        host = re.sub(r"^\w+://", "", self.url).split("/")[0].rsplit(":", 1)[0].strip("[]")
        for name in ("no_proxy", "NO_PROXY"):
            values = [v for v in (env.get(name) or "").split(",") if v]
            for extra in ("127.0.0.1", "localhost", host):
                if extra not in values:
                    values.append(extra)
            env[name] = ",".join(values)
        if kind != "ray":
            source = follower_source()
            if read_text(self.script) != source:
                atomic_write(self.script, source, mode=0o755)
        cmd, extra_env = self.command(sid, kind, ray_bin, sed_bin)
        env.update(extra_env)
        with open(os.devnull, "rb") as devnull_in, open(os.devnull, "wb") as devnull_out:
            process = subprocess.Popen(cmd, stdin=devnull_in, stdout=devnull_out, stderr=devnull_out,
                                       cwd=self.log_dir, env=env, close_fds=True, start_new_session=True)
        # the module exits soon; the follower is reparented and reaped by init
        process.returncode = 0  # keep Popen.__del__ quiet about a child that outlives it
        atomic_write(self.pid_file, "%d\n%s\n%s\n" % (process.pid, sid, kind), mode=0o644)
        return process.pid


def follow(follower, job, mode, check_mode):
    """The outcome of keeping `job`'s follower (mode: auto, ray, python or none)."""
    if follower is None or job is None:
        return outcome()
    sid = job.get("submission_id")
    fields = {"attempt_log": follower.attempt_file(sid)}
    if mode == "none":
        pid, kind = follower.current(sid)
        fields.update(follower_pid=pid, follower={"kind": kind, "what": "none"})
        return outcome(fields=fields)
    try:
        out = follower.ensure(sid, job.get("status") in ACTIVE, check_mode)
    except (ValueError, OSError) as exc:
        raise JobError("log follower: %s" % exc) from None
    fields.update(follower_pid=out["pid"], follower={"kind": out["kind"], "what": out["what"]})
    if out["moved_to"]:
        fields["moved_to"] = out["moved_to"]
    return outcome(changed=out["changed"], fields=fields, actions=out["actions"])


def status(follower, job):
    """The follower fields of state=status (nothing is started)."""
    if follower is None or job is None:
        return outcome()
    pid, kind = follower.current(job["submission_id"])
    return outcome(fields={"attempt_log": follower.attempt_file(job["submission_id"]), "follower_pid": pid,
                           "follower": {"kind": kind, "what": "running" if pid else "none"}})
