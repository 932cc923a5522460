"""Sweeps on a Dask cluster: every batch of points a task, results as they complete."""

from __future__ import annotations

from distributed import Client, as_completed

from simulator.errors import ScenarioError
from simulator.sweep.grid import evaluate_work


def run_dask(address, work: tuple, batches, took) -> None:
    """``work``: (base, sets, fidelity, cache_dir, cache) as the local pool gets it."""
    try:
        client = address if not isinstance(address, str) else Client(address, timeout="10s")
    except OSError as err:
        raise ScenarioError(f"--scheduler: cannot reach {address}: {err}",
                            field="--scheduler") from None
    try:
        futures = [client.submit(evaluate_work, work, b, pure=False) for b in batches]
        for f in as_completed(futures):
            took(f.result())
    finally:
        if isinstance(address, str):
            client.close()
