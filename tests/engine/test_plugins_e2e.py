"""Plugins through one door: discovery, listing, running, selection, blocking, isolation, autoload off."""

from __future__ import annotations

import json

import pytest

from engine_support import make_dist, run_cli, write_profile

GOOD_RULE = '''
from advisor_core.engine import Finding, Need, Requirements, Rule, Severity, hookimpl

class KernelCount(Rule):
    """Counts kernels.

    What
        Counts kernels.
    Why
        Test.
    Example
        n/a
    Fix
        n/a
    """
    code = "TST001"
    name = "kernel-count"
    summary = "counts kernels"
    severity = Severity.LOW
    requires = Requirements(any_of=(Need.table("kernels"),))

    def check(self, ctx):
        n = sum(len(r.table("kernels", ["name"])) for r in ctx.run)
        yield Finding(code=self.code, rule=self.name, title=f"{n} kernels", message="counted", severity=Severity.LOW,
                      saving_us=1.0, step_time_us=100.0)

@hookimpl
def advisor_register_rules():
    return [KernelCount]
'''


def test_example_plugin_is_discovered_and_listed():
    proc = run_cli("plugins", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["aicpu"]["distribution"] == "advisor-aicpu"
    assert rows["aicpu"]["version"] == "0.1.0"
    assert rows["aicpu"]["status"] == "loaded"
    assert rows["aicpu"]["hooks"] == ["advisor_register_rules"]
    assert rows["builtin-rules"]["distribution"] == "ascend-advisor" and rows["builtin-rules"]["builtin"]
    assert rows["advisor_core.report.builtin"]["hooks"] == ["advisor_register_formats"]


def test_rules_lists_plugin_rule_with_its_plugin():
    proc = run_cli("rules", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    rules = {r["code"]: r for r in json.loads(proc.stdout)}
    assert rules["AIC001"]["plugin"] == "aicpu" and rules["AIC001"]["distribution"] == "advisor-aicpu"
    assert rules["AIC001"]["needs"] == "table kernels (accelerator_core, duration_us)"


def test_explain_prints_the_help_page():
    proc = run_cli("explain", "AIC001")
    assert proc.returncode == 0
    assert proc.stdout.startswith("AIC001 aicpu-share — AI_CPU operators take a large share of device time")
    for section in ("What", "Why", "Example", "Fix"):
        assert f"\n{section}\n" in proc.stdout
    assert "min_share_pct = 1.0" in proc.stdout


def test_plugin_rule_runs_and_is_selectable(tmp_path):
    prof = write_profile(tmp_path, aicpu_us=400.0)
    proc = run_cli("analyze", str(prof), "--format", "json", "--select", "AIC001")
    assert proc.returncode == 1, proc.stderr  # a finding at or above the default fail-on (low)
    report = json.loads(proc.stdout)
    (f,) = report["findings"]
    assert f["code"] == "AIC001" and f["plugin"] == "aicpu"
    assert f["severity"] == "high"  # 400 µs of a 2.2 ms step ≈ 18 %
    assert f["saving_us"] == pytest.approx(400.0 * 0.9)
    assert {r["code"] for r in report["tool"]["rules"]} >= {"AIC001"}
    # --ignore removes it
    proc = run_cli("analyze", str(prof), "--format", "json", "--ignore", "AIC001")
    assert "AIC001" not in {f["code"] for f in json.loads(proc.stdout)["findings"]}


def test_plugin_can_be_blocked(tmp_path):
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", "-p", "no:aicpu")
    report = json.loads(proc.stdout)
    assert "AIC001" not in {r["code"] for r in report["tool"]["rules"]}
    proc = run_cli("plugins", "--format", "json", "-p", "no:aicpu")
    assert {r["name"]: r["status"] for r in json.loads(proc.stdout)}["aicpu"] == "blocked"
    proc = run_cli("analyze", str(prof), "--select", "AIC001", "-p", "no:aicpu")
    assert proc.returncode == 2 and "'AIC001' matches no registered rule" in proc.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_autoload_off_runs_only_builtins(tmp_path, how):
    prof = write_profile(tmp_path)
    args = ["analyze", str(prof), "--format", "json"]
    env = {}
    if how == "flag":
        args.append("--no-plugins")
    else:
        env["ADVISOR_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = run_cli(*args, env=env)
    report = json.loads(proc.stdout)
    assert {r["plugin"] for r in report["tool"]["rules"]} <= {"builtin-rules"}
    # -p still loads a named plugin with autoload off
    proc = run_cli(*args, "-p", "aicpu", env=env)
    assert "AIC001" in {r["code"] for r in json.loads(proc.stdout)["tool"]["rules"]}


def test_third_party_plugin_via_entry_point(tmp_path, fake_site):
    make_dist(fake_site, "advisor-good", "1.2.3", {"good": "advisor_good"}, {"advisor_good.py": GOOD_RULE})
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", "--select", "TST001", site=fake_site)
    report = json.loads(proc.stdout)
    assert [f["title"] for f in report["findings"]] == ["18 kernels"]
    rows = {r["name"]: r for r in json.loads(run_cli("plugins", "--format", "json", site=fake_site).stdout)}
    assert rows["good"]["version"] == "1.2.3" and rows["good"]["status"] == "loaded"


@pytest.mark.parametrize(
    "module, expect",
    [
        ("import does_not_exist_anywhere\n", "failed to import: ModuleNotFoundError: No module named 'does_not_exist_anywhere'"),
        (
            "from advisor_core.engine import hookimpl\n@hookimpl\ndef advisor_register_rule():\n    return []\n",
            "invalid plugin: unknown hook 'advisor_register_rule'",
        ),
        (
            "from advisor_core.engine import hookimpl\n@hookimpl\ndef advisor_register_rules():\n    raise RuntimeError('boom')\n",
            "advisor_register_rules raised RuntimeError: boom",
        ),
        (
            "from advisor_core.engine import hookimpl\nclass NotARule: pass\n@hookimpl\ndef advisor_register_rules():\n    return [NotARule]\n",
            "is not a Rule subclass",
        ),
    ],
    ids=["import-error", "misspelt-hook", "hook-raises", "not-a-rule"],
)
def test_broken_plugin_is_isolated_and_reported(tmp_path, fake_site, module, expect):
    make_dist(fake_site, "advisor-broken", "0.0.1", {"broken": "advisor_broken"}, {"advisor_broken.py": module})
    make_dist(fake_site, "advisor-good", "1.2.3", {"good": "advisor_good"}, {"advisor_good.py": GOOD_RULE})
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", site=fake_site)
    assert proc.returncode == 2, proc.stderr  # the exit code shows the failure
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    codes = {f["code"] for f in report["findings"]}
    assert {"TST001", "AIC001"} <= codes  # the others ran
    (err,) = [e for e in report["errors"] if e["plugin"] == "broken"]
    assert err["version"] == "0.0.1" and expect in err["message"]
    assert "broken (advisor-broken 0.0.1)" in proc.stderr
    listing = {r["name"]: r for r in json.loads(run_cli("plugins", "--format", "json", site=fake_site).stdout)}
    assert listing["broken"]["status"] == "failed" and expect in listing["broken"]["error"]


def test_rule_that_raises_is_an_error_not_a_crash(tmp_path, fake_site):
    raising = GOOD_RULE.replace("n = sum(", "raise ValueError('bad table'); n = sum(")
    make_dist(fake_site, "advisor-raising", "2.0", {"raising": "advisor_raising"}, {"advisor_raising.py": raising})
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", site=fake_site)
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    (err,) = report["errors"]
    assert err == {
        "kind": "rule",
        "message": "rule TST001 (kernel-count) raised ValueError: bad table",
        "plugin": "raising",
        "version": "2.0",
        "code": "TST001",
    }
    assert "AIC001" in {f["code"] for f in report["findings"]}
    assert report["summary"]["rules_failed"] == 1


def test_duplicate_rule_code_is_refused(tmp_path, fake_site):
    clash = GOOD_RULE.replace('"TST001"', '"AIC001"')
    make_dist(fake_site, "advisor-clash", "0.1", {"clash": "advisor_clash"}, {"advisor_clash.py": clash})
    proc = run_cli("rules", "--format", "json", site=fake_site)
    assert proc.returncode == 2
    assert "rule code AIC001 is already registered by aicpu (advisor-aicpu 0.1.0)" in proc.stderr


def test_rules_are_never_imported_from_the_analysed_directory(tmp_path):
    prof = write_profile(tmp_path)
    marker = tmp_path / "imported"
    for name in ("advisor_rules.py", "advisor_aicpu.py", "conftest.py", "plugin.py"):
        (prof / name).write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    proc = run_cli("analyze", str(prof), "--format", "json", cwd=prof)
    assert proc.returncode in (0, 1), proc.stderr
    assert not marker.exists()


CONFIGURE_PLUGIN = """
from advisor_core.engine import Finding, Need, Requirements, Rule, Severity, hookimpl

SEEN = {}


@hookimpl
def advisor_configure(settings):
    SEEN.update(settings.get("plugins", {}).get("cfgplug", {}) or {"called": True})
    settings["fail_on"] = "mutated"  # a copy: must not leak into the run


class Seen(Rule):
    '''Reports what advisor_configure saw.'''

    code = "TST002"
    name = "configure-seen"
    summary = "what advisor_configure saw"
    severity = Severity.LOW
    requires = Requirements(any_of=(Need.table("kernels"),))

    def check(self, ctx):
        yield Finding(code=self.code, rule=self.name, title=f"configured {sorted(SEEN.items())}", message="",
                      severity=Severity.LOW)


@hookimpl
def advisor_register_rules():
    return [Seen]
"""


def test_configure_hook_is_called_before_rules_with_the_settings(tmp_path, fake_site):
    make_dist(fake_site, "advisor-cfgplug", "0.1", {"cfgplug": "advisor_cfgplug"}, {"advisor_cfgplug.py": CONFIGURE_PLUGIN})
    (tmp_path / "advisor.toml").write_text('[plugins.cfgplug]\ncolour = "blue"\n')
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", "--select", "TST002", "--fail-on", "never",
                   site=fake_site, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [f["title"] for f in json.loads(proc.stdout)["findings"]] == ["configured [('colour', 'blue')]"]


def test_options_for_a_rule_that_is_not_loaded_are_a_warning(tmp_path):
    (tmp_path / "advisor.toml").write_text("[rules.AIC001]\nmin_share_pct = 2.0\n")
    prof = write_profile(tmp_path)
    proc = run_cli("analyze", str(prof), "--format", "json", "--no-plugins", "--fail-on", "never", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "options given for rule AIC001, which is not loaded" in proc.stderr
