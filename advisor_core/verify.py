"""The closed loop: analyse a simulated run, then check the findings against the simulator.

Three questions, answered per scenario:

1. **Recall** — is every problem in the run's ground truth (``expected.json``) reported by a
   finding of the same code pointing at the same place?
2. **Estimate** — is each matched finding's ``saving_us`` (and, where the finding trades
   memory, ``memory_delta_bytes``) within :data:`BAND` of the cost the simulator *measured* for
   that problem?
3. **Patch effect** — for each finding with applicable patches (safe and unsafe, never
   display-only): apply them to the run's config, simulate again with the same faults, size and
   seed, and compare the step time (and peak memory) moved with what the finding promised.
   A patch must never make the step slower than the noise floor.

A figure passes the band when ``BAND[0] <= measured / estimate <= BAND[1]`` or when the two
differ by less than the noise floor (:data:`NOISE_FRACTION` of the step time, or
:data:`MEMORY_NOISE_BYTES`), which is what keeps near-zero estimates (a dimension whose fix
is masked by another unaligned dimension of the same MatMul) from failing on jitter.

Used by the test suite (``tests/rules/test_closed_loop.py``) and runnable to print the table::

    python -m advisor_core.verify [SCENARIO ...]
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor_core.engine.findings import Finding, Safety

BAND = (0.7, 1.3)
NOISE_FRACTION = 0.005
MEMORY_NOISE_BYTES = 16 * 2**20

_LAYER_INDEX = re.compile(r"/layers-CellList/\d+-")
_OP_TAIL = re.compile(r"/[A-Za-z0-9_]+-op\d+$")
_PIPELINE_OP = re.compile(r"([A-Za-z]+?)(?:Op)?\(id=(\d+)\)")


def within_band(measured: float, estimate: float, noise: float) -> bool:
    """True when ``measured`` is within :data:`BAND` of ``estimate`` or within ``noise`` of it."""
    if abs(measured - estimate) <= noise:
        return True
    if estimate == 0:
        return False
    ratio = measured / estimate
    return BAND[0] <= ratio <= BAND[1]


@dataclass
class FindingCheck:
    """One finding held against the ground truth and (when it has patches) a re-simulation."""

    code: str
    title: str
    estimate_us: float
    estimate_memory_bytes: float | None
    truth_id: str | None = None
    truth_us: float | None = None
    truth_memory_bytes: float | None = None
    patched: bool = False
    resim_us: float | None = None
    resim_memory_bytes: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class ScenarioCheck:
    """The closed loop on one scenario."""

    scenario: str
    step_time_us: float
    peak_memory_bytes: int
    findings: list[Finding]
    checks: list[FindingCheck]
    missed: list[str]
    unmatched_above_low: list[str]

    @property
    def ok(self) -> bool:
        return not self.missed and not self.unmatched_above_low and all(c.ok for c in self.checks)

    def table(self) -> str:
        """A fixed-width table of estimate vs truth vs re-simulation (ms, MiB)."""
        lines = [f"{self.scenario}: step {self.step_time_us / 1000:.3f} ms, peak {self.peak_memory_bytes / 2**30:.2f} GiB"]
        for c in self.checks:
            def ms(v: float | None) -> str:
                return "-" if v is None else f"{v / 1000:8.3f}"

            def mib(v: float | None) -> str:
                return "-" if v is None else f"{v / 2**20:7.1f}"

            lines.append(f"  {c.code:<6} est {ms(c.estimate_us)} truth {ms(c.truth_us)} resim {ms(c.resim_us)} ms | "
                         f"mem est {mib(c.estimate_memory_bytes)} truth {mib(c.truth_memory_bytes)} "
                         f"resim {mib(c.resim_memory_bytes)} MiB | {c.truth_id or 'unmatched'}"
                         + ("" if c.ok else "  FAIL: " + "; ".join(c.problems)))
        for m in self.missed:
            lines.append(f"  MISSED {m}")
        for u in self.unmatched_above_low:
            lines.append(f"  FALSE ALARM {u}")
        return "\n".join(lines)


def _cell_scope(scope: str | None) -> str | None:
    if not scope:
        return None
    return _LAYER_INDEX.sub("/layers-CellList/N-", _OP_TAIL.sub("", scope))


def _finding_pointers(f: Finding) -> set[str]:
    ptrs = {loc.key_path for loc in f.locations if loc.key_path}
    for p in f.patches:
        ptrs.update(o.path for o in p.changes)
    return ptrs


def _finding_scopes(f: Finding) -> list[str]:
    return [s for s in (_cell_scope(loc.op) for loc in f.locations if loc.kind in ("ir", "profile")) if s]


def _pipeline_op(name: str | None) -> str | None:
    """A MindData op in either spelling, ``MapOp(id=3)`` (the pipeline files) or ``Map(id=3)`` (MindSpore's summary)."""
    m = _PIPELINE_OP.fullmatch(name or "")
    return f"{m.group(1)}(id={m.group(2)})" if m else None


def matches(problem: dict[str, Any], f: Finding) -> bool:
    """Whether finding ``f`` reports ground-truth ``problem`` (same code; same config key, IR cell or pipeline op)."""
    if f.code != problem["code"]:
        return False
    where = problem.get("where") or {}
    if problem["code"].startswith("CL"):  # a cluster problem is where it is: one rank
        return f.rank is not None and f.rank in (where.get("ranks") or [])
    pointer = where.get("config_pointer")
    if pointer:
        return pointer in _finding_pointers(f)
    cell = _cell_scope(where.get("ir_scope"))
    if cell:
        return any(s.startswith(cell) or cell.startswith(s) for s in _finding_scopes(f))
    op = _pipeline_op(where.get("op"))  # a data-pipeline problem no config key fixes (an expensive map transform)
    return bool(op) and any(loc.kind == "profile" and _pipeline_op(loc.op) == op for loc in f.locations)


def _applicable_patches(f: Finding) -> list[Any]:
    return [p for p in f.patches if p.safety != Safety.DISPLAY_ONLY]


def _resimulate(scenario: str, config_text: str, steps: int, seed: int) -> tuple[float, int]:
    from advisor_core.simulate import simulate_scenario

    r = simulate_scenario(scenario, None, config=config_text, steps=steps, seed=seed)
    return r.mean_step_time_us, max(r.peak_memory_bytes.values())


def check_scenario(scenario: str, workdir: str | Path, *, steps: int | None = None, layers: int | None = None,
                   seed: int = 0, resimulate: bool = True) -> ScenarioCheck:
    """Simulate ``scenario`` into ``workdir``/``scenario``, analyse it and close the loop (see module doc)."""
    from advisor_core.api import open_session
    from advisor_core.config.document import ConfigDocument
    from advisor_core.diagnostics import DiagnosticSink
    from advisor_core.patch import apply_patches
    from advisor_core.simulate import simulate_scenario

    out = Path(workdir) / scenario
    sim = simulate_scenario(scenario, out, steps=steps, layers=layers, seed=seed)
    expected = sim.expected or json.loads((out / "expected.json").read_text(encoding="utf-8"))
    step = float(expected["step_time_us"]["mean"])
    peak = int(expected["peak_memory_bytes"]["max"])
    noise_us = NOISE_FRACTION * step
    result = open_session(out, plugins=False).analyze()
    findings = result.findings
    config_path = out / expected["config"]
    config_text = config_path.read_text(encoding="utf-8")
    n_steps = sim.model.steps

    checks: list[FindingCheck] = []
    matched: set[str] = set()
    for f in findings:
        c = FindingCheck(f.code, f.title, float(f.saving_us or 0.0),
                         None if f.memory_delta_bytes is None else -float(f.memory_delta_bytes))
        truth = next((p for p in expected["problems"] if p["id"] not in matched and matches(p, f)), None)
        if truth is not None:
            matched.add(truth["id"])
            c.truth_id, c.truth_us = truth["id"], float(truth["cost_us_per_step"])
            c.truth_memory_bytes = truth.get("memory_bytes")
            if not within_band(c.truth_us, c.estimate_us, noise_us):
                c.problems.append(f"saving estimate {c.estimate_us / 1000:.3f} ms vs measured cost {c.truth_us / 1000:.3f} ms")
            if c.truth_memory_bytes and abs(c.truth_memory_bytes) > MEMORY_NOISE_BYTES:
                if c.estimate_memory_bytes is None or not within_band(c.truth_memory_bytes, c.estimate_memory_bytes,
                                                                      MEMORY_NOISE_BYTES):
                    est = "none" if c.estimate_memory_bytes is None else f"{c.estimate_memory_bytes / 2**20:.1f} MiB"
                    c.problems.append(f"memory estimate {est} vs measured {c.truth_memory_bytes / 2**20:.1f} MiB")
        patches = _applicable_patches(f)
        if patches and resimulate:
            sink = DiagnosticSink()
            doc = ConfigDocument.from_text(config_text, config_path, sink)
            applied = apply_patches(doc, patches)
            if not applied.ok:
                c.problems.append("patches do not apply: " + "; ".join(x.message for x in applied.failed))
            else:
                c.patched = True
                new_step, new_peak = _resimulate(scenario, applied.new_text, n_steps, seed)
                c.resim_us = step - new_step
                c.resim_memory_bytes = float(peak - new_peak)
                if c.resim_us < -noise_us and c.estimate_us >= 0:
                    c.problems.append(f"patch makes the step {-c.resim_us / 1000:.3f} ms slower")
                if not within_band(c.resim_us, c.estimate_us, noise_us):
                    c.problems.append(f"re-simulated saving {c.resim_us / 1000:.3f} ms vs estimate {c.estimate_us / 1000:.3f} ms")
                if c.estimate_memory_bytes is not None and abs(c.estimate_memory_bytes) > MEMORY_NOISE_BYTES:
                    if not within_band(c.resim_memory_bytes, c.estimate_memory_bytes, MEMORY_NOISE_BYTES):
                        c.problems.append(f"re-simulated memory saving {c.resim_memory_bytes / 2**20:.1f} MiB vs "
                                          f"estimate {c.estimate_memory_bytes / 2**20:.1f} MiB")
        checks.append(c)
    missed = [p["id"] for p in expected["problems"] if p["id"] not in matched]
    unmatched = [f"{c.code} ({f.severity.value}): {c.title}" for c, f in zip(checks, findings)
                 if c.truth_id is None and f.severity.value in ("high", "medium")]
    return ScenarioCheck(scenario, step, peak, findings, checks, missed, unmatched)


def main(argv: list[str] | None = None) -> int:
    from advisor_core.simulate import SCENARIOS

    names = (argv if argv is not None else sys.argv[1:]) or list(SCENARIOS)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="advisor-verify-") as tmp:
        for name in names:
            check = check_scenario(name, tmp)
            print(check.table())
            failed += not check.ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
