"""The whole-inventory check (plugins/plugin_utils/inventory/check.py) from the default inventory's values:
names, paths, mounts, overlaps (per cluster and per storage), ports, clusters, and the messages."""
from __future__ import annotations

import pytest
from guide_values import host_values

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.check import InventoryCheck, check


def texts(hosts=("localhost",), per_host=None, groups=None, origins=None, errors=None):
    values = host_values(list(hosts), per_host, groups)
    return [p.text() for p in check(list(hosts), values, errors, groups, origins)]


def only(found, *words):
    """The one message that holds all `words`."""
    hits = [t for t in found if all(w in t for w in words)]
    assert len(hits) == 1, found
    return hits[0]


def local(**values):
    return {"localhost": values}


def test_the_default_inventory_is_valid():
    assert texts() == []


# -- names ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,value", [
    ("slime_experiment", "$(curl x | sh)"), ("slime_experiment", "a`id`"), ("slime_model_name", "qwen;rm -rf ~"),
    ("slime_model_name", "../qwen"), ("container_name", "slime_rl\nconnection: local"), ("slime_cluster", "my cluster"),
    ("slime_storage", "nfs/a"), ("slime_experiment", "*"), ("slime_experiment", "-rf"), ("slime_experiment", "a'b\"c"),
])
def test_names_that_become_files_ids_or_shell_words(name, value):
    text = only(texts(per_host=local(**{name: value})), name)
    assert "must be a name: letters, digits, '.', '_' and '-'" in text and "^[A-Za-z0-9][A-Za-z0-9._-]*$" in text
    assert "host localhost" in text and "Fix:" in text


def test_host_names_used_in_paths():
    found = texts(hosts=("../../escaped",))
    text = only(found, "inventory_hostname")
    assert "render_dir/<host>" in text and "'../../escaped'" in text


# -- paths ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,rule", [
    ("data/ckpt", "must be an absolute path"), ("/data/../etc", "must be normalised"),
    ("/data//ckpt", "must be normalised"), ("/data/ckpt\n/x", "control characters"), ("/data/$(id)", "no spaces"),
    ("/data/a b", "no spaces"), ("/data/*", "globs"),
])
def test_paths(value, rule):
    text = only(texts(per_host=local(slime_save_dir=value)), "slime_save_dir =")
    assert rule in text


def test_a_trailing_slash_is_fine_but_does_not_bypass_the_overlap_rule():
    found = texts(per_host=local(slime_save_dir="/data/LLMs/MCORE/Qwen3-8B_slime/"))
    assert any("the save dir is the same directory as the converted checkpoint dir" in t for t in found), found


def test_paths_a_container_uses_lie_under_its_mounts():
    text = only(texts(per_host=local(slime_save_dir="/tmp/Qwen3-8B_slime/")), "slime_save_dir", "mounts")
    assert "is not under any of the container's mounts (/data" in text
    # without a container there are no mounts to lie under
    assert texts(per_host=local(slime_save_dir="/tmp/ckpt", container_enabled=False)) == []


# -- overlaps within a cluster, after the overrides ------------------------------------------------------------
@pytest.mark.parametrize("values,words", [
    ({"slime_save_dir": "/data/LLMs/MCORE/Qwen3-8B_slime"}, ("converted checkpoint dir", "save dir")),
    ({"slime_save_dir": "/data/models/Qwen3-8B"}, ("Hugging Face model dir", "save dir")),
    ({"slime_hf_model_dir": "/data/models/data"}, ("data dir", "Hugging Face model dir")),
    ({"slime_mcore_dir": "/data/models/Qwen3-8B"}, ("Hugging Face model dir", "converted checkpoint dir")),
    ({"slime_save_dir": "/data/LLMs/MCORE/Qwen3-8B_slime/iter"}, ("lies inside",)),
    ({"slime_train_args_overrides": {"save": "/data/LLMs/MCORE/Qwen3-8B_slime"}},
     ("slime_train_args_overrides['save']",)),
    ({"slime_log_dir": "/data/models/data/logs"}, ("log dir", "data dir")),
    ({"slime_work_dir": "/data/mtslime/work", "slime_log_dir": "/data/mtslime"}, ("work dir", "log dir")),
])
def test_data_model_converted_save_work_and_log_dirs_do_not_overlap(values, words):
    found = texts(per_host=local(**values))
    assert any(all(w in t for w in words) for t in found), found


def test_logs_inside_the_work_dir_are_the_guides_layout():
    assert texts(per_host=local(slime_log_dir="/home/slime/musa_example/qwen_32b_sherry/logs")) == []


