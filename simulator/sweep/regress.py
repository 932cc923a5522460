"""CI regression of predicted MFU: re-simulate a baseline and flag drift.

A baseline is a CSV with columns ``scenario`` (a YAML path, relative to the CSV's folder),
``overrides`` (``key=value`` items separated by ``;``, may be empty), ``mfu`` and
``step_time_s`` (the expected numbers). A row fails when |mfu - expected| exceeds the tolerance
(absolute MFU) or its scenario no longer loads.
"""

from __future__ import annotations

import io
import math
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from simulator.config.scenario import Scenario
from simulator.errors import ScenarioError, read_input
from simulator.procs import pool_kwargs
from simulator.simulate import simulate

DEFAULT_TOLERANCE = 0.005
BASELINE_COLUMNS = ["scenario", "overrides", "mfu", "step_time_s"]
REPORT_COLUMNS = ["scenario", "overrides", "mfu", "expected_mfu", "delta_mfu", "step_time_s",
                  "expected_step_time_s", "status", "reason", "fidelity", "calibration",
                  "sim_wall_s"]


def read_baseline(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    try:
        df = pd.read_csv(io.StringIO(read_input(path, "baseline")),
                         dtype={"scenario": str, "overrides": str}, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise ScenarioError(f"baseline: cannot read {path}: {err}", field="baseline") from None
    missing = [c for c in BASELINE_COLUMNS if c not in df.columns]
    if missing:
        raise ScenarioError(f"baseline: {path} lacks column(s) {missing}; expected "
                            f"{BASELINE_COLUMNS}", field="baseline")
    for c in ("mfu", "step_time_s"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df


def _check(args: tuple) -> dict:
    folder, scenario, overrides, expected, expected_step, tol = args
    row = {"scenario": scenario, "overrides": overrides, "expected_mfu": expected,
           "expected_step_time_s": expected_step, "mfu": math.nan, "delta_mfu": math.nan,
           "step_time_s": math.nan, "fidelity": "", "calibration": "", "sim_wall_s": 0.0}
    t0 = time.perf_counter()
    try:
        sets = [s.strip() for s in overrides.split(";") if s.strip()]
        res = simulate(Scenario.load(Path(folder) / scenario, sets), frames=False)
    except ScenarioError as err:
        return {**row, "status": "error", "reason": f"no longer loads: {err}",
                "sim_wall_s": time.perf_counter() - t0}
    delta = res.mfu - expected if expected == expected else math.nan
    ok = delta == delta and abs(delta) <= tol
    return {**row, "mfu": res.mfu, "delta_mfu": delta, "step_time_s": res.step_time_s,
            "status": "pass" if ok else "fail",
            "reason": "" if ok else (f"mfu {res.mfu:.4f} vs expected {expected:.4f} "
                                     f"(|delta| {abs(delta):.4f} > {tol:.4f})"
                                     if delta == delta else "baseline has no mfu"),
            "fidelity": res.fidelity, "calibration": res.calibration,
            "sim_wall_s": time.perf_counter() - t0}


def regress(baseline: str | Path, *, tolerance: float = DEFAULT_TOLERANCE, update: bool = False,
            junit: str | Path | None = None, jobs: int | None = None) -> pd.DataFrame:
    """Re-simulate every row (in parallel); returns the report (``REPORT_COLUMNS``)."""
    path = Path(baseline)
    df = read_baseline(path)
    tasks = [(str(path.parent), r.scenario, r.overrides, float(r.mfu), float(r.step_time_s),
              tolerance) for r in df.itertuples()]
    if (jobs or 1) > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=jobs, **pool_kwargs()) as pool:
            rows = list(pool.map(_check, tasks))
    else:
        rows = [_check(t) for t in tasks]
    report = pd.DataFrame(rows, columns=REPORT_COLUMNS)
    if junit:
        write_junit(report, junit, tolerance)
    if update:
        new = df.copy()
        loaded = report.status != "error"
        # full precision: a baseline rounded to 6 decimals lets a drift of up to 5e-7 past
        # the tolerance pass (+0.005 read as 0.0049997)
        new.loc[loaded.values, "mfu"] = report.mfu[loaded].values
        new.loc[loaded.values, "step_time_s"] = report.step_time_s[loaded].values
        new.to_csv(path, index=False)
    return report


def write_junit(report: pd.DataFrame, path: str | Path, tolerance: float) -> None:
    """JUnit XML (one testcase per baseline row) for CI systems' test reports."""
    failures = int((report.status == "fail").sum())
    errors = int((report.status == "error").sum())
    suite = ET.Element("testsuite", name="clustersim-regress", tests=str(len(report)),
                       failures=str(failures), errors=str(errors),
                       time=f"{report.sim_wall_s.sum():.3f}")
    for r in report.itertuples():
        name = r.scenario + (f" [{r.overrides}]" if r.overrides else "")
        case = ET.SubElement(suite, "testcase", classname="clustersim.regress", name=name,
                             time=f"{r.sim_wall_s:.3f}")
        if r.status == "fail":
            ET.SubElement(case, "failure", message=r.reason, type="MfuDrift").text = \
                f"tolerance {tolerance}; step_time_s {r.step_time_s:.4f} (expected " \
                f"{r.expected_step_time_s:.4f})"
        elif r.status == "error":
            ET.SubElement(case, "error", message=r.reason, type="ScenarioError")
        else:
            ET.SubElement(case, "system-out").text = f"mfu {r.mfu:.4f} delta {r.delta_mfu:+.5f}"
    root = ET.Element("testsuites")
    root.append(suite)
    try:
        ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    except OSError as err:
        raise ScenarioError(f"--junit: cannot write {path}: {err.strerror}",
                            field="--junit") from None
