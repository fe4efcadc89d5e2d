# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The hf_model_check module's work (plugins/modules/hf_model_check.py holds its documentation):
main(module) runs it for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with
the arguments the role gave the module (module_utils/supervise). Standard library only: the safetensors
headers are read with struct and json."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import struct
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import hf_index
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import (
    flag_on,
    human_bytes,
    norm_flag,
    sha256_file,
)

CONFIG_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                 "intermediate_size", "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings")
# MODEL_ARGS flag -> (config field, how to compare)
ARG_FIELDS = (
    ("num-layers", "num_hidden_layers", "int"),
    ("hidden-size", "hidden_size", "int"),
    ("ffn-hidden-size", "intermediate_size", "int"),
    ("num-attention-heads", "num_attention_heads", "int"),
    ("num-query-groups", "num_key_value_heads", "int"),
    ("vocab-size", "vocab_size", "int"),
    ("norm-epsilon", "rms_norm_eps", "float"),
    ("rotary-base", "rope_theta", "float"),
    ("kv-channels", "head_dim", "int"),
)
UNTIE = "untie-embeddings-and-output-weights"
DTYPE_SIZES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}
MAX_HEADER = 100 * 1024 * 1024  # the safetensors format refuses larger headers
INDEX = hf_index.INDEX
SINGLE = "model.safetensors"
RERUN = "the download was interrupted — rerun the model stage to resume it"
REDOWNLOAD = "delete it and rerun the model stage to download it again"


def read_config(path, problems):
    cfg_path = os.path.join(path, "config.json")
    config = {}
    if not os.path.isfile(cfg_path):
        problems.append("config.json missing in %s; the download is incomplete — rerun the model stage" % path)
        return None
    try:
        with open(cfg_path, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError) as exc:
        problems.append("config.json is not readable JSON (%s); %s" % (exc, REDOWNLOAD))
        return None
    if not isinstance(raw, dict):
        problems.append("config.json holds %s, not a JSON object; %s" % (type(raw).__name__, REDOWNLOAD))
        return None
    if "rope_theta" not in raw and isinstance(raw.get("rope_parameters"), dict) and \
            "rope_theta" in raw["rope_parameters"]:
        raw = dict(raw, rope_theta=raw["rope_parameters"]["rope_theta"])
    missing = [field for field in CONFIG_FIELDS if field not in raw]
    for field in CONFIG_FIELDS + ("head_dim",):
        if field in raw:
            config[field] = raw[field]
    if missing:
        problems.append("config.json has no %s (the HF->Megatron conversion and slime's hf_validate_args need "
                        "them); this is not a complete Qwen3-style config — download the model again or fix "
                        "config.json" % ", ".join(missing))
    return config


def compare_model_args(config, model_args, problems):
    args = {norm_flag(k): v for k, v in (model_args or {}).items()}
    for flag, field, kind in ARG_FIELDS:
        if args.get(flag) in (None, False) or config.get(field) is None:  # left out, or not in this config
            continue
        want, have = args[flag], config[field]
        try:
            if kind == "int":
                want_num = float(want)
                same = float(have) == want_num
                shown = int(want_num) if want_num.is_integer() else want
            else:
                want_num = float(want)
                same = math.isclose(float(have), want_num, rel_tol=1e-6, abs_tol=0.0)
                shown = want
        except (TypeError, ValueError):
            problems.append("model_args %s is %r, not a number; set it to config.json's %s (%r)"
                            % (flag, want, field, have))
            continue
        if not same:
            problems.append(
                "config.json %s is %r but model_args %s is %r; model_args (MODEL_ARGS of scripts/models/<model>.sh) "
                "do not describe this model — set model_args %s to %r if this is the right model, or point path "
                "at the model that MODEL_ARGS describe" % (field, have, flag, shown, flag, have))
    if model_args and "tie_word_embeddings" in config:
        untie = UNTIE in args and flag_on(args[UNTIE])
        tied = bool(config["tie_word_embeddings"])
        if untie and tied:
            problems.append("config.json tie_word_embeddings is true but model_args sets %s; remove %s from "
                            "model_args (this model shares its embedding and output weights)" % (UNTIE, UNTIE))
        elif not untie and not tied:
            problems.append("config.json tie_word_embeddings is false but model_args lacks %s; add '%s: true' to "
                            "model_args (this model has a separate output layer)" % (UNTIE, UNTIE))


def check_tokenizer(path, wanted, problems):
    def present(name):
        return os.path.isfile(os.path.join(path, name))

    if wanted:
        missing = [name for name in wanted if not present(name)]
        if missing:
            problems.append("tokenizer file%s %s missing; the download is incomplete — rerun the model stage "
                            "(SGLang and slime load the tokenizer from this directory)"
                            % ("s" if len(missing) > 1 else "", ", ".join(missing)))
        return
    if not present("tokenizer_config.json"):
        problems.append("tokenizer_config.json missing; the download is incomplete — rerun the model stage "
                        "(SGLang and slime load the tokenizer from this directory)")
    if not present("tokenizer.json") and not (present("vocab.json") and present("merges.txt")):
        problems.append("neither tokenizer.json nor vocab.json + merges.txt present; the download is incomplete — "
                        "rerun the model stage")


