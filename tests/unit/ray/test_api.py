"""module_utils/ray/api.py against the fake Ray 2.60 dashboard of fake_ray.py
(the `fake` and `gcs` fixtures of conftest.py)."""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import api as ray_api
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import (
    PORT_HINT,
    RayApiError,
    RayClient,
    build_package,
    collect_files,
    normalize_url,
    parse_hostport,
    probe_port,
)

from fake_ray import GCS_REPLY, JOB_TEMPLATE, RECORDED, FakeRay, free_port, node


# -- the recorded samples -----------------------------------------------------------
def test_recorded_samples_have_the_measured_shapes():
    assert RECORDED["job_404"]["status"] == 404 and RECORDED["job_404"]["content_type"].startswith("text/plain")
    assert RECORDED["submit_duplicate"]["status"] == 500 and "already exists" in RECORDED["submit_duplicate"]["body"]
    assert RECORDED["submit_missing_entrypoint"]["status"] == 400
    assert RECORDED["stop_finished"]["body"] == '{"stopped": false}'
    assert json.loads(RECORDED["stop_running"]["body"]) == {"stopped": True}
    assert RECORDED["package_get_missing"]["status"] == 404 and RECORDED["package_put"]["status"] == 200
    assert RECORDED["package_get_present"]["status"] == 200
    for name in ("job_pending", "job_running", "job_succeeded", "job_failed", "job_stopped"):
        assert set(JOB_TEMPLATE) == set(json.loads(RECORDED[name]["body"])), name
    failed = json.loads(RECORDED["job_failed"]["body"])
    assert failed["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR" and failed["driver_exit_code"] == 3
    wd = json.loads(RECORDED["job_working_dir_succeeded"]["body"])
    assert wd["runtime_env"]["working_dir"].startswith("gcs://_ray_pkg_") and wd["status"] == "SUCCEEDED"
    assert "marker-content" in json.loads(RECORDED["logs_working_dir"]["body"])["logs"]
    assert ray_api.looks_like_grpc(GCS_REPLY)


# -- URLs and addresses -------------------------------------------------------------
def test_normalize_url_adds_the_scheme_and_rejects_others():
    assert normalize_url("127.0.0.1:8772/") == "http://127.0.0.1:8772"
    assert normalize_url("http://10.0.0.1:8772") == "http://10.0.0.1:8772"
    with pytest.raises(ValueError, match="dashboard_url.*ray"):
        normalize_url("ray://127.0.0.1:10001")
    with pytest.raises(ValueError, match="empty"):
        normalize_url("")


def test_parse_hostport():
    assert parse_hostport("10.0.0.1:64379") == ("10.0.0.1", 64379)
    assert parse_hostport("[::1]:64379") == ("::1", 64379)
    with pytest.raises(ValueError, match="no port"):
        parse_hostport("10.0.0.1")
    with pytest.raises(ValueError, match="is a URL"):
        parse_hostport("http://10.0.0.1:8772")


# -- cluster endpoints -----------------------------------------------------------------
def test_version_and_gcs_healthz(fake):
    client = RayClient(fake.url)
    assert client.version()["ray_version"] == "2.60.0"
    assert client.gcs_healthz() is True
    fake.healthz = "failed"
    assert client.gcs_healthz() is False


def test_nodes_from_the_state_api(fake):
    fake.nodes = [node("10.0.0.1", head=True), node("10.0.0.2", gpus=4, state="DEAD")]
    nodes = RayClient(fake.url).nodes()
    assert [(n["ip"], n["alive"], n["is_head"], n["resources"]["GPU"]) for n in nodes] == [
        ("10.0.0.1", True, True, 8.0),
        ("10.0.0.2", False, False, 4.0),
    ]
    assert ("GET", "/api/v0/nodes?limit=10000&detail=false") in fake.requests


def test_nodes_fall_back_to_the_summary_view(fake):
    fake.state_api = False
    fake.nodes = [node("10.0.0.1", head=True, cpus=32)]
    nodes = RayClient(fake.url).nodes()
    assert nodes[0]["ip"] == "10.0.0.1" and nodes[0]["resources"] == {"GPU": 8.0, "CPU": 32.0} and nodes[0]["is_head"]
    assert ("GET", "/nodes?view=summary") in fake.requests


def test_real_recorded_node_documents_parse():
    state = json.loads(RECORDED["state_nodes"]["body"])["data"]["result"]["result"][0]
    summary = json.loads(RECORDED["nodes_summary"]["body"])["data"]["summary"][0]
    a = ray_api._node_from_state_api(state)
    b = ray_api._node_from_summary(summary)
    assert a["ip"] == b["ip"] == "192.0.2.2"
    assert a["resources"] == b["resources"] == {"GPU": 8.0, "CPU": 4.0}
    assert a["alive"] and b["alive"] and a["is_head"] and b["is_head"]


# -- jobs -----------------------------------------------------------------------------
def test_get_job_is_none_on_404(fake):
    assert RayClient(fake.url).get_job("nope") is None


def test_submit_gets_first_and_posts_once(fake):
    client = RayClient(fake.url)
    first = client.submit_job(
        "python3 train.py", "exp-attempt-1", runtime_env={"env_vars": {"A": "1"}}, metadata={"n": 1}
    )
    assert first["submitted"] and not first["duplicate"] and first["job"]["status"] == "PENDING"
    assert fake.jobs["exp-attempt-1"]["metadata"] == {"n": "1"}
    second = client.submit_job("python3 train.py", "exp-attempt-1")
    assert second == {
        "submitted": False,
        "duplicate": True,
        "submission_id": "exp-attempt-1",
        "job": fake.jobs["exp-attempt-1"],
    }
    assert len(fake.submitted()) == 1


def test_a_500_already_exists_is_a_duplicate_not_a_retry(fake, monkeypatch):
    client = RayClient(fake.url)
    fake.add_job("exp-attempt-1", "RUNNING")
    real_get = client.get_job
    calls = []

    def get_job(sid):  # the job appears between the GET and the POST (a concurrent submitter)
        calls.append(sid)
        return None if len(calls) == 1 else real_get(sid)

    monkeypatch.setattr(client, "get_job", get_job)
    answer = client.submit_job("python3 train.py", "exp-attempt-1")
    assert answer["duplicate"] and not answer["submitted"] and answer["job"]["status"] == "RUNNING"
    assert len(fake.submitted()) == 1  # one POST, answered 500, not retried


def test_errors_carry_url_status_and_the_text_body(fake):
    client = RayClient(fake.url)
    with pytest.raises(RayApiError) as info:
        client.request("POST", "/api/jobs/", body={"submission_id": "x"})
    error = info.value
    assert error.status == 400 and error.url == fake.url + "/api/jobs/" and error.method == "POST"
    assert "missing 1 required positional argument: 'entrypoint'" in error.summary
    assert "HTTP 400" in str(error) and fake.url in str(error)
    assert error.to_dict()["body"].startswith("Traceback")
    with pytest.raises(RayApiError) as info:
        client.stop_job("nope")
    assert info.value.status == 404 and info.value.summary == "Job nope does not exist"
    with pytest.raises(RayApiError) as info:
        client.job_logs("nope")
    assert info.value.status == 404


def test_stop_and_logs(fake):
    client = RayClient(fake.url)
    fake.add_job("exp-attempt-1", "RUNNING")
    fake.logs["exp-attempt-1"] = "hello\n"
    assert client.job_logs("exp-attempt-1") == "hello\n"
    assert client.stop_job("exp-attempt-1") is True
    client.get_job("exp-attempt-1")
    assert client.get_job("exp-attempt-1")["status"] == "STOPPED"
    assert client.stop_job("exp-attempt-1") is False


def test_list_jobs(fake):
    fake.add_job("a", "SUCCEEDED")
    fake.add_job("b", "FAILED")
    assert [j["submission_id"] for j in RayClient(fake.url).list_jobs()] == ["a", "b"]


# -- port confusion (FAQ Q1) --------------------------------------------------------
def test_the_gcs_port_given_as_dashboard_is_recognised(gcs):
    with pytest.raises(RayApiError) as info:
        RayClient("http://127.0.0.1:%d" % gcs.port, timeout=3).version()
    error = info.value
    assert error.kind == "protocol" and "GCS port" in error.message
    assert error.hint == PORT_HINT and "8772" in str(error) and "64379" in str(error)


def test_nothing_listening_gives_the_down_hint():
    port = free_port()
    with pytest.raises(RayApiError) as info:
        RayClient("http://127.0.0.1:%d" % port, timeout=3).version()
    assert info.value.kind == "connect" and "connection refused" in str(info.value)
    assert "ray start --head" in info.value.hint


def test_a_gcs_like_port_number_gets_the_port_hint():
    assert "GCS port" in ray_api.port_hint_for("http://127.0.0.1:64379")
    assert ray_api.port_hint_for("http://127.0.0.1:8772") is None


def test_probe_port_tells_grpc_from_http(gcs, fake):
    assert probe_port("127.0.0.1", gcs.port)["protocol"] == "grpc"
    assert probe_port("127.0.0.1", int(fake.url.rsplit(":", 1)[1]))["protocol"] == "http"
    closed = probe_port("127.0.0.1", free_port())
    assert not closed["open"] and closed["error"] == "connection refused"


# -- working_dir packages -----------------------------------------------------------
def make_tree(root):
    (root / "sub").mkdir(parents=True)
    (root / "logs").mkdir()
    (root / ".git").mkdir()
    (root / "empty").mkdir()
    (root / "deep" / "cache").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    (root / "run.sh").chmod(0o755)
    (root / "sub" / "a.txt").write_text("a\n")
    (root / "sub" / "keep.pyc").write_text("kept by !\n")
    (root / "sub" / "x.pyc").write_text("pyc\n")
    (root / "logs" / "x.log").write_text("log\n")
    (root / ".git" / "HEAD").write_text("ref\n")
    (root / "deep" / "cache" / "blob.bin").write_text("blob\n")
    (root / "deep" / "keep.txt").write_text("k\n")
    (root / "big.ckpt").write_text("ckpt\n")
    (root / ".gitignore").write_text("# comment\nlogs/\n*.pyc\n!keep.pyc\n")
    (root / "deep" / ".rayignore").write_text("cache/\n")


def test_collect_files_follows_excludes_gitignore_and_rayignore(tmp_path):
    make_tree(tmp_path)
    files = collect_files(str(tmp_path), excludes=["*.ckpt", str(tmp_path / "sub" / "a.txt")])
    assert files == [".gitignore", "deep/.rayignore", "deep/keep.txt", "empty/", "run.sh", "sub/keep.pyc", "train.py"]


def test_build_package_is_deterministic_and_keeps_modes(tmp_path):
    make_tree(tmp_path)
    first = build_package(str(tmp_path), excludes=["*.ckpt"])
    os.utime(tmp_path / "train.py", (1, 1))
    second = build_package(str(tmp_path), excludes=["*.ckpt"])
    assert (
        first["uri"] == second["uri"] and first["uri"].startswith("gcs://_ray_pkg_") and first["uri"].endswith(".zip")
    )
    archive = zipfile.ZipFile(io.BytesIO(first["data"]))
    names = archive.namelist()
    assert "run.sh" in names and "empty/" in names and not any(n.startswith(".git/") for n in names)
    assert stat.S_IMODE(archive.getinfo("run.sh").external_attr >> 16) == 0o755
    (tmp_path / "train.py").write_text("print('changed')\n")
    assert build_package(str(tmp_path), excludes=["*.ckpt"])["uri"] != first["uri"]


def test_build_package_refuses_what_ray_would_refuse(tmp_path):
    (tmp_path / "a.bin").write_bytes(os.urandom(4096))
    with pytest.raises(RayApiError, match="over Ray's limit.*excludes"):
        build_package(str(tmp_path), max_bytes=1024)
    with pytest.raises(RayApiError, match="not a directory"):
        build_package(str(tmp_path / "missing"))


def test_upload_working_dir_puts_once(fake, tmp_path):
    make_tree(tmp_path)
    client = RayClient(fake.url)
    first = client.upload_working_dir(str(tmp_path))
    again = client.upload_working_dir(str(tmp_path))
    assert first["uploaded"] and not again["uploaded"] and first["uri"] == again["uri"]
    name = first["uri"][len("gcs://") :]
    assert [m for m, p in fake.requests if m == "PUT"] == ["PUT"]
    assert zipfile.ZipFile(io.BytesIO(fake.packages[name])).read("train.py") == b"print('train')\n"


def test_split_package_uri():
    assert ray_api.split_package_uri("gcs://_ray_pkg_ab.zip") == ("gcs", "_ray_pkg_ab.zip")
    with pytest.raises(ValueError):
        ray_api.split_package_uri("/tmp/x.zip")


def test_fake_state_machine_follows_ray():
    """PENDING -> RUNNING on its own (as Ray does about a second after the submission), then the test ends it."""
    server = FakeRay(start_after=1)
    try:
        client = RayClient(server.url)
        assert client.submit_job("python3 train.py", "exp-attempt-1")["job"]["status"] == "PENDING"
        assert [client.get_job("exp-attempt-1")["status"] for dummy in range(2)] == ["RUNNING", "RUNNING"]
        server.set_status("exp-attempt-1", "FAILED", exit_code=3)
        failed = client.get_job("exp-attempt-1")
        assert failed["status"] == "FAILED" and failed["driver_exit_code"] == 3 and failed["end_time"]
        assert failed["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR"
    finally:
        server.close()
