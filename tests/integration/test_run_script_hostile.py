"""The run files are safe even for values the configuration check would refuse: the train_job role's templates are
rendered with hostile values ($(...), backticks, newlines, quotes, ';', globs) but without the check
(playbooks/render_unchecked.yml), the run script passes `bash -n`, and it is then executed with every external
command replaced by a recorder (a PATH holding only stubs that log their argv; any other command is logged by
bash's command_not_found_handle). Nothing but the intended commands runs, with the intended arguments, and no
payload runs. When the run script changes, keep ALLOWED and the expected calls below in step with it."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
STAMP = "20260101-000000"
# The commands the run script may run (nvidia-smi topo for NVLink, the hostfile's first column, the log
# directory and link, the job plan, the submission and the log follower).
ALLOWED = {"nvidia-smi", "grep", "wc", "dirname", "head", "awk", "mkdir", "date", "basename", "ln", "python3", "ray",
           "sed", "cat"}
MARK = "PWNED"
HOSTILE = {
    "slime_experiment": "x$(touch %s1)`touch %s2`;touch %s3 *" % (MARK, MARK, MARK),
    "slime_model_name": "m$(touch %s4);'\"" % MARK,
    "slime_work_dir": "/w/$(touch %s7)\n; touch %s8" % (MARK, MARK),
    "slime_save_dir": "/data/save dir/'$(touch %s9)'*" % MARK,
    "slime_train_args_overrides": {
        "input-key": "p;touch %s10" % MARK,
        "label-key": "`touch %s11`" % MARK,
        "rm-type": "*",
        "metadata-key": "a\"b'c\nd",
    },
    "slime_runtime_env_vars_extra": {"EVIL": "x\ny: $(touch %s12)" % MARK},
}

RECORDER = textwrap.dedent("""\
    #!%s
    # Stand-in for every external command of the run script: records its name and argv, prints what the
    # script reads from it, and does nothing else.
    import json, os, sys
    name = os.path.basename(sys.argv[0])
    with open(os.environ["RECORD"], "a") as handle:
        handle.write(json.dumps([name] + sys.argv[1:]) + "\\n")
    args = sys.argv[1:]
    if name == "date":
        print("%s")
    elif name == "wc":
        print(0)
    elif name in ("dirname", "basename"):
        print((os.path.dirname if name == "dirname" else os.path.basename)(args[-1]) or ".")
    elif name == "head":
        with open(args[-1]) as lines:
            sys.stdout.write(lines.readline())
    elif name == "awk":
        sys.stdout.write(sys.stdin.read().split(" ")[0] + "\\n")
    elif name == "mkdir":  # the log directory, under the test's own directory
        os.makedirs(args[-1], exist_ok=True)
    elif name == "python3" and args[:2] == [".mtslime/job/plan.py", "next"]:
        # the job plan: its answer, the submission id and the argv given, NUL-separated
        experiment = args[args.index("--experiment") + 1]
        tokens = [experiment + "-attempt-1"] + args[args.index("--") + 1:]
        sys.stdout.write("".join(token + "\\0" for token in tokens))
    elif name in ("sed", "cat", "grep"):
        sys.stdin.read()
    """) % (sys.executable, STAMP)


def log_dir(tmp):
    """A log directory whose name holds a newline and a command, under the test's directory."""
    return "%s/logs $(touch %s5)\ntouch %s6 #" % (tmp, MARK, MARK)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return dict(HOSTILE, slime_log_dir=log_dir(tmp_path_factory.mktemp("logs")))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, hostile):
    out = tmp_path_factory.mktemp("hostile") / "rendered"
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    extra = dict(hostile, render_dir=str(out), slime_node_ip="10.0.0.1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "tests/integration/playbooks/render_unchecked.yml",
                           "-i", "inventory/", "-e", json.dumps(extra)], cwd=REPO, env=env, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out / "localhost"


def script_path(node):
    return node / ("run-%s.sh" % HOSTILE["slime_model_name"])


