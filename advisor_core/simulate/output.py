"""Writing a simulated run to disk: the layout a MindFormers job on Ascend leaves behind, plus ground truth.

::

    OUT/expected.json                      ground truth (beside, never inside, the profile dirs)
    OUT/config/<name>.yaml                 the training config as simulated (round trip, comments kept)
    OUT/strategy/ckpt_strategy.json        strategy checkpoint, JSON form
    OUT/profile/<host>_<pid>_<YYYYmmddHHMMSSmmm>_ascend_ms/   one per rank
        profiler_info_<rank>.json  profiler_metadata.json
        PROF_000001_<ts>_SIMULATEDASCENDMS/device_<id>/info.json.<id>   (CANN device info)
        ASCEND_PROFILER_OUTPUT/    kernel_details.csv op_statistic.csv step_trace_time.csv trace_view.json
                                   communication.json communication_matrix.json dataset.csv
                                   minddata_pipeline_raw_<rank>.csv minddata_pipeline_summary_<rank>.{json,csv}
                                   operator_memory.csv memory_record.csv npu_module_mem.csv
        FRAMEWORK/                 pipeline_profiling_<rank>.json minddata_cpu_utilization_<rank>.json
                                   device_queue_profiling_<rank>.txt
    OUT/graphs/rank_<rank>/                step_parallel_end_SSSS.ir 21_validate_SSSS.ir graph_build_0_SSSS.ir

Nothing depends on the wall clock, the host or the output path, so equal inputs give equal bytes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from advisor_core.simulate import minddata
from advisor_core.simulate.configio import dump_config
from advisor_core.simulate.errors import SimulationInputError
from advisor_core.simulate.nodes import BUILD, FRONT, PARALLEL, stable_hash
from advisor_core.simulate.rankdata import rank_data
from advisor_core.simulate.schedule import T0_NS
from advisor_core.simulate.writers.comm import write_communication
from advisor_core.simulate.writers.ir import COUNTERS, IR_FILES, render_stage_ir
from advisor_core.simulate.writers.kernels import write_kernel_details, write_op_statistic
from advisor_core.simulate.writers.memory_files import write_memory_files
from advisor_core.simulate.writers.meta import write_profiler_info, write_profiler_metadata
from advisor_core.simulate.writers.minddata_files import write_minddata
from advisor_core.simulate.writers.strategy_file import write_strategy_file
from advisor_core.simulate.writers.timeline import write_step_trace_time, write_trace_view

__all__ = ["check_out_dir", "write_outputs", "rank_dir_name", "group_names"]


def check_out_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SimulationInputError(f"-o {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise SimulationInputError(f"-o {out}: directory is not empty (use --force to write into it anyway)")
        # A previous simulation's files would mix with this one (a rank directory too many, an old
        # expected.json): remove what the simulator writes, and only that.
        import shutil

        for sub in ("profile", "graphs", "config", "strategy"):
            if (out / sub).is_dir():
                shutil.rmtree(out / sub)
        if (out / "expected.json").is_file():
            (out / "expected.json").unlink()


def _timestamp(ns: int) -> str:
    t = time.gmtime(ns // 1_000_000_000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{(ns // 1_000_000) % 1000:03d}"


def rank_dir_name(rank: int, devices_per_node: int) -> str:
    return f"ascendnode{rank // devices_per_node:02d}_{30000 + 17 * rank}_{_timestamp(T0_NS)}_ascend_ms"


def _gid(ranks: list[int]) -> str:
    return f"{len(ranks)}-{stable_hash(','.join(str(r) for r in sorted(ranks)))}"


def group_names(w, rank: int) -> dict[str, tuple[str, list[int]]]:  # type: ignore[no-untyped-def]
    """Group kind → (MindSpore group name, global ranks) for one rank."""
    s, _, _ = w.coords(rank)
    out = {"mp": w.mp_group(rank), "dp": w.dp_group(rank)}
    chain = w.pp_group(rank)
    if s + 1 < w.pp:
        out["pp_next"] = [rank, chain[s + 1]]
    if s > 0:
        out["pp_prev"] = [chain[s - 1], rank]
    return {k: (_gid(v), v) for k, v in out.items()}


def _placeholders(w, rank: int, groups: dict[str, tuple[str, list[int]]]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    chain = w.pp_group(rank)
    s, _, _ = w.coords(rank)
    mp_ranks, dp_ranks = groups["mp"][1], groups["dp"][1]
    return {
        "@@MPGROUP@@": groups["mp"][0], "@@MPRANKS@@": "-".join(map(str, mp_ranks)),
        "@@MPRANKLIST@@": "(" + ", ".join(map(str, mp_ranks)) + ")",
        "@@DPGROUP@@": groups["dp"][0], "@@DPRANKS@@": "-".join(map(str, dp_ranks)),
        "@@PP_NEXTGROUP@@": groups.get("pp_next", ("hccl_world_group", []))[0],
        "@@PP_PREVGROUP@@": groups.get("pp_prev", ("hccl_world_group", []))[0],
        "@@NEXTRANK@@": str(chain[min(s + 1, w.pp - 1)]), "@@PREVRANK@@": str(chain[max(s - 1, 0)]),
    }


def prof_dir(rdir: Path) -> Path:
    """CANN's ``PROF_*`` folder of a rank directory."""
    return rdir / f"PROF_000001_{_timestamp(T0_NS)}_SIMULATEDASCENDMS"


