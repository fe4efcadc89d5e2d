"""The prepare flow after the faults a user meets (issue 11): Ctrl-C of ansible-playbook in the middle of the
conversion and of the model download, and two runs started together that both need the conversion.
Each rerun must converge by itself: take the dead run's lock over at once (not wait out a timeout), adopt the
work still running instead of starting a second one, leave one copy, and keep every file that was there (or
move it aside to a path it printed). The times are printed (pytest -s), not asserted."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from default_bed import DATA, FIXTURES, INVENTORY, MCORE, MODEL, ROOT, control, in_container, site, wait
from runner import REPO, ctrl_c

BIN = os.path.dirname(sys.executable)
CONVERT_LOG_GLOB = "/home/slime/tools/Qwen3-8B_slime.*.log"


def playbook(*args):
    """ansible-playbook site.yml as a user runs it (its own process group, like a terminal's job)."""
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"), ANSIBLE_NOCOLOR="1")
    out = tempfile.NamedTemporaryFile("w+", prefix="mtslime-prepare-", suffix=".log", delete=False)
    proc = subprocess.Popen([os.path.join(BIN, "ansible-playbook"), "-i", os.path.join(REPO, INVENTORY),
                             os.path.join(REPO, "site.yml")] + list(args),
                            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    proc.out = out.name
    return proc


def output(proc):
    with open(proc.out, errors="replace") as handle:
        return handle.read()


def holder(lock):
    try:
        with open(os.path.join(lock, "holder.json")) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def producing(lock):
    """The lock's holder says it waits for its producer (an async job)."""
    record = holder(lock) or {}
    return (record.get("doing_data") or {}).get("jid")


def siblings(path):
    parent = os.path.dirname(path)
    return {os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(os.path.basename(path))}


def processes_in_container():
    """The command lines of the container's processes (from /proc: the image may have no ps)."""
    found = in_container("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done")
    return [line for line in found.stdout.splitlines() if line.strip()]


def waiters_in_container():
    """Processes of the collection's lock or wait modules left in the container."""
    return [line for line in processes_in_container() if "AnsiballZ_storage_lock" in line
            or "AnsiballZ_async_progress" in line]


def convert_attempts():
    return set(in_container("ls %s 2>/dev/null" % CONVERT_LOG_GLOB).stdout.split())


def stash(path):
    """Move the test bed's copy away (the test's own move), so the run has work to do."""
    kept = "%s.kept-by-check-30-prepare-%d" % (path, time.time())
    os.rename(path, kept)
    return kept


def unstash(path, kept):
    if os.path.exists(path):
        shutil.rmtree(kept)  # the run made a new, checked copy; the test's own stash goes
    else:
        os.rename(kept, path)


def report(what, seconds):
    print("\n[check_30_prepare] %s: %.1f s" % (what, seconds))


def test_ctrl_c_during_the_conversion_then_the_rerun_adopts_it():
    kept = stash(MCORE)
    lock = MCORE + ".lock"
    try:
        before = siblings(MCORE)
        attempts = convert_attempts()
        control(convert_seconds=24)
        first = playbook("--tags", "convert")
        wait(lambda: producing(lock), timeout=180, what="the conversion to start under the lock")
        time.sleep(3)
        assert ctrl_c(first) != 0
        assert holder(lock), "the interrupted run left its lock (it is dead, the next run takes it over)"
        assert any("convert_hf_to_torch_dist" in line for line in processes_in_container()), "the work goes on"
        assert waiters_in_container() == [], "no waiting process of the dead run is left in the container"
        started = time.time()
        again = site("--tags", "convert")
        took = time.time() - started
        report("rerun after Ctrl-C in the conversion (conversion 24 s)", took)
        assert again.rc == 0, again.stdout[-3000:]
        text = again.stdout.replace("\n", " ")
        assert "took over the lock" in text and "no longer runs" in text
        assert "still runs" in text or "finished: checking its output" in text, text[-3000:]
        assert again.results("Start the conversion") == [], "the rerun started no second conversion"
        assert len(convert_attempts() - attempts) == 1, "one conversion in all"
        assert os.path.exists(MCORE + "/release/metadata.json") and not os.path.exists(lock)
        assert siblings(MCORE) - before - {MCORE} == set(), "no second copy: %s" % (siblings(MCORE) - before)
        assert all(os.path.exists(p) for p in before - {lock}), "every file that was there is still there"
    finally:
        control()
        unstash(MCORE, kept)


def test_ctrl_c_during_the_download_then_the_rerun_adopts_it():
    kept = stash(MODEL)
    lock = MODEL + ".lock"
    slow = os.path.join(ROOT, "slow-fixtures")
    shutil.rmtree(slow, ignore_errors=True)
    shutil.copytree(os.path.join(FIXTURES, "Qwen"), os.path.join(slow, "Qwen"))
    with open(os.path.join(slow, ".serve-control.json"), "w") as handle:
        json.dump({"bytes_per_second": 6000}, handle)
    server = subprocess.Popen([sys.executable, os.path.join(REPO, "tests/fixtures/serve.py"), slow, "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        base = server.stdout.readline().strip().rstrip("/")
        url = "-e model_http_url=%s/Qwen/Qwen3-8B/resolve/main" % base
        before = siblings(MODEL)
        first = playbook("--tags", "model", *url.split(" ", 1))
        wait(lambda: producing(lock), timeout=180, what="the download to start under the lock")
        time.sleep(3)
        assert ctrl_c(first) != 0
        assert holder(lock) and os.path.isdir(MODEL + ".partial")
        assert waiters_in_container() == []
        started = time.time()
        again = site("--tags", "model", url)
        took = time.time() - started
        report("rerun after Ctrl-C in the download (download about 20 s)", took)
        assert again.rc == 0, again.stdout[-3000:]
        text = again.stdout.replace("\n", " ")
        assert "took over the lock" in text and ("still runs" in text or "finished: checking its output" in text)
        assert again.results("Download the model files") == [], "the rerun started no second download"
        assert os.path.exists(MODEL + "/config.json") and not os.path.exists(MODEL + ".partial")
        assert siblings(MODEL) - before - {MODEL} == set()
        assert all(os.path.exists(p) for p in before - {lock, MODEL + ".partial"})
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
        shutil.rmtree(slow, ignore_errors=True)
        unstash(MODEL, kept)


def test_two_runs_that_both_need_the_conversion_convert_once():
    kept = stash(MCORE)
    try:
        before = siblings(MCORE)
        attempts = convert_attempts()
        control(convert_seconds=40)
        started = time.time()
        runs = [playbook("--tags", "convert"), playbook("--tags", "convert")]
        codes = [run.wait(timeout=900) for run in runs]
        took = time.time() - started
        report("two runs started together, both needing the conversion (conversion 40 s)", took)
        texts = [output(run).replace("\n", " ") for run in runs]
        assert codes == [0, 0], [t[-2000:] for t in texts]
        assert len(convert_attempts() - attempts) == 1, "one conversion in all"
        converted = [t for t in texts if "Start the conversion" in t]
        verified = [t for t in texts if "another run finished it while this one waited for the lock" in t]
        assert len(converted) == 1 and len(verified) == 1, [t[-2000:] for t in texts]
        assert "waiting for the lock %s.lock: held by run" % MCORE.replace(DATA, "/data") in verified[0]
        assert "doing:" in verified[0]
        assert siblings(MCORE) - before - {MCORE} == set(), "no second copy"
        assert os.path.exists(MCORE + "/release/metadata.json")
    finally:
        control()
        unstash(MCORE, kept)


def test_a_missing_data_file_is_extracted_again_the_others_stay():
    data = DATA + "/models/data"
    victim = data + "/aime_2025.parquet"
    kept = stash(victim)
    try:
        before = set(os.listdir(data))
        started = time.time()
        again = site("--tags", "data")
        report("rerun of the data with a file missing", time.time() - started)
        assert again.rc == 0, again.stdout[-3000:]
        assert os.path.exists(victim) and open(victim, "rb").read() == open(kept, "rb").read()
        assert set(os.listdir(data)) == before | {os.path.basename(victim)}, "identical files stay, none aside"
        assert not os.path.exists(data + ".lock") and not os.path.exists(data + "/.mtslime-extract")
    finally:
        if os.path.exists(victim):
            os.remove(kept)
        else:
            os.rename(kept, victim)
