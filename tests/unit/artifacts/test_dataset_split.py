"""dataset_split: the guide's select_aime_data.py as a module."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from ansible_collections.mtslime.posttrain.plugins.modules import dataset_split

UNIT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GUIDE_SCRIPT = os.path.join(UNIT, "data", "datasets", "select_aime_data.py")
AIME = "20250416_amc_aime_website"


def make_math_parquet(path, n_aime=90, n_other=40, others=("math_dapo", "olympiad", "gsm8k")):
    """A small verl-style math.parquet: data_source, prompt (list of {role, content}), ability,
    reward_model {ground_truth, style}, extra_info {index, split}; every 7th row lacks extra_info.index."""
    rows = []
    for i in range(n_aime + n_other):
        source = AIME if i < n_aime else others[i % len(others)]
        extra = {"split": "train"}
        if i % 7:
            extra["index"] = i
        rows.append({
            "data_source": source,
            "prompt": [{"role": "user", "content": "Problem %d: compute %d + %d." % (i, i, 2 * i)}],
            "ability": "math",
            "reward_model": {"ground_truth": str(3 * i), "style": "rule"},
            "extra_info": extra,
        })
    # interleave the sources so the filter matters
    rows = rows[::2] + rows[1::2]
    pd.DataFrame(rows).to_parquet(path, index=False)
    return path


def records(path):
    df = pd.read_parquet(path)
    out = df.to_dict(orient="records")
    return json.loads(json.dumps(out, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v)))


@pytest.fixture
def math_parquet(tmp_path):
    return make_math_parquet(str(tmp_path / "math.parquet"))


def args_for(tmp_path, math_parquet, **extra):
    args = {"input": math_parquet, "train_output": str(tmp_path / "out" / "aime_train.parquet"),
            "test_output": str(tmp_path / "out" / "aime_test.parquet")}
    args.update(extra)
    return args


def run_guide(math_parquet, train, test, *extra):
    subprocess.run([sys.executable, GUIDE_SCRIPT, "--input", math_parquet, "--train-output", train,
                    "--test-output", test] + list(extra), check=True, capture_output=True)


@pytest.mark.parametrize("extra,params", [
    ((), {}),
    (("--test-size", "25", "--seed", "7"), {"test_size": 25, "seed": 7}),
    (("--source", "olympiad", "--test-size", "3"), {"source": "olympiad", "test_size": 3}),
    (("--test-size", "0"), {"test_size": 0}),
])
def test_same_rows_and_order_as_the_guide_script(run_module, tmp_path, math_parquet, extra, params):
    guide_train, guide_test = str(tmp_path / "g" / "train.parquet"), str(tmp_path / "g" / "test.parquet")
    run_guide(math_parquet, guide_train, guide_test, *extra)
    args = args_for(tmp_path, math_parquet, **params)
    result, failed = run_module(dataset_split, args)
    assert not failed, result
    assert result["changed"]
    assert records(args["train_output"]) == records(guide_train)
    assert records(args["test_output"]) == records(guide_test)
    assert pd.read_parquet(args["train_output"]).columns.tolist() == pd.read_parquet(guide_train).columns.tolist()
    assert result["test_rows"] == len(pd.read_parquet(guide_test))
    assert result["train_rows"] + result["test_rows"] == result["selected_rows"]


def test_split_and_extra_info(run_module, tmp_path, math_parquet):
    args = args_for(tmp_path, math_parquet)
    result, failed = run_module(dataset_split, args)
    assert not failed
    assert (result["selected_rows"], result["test_rows"], result["train_rows"]) == (90, 60, 30)
    test = pd.read_parquet(args["test_output"])
    train = pd.read_parquet(args["train_output"])
    assert set(test["data_source"]) == {AIME} and set(train["data_source"]) == {AIME}
    assert {info["split"] for info in test["extra_info"]} == {"test"}
    assert {info["split"] for info in train["extra_info"]} == {"train"}
    assert not set(test["prompt"].map(lambda p: p[0]["content"])) & set(train["prompt"].map(lambda p: p[0]["content"]))
    assert result["input_sha256"] == dataset_split.sha256_file(math_parquet)
    assert result["outputs"]["train"]["sha256"] == dataset_split.sha256_file(args["train_output"])
    state = json.load(open(result["state_file"]))
    assert result["state_file"] == str(tmp_path / "out" / ".dataset_split.aime_train.parquet.json")
    assert state["seed"] == 42 and state["test_size"] == 60 and state["source"] == AIME
    assert state["outputs"]["test"]["rows"] == 60
    assert result["diff"]["before"] == "" and '"input_sha256"' in result["diff"]["after"]
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".tmp")]


def test_set_split_matches_guide():
    assert dataset_split.set_split({"index": 5, "split": "x"}, "test") == {"index": 5, "split": "test"}
    assert dataset_split.set_split({"split": "x"}, "train") == {"index": 0, "split": "train"}
    assert dataset_split.set_split(None, "train") == {"index": 0, "split": "train"}


def test_rerun_is_unchanged_and_writes_nothing(run_module, tmp_path, math_parquet):
    args = args_for(tmp_path, math_parquet)
    run_module(dataset_split, args)
    mtimes = {p: os.stat(args[p]).st_mtime_ns for p in ("train_output", "test_output")}
    result, failed = run_module(dataset_split, args)
    assert not failed and not result["changed"]
    assert (result["train_rows"], result["test_rows"], result["selected_rows"]) == (30, 60, 90)
    assert {p: os.stat(args[p]).st_mtime_ns for p in mtimes} == mtimes
    assert "up to date" in result["actions"][0]


@pytest.mark.parametrize("change", ["seed", "test_size", "source", "input", "modified", "missing"])
def test_changes_redo_the_split(run_module, tmp_path, math_parquet, change):
    args = args_for(tmp_path, math_parquet)
    run_module(dataset_split, args)
    if change == "seed":
        args["seed"] = 1
    elif change == "test_size":
        args["test_size"] = 10
    elif change == "source":
        args.update(source="olympiad", test_size=2)
    elif change == "input":
        make_math_parquet(math_parquet, n_aime=80)
    elif change == "modified":
        pd.DataFrame({"a": [1]}).to_parquet(args["test_output"])
    elif change == "missing":
        os.unlink(args["train_output"])
    result, failed = run_module(dataset_split, args)
    assert not failed, result
    assert result["changed"]
    if change == "modified":
        # a file this module did not write is moved aside, never deleted
        assert len(result["moved_to"]) == 1 and os.path.exists(result["moved_to"][0])
        assert result["moved_to"][0].startswith(args["test_output"] + ".replaced-")
    else:
        assert "moved_to" not in result
    again, dummy = run_module(dataset_split, args)
    assert not again["changed"]


def test_existing_identical_outputs_are_kept(run_module, tmp_path, math_parquet):
    args = args_for(tmp_path, math_parquet)
    run_guide(math_parquet, args["train_output"], args["test_output"])
    result, failed = run_module(dataset_split, args)
    assert not failed
    kept = [a for a in result["actions"] if a.startswith("kept")]
    # same pandas/pyarrow => same bytes: nothing is rewritten or moved, only the state is recorded
    assert len(kept) == 2 and "moved_to" not in result
    assert result["changed"] and result["actions"][-1].startswith("recorded the split")
    again, dummy = run_module(dataset_split, args)
    assert not again["changed"]


def test_check_mode_writes_nothing(run_module, tmp_path, math_parquet):
    args = args_for(tmp_path, math_parquet)
    result, failed = run_module(dataset_split, args, check_mode=True)
    assert not failed and result["changed"]
    assert (result["train_rows"], result["test_rows"]) == (30, 60)
    assert not os.path.exists(tmp_path / "out")
    assert any(a.startswith("would write %s" % args["train_output"]) for a in result["actions"])
    run_module(dataset_split, args)
    result, dummy = run_module(dataset_split, args, check_mode=True)
    assert not result["changed"]


def test_fail_missing_input(run_module, tmp_path):
    result, failed = run_module(dataset_split, args_for(tmp_path, str(tmp_path / "nope.parquet")))
    assert failed
    assert "input %s does not exist" % (tmp_path / "nope.parquet") in result["msg"]
    assert "math.parquet" in result["msg"]


def test_fail_unreadable_input(run_module, tmp_path):
    bad = tmp_path / "math.parquet"
    bad.write_bytes(b"PAR1 not really")
    result, failed = run_module(dataset_split, args_for(tmp_path, str(bad)))
    assert failed and "input %s is not a readable Parquet file" % bad in result["msg"]


def test_fail_no_data_source_column(run_module, tmp_path):
    path = str(tmp_path / "math.parquet")
    pd.DataFrame({"prompt": ["a"], "label": ["1"]}).to_parquet(path)
    result, failed = run_module(dataset_split, args_for(tmp_path, path))
    assert failed
    assert "input %s has no column 'data_source' (columns: prompt, label)" % path in result["msg"]


def test_fail_no_matching_rows_lists_sources_by_count(run_module, tmp_path):
    path = str(tmp_path / "math.parquet")
    sources = ["s%02d" % i for i in range(12) for dummy in range(i + 1)]
    pd.DataFrame({"data_source": sources}).to_parquet(path)
    result, failed = run_module(dataset_split, args_for(tmp_path, path))
    assert failed
    msg = result["msg"]
    assert "no rows with data_source='%s'" % AIME in msg and path in msg
    assert msg.index("'s11' (12 rows)") < msg.index("'s10' (11 rows)") < msg.index("'s02' (3 rows)")
    assert "'s01'" not in msg and "and 2 more" in msg
    assert "set source" in msg


def test_fail_test_size_too_large(run_module, tmp_path, math_parquet):
    result, failed = run_module(dataset_split, args_for(tmp_path, math_parquet, test_size=91))
    assert failed
    assert "test_size=91 exceeds the 90 rows with data_source='%s' in %s" % (AIME, math_parquet) in result["msg"]
    assert "set test_size to at most 90" in result["msg"]


def test_fail_negative_test_size(run_module, tmp_path, math_parquet):
    result, failed = run_module(dataset_split, args_for(tmp_path, math_parquet, test_size=-1))
    assert failed and "test_size must be >= 0, got -1" in result["msg"]


def test_fail_same_outputs(run_module, tmp_path, math_parquet):
    args = args_for(tmp_path, math_parquet)
    args["test_output"] = args["train_output"]
    result, failed = run_module(dataset_split, args)
    assert failed and "train_output and test_output are the same file" in result["msg"]
    args = args_for(tmp_path, math_parquet, train_output=math_parquet)
    result, failed = run_module(dataset_split, args)
    assert failed and "input %s is also an output" % math_parquet in result["msg"]


def test_fail_unwritable_output(run_module, tmp_path, math_parquet, monkeypatch):
    def boom(frame, path):
        raise OSError(28, "No space left on device", path)
    monkeypatch.setattr(dataset_split, "write_parquet", boom)
    args = args_for(tmp_path, math_parquet)
    result, failed = run_module(dataset_split, args)
    assert failed and "cannot write %s: No space left on device" % args["train_output"] in result["msg"]
    assert not os.path.exists(dataset_split.state_path(args["train_output"]))


def test_fail_input_is_a_directory(run_module, tmp_path):
    result, failed = run_module(dataset_split, args_for(tmp_path, str(tmp_path)))
    assert failed and "input %s is a directory, not a file" % tmp_path in result["msg"]


def test_fail_without_pandas(run_module, tmp_path, math_parquet, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    result, failed = run_module(dataset_split, args_for(tmp_path, math_parquet))
    assert failed and "pandas is not importable by this Python" in result["msg"]
    assert "pip install pandas pyarrow" in result["msg"]


def test_fail_without_parquet_engine(run_module, tmp_path, math_parquet, monkeypatch):
    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")
    monkeypatch.setattr(pd, "read_parquet", no_engine)
    result, failed = run_module(dataset_split, args_for(tmp_path, math_parquet))
    assert failed and "pandas cannot read Parquet here" in result["msg"] and "pip install pyarrow" in result["msg"]
