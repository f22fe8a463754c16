"""The ``advisor`` command line: thin — parse flags, call the layers, map outcomes to exit codes.

Exit codes (every command): 0 success / nothing at or above ``--fail-on``;
1 findings at or above ``--fail-on``; 2 usage or input error. Results go to
stdout; diagnostics and progress to stderr. No Python traceback is shown unless
``--debug`` is given (or ``ADVISOR_DEBUG=1``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from advisor_core import __version__

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


class AdvisorGroup(click.Group):
    """Click group that turns unexpected exceptions into one clean line (exit 2)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("advisor: interrupted", err=True)
            raise SystemExit(130) from None
        except Exception as exc:  # noqa: BLE001 - the point is to catch everything
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(
                f"advisor: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
                err=True,
            )
            raise SystemExit(EXIT_ERROR) from None


@click.group(cls=AdvisorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
@click.option("--debug", is_flag=True, envvar="ADVISOR_DEBUG", help="Show Python tracebacks for internal errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Performance advisor for MindSpore training on Huawei Ascend.

    Point it at what a training run left behind — profiler output directories,
    IR graph dumps, the training YAML — and it tells you, ranked by the time you
    would win, what is slow and why, with the config patch that fixes it.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _register() -> None:
    from advisor_core.cli import compare_cmd, config_cmds, demo_cmd, engine_cmds, inspect_cmd, simulate_cmd

    cli.add_command(inspect_cmd.inspect_command)
    cli.add_command(engine_cmds.analyze_command)
    cli.add_command(config_cmds.lint_command)
    cli.add_command(config_cmds.fix_command)
    cli.add_command(compare_cmd.compare_command)
    cli.add_command(engine_cmds.rules_command)
    cli.add_command(engine_cmds.explain_command)
    cli.add_command(engine_cmds.plugins_command)
    cli.add_command(simulate_cmd.simulate_command)
    cli.add_command(demo_cmd.demo_command)


_register()


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point."""
    try:
        cli.main(args=argv, prog_name="advisor", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except click.exceptions.Abort:
        click.echo("advisor: aborted", err=True)
        return EXIT_ERROR
    except click.UsageError as exc:
        # one line: what is wrong and where to look (click's own three-line usage block is for --help)
        cmd = exc.ctx.command_path if exc.ctx is not None else "advisor"
        click.echo(f"{cmd}: error: {exc.format_message()} (see '{cmd} --help')", err=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_ERROR)
    return EXIT_OK


def run_main() -> None:
    """The ``advisor`` console script and ``python -m advisor_core``: :func:`main`, then the process ends
    without the interpreter's teardown (see :mod:`advisor_core.cli.process_exit`)."""
    import gc

    from advisor_core.cli.process_exit import arm, exit_after_handlers

    # A run allocates millions of objects that live to its end (the imported stack, the op views' frames):
    # at the default thresholds the collector walks them ~240 times, 0.1 s of a 1 M-row analysis, to find
    # next to no cycles. One short-lived process: collect rarely (as mypy does).
    gc.set_threshold(200_000, 30, 30)
    arm()
    exit_after_handlers(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
