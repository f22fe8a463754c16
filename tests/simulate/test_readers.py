"""The product's own loaders and IR parser read every simulated artifact without a warning or an error."""

from __future__ import annotations

import pytest

from advisor_core.diagnostics import DiagnosticSink, Severity
from advisor_core.ir import find_ir_dumps
from advisor_core.model.run import load_run
from advisor_core.simulate import SCENARIOS

EXPECTED_TABLES = {
    "kernels", "op_statistic", "step_trace", "trace_events", "dataset", "minddata_pipeline", "minddata_summary",
    "minddata_cpu", "host_queue", "operator_memory", "memory_record", "npu_module_mem",
}


def _problems(sink: DiagnosticSink) -> list[str]:
    return [d.render() for d in sink if d.severity in (Severity.WARNING, Severity.ERROR)]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_table_of_every_rank_loads_cleanly(scenario_runs, name):
    result, out = scenario_runs[name]
    sink = DiagnosticSink()
    run = load_run(out / "profile", sink=sink)
    assert run.rank_ids == list(range(result.workload.world))
    for rank in run:
        assert rank.identity.framework == "MindSpore" and rank.identity.framework_version
        assert rank.parallel is not None and rank.parallel.world_size == result.workload.world
        present = {name for name in run.loaders if rank.has_table(name)}
        assert EXPECTED_TABLES <= present, EXPECTED_TABLES - present
        if result.workload.world > 1:
            assert {"communication", "communication_bandwidth", "communication_matrix"} <= present
        for table in sorted(present):
            df = rank.table(table)
            assert df is not None and len(df) > 0, table
            rank.record(table)
    assert not _problems(sink), _problems(sink)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_ir_dump_parses_cleanly(scenario_runs, name):
    result, out = scenario_runs[name]
    sink = DiagnosticSink()
    dumps = find_ir_dumps(out / "graphs", sink)
    assert sorted(dumps.ranks) == list(range(result.workload.world))
    for rd in dumps:
        kinds = {f.kind for f in rd.files}
        assert {"frontend", "graph_build"} <= kinds
        assert ("parallel" in kinds) == (result.workload.world > 1)
        for f in rd.files:
            ir = rd.parse(f)
            assert ir is not None and not ir.unparsed
            assert ir.declared_cnode_count == ir.cnode_count
            for node in ir.iter_nodes():
                assert not node.problems, (f.path.name, node.line, node.problems)
    assert not _problems(sink), _problems(sink)
