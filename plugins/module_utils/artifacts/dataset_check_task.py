# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The dataset_check module's work (plugins/modules/dataset_check.py holds its documentation): main(module)
runs it for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with the arguments
the role gave the module (module_utils/supervise). pyarrow is imported only when a Parquet file is read."""
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number

import json
import math
import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes, sha256_file

SCALAR_OR_GROUND_TRUTH = ("zero2one", "math", "dapo", "deepscaler", "f1", "gpqa")
BATCH_ROWS = 4096
ITEM_KEYS = ("path", "role", "input_key", "label_key", "reward_type", "min_rows")
FIX_PROMPT = ("every prompt must be a non-empty string or a non-empty list of {role, content} messages with string "
              "content - regenerate the file or set the input key to the right column")


def parse_generalized_path(text):
    """slime's path@[start:end] row slice (slime/utils/data.py _parse_generalized_path)."""
    match = re.match(r"^(?P<real>.*)@\[(?P<start>-?\d*):(?P<end>-?\d*)\]$", text)
    if match is None:
        return text, None
    start = int(match.group("start")) if match.group("start") != "" else None
    end = int(match.group("end")) if match.group("end") != "" else None
    return match.group("real"), slice(start, end)


def short(value, limit=120):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value):
    if value is None:
        return "null"
    return {dict: "a dict", list: "a list", bool: "a bool", int: "an int", float: "a float", str: "a string"}.get(
        type(value), "a %s" % type(value).__name__)


def prompt_problem(value):
    """Why `value` is not a usable prompt, or None."""
    if isinstance(value, str):
        return "an empty string" if not value.strip() else None
    if isinstance(value, (list, tuple)):
        if not value:
            return "an empty list"
        for pos, message in enumerate(value):
            if not isinstance(message, dict):
                return "message %d is %s, not a {role, content} dict" % (pos, kind_of(message))
            if message.get("role") is None:
                return "message %d has no 'role'" % pos
            if message.get("content") is None:
                return "message %d has no 'content'" % pos
            if not isinstance(message["content"], str):
                return "message %d content is %s, not a string" % (pos, kind_of(message["content"]))
        return None
    if value is None:
        return "null (no prompt)"
    return "%s, not a string or a list of messages" % kind_of(value)


def base_reward_type(reward_type):
    reward_type = (reward_type or "").strip()
    return reward_type[len("boxed_"):] if reward_type.startswith("boxed_") else reward_type


def label_problem(value, reward_type):
    """(kind, why) when `value` is not a label `reward_type` can use, else None."""
    base = base_reward_type(reward_type)
    if base not in SCALAR_OR_GROUND_TRUTH:
        return None
    if isinstance(value, dict):
        if base == "deepscaler":
            return "dict-deepscaler", "a dict"
        truth = value.get("ground_truth")
        if "ground_truth" not in value:
            return "no-ground-truth", "a dict without 'ground_truth'"
        if truth is None or (isinstance(truth, str) and not truth.strip()) or (
                isinstance(truth, (list, dict)) and not truth):
            return "empty-ground-truth", "an empty ground_truth"
        return None
    if value is None:
        return "bad-label", "null"
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "bad-label", kind_of(value)
    if isinstance(value, str) and not value.strip():
        return "bad-label", "an empty string"
    if isinstance(value, float) and math.isnan(value):
        return "bad-label", "NaN"
    return None


class FileCheck:
    """Collects the findings for one file: first bad row and count per kind of problem."""

    def __init__(self, spec):
        self.spec = spec
        self.problems = []
        self.bad = {}  # kind -> [first_row, first_value, why, count, line]

    def add(self, text):
        self.problems.append("%s: %s" % (self.spec["path"], text))

    def bad_row(self, kind, row, value, why, line=None):
        entry = self.bad.get(kind)
        if entry is None:
            self.bad[kind] = [row, value, why, 1, line]
        else:
            entry[3] += 1

    def row_problems(self):
        spec = self.spec
        for kind, (row, value, why, count, line) in self.bad.items():
            where = "row %d%s" % (row, " (line %d)" % line if line else "")
            more = "" if count == 1 else " (%d rows like this)" % count
            if kind == "prompt":
                self.add("%s of column '%s' holds %s: %s%s; %s"
                         % (where, spec["input_key"], short(value), why, more, FIX_PROMPT))
            elif kind == "dict-deepscaler":
                self.add("%s of column '%s' holds a dict (%s)%s, but --rm-type %s asserts that the label is a "
                         "str, int or float; use --label-key label (label-key in slime_train_args.ROLLOUT_ARGS) with a "
                         "scalar column, for "
                         "example reward_model.ground_truth copied into a 'label' column, or use a reward type "
                         "that reads ground_truth (zero2one)"
                         % (where, spec["label_key"], short(value), more, spec["reward_type"]))
            elif kind in ("no-ground-truth", "empty-ground-truth"):
                self.add("%s of column '%s' holds %s: %s%s; --rm-type %s needs a non-empty ground_truth in a dict "
                         "label - fix or drop those rows"
                         % (where, spec["label_key"], short(value), why, more, spec["reward_type"]))
            elif kind == "bad-label":
                self.add("%s of column '%s' holds %s (%s)%s; --rm-type %s needs a non-empty str/int/float label "
                         "or a dict with a non-empty ground_truth - fix or drop those rows"
                         % (where, spec["label_key"], short(value), why, more, spec["reward_type"]))
            elif kind == "json":
                self.add("%s is not valid JSON (%s)%s; each line of a JSONL file must be one JSON object - fix or "
                         "remove it" % (where, why, more))
            elif kind == "not-object":
                self.add("%s is %s, not a JSON object%s; each line of a JSONL file must be one JSON object"
                         % (where, why, more))
            elif kind.startswith("missing-key"):
                self.add("%s has no key %s%s; every row needs it - fix or drop those rows" % (where, why, more))


