"""docs/architecture.md's claims, each checked where a test can check it: the floors are the import contract's,
every module, class, function, file and Lua script it names exists (with the parameters it writes), the frontier
client's table is the client's, Lua lives where it says, and the time-based classes it names take their clock.

Elsewhere: the Redis key table (tests/unit/test_architecture_doc.py), every CRAWLFLEET_* declared
(tests/unit/test_settings.py), one Lua loader (tests/unit/test_lua_files.py), the floors themselves
(`make lint`: import-linter)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
import time
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
FLOORS = ("messaging", "frontier", "master", "spiders", "manager", "deploy", "bench")
# classes the doc names that are not the project's own: where to find them
OUTSIDE = {"Scheduler": "scrapy.core.scheduler.Scheduler"}


@cache
def doc() -> str:
    """The doc without its generated key table (checked by test_architecture_doc.py)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    return re.sub(r"<!-- redis-keys:start -->.*<!-- redis-keys:end -->", "", text, flags=re.S)


def quoted(text: str) -> list[str]:
    """The doc's code spans (`...`), in order."""
    return re.findall(r"`([^`\n]+)`", text)


def resolve(dotted: str) -> Any:
    """The object a dotted name of the project names (a module, then attributes of it)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ModuleNotFoundError(dotted)


@cache
def class_modules() -> dict[str, list[str]]:
    """Class name -> the product modules that define a class of that name."""
    found: dict[str, list[str]] = {}
    for floor in FLOORS:
        for path in (ROOT / floor).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                    found.setdefault(node.name, []).append(module)
    return found


def members(cls: type) -> set[str]:
    """What an instance of ``cls`` has: its class's attributes and what its methods assign to ``self``."""
    names = set(dir(cls))
    for klass in cls.__mro__:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # builtins, classes made at run time
            continue
        names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Store)}
    return names


def class_named(name: str) -> list[type]:
    if name in OUTSIDE:
        return [resolve(OUTSIDE[name])]
    return [getattr(importlib.import_module(module), name) for module in class_modules().get(name, [])]


def named_object(span: str) -> tuple[str, Any] | None:
    """The project's object a code span names (``module.name``, ``Class.member``, with or without a parameter
    list), None for a span that names none (a key, a setting, a shell command), or raises when it is gone."""
    name = span.partition("(")[0]
    if re.fullmatch(r"[a-z_]\w*(\.\w+)+", name) and name.split(".")[0] in FLOORS:
        return name, resolve(name)
    if re.fullmatch(r"[A-Z]\w*\.\w+", name):
        owner, _, member = name.partition(".")
        classes = class_named(owner)
        assert classes, f"{span}: no class {owner} in the project"
        assert any(member in members(cls) for cls in classes), f"{span}: {owner} has no {member}"
        return name, next(getattr(cls, member, None) for cls in classes)
    return None


def test_every_module_class_and_function_the_doc_names_exists() -> None:
    gone = []
    checked = 0
    for span in set(quoted(doc())):
        try:
            checked += named_object(span) is not None
        except (AssertionError, AttributeError, ModuleNotFoundError) as exc:
            gone.append(f"{span}: {exc}")
    assert gone == [], "docs/architecture.md names what is not there:\n" + "\n".join(sorted(gone))
    assert checked > 80  # the doc names the code it describes: this test reads it


def test_the_parameters_the_doc_writes_are_the_functions() -> None:
    wrong = []
    for span in set(quoted(doc())):
        written = re.fullmatch(r"([\w.]+)\(([^()]*)\)", span)
        if written is None or not written.group(2) or (found := named_object(span)) is None or found[1] is None:
            continue
        doc_params = [part.strip().lstrip("*").partition("=")[0] for part in written.group(2).split(",")]
        real = [p for p in inspect.signature(found[1]).parameters if p not in ("self", "cls")]
        if doc_params != real[: len(doc_params)]:
            wrong.append(f"{span}: the code has ({', '.join(real)})")
    assert wrong == [], "\n".join(sorted(wrong))


def test_every_file_and_lua_script_the_doc_names_exists() -> None:
    spans = set(quoted(doc()))
    paths = {span for span in spans if "/" in span and re.fullmatch(r"[\w.-]+(/[\w.-]+)*/?", span)}
    missing = sorted(path for path in paths if not (ROOT / path).exists())
    lua_files = {path.name for floor in FLOORS for path in (ROOT / floor).rglob("*.lua")}
    scripts = {span for span in spans if re.fullmatch(r"\w+\.lua", span)}
    assert len(paths) > 20 and len(scripts) > 20
    assert missing == [] and scripts - lua_files == set(), (missing, scripts - lua_files)


