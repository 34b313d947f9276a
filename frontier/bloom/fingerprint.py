"""One canonical form per URL, and the 128-bit fingerprint the Bloom filter hashes.

**Canonical URL.** The reference is w3lib's ``canonicalize_url`` (what Scrapy's request fingerprint is built on:
lower-case scheme and host, percent-encoding normalised, dot segments resolved, query arguments sorted, fragment
dropped), plus one step w3lib leaves out: the scheme's default port is dropped (``http://a.com:80/`` is
``http://a.com/``). Two URLs w3lib calls equal are therefore equal here too.

w3lib takes about 25 µs per URL, more than the rest of a check-and-add. :func:`canonical_url` has a fast path for
the URLs crawlers mostly see — ``http``/``https``, an ASCII host name, and a path and query made only of characters
that w3lib leaves as they are — and hands every other URL (percent-escapes, non-ASCII, user info, IPv6, ``;``
params, dot segments, odd ports …) to w3lib. The fast path gives w3lib's result exactly; ``tests/unit/
test_fingerprint.py`` checks it against w3lib on a corpus of URLs.

**Fingerprint.** ``mmh3`` x64 128-bit of the canonical URL's UTF-8 bytes. Requests other than a body-less ``GET``
fingerprint ``"<METHOD> <canonical URL> <sha1 of the body>"``, so a POST never collides with the GET of its URL.

**Hash values.** A fingerprint's two little-endian 64-bit words give the Bloom filter's two base hashes (their top
52 bits each, exact as Lua numbers) and a 24-bit key (their low 12 bits each) that picks the shard (key mod S) and,
inside a shard, the part of the arrays (key / 2^24, see ``lua/common.lua``): disjoint bits, so where a URL lands
says nothing about its positions there.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import mmh3
import numpy as np
from w3lib.url import canonicalize_url

DEFAULT_PORTS = {"http": ":80", "https": ":443"}

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# Characters w3lib keeps unchanged: in a path (no "%", no ";" params), and in a query argument (its
# quote_plus-safe set, plus "+" which it decodes to a space and encodes back to "+").
_FAST_URL = re.compile(
    rf"([Hh][Tt][Tt][Pp][Ss]?)://({_LABEL}(?:\.{_LABEL})*)"  # scheme, host
    r"(?::([0-9]{1,5}))?"  # port
    r"(/[A-Za-z0-9\-._~!$&'()*+,=:@/]*)?"  # path
    r"(?:\?([A-Za-z0-9\-._~+=&]*))?"  # query
    r"(?:#.*)?",
    re.DOTALL,
)
_DOT_SEGMENT = re.compile(r"/\.\.?(?:/|$)")
_SHARD_MASK = np.uint64(0xFFF)


def canonical_url(url: str) -> str:
    """w3lib's canonical form of ``url`` with the scheme's default port removed."""
    match = _FAST_URL.fullmatch(url)
    if match is None:
        return _slow(url)
    scheme, host, port, path, query = match.groups()
    if path and "/." in path and _DOT_SEGMENT.search(path):
        return _slow(url)
    scheme = scheme.lower()
    netloc = host.lower()
    if port is not None:
        number = int(port)
        if number > 65535:
            return _slow(url)
        if f":{number}" != DEFAULT_PORTS[scheme]:
            netloc = f"{netloc}:{number}"
    canonical = f"{scheme}://{netloc}{path or '/'}"
    if query:
        sorted_query = _fast_query(query)
        if sorted_query is None:
            return _slow(url)
        canonical += sorted_query
    return canonical


def _fast_query(query: str) -> str | None:
    # (key, "=" or "", value): sorts as w3lib's (key, value) pairs, since a missing "=" means an empty value.
    # w3lib sorts decoded bytes, where "+" is a space; both sort below every other character of the fast set.
    pairs = [field.partition("=") for field in query.split("&") if field]
    for pair in pairs:
        if "=" in pair[2]:  # w3lib percent-encodes a second "=": leave that to it
            return None
    if not pairs:
        return ""
    pairs.sort()
    return "?" + "&".join([key + "=" + value for key, _, value in pairs])


def _slow(url: str) -> str:
    canonical = canonicalize_url(url)
    scheme, sep, rest = canonical.partition("://")
    port = DEFAULT_PORTS.get(scheme)
    if not sep or port is None:
        return canonical
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if found != -1:
            end = min(end, found)
    netloc = rest[:end]
    if netloc.endswith(port) and "]" not in netloc[-len(port):]:
        return f"{scheme}://{netloc[: -len(port)]}{rest[end:]}"
    return canonical


def _canonical_or_raw(url: str) -> str:
    """The canonical URL; a URL that w3lib refuses (e.g. a port out of range) stands for itself."""
    try:
        return canonical_url(url)
    except ValueError:
        return url.strip()


def url_fingerprint(url: str) -> bytes:
    """The 16-byte fingerprint of a URL (as a body-less GET)."""
    return mmh3.mmh3_x64_128_digest(_canonical_or_raw(url).encode())


def request_fingerprint(url: str, method: str = "GET", body: bytes = b"") -> bytes:
    """The 16-byte fingerprint of a request: its URL's for a body-less GET, else method, URL and body."""
    method = method.upper()
    if method == "GET" and not body:
        return url_fingerprint(url)
    text = f"{method} {_canonical_or_raw(url)} {hashlib.sha1(body).hexdigest()}"
    return mmh3.mmh3_x64_128_digest(text.encode())


