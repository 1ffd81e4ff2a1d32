"""The ``torchdoctor`` command line: check, fix, rule, run, server, probe, docs."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

# Sub-commands implemented in their own packages, loaded only when used.
_DELEGATED = {
    "run": (
        "torchdoctor.run.command",
        "Run a training script for a few steps and report the pitfalls measured.",
    ),
    "server": ("torchdoctor.lsp.server", "Run the language server (stdio, or --tcp HOST:PORT)."),
    "probe": ("torchdoctor.cli.probe", "Read live tensor facts from a running Jupyter kernel."),
    "docs": ("torchdoctor.cli.docsite", "Open the documentation (of one rule, or the index)."),
    "generate-docs": (
        "torchdoctor.cli.docsite",
        "Regenerate the rule pages under docs/ (--check: fail if stale).",
    ),
}


def locale_from_env(explicit: str | None = None) -> str:
    return explicit or os.environ.get("TORCHDOCTOR_LOCALE") or "en"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdoctor",
        description="A PyTorch-aware linter: finds the pitfalls that waste GPU memory, slow "
        "training or corrupt results.",
    )
    parser.add_argument("--version", action="version", version=f"torchdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="Check files, folders and notebooks.")
    _check_arguments(check)
    fix = sub.add_parser("fix", help="Shorthand for `check --fix`.")
    _check_arguments(fix)

    rule = sub.add_parser("rule", help="Explain a rule (`torchdoctor rule TDR105`).")
    rule.add_argument("code", nargs="?", help="A rule code (TDR105), name, or TorchFix code.")
    rule.add_argument("--all", action="store_true", help="List every rule.")
    rule.add_argument("--locale", help="en or zh (default: $TORCHDOCTOR_LOCALE, else en).")
    rule.add_argument("--output-format", choices=("text", "json"), default="text")

    for name, (_module, help_text) in _DELEGATED.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _check_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        default=None,
        metavar="PATH",
        help="Files or folders to check (default: the current folder). '-' reads stdin.",
    )
    # Repeated, they add up (`--select TDR1 --select TDR6` is `--select TDR1,TDR6`), as in Ruff.
    p.add_argument(
        "--select",
        type=_codes,
        action="extend",
        help="Rules to check instead of the defaults (codes or prefixes).",
    )
    p.add_argument(
        "--extend-select",
        type=_codes,
        action="extend",
        default=None,
        help="Rules to add to the selection.",
    )
    p.add_argument("--ignore", type=_codes, action="extend", default=None, help="Rules to skip.")
    p.add_argument("--fix", action="store_true", default=None, help="Apply safe fixes.")
    p.add_argument(
        "--unsafe-fixes",
        action="store_true",
        default=None,
        help="Also apply (and show) unsafe fixes.",
    )
    p.add_argument("--diff", action="store_true", help="Print the fixes as a diff; change no file.")
    p.add_argument("--output-format", choices=("text", "json", "sarif", "github"), default="text")
    p.add_argument("--statistics", action="store_true", help="Count findings per rule.")
    p.add_argument("--no-cache", action="store_true", help="Do not read or write the cache.")
    p.add_argument("--config", metavar="FILE", help="Use this configuration file for every path.")
    p.add_argument(
        "--locale", help="Language of messages: en or zh (default: $TORCHDOCTOR_LOCALE)."
    )
    p.add_argument(
        "--target-version",
        metavar="VERSION",
        help="The torch version rules assume, e.g. 2.5 (default: `target-version`, else the "
        "installed torch).",
    )
    p.add_argument("--stdin-filename", help="The path to report for code read from stdin.")
    p.add_argument(
        "--jobs", "-j", type=int, default=None, help="Processes to use (default: CPU count)."
    )
    p.add_argument("--exit-zero", action="store_true", help="Exit 0 even when findings remain.")


def _codes(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; output cut short by a closed pipe (``| head``) ends it quietly."""
    try:
        code = _main(argv)
        if not sys.stdout.closed:  # the language server's transport closes it at `exit`
            sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader is gone (`| head` has what it wanted): exit 0 and say nothing, as Ruff
        # does. Point stdout at /dev/null so that the flush at exit does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_CLEAN


def _main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in _DELEGATED:
        import importlib

        module_name = _DELEGATED[args_list[0]][0]
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            print(f"torchdoctor: `{args_list[0]}` is not available: {exc}", file=sys.stderr)
            return EXIT_ERROR
        entry = getattr(module, "main_" + args_list[0].replace("-", "_"), None) or module.main
        return int(entry(args_list[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        if args.command in ("check", "fix"):
            from .check import run_check

            if args.command == "fix":
                args.fix = True
            return run_check(args)
        if args.command == "rule":
            from .check import run_rule

            return run_rule(args)
    except KeyboardInterrupt:
        return EXIT_ERROR
    parser.print_help()
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
