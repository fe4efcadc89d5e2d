#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number

DOCUMENTATION = r"""
---
module: dataset_check
short_description: Check the training and eval files a slime run will read (Parquet and JSONL)
version_added: "0.1.0"
description:
  - Checks every file that slime's C(--prompt-data) / C(--eval-prompt-data) will read, the way slime reads it
    (C(slime/utils/data.py)) - C(.parquet) and C(.jsonl), with an optional C(@[start:end]) row slice after the path.
  - "Per file: it is readable; it has the input key (C(--input-key)) and, when set, the label key (C(--label-key));
    it has at least O(min_rows) rows; every prompt is a non-empty string or a non-empty list of C({role, content})
    messages with string content; every label has the shape the reward type (C(--rm-type)) needs."
  - "Label shapes: for C(zero2one), C(math), C(dapo), C(deepscaler), C(f1), C(gpqa) and their C(boxed_) variants a
    dict label (the verl C(reward_model) column) must hold a non-empty C(ground_truth), and a scalar label must be a
    non-empty string or a number. C(deepscaler) asserts that the label is a str, int or float, so a dict label is
    an error there (use C(--label-key label) with a scalar column). For C(remote_rm), C(random), C(ifbench) and
    unknown types the label column only has to exist."
  - Reads only the input and label columns (Parquet row groups in batches; row counts and column names come from
    the Parquet footer) and streams JSONL line by line, so a large file with big extra columns is cheap to check.
  - When anything is wrong it fails with one message that lists every problem, each naming the file, the column
    or row, and the fix.
  - Parquet needs pyarrow in the Python that runs the module (the training container's); JSONL needs nothing.
options:
  files:
    description:
      - The files to check. Each item is a path, or a dict with C(path) (required) and optionally C(role)
        (free text, for example C(train) or C(eval), returned as is), and per-file C(input_key), C(label_key),
        C(reward_type) and C(min_rows) that override the module options for that file (slime's
        C(--eval-input-key) / C(--eval-label-key) and an eval config can differ from the training keys).
      - A path may end with slime's row slice C(@[start:end]); the slice is applied before counting rows.
    type: list
    elements: raw
    required: true
  input_key:
    description: Column that holds the prompt (slime's C(--input-key)).
    type: str
    default: prompt
  label_key:
    description: Column that holds the label (slime's C(--label-key)). Empty means the run uses no label.
    type: str
    default: reward_model
  reward_type:
    description: The reward type (slime's C(--rm-type)); decides what shape a label must have.
    type: str
    default: zero2one
  min_rows:
    description: Fewest rows a file may have.
    type: int
    default: 1
  fingerprint:
    description: Return the sha256 of each file's content (reads each file once more, whole).
    type: bool
    default: true
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the training set and the eval sets of the guide's run
  mtslime.posttrain.dataset_check:
    files:
      - {path: /data/models/data/amt_math17k_d_qweninstruct.parquet, role: train}
      - {path: /data/models/data/aime_2024.parquet, role: eval}
      - {path: /data/models/data/aime_2025.parquet, role: eval}
    input_key: prompt
    label_key: reward_model
    reward_type: zero2one
  register: data_check

- name: slime's upstream example data (JSONL with a scalar label)
  mtslime.posttrain.dataset_check:
    files:
      - /root/dapo-math-17k/dapo-math-17k.jsonl
      - /root/aime-2024/aime-2024.jsonl@[0:30]
    label_key: label
    reward_type: deepscaler
    fingerprint: false
"""

RETURN = r"""
files:
  description: One entry per file, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path as given (with its row slice, if any).
      type: str
    file:
      description: The file that was read (the path without the row slice).
      type: str
    role:
      description: The C(role) given for the file, or null.
      type: str
    format:
      description: C(parquet) or C(jsonl) (null for an unsupported name).
      type: str
    rows:
      description: Rows slime will read (after the row slice); null when the file could not be read.
      type: int
    total_rows:
      description: Rows in the whole file.
      type: int
    columns:
      description: All column names (Parquet schema; for JSONL the keys of all rows, in order of first appearance).
      type: list
      elements: str
    bytes:
      description: File size.
      type: int
    fingerprint:
      description: sha256 of the file content (null when O(fingerprint=false) or unreadable).
      type: str
    input_key:
      description: Input column checked for this file.
      type: str
    label_key:
      description: Label column checked for this file (null when none).
      type: str
    reward_type:
      description: Reward type the labels were checked against.
      type: str
totals:
  description: C(files), C(rows) and C(bytes) summed over the files.
  returned: always
  type: dict
  sample: {files: 3, rows: 17458, bytes: 48211021}
problems:
  description: Every problem found, one sentence each with the file and the fix (empty on success).
  returned: always
  type: list
  elements: str
"""

import json
import math
import os
import re

from ansible.module_utils.basic import AnsibleModule
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


def main():
    module = AnsibleModule(
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


if __name__ == "__main__":
    main()
