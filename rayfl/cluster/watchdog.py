"""Watchdog of a local Ray session started by rayfl: tear it down if the driver dies.

``RaySession`` starts this script (its own process group, so a signal to the
driver's group does not reach it) right after starting a local Ray session. It
polls the driver's pid and, every few seconds, notes the process tree below
the session's processes recorded at start (GCS, raylet, then the agents and
workers the raylet starts: their command lines no longer name the session once
they set their process titles, and GCS and raylet exit with the driver while
the agents do not). When the driver is gone without having stopped the
watchdog (a SIGKILL, an OOM kill), it terminates every noted process still
alive, their descendants and any process whose command line names the session
directory. A driver that exits normally stops the watchdog first
(``RaySession.close``).

Linux only (reads ``/proc``); standard library only, so it starts in ~50 ms.
Processes are identified by (pid, start time), never by pid alone, so a
recycled pid is never signalled.

Usage (internal): ``python -m rayfl.cluster.watchdog '<json>'`` with
``{"driver": [pid, start], "processes": [[pid, start], ...], "session_dir": str}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

__all__ = ["descendants", "main", "note_tree", "start_time", "teardown"]

POLL_S = 0.5
REFRESH_S = 2.0
GRACE_S = 3.0


def start_time(pid: int) -> int | None:
    """Return the start time of ``pid`` (clock ticks since boot), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie is gone for our purpose
        return None
    return int(fields[19])


def _alive(pid: int, start: int) -> bool:
    return start_time(pid) == start


def _parents() -> dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            out[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return out


def descendants(pids: set[int]) -> set[int]:
    """Return ``pids`` and every process below them in the process tree."""
    parents = _parents()
    found = set(pids)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def _naming(text: str) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                out.add(int(entry.name))
    return out


def note_tree(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """Return the live ``processes`` plus every process now below them."""
    alive = {pid for pid, start in processes if _alive(pid, start)}
    out = set()
    for pid in descendants(alive):
        start = start_time(pid)
        if start is not None:
            out.add((pid, start))
    return out


def teardown(processes: list[tuple[int, int]], session_dir: str) -> set[int]:
    """Terminate the session's processes (SIGTERM, then SIGKILL); return the pids."""
    roots = {pid for pid, start in processes if _alive(pid, start)}
    targets = descendants(roots)
    if session_dir:
        targets |= descendants(_naming(session_dir))
    targets.discard(os.getpid())
    starts = {pid: start_time(pid) for pid in targets}
    for pid in targets:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        if not any(s is not None and _alive(p, s) for p, s in starts.items()):
            break
        time.sleep(0.1)
    for pid, start in starts.items():
        if start is not None and _alive(pid, start):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return targets


def main(argv: list[str]) -> int:
    """Watch the driver; tear the session down when it disappears."""
    spec = json.loads(argv[0])
    driver_pid, driver_start = spec["driver"]
    known = {(int(p), int(s)) for p, s in spec["processes"]}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the driver
    noted = -REFRESH_S
    while _alive(driver_pid, driver_start):
        if time.monotonic() - noted >= REFRESH_S:
            known = note_tree(known) or known
            noted = time.monotonic()
        time.sleep(POLL_S)
    teardown(sorted(known), spec.get("session_dir", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
