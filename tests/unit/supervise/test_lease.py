"""The job's lease (module_utils/supervise/lease.py): one holder at a time, a live holder waited for, a dead one
(process gone on this host, or its lease run out) taken over, released whatever the body does."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.prepare import lock
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import lease


def test_a_second_taker_waits_then_names_the_holder(tmp_path):
    lock_dir = str(tmp_path / "job.lease")
    first = lease.take(lock_dir, "supervisor", "a supervisor check", wait=0)
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    with pytest.raises(lease.LeaseBusy) as busy:
        lease.take(lock_dir, "ansible-playbook", "keeping e running", wait=3, sleep=sleep, clock=lambda: now[0])
    assert "held by supervisor" in str(busy.value) and "a supervisor check" in str(busy.value)
    assert slept == [1.0, 1.0, 1.0]
    assert lock.read(lock_dir)["token"] == first["token"]


def test_a_holder_whose_process_is_gone_is_taken_over(tmp_path):
    lock_dir = str(tmp_path / "job.lease")
    lease.take(lock_dir, "supervisor", "a check", wait=0)
    record = lock.read(lock_dir)
    record["pid"] = 2 ** 22 + 7  # no such process
    with open(os.path.join(lock_dir, lock.RECORD), "w") as handle:
        json.dump(record, handle)
    mine = lease.take(lock_dir, "ansible-playbook", "keeping e running", wait=0)
    assert lock.read(lock_dir)["token"] == mine["token"]


def test_a_holder_on_another_host_is_dead_only_when_its_lease_ran_out(tmp_path):
    record = {"host": "elsewhere", "pid": 1, "renewed": 1000.0, "lease": 900}
    assert not lease.dead(record, 1000.0 + 899)
    assert lease.dead(record, 1000.0 + 901)


def test_held_releases_after_a_failure(tmp_path):
    lock_dir = str(tmp_path / "run" / "job.lease")
    with pytest.raises(RuntimeError):
        with lease.held(lock_dir, "supervisor", "a check", wait=0):
            assert os.path.isdir(lock_dir)
            raise RuntimeError("boom")
    assert not os.path.exists(lock_dir)