def check_values(check, row, values, line=None):
    spec = check.spec
    if spec["input_key"] in values:
        why = prompt_problem(values[spec["input_key"]])
        if why:
            check.bad_row("prompt", row, values[spec["input_key"]], why, line)
    if spec["label_key"] and spec["label_key"] in values:
        found = label_problem(values[spec["label_key"]], spec["reward_type"])
        if found:
            check.bad_row(found[0], row, values[spec["label_key"]], found[1], line)


def missing_columns(check, columns):
    spec = check.spec
    names = ", ".join(columns) if columns else "none"
    missing = []
    if spec["input_key"] not in columns:
        missing.append(spec["input_key"])
        check.add("column '%s' missing (columns: %s); set --input-key (input-key in slime_train_args.ROLLOUT_ARGS) "
                  "to one of them"
                  % (spec["input_key"], names))
    if spec["label_key"] and spec["label_key"] not in columns:
        missing.append(spec["label_key"])
        check.add("column '%s' missing (columns: %s); set --label-key (label-key in slime_train_args.ROLLOUT_ARGS) "
                  "to one of them"
                  % (spec["label_key"], names))
    return missing


def wanted_columns(spec, columns):
    wanted = []
    for key in (spec["input_key"], spec["label_key"]):
        if key and key in columns and key not in wanted:
            wanted.append(key)
    return wanted


def check_parquet(check, info, path, row_slice):
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        check.add("pyarrow is not importable by this Python (%s); install pyarrow in the training container "
                  "(pip install pyarrow)" % exc)
        return
    try:
        pfile = pq.ParquetFile(path)
        total = pfile.metadata.num_rows
        columns = list(pfile.schema_arrow.names)
    except Exception as exc:  # ArrowInvalid, OSError, ...
        check.add("cannot read it as Parquet (%s: %s); the file is truncated or not Parquet - download or "
                  "generate it again" % (type(exc).__name__, exc))
        return
    info["columns"] = columns
    info["total_rows"] = total
    selected = range(total)[row_slice] if row_slice is not None else range(total)
    info["rows"] = len(selected)
    missing_columns(check, columns)
    wanted = wanted_columns(check.spec, columns)
    if not wanted or not len(selected):
        return
    row = 0
    try:
        for batch in pfile.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
            data = {name: batch.column(pos).to_pylist() for pos, name in enumerate(batch.schema.names)}
            for offset in range(batch.num_rows):
                if row in selected:
                    check_values(check, row, {name: data[name][offset] for name in data})
                row += 1
    except Exception as exc:
        check.add("cannot read rows of it after row %d (%s: %s); the file is damaged - download or generate it "
                  "again" % (row, type(exc).__name__, exc))


def check_jsonl(check, info, path, row_slice):
    spec = check.spec
    columns = []
    seen = set()
    lacking = {}
    rows = 0
    try:
        selected = None
        if row_slice is not None:
            with open(path, "rb") as handle:
                total = sum(1 for raw in handle if raw.strip())
            selected = range(total)[row_slice]
        with open(path, "rb") as handle:
            for line_no, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                row = rows
                rows += 1
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except ValueError as exc:
                    check.bad_row("json", row, None, str(exc), line_no)
                    continue
                if not isinstance(obj, dict):
                    check.bad_row("not-object", row, obj, kind_of(obj), line_no)
                    continue
                for key in obj:
                    if key not in seen:
                        seen.add(key)
                        columns.append(key)
                if selected is not None and row not in selected:
                    continue
                check_values(check, row, obj, line_no)
                for key in (spec["input_key"], spec["label_key"]):
                    if key and key not in obj:
                        entry = lacking.setdefault(key, [row, line_no, 0])
                        entry[2] += 1
    except OSError as exc:
        check.add("cannot read it (%s); fix its permissions or copy it again" % (exc.strerror or exc))
        return
    for key, (row, line_no, count) in lacking.items():
        if key in seen:  # the key exists in other rows: name the rows without it
            check.bad["missing-key:" + key] = [row, None, "'%s'" % key, count, line_no]
    info["columns"] = columns
    info["total_rows"] = rows
    info["rows"] = len(range(rows)[row_slice]) if row_slice is not None else rows
    missing_columns(check, columns)