# -- storages shared by clusters -----------------------------------------------------------------------------
def fleet(per_host, hosts=("n1", "n2", "n3")):
    base = {h: {"slime_storage": "lustre", "slime_node_ip": "10.0.0.%d" % i, "container_name": "slime_" + h,
                "slime_experiment": "exp-" + h, "slime_save_dir": "/data/checkpoints/" + h}
            for i, h in enumerate(hosts, 1)}
    for host, values in per_host.items():
        base[host].update(values)
    return texts(hosts=hosts, per_host=base)


def test_clusters_on_one_storage_with_their_own_dirs_are_valid():
    assert fleet({}) == []


@pytest.mark.parametrize("n2", [
    {"slime_save_dir": "/data/checkpoints/n1"},
    {"slime_save_dir": "/data/checkpoints/n1/"},  # a trailing '/' does not bypass it
    {"slime_train_args_overrides": {"save": "/data/checkpoints/n1"}},  # nor setting save through the overrides
])
def test_two_clusters_saving_into_one_dir_are_refused(n2):
    text = only(fleet({"n2": n2}), "on storage lustre", "/data/checkpoints/n1")
    assert "clusters n1, n2 all use it as their save dir" in text and "overwrite each other's checkpoints" in text


def test_a_save_dir_inside_another_clusters_converted_checkpoint_is_refused():
    found = fleet({"n1": {"slime_mcore_dir": "/data/LLMs/MCORE/n1"}, "n2": {"slime_save_dir": "/data/LLMs/MCORE/n1/x"}})
    text = only(found, "on storage lustre")
    assert text.startswith("slime_save_dir = '/data/LLMs/MCORE/n1/x' (hosts n1, n2")
    assert "the save dir /data/LLMs/MCORE/n1/x of cluster n2 lies inside the converted checkpoint dir " \
           "/data/LLMs/MCORE/n1 of cluster n1" in text


def test_within_a_cluster_the_save_dir_is_named_first():
    text = only(texts(per_host=local(slime_save_dir="/data/LLMs/MCORE/Qwen3-8B_slime/")), "converted")
    assert text.startswith("slime_save_dir = '/data/LLMs/MCORE/Qwen3-8B_slime/'")
    assert "is the same directory as the converted checkpoint dir" in text


def test_clusters_sharing_a_containers_run_dir_are_refused():
    found = fleet({"n2": {"container_name": "slime_n1"}})
    text = only(found, "/data/mtslime/runs/slime_n1/logs")
    assert "clusters n1, n2 all use it as their run dir" in text and "container_name" in text


def test_a_save_dir_the_same_across_storages_is_fine():
    assert fleet({"n2": {"slime_save_dir": "/data/checkpoints/n1", "slime_storage": "other"}}) == []


# -- ports ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,rule", [(8772.5, "not a float"), (True, "not a boolean"), (70000, "1-65535"),
                                        (0, "1-65535"), ("8772x", "not a string"), ("8772\n", "not a string")])
def test_ports(value, rule):
    text = only(texts(per_host=local(ray_dashboard_port=value)), "ray_dashboard_port =")
    assert rule in text


@pytest.mark.parametrize("name,value,rule", [("slime_gpus_per_node", 2000, "must be an integer >= 1, <= 1024"),
                                             ("data_min_rows", -1, "must be an integer >= 0")])
def test_a_whole_number_out_of_its_range_says_the_range(name, value, rule):
    assert rule in only(texts(per_host=local(**{name: value})), "%s =" % name)


def test_a_port_from_the_command_line_is_a_string_of_digits_and_fine():
    assert texts(per_host=local(ray_dashboard_port="8265")) == []


def test_ports_are_distinct_per_node():
    text = only(texts(per_host=local(convert_master_port=64379)), "convert_master_port")
    assert "is the same port as ray_gcs_port (64379)" in text


# -- multi-node clusters ---------------------------------------------------------------------------------------
def two_nodes(a=None, b=None):
    per_host = {"a": dict({"slime_cluster": "c", "slime_node_ip": "10.0.0.1"}, **(a or {})),
                "b": dict({"slime_cluster": "c", "slime_node_ip": "10.0.0.2"}, **(b or {}))}
    return per_host


def test_a_two_node_cluster_is_valid():
    assert texts(hosts=("a", "b"), per_host=two_nodes()) == []


def test_a_cluster_is_homogeneous_in_vendor_and_gpu_count():
    text = only(texts(hosts=("a", "b"), per_host=two_nodes(b={"slime_accelerator": "cuda"})), "slime_accelerator")
    assert "must be homogeneous" in text and "a (head) 'musa'; b 'cuda'" in text and "host b" in text
    text = only(texts(hosts=("a", "b"), per_host=two_nodes(b={"slime_gpus_per_node": 4})), "homogeneous")
    assert text.startswith("slime_gpus_per_node = 4 (host b)")


def test_a_workers_own_value_of_a_cluster_wide_variable_is_named():
    found = texts(hosts=("a", "b"), per_host=two_nodes(b={"slime_train_args_overrides": {"lr": "2e-6"}}))
    text = only(found, "slime_train_args_overrides", "differs between the nodes of cluster c")
    assert "ignored without a word" in text and "host b" in text


