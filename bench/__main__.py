"""``python -m bench`` (``make bench``): every benchmark at its quick size, one after another, with a summary.

Each benchmark is its own command (``python -m bench.<name> --help``) that starts the services it needs and prints
its figures; this runner passes ``--json`` and collects each one's last line. Figures on a shared machine are noisy:
every benchmark that compares compares side by side in one run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import click

QUICK_RUNS: dict[str, list[str]] = {
    "intake": [],
    "dispatch": [],
    "dispatch_sim": [],
    "throttle": [],
    "robots_claims": ["--hosts", "500"],
    "politeness": [],
    "bloom": ["--urls", "1000000"],
    "bloom_groups": [],
    "extraction": [],
    "crawl": ["--pages", "3000", "--profile"],
    "broad": ["--hosts", "10,1000", "--pages", "2000"],
    "importance": [],
    "scaling": [],
    "recrawl": [],
    "render": ["--renders", "600"],
    "frontier": ["--domains", "1000,100000", "--urls", "200000", "--seconds", "5"],
    "k8s_sizing": ["--pages", "100"],
    "k8s_drain": ["--pages", "300", "--runs", "1", "--after", "100"],
}


@click.command()
@click.option("--only", multiple=True, type=click.Choice(sorted(QUICK_RUNS)), help="Run only these (repeatable).")
def main(only: tuple[str, ...]) -> None:
    """Run the benchmarks and print a JSON summary line at the end."""
    summary: dict[str, object] = {}
    failed = []
    for name, args in QUICK_RUNS.items():
        if only and name not in only:
            continue
        argv = [sys.executable, "-m", f"bench.{name}", *args, "--json"]
        click.echo(f"\n=== {' '.join(argv[1:])}", err=True)
        started = time.monotonic()
        result = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
        sys.stdout.write(result.stdout)
        lines = [line for line in result.stdout.splitlines() if line.strip()]
        if result.returncode != 0 or not lines:
            failed.append(name)
            summary[name] = {"error": f"exit {result.returncode}"}
            continue
        try:
            summary[name] = json.loads(lines[-1])
        except ValueError:
            summary[name] = {"error": "no JSON line"}
            failed.append(name)
        click.echo(f"=== {name}: {time.monotonic() - started:.0f}s", err=True)
    click.echo(json.dumps(summary))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
