"""Verbs of the scheduler: daemon (keep every dynamic table within its target lag) and status."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from dtables.cli.app import JsonOption, ProfileOption, ProjectOption, app, console, err, failing_cleanly, \
    print_rows, project_session
from dtables.errors import DtablesError
from scheduler.vocabulary import RefreshState


def project_state_store_path(project: Path, profile: Optional[str]) -> Path:
    """The project's SQLite state store file, found without starting Spark."""
    from dtables.project.config import load_config
    from dtables.project.connect import resolve_warehouse
    from dtables.session import default_state_store, warehouse_uri

    config = load_config(project, profile)
    if config.state_store:
        return Path(config.state_store)
    return default_state_store(warehouse_uri(resolve_warehouse(project, config)))


def open_project_store(project: Path, profile: Optional[str]):  # type: ignore[no-untyped-def]
    """The project's state store if the warehouse exists, else None (nothing applied yet)."""
    from dtables.state import StateStore

    path = project_state_store_path(project, profile)
    return StateStore(path) if path.exists() else None


def _refused(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(1)


@app.command()
def daemon(
    once: bool = typer.Option(False, "--once", help="Run one tick and exit (for cron); exit 1 if a refresh failed."),
    max_parallel: int = typer.Option(2, "--max-parallel", min=1, help="Refreshes running at the same time."),
    log_level: str = typer.Option("INFO", "--log-level", help="DEBUG, INFO, WARNING or ERROR."),
    suspend_after: int = typer.Option(5, "--suspend-after", min=1,
                                      help="Suspend a table after this many consecutive failed scheduled refreshes."),
    base_period: Optional[float] = typer.Option(None, "--base-period", min=0.01,
                                                help="Seconds of the period grid (default: 48 s, halved for lags "
                                                     "under 96 s)."),
    shutdown_timeout: float = typer.Option(60.0, "--shutdown-timeout",
                                           help="Seconds running refreshes get to finish after SIGTERM / Ctrl-C."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption,
) -> None:
    """Keep every dynamic table within its target lag until SIGTERM / Ctrl-C (one daemon per warehouse)."""
    from dtables.daemon import DaemonOptions, WarehouseDaemon
    from scheduler.errors import DaemonLockedError

    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise typer.BadParameter(f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {log_level}")
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with failing_cleanly():
        state_dir = project_state_store_path(project, profile).parent
        try:
            _probe_lock(state_dir)
        except DaemonLockedError as e:
            raise _refused(str(e)) from e  # before Spark starts: a second daemon refuses at once
        session = project_session(project, profile)
        options = DaemonOptions(max_parallel=max_parallel, suspend_after=suspend_after, base_period_s=base_period,
                                shutdown_timeout_s=shutdown_timeout)
        service = WarehouseDaemon(session, options)
        try:
            service.run(once=once)
        except DaemonLockedError as e:
            raise _refused(str(e)) from e
    if once and any(r.state == RefreshState.FAILED for result in service.results for r in result.results):
        raise typer.Exit(1)


def _probe_lock(state_dir: Path) -> None:
    """Raise DaemonLockedError naming the holder if a daemon runs (the real lock is taken by the daemon itself)."""
    from scheduler.daemon import DaemonLock

    lock = DaemonLock(state_dir)
    lock.acquire()
    lock.release()


STATUS_COLUMNS = ["table", "target lag", "period s", "state", "data timestamp", "lag s", "mean s", "max s",
                  "within lag", "last refresh", "failures", "suspended because"]


@app.command()
def status(
    window: float = typer.Option(60.0, "--window", help="Minutes of history the lag metrics cover."),
    base_period: Optional[float] = typer.Option(None, "--base-period", help="As given to the daemon, if it was."),
    project: Path = ProjectOption, profile: Optional[str] = ProfileOption, as_json: bool = JsonOption,
) -> None:
    """Per dynamic table: target lag, period, state, data timestamp, current/mean/max lag, share of time within the
    target lag, last refresh, consecutive failures and suspension reason; and whether a daemon runs."""
    from dtables.daemon.status import daemon_holder, table_status

    with failing_cleanly():
        store = open_project_store(project, profile)
        if store is None:
            raise DtablesError(f"no warehouse state at {project_state_store_path(project, profile)}: "
                               "run `dtables apply` first")
        pid = daemon_holder(store.path.parent)
        rows = table_status(store, window=dt.timedelta(minutes=window), base_period_s=base_period)
    if as_json:
        print(json.dumps({"daemon": {"running": pid is not None, "pid": pid},
                          "tables": [r.as_dict() for r in rows]}, indent=2, default=str))
        return
    console.print(f"daemon: running (pid {pid})" if pid is not None else "daemon: not running")

    def show(value: Optional[float], fmt: str = "{:.1f}") -> Optional[str]:
        return None if value is None else fmt.format(value)

    print_rows(STATUS_COLUMNS, [[
        r.name, r.target_lag, show(r.period_s, "{:g}"), r.state, r.data_timestamp, show(r.current_lag_s),
        show(r.mean_lag_s), show(r.max_lag_s), show(r.within_target_share, "{:.0%}"),
        f"{r.last_refresh_state} {r.last_refresh_action or ''}".strip() if r.last_refresh_state else None,
        r.consecutive_failures, r.suspended_reason] for r in rows], False,
        title=f"dynamic tables (lag over the last {window:g} min)")


# -- what `dtables dag` shows about each table's refreshes (used by project_cmds.dag) ----------------------------------
def dag_node_notes(project: Path, profile: Optional[str], limit: int = 80) -> dict[str, list[str]]:
    """Per dynamic table of the warehouse: its last refresh state and, when suspended, why. Empty when nothing
    was applied yet (the state store does not exist), so ``dag`` still works on a fresh checkout without Spark."""
    from dtables.daemon.failures import FailureStore
    from dtables.daemon.schedule import USER_SUSPENDED, last_finished
    from dtables.dynamic import definition as defs
    from scheduler.vocabulary import SchedulingState

    store = open_project_store(project, profile)
    if store is None:
        return {}
    reasons = FailureStore(store).suspension_reasons()
    notes: dict[str, list[str]] = {}
    for d in defs.load_all(store):
        last = last_finished(store, d.name)
        lines = [f"last {last.state} {last.action or ''}".strip() if last else "never refreshed"]
        if d.state == SchedulingState.SUSPENDED:
            reason = reasons.get(d.name, USER_SUSPENDED)
            lines.append("SUSPENDED: " + (reason if len(reason) <= limit else reason[: limit - 3] + "..."))
        notes[d.name] = lines
    return notes


def render_dag_png(graph, label, output: Path) -> str:  # type: ignore[no-untyped-def]
    """Draw ``graph`` to ``output``: with Graphviz's ``dot`` when it is on PATH, else networkx + matplotlib; a
    clear error naming what to install when neither is there. Returns which renderer drew it."""
    import shutil
    import subprocess

    dot = shutil.which("dot")
    if dot is not None:
        done = subprocess.run([dot, "-Tpng", "-o", str(output)], input=graph.to_dot(label=label), text=True,
                              capture_output=True)
        if done.returncode != 0:
            raise DtablesError(f"graphviz dot failed: {done.stderr.strip()}")
        return "graphviz"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise DtablesError("--format png needs Graphviz's `dot` program on PATH (apt-get install graphviz) or "
                           "matplotlib (pip install 'dtables[png]')") from e
    import networkx as nx

    drawn = nx.DiGraph()
    for layer, names in enumerate(graph.generations()):
        for name in names:
            drawn.add_node(name, layer=layer)
    drawn.add_edges_from((up, name) for name in graph.topological_order() for up in graph.upstreams(name))
    pos = nx.multipartite_layout(drawn, subset_key="layer")
    width = 3.5 * max(1, len(graph.generations()))
    height = 1.6 * max([len(g) for g in graph.generations()] or [1])
    fig, ax = plt.subplots(figsize=(max(6.0, width), max(3.0, height)))
    for up, down in drawn.edges:  # arrows stop short of the label boxes drawn on top
        ax.annotate("", xy=pos[down], xytext=pos[up],
                    arrowprops={"arrowstyle": "-|>", "shrinkA": 55, "shrinkB": 55, "color": "gray"})
    for name, (x, y) in pos.items():
        ax.text(x, y, f"{name}\n{label(name)}", ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "black"})
    xs, ys = [x for x, _ in pos.values()], [y for _, y in pos.values()]
    ax.set_xlim(min(xs) - 0.35, max(xs) + 0.35)
    ax.set_ylim(min(ys) - 0.5, max(ys) + 0.5)
    ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)
    return "matplotlib"
