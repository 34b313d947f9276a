"""spiders.encoding: BOM > HTTP header > <meta> > UTF-8 > detection, strict, gb2312/gbk as gb18030."""

import codecs

import pytest

from spiders.encoding import decode_html, normalise_encoding, repair_mojibake

pytestmark = pytest.mark.unit

CHINESE = "中文网页正文提取，基于行块分布函数。今天天气很好，我们去公园散步。" * 20


def page(body: str, charset: str | None = None) -> str:
    meta = f'<meta charset="{charset}">' if charset else ""
    return f"<html><head>{meta}<title>t</title></head><body><p>{body}</p></body></html>"


@pytest.mark.parametrize(
    ("label", "codec"),
    [("GB2312", "gb18030"), ("gbk", "gb18030"), ("utf8", "utf-8"), ("latin-1", "cp1252"), ("nonsense", None)],
)
def test_labels_are_normalised(label, codec):
    assert normalise_encoding(label) == codec


def test_gb2312_declared_page_decodes_as_gb18030():
    # 镕 is outside GB2312 but inside GBK/GB18030: a strict gb2312 decoder would fail on it.
    text = page(CHINESE + "朱镕基", "gb2312")
    decoded, encoding = decode_html(text.encode("gb18030"))
    assert encoding == "gb18030"
    assert "朱镕基" in decoded


def test_http_header_wins_over_meta():
    body = page("Grüße aus Köln", "utf-8").encode("cp1252")
    decoded, encoding = decode_html(body, "text/html; charset=windows-1252")
    assert encoding == "cp1252"
    assert "Grüße" in decoded


def test_bom_wins_over_everything():
    body = codecs.BOM_UTF16_LE + page("Привет", "iso-8859-1").encode("utf-16-le")
    decoded, encoding = decode_html(body, "text/html; charset=gbk")
    assert encoding.startswith("utf-16")
    assert "Привет" in decoded


def test_lying_legacy_declaration_on_utf8_bytes_is_ignored():
    decoded, encoding = decode_html(page(CHINESE, "gbk").encode("utf-8"))
    assert encoding == "utf-8"
    assert CHINESE in decoded


def test_declaration_that_cannot_decode_falls_back_to_detection():
    # Declared UTF-8, really GBK: strict UTF-8 fails, detection must find a Chinese codec.
    decoded, encoding = decode_html(page(CHINESE, "utf-8").encode("gbk"))
    assert encoding == "gb18030"
    assert CHINESE in decoded


def test_undeclared_utf8_is_recognised():
    decoded, encoding = decode_html(page("Ελληνικά κείμενα και ρωσικά: Привет").encode("utf-8"))
    assert encoding == "utf-8"
    assert "Ελληνικά" in decoded


def test_a_body_cut_inside_a_character_keeps_its_declared_codec():
    # A download's size limit (or the extractor's) cuts a body anywhere: the half character at the end goes, and
    # the declaration is still trusted (strictly, the whole body would fail and detection might guess UTF-16).
    for codec, label in (("gb18030", "gbk"), ("utf-8", "utf-8")):
        body = f'<meta charset="{label}"><p>{CHINESE}'.encode(codec)
        assert CHINESE.endswith("步。")
        decoded, encoding = decode_html(body[:-1])
        assert encoding == codec
        assert decoded.endswith("步") and "\ufffd" not in decoded


def test_a_cut_lead_byte_is_no_evidence_of_utf8():
    # ASCII and a last "\xe9" (cp1252 é, also a UTF-8 lead byte): not a UTF-8 page whose last character was cut.
    decoded, encoding = decode_html(b'<meta charset="windows-1252"><p>Un caf\xe9')
    assert encoding == "cp1252"
    assert decoded.endswith("caf\xe9")


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x00" * 100,
        bytes(range(256)) * 50,
        b"\xff\xfe\xfd" * 1000,
        page("x", "utf-32").encode("latin-1"),
        b'<meta charset="utf-8"><p>\xe4\xb8\xad\xe6\x96</p>',
    ],
)
def test_hostile_bytes_never_raise(body):
    text, encoding = decode_html(body)
    assert isinstance(text, str)
    assert codecs.lookup(encoding)


def _served_twice(text: str, codec: str) -> str:
    """What a page shows when its UTF-8 text was decoded with ``codec`` and encoded again."""
    return text.encode("utf-8").decode(codec)


@pytest.mark.parametrize("codec", ["cp1252", "latin-1"])
def test_repair_mojibake_undoes_utf8_read_as_a_legacy_codec(codec: str) -> None:
    original = "It’s the café — się objawia"
    assert _served_twice(original, codec) != original
    assert repair_mojibake(_served_twice(original, codec)) == original


def test_repair_mojibake_fixes_marked_lines_and_keeps_sound_ones() -> None:
    sound = "Déjà vu, “quoted”, Ã la carte"
    text = f"{_served_twice('Don’t panic', 'cp1252')}\n{sound}\n中文内容"
    assert repair_mojibake(text) == f"Don’t panic\n{sound}\n中文内容"


def test_repair_mojibake_returns_clean_text_unchanged() -> None:
    for text in ("plain ascii", "Zażółć gęślą jaźń", "Ελληνικά", "Привет", "¿Qué?"):
        assert repair_mojibake(text) is text


def test_repair_mojibake_stops_after_its_budget_of_marked_text():
    # ftfy reads about a million characters a second: a hostile page's megabytes of marked lines are not all
    # repaired (the first ones are, the rest stay as written), so no page takes seconds.
    mangled = _served_twice("Don’t panic, it’s fine.", "cp1252")
    lines = repair_mojibake("\n".join([mangled] * 20_000)).split("\n")
    assert lines[0] == "Don’t panic, it’s fine." and lines[-1] == mangled
