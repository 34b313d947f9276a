"""Turn raw HTML bytes into Unicode the way a careful browser would.

Candidates are tried in order of authority, and the first one that decodes the *whole* body strictly wins:

1. a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32);
2. the ``charset`` of the HTTP ``Content-Type`` header, when the caller has one;
3. the document's own ``<meta charset>`` / ``<meta http-equiv="Content-Type">`` (and ``<?xml encoding?>``);
4. UTF-8 (cheap to check and, when non-ASCII bytes decode as valid UTF-8, almost never a coincidence);
5. statistical detection by charset-normalizer (only reached for undeclared or lying legacy pages).

Labels are normalised the WHATWG way (w3lib), so ``latin-1`` means cp1252, and gb2312/gbk are decoded as gb18030,
their superset: real "GB2312" pages routinely use GBK and GB18030 characters.

A declaration that lies is common (a CMS template says ``gb2312`` while the database writes UTF-8): a declared
legacy codec is dropped when it cannot decode the body, and also when the body is valid UTF-8 with multi-byte
sequences, which legacy text practically never is by chance. When nothing decodes strictly, the most
authoritative candidate decodes with U+FFFD replacement characters, so callers always get text.

Decoding right is not always enough: about 2 % of the pages of the extraction dev set are UTF-8 text that was
decoded as Latin-1 or cp1252 and encoded again before it was served ("donâ€™t", "siÄ\x99"), and browsers show it
as it is. :func:`repair_mojibake` undoes that in extracted text (ftfy), for callers that want the text as written.
"""

from __future__ import annotations

import codecs
import re

from w3lib.encoding import html_body_declared_encoding, http_content_type_encoding, read_bom, resolve_encoding

__all__ = ["decode_html", "normalise_encoding", "repair_mojibake"]

# The multi-byte Chinese codecs are all decoded by their superset.
_SUPERSETS = {"gb2312": "gb18030", "gbk": "gb18030", "cp936": "gb18030", "euc-cn": "gb18030", "x-gbk": "gb18030"}
# Detection on a few hundred KiB is as good as on megabytes, and much faster.
_DETECTION_SAMPLE = 256 * 1024
# What UTF-8 read as Latin-1 or cp1252 leaves behind: C1 controls, "Ã©", "Â " and "â€™". ftfy costs about 2 ms per
# page of text, this search a twentieth of that, so only text that shows these marks is handed to ftfy.
_MOJIBAKE_MARKS = re.compile("[\x80-\x9f]|[\xc2-\xc5][\x80-\xbf]|\xe2\u20ac")
# ftfy reads about a million characters a second: past this many characters of marked lines, the rest of a page
# stays as written (the longest main text of the extraction dev set is 61,000 characters; a hostile page's 6 MB
# of marked text would take seconds).
_REPAIR_BUDGET = 200_000


def normalise_encoding(label: str | None) -> str | None:
    """Return the Python codec name for an encoding label, or None when the label is unknown."""
    if not label:
        return None
    label = label.strip().lower()
    if label in _SUPERSETS:
        return _SUPERSETS[label]
    resolved = resolve_encoding(label)
    if resolved is None:
        try:
            resolved = codecs.lookup(label).name
        except LookupError:
            return None
    return _SUPERSETS.get(resolved, resolved)


def _decodes(body: bytes, encoding: str) -> str | None:
    """``body`` decoded strictly, except that a character cut off at the very end is left out: bodies are cut
    (a download's size limit, the extractor's), and one cut character is no reason to distrust the codec."""
    try:
        return codecs.getincrementaldecoder(encoding)().decode(body, final=False)
    except (UnicodeDecodeError, LookupError):
        return None


def _is_utf8_family(encoding: str) -> bool:
    return codecs.lookup(encoding).name.startswith("utf")


def _detect(body: bytes) -> str | None:
    from charset_normalizer import from_bytes  # imported lazily: most pages never get this far

    best = from_bytes(body[:_DETECTION_SAMPLE]).best()
    return normalise_encoding(best.encoding) if best is not None else None


def decode_html(body: bytes, content_type: str | None = None) -> tuple[str, str]:
    """Decode an HTML body; return ``(text, python_codec_name)``.

    ``content_type`` is the HTTP ``Content-Type`` header value (e.g. ``"text/html; charset=GBK"``), if known.
    Never raises on bad input: undecodable bytes become U+FFFD as a last resort.
    """
    if not body:
        return "", "utf-8"
    bom_encoding, bom = read_bom(body)
    if bom_encoding and bom:  # w3lib returns both or neither
        encoding = normalise_encoding(bom_encoding) or "utf-8"
        return body[len(bom) :].decode(encoding, "replace"), encoding

    declared = [
        normalise_encoding(http_content_type_encoding(content_type) if content_type else None),
        normalise_encoding(html_body_declared_encoding(body)),
    ]
    candidates = [enc for enc in declared if enc]
    is_ascii = body.isascii()
    if is_ascii:
        # Any ASCII-compatible declaration gives the same text; UTF-16/32 declarations on ASCII bytes are lies.
        return body.decode("ascii"), next((c for c in candidates if not c.startswith("utf-16")), "utf-8")

    utf8_text = _decodes(body, "utf-8")
    if utf8_text is not None and utf8_text.isascii():
        utf8_text = None  # ASCII but for a cut-off lead byte at the end: no evidence of UTF-8 ("...caf\xe9")
    for encoding in candidates:
        if utf8_text is not None and not _is_utf8_family(encoding):
            # Valid multi-byte UTF-8 that claims to be legacy: the claim is the template's, the bytes are UTF-8.
            return utf8_text, "utf-8"
        text = utf8_text if encoding == "utf-8" else _decodes(body, encoding)
        if text is not None:
            return text, encoding
    if utf8_text is not None:
        return utf8_text, "utf-8"
    detected = _detect(body)
    if detected:
        text = _decodes(body, detected)
        if text is not None:
            return text, detected
    fallback = candidates[0] if candidates else detected or "utf-8"
    return body.decode(fallback, "replace"), fallback


def repair_mojibake(text: str) -> str:
    """``text`` with UTF-8 that was decoded with a legacy codec and encoded again ("donâ€™t") put right
    ("don’t"). ftfy judges each marked line on its own (a page can mix a mangled body with a sound menu), and
    leaves a line as written when it is not convinced ("Ã la carte"); lines past ``_REPAIR_BUDGET`` characters
    of marked text stay as written."""
    if text.isascii() or not _MOJIBAKE_MARKS.search(text):
        return text
    from ftfy import fix_encoding  # imported lazily: most text never gets this far

    lines = text.split("\n")
    budget = _REPAIR_BUDGET
    for i, line in enumerate(lines):
        if len(line) <= budget and _MOJIBAKE_MARKS.search(line):
            budget -= len(line)
            lines[i] = fix_encoding(line)
    return "\n".join(lines)
