#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: hf_model_check
short_description: Check a Hugging Face model directory (config, tokenizer, shards) without reading the weights
version_added: "0.1.0"
description:
  - Checks that a Hugging Face model directory is complete and matches the Megatron C(MODEL_ARGS) the conversion
    and training will use, reading only C(config.json), the tokenizer file names, C(model.safetensors.index.json)
    and the header of each safetensors shard.
  - "C(config.json) must be readable JSON with the fields the conversion needs: C(hidden_size), C(num_hidden_layers),
    C(num_attention_heads), C(num_key_value_heads), C(intermediate_size), C(vocab_size), C(rms_norm_eps),
    C(rope_theta) (also read from C(rope_parameters)) and C(tie_word_embeddings)."
  - "When O(model_args) is given, the config must match it (slime checks the same at start-up and fails with
    C(hf_validate_args failed)): C(num-layers)=C(num_hidden_layers), C(hidden-size)=C(hidden_size),
    C(ffn-hidden-size)=C(intermediate_size), C(num-attention-heads)=C(num_attention_heads),
    C(num-query-groups)=C(num_key_value_heads), C(vocab-size)=C(vocab_size), C(norm-epsilon)=C(rms_norm_eps)
    (float compare), C(rotary-base)=C(rope_theta), C(kv-channels)=C(head_dim) (when the config has it), and
    C(untie-embeddings-and-output-weights) is set exactly when C(tie_word_embeddings) is false."
  - With C(model.safetensors.index.json), every shard named in its C(weight_map) must be present; a single
    C(model.safetensors) works without an index.
  - "Each shard's header must be readable (8-byte little-endian length, then a JSON header of a sane length) and the
    file size must equal 8 + header length + the largest C(data_offsets) end, so a truncated download is caught.
    Each tensor's byte range must fit its dtype and shape (F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16,
    I8, U8, BOOL and the unsigned integer types)."
  - With O(sha256_manifest), the listed files are hashed in parallel and compared.
  - When anything is wrong it fails with one message listing every problem, each naming the file and the fix.
options:
  path:
    description:
      - The model directory, for example C(/data/models/Qwen3-8B), or the download directory before it is moved
        into place.
    type: path
    required: true
  model_args:
    description:
      - "The C(MODEL_ARGS) of the model (C(scripts/models/qwen3-8B.sh)) as a dict of flag names without C(--)
        to values, for example C({num-layers: 36, hidden-size: 4096, untie-embeddings-and-output-weights: true})."
      - As in the inventory's C(slime_model_args), C(true) is a bare flag (C(swiglu)) and C(false) or null leaves a
        flag out. Flags that have no config counterpart are ignored. Underscores and leading dashes in the names are
        accepted, and numbers may be strings (YAML reads C(1e-6) as a string).
      - When given, leaving out C(untie-embeddings-and-output-weights) means the embeddings are expected to be tied.
    type: dict
  tokenizer_files:
    description:
      - Tokenizer files that must be present.
      - By default C(tokenizer_config.json) and either C(tokenizer.json) or both C(vocab.json) and C(merges.txt).
    type: list
    elements: str
  sha256_manifest:
    description:
      - Expected sha256 of files in the directory, either a dict of file name to sha256 or the path of a file that
        holds such a dict as JSON or C(sha256sum) output (C(<sha256>  <name>) lines).
      - The listed files are hashed in parallel, see O(hash_workers). Hashing 16 GiB takes minutes.
    type: raw
  hash_workers:
    description: Threads that hash files for O(sha256_manifest).
    type: int
    default: 4
  require_index:
    description:
      - Require C(model.safetensors.index.json). By default it is required when the directory holds more than one
        C(.safetensors) file.
    type: bool
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Check the downloaded Qwen3-8B against the MODEL_ARGS of scripts/models/qwen3-8B.sh
  mtslime.posttrain.hf_model_check:
    path: /data/models/Qwen3-8B
    model_args:
      swiglu: true
      num-layers: 36
      hidden-size: 4096
      ffn-hidden-size: 12288
      num-attention-heads: 32
      group-query-attention: true
      num-query-groups: 8
      use-rotary-position-embeddings: true
      disable-bias-linear: true
      normalization: RMSNorm
      norm-epsilon: 1e-6
      rotary-base: 1000000
      vocab-size: 151936
      kv-channels: 128
      qk-layernorm: true
      untie-embeddings-and-output-weights: true
  register: hf_check

- name: Also verify checksums recorded by an internal mirror
  mtslime.posttrain.hf_model_check:
    path: /data/models/.Qwen3-8B.download
    sha256_manifest: /data/models/Qwen3-8B.sha256
    hash_workers: 8
"""

RETURN = r"""
shards:
  description: Number of safetensors shards checked.
  returned: always
  type: int
  sample: 5
total_bytes:
  description: Size of all files directly in O(path).
  returned: always
  type: int
parameters:
  description: Number of parameters (sum over all tensors of the product of their shape).
  returned: always
  type: int
  sample: 8190735360
files:
  description: The files directly in O(path), each with C(name) and C(bytes) (and C(sha256) when hashed).
  returned: always
  type: list
  elements: dict
config:
  description: The config fields above (and C(head_dim) when present) as read from C(config.json).
  returned: always
  type: dict
fingerprint:
  description:
    - sha256 over C(config.json), the index and each shard's name, size and header. Identifies the model a
      conversion was made from, without reading the weights.
  returned: on success
  type: str
problems:
  description: Every problem found (empty on success).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import hf_model_check_task


def main():
    hf_model_check_task.main(AnsibleModule(**hf_model_check_task.module_kwargs()))


if __name__ == "__main__":
    main()