def url_fingerprints(urls: Iterable[str]) -> bytes:
    """Fingerprints of many URLs, concatenated (16 bytes each)."""
    digest = mmh3.mmh3_x64_128_digest
    return b"".join([digest(_canonical_or_raw(url).encode()) for url in urls])


@dataclass(frozen=True)
class HashBatch:
    """Per fingerprint: the two base hashes (integers < 2^52, as float64 for Lua) and the 24-bit shard key."""

    h1: np.ndarray
    h2: np.ndarray
    shard_key: np.ndarray

    def __len__(self) -> int:
        return len(self.h1)

    def sliced(self, start: int, stop: int) -> HashBatch:
        return HashBatch(self.h1[start:stop], self.h2[start:stop], self.shard_key[start:stop])

    def shards(self, count: int) -> np.ndarray:
        return (self.shard_key % np.uint64(count)).astype(np.int64)

    def packed(self, index: np.ndarray | slice | None = None) -> bytes:
        """Three little-endian doubles per fingerprint (h1, h2, part selector): the Lua scripts' argument."""
        pick = slice(None) if index is None else index
        h1 = self.h1[pick]
        triples = np.empty((len(h1), 3), dtype="<f8")
        triples[:, 0] = h1
        triples[:, 1] = self.h2[pick]
        triples[:, 2] = self.shard_key[pick]
        return triples.tobytes()


def hash_batch(fingerprints: bytes | Sequence[bytes]) -> HashBatch:
    """Split 16-byte fingerprints (concatenated or a sequence) into hash values."""
    blob = fingerprints if isinstance(fingerprints, bytes | bytearray) else b"".join(fingerprints)
    if len(blob) % 16:
        raise ValueError("fingerprints are 16 bytes each")
    words = np.frombuffer(blob, dtype="<u8").reshape(-1, 2)
    shift = np.uint64(12)
    h1 = (words[:, 0] >> shift).astype(np.float64)
    h2 = (words[:, 1] >> shift).astype(np.float64)
    shard_key = ((words[:, 0] & _SHARD_MASK) << shift) | (words[:, 1] & _SHARD_MASK)
    return HashBatch(h1, h2, shard_key)


def positions(h1: float, h2: float, selector: float, sizes: Sequence[int], k: int, groups: int
              ) -> tuple[int, list[list[int]]]:
    """The part and, per group, the cells a fingerprint uses in a layer whose parts hold ``sizes`` cells of every
    group — the computation of ``lua/common.lua`` and :func:`frontier.bloom.cells.cells`: the part is chosen with
    probability proportional to its size, then enhanced double hashing (Kirsch–Mitzenmacher ``h1 + i h2`` plus
    Dillinger's growing increment) modulo the part's cells per group; group ``g`` takes hashes ``g k … g k + k - 1``
    of the sequence, as cells of its own region (bit offset ``g * sizes[part] + cell`` in the part string)."""
    part = 0
    u = selector * sum(sizes) / float(1 << 24)
    while part < len(sizes) - 1 and u >= sizes[part]:
        u -= sizes[part]
        part += 1
    cells = sizes[part]
    x, y = int(h1) % cells, int(h2) % cells
    out: list[list[int]] = []
    j = 0
    for _ in range(groups):
        group = []
        for _ in range(k):
            group.append(x)
            x = (x + y) % cells
            y = (y + j) % cells
            j += 1
        out.append(group)
    return part, out
