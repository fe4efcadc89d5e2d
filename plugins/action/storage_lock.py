# Controller side of mtslime.posttrain.storage_lock (documentation in plugins/modules/storage_lock.py):
# every look at the lock is one short module call on the node; the waiting, the progress
# lines and the decision that a holder is dead (plugins/plugin_utils/prepare/lock_rules.py) happen
# here, so Ctrl-C of the run leaves nothing waiting on the node.
from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.prepare import lock_rules
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.waiting import Waiter, duration

MODULE = "mtslime.posttrain.storage_lock"
PASSED = ("path", "state", "lease", "doing", "doing_data")


def acquire(execute, waiter, mine, module_args, timeout, interval, start_of=lock_rules.process_start):
    """Take the lock: look, take over a dead holder at once, wait for a live one (saying
    who holds it), give up after `timeout`. `execute(module_args)` runs the module once;
    `waiter` gives the progress output and the clock."""
    path = module_args["path"]
    taken = {}

    def call(_name, margs):
        answer = execute(margs)
        if answer.get("failed") or answer.get("status") != "held":
            return answer
        holder = answer.get("holder") or {}
        verdict, reason = lock_rules.judge(holder, mine, float(answer.get("node_now") or 0), start_of=start_of)
        answer["verdict"], answer["reason"] = verdict, reason
        if verdict == lock_rules.LIVE:
            return answer
        again = execute(dict(margs, take_over=holder.get("token") or ""))
        if again.get("status") == "taken":
            taken["because"] = reason
        return again

    def describe(answer):
        if answer.get("status") != "held":
            return "took the lock %s" % path
        held = lock_rules.describe(answer.get("holder"), float(answer.get("node_now") or 0))
        return "waiting for the lock %s: %s; %s" % (path, held, answer.get("reason", ""))

    looker = Waiter(call, waiter.say, clock=waiter.clock, sleep=waiter.sleep, say_every=waiter.say_every)
    answer, waited, timed_out = looker.until(
        MODULE, module_args, lambda a: a.get("status") in ("taken", "ours"), describe, timeout, interval)
    result = dict(answer)
    result["waited"] = round(waited, 1)
    if timed_out:
        result["failed"] = True
        result["msg"] = ("storage_lock: gave up after %s (the lock timeout). %s. That run is alive: wait for it to "
                         "finish, stop it, or raise the stage's *_lock_timeout." % (duration(waited), describe(answer)))
    elif answer.get("previous"):
        result["taken_over_because"] = taken.get("because", "")
        held = lock_rules.describe(answer["previous"], float(answer.get("node_now") or 0))
        result.setdefault("warnings", []).append("took over the lock %s, %s: the holder is dead, %s" % (
            path, held, taken.get("because", "")))
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(PASSED + ("run_id", "timeout", "interval", "node"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if not args.get("path") or not args.get("run_id"):
            raise AnsibleActionFail("storage_lock: path and run_id (slime_run_id) are required")
        mine = lock_rules.me(str(args["run_id"]), args.get("node") or task_vars.get("inventory_hostname"))
        module_args = {k: args[k] for k in PASSED if args.get(k) is not None}
        module_args["holder"] = mine

        def execute(margs):
            return self._execute_module(MODULE, module_args=margs, task_vars=task_vars)

        if args.get("state", "acquired") != "acquired":
            result.update(execute(module_args))
            return result
        waiter = Waiter.for_action(self, task_vars)
        result.update(acquire(execute, waiter, mine, module_args, int(args.get("timeout", 600)),
                              max(1, int(args.get("interval", 5)))))
        return result
