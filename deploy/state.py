"""The local run's state file: which services run, on which ports, with which PIDs.

Readers go through :func:`messaging.settings.read_state` (connection defaults); writers come through here so that
concurrent ``crawlfleet`` commands never interleave a read-modify-write (an ``flock`` on a lock file beside it, and
an atomic rename).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from messaging.settings import read_state, state_path


@contextmanager
def locked(run_dir: Path, name: str = "state") -> Iterator[None]:
    """An exclusive ``flock`` on ``<run_dir>/<name>.lock``: one writer of the state file (or, with another name, one
    ``crawlfleet up``/``down``) at a time per run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def modify_state(run_dir: str | os.PathLike[str], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``change`` to the state under the lock and write it back atomically; returns the new state."""
    run_dir = Path(run_dir)
    with locked(run_dir):
        state = read_state(run_dir)
        change(state)
        path = state_path(run_dir)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
        os.replace(tmp, path)
        return state


def update_state(run_dir: str | os.PathLike[str], **fields: Any) -> dict[str, Any]:
    """Set top-level fields of the state (``None`` removes a field)."""

    def change(state: dict[str, Any]) -> None:
        for key, value in fields.items():
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value

    return modify_state(run_dir, change)
