"""benchutils.arguments as Mila's perf package calls it: get_arguments(parser, show=…)."""

from __future__ import annotations

import argparse


def add_bench_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every Mila benchmark takes on top of its own."""
    parser.add_argument("--repeat", type=int, default=100, help="number of timed observations")
    parser.add_argument("--number", type=int, default=10, help="batches per observation")
    parser.add_argument("--report", type=str, default=None, help="file the report is appended to")
    return parser


def get_arguments(parser: argparse.ArgumentParser | None = None, subparser: bool = False, show: bool = False):
    """Parse the command line with the bench options added; show=True prints them, one per line,
    right-aligned names between two rules of dashes (the format of Mila's stdout example)."""
    parser = parser or argparse.ArgumentParser("benchmark")
    if subparser:
        add_bench_args(parser.add_subparsers(dest="bench").add_parser("bench"))
    else:
        add_bench_args(parser)
    args = parser.parse_args()
    if show:
        print("-" * 80)
        for key, value in vars(args).items():
            print(f"{key:>30}: {value}")
        print("-" * 80)
    return args
