"""The prepare flow (roles/prepare) end to end on this machine, without Docker: a fake artifact whose
producer is an async `sleep` (tests/integration/playbooks/prepare_flow/). Ctrl-C in the middle, then a
rerun that takes the dead run's lock over at once and adopts the producer; two runs started together
(one produces, the other waits with progress and only verifies); a live holder waited for, then given up
on after the lock timeout with who holds it; a caller that leaves out the role's contract, or hands it a producer
that did not run in the background, refused naming the option. The default scenario's check_30_prepare.py
does the same with the real conversion and download."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

from runner import REPO, ctrl_c

BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(REPO, "tests/integration/playbooks/prepare_flow/prepare_flow.yml")
CONTRACT_PLAYBOOK = os.path.join(REPO, "tests/integration/playbooks/prepare_flow/prepare_contract.yml")


def start(target, *extra, playbook=PLAYBOOK):
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), ANSIBLE_NOCOLOR="1")
    log = open(str(target) + ".%d.out" % time.monotonic_ns(), "w+")
    proc = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", playbook,
                             "-e", "fake_target=%s" % target, "-e", "slime_run_id=run-%d" % time.monotonic_ns(),
                             "-e", "ansible_python_interpreter=%s" % sys.executable]
                            + list(extra), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    proc.log = log.name
    return proc


def finish(proc, timeout=180):
    code = proc.wait(timeout=timeout)
    with open(proc.log) as handle:
        return code, handle.read().replace("\n", " ")


def holder(lock):
    try:
        with open(os.path.join(lock, "holder.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def until(predicate, proc, timeout=120):
    end = time.time() + timeout
    while time.time() < end:
        assert proc.poll() is None, open(proc.log).read()[-3000:]
        if predicate():
            return True
        time.sleep(0.2)
    raise AssertionError("timed out")


def starts(target):
    try:
        with open(str(target) + ".starts") as handle:
            return len(handle.read().split())
    except FileNotFoundError:
        return 0


def test_ctrl_c_then_the_rerun_takes_the_lock_over_and_adopts_the_producer(tmp_path):
    target = tmp_path / "artifact"
    lock = str(target) + ".lock"
    first = start(target, "-e", "fake_seconds=15")
    until(lambda: (holder(lock).get("doing_data") or {}).get("jid"), first)
    code = ctrl_c(first)
    assert code != 0 and holder(lock), "the interrupted run leaves its lock behind"
    began = time.time()
    code, text = finish(start(target))
    print("\n[test_prepare_flow] rerun after Ctrl-C: %.1f s (producer 15 s)" % (time.time() - began))
    assert code == 0, text[-3000:]
    assert "took over the lock" in text and "no longer runs" in text
    # Adopted: still running (waited for), or finished meanwhile (its output checked); never started again.
    adopted = "still runs" in text and "instead of starting a second one" in text
    assert adopted or "finished: checking its output" in text
    assert starts(target) == 1 and (target / "done").exists() and not os.path.exists(lock)
    assert not os.path.exists(str(target) + ".making")


def test_two_runs_together_one_produces_the_other_waits_and_verifies(tmp_path):
    target = tmp_path / "artifact"
    runs = [start(target, "-e", "fake_seconds=8"), start(target, "-e", "fake_seconds=8")]
    results = [finish(run) for run in runs]
    assert [code for code, dummy in results] == [0, 0], [text[-2000:] for dummy, text in results]
    assert starts(target) == 1, "one producer in all"
    waited = [text for dummy, text in results if "another run finished it while this one waited for the lock" in text]
    assert len(waited) == 1
    assert ("waiting for the lock %s.lock: held by run" % target) in waited[0]
    assert "doing: preparing the fake artifact" in waited[0] and "its process" in waited[0]


def test_a_live_holder_is_waited_for_then_given_up_on_naming_it(tmp_path):
    target = tmp_path / "artifact"
    lock = str(target) + ".lock"
    os.mkdir(lock)
    with open(os.path.join(lock, "holder.json"), "w") as handle:  # this test's process, alive
        json.dump({"token": "other/node9", "run_id": "other", "node": "node9", "controller": socket.gethostname(),
                   "controller_pid": os.getpid(), "since": time.time(), "renewed": time.time(), "lease": 300,
                   "doing": "converting, last: saving shard 3"}, handle)
    code, text = finish(start(target, "-e", "fake_lock_timeout=4"))
    # the lock timeout is 4 s; a loaded machine's module calls can stretch the wait by a second or two
    assert code != 0 and re.search(r"gave up after [4-9]s \(the lock timeout\)", text), text[-2000:]
    assert "held by run other of node node9" in text and "doing: converting, last: saving shard 3" in text
    assert holder(lock)["run_id"] == "other" and starts(target) == 0


def test_a_caller_that_leaves_out_the_contract_fails_naming_it_before_anything_runs(tmp_path):
    target = tmp_path / "artifact"
    code, text = finish(start(target, playbook=CONTRACT_PLAYBOOK))
    assert code != 0 and "missing required arguments: _prepare_done, _prepare_job" in text, text[-2000:]
    assert not os.path.exists(str(target) + ".lock") and not os.path.exists(str(target) + ".making")


def test_a_producer_outside_async_is_refused_naming_prepare_job_and_nothing_is_moved(tmp_path):
    target = tmp_path / "artifact"
    code, text = finish(start(target, "-e", "fake_foreground=true", "-e", "fake_seconds=0"))
    assert code != 0 and "_prepare_job: the registered result of the produce step's task has no ansible_job_id" in text
    assert not target.exists() and (tmp_path / "artifact.making" / "done").exists()
    assert not os.path.exists(str(target) + ".lock"), "the lock is given back"
