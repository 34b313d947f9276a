"""Canonical URLs and fingerprints (frontier/bloom/fingerprint.py): the fast path equals w3lib on a corpus."""

import random
from urllib.parse import urlsplit, urlunsplit

import mmh3
import numpy as np
import pytest
from w3lib.url import canonicalize_url

from frontier.bloom import fingerprint
from frontier.bloom.fingerprint import canonical_url, hash_batch, request_fingerprint, url_fingerprint

pytestmark = pytest.mark.unit

DEFAULT_PORTS = {"http": 80, "https": 443}


def reference(url: str) -> str:
    """w3lib's canonical form, then the default port dropped (computed independently of the module)."""
    canonical = canonicalize_url(url)
    parts = urlsplit(canonical)
    try:
        port = parts.port
    except ValueError:
        return canonical
    if port is not None and DEFAULT_PORTS.get(parts.scheme) == port:
        netloc = parts.netloc.rsplit(":", 1)[0]
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return canonical


HAND_PICKED = [
    "http://www.example.com/do?c=3&b=5&b=2&a=50",
    "HTTP://WWW.Example.COM:80/a/b?z=1&a=2&a=1#frag",
    "https://example.com:443",
    "https://example.com:8443/x?",
    "http://example.com?a.b=1&a=2&a",
    "http://example.com/a+b?q=a+b&q=a",
    "http://example.com/x?a=1&&b=",
    "http://example.com/x?b&a",
    "http://example.com/x?a-b=1&a=2&a+c=3&a.d=4&a0=5",
    "http://127.0.0.1:8080/x",
    "http://example.com/%7Euser",
    "http://example.com/a/../b",
    "http://example.com/a/./b/",
    "http://example.com/.hidden/x",
    "http://example.com/@user/p:1",
    "http://example.com/a;params?x=1",
    "http://example.com/r\u00e9sum\u00e9",
    "http://example.com/?q=caf\u00e9",
    "http://user:Pass@Example.com:80/",
    "http://[::0:1]:80/a",
    "http://example.com/a%2fb",
    "http://example.com/?a=%2f&b=/x&c=a+b&d=a%20b",
    "http://example.com/?a=b=c",
    "http://example.com/ a",
    "  http://example.com/padded  ",
    "http://example.com:0/",
    "http://example.com:080/",
    "http://example.com:99999/",
    "http://example.com./x",
    "http://xn--caf-dma.example/",
    "http://caf\u00e9.example/",
    "http://a_b.example.com/",
    "ftp://example.com:21/file",
    "http://example.com/#!/hash/route",
    "http://example.com/x?y#z?w",
    "http://example.com/x?it's=1",
    "http://example.com/x's/y",
    "http://example.com/x|y",
    "http://example.com/x?a=[1]",
    "http://example.com/x?a=%41",
    "https://EXAMPLE.com/Path/MixedCase?Key=Value",
    "http://example.com/x?~a=1&_b=2&-c=3",
]

_PATH_CHARS = "abcXYZ09-._~!$&'()*+,=:@/;%|[]\u00e9 \""
_QUERY_CHARS = "abAB09-._~+=&%/?:;'\u00e9 "


def _random_url(rng: random.Random) -> str:
    scheme = rng.choice(["http", "https", "HTTP", "Https"])
    host = rng.choice(["example.com", "WWW.Example.COM", "a-b.test", "127.0.0.1", "x.y.z.example.org"])
    port = rng.choice(["", "", ":80", ":443", ":8080", ":0"])
    path = "/" + "".join(rng.choice(_PATH_CHARS) for _ in range(rng.randint(0, 20)))
    if rng.random() < 0.3:
        path = rng.choice(["", "/", "/a/../b", "/a/./b"]) if rng.random() < 0.5 else path
    url = f"{scheme}://{host}{port}{path}"
    if rng.random() < 0.7:
        url += "?" + "".join(rng.choice(_QUERY_CHARS) for _ in range(rng.randint(0, 25)))
    if rng.random() < 0.2:
        url += "#" + "".join(rng.choice(_PATH_CHARS) for _ in range(rng.randint(0, 8)))
    return url