def read_index(path, problems):
    """(shard names, {shard: [tensor names]}) from the index, or (None, None)."""
    try:
        tensors = hf_index.weight_map(os.path.join(path, INDEX))
    except ValueError as exc:
        problems.append("%s is not a readable index (%s); %s" % (INDEX, exc, REDOWNLOAD))
        return None, None
    by_shard = {}
    for tensor, shard in tensors.items():
        by_shard.setdefault(str(shard), []).append(tensor)
    return sorted(by_shard), by_shard


def read_header(file_path):
    """(header dict, header length) of a safetensors file; raises ValueError with the reason."""
    size = os.path.getsize(file_path)
    with open(file_path, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ValueError("truncated-header", "only %d bytes, not even the 8-byte header length" % size)
        length = struct.unpack("<Q", head)[0]
        if length < 2 or length > MAX_HEADER:
            raise ValueError("corrupt", "header length %d is not sane (file is %d bytes)" % (length, size))
        if 8 + length > size:
            raise ValueError("truncated-header", "its %d-byte header is cut off at %d bytes" % (length, size))
        blob = handle.read(length)
    try:
        header = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError("corrupt", "its header is not JSON (%s)" % exc) from exc
    if not isinstance(header, dict):
        raise ValueError("corrupt", "its header is not a JSON object")
    return header, length


def check_shard(path, name, listed, problems):
    """Check one shard. Returns (parameters, ok)."""
    file_path = os.path.join(path, name)
    if not os.path.isfile(file_path):
        problems.append("%s missing (named in %s); %s" % (name, INDEX if listed is not None else "the directory",
                                                          RERUN))
        return 0, False
    size = os.path.getsize(file_path)
    try:
        header, length = read_header(file_path)
    except ValueError as exc:
        kind, why = exc.args
        if kind == "truncated-header":
            problems.append("%s is truncated: %s; %s" % (name, why, RERUN))
        else:
            problems.append("%s has a corrupt header: %s; %s" % (name, why, REDOWNLOAD))
        return 0, False
    params = 0
    end_max = 0
    bad = []
    for tensor, spec in header.items():
        if tensor == "__metadata__":
            continue
        try:
            shape = [int(d) for d in spec["shape"]]
            begin, end = (int(x) for x in spec["data_offsets"])
            dtype = str(spec["dtype"])
        except (KeyError, TypeError, ValueError):
            bad.append("%s has no valid dtype/shape/data_offsets" % tensor)
            continue
        count = 1
        for dim in shape:
            count *= dim
        params += count
        if begin < 0 or end < begin:
            bad.append("%s has data_offsets [%d, %d]" % (tensor, begin, end))
            continue
        if dtype in DTYPE_SIZES and end - begin != count * DTYPE_SIZES[dtype]:
            bad.append("%s (%s %s) spans %d bytes, not %d" % (tensor, dtype, shape, end - begin,
                                                              count * DTYPE_SIZES[dtype]))
        end_max = max(end_max, end)
    ok = True
    if bad:
        ok = False
        problems.append("%s has a corrupt header: %s%s; %s" % (name, "; ".join(bad[:3]),
                                                               " and %d more" % (len(bad) - 3) if len(bad) > 3 else "",
                                                               REDOWNLOAD))
    expected = 8 + length + end_max
    if size < expected:
        ok = False
        problems.append("%s is truncated: %s of %s; %s" % (name, human_bytes(size), human_bytes(expected), RERUN))
    elif size > expected:
        ok = False
        problems.append("%s is %d bytes longer than its header describes (%d of %d bytes); %s"
                        % (name, size - expected, size, expected, REDOWNLOAD))
    if listed:
        absent = [t for t in listed if t not in header]
        if absent:
            ok = False
            problems.append("%s lacks %d tensor%s that %s places in it (first: %s); the shard and the index come "
                            "from different downloads — %s" % (name, len(absent), "s" if len(absent) > 1 else "",
                                                               INDEX, absent[0], REDOWNLOAD))
    return params, ok


def load_manifest(manifest, problems):
    if isinstance(manifest, dict):
        entries = manifest
    else:
        try:
            with open(str(manifest), encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            problems.append("sha256_manifest %s cannot be read (%s); give a dict of file name to sha256 or the path "
                            "of such a file" % (manifest, exc.strerror or exc))
            return {}
        try:
            entries = json.loads(text)
        except ValueError:
            entries = {}
            for line in text.splitlines():
                match = re.match(r"^\s*([0-9a-fA-F]{64})\s+\*?(.+?)\s*$", line)
                if match:
                    entries[match.group(2)] = match.group(1)
                elif line.strip() and not line.lstrip().startswith("#"):
                    problems.append("sha256_manifest %s line %r is not '<sha256>  <file name>'; fix the manifest"
                                    % (manifest, line[:80]))
        if not isinstance(entries, dict):
            problems.append("sha256_manifest %s is not a JSON object of file name to sha256; fix the manifest"
                            % manifest)
            return {}
    clean = {}
    for name, digest in entries.items():
        if not isinstance(digest, str) or not re.match(r"^[0-9a-fA-F]{64}$", digest):
            problems.append("sha256_manifest entry %s is %r, not a sha256; fix the manifest" % (name, digest))
            continue
        name = str(name)
        clean[name[2:] if name.startswith("./") else name] = digest.lower()
    return clean


def check_manifest(path, manifest, skip, workers, problems, hashes):
    todo = []
    for name in sorted(manifest):
        file_path = os.path.join(path, name)
        if not os.path.isfile(file_path):
            if name not in skip:
                problems.append("%s is in sha256_manifest but missing; %s" % (name, RERUN))
        elif name not in skip:
            todo.append(name)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = dict(zip(todo, pool.map(lambda n: sha256_file(os.path.join(path, n)), todo)))
    for name in todo:
        hashes[name] = results[name]
        if results[name] != manifest[name]:
            problems.append("%s sha256 is %s but sha256_manifest says %s; the file is corrupt — %s"
                            % (name, results[name], manifest[name], REDOWNLOAD))


def fingerprint(path, shards, files):
    """Identifies the weights and the config without reading the weights: the sha256 of
    config.json, of the index, and of each shard's name, size and header."""
    digest = hashlib.sha256()
    for name in ("config.json", INDEX):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            digest.update(name.encode() + b"\0" + sha256_file(full).encode() + b"\n")
    sizes = dict((f["name"], f["bytes"]) for f in files)
    for name in sorted(shards):
        digest.update(("%s\0%s\0" % (name, sizes.get(name))).encode())
        with open(os.path.join(path, name), "rb") as handle:
            head = handle.read(8)
            length = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
            digest.update(handle.read(min(length, 100 * 1024 * 1024)))
    return digest.hexdigest()


def module_kwargs():
    return dict(
        argument_spec=dict(
            path=dict(type="path", required=True),
            model_args=dict(type="dict"),
            tokenizer_files=dict(type="list", elements="str", no_log=False),
            sha256_manifest=dict(type="raw"),
            hash_workers=dict(type="int", default=4),
            require_index=dict(type="bool"),
        ),
        supports_check_mode=True,
    )


def main(module):
    params = module.params
    path = params["path"]
    result = dict(changed=False, shards=0, total_bytes=0, parameters=0, files=[], config={}, problems=[])
    if not os.path.isdir(path):
        what = "is a file, not a directory" if os.path.exists(path) else "does not exist"
        msg = "hf_model_check: %s %s; download the model first (guide section 3.1) or correct the path" % (path, what)
        result["problems"] = [msg]
        module.fail_json(msg=msg, **{k: v for k, v in result.items() if k != "changed"})

    problems = []
    files = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            files.append({"name": name, "bytes": os.path.getsize(full)})
    result["files"] = files
    result["total_bytes"] = sum(f["bytes"] for f in files)

    config = read_config(path, problems)
    if config is not None:
        result["config"] = config
        if params["model_args"]:
            compare_model_args(config, params["model_args"], problems)
    check_tokenizer(path, params["tokenizer_files"], problems)

    local = [f["name"] for f in files if f["name"].endswith(".safetensors")]
    by_shard = {}
    if os.path.exists(os.path.join(path, INDEX)):
        shards, by_shard = read_index(path, problems)
        shards = shards or []
    else:
        need_index = params["require_index"] if params["require_index"] is not None else len(local) > 1
        if need_index:
            problems.append("%s missing (%d .safetensors files present); without it the shards cannot be matched "
                            "to the model — %s" % (INDEX, len(local), RERUN))
        shards = [SINGLE] if SINGLE in local else local
        if not shards:
            problems.append("no weights: neither %s nor any .safetensors file in %s; %s" % (INDEX, path, RERUN))
    bad_shards = set()
    total_params = 0
    for name in shards:
        count, ok = check_shard(path, name, (by_shard or {}).get(name), problems)
        total_params += count
        if not ok:
            bad_shards.add(name)
    result["shards"] = len(shards)
    result["parameters"] = total_params

    if params["sha256_manifest"]:
        manifest = load_manifest(params["sha256_manifest"], problems)
        hashes = {}
        check_manifest(path, manifest, bad_shards, params["hash_workers"], problems, hashes)
        for entry in files:
            if entry["name"] in hashes:
                entry["sha256"] = hashes[entry["name"]]

    result["problems"] = problems
    if problems:
        numbered = " ".join("(%d) %s" % (pos, text) for pos, text in enumerate(problems, 1))
        module.fail_json(msg="hf_model_check: %s: %d problem%s: %s"
                             % (path, len(problems), "" if len(problems) == 1 else "s", numbered),
                         **{k: v for k, v in result.items() if k != "changed"})
    result["fingerprint"] = fingerprint(path, shards, files)
    result["msg"] = "%s: %d shard%s, %s parameters, %s" % (
        path, len(shards), "" if len(shards) == 1 else "s", "{:,}".format(total_params),
        human_bytes(result["total_bytes"]))
    module.exit_json(**result)
