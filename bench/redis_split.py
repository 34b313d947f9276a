"""Where a run's Redis commands come from: each command, split by the script that called it or by its key.

``INFO commandstats`` says how many ``ZADD`` a run sent, not whether the take step, the commit or a heartbeat sent
them. :class:`CommandSplit` listens to Redis's ``MONITOR`` for the duration of a ``with`` block (it slows Redis
down: an analysis, not a figure to compare with runs without it) and files every command under a *source*:

- a script call (``EVALSHA``/``EVAL``) and every command the script runs (``MONITOR`` shows them right after the
  call, from client ``lua``) under ``script <path>`` — named from its SHA1 among the scripts the repository declares
  (:func:`messaging.scripts.declared_scripts`, after importing every module that declares one);
- any other command under ``<COMMAND> <key shape>``: its first argument with the variable parts replaced (a domain's
  hash tag by ``{d}``, ids and numbers by ``*``), so ``HSET workers:{workers}:w1`` and ``:w2`` are one source.

:meth:`CommandSplit.table` gives, per source, the calls per page, the commands per page (a script's inner ones
included) and the inner commands by name. ``python -m bench.broad --split`` prints it for every fleet side.
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
import re
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import redis as redis_py

from messaging.scripts import declared_scripts

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("messaging", "frontier", "master", "spiders", "manager", "deploy")
FIXED_TAGS = {"{seeds}", "{workers}", "{notify}", "{requests}"}
STOP = "crawlfleet-bench-split-stop"
_ARG = re.compile(rb'"((?:[^"\\]|\\.)*)"')
_WORD = re.compile(r"[a-z_\-]{1,24}")


def script_names() -> dict[str, str]:
    """SHA1 -> the script's path in the repository, for every script a module of the packages declares."""
    for package in PACKAGES:
        root = REPO / package
        for module in pkgutil.walk_packages([str(root)], prefix=f"{package}."):
            path = root.joinpath(*module.name.split(".")[1:])
            source = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
            if source.exists() and "lua_script(" in source.read_text(errors="replace"):
                importlib.import_module(module.name)
    names = {}
    for script in declared_scripts():
        name = str(script.path.relative_to(REPO)) if script.path.is_relative_to(REPO) else script.path.name
        names[hashlib.sha1(script.source.encode()).hexdigest()] = name
    return names


def key_shape(key: str) -> str:
    """A key with its variable parts replaced: ``worker:{workers}:w-17`` -> ``worker:{workers}:*``."""
    parts = []
    for part in key.split(":"):
        if part.startswith("{") and part.endswith("}"):
            parts.append(part if part in FIXED_TAGS else "{d}")
        else:
            parts.append(part if _WORD.fullmatch(part) else "*")
    return ":".join(parts)


class CommandSplit:
    """Every command Redis runs while the block lasts, filed by source (see the module docstring)."""

    def __init__(self, url: str, names: dict[str, str] | None = None) -> None:
        self.url = url
        self.names = script_names() if names is None else names
        self.calls: Counter[str] = Counter()  # source -> calls (a script's calls; a command's count)
        self.inner: dict[str, Counter[str]] = defaultdict(Counter)  # source -> command -> count, inner included
        self._client = redis_py.Redis.from_url(url)
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="redis-split", daemon=True)
        self._script = ""  # the script call the lines from client "lua" belong to

    def __enter__(self) -> CommandSplit:
        self._conn = self._client.connection_pool.get_connection()
        self._conn.send_command("MONITOR")
        self._conn.read_response()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._thread.is_alive() and self._conn is None:
            return  # stopped already
        self._client.echo(STOP)
        self._thread.join(timeout=120)
        self._conn.disconnect()
        self._conn = None
        self._client.close()

    def _run(self) -> None:
        while self.file(self._conn.read_response(disable_decoding=True)):
            pass

    def file(self, line: bytes) -> bool:
        """File one ``MONITOR`` line under its source; False once the stop mark is seen."""
        head, _, rest = line.partition(b"] ")
        args = [match.group(1) for _, match in zip(range(3), _ARG.finditer(rest), strict=False)]
        if not args:
            return True
        command = args[0].decode(errors="replace").lower()
        if head.endswith(b" lua"):
            self.inner[self._script][command] += 1
            return True
        if command == "echo" and len(args) > 1 and args[1] == STOP.encode():
            return False
        if command in ("evalsha", "eval") and len(args) > 1:
            sha = args[1].decode() if command == "evalsha" else hashlib.sha1(_unescape(args[1])).hexdigest()
            source = self._script = "script " + self.names.get(sha, sha[:12])
        else:
            key = args[1].decode(errors="replace") if len(args) > 1 else ""
            source = f"{command.upper()} {key_shape(key)}".rstrip()
        self.calls[source] += 1
        self.inner[source][command] += 1
        return True

    def table(self, pages: int, top: int = 30) -> list[dict[str, Any]]:
        """The ``top`` sources by commands per page: calls and commands per page, the commands by name."""
        pages = max(pages, 1)
        rows: list[dict[str, Any]] = []
        for source, commands in self.inner.items():
            rows.append({"source": source, "calls_per_page": round(self.calls[source] / pages, 3),
                         "commands_per_page": round(sum(commands.values()) / pages, 3),
                         "commands": {name: round(n / pages, 3) for name, n in commands.most_common()}})
        rows.sort(key=lambda row: -float(row["commands_per_page"]))
        return rows[:top]


def _unescape(raw: bytes) -> bytes:
    """A quoted MONITOR argument back to its bytes (``\\n``, ``\\"``, ``\\xNN``)."""
    out = bytearray()
    i = 0
    while i < len(raw):
        char = raw[i:i + 1]
        if char == b"\\" and i + 1 < len(raw):
            escaped = raw[i + 1:i + 2]
            if escaped == b"x":
                out += bytes([int(raw[i + 2:i + 4], 16)])
                i += 4
                continue
            out += {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"a": b"\a", b"b": b"\b"}.get(escaped, escaped)
            i += 2
            continue
        out += char
        i += 1
    return bytes(out)


def report(rows: list[dict[str, Any]], total_per_page: float) -> list[str]:
    lines = [f"  commands per page by source (MONITOR; {total_per_page} in all):",
             f"  {'source':<58} {'calls/page':>10} {'cmds/page':>10}  inner"]
    for row in rows:
        inner = ", ".join(f"{name} {n}" for name, n in list(row["commands"].items())[:8])
        lines.append(f"  {row['source']:<58} {row['calls_per_page']:>10} {row['commands_per_page']:>10}  {inner}")
    return lines
