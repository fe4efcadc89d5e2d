"""Stand-in for megatron.core (real: NVIDIA/Megatron-LM megatron/core)."""
from megatron.core.package_info import __version__  # noqa: F401
