"""The controller side of the run's report: the PNG (plugin_utils/report/plot.py), the HTML
page (report/html.py) and the status as data (report/status_doc.py) validated against
docs/status.schema.json, from the two-attempt fixture logs and fixtures of the shapes the
node modules return (ray_job state=status with interface 3's attempts, train_progress,
mcore_checkpoint expect=training, a slurped manifest)."""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
from pathlib import Path

import ckpt_layouts
import jsonschema
import numpy
import pytest
from PIL import Image, ImageStat

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_point
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import slime as slime_log
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.metric_series import experiment_series
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report import (
    html as report_html,
    plot as report_plot,
    status_doc,
)

DATA = Path(__file__).parents[1] / "data" / "report"
REPO = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    logs = tmp_path_factory.mktemp("logs")
    for path in sorted(DATA.glob("*.log.txt")):
        shutil.copy(path, logs / path.name[: -len(".txt")])
    return experiment_series(str(logs), "qwen3-8B", "qwen3-8B")


def image_of(png):
    return Image.open(io.BytesIO(png)).convert("RGB")


def pixels_near(image, color, tolerance=10):
    want = numpy.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=int)
    pixels = numpy.asarray(image, dtype=int)
    return int((numpy.abs(pixels - want) <= tolerance).all(axis=-1).sum())


def columns_with(image, color, tolerance=10):
    """How many pixel columns of `image` hold `color`: a curve over the run crosses most of its
    panel, a legend swatch only a few columns."""
    want = numpy.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=int)
    pixels = numpy.asarray(image, dtype=int)
    return int((numpy.abs(pixels - want) <= tolerance).all(axis=-1).any(axis=0).sum())


def assert_curves_drawn(png, info, share=0.5):
    image = image_of(png)
    assert (image.width, image.height) == (info["width"], info["height"])
    assert max(ImageStat.Stat(image).var) > 100, "the picture is not blank"
    for panel in info["panels"]:
        crop = image.crop(tuple(panel["bbox"]))
        assert max(ImageStat.Stat(crop).var) > 10, panel["title"]
        colors = [c["color"] for c in panel["curves"]]
        assert len(colors) == len(set(colors)), "one colour per curve in %s" % panel["title"]
        for curve in panel["curves"]:
            assert columns_with(crop, curve["color"]) >= share * crop.width, \
                "curve %s runs across its panel %s" % (curve["key"], panel["title"])


# -- the picture -----------------------------------------------------------------------------------
def test_the_png_has_one_curve_per_metric_across_both_attempts(metrics):
    png, info = report_plot.render_png(metrics["series"], metrics["attempts"], "qwen3-8B on localhost")
    assert png.startswith(b"\x89PNG")
    titles = [p["title"] for p in info["panels"]]
    assert titles[0].startswith("Reward") and titles[1].startswith("Pass rate")
    assert any(t.startswith("Eval aime24") for t in titles) and any(t.startswith("Eval aime25") for t in titles)
    drawn = sorted(c["key"] for p in info["panels"] for c in p["curves"])
    expected = sorted(k for k in metrics["series"] if k != "rollout/response_lengths")  # response_len/mean wins
    assert drawn == expected
    assert_curves_drawn(png, info)
    reward = next(c for p in info["panels"] for c in p["curves"] if c["key"] == "rollout/raw_reward")
    assert reward["non_finite"] == 1 and reward["superseded"] == 4 and reward["points"] == 45


