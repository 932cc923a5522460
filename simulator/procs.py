"""Worker processes that die with their parent (a leaf module).

A sweep's pool workers, ``regress``'s and the fluid model's forked form workers block in a pipe
read when their parent is killed (``kill -9``, an out-of-memory kill): without this they stay
forever. On Linux each worker asks the kernel for SIGKILL when its parent dies
(prctl(PR_SET_PDEATHSIG), prctl(2)); elsewhere this is a no-op.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
"""prctl option (linux/prctl.h)."""


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: SIGKILL this process when ``parent_pid`` exits (checked once more
    after the request, in case the parent died before it)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)


def pool_kwargs() -> dict:
    """``ProcessPoolExecutor`` keyword arguments for workers that die with this process."""
    return {"initializer": die_with_parent, "initargs": (os.getpid(),)}