def test_a_non_ip_node_address_is_refused():
    text = only(texts(hosts=("a", "b"), per_host=two_nodes(b={"slime_node_ip": "b.example"})), "slime_node_ip")
    assert "must be an IP address" in text


class FakeOrigins:
    """Groups of each host that set a variable, and where values come from."""

    def __init__(self, groups_setting=None, describe=None):
        self._groups, self._describe = groups_setting or {}, describe or {}

    def describe(self, host, name):
        return self._describe.get((host, name))

    def groups_setting(self, host, name):
        return self._groups.get((host, name), [])


def test_a_node_in_two_clusters_is_refused():
    origins = FakeOrigins({("a", "slime_cluster"): [("cluster_a", "c"), ("cluster_b", "d")]})
    text = only(texts(hosts=("a", "b"), per_host=two_nodes(), origins=origins), "groups that name different clusters")
    assert "cluster_a: c, cluster_b: d" in text


def test_a_node_listed_in_another_clusters_group_is_refused():
    per_host = two_nodes(b={"slime_cluster": "other"})
    found = texts(hosts=("a", "b"), per_host=per_host, groups={"c": ["a", "b"], "other": ["b"]})
    text = only(found, "is listed in group c")
    assert "its own cluster is other" in text and "moved out of c without a word" in text


# -- shapes and values that used to crash --------------------------------------------------------------------
@pytest.mark.parametrize("name,value,words", [
    ("slime_train_args_overrides", ["lr", 1], "must be a dict {flag: value}, not a list"),
    ("slime_train_args", {"PERF ARGS": {"lr": 1}}, "is not a bash variable name"),
    ("slime_model_args", {"num-layers": {"a": 1}}, "not a dict"),
    ("slime_runtime_env_vars", ["A=1"], "must be a dict"),
    ("slime_runtime_env_vars", {"A B": "1"}, "must be an environment variable name"),
    ("container_volumes", "/data:/data", "must be a list"),
    ("container_volumes", ["/data"], "host:container"),
    ("slime_accelerator", "rocm", "is not a vendor of slime_accelerator_profiles (musa, cuda)"),
    ("container_enabled", "yes", "must be a YAML boolean"),
    ("data_method", "download", "must be one of archive, preprocess"),
    ("data_archive_url", "ftp://x", "URL"),
    ("slime_gpus_per_node", "eight", "whole number"),
])
def test_wrong_shapes_name_the_variable(name, value, words):
    text = only(texts(per_host=local(**{name: value})), "%s =" % name)
    assert words in text


def test_template_errors_are_reported_not_raised():
    found = texts(errors={"localhost": {"slime_save_dir": "'nope' is undefined"}})
    assert only(found, "slime_save_dir", "could not be evaluated: 'nope' is undefined")


def test_a_required_variable_that_is_missing():
    values = host_values(["localhost"])
    values["localhost"].pop("slime_model_name")
    found = [p.text() for p in check(["localhost"], values)]
    assert any(t.startswith("slime_model_name (host localhost") and "is not set" in t for t in found), found


def test_secrets_are_never_shown():
    found = texts(per_host=local(model_hf_token=["hf_secret_token"]))
    text = only(found, "model_hf_token")
    assert "hf_secret_token" not in text


def test_every_problem_at_once_and_one_message_for_many_hosts():
    hosts = ["gpu%02d" % n for n in range(1, 9)]
    per_host = {h: {"slime_experiment": "bad name", "slime_node_ip": "10.0.1.%d" % i, "slime_storage": h}
                for i, h in enumerate(hosts, 1)}
    per_host["gpu03"]["ray_gcs_port"] = 8772.5
    found = texts(hosts=hosts, per_host=per_host)
    assert len(found) == 2, found
    assert "hosts gpu01, gpu02, gpu03, gpu04, gpu05, ... (8 in all)" in only(found, "slime_experiment")


def test_problems_are_assigned_to_their_clusters():
    per_host = {"n1": {"slime_experiment": "bad name"}, "n2": {}}
    values = host_values(["n1", "n2"], per_host)
    run = InventoryCheck(["n1", "n2"], values)
    problems = run.run()
    assert [p.clusters for p in problems] == [{"n1"}]


def test_where_the_value_comes_from_is_in_the_message():
    origins = FakeOrigins(describe={("localhost", "slime_experiment"): "from extra vars (-e); the group value "
                                    "(group_vars/all) is 'qwen3-8B'"})
    text = only(texts(per_host=local(slime_experiment="a b"), origins=origins), "slime_experiment")
    assert "(host localhost, from extra vars (-e); the group value (group_vars/all) is 'qwen3-8B')" in text