def _crawl_like_url(rng: random.Random) -> str:
    """URLs as crawlers see them: the fast path's case."""
    host = f"www.site{rng.randint(0, 500)}.com"
    depth = "/".join(f"seg{rng.randint(0, 99)}" for _ in range(rng.randint(0, 4)))
    query = "&".join(f"{rng.choice('abcdefgh')}{rng.randint(0, 3)}={rng.randint(0, 999)}"
                     for _ in range(rng.randint(0, 4)))
    return f"https://{host}/{depth}/page-{rng.randint(0, 10**6)}.html" + (f"?{query}" if query else "")


def _outcome(function, url):
    try:
        return function(url)
    except ValueError as exc:  # w3lib refuses e.g. a port out of range: so must we
        return type(exc)


@pytest.mark.parametrize("url", HAND_PICKED)
def test_hand_picked_urls_match_w3lib(url):
    assert _outcome(canonical_url, url) == _outcome(reference, url)


def test_random_corpus_matches_w3lib():
    rng = random.Random(20240501)
    corpus = [_random_url(rng) for _ in range(4000)] + [_crawl_like_url(rng) for _ in range(2000)]
    mismatches = [(url, _outcome(canonical_url, url), _outcome(reference, url)) for url in corpus
                  if _outcome(canonical_url, url) != _outcome(reference, url)]
    assert mismatches == []


def test_a_url_w3lib_refuses_still_gets_a_fingerprint():
    assert url_fingerprint("http://example.com:99999/") == url_fingerprint("http://example.com:99999/")
    assert url_fingerprint("http://example.com:99999/") != url_fingerprint("http://example.com:9999/")


def test_the_fast_path_serves_crawl_like_urls():
    """Most real links take the fast path (else w3lib's cost comes back)."""
    rng = random.Random(3)
    corpus = [_crawl_like_url(rng) for _ in range(500)]
    assert all(fingerprint._FAST_URL.fullmatch(url) for url in corpus)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://Example.com/a?b=2&a=1", "http://example.com:80/a?a=1&b=2#top"),
        ("https://example.com", "https://example.com:443/"),
        ("http://example.com/%7Ex", "http://example.com/~x"),
    ],
)
def test_equivalent_urls_share_a_fingerprint(a, b):
    assert url_fingerprint(a) == url_fingerprint(b)


def test_different_urls_differ():
    assert url_fingerprint("http://example.com/a") != url_fingerprint("http://example.com/b")
    assert url_fingerprint("http://example.com/a") != url_fingerprint("https://example.com/a")
    assert url_fingerprint("http://example.com:8080/") != url_fingerprint("http://example.com/")


def test_fingerprint_is_mmh3_of_the_canonical_url():
    url = "HTTP://Example.com:80/x?b=1&a=2"
    assert url_fingerprint(url) == mmh3.mmh3_x64_128_digest(b"http://example.com/x?a=2&b=1")


def test_request_fingerprint_tells_methods_and_bodies_apart():
    url = "http://example.com/form"
    assert request_fingerprint(url) == url_fingerprint(url)
    assert request_fingerprint(url, "post", b"a=1") != request_fingerprint(url, "POST", b"a=2")
    assert request_fingerprint(url, "POST", b"a=1") == request_fingerprint(url, "post", b"a=1")
    assert request_fingerprint(url, "POST") != url_fingerprint(url)


def test_hash_batch_uses_disjoint_bits():
    digests = [url_fingerprint(f"http://example.com/{i}") for i in range(2000)]
    batch = hash_batch(digests)
    words = np.frombuffer(b"".join(digests), dtype="<u8").reshape(-1, 2)
    assert np.array_equal(batch.h1, (words[:, 0] >> np.uint64(12)).astype(float))
    assert batch.h1.max() < 2**52 and batch.h2.max() < 2**52 and batch.shard_key.max() < 2**24
    counts = np.bincount(batch.shards(16), minlength=16)
    assert counts.min() > 2000 / 16 * 0.6  # spread over every shard
    packed = np.frombuffer(batch.packed(), dtype="<f8").reshape(-1, 3)
    assert np.array_equal(packed[:, 0], batch.h1) and np.array_equal(packed[:, 2], batch.shard_key)
    with pytest.raises(ValueError):
        hash_batch(b"short")
