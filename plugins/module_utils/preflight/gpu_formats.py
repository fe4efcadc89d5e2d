# Parsers for the text that Moore Threads' mthreads-gmi and NVIDIA's nvidia-smi print. Pure
# functions, standard library only, Python 3.8+. Every parser takes the text a tool printed and
# returns what it could read; none raises on garbage. Which formats are recorded from real tools
# and which are reconstructions: tests/unit/data/accelerator/PROVENANCE-parsers.md.
from __future__ import annotations

import csv
import json
import re

ANSI = re.compile(r"\x1B\[[0-9;?]*[ -/]*[@-~]")

NVIDIA_QUERY_FIELDS = ("index", "name", "uuid", "memory.total", "driver_version")

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


# ---------------------------------------------------------------- nvidia-smi topo -m

_TOPO_GPU = re.compile(r"^GPU\d+$")
_NVLINK = re.compile(r"^NV\d+$")


def parse_topo_matrix(text):
    """{"gpus": n, "nvlink_pairs": k} from `nvidia-smi topo -m`: the GPU-to-GPU part of the matrix (the
    real tool underlines its header row with ANSI codes, removed here), counting each GPU pair joined by
    `NV<n>` once; None when there is no matrix."""
    rows = [ANSI.sub("", line).rstrip() for line in (text or "").splitlines()]
    header = next((r.split("\t") for r in rows if "\tGPU0" in r or r.strip().startswith("GPU0\t")), None)
    if header is None:
        return None
    columns = [cell.strip() for cell in header]
    gpu_columns = [i for i, cell in enumerate(columns) if _TOPO_GPU.match(cell)]
    pairs = set()
    gpus = 0
    for row in rows:
        cells = row.split("\t")
        if not cells or not _TOPO_GPU.match(cells[0].strip()) or row is header:
            continue
        gpus += 1
        me = cells[0].strip()
        for index in gpu_columns:
            if index < len(cells) and _NVLINK.match(cells[index].strip()):
                pairs.add(tuple(sorted((me, columns[index]))))
    return {"gpus": gpus, "nvlink_pairs": len(pairs)} if gpus else None
