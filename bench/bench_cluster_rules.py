"""What the cluster analysis (CL001 slow rank, CL002 slow link, CL003 step spread) adds to the per-rank work.

A 64-rank simulated run (the ``bench_cluster.py`` run: 40-layer network, ``--rows`` kernel rows per
rank, every file MindSpore writes) is analysed in-process with ``--jobs 2``, once with every rule and
once without the CL rules. Printed:

* the per-rank work of the other rules (op views, step breakdowns, their rank evidence: seconds
  the units measure, summed over ranks) — the floor;
* the CL rules' own seconds: their rank evidence (inside the units) plus their ``check``;
* that as a share of the floor (target ≤ 10 %), and the two wall times.

    python bench/bench_cluster_rules.py [--keep DIR] [--ranks 64] [--rows 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "rules"), str(ROOT / "bench")]

from bench_cluster import _simulate  # noqa: E402


def _analyze(profile: Path, ignore: list[str]) -> tuple[float, object]:
    from advisor_core.engine.session import Session, SessionOptions

    session = Session([profile], SessionOptions(jobs=2, autoload_plugins=False))
    t = time.perf_counter()
    result = session.analyze(ignore=ignore)
    return time.perf_counter() - t, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", type=Path, help="keep (and reuse) the simulated run here")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--rows", type=int, default=100_000, help="kernel rows per rank (about)")
    a = ap.parse_args()
    base = a.keep or Path(tempfile.mkdtemp(prefix="bench_cl_"))
    run = base / f"run-{a.ranks}x{a.rows}"
    if not (run / "profile").is_dir():
        t = time.perf_counter()
        _simulate(run, a.ranks, a.rows)
        print(f"simulated {a.ranks} ranks in {time.perf_counter() - t:.1f} s")
    wall_without, without = _analyze(run / "profile", ["CL"])
    wall_with, with_cl = _analyze(run / "profile", [])
    units = with_cl.unit_seconds  # type: ignore[attr-defined]
    cl = {r.code: r.seconds for r in with_cl.runs if r.code.startswith("CL")}  # type: ignore[attr-defined]
    floor = sum(v for k, v in units.items() if not k.startswith("CL"))
    added = sum(cl.values())
    print(f"ranks {a.ranks}, ~{a.rows:,} kernel rows each, --jobs 2")
    print(f"per-rank work of the other rules (units, summed over ranks): {floor:8.2f} s")
    print("CL rules (rank evidence + check): " + ", ".join(f"{k} {v:.2f} s" for k, v in sorted(cl.items())))
    print(f"CL share of the per-rank work: {added / floor:.1%} (target <= 10 %)")
    print(f"analyze wall time: without CL {wall_without:.1f} s, with CL {wall_with:.1f} s "
          f"({wall_with / wall_without:.2f}x)")
    print(f"CL findings: {[f.title for f in with_cl.findings if f.code.startswith('CL')]}")  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
