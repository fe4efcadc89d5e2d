"""Shared artifacts after a failure: a conversion killed half way, a download cut half way."""
from __future__ import annotations

import glob
import json
import os

from default_bed import DATA, FIXTURES, control, site


def test_conversion_killed_half_way_then_rerun():
    mcore = DATA + "/LLMs/MCORE/Qwen3-8B_slime"
    kept = mcore + ".kept-by-test"
    os.rename(mcore, kept)
    try:
        control(convert_die_at="mid_shards")
        run = site("--tags", "convert")
        assert run.rc != 0
        assert "the conversion failed" in run.stdout and "First error in" in run.stdout
        aside = glob.glob(mcore + ".converting.interrupted-*")
        assert aside and "moved to " + aside[0].replace(DATA, "/data") in run.stdout.replace("\n", " ")
        control()
        again = site("--tags", "convert")
        assert again.rc == 0, again.stdout[-3000:]
        assert os.path.exists(mcore + "/release/metadata.json")
        assert open(mcore + "/latest_checkpointed_iteration.txt").read() == "release"
        assert glob.glob(mcore + ".converting.interrupted-*"), "the interrupted output is kept aside"
        third = site("--tags", "convert")
        assert third.rc == 0 and third.changed_hosts() == {}, third.changed_tasks()
    finally:
        control()
        if not os.path.exists(mcore):
            os.rename(kept, mcore)


def test_download_cut_half_way_then_rerun_completes():
    model = DATA + "/models/Qwen3-8B"
    os.rename(model, model + ".kept-by-test")
    serve_control = os.path.join(FIXTURES, ".serve-control.json")
    try:
        # The first response is cut after 500 bytes, then the server fails every request,
        # so this run ends with a partial download.
        with open(serve_control, "w") as handle:
            json.dump({"cut_after_bytes": 500, "cut_times": 1, "status_after_cuts": 503}, handle)
        run = site("--tags", "model")
        assert run.rc != 0
        assert "downloading Qwen/Qwen3-8B from http failed" in run.stdout
        assert os.path.isdir(model + ".partial") and not os.path.exists(model)
        assert glob.glob(model + ".partial/*.part"), "a partially downloaded file is kept for the rerun"
        os.remove(serve_control)
        again = site("--tags", "model")
        assert again.rc == 0, again.stdout[-3000:]
        assert os.path.exists(model + "/config.json") and not os.path.exists(model + ".partial")
        check = site("--tags", "model,convert")
        assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    finally:
        if os.path.exists(serve_control):
            os.remove(serve_control)
        if not os.path.exists(model):
            os.rename(model + ".kept-by-test", model)
