# Accelerator discovery for mtslime.posttrain modules: parsers for the output of
# Moore Threads' mthreads-gmi and NVIDIA's nvidia-smi, and probe(), which runs
# them in order of richness and returns one dict describing the node's devices.
#
# Pure functions, standard library only, Python 3.8+. Every parser takes the
# text a tool printed and returns what it could read; none raises on garbage.
from __future__ import annotations

import csv
import json
import os
import re
import subprocess

VENDORS = ("musa", "cuda")
TOOLS = {"musa": "mthreads-gmi", "cuda": "nvidia-smi"}
LABELS = {"musa": "MUSA", "cuda": "CUDA"}

# Searched after tool_dir and PATH: modules run with Ansible's PATH, which may
# lack the vendors' install directories. Tests set this to () for isolation.
EXTRA_TOOL_DIRS = {
    "mthreads-gmi": ("/usr/local/musa/bin", "/usr/bin", "/usr/local/bin", "/usr/sbin"),
    "nvidia-smi": ("/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib"),
}

TOOL_TIMEOUT = 60

# Healthy MTT S4000 frame buffer, and what it shows when IOMMU is off.
S4000_MIB = 49152
IOMMU_OFF_MIB = 32768

NVIDIA_QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "driver_version")
NVIDIA_QUERY = "--query-gpu=%s" % ",".join(NVIDIA_QUERY_FIELDS)

_NA = {"", "n/a", "[n/a]", "na", "none", "not supported", "[not supported]", "unknown", "[unknown error]"}

# `GPU 0: name (UUID: x)` and `GPU 0 : name (UUID : x)`. The colon must be followed
# by white space so that nvidia-smi -q's `GPU 00000000:18:00.0` headers never match.
_LIST_LINE = re.compile(r"^GPU (\d+)\s*:\s+(.*?)\s*$")
_LIST_UUID = re.compile(r"\(\s*UUID\s*:\s*([^)]*?)\s*\)")

# The default `mthreads-gmi` table: `0    MTT S4000   |00000000:08:00.0  |0%   0MiB(49152MiB)`.
_TABLE_ROW = re.compile(
    r"^\s*(\d+)\s+(.+?)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*\|"
    r"\s*(?:\d+%)?\s*(?:(\d+)\s*MiB\s*)?\(\s*(\d+)\s*MiB\s*\)"
)
_TABLE_DRIVER = re.compile(r"Driver Version\s*:\s*(\S+)", re.IGNORECASE)
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def _norm(key):
    """Normalise a key for lenient lookups: case, `_`/`-`/`.` and spacing do not matter."""
    return re.sub(r"[\s_\-.]+", " ", str(key)).strip().lower()


def _get(mapping, *names):
    """Value of `mapping` under the first of `names` it has, keys compared normalised (see _norm)."""
    if not isinstance(mapping, dict):
        return None
    wanted = {_norm(n): i for i, n in enumerate(names)}
    best = None
    for key, value in mapping.items():
        rank = wanted.get(_norm(key))
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, value)
    return None if best is None else best[1]


def _text(value):
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in _NA else text