def test_the_floors_are_the_import_contracts_layers() -> None:
    block = re.search(r"## The floors\n.*?```\n(.*?)```", doc(), re.S)
    assert block, "the floors' picture is gone"
    pictured = [line.split("/")[0] for line in block.group(1).splitlines() if re.match(r"\w+/", line)]
    contract_text = re.search(r"\(`\[tool\.importlinter\]`: (.*?)\)", doc(), re.S)
    assert contract_text, "the doc no longer says which contract checks the floors"
    written = quoted(contract_text.group(1))
    importlinter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in importlinter["contracts"] if c["type"] == "layers"]
    assert written == layers
    floor_of = {package: n for n, layer in enumerate(layers) for package in layer.split(" | ")}
    assert [floor_of[package] for package in pictured] == sorted(floor_of[package] for package in pictured)
    assert sorted(pictured) == sorted(floor_of) == sorted(importlinter["root_packages"]) == sorted(FLOORS)


def frontier_table() -> list[list[str]]:
    table = re.search(r"\| operation \| `FrontierClient` \|.*?\n\|---.*?\n((?:\|.*\n)+)", doc())
    assert table, "the frontier client's table is gone"
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in table.group(1).splitlines()]


def test_the_frontier_clients_table_is_the_clients() -> None:
    import frontier.client
    from frontier.client import FrontierClient, lua
    from messaging.scripts import LuaScript

    client = members(FrontierClient)
    package = {name for module in (frontier.client, *(importlib.import_module(f"frontier.client.{m}") for m in
               ("client", "ready", "leases", "take", "parking", "robots", "reader"))) for name in vars(module)}
    declared = [script for script in vars(lua).values() if isinstance(script, LuaScript)]
    scripts = {script.path.name for script in declared}
    snippets = {snippet.name for script in declared for snippet in script.snippets}
    named: set[str] = set()
    for operation, methods, lua_cell in frontier_table():
        for span in quoted(methods):
            if re.fullmatch(r"[a-z_]\w*", span) and not span.endswith(".lua"):
                assert span in client or span in package, f"{operation}: FrontierClient has no {span}"
        outside = set(re.findall(r"the master's `(\w+\.lua)`", methods))  # another floor's script, named in passing
        named |= {span for span in quoted(lua_cell) if span.endswith(".lua")} - outside
    assert named - scripts - snippets == set(), "scripts of the table that frontier.client.lua does not declare"
    assert scripts - named == set(), "scripts frontier.client.lua declares that the table leaves out"


def test_lua_lives_where_the_doc_says() -> None:
    rule = re.search(r"- Lua lives in `\.lua` files beside the module that runs it \((.*?)\);", doc(), re.S)
    assert rule, "the Lua rule is gone"
    places = {span.rstrip("/") for span in quoted(rule.group(1))}
    found = {str(path.parent.relative_to(ROOT)) for floor in FLOORS for path in (ROOT / floor).rglob("*.lua")}
    assert found == places


# The doc: "time-based logic takes an injectable clock"; the worker's builder hands its one clock "to the feed
# (send slots), the block listener and the scheduler's send gate". These take it, and read no clock of their own.
TIMED = {
    "spiders.worker.scheduler.FleetScheduler": "clock",
    "spiders.worker.feed.TaskFeed": "clock",
    "spiders.worker.take.FeedTake": "clock",
    "spiders.worker.gate.SendGate": "clock",
    "frontier.blocks.BlockListener": "clock",
    "spiders.worker.heartbeat.Heartbeat": "clock",
    "spiders.worker.crawls.CrawlCatalog": "clock",
    "frontier.robots_cache.RobotsCache": "clock",
    "frontier.robots_cache.Claims": "clock",
}
CLOCK_READS = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter"), ("datetime", "now"),
               ("datetime", "utcnow"), ("date", "today")}


def clock_reads(cls: type) -> list[str]:
    """Calls in the class's own code that read a clock directly (``time.monotonic()``; a default value that names
    one without calling it is the injection's default, not a read)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return [ast.unparse(node) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and (node.func.value.id, node.func.attr) in CLOCK_READS]


@pytest.mark.parametrize("dotted", sorted(TIMED))
def test_time_based_classes_take_an_injectable_clock(dotted: str) -> None:
    cls = resolve(dotted)
    assert TIMED[dotted] in inspect.signature(cls).parameters, f"{dotted} takes no {TIMED[dotted]}"
    assert clock_reads(cls) == [], f"{dotted} reads a clock of its own"


def test_the_worker_builder_hands_out_one_clock() -> None:
    from messaging.clock import Clock
    from spiders.worker.build import build_worker

    assert inspect.signature(build_worker).parameters["clock"].annotation in (Clock, "Clock")


def test_a_direct_clock_read_is_found() -> None:
    class Reads:
        def late(self) -> float:
            return time.monotonic() + 1

    class Injected:
        def __init__(self, clock: Any = time.monotonic) -> None:
            self.clock = clock

    assert clock_reads(Reads) == ["time.monotonic()"] and clock_reads(Injected) == []
