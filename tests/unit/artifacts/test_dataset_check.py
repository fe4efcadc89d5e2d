"""dataset_check: the files a slime run reads, checked the way slime reads them."""
from __future__ import annotations

import json
import os

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import dataset_check_task
from ansible_collections.mtslime.posttrain.plugins.modules import dataset_check


def verl_rows(n, start=0):
    return [{
        "data_source": "aime",
        "prompt": [{"role": "user", "content": "Problem %d" % i}],
        "ability": "math",
        "reward_model": {"ground_truth": str(i), "style": "rule"},
        "extra_info": {"index": i, "split": "test"},
    } for i in range(start, start + n)]


def write_parquet(path, rows):
    pd.DataFrame(rows).to_parquet(str(path), index=False)
    return str(path)


def write_jsonl(path, rows, raw_lines=()):
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
        for line in raw_lines:
            handle.write(line + "\n")
    return str(path)


@pytest.fixture
def good(tmp_path):
    train = write_parquet(tmp_path / "amt_math17k_d_qweninstruct.parquet", verl_rows(20))
    aime = write_parquet(tmp_path / "aime_2025.parquet", verl_rows(5))
    jsonl = write_jsonl(tmp_path / "dapo.jsonl", [{"prompt": "Solve %d" % i, "label": str(i)} for i in range(7)])
    return train, aime, jsonl


def test_good_files(run_module, good):
    train, aime, jsonl = good
    result, failed = run_module(dataset_check, {"files": [
        {"path": train, "role": "train"}, aime,
        {"path": jsonl, "role": "eval", "label_key": "label", "reward_type": "deepscaler"}]})
    assert not failed, result["msg"] if failed else ""
    assert result["changed"] is False and result["problems"] == []
    first, second, third = result["files"]
    assert first["format"] == "parquet" and first["rows"] == 20 and first["role"] == "train"
    assert first["columns"] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert first["bytes"] == os.path.getsize(train)
    assert first["fingerprint"] == dataset_check_task.sha256_file(train)
    assert second["rows"] == 5 and second["role"] is None and second["label_key"] == "reward_model"
    assert third["format"] == "jsonl" and third["rows"] == 7 and third["columns"] == ["prompt", "label"]
    assert third["reward_type"] == "deepscaler"
    assert result["totals"] == {"files": 3, "rows": 32, "bytes": sum(os.path.getsize(p) for p in good)}


def test_fingerprint_off_and_check_mode(run_module, good):
    result, failed = run_module(dataset_check, {"files": [good[0]], "fingerprint": False}, check_mode=True)
    assert not failed and result["files"][0]["fingerprint"] is None and not result["changed"]


def test_row_slice_like_slime(run_module, good, tmp_path):
    train, _aime, jsonl = good
    result, failed = run_module(dataset_check, {"files": [
        train + "@[2:5]", {"path": jsonl + "@[-3:]", "label_key": "label"}]})
    assert not failed
    assert result["files"][0]["rows"] == 3 and result["files"][0]["total_rows"] == 20
    assert result["files"][0]["file"] == train
    assert result["files"][1]["rows"] == 3 and result["files"][1]["total_rows"] == 7
    result, failed = run_module(dataset_check, {"files": [train + "@[30:]"]})
    assert failed and "0 rows after the row slice, fewer than min_rows 1" in result["msg"]


def test_missing_file(run_module, tmp_path, good):
    missing = str(tmp_path / "aime_2024.parquet")
    result, failed = run_module(dataset_check, {"files": [good[0], missing]})
    assert failed
    assert "%s: file not found" % missing in result["msg"]
    assert "1 problem in 1 of 2 files" in result["msg"]
    assert result["files"][0]["rows"] == 20 and result["files"][1]["rows"] is None


