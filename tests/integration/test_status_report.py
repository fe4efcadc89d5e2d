"""status.yml end to end without Docker, driven from Python the way docs/status.md shows
(examples/status_from_python.py through ansible-runner), against the stand-in cluster of
status_bed.py: the JSON validates against docs/status.schema.json, the PNG has one curve
per metric and is not blank, the HTML page embeds it, and the example's exit code follows
the job."""
from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys

import jsonschema
import numpy
import pytest
from PIL import Image, ImageStat
from status_bed import REPO, make_bed

EXAMPLE = os.path.join(REPO, "examples", "status_from_python.py")
SCHEMA = json.load(open(os.path.join(REPO, "docs", "status.schema.json")))


@pytest.fixture
def bed(tmp_path):
    made = make_bed(tmp_path)
    yield made
    made.ray.close()


def example(bed, *args):
    status_file = os.path.join(bed.root, "status.json")
    proc = subprocess.run([sys.executable, EXAMPLE, "-i", bed.inventory, "--status-file", status_file, *args],
                          capture_output=True, text=True, timeout=600, check=False)
    data = json.load(open(status_file)) if os.path.exists(status_file) else None
    return proc, data


def test_status_from_python_reads_a_valid_status_and_the_picture(bed):
    proc, data = example(bed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    jsonschema.validate(data, SCHEMA)
    cluster = data["clusters"][0]
    assert cluster["job"]["status"] == "RUNNING" and cluster["last"]["step"] == 45
    assert [a["status"] for a in cluster["attempts"]] == ["FAILED", "RUNNING"]
    assert cluster["checkpoint"]["complete_iterations"][-1] == 44
    assert cluster["manifest"]["data"]["versions"]["ray"] == "2.60.0"
    assert cluster["tensorboard"]["command"].startswith("tensorboard --logdir ")
    assert cluster["line"] in proc.stdout and "picture %s" % cluster["report"]["png"] in proc.stdout

    image = Image.open(cluster["report"]["png"]).convert("RGB")
    assert max(ImageStat.Stat(image).var) > 100
    pixels = numpy.asarray(image, dtype=int)
    # Pixel columns holding each curve colour: the first curve of every panel is blue and runs across both
    # columns of panels; the pass@2, pass@4 and pass@8 curves cross the pass-rate panel (a legend swatch is ~2%).
    for color, share in (("#1f77b4", 0.6), ("#ff7f0e", 0.2), ("#2ca02c", 0.1), ("#d62728", 0.2)):
        want = numpy.array([int(color[i:i + 2], 16) for i in (1, 3, 5)])
        columns = (numpy.abs(pixels - want) <= 10).all(axis=-1).any(axis=0).sum()
        assert columns >= share * image.width, (color, columns)
    page = open(cluster["report"]["html"], encoding="utf-8").read()
    embedded = page.split('src="data:image/png;base64,', 1)[1].split('"', 1)[0]
    assert Image.open(io.BytesIO(base64.b64decode(embedded))).size == image.size
    assert "qwen3-8B-attempt-1" in page and "rollout/raw_reward: 1 value(s) were nan/inf" in page

    again, data2 = example(bed)
    assert again.returncode == 0 and data2["clusters"][0]["report"] == cluster["report"]


def test_the_exit_code_follows_the_job_and_the_report_can_be_skipped(bed):
    bed.ray.set_status("qwen3-8B-attempt-2", "FAILED")
    proc, data = example(bed, "--no-report")
    assert proc.returncode == 1 and "not running: localhost" in proc.stderr
    jsonschema.validate(data, SCHEMA)
    assert data["clusters"][0]["job"]["status"] == "FAILED" and data["clusters"][0]["report"] is None
    assert not os.path.exists(os.path.join(bed.rendered, "report"))


def test_ray_unreachable_still_writes_a_valid_status(bed):
    bed.ray.close()
    proc, data = example(bed, "--no-report")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    jsonschema.validate(data, SCHEMA)
    job = data["clusters"][0]["job"]
    assert job["status"] == "UNKNOWN" and "cannot list the jobs" in job["error"]
    assert data["clusters"][0]["last"]["step"] == 45, "the log is still read"
