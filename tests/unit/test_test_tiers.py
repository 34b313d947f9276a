"""The test tiers as README's Development section defines them: ``integration`` talks to real local services,
``e2e`` runs whole components as processes. A test under ``tests/integration`` that starts a process of its own (the
``procs`` and ``fleet`` fixtures, a CLI, a Scrapy crawl, a child interpreter) belongs in ``tests/e2e``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
PROCESS_FIXTURES = re.compile(r"^def \w+\([^)]*\b(procs|procs_module|fleet|fleet_cluster|fleet_module)\b", re.M)
CHILD_PROCESSES = re.compile(r"subprocess\.(run|Popen|call|check_call|check_output)\(|procs\.start\(")
TIER_MARK = re.compile(r"pytestmark = .*pytest\.mark\.(unit|integration|e2e)\b")


def _modules(tier: str) -> list[Path]:
    return sorted((TESTS / tier).glob("test_*.py"))


@pytest.mark.parametrize("tier", ["unit", "integration", "e2e"])
def test_every_test_module_carries_its_directory_s_mark(tier: str) -> None:
    marks = {path.name: TIER_MARK.search(path.read_text()) for path in _modules(tier)}
    wrong = [name for name, mark in marks.items() if mark is None or mark.group(1) != tier]
    assert not wrong, f"tests/{tier} modules whose pytestmark is not {tier}: {wrong}"


def test_no_integration_test_starts_a_process_of_its_own() -> None:
    starting = [path.name for path in _modules("integration")
                if PROCESS_FIXTURES.search(path.read_text()) or CHILD_PROCESSES.search(path.read_text())]
    assert not starting, f"start processes, so belong in tests/e2e: {starting}"
