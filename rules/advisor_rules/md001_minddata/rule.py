"""MD001's rule class: its help page, options, and the check that picks the rank waiting longest for data."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules.md001_minddata.bottleneck import find_bottleneck
from advisor_rules.md001_minddata.config_only import config_only
from advisor_rules.md001_minddata.finding import finding
from advisor_rules.md001_minddata.wait import Wait, data_wait, rank_data_wait


class MinddataBottleneck(Rule):
    """The MindData (dataset) pipeline cannot keep up: the device waits for data every step.

    What
        Decides whether the device waits for input data, and what it waits for: a
        pipeline op, or the host→device transfer. Time lost per step comes from the
        step trace (legacy step gap ``iteration_interval``; or ``Free`` time), else
        the device's ``GetNext`` waits (``minddata_aicpu`` / CANN ``aicpu_mi``), else
        the host queue's get-next waits. Per step: the trace's ``ProfilerStep#n``
        windows, else MindSpore's whole-collection ``Step=0`` row of
        ``step_trace_time.csv`` divided by the steps it covers (trace windows, else
        kernel ``Step ID``s, else the host queue's one record per batch).
        ``Preparing`` (step start → first kernel) is idle time *inside* ``Free``
        (Computing + Communication(Not Overlapped) + Free tile the step), so the
        wait is ``Free``, never ``Free + Preparing``.

        Only steady steps count: leading steps longer than the later steps' median +
        max(3×MAD, 10 %) are warm-up (the queues filling, a cold cache, compilation)
        and are left out — the finding, or the reason for none, says which. And the
        device only counts as waiting for data when the queue feeding it was empty in
        at least ``empty_queue_share`` (30 %, MindInsight's criterion) of the steady
        steps: idle time with a batch at hand is not the pipeline's. In sink mode two
        queues feed the device: the **device queue** empty at GetNext while the **host
        queue** stays full means the batches wait on the host→device transfer, not on
        the pipeline (MindInsight: "host queue full, data queue empty: data transfer
        may be the bottleneck").

        The bottleneck op is the one whose **input queue is full while its output
        queue is empty** (low on average, or empty in most samples;
        ``minddata_pipeline_raw``; in non-sink mode the root op's own queue is the one
        the training loop reads), else a leaf reader whose queue and every queue after
        it stay low. MindSpore's own ``bottleneck_warning`` scans leaf → root and can
        name a neighbour (the 2.10 sample names ``Batch(id=1)`` while ``Map(id=2)``
        sits between a 95 % full and a 0 % full queue); this rule decides from the
        queues and says so when it disagrees.

    Why
        While the device waits, nothing runs: the step is as long as the slowest
        pipeline stage, not the compute. The seed case: ResNet-50 with a map op left
        at the default ``num_parallel_workers=1`` ran 90 ms steps with a 72.8 ms gap;
        12 workers brought the gap to 0.25 ms and the step to 18 ms.

    Example
        ``Map(id=2)``: input queue 95 % full, output queue 0 % (empty in 100 % of
        samples); the host queue is empty in 95 % of steps and get-next waits
        39.4 ms per step.

    Fix
        Give the slow op more workers — through ``train_dataset.num_parallel_workers``
        when that key sets its workers (MindFormers makes it every op's default and
        passes it to ``batch()``; the profile's worker count equals it), else in the
        dataset code (a display-only ``.batch(..., num_parallel_workers=N)``); never
        beyond the host's CPU cores per device, and never a value the config already
        has. Set ``python_multiprocessing: True`` when a Python op is held by the GIL
        (its threads together use about one core; or the config lists a Python
        transform; or the map burns ≥ 10× — and ``heavy_sample_us`` per sample more
        than — the CPU its listed transforms cost at typical rates, i.e. code the
        config does not list, which in a MindFormers dataset is Python: a PyFunc, a
        tokenizer; with one worker the CPU share cannot tell). ``prefetch_size`` is
        never raised: deeper queues absorb jitter, they do not make a slow op faster
        (measured on a slow ``batch(per_batch_map=…)``: no gain). For the transfer,
        no worker helps: send fewer bytes per batch, keep sink mode on, check NUMA and
        the PCIe link.

        The estimate: a CPU-bound op scales with workers until the step is bound by
        the compute or by the host's CPU — predicted step = max(compute, step · w /
        workers, job CPU per step / cores), with workers = ⌈w · step / (floor · (1 −
        headroom))⌉ (20 % headroom against jitter; floor = max(compute, CPU bound)).
        The CPU bound counts the training process's own threads (``process_info``
        less the pipeline ops: the runtime launching the step, the Python loop, on
        the CPU backend the step itself): on a 2-core host 1.4 cores busy, a second
        decode worker wins a third of the step, not half (28 ms estimated, 29 ms
        measured, where ``step / 2`` predicted 47). The bound on workers is the
        host's cores *per device*: ``cpu_processor_num`` counts the whole host, so it
        is divided by the devices sharing it — the job's ranks on that host
        (profiles, world size), and a whole server's NPUs (8) when the profiler
        names an Ascend 910-family device (192 cores / 8 = 24 on an Atlas 800T A2);
        override with settings ``host.cpu_cores_per_device`` /
        ``host.devices_per_host``.

    Config alone (``advisor lint``): a ``train_dataset`` whose map transforms cost
    at least ``heavy_sample_us`` of CPU per sample (assumed typical per-transform
    costs: JPEG decode ≈ 1.8 ms, RandomCropDecodeResize 2.2 ms, Normalize 0.4 ms …)
    with ``num_parallel_workers`` (MindSpore's default 8 when absent) too low for
    the device step estimated from the model's FLOPs (6 × weights × tokens at the
    assumed cube throughput) gets a medium finding (low when the estimate says the
    device would not wait) with a safe patch; confidence is low — profile to confirm.

    No finding is produced when the pipeline keeps up (data wait below
    ``min_wait_share_pct`` of the step), however odd one queue looks, nor when only
    a minority of the profiled ranks waits: they share the pipeline config, so the
    waiting few have a host problem (a straggler, for the cluster rules).
    """

    code = "MD001"
    name = "minddata-bottleneck"
    summary = "the dataset pipeline cannot keep up with the device"
    severity = Severity.HIGH
    requires = Requirements(
        any_of=(
            Need.table("minddata_pipeline"),
            Need.table("minddata_summary"),
            Need.table("host_queue"),
            Need.table("device_queue"),
            Need.table("step_trace"),
            Need.table("trace_events"),
            Need.config("dataset.transforms"),
            Need.config("dataset.num_parallel_workers"),
        )
    )
    tags = ("data", "minddata")
    rank_tables = ("minddata_pipeline", "minddata_summary", "minddata_cpu", "host_queue", "device_queue", "step_trace")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_wait_share_pct: float = Field(3.0, ge=0, description="data wait below this share of the step is not reported, %")
        empty_queue_share: float = Field(0.3, ge=0, le=1, description="host/device queue empty in at least this share of steps means data-bound (MindInsight's 30 %)")
        full_usage: float = Field(0.5, ge=0, le=1, description="an input queue at least this full counts as full")
        empty_usage: float = Field(0.2, ge=0, le=1, description="an output queue at most this full counts as empty")
        cores_per_device: int | None = Field(None, ge=1, description="host CPU cores available per device (default: from the profile or settings)")
        heavy_sample_us: float = Field(1000.0, ge=0, description="config alone: a map costing at least this much CPU per sample is checked, µs")
        headroom_pct: float = Field(20.0, ge=0, lt=100, description="the proposed workers leave the op this share of the compute step idle, %")

    def rank_evidence(self, rank: Any) -> None:
        """Measure the rank's data wait where the rank is read, on every core (see ``rank_data_wait``).

        It comes back with the rank (``Rank.cached(..., hand_over=True)``) for this rule's
        check and for the headroom every device-side rule asks for, so the client does not
        measure rank after rank. Nothing else to return. A rank whose measure fails is left
        to the check, which measures it again and reports the error where it always did.
        """
        try:
            rank_data_wait(rank, self.options.empty_queue_share)
        except Exception:  # noqa: BLE001 - said by the check (see the docstring)
            pass

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """The data wait per step on the finding's rank (the time a faster pipeline removes)."""
        if ctx.run is None or finding.rank not in ctx.run.ranks:
            return None
        wait = data_wait(ctx, ctx.run.rank(finding.rank), self.options.empty_queue_share)
        return None if wait.wait_us is None else Measure("data wait per step", float(wait.wait_us))

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        if ctx.run is None or not list(ctx.run):
            yield from config_only(self, ctx)
            return
        best: tuple[float, Any, Wait] | None = None
        no_evidence: list[int] = []
        keeps_up: list[tuple[int, float, float, Wait]] = []  # rank, wait µs, share %, the wait
        waiting: list[int] = []
        for rank in ctx.run:
            wait = data_wait(ctx, rank, self.options.empty_queue_share)
            if wait.wait_us is None:
                no_evidence.append(rank.rank_id)
                continue
            share = 100.0 * wait.wait_us / wait.step_us if wait.step_us else 0.0
            if share < self.options.min_wait_share_pct:
                keeps_up.append((rank.rank_id, wait.wait_us, share, wait))
                continue
            waiting.append(rank.rank_id)
            if best is None or wait.wait_us > best[0]:
                best = (wait.wait_us, rank, wait)
        if best is None:
            ctx.skip(self._quiet_reason(no_evidence, keeps_up))
            return
        _, rank, wait = best
        if len(keeps_up) > len(waiting):
            # every rank runs the same pipeline config: when most keep up, the waiting few have a host problem
            # (a slow disk, a busy CPU, a bad link) — a straggler for the cluster view, not a config to change
            names = ", ".join(map(str, sorted(waiting)[:8])) + (", …" if len(waiting) > 8 else "")
            ctx.skip(f"only rank(s) {names} of {len(waiting) + len(keeps_up)} wait for data (rank {rank.rank_id}: "
                     f"{wait.wait_us / 1000:.2f} ms per step, {wait.source}) while the others keep up with the same "
                     "pipeline config: a straggler's host, not the pipeline — the cluster rules trace it")
            return
        bott = find_bottleneck(rank, self.options.full_usage, self.options.empty_usage, wait)
        yield finding(self, ctx, rank, wait, bott)

    def _quiet_reason(self, no_evidence: list[int], keeps_up: list[tuple[int, float, float, Wait]]) -> str:
        """One sentence for all ranks: the worst wait stands for the rest (with the warm-up it left out)."""
        notes = []
        if keeps_up:
            rank, wait_us, share, wait = max(keeps_up, key=lambda t: t[1])
            who = f"rank {rank}" if len(keeps_up) == 1 else f"{len(keeps_up)} ranks"
            note = (f"the pipeline keeps up on {who} (largest data wait {wait_us:.0f} µs = {share:.1f}% of the "
                    f"step, on rank {rank}; below {self.options.min_wait_share_pct}%")
            if wait.empty_share is not None:
                note += (f"; the queue feeding the device was empty in {100 * wait.empty_share:.0f}% of the steady steps"
                         + (f", under the {100 * self.options.empty_queue_share:.0f}% that means data-bound"
                            if wait.empty_share < self.options.empty_queue_share else ""))
            if wait.warmup:
                note += f"; {wait.warmup}: those waits are start-up, not a pipeline that cannot keep up"
            notes.append(note + ")")
        if no_evidence:
            ranks = ", ".join(map(str, no_evidence[:8])) + (", …" if len(no_evidence) > 8 else "")
            notes.append(f"no step-level evidence of waiting for data on rank(s) {ranks}")
        return "; ".join(notes) or "no data-wait evidence"
