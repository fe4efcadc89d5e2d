"""The default inventory renders the guide: playbooks/render.yml writes the run files on the
controller, and the rendered run script, executed with a stand-in `ray` that records its
arguments, submits train.py with the guide's flags and values (tests/unit/data/guide/)."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
GUIDE = os.path.join(REPO, "tests", "unit", "data", "guide", "run-qwen3-8B.args.yml")

RAY_STUB = """#!/bin/bash
# Stand-in for the `ray` CLI: records `ray job submit` arguments as JSON.
if [ "$1 $2" = "job submit" ]; then
    python3 -c 'import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], "w"))' "$RAY_ARGV_OUT" "$@"
    echo "Job 'x' submitted successfully"
fi
exit 0
"""


class JobsApi(http.server.BaseHTTPRequestHandler):
    jobs = []

    def do_GET(self):  # noqa: N802
        body = json.dumps(self.jobs).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def jobs_api():
    server = http.server.HTTPServer(("127.0.0.1", 0), JobsApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def run_playbook(*args, check=True, env_extra=None):
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], ANSIBLE_FORCE_COLOR="0", **(env_extra or {}))
    proc = subprocess.run(
        [os.path.join(BIN, "ansible-playbook"), *args], cwd=REPO, env=env, capture_output=True, text=True,
        check=False)
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return proc


def render(tmp_path, *extra):
    out = tmp_path / "rendered"
    run_playbook("playbooks/render.yml", "-i", "inventory/", "-e", "render_dir=%s" % out, *extra)
    return out / "localhost"


def submitted_args(node_dir, tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "ray").write_text(RAY_STUB)
    (stubs / "ray").chmod(0o755)
    record = tmp_path / "argv.json"
    # mkdir/ln are shell functions here so the script's log directory under
    # /home/slime is not created on the test machine.
    script = "mkdir() { :; }; ln() { :; }; export -f mkdir ln; bash %s" % (node_dir / "run-qwen3-8B.sh")
    env = dict(os.environ, PATH="%s:%s" % (stubs, os.environ["PATH"]), RAY_ARGV_OUT=str(record))
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert record.exists(), proc.stdout + proc.stderr
    argv = json.loads(record.read_text())
    return argv, proc


def pairs(tokens):
    result = []
    for token in tokens:
        if token.startswith("--"):
            result.append([token])
        else:
            result[-1].append(token)
    return result


def same_value(a, b):
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return a.rstrip("/") == b.rstrip("/")


@pytest.fixture(scope="module")
def guide():
    with open(GUIDE) as handle:
        return yaml.safe_load(handle)


def test_render_writes_three_files_with_tight_modes(tmp_path, jobs_api):
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port)
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in node.iterdir() if p.is_file()}
    assert modes == {"hostfile": "0o640", "run-qwen3-8B.sh": "0o750", "runtime_env.yaml": "0o640"}
    # the job plan the script runs and what it imports, copied byte for byte from the collection's module_utils,
    # in the same layout
    plan_dir = node / ".mtslime"
    utils = os.path.join(REPO, "plugins", "module_utils")
    copies = sorted(str(p.relative_to(plan_dir)) for p in plan_dir.rglob("*") if p.is_file())
    assert copies == ["artifacts/__init__.py", "artifacts/aside.py", "checkpoint/__init__.py",
                      "checkpoint/dcp_metadata.py", "checkpoint/layout.py", "checkpoint/mcore.py",
                      "checkpoint/resume.py", "common.py", "job/__init__.py", "job/plan.py", "job/rules.py"]
    for name in copies:
        assert (plan_dir / name).read_text() == open(os.path.join(utils, name)).read(), name
        assert oct((plan_dir / name).stat().st_mode & 0o777) == "0o640"
    hostfile = (node / "hostfile").read_text().splitlines()
    assert len(hostfile) == 1 and hostfile[0].endswith(" slots=8")
    env = yaml.safe_load((node / "runtime_env.yaml").read_text())
    for key in ("MUSA_PATCH_PATH", "MEGATRON_PATH", "SLIME_PATH", "TENSORBOARD_DIR", "SGLANG_TORCH_PROFILER_DIR",
                "PYTHONPATH", "CUDA_DEVICE_MAX_CONNECTIONS"):
        assert key in env["env_vars"], key
    assert env["env_vars"]["MUSA_PATCH_PATH"] == "/home/megatron-lm-musa-patch"


def test_the_preload_callback_runs_and_changes_no_rendered_byte(tmp_path, jobs_api):
    """ansible.cfg enables mtslime.posttrain.preload: the plugins are loaded in the main process (-vvv says so), and
    the run files are the same as without it."""
    port = "ray_dashboard_port=%d" % jobs_api.server_port
    with_preload = run_playbook("playbooks/render.yml", "-i", "inventory/", "-e", "render_dir=%s" % (tmp_path / "a"),
                                "-e", port, "-vvv")
    loaded = [line for line in with_preload.stdout.splitlines() if line.startswith("preload: ")]
    assert len(loaded) == 1, with_preload.stdout[-2000:]
    assert loaded[0].endswith(" plugin files of ansible_collections.mtslime.posttrain.plugins loaded"), loaded
    run_playbook("playbooks/render.yml", "-i", "inventory/", "-e", "render_dir=%s" % (tmp_path / "b"), "-e", port,
                 env_extra={"ANSIBLE_CALLBACKS_ENABLED": "mtslime.posttrain.cluster_recap"})
    files_a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    files_b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert files_a and files_a == files_b


def test_rendered_script_passes_shellcheck_and_bash_n(tmp_path, jobs_api):
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port)
    script = str(node / "run-qwen3-8B.sh")
    subprocess.run(["bash", "-n", script], check=True)
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run(["shellcheck", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_rendered_script_submits_the_guides_train_args(tmp_path, jobs_api, guide):
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port)
    argv, _proc = submitted_args(node, tmp_path)
    assert argv[:2] == ["job", "submit"]
    split = argv.index("--")
    options = argv[2:split]
    assert "--no-wait" in options and "--submission-id" in options
    assert argv[split + 1:split + 3] == ["python3", "train.py"]
    rendered = pairs(argv[split + 3:])
    expected = guide["argv"]
    assert [p[0] for p in rendered] == [p[0] for p in expected]
    for got, want in zip(rendered, expected):
        flag = want[0]
        if flag in guide["deviations"]:
            assert got[1:] == [guide["deviations"][flag]["ours"]], flag
            assert want[1:] == [guide["deviations"][flag]["guide"]], flag
            continue
        assert len(got) == len(want) and all(same_value(a, b) for a, b in zip(got[1:], want[1:])), (got, want)


def test_every_deviation_is_documented(guide):
    with open(os.path.join(REPO, "docs", "deviations.md")) as handle:
        text = handle.read()
    for flag, item in guide["deviations"].items():
        assert item["variable"] in text and item["guide"] in text, flag


def test_script_refuses_a_second_job_of_the_experiment(tmp_path, jobs_api):
    JobsApi.jobs = [{"submission_id": "qwen3-8B-attempt-1", "status": "RUNNING",
                     "metadata": {"mtslime_experiment": "qwen3-8B"}}]
    try:
        node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port)
        stubs = tmp_path / "stubs"
        stubs.mkdir()
        (stubs / "ray").write_text("#!/bin/bash\necho SUBMITTED\n")
        (stubs / "ray").chmod(0o755)
        script = "mkdir() { :; }; ln() { :; }; export -f mkdir ln; bash %s" % (node / "run-qwen3-8B.sh")
        env = dict(os.environ, PATH="%s:%s" % (stubs, os.environ["PATH"]))
        proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=False)
    finally:
        JobsApi.jobs = []
    assert proc.returncode == 1
    assert "SUBMITTED" not in proc.stdout
    assert "qwen3-8B-attempt-1" in proc.stderr


def test_overrides_change_one_flag_in_place(tmp_path, jobs_api):
    overrides = json.dumps(
        {"slime_train_args_overrides": {"lr": "2e-6", "use-tis": None, "sglang-disable-cuda-graph": True}}
    )
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port, "-e", overrides)
    argv, _proc = submitted_args(node, tmp_path)
    rendered = pairs(argv[argv.index("--") + 3:])
    flags = [p[0] for p in rendered]
    assert ["--lr", "2e-6"] in rendered
    assert "--use-tis" not in flags
    assert flags[-1] == "--sglang-disable-cuda-graph"


def test_check_diff_on_a_machine_without_gpus_shows_the_files_then_stops_at_preflight(tmp_path, jobs_api):
    """The README's main command under --check --diff, with the default inventory, on this
    machine (no MUSA card, no mthreads-gmi): the run files' diff first, then the preflight
    failure listing what is missing, not a traceback. Nothing is written (check mode)."""
    render_dir = tmp_path / "review"
    proc = run_playbook("site.yml", "-i", "inventory/", "--check", "--diff",
                        "-e", "slime_render_dir=%s" % render_dir, check=False)
    out = proc.stdout
    assert proc.returncode != 0
    assert "+++ after: %s/localhost/run-qwen3-8B.sh" % render_dir in out
    assert "+++ after: %s/localhost/runtime_env.yaml" % render_dir in out
    assert "+++ after: %s/localhost/hostfile" % render_dir in out
    assert "node preflight failed on" in out and "mthreads-gmi not found" in out
    assert "Traceback" not in out
    assert not render_dir.exists()
    assert "localhost: FAILED" in out  # the cluster recap names the failed cluster


def test_cuda_nodes_get_the_cuda_profile(tmp_path, jobs_api):
    """slime picks MUSA whenever MUSA_PATCH_PATH is set (slime.md §1.2): a CUDA node's job
    environment must not carry it."""
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port, "-e", "slime_accelerator=cuda")
    env = yaml.safe_load((node / "runtime_env.yaml").read_text())["env_vars"]
    assert env["SLIME_ACCELERATOR"] == "cuda" and "MUSA_PATCH_PATH" not in env


def test_script_run_by_hand_resumes_by_the_modules_rule(tmp_path, jobs_api):
    """The rendered script decides resume with the module's job/plan.py (.mtslime/): iteration 5 has a
    metadata.json (the old script's whole test) but no .metadata, so it is torn and moved aside, and the job loads
    the newest complete iteration, 2, from the save dir; the tracker names it."""
    sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
    import ckpt_layouts

    save = tmp_path / "save"
    ckpt_layouts.ckpt_dir(save / "iter_0000002")
    ckpt_layouts.data_state(save, 2)
    ckpt_layouts.ckpt_dir(save / "iter_0000005", dcp_metadata=False)
    (save / "latest_checkpointed_iteration.txt").write_text("5")
    node = render(tmp_path, "-e", "ray_dashboard_port=%d" % jobs_api.server_port, "-e", json.dumps(
        {"slime_save_dir": str(save), "container_extra_volumes": ["%s:%s" % (tmp_path, tmp_path)]}))
    argv, proc = submitted_args(node, tmp_path)
    train = argv[argv.index("--") + 1:]
    assert train[train.index("--load") + 1] == str(save), proc.stderr
    assert train[train.index("--save") + 1] == str(save)
    options = argv[:argv.index("--")]
    assert options[options.index("--submission-id") + 1] == "qwen3-8B-attempt-1"
    assert (save / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert not (save / "iter_0000005").exists()
    assert [p.name for p in save.iterdir() if p.name.startswith("iter_0000005.incomplete-")], list(save.iterdir())
    assert "attempt 1: qwen3-8B-attempt-1 resuming from iteration 2 of %s" % save in proc.stderr