def write_device_info(rdir: Path, device_id: int, hw) -> None:  # type: ignore[no-untyped-def]
    """CANN's ``PROF_*/device_<id>/info.json.<id>``: core counts and AI core frequency (block-dim checks need them)."""
    d = prof_dir(rdir) / f"device_{device_id}"
    d.mkdir(parents=True, exist_ok=True)
    info = {"DeviceInfo": [{"id": device_id, "env_type": 3, "ctrl_cpu_id": "ARMv8_Cortex_A55", "ctrl_cpu_core_num": 1,
                            "ai_cpu_core_num": 6, "ai_core_num": hw.ai_core_count, "aicpu_occupy_bitmap": 252,
                            "aic_frequency": str(int(hw.ai_core_frequency_mhz)), "aiv_num": hw.vector_core_count,
                            "aiv_frequency": str(int(hw.ai_core_frequency_mhz)), "hwts_frequency": "50",
                            "hbm_capacity_gib": hw.hbm_capacity_gib}],
            "platform_version": "Ascend910B", "devices": str(device_id), "drvVersion": "24.1.0"}
    (d / f"info.json.{device_id}").write_text(json.dumps(info), encoding="utf-8")


def write_outputs(out: Path, model, *, name: str, expected: dict[str, Any] | None,  # type: ignore[no-untyped-def]
                  export: str = "text", profiler_steps: bool = True) -> list[Path]:
    prep = model.prep
    w, hw = prep.w, prep.hw
    files: list[Path] = []
    (out / "config").mkdir(parents=True, exist_ok=True)
    cfg_path = out / "config" / f"{name}.yaml"
    cfg_path.write_text(dump_config(prep.doc), encoding="utf-8")
    files.append(cfg_path)
    (out / "strategy").mkdir(exist_ok=True)
    write_strategy_file(out / "strategy" / "ckpt_strategy.json", w, model.stages)
    ir_text: dict[tuple[int, int], str] = {}
    for g in model.stages:
        for mode in (PARALLEL, FRONT, BUILD):
            if mode == PARALLEL and w.world == 1:
                continue
            ir_text[(g.stage, mode)] = render_stage_ir(g, mode, g.stage)
    for p in model.programs:
        g = p.graph
        for local, rank in enumerate(p.ranks.tolist()):
            groups = group_names(w, rank)
            gids = {k: v[0] for k, v in groups.items()}
            granks = {k: v[1] for k, v in groups.items()}
            device_id = rank % hw.devices_per_node
            rdir = out / "profile" / rank_dir_name(rank, hw.devices_per_node)
            apo = rdir / "ASCEND_PROFILER_OUTPUT"
            fw = rdir / "FRAMEWORK"
            apo.mkdir(parents=True, exist_ok=True)
            fw.mkdir(exist_ok=True)
            rd = rank_data(model.schedule, p.stage, local, g.static_bytes)
            lo, hi = rd.window
            write_profiler_info(rdir / f"profiler_info_{rank}.json", w, rank, device_id, 30000 + 17 * rank, model.steps, lo, hi)
            write_profiler_metadata(rdir / "profiler_metadata.json", w, rank, groups)
            write_kernel_details(apo / "kernel_details.csv", rd, p.kernels, hw, step_id=profiler_steps)
            write_op_statistic(apo / "op_statistic.csv", rd, p.kernels)
            write_step_trace_time(apo / "step_trace_time.csv", rd, p.kernels)
            write_trace_view(apo / "trace_view.json", rd, p.kernels, ms_pid=30000 + 17 * rank, device_id=device_id,
                             group_ids=gids, gap_ns=model.schedule.wait_ns(p.stage, local), profiler_steps=profiler_steps)
            if rd.is_comm.any():
                write_communication(apo, rd, p.kernels, gids, granks)
            minddata.sample(model.pipeline, hi - lo, model.seed, rank)
            write_minddata(apo, fw, rank, model.pipeline, rd.step_start, T0_NS, hw.host_cpu_cores_per_node,
                           model.schedule.wait_ns(p.stage, local), prof_dir(rdir), device_id)
            write_memory_files(apo, rd, g, device_id)
            write_device_info(rdir, device_id, hw)
            if export != "text":
                from advisor_core.simulate.writers.dbexport import export_rank_db

                export_rank_db(rdir, rank, device_id, keep_text=export == "both")
            gdir = out / "graphs" / f"rank_{rank}"
            gdir.mkdir(parents=True, exist_ok=True)
            subs = _placeholders(w, rank, groups)
            for (stage, mode), text in ir_text.items():
                if stage != p.stage:
                    continue
                for k, v in subs.items():
                    text = text.replace(k, v)
                (gdir / IR_FILES[mode].format(COUNTERS[mode])).write_text(text, encoding="utf-8")
            files.append(rdir)
    if expected is not None:
        (out / "expected.json").write_text(json.dumps(expected, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        files.append(out / "expected.json")
    return files
