# Controller side: waits that tell the user what they wait for.
#
# A module that waits inside one long call prints nothing until it returns, and
# Ansible may not even have printed the task's banner yet (display_skipped_hosts
# = False defers it). So every wait of the collection is an action plugin that
# calls a short, read-only module again and again and prints a progress line, at
# the latest every `say_every` seconds, naming the host and the task. When the
# controller is interrupted, nothing of the wait is left running on the node.
from __future__ import annotations

import time

from ansible.utils.display import Display

display = Display()

SAY_EVERY = 30


def duration(seconds):
    seconds = int(max(0, seconds))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%02ds" % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return "%dh%02dm" % (hours, rest // 60)


class Waiter:
    """Polls `call(module_name, module_args)` until `done(result)` is true, or a
    failed result, or `timeout` seconds. `describe(result)` gives the progress text.

    The callables default to an action plugin's own (see for_action); tests pass their own."""

    def __init__(self, call, say, clock=time.monotonic, sleep=time.sleep, say_every=SAY_EVERY):
        self.call = call
        self.say = say
        self.clock = clock
        self.sleep = sleep
        self.say_every = say_every

    @classmethod
    def for_action(cls, action, task_vars, say_every=SAY_EVERY):
        host = task_vars.get("inventory_hostname", "?")
        task = action._task.get_name()

        def call(module_name, module_args):
            return action._execute_module(module_name=module_name, module_args=module_args, task_vars=task_vars)

        def say(text):
            display.display("  [%s] %s: %s" % (host, task, text))

        return cls(call, say, say_every=say_every)

    def until(self, module_name, module_args, done, describe, timeout, interval):
        """(last result, seconds waited, timed out). Stops early on a failed result."""
        start = self.clock()
        said = None
        while True:
            result = self.call(module_name, module_args)
            waited = self.clock() - start
            if result.get("failed") or done(result):
                if said is not None:
                    self.say("%s (after %s)" % (describe(result), duration(waited)))
                return result, waited, False
            if waited >= timeout:
                return result, waited, True
            if said is None or self.clock() - said >= self.say_every:
                self.say("%s (waited %s of %s)" % (describe(result), duration(waited), duration(timeout)))
                said = self.clock()
            self.sleep(max(0.0, min(interval, timeout - waited)))
