"""Processes and ports: spawn, wait with a bound, stop by PID.

Everything that starts a process (local services, the demo web, tests, benchmarks) goes through these helpers, so
every child is stopped the same way: SIGTERM to its process group, a bounded wait, then SIGKILL.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from messaging.processes import pid_alive as pid_alive  # the fleet's tools import it from here

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """A bounded wait ran out; the message says what was awaited."""


def wait_for(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 0.05,
    alive: Callable[[], str | None] | None = None,
) -> T:
    """Poll ``condition`` until it returns a truthy value, at most ``timeout`` seconds.

    ``alive`` may return a reason to give up early (e.g. the awaited process exited).
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # the condition probes a service that may not answer yet
            last_error = exc
        if alive is not None:
            reason = alive()
            if reason:
                raise WaitTimeout(f"gave up waiting for {what}: {reason}")
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that is free now (the caller binds it soon; ports are not reserved)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        return sock.connect_ex((host, port)) == 0


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a new listener could bind the port now (nothing listens and nothing holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
        return True


def spawn(
    argv: Sequence[str],
    log_path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a child in its own process group (so that stopping it also stops what it started)."""
    log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            list(argv),
            stdout=log if log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        if log is not None:
            log.close()


def stop_pid(pid: int, timeout: float = 10.0, sig: int = signal.SIGTERM) -> bool:
    """Stop a process (and its group when it leads one): ``sig``, a bounded wait, then SIGKILL.

    Returns True when the process was running.
    """
    return bool(stop_pids([pid], timeout, sig))


def stop_pids(pids: Sequence[int], timeout: float = 10.0, sig: int = signal.SIGTERM) -> list[int]:
    """Stop processes together, as :func:`stop_pid` stops one: ``sig`` to each, one bounded wait for all of them,
    then SIGKILL to those still running. Their shutdowns overlap: the wait is the slowest one's, not the sum.

    Returns the pids that were running.
    """
    running = [pid for pid in pids if pid_alive(pid)]
    for pid in running:
        _signal(pid, sig)

    def all_exited() -> bool:
        return not any(pid_alive(pid) for pid in running)

    try:
        wait_for(all_exited, timeout, f"pids {running} to exit")
    except WaitTimeout:
        for pid in running:
            if pid_alive(pid):
                _signal(pid, signal.SIGKILL)
        wait_for(all_exited, 10.0, f"pids {running} to exit after SIGKILL")
    return running


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def kill_hard(pid: int) -> None:
    """SIGKILL, as a crash would (fault tests); waits until the process is gone."""
    _signal(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), 10.0, f"pid {pid} to die")


def log_tail(path: str | os.PathLike[str], offset: int = 0, lines: int = 15) -> str:
    """The last ``lines`` lines of a child's log from byte ``offset`` on (what it wrote since then), for errors."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
