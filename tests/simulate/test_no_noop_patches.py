"""No finding ever proposes a patch that changes nothing (every scenario, every rule).

A patch whose ``replace`` writes the value its ``test`` found (2 → 2 workers) is advice that
cannot help; it reached users once (issue 11, MD001). Each patch op sequence must change the
document: a ``replace`` to a different value, an ``add`` of a key that is absent. MD001 is also
driven over profiles built for it (a slow leaf, map or batch op, warm-up steps, any config and
host) — its worker patch must name the key that sets the slow op's workers, with a new value.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor_core.api import open_session
from advisor_core.simulate import SCENARIOS


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_patch_changes_the_config(scenario_runs, name):
    _, out = scenario_runs[name]
    result = open_session(out, plugins=False).analyze()
    checked = 0
    for f in result.findings:
        for p in f.patches:
            if p.safety.value == "display_only":  # model code (a shard() call): shown, never applied
                continue
            tested = {op.path: op.value for op in p.ops if op.op == "test"}
            changes = [op for op in p.ops if op.op in ("replace", "add", "remove")]
            assert changes, (f.code, p.title)
            for op in changes:
                if op.op == "replace":
                    assert op.path not in tested or tested[op.path] != op.value, (f.code, p.title, op.path, op.value)
                checked += 1
    if name in ("minddata-bottleneck", "unaligned", "recompute-ineffective", "kitchen-sink"):
        assert checked > 0  # scenarios whose fixes are config changes


# -- MD001's own paths on profiles built for it: warm-up, a slow leaf, map or batch, any config ----------------

PIPE_HEADER = ("op_id,op_type,num_workers,output_queue_size,output_queue_average_size,output_queue_length,"
               "output_queue_usage_rate,sample_interval,parent_id,children_id\n")
# the sink-mode chain DataQueue(0) <- Batch(1) <- Map(2) <- Generator(3): queue levels (of 16) per slow op
QUEUES = {"leaf": {1: 0, 2: 1, 3: 1}, "map": {1: 0, 2: 0, 3: 16}, "batch": {1: 0, 2: 16, 3: 16}}


def _md_profile(root, slow: str, workers: tuple[int, int, int], warm: int, cores: int, process_pct: float,
                op_pct: float) -> None:
    """A MindSpore-format MindData profile whose ``slow`` op starves the device, after ``warm`` cold steps."""
    import json

    apo, raw = root / "ASCEND_PROFILER_OUTPUT", root / "raw"
    apo.mkdir(parents=True)
    raw.mkdir()
    rows = ["0,DataQueueOp,1,,,,,10,,[1]"]
    types = {1: "BatchOp", 2: "MapOp", 3: "GeneratorOp"}
    for op in (1, 2, 3):
        level = QUEUES[slow][op]
        sizes = [level] * 20
        child = f"[{op + 1}]" if op < 3 else ""
        rows.append(f'{op},{types[op]},{workers[op - 1]},"{sizes}",{level},16,{level / 16},10,{op - 1},{child}')
    (apo / "minddata_pipeline_raw_0.csv").write_text(PIPE_HEADER + "\n".join(rows) + "\n")
    lines, ts = [], 1000
    for step in range(1, warm + 21):
        get = 300 if step <= warm else 40
        ts += get + 10
        lines += [f"0 0 {step} {get} {ts}", f"0 1 {step} 1 {ts}", f"0 2 {step} {get + 1} {ts}", f"1 16 {step} 0 {ts}"]
    (raw / "device_queue_profiling_0.txt").write_text("\n".join(lines) + "\n")
    n = 10
    slow_id = {"leaf": 3, "map": 2, "batch": 1}[slow]
    cpu = {"cpu_processor_num": cores, "sampling_interval": 10,
           "device_info": {"user_utilization": [50] * n, "sys_utilization": [5] * n, "idle_utilization": [45] * n},
           "process_info": {"user_utilization": [process_pct] * n, "sys_utilization": [0] * n},
           "op_info": [{"op_id": i, "metrics": {"user_utilization": [op_pct if i == slow_id else 1.0] * n,
                                                "sys_utilization": [0] * n}} for i in range(4)]}
    (raw / "minddata_cpu_utilization_0.json").write_text(json.dumps(cpu))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slow=st.sampled_from(sorted(QUEUES)), workers=st.tuples(*[st.integers(1, 4)] * 3),
       cfg_workers=st.one_of(st.none(), st.integers(1, 8)), cores=st.integers(1, 8), warm=st.integers(0, 3),
       process_pct=st.floats(5.0, 400.0), op_pct=st.floats(0.0, 200.0), python_mp=st.booleans())
def test_md001_never_patches_a_value_it_already_has(tmp_path_factory, slow, workers, cfg_workers, cores, warm,
                                                     process_pct, op_pct, python_mp):
    from advisor_core.engine.session import Session, SessionOptions
    from advisor_core.engine.settings import Settings

    root = tmp_path_factory.mktemp("md")
    _md_profile(root / "run", slow, workers, warm, cores, process_pct, op_pct)
    cfg = root / "config.yaml"
    cfg.write_text("train_dataset:\n  batch_size: 8\n" + (f"  num_parallel_workers: {cfg_workers}\n" if cfg_workers else "")
                   + f"  python_multiprocessing: {python_mp}\n  prefetch_size: 1\n")
    s = Session([root / "run"], SessionOptions(jobs=1, config=cfg, autoload_plugins=False, settings=Settings()))
    (f,) = [x for x in s.analyze(select=["MD001"]).findings if x.code == "MD001"]  # 40 ms of a 50 ms step: starved
    assert "prefetch_size" not in " ".join(p.title for p in f.patches)
    for p in f.patches:
        if p.safety.value == "display_only":
            assert p.ops == [] and ("num_parallel_workers=" in p.description or "python_multiprocessing" in p.description)
            continue
        tested = {op.path: op.value for op in p.ops if op.op == "test"}
        changes = [op for op in p.ops if op.op in ("replace", "add", "remove")]
        assert changes, p.title
        for op in changes:
            assert op.op != "replace" or tested.get(op.path) != op.value, (p.title, op.path, op.value)
