"""GPU core dumps (CUDA cudacore, ROCr gpucore): the excepting wave or warp, or, in a core taken
without an exception, the kernels running at the dump. Opened in their debugger; the transcript is
read by the debugger's source."""

from __future__ import annotations

from ..analyze.hang import counted_running
from ..analyze.running import core_claims, running_claims
from .source import Source


def _claims(inc, setting):
    return running_claims(counted_running(inc.hang, inc.running)) + core_claims(inc.cores)


SOURCE = Source("cores", "GPU core dumps: the excepting wave, or what ran at the dump",
                claims=_claims, json_keys=("cores", "running_at_dump"), sections=("GPU core dumps",))
