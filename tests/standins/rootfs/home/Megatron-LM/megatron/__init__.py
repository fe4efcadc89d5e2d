"""Stand-in for Megatron-LM (real: NVIDIA/Megatron-LM, checked out at /home/Megatron-LM in the MT
image). Test image only: a version for manifests, no model code."""
__version__ = "0.13.0+standin"
