"""async_progress: running vs finished (as async_status decides), progress line, the
finished task's result without a top-level rc, and the first error of a traceback."""
from __future__ import annotations

import json
import os
import time

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.scan import first_error
from ansible_collections.mtslime.posttrain.plugins.modules import async_progress as module


def write_status(tmp_path, data, age=0):
    path = tmp_path / "j1"
    path.write_text(json.dumps(data))
    if age:
        past = time.time() - age
        os.utime(path, (past, past))
    return str(tmp_path)


def test_running_task_shows_elapsed_bytes_and_last_line(tmp_path, run_module, monkeypatch):
    monkeypatch.setattr(module, "wrapper_alive", lambda jid: True)
    async_dir = write_status(tmp_path, {"started": 1, "finished": 0, "ansible_job_id": "j1"}, age=75)
    log = tmp_path / "run.log"
    log.write_text("start\n\x1b[32msaving shard 3\x1b[0m\n")
    watched = tmp_path / "dl"
    watched.mkdir()
    (watched / "a").write_bytes(b"x" * 1024)
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir, "log_file": str(log),
                                         "watch_path": str(watched), "expected_bytes": 4096})
    assert not failed and not result["finished"] and not result["job_failed"]
    assert result["progress"].startswith("running 0:01:1") and "1.0 KiB of 4.0 KiB (25%)" in result["progress"]
    assert result["progress"].endswith("last: saving shard 3")


def test_finished_module_result_without_rc_counts_as_finished(tmp_path, run_module):
    async_dir = write_status(tmp_path, {"changed": True, "files": ["a"]})
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir})
    assert not failed and result["finished"] and not result["job_failed"]
    assert result["result"]["files"] == ["a"] and "rc" not in result


def test_failed_command_reports_job_rc_and_the_traceback_exception(tmp_path, run_module):
    async_dir = write_status(tmp_path, {"rc": 1, "failed": True, "start": "2026-01-01 00:00:00.000000",
                                        "end": "2026-01-01 00:00:05.500000"})
    log = tmp_path / "convert.log"
    log.write_text("Using pipeline model parallel size: 8\nTraceback (most recent call last):\n"
                   '  File "x.py", line 1, in <module>\n    main()\n'
                   "RuntimeError: stand-in conversion killed at mid_shards\n")
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir, "log_file": str(log)})
    assert not failed and "rc" not in result
    assert result["job_rc"] == 1 and result["job_failed"] and result["elapsed"] == 5.5
    assert result["first_error"]["lineno"] == 2
    assert result["first_error"]["exception"] == "RuntimeError: stand-in conversion killed at mid_shards"


def test_missing_status_file_names_the_job(tmp_path, run_module):
    result, failed = run_module(module, {"jid": "j9", "async_dir": str(tmp_path)})
    assert failed and "j9" in result["msg"] and "async_dir" in result["msg"]


def test_first_error_plain_line_is_its_own_exception():
    found = first_error(["ok", "ValueError: bad value", "more"])
    assert found["line"] == "ValueError: bad value" and found["exception"] == "ValueError: bad value"
    assert found["context"] == ["more"]


def test_failed_conversion_under_torchrun_reports_the_ranks_exception(tmp_path, run_module):
    """The converter under torchrun: rank-prefixed tracebacks, c10d's exit warning, torchrun's ChildFailedError.
    The report names the root-cause rank's exception, without the rank prefix (tests/unit/data/logs)."""
    async_dir = write_status(tmp_path, {"rc": 1, "failed": True})
    log = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "logs", "convert_rank_prefixed.txt")
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir, "log_file": log})
    assert not failed and result["job_failed"]
    expected = "AssertionError: model.layers.0.self_attn.q_norm.weight not found in the Megatron model"
    assert result["first_error"]["lineno"] == 6 and result["first_error"]["exception"] == expected
    fatal = result["fatal_error"]
    assert (fatal["lineno"], fatal["rank"], fatal["exception"], fatal["type"]) == (14, 0, expected, "AssertionError")


def test_rank_prefix_and_noise_in_first_error():
    lines = [
        "W1201 10:00:00.123000 4120 torch/distributed/run.py:792] *****************************************",
        "[rank1]:[W1201 10:00:41.512345678 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was "
        "not called before program exit, which can leak resources.",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "x.py", line 1, in <module>',
        "[rank1]: KeyError: 'w'",
    ]
    found = first_error(lines)
    assert (found["lineno"], found["exception"]) == (3, "KeyError: 'w'")


def fake_proc(tmp_path, *cmdlines):
    proc = tmp_path / "proc"
    for pid, argv in enumerate(cmdlines, start=100):
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(w.encode() for w in argv) + b"\0")
    (proc / "self").mkdir(parents=True, exist_ok=True)
    return str(proc)


def test_wrapper_alive_finds_the_jobs_async_wrapper(tmp_path):
    proc = fake_proc(tmp_path, ["/usr/bin/python3", "/root/.ansible/tmp/x/AnsiballZ_async_wrapper.py", "58211",
                                "14400", "/root/.ansible/tmp/x/AnsiballZ_command.py", "_"], ["bash"])
    assert module.wrapper_alive("58211.1234", proc=proc)
    assert not module.wrapper_alive("99999.1234", proc=proc)


def test_a_job_whose_process_is_gone_is_reported_dead(tmp_path, run_module, monkeypatch):
    monkeypatch.setattr(module, "wrapper_alive", lambda jid: False)
    async_dir = write_status(tmp_path, {"started": 1, "finished": 0, "ansible_job_id": "j1"})
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir})
    assert not failed and not result["finished"] and not result["alive"]
    assert result["progress"].startswith("died (no process of async job j1 runs)")


def test_each_poll_renews_the_lock_with_the_progress_line(tmp_path, run_module, monkeypatch):
    from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock as storage_lease

    monkeypatch.setattr(module, "wrapper_alive", lambda jid: True)
    lock = str(tmp_path / "ckpt.lock")
    storage_lease.acquire(lock, {"token": "r/n"}, 300, "converting", now=0)
    async_dir = write_status(tmp_path, {"started": 1, "finished": 0, "ansible_job_id": "j1"})
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir, "lock": {"path": lock, "token": "r/n"}})
    record = storage_lease.read(lock)
    assert not failed and record["renewed"] > 1000 and record["doing"] == result["progress"]
    result, failed = run_module(module, {"jid": "j1", "async_dir": async_dir, "lock": {"path": lock, "token": "x/y"}})
    assert failed and "took the lock over" in result["msg"]