def parse_mib(value):
    """Memory in MiB from `49152MiB`, `49152 MiB`, `49152`, `48 GiB`, `51539607552 B`; None for N/A."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = _text(value)
    if text is None:
        return None
    match = _SIZE.match(text.replace(",", ""))
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2).lower()
    factor = {
        "": 1,
        "m": 1,
        "mb": 1,
        "mib": 1,
        "g": 1024,
        "gb": 1024,
        "gib": 1024,
        "t": 1024 * 1024,
        "tb": 1024 * 1024,
        "tib": 1024 * 1024,
        "k": 1.0 / 1024,
        "kb": 1.0 / 1024,
        "kib": 1.0 / 1024,
        "b": 1.0 / (1024 * 1024),
    }.get(unit)
    if factor is None:
        return None
    return int(round(number * factor))


def _index(value, default):
    text = _text(value)
    if text is not None and re.match(r"^\d+$", text):
        return int(text)
    return default


def device(index, name=None, uuid=None, memory_total_mib=None):
    return {"index": index, "name": _text(name), "uuid": _text(uuid), "memory_total_mib": memory_total_mib}


# ---------------------------------------------------------------- list (-L)


def parse_list(text):
    """Devices from `mthreads-gmi -L` or `nvidia-smi -L`: one line per device starting `GPU <n>`,
    with `GPU 0:` or `GPU 0 :` spacing, the model name, and an optional `(UUID: ...)` suffix.
    Indented lines (nvidia-smi's MIG devices) and anything else are ignored."""
    devices = []
    for line in (text or "").splitlines():
        match = _LIST_LINE.match(line.rstrip("\r"))
        if not match:
            continue
        rest = match.group(2)
        uuid_match = _LIST_UUID.search(rest)
        uuid = uuid_match.group(1) if uuid_match else None
        name = _LIST_UUID.sub("", rest).strip() if uuid_match else rest.strip()
        devices.append(device(int(match.group(1)), name or None, uuid))
    return devices


parse_gmi_list = parse_list
parse_smi_list = parse_list


# ---------------------------------------------------------------- mthreads-gmi JSON


def _gpu_entries(data):
    """The per-GPU dicts of a gmi JSON document, whatever the container is called."""
    if isinstance(data, list):
        return [g for g in data if isinstance(g, dict)]
    if not isinstance(data, dict):
        return []
    gpus = _get(data, "GPU", "GPUs", "gpu list", "devices", "device")
    if isinstance(gpus, list):
        return [g for g in gpus if isinstance(g, dict)]
    if isinstance(gpus, dict):
        # either one GPU, or {"0": {...}, "1": {...}} / {"GPU 00000000:08:00.0": {...}}
        if all(isinstance(v, dict) for v in gpus.values()) and _get(gpus, "product name", "name", "index") is None:
            return list(gpus.values())
        return [gpus]
    # some tools key each GPU at the top level: {"GPU 0": {...}, "GPU 1": {...}}
    keyed = [v for k, v in data.items() if isinstance(v, dict) and re.match(r"^gpu\s*\S+$", _norm(k))]
    return keyed


def _memory_total(gpu):
    for section_name in ("fb memory usage", "memory usage", "fb memory", "memory", "frame buffer memory usage"):
        section = _get(gpu, section_name)
        if isinstance(section, dict):
            total = parse_mib(_get(section, "total", "total memory", "size"))
            if total is not None:
                return total
        elif section is not None and section_name == "memory":
            total = parse_mib(section)
            if total is not None:
                return total
    return parse_mib(_get(gpu, "memory total", "fb memory total", "total memory", "memory total mib", "vram"))


def devices_from_tree(data):
    """(driver_version, devices) from the key tree of `mthreads-gmi -q --json` (or of `-q` text
    turned into the same tree). Key spellings are matched leniently."""
    driver = None
    if isinstance(data, dict):
        driver = _text(_get(data, "driver version", "driver", "kmd version"))
    devices = []
    for gpu in _gpu_entries(data):
        raw_index = _get(gpu, "index", "gpu index", "minor number", "id", "device id number")
        name = _get(gpu, "product name", "name", "model", "product", "device name")
        uuid = _get(gpu, "gpu uuid", "uuid")
        entry = device(
            _index(raw_index, len(devices)),
            name if isinstance(name, str) else None,
            uuid if isinstance(uuid, str) else None,
            _memory_total(gpu),
        )
        if raw_index is None and entry["name"] is None and entry["uuid"] is None and entry["memory_total_mib"] is None:
            continue  # a header with nothing under it is not a device
        devices.append(entry)
        if driver is None:
            driver = _text(_get(gpu, "driver version"))
    return driver, devices


def parse_gmi_json(text):
    """(driver_version, devices) from `mthreads-gmi -q --json`; (None, []) when it is not JSON."""
    try:
        data = json.loads(text or "")
    except ValueError:
        # some versions print a banner line before the document
        start = (text or "").find("{")
        if start <= 0:
            return None, []
        try:
            data = json.loads(text[start:])
        except ValueError:
            return None, []
    return devices_from_tree(data)


# ---------------------------------------------------------------- mthreads-gmi -q text

_DEVICE_KEYS = {"index", "product name", "gpu uuid"}
_GPU_HEADER = re.compile(r"^GPU\s*[0-9A-Fa-f][0-9A-Fa-f:.]*$")


def query_tree(text):
    """Turn nvidia-smi-style `-q` text into a key tree: `Key : value` lines (any spacing around
    the colon), indentation for sections, `GPU <id>` headers (or a repeated `Index`/`Product
    Name` key) for devices. Devices are collected under "GPU"."""
    root = {}
    gpus = []
    stack = [(-1, root)]
    current_gpu = None
    for raw in (text or "").splitlines():
        line = raw.rstrip().replace("\t", "    ")
        stripped = line.strip()
        if not stripped or set(stripped) <= set("=-+| "):
            continue
        indent = len(line) - len(line.lstrip())
        if _GPU_HEADER.match(stripped):
            current_gpu = {"_header": stripped}
            gpus.append(current_gpu)
            stack = [(-1, root), (indent, current_gpu)]
            continue
        if ":" in stripped:
            key, value = stripped.split(":", 1)
            key, value = key.strip(), value.strip()
        else:
            key, value = stripped, ""
        if not key:
            continue
        while len(stack) > 1 and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        at_device_level = parent is current_gpu or parent is root
        if at_device_level and _norm(key) in _DEVICE_KEYS and value:
            # no `GPU <id>` header: a device-identifying key starts a device, and so does
            # the same key again (flat output of several devices)
            if current_gpu is None or (current_gpu.get("_implicit") and _get(current_gpu, key) is not None):
                current_gpu = {"_implicit": True}
                gpus.append(current_gpu)
                stack = [(-1, root), (indent - 1, current_gpu)]
                parent = current_gpu
        if value:
            parent.setdefault(key, value)
        else:
            section = {}
            if key in parent and isinstance(parent[key], dict):
                section = parent[key]
            else:
                parent[key] = section
            stack.append((indent, section))
    if gpus:
        root["GPU"] = gpus
    return root


def parse_gmi_query(text):
    """(driver_version, devices) from `mthreads-gmi -q` text (Driver Version, per-GPU Product Name,
    GPU UUID, FB Memory Usage / Total)."""
    return devices_from_tree(query_tree(text))


# ---------------------------------------------------------------- mthreads-gmi table


def parse_gmi_table(text):
    """(driver_version, devices) from the default `mthreads-gmi` table (no flags), the command the
    guide runs: rows like `0    MTT S4000   |00000000:08:00.0    |0%    0MiB(49152MiB)`."""
    driver = None
    devices = []
    for line in (text or "").splitlines():
        if driver is None:
            match = _TABLE_DRIVER.search(line)
            if match:
                driver = match.group(1)
        match = _TABLE_ROW.match(line)
        if match:
            devices.append(device(int(match.group(1)), match.group(2).strip(), None, int(match.group(5))))
    return driver, devices


# ---------------------------------------------------------------- nvidia-smi CSV


def _csv_rows(text):
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return list(csv.reader(lines, skipinitialspace=True))


def parse_smi_csv(text, fields=NVIDIA_QUERY_FIELDS):
    """(driver_version, devices) from `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`.
    With a header line (`index, name, uuid, memory.total [MiB], driver_version`) the header decides
    which column is which; without one, `fields` gives the order. Units (` MiB`) are stripped; rows
    whose column count does not match (warnings, error text) are skipped."""
    rows = _csv_rows(text)
    if not rows:
        return None, []
    columns = [_norm(f) for f in fields]
    header_names = [_norm(re.sub(r"\[[^\]]*\]", "", cell)) for cell in rows[0]]
    if "name" in header_names and ("index" in header_names or "uuid" in header_names or "memory total" in header_names):
        columns = header_names
        rows = rows[1:]
    driver = None
    devices = []
    for position, row in enumerate(rows):
        if len(row) != len(columns):
            continue
        record = dict(zip(columns, (cell.strip() for cell in row)))
        index_text = record.get("index")
        if index_text is not None and not re.match(r"^\d+$", index_text):
            continue
        name = record.get("name") or record.get("gpu name")
        if _text(name) is None and _text(record.get("uuid")) is None:
            continue
        devices.append(
            device(
                _index(index_text, position),
                name,
                record.get("uuid") or record.get("gpu uuid"),
                parse_mib(record.get("memory total")),
            )
        )
        driver = driver or _text(record.get("driver version"))
    return driver, devices


# ---------------------------------------------------------------- hints


def musa_memory_hint(devices, expected_mib=S4000_MIB):
    """The IOMMU hint when MUSA cards report 32768 MiB where 49152 MiB (a healthy MTT S4000) is
    expected, else None."""
    if not expected_mib or expected_mib <= IOMMU_OFF_MIB:
        return None
    short = [d for d in devices or [] if d.get("memory_total_mib") == IOMMU_OFF_MIB]
    if not short:
        return None
    which = ", ".join(str(d.get("index")) for d in short)
    name = short[0].get("name") or "MUSA card"
    return (
        "GPU %s (%s) report %d MiB instead of %d MiB: IOMMU is off on this host (a healthy MTT S4000 shows "
        "49152 MiB). With IOMMU off, containers may see 0 devices (torch_musa: 'Error 801: operation not "
        "supported', device count 0). Fix the host as Moore Threads' FAQ prescribes: IOMMU on "
        "(intel_iommu=on, or amd_iommu=on on AMD/Hygon CPUs, plus iommu.passthrough=0 in GRUB_CMDLINE_LINUX_DEFAULT, "
        "then update-grub and reboot), PCIe ACS redirect off for multi-GPU (pci=disable_acs_redir=...), and "
        "mt-container-toolkit bound to Docker" % (which, name, IOMMU_OFF_MIB, expected_mib)
    )


# ---------------------------------------------------------------- probe


def default_run(argv):
    """Run argv and return (rc, stdout, stderr); a missing or hung program is an rc, not an exception."""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TOOL_TIMEOUT, check=False)
    except OSError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return 124, "", "%s did not answer within %d s" % (argv[0], TOOL_TIMEOUT)
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def find_tool(name, tool_dir=None, path=None):
    """Absolute path of `name`: in `tool_dir` first, then on PATH, then in the vendor's usual
    install directories; None when nowhere."""
    candidates = []
    if tool_dir:
        candidates.append(os.path.expanduser(tool_dir))
    search = os.environ.get("PATH", "") if path is None else path
    candidates.extend(p for p in search.split(os.pathsep) if p)
    candidates.extend(EXTRA_TOOL_DIRS.get(name, ()))
    seen = set()
    for directory in candidates:
        if directory in seen:
            continue
        seen.add(directory)
        full = os.path.join(directory, name)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()[:200]
    return ""


