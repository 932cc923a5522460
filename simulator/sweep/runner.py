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
import shutil
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
from simulator.sweep.grid import _canon, all_columns, evaluate_work, expand, frame, load_sweep

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


SCREEN_MARGIN = 0.02
"""``--screen-top K``: points whose analytic MFU is within this fraction of the K-th best's also
go on to the fabric (layouts the screen cannot tell apart from the top K)."""


def screen_path(out: Path) -> Path:
    """Where ``--screen-top`` writes its analytic pass: ``OUT`` with ``.screen`` before its
    suffix."""
    return out.with_name(f"{out.stem}.screen{out.suffix}")


def cache_dir_for(out: Path) -> Path:
    """Where a flow sweep keeps its collective times: ``OUT.cache/`` beside the output."""
    return out.with_name(out.name + ".cache")


def run_sweep(sweep_path: str | Path, out: str | Path, *, jobs: int | None = None,
              scheduler: str | None = None, resume: bool = False, fidelity: str | None = None,
              progress: bool = True, console: Console | None = None, cache: bool = True,
              screen_top: int | None = None, screen_margin: float = SCREEN_MARGIN
              ) -> pd.DataFrame:
    """Run every point of the sweep file; returns the whole table (in sweep order).

    At flow fidelity the workers share fabric collectives through a content-addressed cache
    (:mod:`simulator.network.cache`; ``cache=False`` solves every one; a fresh sweep starts an
    empty ``OUT.cache/``, ``resume`` keeps it). ``table.attrs["collectives"]`` counts those
    solved and reused by the points run now. ``screen_top`` K: every point is first evaluated
    analytically (``OUT`` with ``.screen`` before its suffix), then only the best K by MFU, and
    every point within ``screen_margin`` of the K-th, at ``fidelity``; ``attrs["screen"]`` holds
    the screening table."""
    spec, base = load_sweep(sweep_path)
    fidelity = fidelity or spec.fidelity
    out = Path(out)
    if out.suffix not in (".csv", ".parquet"):
        raise ScenarioError(f"--out: {out} must end in .csv or .parquet", field="--out")
    _check_writable(out)
    if screen_top is not None and screen_top < 1:
        raise ScenarioError(f"--screen-top must be >= 1, got {screen_top}", field="--screen-top")
    if not 0 <= screen_margin < 1:
        raise ScenarioError(f"--screen-margin must be in [0, 1), got {screen_margin}",
                            field="--screen-margin")
    points = expand(spec, base)
    run = dict(base=base, sets=spec.set, jobs=jobs, scheduler=scheduler, resume=resume,
               progress=progress, console=console)
    screen = None
    if screen_top is not None and fidelity != "analytic":
        screen = _run_points(points, screen_path(out),
                             fidelity="analytic", cache_dir=None, label="screen", **run)
        ok = screen[screen.status == "ok"].sort_values("mfu", ascending=False, kind="stable")
        if len(ok):
            bar = ok.mfu.iloc[min(screen_top, len(ok)) - 1] * (1 - screen_margin)
            keep = set(ok.point[ok.mfu >= bar])
            points = [p for p in points if _canon(p) in keep]
        else:
            points = []
    cache_dir = None
    if fidelity == "flow" and cache:
        cache_dir = cache_dir_for(out)
        if not resume and cache_dir.exists():
            shutil.rmtree(cache_dir)
    table = _run_points(points, out, fidelity=fidelity, cache_dir=cache_dir, cache=cache,
                        label="sweep" if screen is None else fidelity, **run)
    if screen is not None:
        table.attrs["screen"] = screen
    return table


def _run_points(points: list[dict], out: Path, *, base: dict, sets: list[str], fidelity: str,
                jobs: int | None, scheduler: str | None, resume: bool, progress: bool,
                console: Console | None, cache_dir: Path | None, label: str,
                cache: bool = True) -> pd.DataFrame:
    """Evaluate ``points`` into ``out`` (appending as they finish, resuming, in sweep order)."""
    partial = out if out.suffix == ".csv" else out.with_name(out.name + ".partial.csv")
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
    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]} configs/s"), TimeElapsedColumn(),
                   TextColumn("ETA"), TimeRemainingColumn(), console=console,
                   disable=not progress, transient=False)
    work = (base, sets, fidelity, None if cache_dir is None else str(cache_dir), cache)
    counts = {"solved": 0, "reused": 0}
    try:
        with bar:
            task = bar.add_task("points", total=len(points), completed=len(points) - len(todo),
                                rate="-")

            def took(rows):
                sink.write(rows)
                for r in rows:
                    counts["solved"] += r.get("collectives_solved") or 0
                    counts["reused"] += r.get("collectives_reused") or 0
                bar.advance(task, len(rows))
                speed = bar.tasks[0].speed
                bar.update(task, rate=f"{speed:,.1f}" if speed else "-")

            if scheduler:
                run_dask(scheduler, work, batches, took)
            elif (jobs or os.cpu_count() or 1) == 1 or len(batches) <= 1:
                for b in batches:
                    took(evaluate_work(work, b))
            else:
                _run_pool(jobs or os.cpu_count() or 1, work, batches, took)
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
    table.attrs["collectives"] = counts
    return table


def _run_pool(jobs: int, work: tuple, batches, took) -> None:
    with ProcessPoolExecutor(max_workers=jobs, **pool_kwargs()) as pool:
        pending = set()
        it = iter(batches)
        for b in it:                                  # keep 2 x jobs tasks in flight
            pending.add(pool.submit(evaluate_work, work, b))
            if len(pending) >= 2 * jobs:
                break
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                took(f.result())
                nxt = next(it, None)
                if nxt is not None:
                    pending.add(pool.submit(evaluate_work, work, nxt))