def run(node, tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    recorder = stubs / "_recorder"
    recorder.write_text(RECORDER)
    recorder.chmod(0o755)
    for name in ALLOWED:
        (stubs / name).symlink_to(recorder)
    record = tmp_path / "calls.jsonl"
    work = tmp_path / "cwd"
    work.mkdir()
    handler = ('command_not_found_handle() { printf "%%s\\n" "$(printf "%%s\\x1f" UNKNOWN "$@")" >> %s; return 127; }'
               "; export -f command_not_found_handle; /bin/bash %s" % (record, "\"$1\""))
    env = {"PATH": str(stubs), "RECORD": str(record), "HOME": str(tmp_path)}
    proc = subprocess.run(["/bin/bash", "-c", handler, "bash", str(script_path(node))], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    calls = []
    for line in record.read_text().splitlines() if record.exists() else []:
        calls.append(line.split("\x1f")[:-1] if line.startswith("UNKNOWN") else json.loads(line))
    return proc, calls, work


def test_the_files_are_rendered_and_the_script_parses(rendered):
    assert sorted(p.name for p in rendered.iterdir()) == sorted([".mtslime", "hostfile", "runtime_env.yaml",
                                                                 script_path(rendered).name])
    proc = subprocess.run(["bash", "-n", str(script_path(rendered))], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_hostfile_and_runtime_env_are_data(rendered, hostile):
    assert (rendered / "hostfile").read_text() == "10.0.0.1 slots=8\n"
    env = yaml.safe_load((rendered / "runtime_env.yaml").read_text())
    assert env["env_vars"]["EVIL"] == hostile["slime_runtime_env_vars_extra"]["EVIL"]


def test_comment_lines_hold_no_newline_from_a_value(rendered):
    """The header comments name the work dir, the script and the log file: a newline in those values must not
    end a comment line (everything before the first command stays a comment)."""
    lines = script_path(rendered).read_text().splitlines()
    header = lines[:next(i for i, line in enumerate(lines) if line.startswith("export "))]
    assert all(line.startswith("#") or not line.strip() for line in header), header
    assert any("PWNED8" in line for line in header)  # the value is there, escaped


def test_only_the_intended_commands_run_with_the_intended_arguments(rendered, hostile, tmp_path):
    proc, calls, work = run(rendered, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [call[0] for call in calls]
    assert "UNKNOWN" not in names, calls
    assert set(names) <= ALLOWED, calls
    assert not list(work.glob(MARK + "*")) and not list(tmp_path.glob(MARK + "*")), "a payload ran"
    experiment, model, logs = hostile["slime_experiment"], hostile["slime_model_name"], hostile["slime_log_dir"]
    assert ["mkdir", "-p", logs] in calls
    job_id = "%s-attempt-1" % experiment
    assert ["ln", "-sfn", "%s.%s.log" % (model, job_id), "%s/%s.log" % (logs, model)] in calls
    plans = [call for call in calls if call[:3] == ["python3", ".mtslime/job/plan.py", "next"]]
    assert len(plans) == 1, calls
    plan = plans[0]
    assert plan[3:7] == ["--dashboard", "http://127.0.0.1:8772", "--experiment", experiment]
    assert plan[plan.index("--save-dir") + 1] == hostile["slime_save_dir"]
    assert plan[plan.index("--record-dir") + 1] == logs
    submits = [call for call in calls if call[:3] == ["ray", "job", "submit"]]
    assert len(submits) == 1, calls
    argv = submits[0][3:]
    options, train = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    assert options[options.index("--submission-id") + 1] == job_id
    metadata = json.loads(options[options.index("--metadata-json") + 1])
    assert metadata == {"mtslime_experiment": experiment, "mtslime_cluster": "localhost"}
    assert train[:2] == ["python3", "train.py"]
    for flag, value in hostile["slime_train_args_overrides"].items():
        assert train[train.index("--" + flag) + 1] == value, flag
    assert train[train.index("--save") + 1] == hostile["slime_save_dir"]
    assert not list(pathlib.Path(os.path.dirname(logs)).glob(MARK + "*")), "a payload ran"
    assert ["ray", "job", "logs", job_id, "-f"] in calls
