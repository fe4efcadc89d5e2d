# Controller side of the first-step wait (documentation in plugins/modules/job_first_step.py): polls the
# job's own status (ray_job state=status) and its log (train_progress) on the node, prints progress at
# least every 30 s, warns about error lines the job survives, and fails only when the job is FAILED or
# STOPPED or the time is up (the decisions: plugin_utils/job/first_step.py).
from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import ray_argument_spec
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.job import first_step
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import SAY_EVERY, Waiter, duration

display = Display()
# doc fragment mtslime.posttrain.ray: passed on to ray_job, which applies their defaults
RAY_OPTIONS = tuple(ray_argument_spec())


class Poll:
    """One poll = two read-only module calls; keeps what it saw for the decisions and the warnings."""

    def __init__(self, execute, args, warn):
        self.execute = execute
        self.args = args
        self.warn = warn
        self.warned = {}
        self.status_result = None
        self.sid = args.get("submission_id")
        self.status = None
        self.progress = None
        self.log_error = None
        self.verdict = first_step.WAIT
        self.message = ""

    def __call__(self, _module_name, _module_args):
        status_args = {"state": "status", "experiment": self.args["experiment"]}
        status_args.update((name, self.args[name]) for name in RAY_OPTIONS if name in self.args)
        found = self.execute("mtslime.posttrain.ray_job", status_args)
        if found.get("failed"):
            return {"failed": True, "msg": "reading the job's status failed: %s" % found.get("msg")}
        self.sid, self.status = first_step.job_status(found, self.args.get("submission_id"))
        progress_args = {"log_file": self.args["log_file"], "tail_lines": 0, "context_lines": 0}
        if self.status in ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"):
            progress_args["status"] = self.status
        progress = self.execute("mtslime.posttrain.train_progress", progress_args)
        if progress.get("failed"):
            self.progress, self.log_error = None, progress.get("msg")
        else:
            self.progress, self.log_error = progress, None
        self.verdict, self.message = first_step.decide(self.sid, self.status, self.progress, self.args["log_file"],
                                                       self.log_error)
        if self.verdict != first_step.FAILED:
            for error in first_step.errors_of(self.progress):
                if error["key"] not in self.warned:
                    text = first_step.survived_warning(self.sid, self.status, error, self.args["log_file"])
                    self.warned[error["key"]] = text
                    self.warn(text)
        return {"verdict": self.verdict}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("experiment", "submission_id", "log_file", "timeout", "interval") + RAY_OPTIONS)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        for name in ("experiment", "log_file"):
            if not args.get(name):
                raise AnsibleActionFail("job_first_step: %s is required" % name)
        try:
            timeout = int(args.get("timeout", 1800))
            interval = float(args.get("interval", 15))
        except (TypeError, ValueError) as exc:
            raise AnsibleActionFail("job_first_step: timeout and interval must be numbers (%s); see "
                                    "train_job_first_step_timeout" % exc) from exc
        if timeout < 1 or interval <= 0:
            raise AnsibleActionFail("job_first_step: timeout is %s and interval %s; give timeout >= 1 "
                                    "(train_job_first_step_timeout) and interval > 0" % (timeout, interval))
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: the first step is not waited for")
            return result

        def execute(module_name, module_args):
            return self._execute_module(module_name=module_name, module_args=module_args, task_vars=task_vars)

        host = task_vars.get("inventory_hostname", "?")
        task = self._task.get_name()
        warnings = []

        def warn(text):
            warnings.append(text)
            display.warning("[%s] %s" % (host, text))

        poll = Poll(execute, args, warn)
        said = []

        def say(text):
            said.append(text)
            display.display("  [%s] %s: %s" % (host, task, text))

        waiter = Waiter(poll, say, say_every=SAY_EVERY)
        last, waited, timed_out = waiter.until(
            "mtslime.posttrain.ray_job", {}, done=lambda r: r.get("verdict") != first_step.WAIT,
            describe=lambda r: poll.message, timeout=timeout, interval=interval)
        progress = poll.progress or {}
        result.update(
            changed=False,
            submission_id=poll.sid,
            status=poll.status,
            first_step=progress.get("first_step"),
            last_step=progress.get("last_step"),
            waited=round(waited, 1),
            survived_errors=[{"line": k, "warning": v} for k, v in sorted(poll.warned.items())],
            waiting_for_gpus=progress.get("waiting_for_gpus"),
            hint=progress.get("hint"),
            log_file=args["log_file"],
        )
        if warnings:
            result["warnings_seen"] = warnings
        if last.get("failed"):
            result.update(failed=True, msg="job_first_step: %s" % last.get("msg"))
        elif timed_out:
            result.update(failed=True, msg="job_first_step: " + first_step.timeout_message(
                poll.sid, poll.status, poll.progress, args["log_file"], duration(waited), poll.log_error))
        elif poll.verdict == first_step.FAILED:
            result.update(failed=True, msg="job_first_step: " + poll.message)
        else:
            result["msg"] = poll.message
            if not said:  # the Waiter said the end itself when it had said anything before
                say(poll.message)
        return result
