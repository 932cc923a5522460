"""Wall time and peak RSS of one simulated step at growing scale (not a test).

Usage: .venv/bin/python benchmarks/scale.py [--fidelity flow|screening]
(131,072 GPUs: ~15 s, 1.8 GiB)
Each size runs in a fresh process so peak RSS is that run's own. MegaScale's GPT-3 175B layout
(tp 8, pp 8, dp = GPUs / 64, global batch = GPUs / 2) on its fabric preset, congestion control
none.
"""

from __future__ import annotations

import json
import subprocess
import sys

from rich.console import Console
from rich.table import Table

SIZES = (1024, 4096, 12288, 16384, 32768, 131072)
CHILD = """
import json, resource, sys, time
from simulator import Scenario, simulate
gpus, fidelity = int(sys.argv[1]), sys.argv[2]
sc = Scenario.load("examples/megascale-175b-12288.yaml", [f"cluster.gpus={gpus}",
     f"workload.global_batch={gpus // 2}", f"fidelity={fidelity}",
     "network.congestion_control=none"])
t = time.perf_counter(); r = simulate(sc); wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "step": r.step_time_s, "mfu": r.mfu, "flows": int(r.collectives.flows.sum())
                  if len(r.collectives) else 0}))
"""


def main() -> None:
    fidelity = sys.argv[sys.argv.index("--fidelity") + 1] if "--fidelity" in sys.argv else "flow"
    t = Table(title=f"One step of GPT-3 175B (MegaScale layout), fidelity {fidelity}")
    for c in ("GPUs", "wall s", "wall s / 1k GPUs", "peak RSS MiB", "flows", "step_time_s",
              "MFU"):
        t.add_column(c, justify="right")
    for gpus in SIZES:
        out = subprocess.run([sys.executable, "-c", CHILD, str(gpus), fidelity],
                             capture_output=True, text=True, check=True)
        d = json.loads(out.stdout)
        t.add_row(f"{gpus:,}", f"{d['wall']:.2f}", f"{d['wall'] / gpus * 1000:.3f}",
                  f"{d['rss']:.0f}", f"{d['flows']:,}", f"{d['step']:.3f}", f"{d['mfu']:.1%}")
    Console().print(t)


if __name__ == "__main__":
    main()
