"""A save damaged while the job was down: the rerun resumes from the last complete iteration by itself.

Each check stops (or crashes) the job, damages the save dir the way a kill or a full disk does, reruns site.yml
and asserts: it converges unaided, the new attempt's first step is the chosen iteration + 1, the moved-aside paths
are printed, every file the save dir held is still there or under a printed aside path, and a job runs again.
The times are written to <molecule root>/check_25_timings.json (measured, not asserted)."""
from __future__ import annotations

import json
import os
import time
import urllib.request

from default_bed import API, DATA, ROOT, SAVE, active, control, first_step_of, ours, site, tracker, wait

SAVE_INTERVAL = 3  # molecule/default: slime_train_args_overrides save-interval
TIMINGS = os.path.join(ROOT, "check_25_timings.json")


def listing():
    found = []
    for base, _dirs, files in os.walk(SAVE):
        found.extend(os.path.relpath(os.path.join(base, name), SAVE) for name in files)
    return set(found)


def on_host(path):
    """A path as the container prints it (/data/...) on this machine."""
    return DATA + path[len("/data"):] if path.startswith("/data/") else path


def flat(text):
    return "".join(text.split())


def job_down(how):
    """Let the job save at least twice, then stop it (Ray's stop) or crash it; returns (job, tracker)."""
    job = wait(active, what="an active job")[-1]["submission_id"]
    wait(lambda: tracker() >= 2 * SAVE_INTERVAL - 1, timeout=180, what="two checkpoints")
    if how == "stop":
        request = urllib.request.Request(API + "/api/jobs/%s/stop" % job, b"", method="POST")
        urllib.request.urlopen(request, timeout=10).read()
    else:
        now = wait(tracker, what="the tracker")
        control(crash_at_step=now + SAVE_INTERVAL + 1)  # after the next save, before the one after
    wait(lambda: next((j for j in ours() if j["submission_id"] == job and j["status"] in ("STOPPED", "FAILED")),
                      None), timeout=120, what="the job to end")
    control()
    return job, tracker()


def rerun_and_check(name, job, chosen, removed_by_fault, before, started):
    """site.yml after the fault; the assertions every case shares. Returns the timings."""
    began = time.time()
    run = site()
    rerun_seconds = time.time() - began
    assert run.rc == 0, run.stdout[-4000:]
    results = run.results("Keep the experiment's training job")
    assert results and results[-1].get("resumed_from_iteration") == chosen, results[-1:]
    moved = results[-1]["resume"]["moved_to"]
    assert moved, results[-1]["resume"]
    for move in moved:
        assert flat(move["to"]) in flat(run.stdout), "the run printed where %s went" % move["path"]
        assert os.path.exists(on_host(move["to"]))
    aside = {os.path.relpath(on_host(m["path"]), SAVE): os.path.relpath(on_host(m["to"]), SAVE) for m in moved}
    lost = []
    for relative in sorted(before - removed_by_fault):
        owner = next((src for src in aside if relative == src or relative.startswith(src + os.sep)), None)
        where = aside[owner] + relative[len(owner):] if owner else relative
        if not os.path.exists(os.path.join(SAVE, where)):
            lost.append(relative)
    assert lost == [], "files neither in place nor under a printed aside path: %s" % lost
    new = wait(active, what="the new attempt")[-1]["submission_id"]
    assert new != job
    first = wait(lambda: first_step_of(new), timeout=180, what="the new attempt's first step")
    assert first == chosen + 1, (first, chosen)
    timings = {"case": name, "rerun_seconds": round(rerun_seconds, 1),
               "fault_to_first_step_seconds": round(time.time() - started, 1), "resumed_from": chosen,
               "moved": [m["to"] for m in moved]}
    recorded = []
    if os.path.exists(TIMINGS):
        with open(TIMINGS) as handle:
            recorded = json.load(handle)
    with open(TIMINGS, "w") as handle:
        json.dump([t for t in recorded if t["case"] != name] + [timings], handle, indent=1)
    print(timings)
    return timings


def iter_dir(iteration):
    return os.path.join(SAVE, "iter_%07d" % iteration)


def test_tracker_iteration_without_metadata_resumes_from_the_previous_one():
    job, last = job_down("stop")
    before = listing()
    started = time.time()
    os.remove(os.path.join(iter_dir(last), ".metadata"))
    rerun_and_check("no_metadata", job, last - SAVE_INTERVAL, {"iter_%07d/.metadata" % last}, before, started)


def test_torn_shards_of_the_tracker_iteration_are_moved_aside():
    job, last = job_down("stop")
    before = listing()
    started = time.time()
    shards = sorted(n for n in os.listdir(iter_dir(last)) if n.endswith(".distcp"))
    for shard, size in ((shards[0], 0), (shards[-1], 5)):
        with open(os.path.join(iter_dir(last), shard), "r+b") as handle:
            handle.truncate(size)
    rerun_and_check("torn_shards", job, last - SAVE_INTERVAL, set(), before, started)


def test_newest_iteration_without_its_data_cursor_resumes_from_one_with_it():
    job, last = job_down("crash")
    before = listing()
    started = time.time()
    cursor = "rollout/global_dataset_state_dict_%d.pt" % last
    os.remove(os.path.join(SAVE, cursor))
    timings = rerun_and_check("no_data_cursor", job, last - SAVE_INTERVAL, {cursor}, before, started)
    assert any(".no-data-state-" in path for path in timings["moved"]), timings
