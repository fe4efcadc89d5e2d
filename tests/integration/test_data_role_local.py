"""The data role end to end on this machine, without Docker (tests/integration/playbooks/stage_local.yml): two
local nodes share one storage and the prepared archive comes from a file:// URL. Under --check --diff on a node
that has no data yet, the role says what it would download and skips the check of the files it did not write,
naming them; the first node then extracts the archive through the prepare flow, the other checks it; a rerun
and a rerun under --check change nothing; the run's check still fails on data that is wrong."""
from __future__ import annotations

import os
import subprocess
import sys

from local_stage import PLAYBOOK, inventory, ran
from runner import REPO, run_playbook

sys.path.insert(0, os.path.join(REPO, "tests", "unit", "artifacts"))
from test_dataset_check import verl_rows, write_parquet  # noqa: E402
from test_dataset_split import AIME, make_math_parquet  # noqa: E402

FILES = ["amt_math17k_d_qweninstruct.parquet", "aime_2024.parquet", "aime_2025.parquet"]


def archive(tmp_path):
    """AIME_data.tgz as the guide's archive lays it out: one top directory (extracted with --strip-components=1)."""
    top = tmp_path / "source" / "AIME_data"
    top.mkdir(parents=True)
    for name in FILES:
        write_parquet(top / name, verl_rows(8))
    path = tmp_path / "source" / "AIME_data.tgz"
    subprocess.run(["tar", "-czf", str(path), "-C", str(top.parent), "AIME_data"], check=True)
    return path


def values(data_dir, **more):
    return dict({
        "data_method": "archive", "slime_data_dir": str(data_dir), "data_archive_files": FILES,
        "data_archive_url": "file:///nonexistent/AIME_data.tgz", "data_archive_dest": str(data_dir) + ".tgz",
        "slime_train_file": str(data_dir / FILES[0]), "slime_eval_file": str(data_dir / FILES[2]),
        "slime_train_args": {"ROLLOUT_ARGS": {
            "input-key": "prompt", "label-key": "reward_model", "rm-type": "zero2one"}},
        "slime_train_args_overrides": {}, "data_split_input": "", "data_split_seed": 42, "data_split_source": AIME,
        "data_split_test_size": 10, "data_split_train_output": str(data_dir / "aime_train.parquet"),
        "data_split_test_output": str(data_dir / "aime_test.parquet")}, **more)


def test_check_mode_on_a_bare_node_then_prepared_once_then_converged(tmp_path):
    data_dir = tmp_path / "models" / "data"
    hosts = inventory(tmp_path, "data", values(
        data_dir, data_archive_url="file://%s" % archive(tmp_path), data_archive_dest=str(tmp_path / "AIME_data.tgz")))

    check = run_playbook(PLAYBOOK, hosts, "--check", "--diff", timeout=300)
    assert check.rc == 0, check.stdout[-3000:]
    assert check.changed_hosts() == {}, check.changed_tasks()
    assert "Would download file://" in check.stdout
    for host in ("n1", "n2"):
        skipped = ran(check, host, "Say which data checks wait for a real run")
        assert len(skipped) == 1 and str(data_dir / FILES[0]) in skipped[0]["event_data"]["res"]["msg"]
    assert not data_dir.exists() and not (tmp_path / "AIME_data.tgz").exists()

    first = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert first.rc == 0, first.stdout[-3000:]
    assert sorted(os.listdir(data_dir)) == sorted(FILES), "the files moved in, no temporary directory left"
    assert [len(ran(first, host, "Check the data the run will read")) for host in ("n1", "n2")] == [1, 1]
    assert not ran(first, "n1", "Say which data checks wait for a real run")

    again = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert again.rc == 0 and again.changed_hosts() == {}, again.changed_tasks()
    check = run_playbook(PLAYBOOK, hosts, "--check", "--diff", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert not ran(check, "n1", "Say which data checks wait for a real run")

    # the real run's check is not weakened: a file that is not Parquet fails it on the node that only checks
    (data_dir / FILES[2]).write_bytes(b"not parquet")
    broken = run_playbook(PLAYBOOK, hosts, "--limit", "n2", timeout=300)
    assert broken.rc != 0 and "cannot read it as Parquet" in broken.stdout, broken.stdout[-3000:]


def test_check_mode_before_the_split_then_split_once(tmp_path):
    data_dir = tmp_path / "models" / "data"
    source = make_math_parquet(str(tmp_path / "math.parquet"))
    train, test = data_dir / "aime_train.parquet", data_dir / "aime_test.parquet"
    hosts = inventory(tmp_path, "data", values(
        data_dir, data_method="preprocess", data_split_input=source, slime_train_file=str(train),
        slime_eval_file=str(test)))

    check = run_playbook(PLAYBOOK, hosts, "--check", "--diff", timeout=300)
    assert check.rc == 0, check.stdout[-3000:]
    assert [r["changed"] for r in check.results("Split the source data into train and test files")] == [True]
    for host in ("n1", "n2"):
        skipped = ran(check, host, "Say which data checks wait for a real run")
        assert len(skipped) == 1 and "write them with the split" in skipped[0]["event_data"]["res"]["msg"]
    assert not train.exists() and not test.exists()

    first = run_playbook(PLAYBOOK, hosts, timeout=300)
    assert first.rc == 0, first.stdout[-3000:]
    assert [len(ran(first, host, "Check the data the run will read")) for host in ("n1", "n2")] == [1, 1]
    check = run_playbook(PLAYBOOK, hosts, "--check", "--diff", timeout=300)
    assert check.rc == 0 and check.changed_hosts() == {}, check.changed_tasks()
    assert [len(ran(check, host, "Check the data the run will read")) for host in ("n1", "n2")] == [1, 1]
