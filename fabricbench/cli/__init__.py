"""The `fabricbench` command: a click group whose subcommands load only when invoked.

    fabricbench --help            (answers without importing torch, CUDA or any subcommand)
    fabricbench sweep --gpus 0-7

Adding a command is one module in this package plus one row in COMMANDS (cli/commands.py). Every error a user can cause
ends as one line `Error: ...` and exit status 2; nothing already written to --out is lost.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from fabricbench.cli.types import Size

from fabricbench import files, masking, procs
from fabricbench.cli import hints, pipes
from fabricbench.cluster import env as cluster_env
from fabricbench.errors import EngineUnavailable, FabricbenchError, UsageError
from fabricbench.exitcodes import Exit
from fabricbench.cli.commands import COMMANDS  # the table, one row a command (read here and by hints)


def register(name: str, target: str, help_text: str) -> None:
    assert name not in COMMANDS, f"duplicate command {name!r}"
    COMMANDS[name] = (target, help_text)


class LazyGroup(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # A bare `fabricbench` asks what there is: the help, readable, on stdout, exit 0 (click 8.2 would
        # raise it as a usage error, which main() prints as one squashed `Error:` line).
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(Exit.OK)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _, attr = COMMANDS[name][0].partition(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help from the table, so `--help` imports no subcommand module.
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in COMMANDS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fabricbench")
@click.option("--max-input-size", "max_input_size", type=Size(), default=None,
              help=f"Largest input file any reader accepts (e.g. 16G; default 4G, or {files.ENV_MAX}).")
def cli(max_input_size: str | None) -> None:
    """fabricbench: measure NCCL collectives over your GPUs and fabrics, and what they do to training."""
    if max_input_size is not None:
        try:
            files.set_max_input_bytes(max_input_size)
        except UsageError as e:
            raise UsageError(f"--max-input-size {e}") from None


_SECRETS: list[str] = []  # the secret values of the fabric specs on this command line (masking.secret_values)


def shown(message: object) -> str:
    """Any text this command prints about its input, as it may be shown: one line, and no secret value
    of a fabric spec given on the command line (masking.redact: the one place)."""
    message = "; ".join(ln.strip() for ln in str(message).splitlines() if ln.strip())  # one line, always
    return masking.redact(message, _SECRETS)


def warn(message: object) -> None:
    """A warning on stderr, one line, through `shown` (no secret value of a fabric spec)."""
    click.echo(f"warning: {shown(message)}", err=True)


def fail(message: str) -> "NoReturn":  # noqa: F821
    """Print one line and exit 2: for what the user got wrong."""
    click.echo(f"Error: {shown(message)}", err=True)
    sys.exit(Exit.USAGE)


def main(argv: list[str] | None = None) -> None:
    with pipes.sinking():  # a reader that stops reading (`| head`) is no failure: the command's own status
        _main(argv)


def _main(argv: list[str] | None) -> None:
    procs.install()  # SIGTERM ends a run as Ctrl-C does (children killed, results kept), exit 143
    _SECRETS[:] = masking.secret_values(sys.argv[1:] if argv is None else argv)
    os.environ.update(cluster_env.from_slurm(os.environ))  # under srun: torchrun's RANK, WORLD_SIZE, ...
    try:
        rv = cli.main(args=argv, prog_name="fabricbench", standalone_mode=False)
    except click.exceptions.NoSuchOption as e:
        fail(e.format_message())
    except click.UsageError as e:  # click's own parse errors and the option types': one line, no usage block
        fail(e.format_message())
    except click.ClickException as e:  # click's file errors (an unreadable click.File/Path argument)
        fail(e.format_message())
    except click.exceptions.Abort as e:  # click turns Ctrl-C (and SIGTERM's Terminated) into Abort
        cause = e.__cause__
        if isinstance(cause, KeyboardInterrupt):
            click.echo(procs.message(cause), err=True)
            sys.exit(procs.exit_status(cause))
        click.echo("Aborted.", err=True)
        sys.exit(Exit.INTERRUPTED)
    except (UsageError, EngineUnavailable) as e:
        fail(hints.to_flags(e, _command(argv)))
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (procs.Terminated)
        click.echo(procs.message(e), err=True)
        sys.exit(procs.exit_status(e))
    except files.OutputError as e:  # an output could not be written (full disk, read-only): what was written
        # is kept; exit 2 as for any path given that cannot be used (1 means a measured failure: in qualify, drain)
        click.echo(f"Error: {shown(e)}", err=True)
        sys.exit(Exit.USAGE)
    except FabricbenchError as e:  # a measurement failed (CUDA, NCCL, timeout, check): not the user's input
        kind = f"{e.label}: " if e.label else ""  # plain words ("NCCL error"), never a class name
        click.echo(f"Error: {kind}{shown(e)}", err=True)
        sys.exit(Exit.FAILED)
    if isinstance(rv, int) and rv:
        sys.exit(rv)


def _command(argv: list[str] | None) -> str | None:
    """The subcommand named on the command line (the first word that is one), for hints.to_flags."""
    return next((a for a in (sys.argv[1:] if argv is None else argv) if a in COMMANDS), None)
