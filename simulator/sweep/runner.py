"""Running a sweep: a local process pool or a Dask cluster, rows appended as points finish.

Rows go to ``OUT`` as they arrive (CSV: appended to the file itself; parquet: to
``OUT.partial.csv``, converted when the sweep ends), so an interrupted sweep loses at most the
points in flight; ``resume`` skips every point already written. When the sweep completes the
output is rewritten in sweep order, so a resumed sweep and an uninterrupted one give the same
file.
"""

from __future__ import annotations

import csv
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from simulator.errors import ScenarioError
from simulator.procs import pool_kwargs
from simulator.sweep.dask_runner import run_dask
from simulator.sweep.grid import _canon, all_columns, evaluate_batch, expand, frame, load_sweep

BATCH = 16
"""Points per task: amortises process start-up and pickling (a point takes 2-5 ms at analytic
fidelity)."""


class _Sink:
    """Appends rows to a CSV with a fixed header (the first row's columns)."""

    def __init__(self, path: Path, columns: list[str] | None):
        self.path = path
        self.columns = columns
        self.file = None
        self.writer = None

    def write(self, rows: list[dict]) -> None:
        if self.writer is None:
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            if self.columns is None:
                self.columns = all_columns()
            self.file = open(self.path, "a", newline="")
            self.writer = csv.DictWriter(self.file, fieldnames=self.columns, extrasaction="ignore")
            if fresh:
                self.writer.writeheader()
        for r in rows:
            self.writer.writerow({k: ("" if r.get(k) is None else r.get(k))
                                  for k in self.columns})
        self.file.flush()

    def close(self) -> None:
        if self.file:
            self.file.close()


def _read(path: Path) -> pd.DataFrame:
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame()
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, keep_default_na=True)


def _drop_cut_line(path: Path) -> bool:
    """A CSV whose last line was cut (a killed sweep, a full disk) loses that line, so the
    rows appended next start on a line of their own; returns whether one was dropped."""
    if not path.exists() or path.suffix != ".csv" or path.stat().st_size == 0:
        return False
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return False
    with path.open("r+b") as fh:
        fh.truncate(data.rfind(b"\n") + 1)
    return True


def _check_writable(out: Path) -> None:
    """--out must be writable before any point is computed."""
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise ScenarioError(f"--out: folder {folder} does not exist", field="--out")
    if not os.access(folder, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ScenarioError(f"--out: cannot write {out} (permission denied)", field="--out")


def run_sweep(sweep_path: str | Path, out: str | Path, *, jobs: int | None = None,
              scheduler: str | None = None, resume: bool = False, fidelity: str | None = None,
              progress: bool = True, console: Console | None = None) -> pd.DataFrame:
    """Run every point of the sweep file; returns the whole table (in sweep order)."""
    spec, base = load_sweep(sweep_path)
    fidelity = fidelity or spec.fidelity
    out = Path(out)
    if out.suffix not in (".csv", ".parquet"):
        raise ScenarioError(f"--out: {out} must end in .csv or .parquet", field="--out")
    _check_writable(out)
    partial = out if out.suffix == ".csv" else out.with_name(out.name + ".partial.csv")
    points = expand(spec, base)
    order = {_canon(p): k for k, p in enumerate(points)}
    done = pd.DataFrame()
    if resume:
        if _drop_cut_line(partial) and console is not None:
            console.print(f"--resume: dropped the cut last line of {partial}")
        done = pd.concat([_read(out), _read(partial) if partial != out else pd.DataFrame()],
                         ignore_index=True)
        if len(done) and "point" in done:
            done = done[done.point.isin(order)].drop_duplicates("point", keep="last")
    else:
        for f in {out, partial}:
            if f.exists():
                f.unlink()
    seen = set(done.point) if len(done) else set()
    todo = [p for p in points if _canon(p) not in seen]
    columns = list(done.columns) if len(done) else None
    if partial != out and len(done) and not partial.exists():
        done.to_csv(partial, index=False)          # parquet rows so far, to append to
    sink = _Sink(partial, columns)
    batches = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)]
    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]} configs/s"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), console=console,
                   disable=not progress, transient=False)
    try:
        with bar:
            task = bar.add_task("points", total=len(points), completed=len(points) - len(todo),
                                rate="-")

            def took(rows):
                sink.write(rows)
                bar.advance(task, len(rows))
                speed = bar.tasks[0].speed
                bar.update(task, rate=f"{speed:,.0f}" if speed else "-")

            if scheduler:
                run_dask(scheduler, base, spec.set, batches, fidelity, took)
            elif (jobs or os.cpu_count() or 1) == 1 or len(batches) <= 1:
                for b in batches:
                    took(evaluate_batch(base, spec.set, b, fidelity))
            else:
                _run_pool(jobs or os.cpu_count() or 1, base, spec.set, batches, fidelity, took)
    finally:
        sink.close()
    table = _read(partial)
    table = table.assign(_k=table.point.map(order)).sort_values("_k", kind="stable") \
        .drop(columns="_k").reset_index(drop=True) if len(table) else frame([])
    if out.suffix == ".parquet":
        table.to_parquet(out, index=False)
        partial.unlink(missing_ok=True)
    else:
        tmp = out.with_name(out.name + ".tmp")
        table.to_csv(tmp, index=False)
        os.replace(tmp, out)
    return table


def _run_pool(jobs: int, base, sets, batches, fidelity, took) -> None:
    with ProcessPoolExecutor(max_workers=jobs, **pool_kwargs()) as pool:
        pending = set()
        it = iter(batches)
        for b in it:                                  # keep 2 x jobs tasks in flight
            pending.add(pool.submit(evaluate_batch, base, sets, b, fidelity))
            if len(pending) >= 2 * jobs:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                took(f.result())
                nxt = next(it, None)
                if nxt is not None:
                    pending.add(pool.submit(evaluate_batch, base, sets, nxt, fidelity))
