"""Where a trial ran, as its result records it: the engine, the node, the engine's ids, its GPUs."""

from __future__ import annotations

import os
import socket

# The variables through which an engine hands a trial its GPUs: recorded per trial, and what makes
# parallel trials' GPU sets checkable for being disjoint.
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "SLURM_JOB_GPUS",
                 "SLURM_STEP_GPUS")


def placement(engine: str, **ids) -> dict:
    """Where a trial ran: the engine, the node, the engine's job/task ids and the GPUs it was given."""
    gpus = {k: os.environ[k] for k in GPU_VARIABLES if k in os.environ}
    return {"engine": engine, "node": socket.gethostname(), "pid": str(os.getpid()), "gpus": gpus,
            **{k: str(v) for k, v in ids.items() if v is not None}}
