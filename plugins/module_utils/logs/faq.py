# The guide's FAQ as data, and the rule that picks an entry for an error: the kind of a
# failure, the FAQ entry that covers it and the guide's advice. Python 3.8+.
from __future__ import annotations

import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import (
    DASHBOARD_PORT,
    DEFAULT_GCS_ADDRESS,
    GCS_PORT,
)

# The first entry whose `error` patterns match the lines of an error (its traceback, or the line
# and the few after it) gives `kind` and `hint`. `near` entries also match when a device error
# follows one of those lines shortly before the error (SGLang prints "Capturing batches" first).
# `consequence` entries describe errors that other failures cause (a dead scheduler after an OOM,
# a collective that times out after another rank died): when the fatal error is one of those and an
# earlier error has a kind of its own, the earlier one is the cause and gives the hint.
HINTS = (
    {
        "kind": "graph_capture",
        "faq": "Q2, §4.3.2",
        "error": (
            r"MUSA error 900",
            r"operation not permitted when stream is capturing",
            r"StreamCaptureUnsupported",
            r"Capture (?:cuda|musa) graph failed",
            r"torch_memory_saver",
        ),
        "near": (r"Capturing batches",),
        "near_error": (r"MUSA error", r"CUDA error", r"RuntimeError"),
        "hint": (
            "SGLang failed while capturing device graphs (MUSA error 900 / 'operation not permitted when stream is "
            "capturing' near 'Capturing batches'): torch_memory_saver and graph capture do not work together on this "
            "MUSA stack. Check --sglang-cuda-graph-max-bs 64 against the MUSA and torch_memory_saver versions; to "
            "confirm, rerun with --sglang-disable-cuda-graph (guide §4.3.2 and FAQ Q2)."
        ),
    },
    {
        "kind": "oom",
        "faq": "Q4",
        "error": (r"out of memory", r"OutOfMemoryError", r"\bOOM\b", r"ERROR_OUT_OF_MEMORY", r"ALLOC_FAILED"),
        "hint": (
            "Device memory ran out. Confirm the 4+4 split of training and rollout GPUs took effect, then change one "
            "thing at a time, in this order (FAQ Q4): 1. lower --sglang-mem-fraction-static (0.7); 2. lower "
            "--rollout-batch-size (16) or --n-samples-per-prompt (8); 3. shorten --rollout-max-response-len (512); "
            "4. lower --max-tokens-per-gpu (8192); 5. look for other processes using the GPUs (mthreads-gmi)."
        ),
    },
    {
        "kind": "hf_validate",
        "faq": "Q3",
        "error": (r"hf_validate_args failed",),
        "hint": (
            "slime compared MODEL_ARGS (scripts/models/qwen3-8B.sh) with the Hugging Face config.json of "
            "--hf-checkpoint and they differ (hidden size, heads, layers, FFN size, norm eps or rope_theta): source "
            "the model script that matches /data/models/Qwen3-8B/config.json and pass ${MODEL_ARGS[@]} to train.py."
        ),
    },
    {
        "kind": "ray_ports",
        "faq": "Q1",
        "error": (r"Could not find any running Ray instance", r"Failed to connect to GCS", r"answers with HTTP/2"),
        "hint": (
            "Ray was not found at the address used (FAQ Q1): `ray status` needs the GCS port "
            "(ray status --address=%(gcs_address)s); `ray job submit` and RAY_ADDRESS need the dashboard port "
            "(http://<head>:%(dash)d). Check that the head runs "
            "(ray start --head --port=%(gcs)d --dashboard-port=%(dash)d)."
        )
        % dict(gcs_address=DEFAULT_GCS_ADDRESS, gcs=GCS_PORT, dash=DASHBOARD_PORT),
    },
    {
        "kind": "router_connect",
        "faq": "slime #1026/#1615",
        "consequence": True,
        "error": (
            r"ConnectError",
            r"All connection attempts failed",
            r"sglang_router",
            r"Max retries exceeded",
            r"ProxyError",
            r"502 Bad Gateway",
        ),
        "hint": (
            "The rollout side could not reach an SGLang server or the router: either an HTTP proxy intercepts "
            "local traffic (set no_proxy=127.0.0.1,localhost,<node IPs> in runtime_env env_vars; the guide exports "
            "no_proxy) or an SGLang server crashed earlier (look for an OOM or graph-capture error of SGLangEngine "
            "in the Ray dashboard)."
        ),
    },
    {
        "kind": "missing_path",
        "faq": "Q3",
        "error": (r"FileNotFoundError", r"No such file or directory"),
        "hint": (
            "A model, data or checkpoint path does not exist inside the container (FAQ Q3): every path is a container "
            "path; check ls -ld /data/models/Qwen3-8B /data/LLMs/MCORE/Qwen3-8B_slime /data/models/data and the "
            "docker -v mounts."
        ),
    },
    {
        "kind": "collective",
        "faq": "Q2",
        "consequence": True,
        "error": (
            r"\b[MN]CCL error",
            r"ProcessGroup[MN]CCL",
            r"Watchdog caught collective operation timeout",
            r"\bmccl\b.*(?:fail|error|timeout)",
        ),
        "hint": (
            "A collective (MCCL) operation failed or timed out (FAQ Q2). If another error comes before it on a "
            "different rank, that one is the cause; otherwise check the node's network interfaces and MCCL settings "
            "(MCCL_IB_GID_INDEX, GLOO_SOCKET_IFNAME) and that no other process holds the GPUs."
        ),
    },
    {
        "kind": "scheduler_dead",
        "faq": "Q2",
        "consequence": True,
        "error": (r"scheduler is dead",),
        "hint": (
            "'scheduler is dead' is a consequence, not the cause (FAQ Q2): no earlier OOM, kernel, MCCL or "
            "graph-capture error is in this log, so look in the SGLangEngine actor's own log (Ray dashboard) for the "
            "first one. If it mentions Capturing batches, torch_memory_saver or 'operation not permitted when stream "
            "is capturing', check --sglang-cuda-graph-max-bs and try --sglang-disable-cuda-graph."
        ),
    },
    {
        "kind": "device_error",
        "faq": "Q2",
        "error": (r"MUSA error", r"CUDA error", r"illegal memory access", r"device-side assert"),
        "hint": (
            "A device kernel failed (FAQ Q2). 'illegal memory access' inside SGLang often goes away with a lower "
            "--sglang-mem-fraction-static (slime qa.md); set MUSA_LAUNCH_BLOCKING=1 in runtime_env env_vars to find "
            "the kernel."
        ),
    },
)
PG_HINT = {
    "kind": "placement_group",
    "faq": "slime qa.md",
    "hint": (
        "slime waits without a time limit for a placement group of {needed} GPUs; after {elapsed}s Ray has "
        "{registered} registered and {available} available ({missing} missing). {why} The guide needs actor GPUs + "
        "rollout GPUs = 4 + 4. Check `ray status --address=" + DEFAULT_GCS_ADDRESS + "`: that every node joined, "
        "that Ray sees the node's GPUs (start Ray with --num-gpus) and that no other job or actor holds them."
    ),
    "unregistered": "{unregistered} of the GPUs are not registered with Ray at all (a node did not join, or its Ray "
    "was started without its GPUs).",
    "busy": "{busy} registered GPUs are in use by other jobs or actors.",
}


def _compiled(patterns):
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_RULES = tuple(
    dict(
        entry,
        _error=_compiled(entry["error"]),
        _near=_compiled(entry.get("near", ())),
        _near_error=_compiled(entry.get("near_error", ())),
    )
    for entry in HINTS
)
CONSEQUENCE_KINDS = frozenset(entry["kind"] for entry in HINTS if entry.get("consequence"))


def classify(error_lines, before_lines=()):
    """(kind, faq, hint) for the lines of an error and the lines logged shortly before it,
    or ("error", None, None) when no FAQ entry covers it."""
    error_text = "\n".join(error_lines)
    before_text = "\n".join(before_lines)
    for rule in _RULES:
        if any(p.search(error_text) for p in rule["_error"]):
            return rule["kind"], rule["faq"], rule["hint"]
        if (
            rule["_near"]
            and any(p.search(before_text) for p in rule["_near"])
            and any(p.search(error_text) for p in rule["_near_error"])
        ):
            return rule["kind"], rule["faq"], rule["hint"]
    return "error", None, None
