"""The collection's filters: run-script arrays, argv, cluster layout, container paths."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.filter import slime
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import known_flags
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import args as ta


def test_flag_tokens_types():
    assert ta.flag_tokens("apply-chat-template", True) == ["--apply-chat-template"]
    assert ta.flag_tokens("use-tis", False) == []
    assert ta.flag_tokens("use-tis", None) == []
    assert ta.flag_tokens("--lr", "1e-6") == ["--lr", "1e-6"]
    assert ta.flag_tokens("eps-clip", 0.0) == ["--eps-clip", "0.0"]
    assert ta.flag_tokens("eval-prompt-data", ["aime", "/a.parquet"]) == ["--eval-prompt-data", "aime", "/a.parquet"]
    assert ta.flag_tokens("num-rollout", 3000) == ["--num-rollout", "3000"]


def test_overrides_replace_in_place_remove_and_append():
    groups = {"CKPT_ARGS": {"save": "/a", "save-interval": 200}, "MISC_ARGS": {"attention-backend": "flash"}}
    merged, located = ta.apply_overrides(groups, {"--save-interval": 3, "save": None, "new-flag": True})
    assert merged["CKPT_ARGS"] == {"save-interval": 3}
    assert merged["MISC_ARGS"] == {"attention-backend": "flash", "new-flag": True}
    assert located["new-flag"] == "MISC_ARGS"
    assert groups["CKPT_ARGS"]["save"] == "/a"  # input untouched


def test_argv_order_is_the_guides_submit_line():
    groups = {"MISC_ARGS": {"a": 1}, "CKPT_ARGS": {"b": 2}, "EXTRA": {"c": 3}, "ROLLOUT_ARGS": {"d": 4}}
    argv = slime.slime_argv(groups, {"actor-num-nodes": 1}, {"swiglu": True})
    assert argv == ["--actor-num-nodes", "1", "--swiglu", "--b", "2", "--d", "4", "--a", "1", "--c", "3"]


def test_arg_arrays_put_model_args_first():
    arrays = slime.slime_arg_arrays({"CKPT_ARGS": {"load": "/x"}}, {}, {"num-layers": 36})
    assert [a["name"] for a in arrays] == ["MODEL_ARGS", "CKPT_ARGS"]
    assert arrays[0]["tokens"] == ["--num-layers", "36"]


def test_effective_args_drops_switched_off_flags():
    assert slime.slime_effective_args({"A": {"x": False, "y": 1}}, {"z": True}) == {"y": 1, "z": True}


def test_shell_lines_group_values_and_quote():
    lines = slime.slime_shell_lines(["--a", "1", "--b", "--metadata", '{"k": "v"}', "--list", "x", "y z"])
    assert lines == ["--a 1", "--b", "--metadata '{\"k\": \"v\"}'", "--list x 'y z'"]


def test_unknown_flags_suggest_and_accept_passthrough():
    flags = ["lr", "sglang-mem-fraction-static", "router-foo", "ref-laod"]
    assert [flag for flag in flags if known_flags.spec(flag) is None] == ["ref-laod"]
    assert known_flags.suggestion("ref-laod") == "ref-load"
    assert known_flags.spec("zzz-qqq") is None and known_flags.suggestion("zzz-qqq") is None
    assert known_flags.spec("zzz-qqq", extra=["--zzz-qqq"]) is not None


@pytest.mark.parametrize("value", ["false", "true", 1, 0, "no"])
def test_a_switch_given_anything_but_a_boolean_is_not_rendered(value):
    """--sequence-parallel false would turn it ON (store_true): the filters refuse to render it."""
    with pytest.raises(AnsibleFilterError, match="--sequence-parallel is a switch"):
        slime.slime_flag_tokens({"sequence-parallel": value})
    with pytest.raises(AnsibleFilterError, match="is a switch"):
        slime.slime_arg_arrays({"PERF_ARGS": {"sequence-parallel": value}})
    assert slime.slime_flag_tokens({"sequence-parallel": True, "use-tis": False}) == ["--sequence-parallel"]


@pytest.mark.parametrize("name", ["A B", "X;rm", "1ARGS", "A$(x)", "A\nB"])
def test_array_names_must_be_bash_names(name):
    with pytest.raises(AnsibleFilterError, match="is not a bash array name"):
        slime.slime_arg_arrays({name: {"lr": 1}})


def test_shell_comment_never_ends_the_line():
    text = slime.slime_shell_comment("/a b\nrm -rf /; `x`")
    assert "\n" not in text and text.startswith("'") and "\\x0a" in text


def test_hostfile_lines_need_ip_addresses_and_gpu_counts():
    cluster = {"name": "c", "nodes": ["a", "b"], "addresses": {"a": "10.0.0.1", "b": "10.0.0.2"},
               "gpus": {"a": 8, "b": 8}}
    assert slime.slime_hostfile_lines(cluster) == ["10.0.0.1 slots=8", "10.0.0.2 slots=8"]
    for bad in ("b.example", None, "10.0.0.2\n10.6.6.6 slots=8"):
        with pytest.raises(AnsibleFilterError, match="node b has no usable IP address.*slime_node_ip"):
            slime.slime_hostfile_lines(dict(cluster, addresses={"a": "10.0.0.1", "b": bad}))
    with pytest.raises(AnsibleFilterError, match="slime_gpus_per_node"):
        slime.slime_hostfile_lines(dict(cluster, gpus={"a": 8, "b": "8; x"}))


class FakeHostvars(dict):
    pass


def _hosts(**nodes):
    return FakeHostvars({name: dict(values, slime_gpus_per_node=values.get("slime_gpus_per_node", 8))
                         for name, values in nodes.items()})


def test_topology_single_nodes_and_a_cluster():
    hv = _hosts(
        n1={"ansible_host": "10.0.0.1"},
        n2={"slime_cluster": "big", "slime_node_ip": "10.0.1.2"},
        n3={"slime_cluster": "big", "ansible_default_ipv4": {"address": "10.0.1.3"}},
        n4={"ansible_host": "node4.example", "ansible_default_ipv4": {"address": "10.0.0.4"}},
    )
    topo = slime.slime_topology(hv, ["n1", "n2", "n3", "n4"], {})
    assert set(topo) == {"n1", "big", "n4"}
    assert topo["big"]["head"] == "n2" and topo["big"]["workers"] == ["n3"] and topo["big"]["size"] == 2
    assert topo["big"]["addresses"] == {"n2": "10.0.1.2", "n3": "10.0.1.3"}
    assert topo["n4"]["addresses"]["n4"] == "10.0.0.4"  # a DNS name is not used as the address
    assert topo["n1"]["gpus"] == {"n1": 8}


def test_topology_head_follows_the_group_named_like_the_cluster():
    hv = _hosts(a={"slime_cluster": "c"}, b={"slime_cluster": "c"})
    topo = slime.slime_topology(hv, ["a", "b"], {"c": ["b", "a"]})
    assert topo["c"]["head"] == "b"


def test_topology_rejects_bad_gpu_count():
    with pytest.raises(AnsibleFilterError, match="slime_gpus_per_node of a"):
        slime.slime_topology(_hosts(a={"slime_gpus_per_node": "eight"}), ["a"], {})


def test_topology_takes_the_collections_default_for_a_node_the_inventory_leaves_unset():
    # hostvars hold no role defaults: a node without its own slime_gpus_per_node has the default (8)
    hv = FakeHostvars(a={"slime_cluster": "c"}, b={"slime_cluster": "c", "slime_gpus_per_node": 4})
    assert slime.slime_topology(hv, ["a", "b"], {})["c"]["gpus"] == {"a": 8, "b": 4}


@pytest.mark.parametrize("path,volumes,expected", [
    ("/data/checkpoints/x", ["/data:/data"], "/data/checkpoints/x"),
    ("/data/checkpoints/x", ["/mnt/big:/data"], "/mnt/big/checkpoints/x"),
    ("/data/checkpoints/x", ["/mnt/big:/data", "/nvme:/data/checkpoints:rw"], "/nvme/x"),
    ("/data", ["/mnt/big:/data/"], "/mnt/big"),
    ("/tmp/x", ["/data:/data"], "/tmp/x"),
    ("/data/x", [], "/data/x"),
])
def test_host_path(path, volumes, expected):
    assert slime.slime_host_path(path, volumes) == expected


def test_storages_leader_is_the_first_node():
    hv = _hosts(a={"slime_storage": "nfs"}, b={"slime_storage": "nfs"}, c={})
    storages = slime.slime_storages(hv, ["a", "b", "c"])
    assert storages["nfs"] == {"name": "nfs", "leader": "a", "nodes": ["a", "b"]}
    assert storages["c"]["leader"] == "c"


def test_writer_is_the_first_node_using_the_path():
    hv = _hosts(a={"m": "/data/8b"}, b={"m": "/data/4b"}, c={"m": "/data/4b"})
    storage = {"name": "nfs", "leader": "a", "nodes": ["a", "b", "c"]}
    assert slime.slime_writer(hv, storage, "m", "/data/4b") == "b"
    assert slime.slime_writer(hv, storage, "m", "/data/8b") == "a"


def test_writer_compares_the_collections_default_of_nodes_that_do_not_set_the_path():
    hv = FakeHostvars(a={"slime_hf_model_dir": "/data/models/other"}, b={}, c={})
    storage = {"name": "nfs", "leader": "a", "nodes": ["a", "b", "c"]}
    assert slime.slime_writer(hv, storage, "slime_hf_model_dir", "/data/models/Qwen3-8B") == "b"
    with pytest.raises(AnsibleFilterError, match="the default of slime_train_file .* is a template"):
        slime.slime_writer(hv, storage, "slime_train_file", "/data/x")


def test_module_utils_copies_are_the_files_and_what_they_import_in_module_utils_layout():
    utils = slime.MODULE_UTILS
    copies = slime.slime_module_utils_copies(["job/plan.py"], "/w/.mtslime/", mode="0600")
    paths = [copy["path"] for copy in copies]
    assert paths[0] == "/w/.mtslime/job/plan.py"
    for name in ("job/rules.py", "job/__init__.py", "checkpoint/resume.py", "checkpoint/layout.py",
                 "checkpoint/__init__.py", "artifacts/aside.py", "common.py"):
        assert "/w/.mtslime/" + name in paths, name
    assert paths[1:] == sorted(paths[1:]) and len(set(paths)) == len(paths)
    assert not [path for path in paths if "/ray/" in path or "/logs/" in path], "only what job/plan.py imports"
    for copy in copies:
        with open(utils + copy["path"][len("/w/.mtslime"):]) as handle:
            assert copy["content"] == handle.read() and copy["mode"] == "0600"
    # a program that imports nothing of the collection is copied alone
    assert [c["path"] for c in slime.slime_module_utils_copies(["job/rules.py"], "/")] == ["/job/rules.py"]
    assert slime.slime_module_utils_copies(None, "/") == []


@pytest.mark.parametrize("name, text", [
    ("../filter/slime.py", "'../filter/slime.py' is not a module_utils file name"),
    ("/etc/passwd", "'/etc/passwd' is not a module_utils file name"),
    ("job/plan.pyc", "'job/plan.pyc' is not a module_utils file name"),
    ("job_plan.py", "job_plan.py is not a file under "),
])
def test_module_utils_copies_refuse_what_is_not_a_module_utils_file(name, text):
    with pytest.raises(AnsibleFilterError, match="slime_module_utils_copies: ") as caught:
        slime.slime_module_utils_copies([name], "/w")
    assert text in str(caught.value)
