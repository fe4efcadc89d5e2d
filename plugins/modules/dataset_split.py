#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: dataset_split
short_description: Select one data_source from a verl-style Parquet file and split it into train and test files
version_added: "0.1.0"
description:
  - Does what the guide's C(select_aime_data.py) does (section 2.2), with the same parameters and defaults, so that
    the same input and parameters give the same rows in the same order as the guide's script.
  - Keeps the rows whose C(data_source) equals O(source), shuffles them with pandas' C(DataFrame.sample)
    (C(frac=1.0), C(random_state=seed)) and C(reset_index) (C(drop=True)), exactly as the guide, takes the first
    O(test_size) rows as the test set and the rest as the train set, sets C(extra_info.split) to C(test) or C(train)
    (and C(extra_info.index) to 0 where it is missing) and writes both files with C(to_parquet) (C(index=False)).
  - Each output is written to a temporary file in its own directory and renamed into place, so a reader never sees
    half a file.
  - "Records the input's sha256, the parameters and the outputs' sha256 in a state file beside the train output
    (C(<train_output dir>/.dataset_split.<train_output name>.json)). A rerun with the same input and parameters
    whose outputs are unchanged reports C(changed=false) and writes nothing; a changed input, a changed parameter,
    or a modified or missing output makes it split again."
  - An existing output that this module did not write (or that was modified since) is kept when the new content is
    identical, and otherwise moved aside to C(<path>.replaced-<UTC time>) (C(module_utils/artifacts/aside.py))
    before the new file takes its place (see RV(moved_to)).
  - Needs pandas with a Parquet engine (pyarrow) in the Python that runs the module (the training container's).
options:
  input:
    description:
      - The source Parquet file, for example AM-Thinking-v1-RL-Dataset's C(math.parquet) (the guide's C(--input)).
    type: path
    required: true
  train_output:
    description:
      - Train Parquet file to write (the guide's C(--train-output)), for example
        C(/data/models/data/aime_train.parquet).
    type: path
    required: true
  test_output:
    description:
      - Test Parquet file to write (the guide's C(--test-output)), for example
        C(/data/models/data/aime_test.parquet).
    type: path
    required: true
  test_size:
    description:
      - Number of rows in the test file (the guide's C(--test-size)).
      - Must be >= 0 and at most the number of selected rows.
    type: int
    default: 60
  seed:
    description: Random seed of the shuffle (the guide's C(--seed)).
    type: int
    default: 42
  source:
    description: The C(data_source) value to keep (the guide's C(--source)).
    type: str
    default: 20250416_amc_aime_website
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads and splits the input in memory to validate it and count the rows, and writes nothing.
  diff_mode:
    support: full
    details:
      - The diff is the state record (input sha256, parameters, output sha256s) before and after.
  idempotent:
    support: full
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Split the AMC/AIME rows of math.parquet like the guide's select_aime_data.py
  mtslime.posttrain.dataset_split:
    input: /data/models/raw/math.parquet
    train_output: /data/models/data/aime_train.parquet
    test_output: /data/models/data/aime_test.parquet
  register: split

- name: Another source, 100 test rows, another seed
  mtslime.posttrain.dataset_split:
    input: /data/models/raw/math.parquet
    train_output: /data/models/data/other_train.parquet
    test_output: /data/models/data/other_test.parquet
    source: some_other_source
    test_size: 100
    seed: 7
"""

RETURN = r"""
train_rows:
  description: Rows in the train file.
  returned: success
  type: int
  sample: 1205
test_rows:
  description: Rows in the test file.
  returned: success
  type: int
  sample: 60
selected_rows:
  description: Rows of the input whose C(data_source) equals O(source).
  returned: success
  type: int
input_sha256:
  description: sha256 of the input file.
  returned: success
  type: str
outputs:
  description:
    - The two outputs, keyed C(train) and C(test), each with C(path), C(rows) and C(sha256).
    - C(sha256) is null in check mode when the file would be rewritten.
  returned: success
  type: dict
  sample:
    train: {path: /data/models/data/aime_train.parquet, rows: 1205, sha256: "3f1a..."}
    test: {path: /data/models/data/aime_test.parquet, rows: 60, sha256: "9c0d..."}
state_file:
  description: The state file that records the input sha256, parameters and output sha256s.
  returned: success
  type: str
moved_to:
  description: Where existing outputs that differed from the new ones (and were not written by this module) were moved.
  returned: when an output was moved aside
  type: list
  elements: str
actions:
  description: What was done (or would be done in check mode), one sentence each.
  returned: always
  type: list
  elements: str
diff:
  description: The state record before and after (JSON text).
  returned: when changed
  type: dict
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts.aside import move_aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import (
    atomic_write,
    read_json_object,
    sha256_file,
)

STATE_VERSION = 1
FIX_INPUT = ("point input at AM-Thinking-v1-RL-Dataset's math.parquet (guide section 2.1) or another verl-style "
             "Parquet file")


class SplitError(Exception):
    pass


def set_split(extra_info, split):
    """Same as the guide's set_split."""
    info = dict(extra_info) if isinstance(extra_info, dict) else {}
    info["split"] = split
    if "index" not in info:
        info["index"] = 0
    return info


def state_path(train_output):
    train_output = os.path.abspath(train_output)
    return os.path.join(os.path.dirname(train_output), ".dataset_split.%s.json" % os.path.basename(train_output))


def dump_state(state):
    return json.dumps(state, indent=2, sort_keys=True) + "\n" if state else ""


def wanted_record(params, input_sha):
    return {
        "version": STATE_VERSION,
        "input": os.path.abspath(params["input"]),
        "input_sha256": input_sha,
        "source": params["source"],
        "seed": params["seed"],
        "test_size": params["test_size"],
        "train_output": os.path.abspath(params["train_output"]),
        "test_output": os.path.abspath(params["test_output"]),
    }


def file_sha(path):
    try:
        return sha256_file(path)
    except OSError:
        return None


def up_to_date(state, wanted):
    """Why the recorded split does not hold any more, or None when it still holds."""
    if not state:
        return "no state record"
    for key, value in wanted.items():
        if state.get(key) != value:
            return "%s changed (%r -> %r)" % (key, state.get(key), value)
    for split in ("train", "test"):
        out = state.get("outputs", {}).get(split) or {}
        path = wanted["%s_output" % split]
        if not os.path.exists(path):
            return "%s output %s is missing" % (split, path)
        if file_sha(path) != out.get("sha256"):
            return "%s output %s was modified" % (split, path)
    return None


def split_frame(params, input_path):
    """Read the input and return (selected_rows, train_df, test_df), as the guide's script does."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise SplitError(
            "dataset_split: pandas is not importable by this Python (%s); install pandas and pyarrow in the "
            "training container (pip install pandas pyarrow)" % exc
        ) from exc
    try:
        df = pd.read_parquet(input_path)
    except ImportError as exc:
        raise SplitError(
            "dataset_split: pandas cannot read Parquet here (%s); install pyarrow in the training container "
            "(pip install pyarrow)" % exc
        ) from exc
    except Exception as exc:  # pyarrow raises several types for a broken file
        raise SplitError(
            "dataset_split: input %s is not a readable Parquet file (%s: %s); the file is truncated or not Parquet - "
            "download it again or %s" % (input_path, type(exc).__name__, exc, FIX_INPUT)
        ) from exc
    if "data_source" not in df.columns:
        raise SplitError(
            "dataset_split: input %s has no column 'data_source' (columns: %s); the guide's split selects rows by "
            "data_source - %s" % (input_path, ", ".join(str(c) for c in df.columns), FIX_INPUT)
        )
    source = params["source"]
    selected = df[df["data_source"] == source].copy()
    n_selected = len(selected)
    if n_selected == 0:
        counts = df["data_source"].value_counts()
        present = ", ".join("%r (%d rows)" % (value, count) for value, count in counts.head(10).items())
        more = " and %d more" % (len(counts) - 10) if len(counts) > 10 else ""
        raise SplitError(
            "dataset_split: input %s has no rows with data_source=%r; data_source values present: %s%s; set source "
            "to one of them or point input at the file that has %r rows"
            % (input_path, source, present or "none (the file has no rows)", more, source)
        )
    if params["test_size"] > n_selected:
        raise SplitError(
            "dataset_split: test_size=%d exceeds the %d rows with data_source=%r in %s; set test_size to at most %d"
            % (params["test_size"], n_selected, source, input_path, n_selected)
        )
    shuffled = selected.sample(frac=1.0, random_state=params["seed"]).reset_index(drop=True)
    test_df = shuffled.iloc[: params["test_size"]].copy()
    train_df = shuffled.iloc[params["test_size"]:].copy()
    if "extra_info" in test_df.columns:
        test_df["extra_info"] = test_df["extra_info"].map(lambda x: set_split(x, "test"))
        train_df["extra_info"] = train_df["extra_info"].map(lambda x: set_split(x, "train"))
    return n_selected, train_df, test_df


def write_parquet(frame, path):
    """to_parquet(index=False) into a temp file beside `path`, then rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.chmod(tmp, 0o644)
        return tmp
    except BaseException:
        os.unlink(tmp)
        raise


def main():
    module = AnsibleModule(
        argument_spec=dict(
            input=dict(type="path", required=True),
            train_output=dict(type="path", required=True),
            test_output=dict(type="path", required=True),
            test_size=dict(type="int", default=60),
            seed=dict(type="int", default=42),
            source=dict(type="str", default="20250416_amc_aime_website"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    input_path = params["input"]
    train_path = os.path.abspath(params["train_output"])
    test_path = os.path.abspath(params["test_output"])
    actions = []

    if params["test_size"] < 0:
        module.fail_json(msg="dataset_split: test_size must be >= 0, got %d; set test_size to the number of test rows "
                             "(the guide uses 60)" % params["test_size"], actions=actions)
    if train_path == test_path:
        module.fail_json(msg="dataset_split: train_output and test_output are the same file (%s); give them "
                             "different paths" % train_path, actions=actions)
    if os.path.abspath(input_path) in (train_path, test_path):
        module.fail_json(msg="dataset_split: input %s is also an output; write train_output and test_output to "
                             "other paths" % input_path, actions=actions)
    if not os.path.isfile(input_path):
        what = "is a directory, not a file" if os.path.isdir(input_path) else "does not exist"
        module.fail_json(msg="dataset_split: input %s %s; %s, or download it first (guide section 2.1)"
                             % (input_path, what, FIX_INPUT), actions=actions)

    input_sha = sha256_file(input_path)
    wanted = wanted_record(params, input_sha)
    spath = state_path(train_path)
    state = read_json_object(spath)
    reason = up_to_date(state, wanted)
    outputs = {}
    if reason is None:
        for split in ("train", "test"):
            rec = state["outputs"][split]
            outputs[split] = {"path": wanted["%s_output" % split], "rows": rec.get("rows"), "sha256": rec.get("sha256")}
        module.exit_json(
            changed=False, train_rows=outputs["train"]["rows"], test_rows=outputs["test"]["rows"],
            selected_rows=state.get("selected_rows"), input_sha256=input_sha, outputs=outputs, state_file=spath,
            actions=["%s and %s are up to date with %s (sha256 %s)"
                     % (train_path, test_path, input_path, input_sha[:12])],
        )

    try:
        n_selected, train_df, test_df = split_frame(params, input_path)
    except SplitError as exc:
        module.fail_json(msg=str(exc), actions=actions)

    actions.append("split %s: %d rows with data_source=%r, seed %d -> %d train, %d test (%s)"
                   % (input_path, n_selected, params["source"], params["seed"], len(train_df), len(test_df), reason))
    before_text = dump_state(state)
    frames = {"train": (train_df, train_path), "test": (test_df, test_path)}

    if module.check_mode:
        after = dict(wanted, selected_rows=n_selected, outputs={
            split: {"rows": len(frame), "sha256": None} for split, (frame, _p) in frames.items()})
        for split, (frame, path) in frames.items():
            outputs[split] = {"path": path, "rows": len(frame), "sha256": None}
            actions.append("would write %s (%d rows)" % (path, len(frame)))
        actions.append("would write %s" % spath)
        module.exit_json(
            changed=True, train_rows=len(train_df), test_rows=len(test_df), selected_rows=n_selected,
            input_sha256=input_sha, outputs=outputs, state_file=spath, actions=actions,
            diff={"before": before_text, "after": dump_state(after), "before_header": spath, "after_header": spath},
        )

    recorded = (state or {}).get("outputs", {}) if state else {}
    moved = []
    temps = []
    try:
        for split, (frame, path) in frames.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = write_parquet(frame, path)
            temps.append(tmp)
            new_sha = sha256_file(tmp)
            old_sha = file_sha(path) if os.path.exists(path) else None
            if old_sha == new_sha:
                os.unlink(tmp)
                actions.append("kept %s: its content is already the %s split (%d rows)" % (path, split, len(frame)))
            else:
                ours = (recorded.get(split) or {}).get("sha256")
                if old_sha is not None and old_sha != ours:
                    aside = move_aside(path, "replaced")
                    moved.append(aside)
                    actions.append("moved %s aside to %s (this module had not written it)" % (path, aside))
                os.replace(tmp, path)
                actions.append("wrote %s (%d rows)" % (path, len(frame)))
            outputs[split] = {"path": path, "rows": len(frame), "sha256": new_sha}
    except OSError as exc:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        module.fail_json(msg="dataset_split: cannot write %s: %s; check that the directory is writable and has space"
                             % (exc.filename or "the outputs", exc.strerror or exc), actions=actions, moved_to=moved)

    after = dict(wanted, selected_rows=n_selected,
                 outputs={split: {"rows": out["rows"], "sha256": out["sha256"]} for split, out in outputs.items()})
    after_text = dump_state(after)
    atomic_write(spath, after_text)
    actions.append("recorded the split in %s" % spath)
    result = dict(
        changed=True, train_rows=len(train_df), test_rows=len(test_df), selected_rows=n_selected,
        input_sha256=input_sha, outputs=outputs, state_file=spath, actions=actions,
        diff={"before": before_text, "after": after_text, "before_header": spath, "after_header": spath},
    )
    if moved:
        result["moved_to"] = moved
    module.exit_json(**result)


if __name__ == "__main__":
    main()