def normalise_items(module):
    params = module.params
    specs = []
    errors = []
    for pos, item in enumerate(params["files"]):
        if isinstance(item, str):
            item = {"path": item}
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not item.get("path"):
            errors.append("files[%d] is %s; give a path or a dict with 'path'" % (pos, short(item)))
            continue
        unknown = sorted(set(item) - set(ITEM_KEYS))
        if unknown:
            errors.append("files[%d] (%s) has unknown keys %s; allowed: %s"
                          % (pos, item["path"], ", ".join(unknown), ", ".join(ITEM_KEYS)))
            continue
        label_key = item["label_key"] if "label_key" in item else params["label_key"]
        try:
            min_rows = int(item.get("min_rows", params["min_rows"]))
        except (TypeError, ValueError):
            errors.append("files[%d] (%s) min_rows %s is not a number" % (pos, item["path"], short(item["min_rows"])))
            continue
        specs.append({
            "path": item["path"],
            "role": item.get("role"),
            "input_key": item.get("input_key") or params["input_key"],
            "label_key": label_key or None,
            "reward_type": item.get("reward_type") or params["reward_type"],
            "min_rows": min_rows,
        })
    if errors:
        module.fail_json(msg="dataset_check: " + "; ".join(errors), files=[], totals={}, problems=errors)
    return specs


def check_file(spec, fingerprint=True):
    check = FileCheck(spec)
    real, row_slice = parse_generalized_path(spec["path"])
    info = {
        "path": spec["path"], "file": real, "role": spec["role"], "format": None, "rows": None, "total_rows": None,
        "columns": [], "bytes": None, "fingerprint": None, "input_key": spec["input_key"],
        "label_key": spec["label_key"], "reward_type": spec["reward_type"],
    }
    if real.endswith(".parquet"):
        info["format"] = "parquet"
    elif real.endswith(".jsonl"):
        info["format"] = "jsonl"
    if not os.path.exists(real):
        check.add("file not found; prepare the data first (guide section 2) or correct the path")
        return info, check.problems
    if os.path.isdir(real):
        check.add("is a directory, not a data file; give the .parquet or .jsonl file inside it")
        return info, check.problems
    info["bytes"] = os.path.getsize(real)
    if not os.access(real, os.R_OK):
        check.add("cannot read it (permission denied); fix its permissions (chmod a+r) or copy it again")
        return info, check.problems
    if info["format"] is None:
        check.add("unsupported file name: slime reads only .parquet and .jsonl files (slime/utils/data.py); "
                  "convert it or give it the right extension")
    elif info["format"] == "parquet":
        check_parquet(check, info, real, row_slice)
    else:
        check_jsonl(check, info, real, row_slice)
    check.row_problems()
    if info["rows"] is not None and info["rows"] < spec["min_rows"]:
        sliced = " after the row slice" if row_slice is not None else ""
        check.add("%d rows%s, fewer than min_rows %d; the file is empty or cut short - generate it again "
                  "(guide section 2) or lower min_rows" % (info["rows"], sliced, spec["min_rows"]))
    if fingerprint:
        try:
            info["fingerprint"] = sha256_file(real)
        except OSError as exc:
            check.add("cannot read it (%s); fix its permissions or copy it again" % (exc.strerror or exc))
    return info, check.problems


def module_kwargs():
    return dict(
        argument_spec=dict(
            files=dict(type="list", elements="raw", required=True),
            input_key=dict(type="str", default="prompt", no_log=False),
            label_key=dict(type="str", default="reward_model", no_log=False),
            reward_type=dict(type="str", default="zero2one"),
            min_rows=dict(type="int", default=1),
            fingerprint=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )


def main(module):
    specs = normalise_items(module)
    files = []
    problems = []
    bad_files = 0
    for spec in specs:
        info, found = check_file(spec, module.params["fingerprint"])
        files.append(info)
        problems.extend(found)
        bad_files += 1 if found else 0
    totals = {
        "files": len(files),
        "rows": sum(f["rows"] or 0 for f in files),
        "bytes": sum(f["bytes"] or 0 for f in files),
    }
    if problems:
        numbered = " ".join("(%d) %s" % (pos, text) for pos, text in enumerate(problems, 1))
        module.fail_json(
            msg="dataset_check: %d problem%s in %d of %d files: %s"
                % (len(problems), "" if len(problems) == 1 else "s", bad_files, len(files), numbered),
            files=files, totals=totals, problems=problems, changed=False,
        )
    module.exit_json(
        changed=False, files=files, totals=totals, problems=[],
        msg="%d files, %d rows, %s: all readable with the keys and label shapes the run needs"
            % (totals["files"], totals["rows"], human_bytes(totals["bytes"])),
    )