def _empty_result(vendor, tool):
    return {
        "vendor": vendor,
        "tool": tool,
        "tool_path": None,
        "count": 0,
        "devices": [],
        "driver_version": None,
        "source_format": None,
        "command": None,
        "tool_output": "",
        "attempts": [],
    }


def _attempt(result, run, argv, parser, fmt):
    rc, out, err = run(argv)
    driver, devices = (None, [])
    if rc == 0:
        driver, devices = parser(out)
    result["attempts"].append(
        {
            "command": " ".join([os.path.basename(argv[0])] + list(argv[1:])),
            "rc": rc,
            "format": fmt,
            "devices": len(devices),
            "output": _first_line(out, err),
        }
    )
    return driver, devices


def _probe_musa(tool_path, run):
    result = _empty_result("musa", "mthreads-gmi")
    result["tool_path"] = tool_path
    plans = (
        ([tool_path, "-q", "--json"], parse_gmi_json, "json"),
        ([tool_path, "-q"], parse_gmi_query, "query"),
        ([tool_path, "-L"], lambda text: (None, parse_list(text)), "list"),
        ([tool_path], parse_gmi_table, "table"),
    )
    for argv, parser, fmt in plans:
        driver, devices = _attempt(result, run, argv, parser, fmt)
        if devices:
            result.update(
                devices=devices, driver_version=driver, source_format=fmt, command=" ".join(["mthreads-gmi"] + argv[1:])
            )
            if fmt == "list":
                # -L has no memory and no driver: the plain table has both
                t_driver, table = _attempt(result, run, [tool_path], parse_gmi_table, "table")
                by_index = {d["index"]: d for d in table}
                for dev in devices:
                    if dev["index"] in by_index:
                        dev["memory_total_mib"] = by_index[dev["index"]]["memory_total_mib"]
                result["driver_version"] = t_driver
            break
    return result