def test_a_log_with_nan_values_renders_with_gaps(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = []
    for r in range(40):
        value = "nan" if r % 7 == 3 else ("inf" if r == 20 else "%.3f" % (0.1 + r / 100.0))
        lines.append("(MegatronTrainRayActor pid=3001) [2026-09-20 12:%02d:00] train_metric_utils.py:135 - rollout "
                     "%d: {'rollout/raw_reward': %s, 'rollout/response_lengths': nan}" % (r, r, value))
    (logs / "qwen3-8B.qwen3-8B-attempt-1.log").write_text("\n".join(lines) + "\n")
    metrics = experiment_series(str(logs), "qwen3-8B", "qwen3-8B")
    png, info = report_plot.render_png(metrics["series"], metrics["attempts"], "nan run")
    reward = info["panels"][0]["curves"][0]
    assert reward["non_finite"] == 7 and reward["points"] == 40
    assert_curves_drawn(png, {"width": info["width"], "height": info["height"], "panels": [info["panels"][0]]})
    crop = image_of(png).crop(tuple(info["panels"][0]["bbox"]))
    assert pixels_near(crop, "#000000", tolerance=40) > 20, "the gaps are marked"
    length = next(p for p in info["panels"] if p["title"].startswith("Response length"))
    assert length["curves"][0]["non_finite"] == 40, "a metric that is nan throughout still gets its panel"


def test_panels_without_data_say_so(tmp_path):
    png, info = report_plot.render_png({}, [], "nothing yet")
    assert all(p["empty"] for p in info["panels"])
    assert max(ImageStat.Stat(image_of(png)).var) > 10


def test_extra_metrics_get_a_panel_each(tmp_path, metrics):
    logs = Path(metrics["attempts"][0]["log"]).parent
    extra = experiment_series(str(logs), "qwen3-8B", "qwen3-8B", extra_metrics=["train/grad_norm"])
    png, info = report_plot.render_png(extra["series"], extra["attempts"], "x", extra_metrics=["train/grad_norm"])
    panel = info["panels"][-1]
    assert panel["title"] == "train/grad_norm" and panel["curves"][0]["points"] == 45
    assert_curves_drawn(png, {"width": info["width"], "height": info["height"], "panels": [panel]})


def test_attempt_labels_name_the_checkpoint_and_the_end():
    assert report_plot.attempt_label({"attempt": 2, "submission_id": "x", "loaded_iteration": 19,
                                      "status": "RUNNING"}) == "attempt 2 from iter 19, RUNNING"
    assert report_plot.attempt_label({"attempt": None, "submission_id": "qwen3-8B_20260920-120000",
                                      "loaded_iteration": 0}) == "qwen3-8B_20260920-120000"


# -- the status as data --------------------------------------------------------------------------------
def job_fixture(manifest="/w/manifests/qwen3-8B-attempt-2.json"):
    """ray_job state=status as interface 3 of the round's brief describes it."""
    return {
        "changed": False, "submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "RUNNING",
        "message": "Job is currently running.", "start_time": "2026-09-20T12:42:00.000Z", "end_time": None,
        "driver_exit_code": None, "dashboard_url": "http://127.0.0.1:8772", "manifest_file": manifest,
        "jobs": [], "active": ["qwen3-8B-attempt-2"],
        "attempts": [
            {"submission_id": "qwen3-8B-attempt-1", "attempt": 1, "status": "FAILED",
             "submitted_at": "2026-09-20T12:00:00Z", "ended_at": "2026-09-20T12:27:00Z", "first_step": 1,
             "last_step": 23, "exception": "RuntimeError: MUSA error: an illegal memory access was encountered",
             "hint": "A device kernel failed (FAQ Q2).", "resumed_from_iteration": None, "data_state": None,
             "log": "/w/logs/qwen3-8B.qwen3-8B-attempt-1.log"},
            {"submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "RUNNING",
             "submitted_at": "2026-09-20T12:40:00Z", "ended_at": None, "first_step": 20, "last_step": None,
             "exception": None, "hint": None, "resumed_from_iteration": 19, "data_state": True,
             "log": "/w/logs/qwen3-8B.qwen3-8B-attempt-2.log"},
        ],
        "crash_loop": {"count": 1, "step": 23, "limit": 2},
    }


def checkpoint_fixture(tmp_path):
    """What mcore_checkpoint expect=training returns for a save dir whose newest iteration (19) lacks its data
    cursor: a resume loads 14."""
    save = tmp_path / "save"
    for number in (4, 9, 14, 19):
        ckpt_layouts.ckpt_dir(save / ("iter_%07d" % number))  # real torch_dist metadata
        if number != 19:
            ckpt_layouts.data_state(str(save), number)
    (save / "latest_checkpointed_iteration.txt").write_text("19")
    found = mcore.inspect_checkpoint(str(save), expect="training")
    return dict(found, resume_iteration=resume_point(str(save))), str(save)


def status_fixture(tmp_path, job=None, progress=None, manifest=None, checkpoint="make"):
    if checkpoint == "make":
        checkpoint, save = checkpoint_fixture(tmp_path)
    else:
        save = str(tmp_path / "save")
    if progress is None:
        progress = slime_log.summarize_file(str(DATA / "qwen3-8B.qwen3-8B-attempt-2.log.txt"))
        progress["source"] = "/w/logs/qwen3-8B.log"
    if manifest is None:
        manifest = {"content": base64.b64encode(json.dumps({"experiment": "qwen3-8B", "image": "img@sha256:1"})
                                                .encode()).decode(), "source": "/w/manifests/x.json"}
    board = status_doc.tensorboard_part("/w/qwen3-8b tensorboard", 6006, "slime_rl", "10.0.0.5", "alice", 62216)
    return status_doc.cluster_status(
        job=job_fixture() if job is None else job, progress=progress, checkpoint=checkpoint, manifest=manifest,
        cluster={"name": "c1", "head": "node1", "nodes": ["node1", "node2"]}, head="node1", experiment="qwen3-8B",
        log_file="/w/logs/qwen3-8B.log", save_dir=save, tensorboard=board)


def validate(document):
    text = json.dumps(document, allow_nan=False)  # no NaN numbers may reach the JSON
    jsonschema.validate(json.loads(text), SCHEMA)


def test_the_status_json_validates_against_the_schema(tmp_path):
    cluster = status_fixture(tmp_path)
    document = status_doc.document([cluster], generated_at="2026-12-01T10:00:00Z")
    validate(document)
    assert document["schema_version"] == status_doc.SCHEMA_VERSION == SCHEMA["properties"]["schema_version"]["const"]
    assert cluster["attempts"][0]["exception"].startswith("RuntimeError") and cluster["crash_loop"]["count"] == 1
    assert cluster["last"]["step"] == 45 and cluster["last"]["eval"]["aime24"]["pass_at_k"]["pass@8"] > 0
    assert cluster["checkpoint"]["resume_iteration"] == 14 and cluster["checkpoint"]["latest_iteration"] == 19
    assert ", checkpoint 14" in cluster["line"]
    assert cluster["manifest"]["data"]["image"] == "img@sha256:1"
    assert cluster["line"].startswith("c1: qwen3-8B-attempt-2 RUNNING, step 45, reward 0.603")
    assert "crash loop 1/2 at step 23" in cluster["line"]
    assert ("qwen3-8B-attempt-1 FAILED after step 23: RuntimeError: MUSA error: an illegal memory access was "
            "encountered") in cluster["line"]


def test_what_could_not_be_read_still_validates_and_says_why(tmp_path):
    cluster = status_fixture(
        # status.yml reads with failed_when: false, so Ansible hands over failed: false and the module's msg
        tmp_path, job={"failed": False, "failed_when_result": False,
                       "msg": "ray_job: cannot list the jobs at http://127.0.0.1:8772", "status": None},
        progress={"failed": True, "msg": "train_progress: log_file /w/logs/qwen3-8B.log does not exist (yet)"},
        manifest={"skipped": True}, checkpoint={"skipped": True, "skip_reason": "Conditional result was False"})
    validate(status_doc.document([cluster]))
    assert cluster["job"]["status"] == "UNKNOWN" and "cannot list the jobs" in cluster["job"]["error"]
    assert "does not exist" in cluster["last"]["error"] and cluster["attempts"] == []
    assert "cannot list the jobs" in cluster["line"]


def test_a_head_without_a_running_container_has_no_job_and_the_line_names_each_node(tmp_path):
    skipped = {"skipped": True, "skip_reason": "Conditional result was False"}
    cluster = status_doc.cluster_status(
        job=skipped, progress=skipped, checkpoint=skipped, manifest=skipped,
        cluster={"name": "c1", "head": "node1", "nodes": ["node1", "node2", "node3"]}, head="node1",
        experiment="qwen3-8B", log_file="/w/logs/qwen3-8B.log", save_dir="/data/ckpt",
        containers={"node1": "absent", "node2": "exited", "node3": "running"})
    validate(status_doc.document([cluster]))
    assert cluster["containers"] == {"node1": "absent", "node2": "exited", "node3": "running"}
    assert cluster["job"]["status"] == "NONE" and cluster["job"]["error"] is None
    assert cluster["job"]["message"] == "no training container on node1: no Ray and no job run there"
    assert cluster["last"]["error"] == "the log (train_progress) was not read (no training container on node1)"
    assert cluster["checkpoint"]["error"] == "the save dir (mcore_checkpoint) was not read (no training container " \
                                             "on node1)"
    assert cluster["line"] == ("c1: no job NONE, step -, reward -, pass@1 -, eval -, tokens/s -, no training "
                               "container on node1; the training container of node2 is exited, not running")


@pytest.mark.parametrize("state", ["running", "node", "unknown"])
def test_a_head_whose_stages_can_run_is_read_as_before(tmp_path, state):
    cluster = status_fixture(tmp_path)
    with_state = status_doc.cluster_status(
        job=job_fixture(), progress={"skipped": True}, cluster={"name": "c1", "head": "node1", "nodes": ["node1"]},
        head="node1", experiment="qwen3-8B", containers={"node1": state})
    validate(status_doc.document([with_state]))
    assert with_state["job"] == cluster["job"] and with_state["containers"] == {"node1": state}
    assert with_state["last"]["error"] == "the log (train_progress) was not read (skipped)"
    assert cluster["containers"] is None  # not given: not read


def test_an_older_ray_job_without_attempts_gives_them_from_its_jobs(tmp_path):
    job = job_fixture()
    del job["attempts"], job["crash_loop"]
    job["jobs"] = [{"submission_id": "qwen3-8B-attempt-1", "attempt": 1, "status": "FAILED",
                    "start_time": "2026-09-20T12:00:00Z", "end_time": "2026-09-20T12:27:00Z"}]
    cluster = status_fixture(tmp_path, job=job)
    validate(status_doc.document([cluster]))
    assert cluster["attempts"][0]["ended_at"] == "2026-09-20T12:27:00Z" and cluster["crash_loop"] is None


def test_nan_last_values_become_strings(tmp_path):
    progress = slime_log.summarize_text(
        "(MegatronTrainRayActor pid=1) [2026-09-20 10:00:00] x.py:1 - rollout 3: {'rollout/raw_reward': nan}\n"
        "(MegatronTrainRayActor pid=1) [2026-09-20 10:00:00] x.py:1 - passrate 3: {'passrate/pass@1': inf}\n")
    cluster = status_fixture(tmp_path, progress=progress)
    validate(status_doc.document([cluster]))
    assert cluster["last"]["reward"] == "nan" and cluster["last"]["pass_at_k"] == {"pass@1": "inf"}


def test_tensorboard_command_and_tunnel_are_quoted():
    board = status_doc.tensorboard_part("/w/qwen3-8b tensorboard", 6006, "slime_rl", "10.0.0.5", "alice", 62216)
    assert board["command"] == "docker exec -it slime_rl tensorboard --logdir '/w/qwen3-8b tensorboard' " \
                               "--host 127.0.0.1 --port 6006"
    assert board["tunnel"] == "ssh -p 62216 -N -L 6006:127.0.0.1:6006 alice@10.0.0.5"
    assert status_doc.tensorboard_part("/t", ssh_host=None)["tunnel"].endswith("<user>@<head>")


# -- the page -------------------------------------------------------------------------------------------
def test_the_page_embeds_the_picture_and_the_status_tables(tmp_path, metrics):
    cluster = status_fixture(tmp_path)
    cluster["attempts"][0]["exception"] = "RuntimeError: <script>alert(1)</script>"
    png, info = report_plot.render_png(metrics["series"], metrics["attempts"], "t")
    text = report_html.page(cluster, png, metrics, info, "qwen3-8B on c1")
    assert 'src="data:image/png;base64,%s"' % base64.b64encode(png).decode() in text
    assert "<script>" not in text and "&lt;script&gt;" in text
    for word in ("qwen3-8B-attempt-1", "qwen3-8B-attempt-2", "FAILED", "RUNNING", "1-23", "20-45",
                 "rollout/raw_reward: 1 value(s) were nan/inf", "ssh -p 62216", "img@sha256:1", "Checkpoints"):
        assert word in text, word
    path = tmp_path / "page.html"
    path.write_text(text)
    assert os.path.getsize(path) > len(png)


def test_a_long_run_gets_a_running_mean_over_its_faint_values():
    assert report_plot.smoothing_window(45) is None and report_plot.smoothing_window(3000) == 61
    mean = report_plot.running_mean([1.0, 2.0, float("nan"), 4.0, 5.0], 3)
    assert list(mean[:2]) == [1.5, 1.5] and numpy.isnan(mean[2]) and list(mean[3:]) == [4.5, 4.5]
    assert numpy.isnan(report_plot.running_mean([float("nan")] * 4, 3)).all()
    points = [[r, 0.2 + 0.5 * r / 600.0, 0] for r in range(600)]
    series = {"rollout/raw_reward": {"kind": "rollout", "axis": "rollout", "points": points, "superseded": [],
                                     "count": 600, "non_finite": 0, "downsampled": None}}
    png, info = report_plot.render_png(series, [{"index": 0, "attempt": 1, "submission_id": "a", "first_rollout": 0,
                                                 "first_step": 0}], "long")
    assert_curves_drawn(png, {"width": info["width"], "height": info["height"], "panels": [info["panels"][0]]}, 0.8)
