"""LC004: the parallel layout does not multiply to the device count."""

from __future__ import annotations

from typing import Iterable

from pydantic import Field

from advisor_core.engine import Evidence, Finding, Need, Requirements, Rule, RuleContext, RuleOptions, Severity


class DeviceCount(Rule):
    """``data_parallel × model_parallel × pipeline_stage`` (× ``context_parallel``) differs from the device count.

    What
        Multiplies the parallel sizes of ``parallel_config`` and compares them with
        the number of devices the job runs on: ``--devices N`` of ``advisor lint``,
        ``[tool.advisor.host] devices``, ``parallel.device_num`` in the config, or the
        world size of a baseline profile (``--profile``). Without any of these it
        cannot judge and says so.

    Why
        MindSpore refuses to start (or, with some layouts, silently leaves devices
        idle) when the layout does not cover the devices exactly; finding it in CI
        is cheaper than finding it on a reserved cluster.

    Example
        ``data_parallel: 8, model_parallel: 2, pipeline_stage: 1`` on 8 devices.

    Fix
        Make the product equal the device count (usually by adjusting
        ``data_parallel``); the patch is unsafe because it changes the global batch.
    """

    code = "LC004"
    name = "parallel-device-count"
    summary = "parallel layout does not multiply to the device count"
    severity = Severity.HIGH
    requires = Requirements(any_of=(Need.config("parallel_config.data_parallel"),))
    tags = ("lint", "parallel", "config")
    fix_availability = "sometimes"

    class Options(RuleOptions):
        devices: int | None = Field(None, ge=1, description="device count (overridden by advisor lint --devices)")

    def check(self, ctx: RuleContext) -> Iterable[Finding]:
        cfg = ctx.config
        assert cfg is not None
        devices, source = self._devices(ctx)
        if devices is None:
            ctx.skip("device count unknown (give advisor lint --devices N, [tool.advisor.host] devices, or a baseline profile)")
            return
        product = cfg.device_count
        if product == devices:
            ctx.skip(f"dp × mp × pp = {product} = {devices} devices ({source})")
            return
        mp, pp = cfg.model_parallel, cfg.pipeline_stages
        patches = []
        if devices % (mp * pp) == 0:
            dp = devices // (mp * pp)
            p = ctx.config_patch(f"set data_parallel to {dp}", [("parallel_config.data_parallel", dp)],
                                 description="covers every device; the global batch changes with data_parallel")
            if p:
                patches.append(p)
        loc = ctx.config_location("parallel_config.data_parallel")
        yield Finding(
            code=self.code,
            rule=self.name,
            title=f"parallel layout covers {product} devices, the job has {devices}",
            message=(f"data_parallel {cfg.data_parallel} × model_parallel {mp} × pipeline_stage {pp} = {product}, but the job runs on "
                     f"{devices} devices ({source})."),
            severity=Severity.HIGH,
            confidence=0.95,
            evidence=[Evidence(name="layout_product", value=product), Evidence(name="devices", value=devices, source=source)],
            locations=[loc] if loc else [],
            patches=patches,
            tags=list(self.tags),
        )

    def _devices(self, ctx: RuleContext) -> tuple[int | None, str]:
        if self.options.devices:
            return self.options.devices, "--devices"
        host = dict(ctx.settings.get("host") or {})
        if host.get("devices"):
            return int(host["devices"]), "settings host.devices"
        cfg = ctx.config
        n = cfg.int_of("parallel.device_num") if cfg is not None else None
        if n:
            return n, "parallel.device_num"
        if ctx.run is not None and ctx.run.ranks:
            for r in ctx.run:
                if r.parallel is not None and r.parallel.world_size:
                    return r.parallel.world_size, "baseline profile world size"
            return len(ctx.run.ranks), "ranks in the baseline profile"
        return None, "unknown"
