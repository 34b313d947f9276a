"""Tune the extractor's block-selection parameters on half of the sites; report on the other half.

    python -m bench.extraction_tune [--data DIR] [--rounds 2] [--swap] [--wcxb-weight W] [--only a,b] [--scan]

Sites (hosts, not pages) are split in two by a stable hash (``bench.extraction.site_fold``), so no site's
template is seen on both sides: the held-out figure estimates the score on sites the extractor was never tuned
on, which is what the project is measured on. Each page is parsed and linearised once; a coordinate search then
tries a few values per parameter, keeping a change only when the mean F1 over the headline groups improves on
the tuning sites. ``--swap`` tunes on the other half instead, to see how stable the choice is; ``--wcxb-weight``
counts wcxb/en (furthest from its goal) more in the objective; ``--scan`` tries each value alone against the
defaults and prints its F1 change per group on both halves.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from bench.extraction import DEFAULT_DATA, HEADLINE_GROUPS, Page, load_pages, site_fold
from bench.extraction_score import aggregate, score_page
from spiders.encoding import decode_html
from spiders.extraction import Params, prepare, select_and_join

SEARCH_SPACE = {
    "window": [1, 2, 3, 4],
    "cost_ratio": [0.08, 0.12, 0.15, 0.2, 0.25, 0.3],
    "min_cost": [4.0, 8.0, 16.0, 30.0],
    "link_density_max": [0.3, 0.4, 0.45, 0.55, 0.65],
    "furniture_weight": [0.0, 0.05, 0.1, 0.25, 0.5],
    "anchor_reach": [4, 8, 12, 20],
    "anchor_share": [0.02, 0.05, 0.1, 0.2, 0.4],
    "coverage": [0.6, 0.7, 0.8, 0.9],
    "link_penalty": [0.0, 0.25, 0.5, 1.0],
    "region_link_chars": [10, 20, 40, 1000],
    "repeat_levels": [0, 4, 6, 10, 14],
    "spread_share": [0.0, 0.35, 0.5, 0.65],
    "dedupe_chars": [0, 30, 100],
    "article_link_max": [0.6, 0.8, 0.95, 2.0],
    "end_ratio": [0.0, 0.35, 0.5, 0.7],
    "end_tiny": [10, 15, 20],
    "section_title_words": [0, 1, 2, 3],
    "min_line_words": [0.0, 4.0, 5.0, 6.0],
    "comments_share": [0.1, 0.25, 0.5],
    # added by rounds 5-7 (a few values around each default)
    "end_drop": [0.15, 0.2, 0.25, 0.3, 0.35],
    "furniture_max_share": [0.8, 0.85, 0.9, 0.95],
    "repeat_min_items": [2, 3, 4],
    "repeat_min_chars": [25, 40, 60],
    "repeat_share": [0.35, 0.5, 0.65],
    "card_chars": [0, 25, 40, 60, 80],
    "furniture_line_chars": [0, 25, 40, 60, 80],
    "form_share": [0.0, 0.15, 0.25, 0.35, 0.5],
    "placeholder_words": [0, 1, 2, 3, 4],
    "peak_line_cap": [0.0, 800.0, 1000.0, 1500.0, 2500.0],
    "badge_chars": [0, 20, 30, 40, 50],
    "badge_repeats": [0, 2, 3, 4, 5],
    "counter_chars": [0, 4, 8, 12],
    # added by round 9
    "repeat_run": [0, 3, 4, 5, 6],
}


def objective(
    pages: list[tuple[Page, object]], params: Params, weights: dict[str, float] | None = None
) -> tuple[float, dict[str, float]]:
    """Mean F1 over the headline groups (each group counts once, whatever its size; ``weights`` may count a
    group more, e.g. wcxb/en, the one furthest from its goal)."""
    by_group: dict[str, list] = {}
    for page, prepared in pages:
        score = score_page(select_and_join(prepared, params), page.reference)
        for group in page.groups:
            by_group.setdefault(group, []).append(score)
    f1 = {g: aggregate(by_group[g]).f1 for g in HEADLINE_GROUPS if g in by_group}
    weights = weights or {}
    total = sum(weights.get(g, 1.0) for g in f1)
    return sum(weights.get(g, 1.0) * v for g, v in f1.items()) / total, f1


def _groups(f1: dict[str, float]) -> str:
    return " ".join(f"{g} {v:.4f}" for g, v in f1.items())


def _scan(space: dict, tuning: list, held_out: list, weights: dict[str, float]) -> None:
    """Each value alone: its F1 change per headline group on the tuning and the held-out sites."""
    base = {side: objective(pages, Params(), weights)[1] for side, pages in (("tune", tuning), ("held", held_out))}
    print("defaults:", " | ".join(f"{side} {_groups(f1)}" for side, f1 in base.items()), flush=True)
    for name, values in space.items():
        for value in values:
            if value == getattr(Params(), name):
                continue
            candidate = dataclasses.replace(Params(), **{name: value})
            parts = []
            for side, pages in (("tune", tuning), ("held", held_out)):
                f1 = objective(pages, candidate, weights)[1]
                parts.append(side + " " + " ".join(f"{g} {f1[g] - base[side][g]:+.4f}" for g in f1))
            print(f"  {name}={value}: " + " | ".join(parts), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extraction_tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--rounds", type=int, default=2, help="passes of the coordinate search")
    parser.add_argument("--swap", action="store_true", help="tune on the holdout half, report on the tune half")
    parser.add_argument(
        "--wcxb-weight", type=float, default=1.0, help="weight of wcxb/en in the objective (others count 1)"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated parameters to search (default: the whole SEARCH_SPACE)"
    )
    parser.add_argument(
        "--scan", action="store_true", help="no search: each value alone against the defaults, on both halves"
    )
    args = parser.parse_args(argv)
    weights = {"wcxb/en": args.wcxb_weight}
    space = {k: v for k, v in SEARCH_SPACE.items() if not args.only or k in args.only.split(",")}

    tune_fold = "holdout" if args.swap else "tune"
    pages = [(page, prepare(decode_html(page.body)[0], url=page.url or None)) for page in load_pages(args.data)]
    tuning = [(p, prep) for p, prep in pages if site_fold(p.site) == tune_fold]
    held_out = [(p, prep) for p, prep in pages if site_fold(p.site) != tune_fold]
    print(f"{len(tuning)} tuning pages, {len(held_out)} held-out pages (sites never in both)")

    if args.scan:
        _scan(space, tuning, held_out, weights)
        return
    params = Params()
    best, f1 = objective(tuning, params, weights)
    print(f"defaults: tuning {best:.4f} {_groups(f1)}", flush=True)
    for _ in range(args.rounds):
        for name, values in space.items():
            for value in values:
                candidate = dataclasses.replace(params, **{name: value})
                score, f1 = objective(tuning, candidate, weights)
                if score > best + 1e-4:
                    best, params = score, candidate
                    held, held_f1 = objective(held_out, candidate, weights)
                    print(
                        f"  {name}={value}: tuning {score:.4f} {_groups(f1)} | held-out {held:.4f} {_groups(held_f1)}",
                        flush=True,
                    )
    for label, subset, chosen in (
        ("defaults", held_out, Params()),
        ("tuned", held_out, params),
    ):
        score, f1 = objective(subset, chosen, weights)
        print(f"held-out with {label}: mean {score:.4f} {_groups(f1)}")
    print("tuned parameters:", dataclasses.asdict(params))


if __name__ == "__main__":
    main()