def _probe_cuda(tool_path, run):
    result = _empty_result("cuda", "nvidia-smi")
    result["tool_path"] = tool_path
    plans = (
        ([tool_path, NVIDIA_QUERY, "--format=csv,noheader,nounits"], parse_smi_csv, "csv"),
        ([tool_path, "-L"], lambda text: (None, parse_list(text)), "list"),
    )
    for argv, parser, fmt in plans:
        driver, devices = _attempt(result, run, argv, parser, fmt)
        if devices:
            result.update(
                devices=devices, driver_version=driver, source_format=fmt, command=" ".join(["nvidia-smi"] + argv[1:])
            )
            break
    return result


def _finish(result):
    result["devices"] = sorted(result["devices"], key=lambda d: d["index"])
    result["count"] = len(result["devices"])
    # what the tool said: a successful run's words (`Error: No MT GPU device found.` comes with rc 0)
    # tell more than an old version rejecting a flag
    said = [a["output"] for a in result["attempts"] if a["rc"] == 0 and a["output"]]
    said = said or [a["output"] for a in result["attempts"] if a["output"]]
    result["tool_output"] = said[0] if said else ""
    return result


def probe(vendor="auto", tool_dir=None, run=None, path=None):
    """Find and query the node's accelerators.

    vendor: "musa" runs mthreads-gmi (-q --json, then -q, then -L, then the plain table); "cuda"
    runs nvidia-smi (the CSV query, then -L); "auto" tries MUSA, then CUDA, and keeps the first
    that lists devices (or, when none does, the first whose tool exists).
    tool_dir: a directory searched before PATH. run: callable(argv) -> (rc, stdout, stderr).

    Returns {vendor, tool, tool_path, count, devices: [{index, name, uuid, memory_total_mib}],
    driver_version, source_format, command, tool_output, attempts, searched}."""
    run = run or default_run
    vendors = VENDORS if vendor in (None, "", "auto") else (vendor,)
    found = []
    for name in vendors:
        if name not in TOOLS:
            raise ValueError("unknown accelerator vendor %r (expected auto, musa or cuda)" % (name,))
        tool_path = find_tool(TOOLS[name], tool_dir, path)
        if tool_path is None:
            continue
        result = _finish((_probe_musa if name == "musa" else _probe_cuda)(tool_path, run))
        if result["count"]:
            result["searched"] = list(vendors)
            return result
        found.append(result)
    if found:
        result = found[0]
    else:
        result = _empty_result(
            vendors[0] if len(vendors) == 1 else None, TOOLS[vendors[0]] if len(vendors) == 1 else None
        )
    result["searched"] = list(vendors)
    return result


