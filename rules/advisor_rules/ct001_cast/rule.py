"""CT001's rule class: its help page, options, and the check that joins the chains of every pipeline stage."""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import Field

from advisor_core.engine import Finding, Measure, Need, Requirements, Rule, RuleContext, RuleOptions, Severity
from advisor_rules._common import (
    ASSUMED_HBM_GBPS,
    ConversionTime,
    conversion_evidence,
    triage_finding,
    fill_stages_without_ir,
    one_f_one_b_step_saving,
    pipeline_micro_batches,
    stage_evidence,
)
from advisor_rules._common import CONVERSION_LAUNCH_US
from advisor_rules.ct001_cast.chains import Chain, detect
from advisor_rules.ct001_cast.config_only import config_only
from advisor_rules.ct001_cast.estimate import chain_cost
from advisor_rules.ct001_cast.finding import finding
from advisor_rules.ct001_cast.measure import cast_measure


class CastExcess(Rule):
    """Cast operators that undo each other, cast to the same type, or fight the framework's casts.

    What
        Reads the final front-end graph and the backend kernel graph and finds
        (1) Cast chains that come back to where they started — *lossy* when the
        middle type is less precise (``fp32→fp16→fp32`` silently drops precision
        and costs two kernels), *lossless* otherwise; (2) casts whose input and
        output dtype are equal; (3) a cast the user (or AMP) wrote immediately
        undone by a backend-inserted cast (``is_backend_cast: Bool(1)``) because the
        next kernel does not support that dtype; (4) cast pairs that a mixed-precision
        setting forces in every layer (``rotary_dtype: float32`` with a 16-bit
        ``compute_dtype`` casts q and k up and back down around the rotary embedding).
        Backward casts are attributed to their forward op by ``forward_unique_id``,
        not by scope (reused cells carry another instance's scope). Dtypes are the
        kernels' (the device type line of ``graph_build``): a backend cast after a
        kernel without float16 is ``Float16→Float16`` on the host line but converts
        ``Float32→Float16`` — not a no-op.

        Who wrote the casts is read from each node's ``# In file`` call stack: a
        frame in AMP's ``rewritten_network/*Opt_*.py`` or its ``amp_cast`` (level O1,
        and O2/O3 by rewrite), ``F.mixed_precision_cast`` in ``mindspore/train/amp.py``
        (the O2/O3 output cast), or no statement that casts at all (the compiler's
        casts for a cell converted by O2/O3 or ``Cell.to_float``: the stack ends at the
        statement using the tensor) is **AMP**; an innermost statement that casts
        (``self.cast``, ``ops.cast``, ``.astype``) is the **model code**;
        ``is_backend_cast: Bool(1)`` is the **backend**.

        Time per step: with a profile the chains are joined to their Cast kernels
        (``kernel_details`` durations summed over the profiled steps ÷ steps). For a
        config-forced pair the ops *between* the casts (forward and backward, e.g.
        ``RotaryMul``/``RotaryMulGrad``) run on 32-bit data; they are memory-bound, so in
        the compute dtype their time beyond the fixed per-launch cost (the shortest
        kernel of the profile) shrinks with their bytes (½ when every float operand is
        32-bit) — that is saved too. With pipeline parallel, one rank per stage is
        measured with its own stage's IR, and the per-stage savings become step time as
        1F1B does: the slowest stage runs every micro batch on the critical path, the
        others one, so equal stages give the per-rank saving × (m + pp − 1)/m.
        Without a profile, each Cast node is one kernel per step costing the launch
        floor ``launch_us`` plus its bytes read and written at ``hbm_gbps``: in
        msprof-analyze's real kernel sample (910-class) the 47 Cast kernels moving
        under 1 MB take 1.54–3.22 µs whatever their size (mean 2.07 µs), the large
        ones that floor plus their bytes at ~1290 GB/s; 2.0 µs is also what every
        kernel of the simulator pays. From the config alone (``advisor lint``, no IR) a float32
        ``rotary_dtype``/``softmax_compute_type`` is reported without a ranked saving:
        it is usually a deliberate precision setting, and its rough memory-bound cost is
        only given in the message. While the
        device waits for data every step (MD001's measure) the step is the data
        pipeline's period and the saving shows nothing: it is reported as 0, with the
        figure once data keeps up in the message and ``saving_if_data_keeps_up``.

    Why
        Each Cast reads and writes the whole tensor: pure memory traffic with no
        compute. The seed: "If there are too many conversion operators (TransData
        and Cast) … delete the redundant Cast and TransData operators". A lossy
        round trip is also an accuracy bug.

    Example
        ``h = self.cast(x, ms.float16)`` followed by ``h = self.cast(h, ms.float32)``
        (``case_cast.py:20–21``): the fp32 input loses its low mantissa bits and two
        Cast kernels run for nothing — MindSpore's optimizer keeps this pair because
        removing it would change the result.

    Fix
        For config-driven casts, a patch sets the key to the compute dtype (unsafe:
        precision changes). For model-code casts, the finding gives the source line
        to delete (display only). For AMP's casts the fix is the AMP configuration,
        never the line: a backend without a float16 kernel for the op → keep that cell
        in float32 (``amp.custom_mixed_precision(net, black_list=amp.get_black_list() +
        [nn.Dense])``, or a white list without it for O1) or a lower ``level`` of
        ``amp.build_train_network``; a black-list cell (BatchNorm, LayerNorm) cast
        around → ``keep_batchnorm_fp32=False``; round trips between float16 ops →
        level O2 or a white list covering the ops between them; a network converted
        twice → ``level="O0"`` after ``auto_mixed_precision``.

    Kernel-only triage
        With a profile and no IR dump, the rule cannot name a redundant Cast, but it
        says how much they cost: when Cast and TransData kernels together take at
        least ``triage_min_share_pct`` of the step time (and Casts alone at
        least half of it), a low-severity finding gives the Casts' share, ms per step, launches,
        the cells and layers they run in, the dtype pairs (``Input/Output Data
        Types``) and which IR dump to take (``save_graphs`` level 1: the final
        front-end graph ``NN_validate_*.ir`` and ``graph_build_*.ir``). No saving is
        claimed.
    """

    code = "CT001"
    name = "cast-excess"
    summary = "redundant or fighting Cast operators"
    severity = Severity.MEDIUM
    requires = Requirements(
        any_of=(
            Need.ir("frontend"),
            Need.ir("backend"),
            Need.table("kernels", ("name", "type", "duration_us")),
            Need.config("model.rotary_dtype"),
            Need.config("model.softmax_compute_type"),
        )
    )
    tags = ("compute", "precision", "cast")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        min_share_pct: float = Field(0.0, ge=0, description="report chains costing at least this share of the step, %")
        hbm_gbps: float = Field(ASSUMED_HBM_GBPS, gt=0, description="bandwidth assumed for Cast time without a profile, GB/s")
        launch_us: float = Field(CONVERSION_LAUNCH_US, ge=0, description="time of one Cast kernel beyond its bytes "
                                 "(launch floor) without a profile, µs")
        triage_min_share_pct: float = Field(5.0, ge=0, description="profile without IR: report when Cast + TransData "
                                            "take at least this share of the step time, %")

    def rank_evidence(self, rank: Any) -> dict[str, ConversionTime | None]:
        """Cast and TransData time of the rank, for the kernel-only triage."""
        return conversion_evidence(rank)

    def measure(self, ctx: RuleContext, finding: Finding) -> Measure | None:
        """The Cast kernel time of the finding's cells (and, for a config-forced pair, of the ops between)."""
        return cast_measure(ctx, finding)

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        units = stage_evidence(ctx, launches=True)
        if not any(u.dumps is not None for u in units):
            found = False
            if ctx.config is not None:
                for f in config_only(self, ctx):
                    found = True
                    yield f
            triage = triage_finding(self, ctx, "Cast", self.options.triage_min_share_pct) if ctx.has_profile else None
            if triage is not None:
                found = True
                yield triage
            if not found:
                ctx.skip("no IR dump: Cast chains are read from the graph (kernel time alone cannot tell a redundant Cast); "
                         "the config forces no extra casts")
            return
        first = next((u.rank for u in units if u.rank is not None), None)
        step_us = ctx.step_time_us(first) if first is not None else None

        chains: dict[str, Chain] = {}
        for unit in units:
            if unit.dumps is None:
                continue
            for key, chain in detect(ctx, unit.dumps).items():
                chain_cost(chain, unit, self.options.hbm_gbps, self.options.launch_us)
                main = chains.get(key)
                if main is None:
                    chains[key] = chain
                    continue
                main.nodes.extend(chain.nodes)
                main.inner.extend(chain.inner)
                main.layers |= chain.layers
                main.dtypes = main.dtypes or chain.dtypes
                main.cost.update(chain.cost)
                main.inner_cost.update(chain.inner_cost)
                main.measured = main.measured or chain.measured
        if not chains:
            ctx.skip("no redundant, no-op or fighting Cast chain in the IR")
            return
        busy = {u.stage: u.busy_us or 0.0 for u in units}
        micro = pipeline_micro_batches(ctx, units)
        for chain in chains.values():
            fill_stages_without_ir(ctx, chain.cost, units)
            saving = (None if not chain.cost else one_f_one_b_step_saving(chain.cost, busy, micro) if len(chain.cost) > 1
                      else sum(chain.cost.values()))
            f = finding(self, ctx, chain, saving, step_us, len(units), micro)
            if f is not None:
                yield f
