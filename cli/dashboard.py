"""`dashboard`: ZenML's dashboard on 127.0.0.1, past its onboarding survey; or stop it."""

from __future__ import annotations

import argparse

from cli.command import Command
from cli.launch import open_store
from ragbench.runs.dashboard import DEFAULT_PORT
from ragbench.runs.names import BENCHMARK_PIPELINE


class DashboardCommand(Command):
    name = "dashboard"
    help = "start ZenML's dashboard on 127.0.0.1 and print where the newest run's report is; or stop it"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--port", type=int, default=DEFAULT_PORT, help=f"the port on 127.0.0.1 (default {DEFAULT_PORT})"
        )
        parser.add_argument("--stop", action="store_true", help="stop it")

    def run(self, args: argparse.Namespace) -> int:
        return dashboard_command(args.port, args.stop)


def dashboard_command(port: int, stop: bool) -> int:
    """Start ZenML's dashboard on 127.0.0.1, past its onboarding survey, and say where a run's
    report is; or stop it."""
    from ragbench.runs import dashboard
    from steps.store import ZenMLStore

    if stop:
        dashboard.stop()
        print("stopped the ZenML dashboard; this machine's runs use the local store directly again")
        return 0
    open_store()
    url = dashboard.start(port)
    print(f"ZenML dashboard: {url}  (bound to {dashboard.HOST}; stop it with `run.py dashboard --stop`)")
    newest = next(iter(ZenMLStore().runs(BENCHMARK_PIPELINE, size=1)), None)
    if newest is None:
        print("no benchmark run yet: runs appear there as they happen")
        return 0
    print(
        f"newest benchmark run: {dashboard.run_url(url, str(newest.id))}\n"
        "its report: click the `results` artifact in the graph, then Visualization > report.html"
    )
    return 0
