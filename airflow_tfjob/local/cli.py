"""`tfjob-local serve`: run the local cluster in the foreground until SIGINT or SIGTERM.

Prints exactly one line, `ready <url> <kubeconfig-path>`, once the API server accepts requests, so that
scripts and tests can wait for it; everything else goes to the log (stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from airflow_tfjob.local.cluster import ClusterRuntime
from airflow_tfjob.local.faults import FaultPlan


def _parse_gpus(value: str) -> list[str]:
    return [g.strip() for g in value.split(",") if g.strip()]


def _parse_faults(value: str) -> FaultPlan:
    try:
        return FaultPlan.parse(value)
    except ValueError as exc:  # argparse shows an ArgumentTypeError's own message
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfjob-local", description="Embedded local cluster for TFJobs.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the API server, TFJob controller and process runner")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    serve.add_argument("--kubeconfig", type=Path, default=None, help="where to write the kubeconfig")
    serve.add_argument("--gpus", type=_parse_gpus, default=[], help="comma-separated GPU device ids, e.g. 0,1")
    serve.add_argument("--workdir", type=Path, default=None, help="directory for the cluster's files")
    serve.add_argument(
        "--faults", type=_parse_faults, default=None, metavar="SPEC",
        help="inject API faults, e.g. 'seed=7,rate=0.05,kinds=throttle+unavailable+server_error+lost_reply"
             "+stream_cut,verbs=GET+LIST,latency=0.01,retry_after=1,stream_cut_after=0.5+2' "
             "(see docs/local-cluster.md)",
    )
    serve.add_argument("--log-level", default="WARNING", help="logging level for stderr (default WARNING)")
    return parser


async def serve(args: argparse.Namespace) -> int:
    runtime = ClusterRuntime(
        gpus=args.gpus, workdir=args.workdir, host=args.host, port=args.port, kubeconfig_path=args.kubeconfig,
        faults=args.faults,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await runtime.start()
        sys.stdout.write(f"ready {url} {runtime.kubeconfig_path}\n")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await runtime.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return asyncio.run(serve(args))
    return 2


if __name__ == "__main__":
    sys.exit(main())
