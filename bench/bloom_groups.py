"""The seed's fig. 5-4, made honest: false positives of h = 1..4 hash groups at 3,000,000 URLs.

    python -m bench.bloom_groups [--urls N] [--bits M] [--k K] [--plot FILE.png] [--json]

The seed (fig. 5-3, 5-4) inserts 3,000,000 URLs into filters of 10,000,000 bits with k = 4 hashes per group and
counts the new URLs wrongly reported as seen (its formula 5-1), for 1, 2, 3 and 4 groups — each group with its
*own* 10,000,000-bit array, so that h groups use h times the memory, and fewer false positives follow from the
memory, not from the groups. This benchmark inserts the same kind of URLs, with crawlfleet's fingerprints and cell
positions (``frontier.bloom.fingerprint.positions``, the Lua scripts' computation, vectorised here), and counts the
false positives of three layouts per h (sampled at 300,000 URLs and 1,000,000 bits, the counts match the model within
a few percent):

- ``per_group``: h groups x M bits (the seed's experiment; total h x M bits);
- ``equal_total``: h groups x M/h bits (total M bits, as much memory as h = 1);
- ``one_big``: one group of h x M bits with h x k hashes (total h x M bits, as much memory as ``per_group``).

``per_group`` and ``one_big`` coincide (same memory, same number of hashes): the gain is the memory's. At equal
total memory, more groups of k = 4 only mean more hashes for the same bits (too many here) and more false
positives. Each count comes with the model's expectation.

URLs are inserted in chunks of 10,000 (vectorised): a URL is tested against the arrays as they were before its
chunk, and the model counts the same way (sum over chunks of chunk size x (1 - (1 - 1/m)^(k i))^(k h), i = URLs
inserted before the chunk); against one-by-one insertion this undercounts by a few percent at most.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from bench.bloom import inserted_urls
from frontier.bloom.fingerprint import hash_batch, url_fingerprints

CHUNK = 10_000


def cell_positions(h1: np.ndarray, h2: np.ndarray, cells: int, hashes: int) -> np.ndarray:
    """Cells of every fingerprint, shape (N, hashes): the enhanced double hashing of ``fingerprint.positions``."""
    modulus = np.uint64(cells)
    x = h1.astype(np.uint64) % modulus
    y = h2.astype(np.uint64) % modulus
    out = np.empty((len(h1), hashes), dtype=np.uint64)
    for i in range(hashes):
        out[:, i] = x
        x = (x + y) % modulus
        y = (y + np.uint64(i)) % modulus
    return out


def expected_false_positives(n: int, cells: int, k: int, groups: int) -> float:
    """The model of the count measured here: each URL of a chunk meets the rate of the filter as it was before
    the chunk, ``(1 - (1 - 1/m)^(k i))^(k h)`` with i the elements inserted before the chunk."""
    starts = np.arange(0, n, CHUNK, dtype=np.float64)
    sizes = np.minimum(CHUNK, n - starts)
    rate = (1.0 - np.exp(k * starts * np.log1p(-1.0 / cells))) ** (k * groups)
    return float((rate * sizes).sum())


def count_false_positives(batches: list[tuple[np.ndarray, np.ndarray]], cells: int, k: int, groups: int) -> int:
    arrays = [np.zeros(cells, dtype=bool) for _ in range(groups)]
    false_positives = 0
    for h1, h2 in batches:
        cells_of = cell_positions(h1, h2, cells, k * groups)
        present = np.ones(len(h1), dtype=bool)
        for g, array in enumerate(arrays):
            present &= array[cells_of[:, g * k:(g + 1) * k]].all(axis=1)
        false_positives += int(present.sum())
        for g, array in enumerate(arrays):
            array[cells_of[:, g * k:(g + 1) * k].ravel()] = True
    return false_positives


def run(n: int, bits: int, k: int) -> list[dict[str, Any]]:
    batches = []
    for start in range(0, n, CHUNK):
        batch = hash_batch(url_fingerprints(inserted_urls(start, min(n, start + CHUNK))))
        batches.append((batch.h1, batch.h2))
    rows = []
    for groups in (1, 2, 3, 4):
        layouts = {
            "per_group": (bits, k, groups),
            "equal_total": (bits // groups, k, groups),
            "one_big": (bits * groups, k * groups, 1),
        }
        row: dict[str, Any] = {"groups": groups}
        for name, (cells, hashes, count) in layouts.items():
            row[name] = count_false_positives(batches, cells, hashes, count)
            row[f"{name}_expected"] = expected_false_positives(n, cells, hashes, count)
            row[f"{name}_total_bits"] = cells * count
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]], n: int, bits: int, k: int) -> str:
    lines = [f"false positives while inserting {n:,} distinct URLs (k = {k} per group, M = {bits:,} bits)",
             f"{'h':>2} | {'h groups x M bits':>26} | {'h groups x M/h bits':>26} | "
             f"{'1 group x hM bits, hk hashes':>28}",
             f"{'':>2} | {'(seed fig. 5-4) measured/model':>26} | {'(equal total) measured/model':>26} | "
             f"{'(same memory as col. 1)':>28}"]
    for row in rows:
        cells = [f"{row[name]:>12,} / {row[name + '_expected']:>11,.0f}" for name in ("per_group", "equal_total")]
        cells.append(f"{row['one_big']:>13,} / {row['one_big_expected']:>12,.0f}")
        lines.append(f"{row['groups']:>2} | " + " | ".join(f"{cell:>26}" for cell in cells))
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: str, n: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = [row["groups"] for row in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, label in (("per_group", "h groups x M bits (seed fig. 5-4)"),
                        ("equal_total", "h groups x M/h bits (equal total memory)"),
                        ("one_big", "1 group x hM bits, hk hashes")):
        ax.plot(h, [max(row[name], 0.5) for row in rows], marker="o", label=label)
        ax.plot(h, [max(row[name + "_expected"], 0.5) for row in rows], linestyle=":", color="grey")
    ax.set_yscale("log")
    ax.set_xticks(h)
    ax.set_xlabel("hash groups h")
    ax.set_ylabel(f"false positives among {n:,} new URLs")
    ax.legend()
    ax.set_title("Multi-group Bloom filter: the gain is the memory's (dotted: model)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bloom_groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=3_000_000)
    parser.add_argument("--bits", type=int, default=10_000_000)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--plot", metavar="FILE.png")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.urls, args.bits, args.k)
    print(table(rows, args.urls, args.bits, args.k))
    if args.plot:
        plot(rows, args.plot, args.urls)
        print(f"plot: {args.plot}")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
