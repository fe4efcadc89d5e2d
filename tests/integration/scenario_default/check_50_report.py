"""Watching and keeping the run (issue 16): status.yml writes the picture, the page and a
status.json that validates against its schema, for the default scenario's run (several
attempts by then: the retention check below stops and resubmits the job twice, and in the
full verify check_20 has crashed, killed and stopped it before); and site.yml with save-interval 1
and train_job_keep_checkpoints 3 keeps 3 (plus what the rule protects) through the train_job role's
retention task, after `--check --tags retention` predicted it without moving anything.
Set MTSLIME_REVIEW_DIR to keep a copy of the picture and the page."""
from __future__ import annotations

import base64
import glob
import io
import json
import os
import re
import shutil
import sys

import numpy
from default_bed import INVENTORY, ROOT, SAVE, active, ours, run_playbook, site, tracker, wait
from PIL import Image, ImageStat

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA = os.path.join(REPO, "docs", "status.schema.json")
KEEP = 3
RETENTION = "Keep the newest train_job_keep_checkpoints"  # the train_job role's task


def _complete():
    found = []
    for path in glob.glob(os.path.join(SAVE, "iter_*")):
        name = re.fullmatch(r"iter_(\d+)", os.path.basename(path))  # not what a resume moved aside
        if name and os.path.exists(os.path.join(path, "metadata.json")):
            found.append(int(name.group(1)))
    return sorted(found)


def test_save_interval_one_with_keep_three_keeps_three():
    every = {"slime_train_args_overrides": {"save-interval": 1}, "train_job_keep_checkpoints": KEEP}
    assert run_playbook("playbooks/stop.yml", INVENTORY).rc == 0
    try:
        run = run_playbook("site.yml", INVENTORY, extravars=every)
        assert run.rc == 0, run.stdout[-3000:]
        job = wait(active, what="the attempt with save-interval 1")[-1]
        resumed = int(job["metadata"].get("mtslime_resumed_from") or 0)
        wait(lambda: tracker() >= resumed + KEEP + 3, timeout=120, what="saves after every rollout")
        before = set(_complete())
        predicted = run_playbook("site.yml", INVENTORY, "--check", "--tags", "retention", extravars=every)
        assert predicted.rc == 0, predicted.stdout[-3000:]
        guess = next(r for r in predicted.results(RETENTION) if "kept" in r)
        assert all(a.startswith("would ") for a in guess["actions"]), guess
        assert set(_complete()) >= before, "check mode moves nothing"
        result = None
        for dummy in range(5):  # a save caught in progress blocks pruning; the next run prunes
            run = run_playbook("site.yml", INVENTORY, extravars=every)
            assert run.rc == 0, run.stdout[-3000:]
            result = next(r for r in run.results(RETENTION) if "kept" in r)
            if result["pruned"]:
                break
        assert result["pruned"], result
        newest = [i for i in result["kept"] if "one of the newest %d" % KEEP in result["protected"][str(i)]]
        assert len(newest) == KEEP, result
        extra = set(result["kept"]) - set(newest)
        resume = {i for i in result["kept"] if "a resume would load it" in result["protected"][str(i)]}
        assert len(resume) == 1, "the iteration a resume loads is kept: %s" % result["protected"]
        assert extra <= {resumed} | resume, "only what the rule protects is kept beyond the newest 3: %s" % (
            result["protected"])
        left = set(_complete())
        assert not left & set(result["pruned"]), "pruned iterations are gone from the save dir"
        assert set(result["kept"]) <= left
        trash = sorted(os.listdir(SAVE + ".trash"))
        for iteration in result["pruned"]:
            assert any(n.startswith("iter_%07d.pruned-" % iteration) for n in trash), (iteration, trash)
        sys.stdout.write("retention: kept %s, pruned %d iterations, %s\n"
                         % (result["kept"], len(result["pruned"]), result["message"]))
    finally:
        # back to the scenario's job (save-interval 3, keep everything)
        assert run_playbook("playbooks/stop.yml", INVENTORY).rc == 0
        restored = site()
        assert restored.rc == 0, restored.stdout[-3000:]
        wait(active, what="the scenario's job again")
        assert any(j["status"] == "RUNNING" for j in ours())


def test_status_writes_the_picture_and_the_page_of_the_run():
    import jsonschema

    wait(lambda: tracker() >= 2, what="a checkpoint")
    run = run_playbook("playbooks/status.yml", INVENTORY)
    assert run.rc == 0, run.stdout[-3000:]
    with open(ROOT + "/rendered/status.json") as handle:
        status = json.load(handle)
    with open(SCHEMA) as handle:
        jsonschema.validate(status, json.load(handle))
    cluster = status["clusters"][0]
    assert cluster["job"]["status"] == "RUNNING" and len(cluster["attempts"]) >= 2, cluster["attempts"]
    assert cluster["checkpoint"]["state"] == "complete" and cluster["manifest"]["data"]
    assert "tensorboard" in cluster["tensorboard"]["command"] and cluster["tensorboard"]["tunnel"].startswith("ssh ")
    png, page = cluster["report"]["png"], cluster["report"]["html"]
    said = [i.get("msg") or "" for r in run.results("Say where the pictures") for i in r.get("results", [r])]
    assert any("picture %s, page %s" % (png, page) in msg for msg in said), said

    image = Image.open(png).convert("RGB")
    assert max(ImageStat.Stat(image).var) > 100
    pixels = numpy.asarray(image, dtype=int)
    blue = (numpy.abs(pixels - numpy.array([0x1F, 0x77, 0xB4])) <= 10).all(axis=-1).any(axis=0).sum()
    assert blue >= 0.6 * image.width, "the first curve of each panel runs across the panels"
    text = open(page, encoding="utf-8").read()
    embedded = text.split('src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert Image.open(io.BytesIO(base64.b64decode(embedded))).size == image.size
    for attempt in cluster["attempts"]:
        assert attempt["submission_id"] in text
    review = os.environ.get("MTSLIME_REVIEW_DIR")
    if review:
        os.makedirs(review, exist_ok=True)
        for path in (png, page, ROOT + "/rendered/status.json"):
            shutil.copy(path, review)