def test_truncated_parquet(run_module, tmp_path, good):
    data = open(good[0], "rb").read()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(data[: len(data) // 2])
    result, failed = run_module(dataset_check, {"files": [str(broken)]})
    assert failed
    assert "%s: cannot read it as Parquet" % broken in result["msg"]
    assert "truncated or not Parquet" in result["msg"]
    assert result["files"][0]["bytes"] == len(data) // 2


def test_unreadable_file(run_module, tmp_path, good, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(dataset_check_task.os, "access", lambda p, m: False if p == good[1] else real_access(p, m))
    result, failed = run_module(dataset_check, {"files": [good[1]]})
    assert failed and "%s: cannot read it (permission denied)" % good[1] in result["msg"]


def test_directory_and_unsupported_name(run_module, tmp_path):
    other = tmp_path / "data.csv"
    other.write_text("prompt,label\nx,1\n")
    result, failed = run_module(dataset_check, {"files": [str(tmp_path), str(other)]})
    assert failed
    assert "%s: is a directory" % tmp_path in result["msg"]
    assert "%s: unsupported file name: slime reads only .parquet and .jsonl" % other in result["msg"]


def test_missing_input_key(run_module, tmp_path):
    path = write_parquet(tmp_path / "train.parquet", [{"question": "q", "reward_model": {"ground_truth": "1"}}])
    result, failed = run_module(dataset_check, {"files": [path]})
    assert failed
    assert ("%s: column 'prompt' missing (columns: question, reward_model); set --input-key (input-key in "
            "slime_train_args.ROLLOUT_ARGS) to one of them" % path) in result["msg"]


def test_missing_label_key(run_module, tmp_path):
    path = write_parquet(tmp_path / "aime_2025.parquet", [{"prompt": "p", "label": "1"}])
    result, failed = run_module(dataset_check, {"files": [path]})
    assert failed
    assert ("%s: column 'reward_model' missing (columns: prompt, label); set --label-key (label-key in "
            "slime_train_args.ROLLOUT_ARGS) to one of them" % path) in result["msg"]
    # no label wanted: passes
    result, failed = run_module(dataset_check, {"files": [path], "label_key": ""})
    assert not failed and result["files"][0]["label_key"] is None


def test_empty_ground_truth(run_module, tmp_path):
    rows = verl_rows(6)
    rows[2]["reward_model"] = {"ground_truth": "", "style": "rule"}
    rows[4]["reward_model"] = {"ground_truth": "  ", "style": "rule"}
    path = write_parquet(tmp_path / "train.parquet", rows)
    result, failed = run_module(dataset_check, {"files": [path]})
    assert failed
    msg = result["msg"]
    assert "%s: row 2 of column 'reward_model' holds {'ground_truth': '', 'style': 'rule'}" % path in msg
    assert "an empty ground_truth (2 rows like this)" in msg and "--rm-type zero2one needs" in msg


def test_dict_label_without_ground_truth_and_bad_scalars(run_module, tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", [
        {"prompt": "a", "reward_model": {"answer": "1"}},
        {"prompt": "b", "reward_model": ""},
        {"prompt": "c", "reward_model": [1]},
        {"prompt": "d", "reward_model": 3},
    ])
    result, failed = run_module(dataset_check, {"files": [path], "reward_type": "boxed_math"})
    assert failed
    msg = result["msg"]
    assert "row 0 (line 1) of column 'reward_model' holds {'answer': '1'}: a dict without 'ground_truth'" in msg
    assert "row 1 (line 2) of column 'reward_model' holds '' (an empty string) (2 rows like this)" in msg
    # lenient reward types only need the column
    result, failed = run_module(dataset_check, {"files": [path], "reward_type": "remote_rm"})
    assert not failed


def test_prompt_list_message_without_content(run_module, tmp_path):
    rows = verl_rows(4)
    rows[3]["prompt"] = [{"role": "system", "content": "be brief"}, {"role": "user"}]
    path = write_parquet(tmp_path / "train.parquet", rows)
    result, failed = run_module(dataset_check, {"files": [path]})
    assert failed
    assert "%s: row 3 of column 'prompt' holds [{'role': 'system', 'content': 'be brief'}, {'role': 'user', " \
           "'content': None}]: message 1 has no 'content'" % path in result["msg"]
    assert "every prompt must be a non-empty string" in result["msg"]


@pytest.mark.parametrize("value,why", [
    ("", "an empty string"),
    ([], "an empty list"),
    (None, "null (no prompt)"),
    (5, "an int, not a string or a list of messages"),
    (["hi"], "message 0 is a string, not a {role, content} dict"),
    ([{"content": "x"}], "message 0 has no 'role'"),
    ([{"role": "user", "content": 3}], "message 0 content is an int, not a string"),
    ("ok", None),
    ([{"role": "user", "content": ""}], None),
])
def test_prompt_problem(value, why):
    assert dataset_check_task.prompt_problem(value) == why


@pytest.mark.parametrize("value,rm,kind", [
    ({"ground_truth": "7"}, "zero2one", None),
    ({"ground_truth": 7}, "dapo", None),
    ({"ground_truth": None}, "math", "empty-ground-truth"),
    ({"style": "rule"}, "zero2one", "no-ground-truth"),
    ({"ground_truth": "7"}, "deepscaler", "dict-deepscaler"),
    ({"ground_truth": "7"}, "boxed_deepscaler", "dict-deepscaler"),
    ("7", "deepscaler", None),
    (7.5, "math", None),
    (True, "math", "bad-label"),
    (float("nan"), "math", "bad-label"),
    (None, "zero2one", "bad-label"),
    (None, "random", None),
    ({"anything": 1}, "my_custom_rm", None),
])
def test_label_problem(value, rm, kind):
    found = dataset_check_task.label_problem(value, rm)
    assert (found[0] if found else None) == kind


def test_too_few_rows(run_module, tmp_path):
    path = write_parquet(tmp_path / "aime_2024.parquet", verl_rows(3))
    result, failed = run_module(dataset_check, {"files": [path], "min_rows": 30})
    assert failed
    assert "%s: 3 rows, fewer than min_rows 30" % path in result["msg"]
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    result, failed = run_module(dataset_check, {"files": [{"path": empty, "min_rows": 1}]})
    assert failed and "%s: 0 rows, fewer than min_rows 1" % empty in result["msg"]
    assert "%s: column 'prompt' missing (columns: none)" % empty in result["msg"]


def test_deepscaler_with_dict_labels(run_module, good):
    result, failed = run_module(dataset_check, {"files": [good[1]], "reward_type": "deepscaler"})
    assert failed
    msg = result["msg"]
    assert "%s: row 0 of column 'reward_model' holds a dict" % good[1] in msg
    assert "(5 rows like this)" in msg
    assert "--rm-type deepscaler asserts that the label is a str, int or float" in msg
    assert "use --label-key label" in msg


def test_jsonl_bad_lines_and_missing_keys(run_module, tmp_path):
    path = write_jsonl(tmp_path / "eval.jsonl", [{"prompt": "a", "label": "1"}],
                       raw_lines=["", "{not json", "[1, 2]", json.dumps({"label": "2"}), json.dumps({"prompt": "b"})])
    result, failed = run_module(dataset_check, {"files": [path], "label_key": "label"})
    assert failed
    msg = result["msg"]
    assert "%s: row 1 (line 3) is not valid JSON" % path in msg
    assert "row 2 (line 4) is a list, not a JSON object" in msg
    assert "row 3 (line 5) has no key 'prompt'" in msg
    assert "row 4 (line 6) has no key 'label'" in msg
    assert result["files"][0]["rows"] == 5


def test_every_problem_in_one_message(run_module, tmp_path, good):
    missing = str(tmp_path / "nope.jsonl")
    no_label = write_parquet(tmp_path / "x.parquet", [{"prompt": "p"}])
    result, failed = run_module(dataset_check, {"files": [missing, no_label, good[0]]})
    assert failed
    assert result["msg"].startswith("dataset_check: 2 problems in 2 of 3 files: (1) %s: file not found" % missing)
    assert "(2) %s: column 'reward_model' missing" % no_label in result["msg"]
    assert len(result["problems"]) == 2 and len(result["files"]) == 3


def test_bad_files_option(run_module, good):
    result, failed = run_module(dataset_check, {"files": [{"role": "train"}, {"path": good[0], "labels": "x"}]})
    assert failed
    assert "files[0] is {'role': 'train'}; give a path or a dict with 'path'" in result["msg"]
    assert "files[1] (%s) has unknown keys labels" % good[0] in result["msg"]


def test_reads_only_needed_columns(run_module, tmp_path, monkeypatch):
    rows = verl_rows(50)
    for row in rows:
        row["huge"] = os.urandom(50_000).hex()  # incompressible: 100 kB a row, 5 MB in all
    path = write_parquet(tmp_path / "big.parquet", rows)
    assert os.path.getsize(path) > 4_000_000
    calls = []
    real_iter = pq.ParquetFile.iter_batches
    real_read_table = pq.read_table

    def spy_iter(self, *args, **kwargs):
        calls.append(("iter_batches", kwargs.get("columns")))
        return real_iter(self, *args, **kwargs)

    def spy_read_table(*args, **kwargs):
        calls.append(("read_table", kwargs.get("columns")))
        return real_read_table(*args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy_iter)
    monkeypatch.setattr(pq, "read_table", spy_read_table)
    result, failed = run_module(dataset_check, {"files": [path], "fingerprint": False})
    assert not failed
    assert calls == [("iter_batches", ["prompt", "reward_model"])]
    assert "huge" in result["files"][0]["columns"] and result["files"][0]["rows"] == 50


def test_without_pyarrow(run_module, good, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result, failed = run_module(dataset_check, {"files": [good[0], {"path": good[2], "label_key": "label"}]})
    assert failed
    assert "%s: pyarrow is not importable by this Python" % good[0] in result["msg"]
    assert "1 problem in 1 of 2 files" in result["msg"]  # the JSONL file needs no pyarrow


def test_damaged_row_groups(run_module, good, monkeypatch):
    def broken(self, *args, **kwargs):
        yield from ()  # a generator like iter_batches: the error comes with the first batch
        raise OSError("Corrupt snappy compressed data")
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", broken)
    result, failed = run_module(dataset_check, {"files": [good[0]]})
    assert failed
    assert "%s: cannot read rows of it after row 0 (OSError: Corrupt snappy compressed data); the file is " \
           "damaged" % good[0] in result["msg"]


def test_jsonl_read_error(run_module, good, monkeypatch):
    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(dataset_check_task, "open", denied, raising=False)
    result, failed = run_module(dataset_check, {"files": [{"path": good[2], "label_key": "label"}]})
    assert failed and "%s: cannot read it (Permission denied); fix its permissions" % good[2] in result["msg"]


def test_fingerprint_read_error(run_module, good, monkeypatch):
    def no_hash(path):
        raise OSError(5, "Input/output error", path)
    monkeypatch.setattr(dataset_check_task, "sha256_file", no_hash)
    result, failed = run_module(dataset_check, {"files": [good[1]]})
    assert failed and "%s: cannot read it (Input/output error)" % good[1] in result["msg"]


def test_bad_min_rows_item(run_module, good):
    result, failed = run_module(dataset_check, {"files": [{"path": good[0], "min_rows": "many"}]})
    assert failed and "files[0] (%s) min_rows 'many' is not a number" % good[0] in result["msg"]