def tools_for(vendor):
    vendors = VENDORS if vendor in (None, "", "auto") else (vendor,)
    return [TOOLS[v] for v in vendors if v in TOOLS]


# ---------------------------------------------------------------- problems


def _names(devices):
    names = sorted({d.get("name") for d in devices if d.get("name")})
    return ", ".join(names) if names else "unnamed"


def problems_for(result, vendor, tool_dir=None, expected_count=None, expected_memory_mib=None):
    """Sentences for everything about `result` (a probe() dict) that is not as expected."""
    problems = []
    where = "on PATH or in slime_accelerator_tool_dir%s" % (" (%s)" % tool_dir if tool_dir else "")
    if not result.get("tool_path"):
        if vendor == "musa":
            problems.append(
                "no MUSA accelerator: mthreads-gmi not found %s; install the MT driver/tools (mthreads-gmi), "
                "set slime_accelerator_tool_dir to its directory, or set slime_accelerator: cuda for NVIDIA nodes"
                % where
            )
        elif vendor == "cuda":
            problems.append(
                "no CUDA accelerator: nvidia-smi not found %s; install the NVIDIA driver (it ships nvidia-smi), "
                "set slime_accelerator_tool_dir to its directory, or set slime_accelerator: musa for Moore Threads nodes"
                % where
            )
        else:
            problems.append(
                "no accelerator: neither %s found %s; install the Moore Threads driver/tools or the NVIDIA driver, "
                "or set slime_accelerator_tool_dir to the directory that holds the tool"
                % (" nor ".join(tools_for(vendor)), where)
            )
        return problems
    vendor_found = result.get("vendor")
    label = LABELS.get(vendor_found, "accelerator")
    tool = result.get("tool") or TOOLS.get(vendor_found, "the tool")
    devices = result.get("devices") or []
    if not devices:
        said = result.get("tool_output")
        said = "it printed %r" % said if said else "it printed nothing"
        if vendor_found == "musa":
            problems.append(
                "no MUSA devices: %s (%s) listed no GPU (%s); on the host this means the mtgpu driver is not loaded "
                "or IOMMU is off (Moore Threads FAQ: IOMMU on, PCIe ACS redirect off, mt-container-toolkit bound to Docker); "
                "inside a container mthreads-gmi may print nothing, so run the check on the host, or count with "
                "python -c 'import torch, torch_musa; print(torch.musa.device_count())' in the container"
                % (tool, result.get("tool_path"), said)
            )
        else:
            problems.append(
                "no %s devices: %s (%s) listed no GPU (%s); load the driver (a kernel update may need the module rebuilt) "
                "and check that the node's GPUs are visible (lspci), or set slime_accelerator to the node's vendor"
                % (label, tool, result.get("tool_path"), said)
            )
        return problems
    count = len(devices)
    if expected_count is not None and count != expected_count:
        problems.append(
            "found %d %s device%s (%s) with %s but slime_gpus_per_node is %d; set slime_gpus_per_node: %d for this host "
            "(host_vars), or bring the missing devices back (check %s on the host, dmesg for the driver)"
            % (count, label, "" if count == 1 else "s", _names(devices), tool, expected_count, count, tool)
        )
    if not expected_memory_mib and vendor_found == "musa":
        # an MTT S4000 has 49152 MiB whatever was asked: 32768 is the IOMMU-off symptom
        hint = musa_memory_hint([d for d in devices if (d.get("name") or "").upper().endswith("S4000")], S4000_MIB)
        if hint:
            problems.append(hint)
    if expected_memory_mib:
        small = [
            d for d in devices if d.get("memory_total_mib") is not None and d["memory_total_mib"] < expected_memory_mib
        ]
        if small:
            hint = musa_memory_hint(small, expected_memory_mib) if vendor_found == "musa" else None
            if hint:
                problems.append(hint)
            else:
                listed = ", ".join("GPU %s %d MiB" % (d["index"], d["memory_total_mib"]) for d in small)
                problems.append(
                    "%d %s device%s report less memory than the expected %d MiB (%s); check the card model and driver, "
                    "or set the expected memory (expected_memory_mib) to what this model has"
                    % (len(small), label, "" if len(small) == 1 else "s", expected_memory_mib, listed)
                )
    return problems


def failure_message(prefix, problems, noun="problem"):
    """One readable message for several problems: `<prefix> on 2 problems: (1) ...; (2) ...`."""
    return "%s on %d %s%s: %s" % (
        prefix,
        len(problems),
        noun,
        "" if len(problems) == 1 else "s",
        "; ".join("(%d) %s" % (i + 1, p) for i, p in enumerate(problems)),
    )
