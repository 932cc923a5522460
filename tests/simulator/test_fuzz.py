"""Fuzzing as a standing test: mutated scenarios at flow fidelity with faults on small fabrics,
and every file-reading command fed broken files (random bytes, cut short, other encodings,
flipped bytes, lost lines). Each outcome is a result or one line, exit 2; never a traceback.
benchmarks/fuzz.py runs the same cases by the thousand."""

from __future__ import annotations

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz_cases import acceptable, file_case, flow_case, run_cli

SETTINGS = dict(deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=100, **SETTINGS)
def test_flow_fidelity_with_faults_never_ends_in_a_traceback(seed, tmp_path):
    data = flow_case(np.random.default_rng(seed))
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    code, err = run_cli(["simulate", str(path), "--json"])
    assert acceptable("simulate", code, err), f"{code}: {err}\n{yaml.safe_dump(data)}"


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=200, **SETTINGS)
def test_broken_files_never_end_in_a_traceback(seed, tmp_path):
    command, argv = file_case(np.random.default_rng(seed), tmp_path)
    code, err = run_cli(argv)
    assert acceptable(command, code, err), f"{command} {code}: {err}"
