"""spiders.extraction: main text, title and date; hostile input; a quality floor on a fixed dev-set sample."""

import gzip
import json
from pathlib import Path

import pytest

from spiders.extraction import Params, extract, prepare
from spiders.extraction.dates import parse_date
from spiders.extraction.links import page_site

pytestmark = pytest.mark.unit

DEV_SET = Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "extraction-dev"

PARAGRAPHS = [
    "The city council approved the new budget on Tuesday, after a debate that lasted more than six hours.",
    "Critics said the plan cuts spending on libraries, while supporters pointed to lower property taxes.",
    "The mayor, who proposed the budget in March, said she would sign it before the end of the week.",
    "Residents can read the full document on the council's website and comment until the first of June.",
]
NAV = "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(12))
ARTICLE_PAGE = f"""<!DOCTYPE html><html><head><title>Council approves budget | Daily Example</title>
<meta property="article:published_time" content="2024-05-14T09:30:00+02:00"></head>
<body><nav><ul>{NAV}</ul></nav>
<div class="main"><h1>Council approves budget</h1><p class="byline">By Jane Doe</p>
{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
<div class="related"><h3>Related</h3><ul>{NAV}</ul></div>
<div id="comments"><p>First! This is a reader comment that should not be part of the article text at all.</p></div>
<footer><p>© 2024 Daily Example. All rights reserved. Terms of use and privacy policy apply.</p></footer>
</body></html>"""


def test_article_text_without_navigation_related_or_comments():
    result = extract(ARTICLE_PAGE)
    assert result["text"].startswith("Council approves budget\n")  # an article's text starts with its headline
    for paragraph in PARAGRAPHS:
        assert paragraph in result["text"]
    assert "Section 3" not in result["text"]
    assert "reader comment" not in result["text"]
    assert "All rights reserved" not in result["text"]
    assert result["title"] == "Council approves budget"
    assert result["published"] == "2024-05-14T09:30:00+02:00"


def test_minified_page_gives_the_same_text():
    minified = "".join(line.strip() for line in ARTICLE_PAGE.splitlines())
    assert extract(minified)["text"] == extract(ARTICLE_PAGE)["text"]


def test_chinese_gbk_bytes_with_br_paragraphs_and_dated_byline():
    sentences = [
        "国务院总理今天在北京主持召开常务会议，部署进一步促进消费的政策措施。" * 2,
        "会议指出，扩大内需是经济发展的基本立足点，要多措并举稳定和扩大就业。" * 2,
        "会议要求各地区各部门抓好落实，确保政策尽快见效，让群众得到实惠。" * 2,
    ]
    links = "".join(f'<a href="/n{i}">新闻标题第{i}条</a><br>' for i in range(15))
    html = f"""<html><head><meta http-equiv="Content-Type" content="text/html; charset=gb2312">
    <title>国务院部署促进消费_新闻中心_示例网</title></head><body>
    <table><tr><td class="left">{links}</td><td><h1>国务院部署促进消费</h1>
    <div class="info">2011年12月09日 14:20 来源：新华网</div>
    <div id="text">{"<br><br>".join(sentences)}</div></td></tr></table></body></html>"""
    result = extract(html.encode("gbk"))
    assert all(s in result["text"] for s in sentences)
    assert "新闻标题第3条" not in result["text"]
    assert result["title"] == "国务院部署促进消费"
    assert result["published"] == "2011-12-09T14:20"


def test_button_labels_inside_the_product_region_are_dropped():
    # A shop page: size pickers and "Add to Cart" sit between the product's name and its description.
    sizes = "".join(f"<button>{size}</button>" for size in range(6, 14))
    html = f"""<html><head><title>Wool Runner | Example Shop</title></head><body>
    <div class="product"><h1>Wool Runner</h1><p>{PARAGRAPHS[0]}</p><div class="sizes">{sizes}</div>
    <button>Add to Cart</button><p>{PARAGRAPHS[1]}</p><p>{PARAGRAPHS[2]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS[:3])
    assert "Add to Cart" not in text
    # Short furniture lines in an article go too (``furniture_line_chars``): both rules off bring the label back.
    assert "Add to Cart" in extract(html, params=Params(drop_buttons=False, furniture_line_chars=0))["text"]


PRODUCT_HEAD = """<html><head><title>Wool Runner | Example Shop</title>
<meta property="og:type" content="product"></head>"""
REVIEWS = "".join(
    f'<div class="r"><div>Customer {i}</div><div>Rated 5 out of 5</div><p>Great shoes, size {i} fits well and they '
    f"feel soft on long walks in the city every day.</p><div>Was this helpful?</div></div>"
    for i in range(4)
)


def test_a_product_page_ends_where_its_reviews_begin():
    # A product's page (og:type product) says so: its buyers' reviews, announced by a short line, are not its
    # text, in the region or after it in the same container. Without that metadata (a blog post reviewing the
    # product) the reviews line means nothing.
    body = f"""<body><div class="page"><h1>Wool Runner</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}
    <h2>Customer Reviews</h2>{REVIEWS}</div></body></html>"""
    text = extract(PRODUCT_HEAD + body)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Great shoes" not in text and "Customer Reviews" not in text
    assert "Great shoes" in extract(PRODUCT_HEAD + body, params=Params(reviews_cut=False))["text"]
    article_head = PRODUCT_HEAD.replace('content="product"', 'content="article"')
    assert not prepare(article_head + body).product
    assert prepare(PRODUCT_HEAD + body).product
    json_ld = '<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Product"}</script>'
    assert prepare(f"<html><head>{json_ld}</head>{body}").product


def test_a_product_pages_spec_table_is_kept_up_to_its_reviews():
    # A short description, then a spec table of short lines, then reviews: the end-of-article valley takes the
    # table for a comment thread and ends the product at its description; on a product's page with a reviews
    # line, that line ends the text instead.
    specs = "".join(
        f"<tr><th>{name}</th><td>{value}</td></tr>"
        for name, value in [("Weight", "1 lb"), ("Capacity", "25 l"), ("Frame", "HDPE"), ("Hipbelt", "Yes")] * 3
    )
    body = f"""<body><div class="page"><h1>Wool Runner</h1><p>{PARAGRAPHS[0]}</p><h2>Specs</h2>
    <table>{specs}</table><h2>Customer Reviews</h2>{REVIEWS}</div></body></html>"""
    text = extract(PRODUCT_HEAD + body)["text"]
    assert "Hipbelt" in text and "Great shoes" not in text
    assert "Hipbelt" not in extract(PRODUCT_HEAD + body, params=Params(reviews_cut=False))["text"]


def test_a_product_pages_forms_are_its_interface():
    # Size and colour pickers, quantity, "Notify me when back in stock" sit in <form>s between the product's name
    # and its description; a form round the whole page (ASP.NET) or holding the headline is not interface.
    form = """<form action="/cart"><div>Color:</div><div>Royal Black</div><label>Quantity</label>
    <div>Notify me when back in stock</div><div>Free shipping on orders over $75</div></form>"""
    body = f"""<body><div class="product"><h1>Wool Runner</h1><p>{PARAGRAPHS[0]}</p>{form}
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS[1:])}</div></body></html>"""
    text = extract(PRODUCT_HEAD + body)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Notify me" not in text and "Royal Black" not in text
    assert "Notify me" in extract(PRODUCT_HEAD + body, params=Params(form_share=0))["text"]
    wrapped = body.replace("<body>", '<body><form action="/page.aspx">').replace("</body>", "</form></body>")
    assert all(paragraph in extract(PRODUCT_HEAD + wrapped)["text"] for paragraph in PARAGRAPHS)


def test_a_product_pages_screen_reader_labels_are_not_shown():
    # A shop labels its prices and controls for screen readers only ("Regular price", "Sale price", "Unit price"):
    # the framework's class (sr-only, visually-hidden, screen-reader-text) clips them out of sight. On a product's
    # page (by metadata) they go; a breakpoint that shows them again ("md:not-sr-only") keeps them.
    price = """<div class="price"><span class="visually-hidden">Regular price</span>
    <span class="sr-only">Sale price</span> $179.00 <span class="screen-reader-text">Unit price per</span></div>"""
    body = f"""<body><div class="product"><h1>Wool Runner</h1>{price}
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div></body></html>"""
    text = extract(PRODUCT_HEAD + body)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "$179.00" in text
    assert "Regular price" not in text and "Sale price" not in text and "Unit price" not in text
    assert "Regular price" in extract(PRODUCT_HEAD + body, params=Params(screen_reader_text=False))["text"]
    shown = body.replace('class="sr-only"', 'class="sr-only md:not-sr-only"')
    assert "Sale price" in extract(PRODUCT_HEAD + shown)["text"]
    article_head = PRODUCT_HEAD.replace('content="product"', 'content="article"')
    assert "Regular price" in extract(article_head + body)["text"]  # not a product's page: the rule is off


def test_a_product_for_sale_on_a_page_typed_article_is_a_products_page():
    # WooCommerce's SEO plugins type every product's page Open Graph "article"; its JSON-LD still declares one
    # Product with an Offer. A blog post marked up with a Product (no Offer) or a grid of several stays no product.
    price = '<div class="price"><span class="screen-reader-text">Regular price</span> $179.00</div>'
    body = f"""<body><div class="product"><h1>Wool Runner</h1>{price}
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div></body></html>"""
    offer = '{"@type": "Product", "name": "Wool Runner", "offers": {"@type": "Offer", "price": "179.00"}}'
    head = f"""<html><head><title>Wool Runner | Example Shop</title><meta property="og:type" content="article">
    <script type="application/ld+json">{offer}</script></head>"""
    text = extract(head + body)["text"]
    assert "$179.00" in text and "Regular price" not in text
    assert "Regular price" in extract(head + body, params=Params(offered_products=False))["text"]
    assert "Regular price" in extract(head.replace('"Offer"', '"Rating"') + body)["text"]  # no offer: a review
    grid = head.replace(offer, f"[{offer}, {offer}]")
    assert "Regular price" in extract(grid + body)["text"]  # two products on sale: a category's grid


def test_a_product_pages_text_starts_at_its_name():
    # Above a product's name: the shop's header, a promotion, the seller's badge, in the product's container.
    header = "<p>The Professional's Source Since 1973</p><p>Ask Our Experts 212-444-6615 any day of the week</p>"
    body = f"""<body><div class="page">{header}<h1>Wool Runner</h1>
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div></body></html>"""
    text = extract(PRODUCT_HEAD + body)["text"]
    assert text.startswith("Wool Runner")
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Ask Our Experts" in extract(PRODUCT_HEAD + body, params=Params(product_headline=False))["text"]


def test_closed_dialogs_and_modals_are_not_shown():
    # A shop's refund and privacy policies wait in modals (aria-modal) at the end of the page, opened by a footer
    # link: long text, which a region reaching the footer would take. A <dialog> without "open" is not rendered.
    clause = "Returns are accepted within thirty days of delivery, as clause {0} of the policy says. " * 5
    policy = "".join(f"<p>{clause.format(i)}</p>" for i in range(30))
    html = f"""<html><head><title>Wool Runner | Example Shop</title></head><body>
    <div class="product"><h1>Wool Runner</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
    <footer><div role="dialog" aria-modal="true"><h2>Refund policy</h2>{policy}</div>
    <dialog><p>Sign up for our newsletter and get ten percent off your first order today.</p></dialog>
    <dialog open><p>This dialog is open, and shown to every visitor of the page.</p></dialog></footer></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "clause" not in text and "newsletter" not in text
    assert any("This dialog is open" in block.text for block in prepare(html).blocks)


def test_an_article_without_running_text_is_spread_content():
    # A shop category named in a six-word headline (no section name) with a three-word tagline under it: the
    # region anchored on the headline holds no running text, the product cards below it are the content.
    cards = "".join(
        f'<div class="card"><a href="/p/{i}"><h3>Desk model {i}</h3></a><div>${100 + i}.99</div>'
        f"<div>Oak veneer {i}</div></div>"
        for i in range(12)
    )
    html = f"""<html><head><title>Desks and computer desks for home | Example Shop</title></head><body>
    <nav><ul>{NAV}</ul></nav><main><h1>Desks and computer desks for home</h1><p>Work from home.</p>
    <div class="grid">{cards}</div></main></body></html>"""
    assert "Oak veneer 7" in extract(html)["text"]
    assert "Oak veneer 7" not in extract(html, params=Params(min_line_words=0))["text"]


def test_whole_card_links_are_a_listing_s_text():
    # A front page without a headline: each teaser is one link around its title and summary. Scored as links,
    # the summaries push the region onto the one unlinked intro line; read as cards, they are the content.
    cards = "".join(
        f'<a class="card" href="/story/{i}"><h3>Story {i} of the day</h3><p>{PARAGRAPHS[i % 4]} ({i})</p></a>'
        for i in range(8)
    )
    html = f"""<html><head><title>Example News: the latest stories</title></head><body><nav><ul>{NAV}</ul></nav>
    <div class="intro"><p>Everything we published this week about the city, its budget and its people.</p></div>
    <div class="grid">{cards}</div><footer><p>© 2024 Example News. All rights reserved.</p></footer></body></html>"""
    text = extract(html)["text"]
    assert f"{PARAGRAPHS[1]} (5)" in text
    assert "Section 3" not in text
    assert f"{PARAGRAPHS[1]} (5)" not in extract(html, params=Params(card_chars=0))["text"]
    # Under a headline the same cards are teasers after the story: links, as before.
    story = html.replace('<div class="intro">', "<main><h1>Example News: the latest stories</h1>")
    assert f"{PARAGRAPHS[1]} (5)" not in extract(story)["text"]


def test_a_short_linked_name_between_a_card_s_kept_lines_is_kept():
    # A ranking or a job board is spread content, where links shorter than ``region_link_chars`` are navigation;
    # but a card's name is such a link between its plain lines (rank, summary, score). Badges repeated on every
    # card and linked prices or counts stay out.
    names = ["Aurora", "Basalt Works", "Cinder", "Dunmore Labs", "Ember", "Fjordline", "Granite", "Halcyon"]
    cards = "".join(
        f'<div class="item"><div class="rank">{i + 1}.</div><div class="name"><a href="/p/{i}">{name}</a></div>'
        f'<div class="about">Plans from ${20 + i} a month</div><div><a href="/sale">Sale</a></div>'
        f'<div class="score">Score {9 - i / 10:.1f}</div>'
        f'<div><a href="/p/{i}#reviews">{10 + i} Reviews</a></div><div>Updated this week</div></div>'
        for i, name in enumerate(names)
    )
    html = f"""<html><head><title>Top Ranked Software | Example</title></head><body><nav><ul>{NAV}</ul></nav>
    <main><h1>Top Ranked Software</h1><div class="list">{cards}</div></main>
    <footer><p>© 2024 Example. All rights reserved.</p></footer></body></html>"""
    lines = extract(html)["text"].split("\n")
    assert "Basalt Works" in lines and "Halcyon" in lines
    assert "Sale" not in lines and "12 Reviews" not in lines
    assert "Basalt Works" not in extract(html, params=Params(card_links=False))["text"].split("\n")


def test_a_section_heading_sharing_letters_with_the_title_is_not_the_headline():
    # Any English title shares most of its letters with any sentence: an <h2> must share the title's words to be
    # the headline (a testimonial's heading halfway down a service page is not), while an <h1> reworded for the
    # search engines is still recognised by its letters.
    html = f"""<html><head><title>Cybersecurity Consulting Services | Example</title></head><body>
    <nav><ul>{NAV}</ul></nav><main><section><h1>Elevate security maturity and move from reactive to ready</h1>
    <p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p></section>
    <section><h2>How SiteOne transformed security with Example Services</h2><p>{PARAGRAPHS[2]}</p></section>
    </main></body></html>"""
    result = extract(html)
    assert result["title"] == "Cybersecurity Consulting Services"
    assert all(paragraph in result["text"] for paragraph in PARAGRAPHS[:3])
    reworded = f"""<html><head><title>Spiced Honey Pear Jam Recipe | Example</title></head><body>
    <main><h1>Homemade Spiced Honey Pear Jam for the Holidays</h1><p>{PARAGRAPHS[0]}</p></main></body></html>"""
    assert extract(reworded)["title"] == "Homemade Spiced Honey Pear Jam for the Holidays"


REPLIES = [
    "I had the same problem after the update; turning the sync off and on again on every device fixed it for me.",
    "Check the storage settings first, the option moved to a different menu in the latest version of the app.",
    "Thanks both, the second suggestion worked. The setting was hidden under the advanced section of the menu.",
    "For what it is worth, support told me the fix is coming in the next release, so waiting is also an option.",
]


def _post(author: str, text: str) -> str:
    return (
        f'<article class="message"><div class="message-user"><a href="/u/{author}">{author}</a></div>'
        f'<div class="message-date">Jul 10, 2022</div><div class="message-body"><p>{text}</p></div>'
        f'<ul class="message-actions">{"".join(f"<li><a href=/a{i}>Action {i}</a></li>" for i in range(12))}</ul>'
        "</article>"
    )


def test_forum_thread_keeps_every_post_but_not_the_navigation():
    # The first post is the "article"; the replies share its tag and class, so they are content too (unlike a news
    # article's comment section, whose items differ from the article's own container). The link lists between
    # posts cut the dense region after the first post: only the repeated-structure rule brings the replies back.
    posts = "".join(_post(f"user{i}", text) for i, text in enumerate([PARAGRAPHS[0], *REPLIES]))
    _assert_whole_thread(_thread_page(posts, html_class=' class="has-sidebar uix_hasCrumbs"'))


def _thread_page(posts: str, html_class: str = "") -> str:
    return f"""<html{html_class}><head><title>Sync stopped working | Example Forums</title></head>
    <body><nav><ul>{NAV}</ul></nav><h1>Sync stopped working</h1><div class="thread">{posts}</div>
    <aside class="sidebar"><ul>{NAV}</ul></aside></body></html>"""


def _assert_whole_thread(html: str) -> None:
    text = extract(html)["text"]
    assert PARAGRAPHS[0] in text
    for reply in REPLIES:
        assert reply in text
    assert "Section 3" not in text


def test_a_threads_first_post_with_extra_classes_still_finds_the_replies():
    # XenForo marks the opening post "message message-threadStarterPost ...": its class differs from the replies'
    # "message", so no sibling had the same class and the thread kept its first post only. Class words that hold
    # one another's make items of the same kind.
    first = _post("user0", PARAGRAPHS[0]).replace('class="message"', 'class="message message-threadStarterPost"', 1)
    replies = "".join(_post(f"user{i + 1}", text) for i, text in enumerate(REPLIES))
    html = _thread_page(first + replies)
    _assert_whole_thread(html)
    assert REPLIES[-1] not in extract(html, params=Params(repeat_related=False))["text"]


def test_comments_nested_inside_answers_are_not_posts():
    # Q&A pages: each answer (a repeated post, brought back by the repeated-structure rule past the link lists)
    # carries its own small comment thread, flagged by its class.
    def answer(text: str, remark: str) -> str:
        return (
            f'<div class="answer"><div class="answer-body"><p>{text}</p></div>'
            f'<div class="comments"><p>{remark}</p></div>'
            f'<ul class="actions">{"".join(f"<li><a href=/a{i}>Action {i}</a></li>" for i in range(12))}</ul></div>'
        )

    remarks = [f"Does not work for me on version {i}, the menu entry is gone since the last update." for i in range(4)]
    answers = "".join(answer(text, remark) for text, remark in zip([PARAGRAPHS[0], *REPLIES[:3]], remarks, strict=True))
    html = f"""<html><head><title>Sync stopped working | Example Q&amp;A</title></head>
    <body><nav><ul>{NAV}</ul></nav><h1>Sync stopped working</h1><div class="answers">{answers}</div></body></html>"""
    text = extract(html)["text"]
    assert all(reply in text for reply in [PARAGRAPHS[0], *REPLIES[:3]])
    assert "Does not work for me" not in text
    assert "Does not work for me" in extract(html, params=Params(post_furniture=False))["text"]


SHORT_STORY = PARAGRAPHS[:2]
COMMENTS = [
    "This is the worst decision the council has made in years, and everyone who voted for it should resign now.",
    "Libraries are the only public space left where you do not have to buy anything, cutting them is a mistake.",
    "Lower taxes are fine but someone has to pay for the roads, the schools and the parks that we all use daily.",
    "I went to the meeting and most of the speakers were in favour, the press coverage has been very one-sided.",
    "Does anyone know whether the new budget changes the opening hours of the swimming pool on the east side?",
]


def _comment(author: str, text: str) -> str:
    return (
        f'<div class="op-head">~{author} [2012-01-10 14:26]</div><p>{text}</p>'
        '<div class="vote-up">5</div><div class="vote-down">0</div><div class="vote-up">+</div>'
    )


def test_short_article_ends_before_comments_with_vote_widgets():
    # The comments are denser than the two-paragraph story and carry no furniture class, so the region anchored on
    # the headline runs on into them; after the valley of rating widgets and links, most lines are tiny (votes):
    # the region ends there.
    labels = ("rate", "yes 725", "no 96", "Nick", "Your opinion")
    widgets = "".join(f'<div class="rate">{label}</div>' for label in labels)
    links = "".join(f'<li><a href="/t{i}">Another story about the city budget number {i}</a></li>' for i in range(8))
    comments = "".join(_comment(f"user{i}", c) for i, c in enumerate(COMMENTS * 3))
    html = f"""<html><head><title>Council approves budget</title></head><body>
    <div class="story"><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in SHORT_STORY)}</div>
    {widgets}<ul>{links}</ul><div class="op-list">{comments}</div></body></html>"""
    text = extract(html)["text"]
    for paragraph in SHORT_STORY:
        assert paragraph in text
    for comment in COMMENTS:
        assert comment not in text


def test_article_ends_at_the_line_announcing_its_comments():
    # Fewer comments than the article holds text (the cut needs a quarter of the region's value before it).
    comments = "".join(f"<p>{c}</p><p>reader{i}</p>" for i, c in enumerate(COMMENTS[:3]))
    for announcement in ("13 Comment(s)", "Komentarze (25)", "Комментарии 45"):
        html = f"""<html><head><title>Council approves budget</title></head><body><div>
        <div class="story"><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
        <div>{announcement}</div>{comments}</div></body></html>"""
        text = extract(html)["text"]
        assert PARAGRAPHS[-1] in text
        assert COMMENTS[0] not in text, announcement


def test_polish_comment_section_is_furniture():
    comments = "".join(f'<div class="komentarzWiersz"><p>{c}</p></div>' for c in COMMENTS)
    html = f"""<html><head><title>Council approves budget</title></head><body><div>
    <h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}
    <div class="komentarze">{comments}</div></div></body></html>"""
    text = extract(html)["text"]
    assert PARAGRAPHS[0] in text
    assert COMMENTS[0] not in text


def test_linked_heading_is_a_teaser_not_the_headline():
    # A listing named after one of its items: the item's linked heading must not anchor an "article" on itself.
    items = "".join(
        f'<div class="card"><h2><a href="/s{i}">Story number {i} of the technology section</a></h2>'
        f"<p>{PARAGRAPHS[i % 4]}</p></div>"
        for i in range(6)
    )
    html = f"""<html><head><title>Story number 3 of the technology section</title></head><body>
    <nav><ul>{NAV}</ul></nav><main>{items}</main></body></html>"""
    text = extract(html)["text"]
    assert not text.startswith("Story number 3")  # anchored on the item, the text would start there
    assert "Story number 1" in text and "Story number 5" in text
    assert all(p in text for p in PARAGRAPHS)


def test_headline_split_by_a_nested_subtitle_still_anchors_the_article():
    teaser = "Earlier story {}: the council met again to talk about the budget plan."
    teasers = "".join(f"<p>{teaser.format(i)}</p>" for i in range(9))
    html = f"""<html><head><title>Council approves budget: libraries lose</title></head><body>
    <div class="list">{teasers}</div><div class="story"><h1>Council approves budget<div>Libraries lose</div></h1>
    {"".join(f"<p>{p}</p>" for p in SHORT_STORY)}</div></body></html>"""
    text = extract(html)["text"]
    assert text.startswith("Council approves budget\n")
    assert "Earlier story 3" not in text


def test_hidden_elements_are_skipped_but_their_tail_is_kept():
    html = (
        "<html><body><div><p>" + PARAGRAPHS[0] + '<span style="display: none">HIDDEN SPAM</span> and the tail stays.'
        "</p><p hidden>Never shown either.</p><p>" + PARAGRAPHS[1] + "</p></div></body></html>"
    )
    text = extract(html)["text"]
    assert "and the tail stays." in text
    assert "HIDDEN SPAM" not in text
    assert "Never shown" not in text


def test_nested_and_doubly_hidden_elements():
    html = (
        "<html><body><div><p>" + PARAGRAPHS[0] + '<span hidden style="display:none">A<b style="display:none">B</b>'
        "</span>tail one <i>kept</i><em style='visibility: hidden'>C</em> tail two</p></div></body></html>"
    )
    text = extract(html)["text"]
    assert text == PARAGRAPHS[0] + "tail one kept tail two"  # no A, B or C: each sits in a hidden element


def test_named_anchor_left_open_is_not_a_link():
    # "<a name=top>" never closed: an HTML5 parser (like a browser) carries it on around the whole page, and the
    # story would count as link text. An anchor with only a name or id is a placeholder: its text is plain text.
    html = f"""<html><head><title>Council approves budget</title></head><body><a name="top">
    <table><tr><td><ul>{NAV}</ul></td><td><h1>Council approves budget</h1>
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</td></tr></table></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS)
    assert "Section 3" not in text


def test_streamed_segment_is_shown_in_its_placeholder():
    # React's streaming server rendering parks late content in <div hidden id="S:n"> and moves it to its
    # <template id="B:n"> on load: it is shown, where the placeholder is. Other hidden elements stay hidden.
    html = f"""<html><head><title>Council approves budget</title></head><body><nav><ul>{NAV}</ul></nav>
    <main><h1>Council approves budget</h1><template id="B:1"></template><p>Loading</p></main>
    <footer><p>© 2024 Daily Example. All rights reserved.</p></footer>
    <div hidden id="S:1">{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div><div hidden><p>{COMMENTS[0]}</p></div>
    <script>$RC("B:1","S:1")</script></body></html>"""
    text = extract(html)["text"]
    assert text.startswith("Council approves budget\n" + PARAGRAPHS[0])
    assert all(p in text for p in PARAGRAPHS)
    assert COMMENTS[0] not in text
    assert "All rights reserved" not in text


def test_article_ends_at_a_linked_teaser_heading():
    # After the story, a list of teasers: each a heading linking to another story, then its summary (as dense as
    # the story, so the dense region runs on into them and its container would be the whole page). The first
    # such heading after most of the story ends the region, whose container is then the story's own.
    teasers = "".join(
        f'<div class="item"><h3><a href="/s{i}">Another story about the city number {i}</a></h3><p>{c}</p></div>'
        for i, c in enumerate(COMMENTS[:3])
    )
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="page">
    <div><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
    <div>{teasers}</div></div></body></html>"""
    text = extract(html)["text"]
    assert PARAGRAPHS[-1] in text
    assert COMMENTS[0] not in text
    assert "Another story" not in text


@pytest.mark.parametrize(
    ("href", "url"),
    [
        ("https://www.amazon.com/dp/B0BLXGJ27V/", "https://www.example.com/best-ovens"),  # a shop
        ("https://amzn.to/2SohRBY", None),  # the page's own address from its canonical link
        ("#oven-3", None),  # a permalink to the heading itself
    ],
)
def test_heading_linking_off_the_site_does_not_end_the_article(href: str, url: str | None) -> None:
    # A round-up: the story, then the products, each under a heading linking to a shop (or to itself). They
    # come after half of the article's value, where a heading linking to another page of the site would end it
    # (the first of a teaser list, below): the products, their names too, are the article's text.
    oven = "Maker's countertop oven number {}"
    products = "".join(f'<h3><a href="{href}">{oven.format(i)}</a></h3><p>{p}</p>' for i, p in enumerate(COMMENTS[:3]))
    html = f"""<html><head><title>The best ovens</title>
    <link rel="canonical" href="https://www.example.com/best-ovens"></head><body><div class="page">
    <div><h1>The best ovens</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS + COMMENTS[4:])}</div>
    <div>{products}</div><div><h3><a href="/s9">Another story</a></h3><p>{COMMENTS[3]}</p></div></div></body></html>"""
    text = extract(html, url=url)["text"]
    assert PARAGRAPHS[-1] in text and COMMENTS[2] in text and oven.format(2) in text
    assert "Another story" not in text
    assert COMMENTS[0] not in extract(html, url=url, params=Params(offsite_headings=False))["text"]


def test_page_site_from_url_canonical_link_or_og_url() -> None:
    canonical = '<head><link href="https://news.example.co.uk/a" rel="canonical"></head>'
    assert page_site(canonical, None) == "example.co.uk"
    assert page_site(canonical, "https://www.other.org/a") == "other.org"  # the caller's address first
    assert page_site("<meta property='og:url' content='http://blog.example.com/p/1'>", None) == "example.com"
    assert page_site("<link rel=stylesheet href='https://cdn.example.net/a.css'>", None) is None


def test_short_story_under_a_long_comment_thread():
    # The comments (furniture by their class) are more than nine tenths of the page's text. That alone would
    # make the furniture flags suspect (a page-wide wrapper can be misnamed), but the headline stands outside
    # the furniture: the flags are right, and the comments stay out. So do the boxes that share the story's
    # class: they are mostly furniture ("popular"), not posts of a thread.
    comments = "".join(f'<div class="comment"><p>reader{i}: agreed, thanks for the story!</p></div>' for i in range(60))
    popular = [f"Most read story number {i} of this week about the city and its budget plans" for i in range(4)]
    boxes = "".join(f'<div class="box"><div class="popular">{line}</div></div>' for line in popular)
    html = f"""<html><head><title>Council approves budget</title></head><body>
    <div class="box"><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in SHORT_STORY)}</div>
    <div id="comments">{comments}</div>{boxes}</body></html>"""
    text = extract(html)["text"]
    assert text == "\n".join(["Council approves budget", *SHORT_STORY])


def test_tree_numbers_elements_in_document_order():
    from spiders.extraction.dom import linearise
    from spiders.extraction.parse import parse_html

    blocks, tree = linearise(parse_html("<div id=a><p>one <b>bold</b></p><ul><li>two</li><li>three</li></ul></div>"))
    assert [b.text for b in blocks] == ["one bold", "two", "three"]
    div = tree.parent[blocks[0].element]  # <b> is seen through: "one bold" is the <p>'s line
    assert tree.tag(div) == "div" and tree.tag(blocks[0].element) == "p"
    ul = tree.parent[blocks[1].element]
    assert tree.children(ul) == [blocks[1].element, blocks[2].element]
    assert tree.children(div) == [blocks[0].element, ul]
    assert all(div < b.element < tree.end[div] for b in blocks)  # a subtree is a range of indices
    assert tree.ancestors(blocks[2].element)[:3] == [blocks[2].element, ul, div]


def test_a_section_named_in_a_word_or_two_is_a_listing():
    # "Science" is the page's title and its <h1>, but it names a section: the text under it is only the first of
    # many teasers (each cut off from the next by its list of topic links), and the page is a listing, whose
    # content includes the teasers' linked titles. Under a headline of more words it is read as an article,
    # whose lines that are all link are dropped.
    tags = "".join(f"<li><a href=/t{i}>topic {i}</a></li>" for i in range(25))
    items = "".join(
        f'<div class="card"><h2><a href="/s{i}">Story number {i} of the section</a></h2><p>{p}</p><ul>{tags}</ul></div>'
        for i, p in enumerate(PARAGRAPHS)
    )
    html = f"""<html><head><title>Science | Daily Example</title></head><body><nav><ul>{NAV}</ul></nav>
    <main><h1>Science</h1>{items}</main></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS)
    assert "Story number 2 of the section" in text
    assert "Section 3" not in text
    story = extract(html.replace("Science", "Science teachers win the national prize"))["text"]
    assert story.startswith("Science teachers win the national prize\n" + PARAGRAPHS[0])
    assert "Story number 2 of the section" not in story


def test_pathologically_deep_or_wide_markup_is_bounded():
    from spiders.extraction.parse import _bounded

    # Nesting beyond 256 levels is flattened before parsing (as libxml2 and browsers cap it); the text stays.
    assert extract("<div>" * 100_000 + "deep text" + "</div>" * 100_000)["text"] == "deep text"
    flattened = _bounded("<div>" * 6000 + "x" + "</div>" * 6000)
    assert flattened.count("<div>") == 256 and flattened.count("</div>") == 256 and "x" in flattened
    # Thousands of options (quadratic for the parser): their tags go, and no option is ever main text.
    assert "<option>" not in _bounded("<select>" + "<option>x" * 6000 + "</select>")
    # Ordinary pages (few tags) are passed on untouched, even when deep.
    page = "<div>" * 300 + "x" + "</div>" * 300
    assert _bounded(page) is page


def test_a_page_is_read_up_to_a_bounded_number_of_tags():
    from spiders.extraction.parse import _MAX_TAGS, _bounded

    items = "".join(f"<li>item number {i} of a very long list</li>" for i in range(_MAX_TAGS + 10))
    cut = _bounded("<html><body><ul>" + items + "</ul></body></html>")
    assert "item number 0 " in cut and f"item number {_MAX_TAGS - 4} " in cut  # html, body, ul and the items
    assert f"item number {_MAX_TAGS - 3} " not in cut
    text = extract("<html><body><ul>" + items + "</ul></body></html>")["text"]
    assert text.startswith("item number 0 ") and f"item number {_MAX_TAGS} " not in text


def test_the_scan_for_pathological_markup_and_the_page_itself_are_bounded():
    from spiders.extraction.parse import _MAX_BYTES, _MAX_CHARS, _MAX_SCANNED, _bounded, clip_bytes

    # 10^6 nested <div>s are all dropped, but scanning them is work too: the scan stops (and the page is cut).
    deep = _bounded("<p>start</p>" + "<div>" * (_MAX_SCANNED + 10) + "tail")
    assert deep.startswith("<p>start</p>") and "tail" not in deep and deep.count("<div>") == 256
    # A page is read up to its _MAX_CHARS-th character, ...
    huge = "<html><body><p>" + "word " * (_MAX_CHARS // 5) + "</p><p>after the limit</p></body></html>"
    text = extract(huge)["text"]
    assert text.startswith("word word") and "after the limit" not in text and len(text) < _MAX_CHARS
    # ... and raw bytes are clipped before decoding, at a byte that is never inside a character.
    body = ("<p>" + "中文 " * (_MAX_BYTES // 7) + "</p>").encode("utf-8")
    clipped = clip_bytes(body)
    assert len(clipped) <= _MAX_BYTES and clipped.decode("utf-8").endswith("中文")
    assert clip_bytes(b"<p>short</p>") == b"<p>short</p>"
    assert extract(body)["text"].startswith("中文 中文")
    # The metadata scans read no further than the parser: what lies beyond the limit says nothing of the page.
    from spiders.extraction import prepare

    metadata = '<script type="application/ld+json">{"@type": "DiscussionForumPosting"}</script>'
    assert prepare("<p>a post</p>" + metadata).discussion
    assert not prepare("<p>a post</p>" + " " * _MAX_CHARS + metadata).discussion


def test_a_section_heading_is_confirmed_as_headline_by_words_not_letters():
    # <title> and a landing page's section heading share most of their letters, as any two English sentences of
    # that length do, but few words: the heading must not anchor an "article" over the sections above it. An
    # <h1> keeps the loose likeness (a headline reworded for the page's <title>).
    from spiders.extraction.parse import parse_html
    from spiders.extraction.title import find_title

    landing = """<html><head><title>Example: AI-Powered Unified Inference Cloud Infrastructure</title></head>
    <body><h2>A unified inference cloud to build full-stack AI apps</h2></body></html>"""
    assert find_title(parse_html(landing)) == "Example: AI-Powered Unified Inference Cloud Infrastructure"
    recipe = """<html><head><title>Spiced Honey Pear Jam Recipe | The Kitchen</title></head>
    <body><h1>Homemade Spiced Honey Pear Jam for the Holidays</h1></body></html>"""
    assert find_title(parse_html(recipe)) == "Homemade Spiced Honey Pear Jam for the Holidays"


def test_deeply_nested_posts_keep_every_reply_without_user_cards():
    # A forum whose posts nest their text eight levels deep (post > inner > cell > main > content > body > wrapper),
    # beside a user card (title, join date, post count) and a signature, both furniture inside a post. The link
    # lists between posts cut the dense region after the first post: the repeated posts must be found far up.
    def post(author: str, text: str) -> str:
        body = f'<div class="bbWrapper"><p>{text}</p></div>'
        for name in ("message-body", "message-userContent", "message-content", "message-main", "message-cell"):
            body = f'<div class="{name}">{body}</div>'
        card = (
            f'<div class="message-cell message-cell--user"><h4>{author}</h4><h5 class="userTitle">Well-known member'
            f'</h5><div class="message-userExtras"><dl><dt>Joined</dt><dd>Feb 8, 2017</dd><dt>Messages</dt>'
            f"<dd>5,421</dd></dl></div></div>"
        )
        signature = '<div class="message-signature">always learning, often laughing</div>'
        actions = "".join(f"<li><a href=/a{i}>Action {i}</a></li>" for i in range(12))
        inner = f'<div class="message-inner">{card}{body}{signature}<ul>{actions}</ul></div>'
        return f'<article class="message">{inner}</article>'

    posts = "".join(post(f"user{i}", text) for i, text in enumerate([PARAGRAPHS[0], *REPLIES]))
    html = f"""<html><head><title>Sync stopped working | Example Forums</title></head>
    <body><nav><ul>{NAV}</ul></nav><h1>Sync stopped working</h1><div class="thread">{posts}</div></body></html>"""
    text = extract(html)["text"]
    assert all(reply in text for reply in [PARAGRAPHS[0], *REPLIES])
    assert "5,421" not in text and "Well-known member" not in text and "often laughing" not in text
    assert REPLIES[-1] not in extract(html, params=Params(repeat_levels=4))["text"]


def test_a_list_the_text_announces_is_kept_though_linked():
    courses = "".join(f'<li><a href="/c{i}">Introduction to course number {i}</a></li>' for i in range(6))
    shares = "".join(f'<li><a href="/share{i}">Network {i}</a></li>' for i in range(6))
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2])}
    <p>Here are some of the courses the city library will keep offering:</p><ul>{courses}</ul>
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS[2:])}<p>Share this:</p><ul>{shares}</ul></div></body></html>"""
    text = extract(html)["text"]
    assert "Introduction to course number 4" in text and PARAGRAPHS[-1] in text
    assert "Network 2" not in text  # a two-word label announces nothing
    assert "Introduction to course number 4" not in extract(html, params=Params(announced_lists=False))["text"]


def test_figure_captions_are_not_the_article_text():
    caption = "<figcaption>The council chamber on Tuesday. | Photo by J. Doe</figcaption>"
    figure = f'<figure><img src="/a.jpg">{caption}</figure>'
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1><p>{PARAGRAPHS[0]}</p>{figure}
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS[1:])}</div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS) and "Photo by" not in text
    assert "Photo by" in extract(html, params=Params(drop_captions=False))["text"]


def test_article_ends_at_its_comments_line_under_a_longer_thread():
    # The comments hold twice the story's text: a quarter of the region's value before the line is enough.
    comments = "".join(f"<p>{c}</p><p>reader{i}</p>" for i, c in enumerate(COMMENTS * 2))
    html = f"""<html><head><title>Council approves budget</title></head><body><div>
    <div class="story"><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
    <div>Komentarze (10)</div>{comments}</div></body></html>"""
    assert PARAGRAPHS[-1] in extract(html)["text"]
    assert COMMENTS[0] not in extract(html)["text"]
    assert COMMENTS[0] in extract(html, params=Params(comments_share=0.5))["text"]


def test_page_without_text():
    assert extract("<html><body><img src=a.png></body></html>") == {"text": "", "title": None, "published": None}


@pytest.mark.parametrize(
    "html",
    [
        "",
        b"",
        "   \n\t ",
        bytes(range(256)) * 200,
        b"\x00\x01\x02<html>\xff\xfe<p>broken \xe4\xb8 utf-8</p>",
        "<div>" * 100_000 + "deep text" + "</div>" * 100_000,
        "<p>" + "word " * 400_000 + "</p>",
        "x" * 2_000_000,
        '<?xml version="1.0" encoding="utf-8"?><html><body><p>xml declared</p></body></html>',
        "<html><body><p>unclosed <b><i><table><tr><td>cell<p>para",
        "<script>" + "var a = 1;" * 1000,
        # thousands of valleys for the end-of-article rule (linear, or this page would take minutes)
        ("<p>" + "word " * 60 + "</p><p><a href=/x>" + "link " * 60 + "</a></p>") * 3000,
    ],
)
def test_hostile_input_never_raises(html):
    result = extract(html)
    assert set(result) == {"text", "title", "published"}
    assert isinstance(result["text"], str)


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("发布时间：2011年6月3日 14:20", "2011-06-03T14:20"),
        ("Data publikacji Pią, 2011-06-03 14:20", "2011-06-03T14:20"),
        ("2012/01/12", "2012-01-12"),
        ("Published June 3, 2011", "2011-06-03"),
        ("4 Ιανουαρίου 2012 and 3 March 2012", "2012-03-03"),
        ("2011-13-45 is no date", None),
        ("no date here", None),
    ],
)
def test_parse_date(text, iso):
    assert parse_date(text) == iso


def _sample(source: str, lang: str, count: int) -> list[dict]:
    with open(DEV_SET / "manifest.jsonl", encoding="utf-8") as manifest:  # not splitlines(): texts hold U+2028
        rows = [json.loads(line) for line in manifest]
    rows = [r for r in rows if r["source"] == source and r["lang"] == lang]
    return rows[:: max(1, len(rows) // count)][:count]


@pytest.mark.skipif(not DEV_SET.is_dir(), reason="extraction-dev set not available")
@pytest.mark.parametrize(
    ("source", "lang", "floor"),
    # Just below what the extractor reaches on these samples (zh 0.953, ru 0.899, pl 0.949, el 0.987, wcxb 0.845,
    # scrapinghub 0.916): a change that loses ground anywhere fails here. (wcxb's sample holds two of the few pages
    # that lost when linked headings stopped anchoring articles, a change that gains on the whole set; its figure
    # fell from 0.849 with the parser switch although its one changed page gained, 0.42 -> 0.57 F1: precision and
    # recall are averaged apart, and that page traded precision for recall.)
    [
        ("daniel", "zh", 0.94),
        ("daniel", "ru", 0.89),
        ("daniel", "pl", 0.935),
        ("daniel", "el", 0.97),
        ("wcxb", "en", 0.835),
        ("scrapinghub", "en", 0.90),
    ],
)
def test_quality_floor_on_a_fixed_dev_sample(source, lang, floor):
    from bench.extraction_score import aggregate, score_page

    scores = []
    for row in _sample(source, lang, 25):
        body = gzip.decompress((DEV_SET / row["html"]).read_bytes())
        scores.append(score_page(extract(body)["text"], row["text"]))
    assert aggregate(scores).f1 >= floor


def test_bylines_and_author_bios_are_not_the_article_text():
    # A byline's class also carries a content word ("article-byline"), so it is not furniture; its lines (author,
    # date) and the author's bio are still not the story's text. The date is still read from the byline.
    byline = '<div class="article-byline"><p>By Jane Doe, City Reporter</p><p>May 14, 2024</p></div>'
    bio = '<div class="author bio"><p>Jane Doe has covered the city council for the Example since 2015.</p></div>'
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1>{byline}{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}{bio}</div></body></html>"""
    result = extract(html)
    assert all(p in result["text"] for p in PARAGRAPHS)
    assert "Jane Doe" not in result["text"] and "May 14" not in result["text"]
    assert result["published"] == "2024-05-14"
    text = extract(html, params=Params(drop_bylines=False))["text"]
    assert "By Jane Doe, City Reporter" in text and "covered the city council" in text
    # A "byline" holding most of the page is a misnamed wrapper: its text stays.
    wrapped = html.replace('<div class="story">', '<div class="story entry-byline">')
    assert all(p in extract(wrapped)["text"] for p in PARAGRAPHS)


def test_short_furniture_lines_inside_an_article_region_are_dropped():
    # A thread whose posts are no repeated set (each reply is laid out differently), with a user card between the
    # question and the reply: its short lines are furniture inside the region. Headings in a furniture-named
    # wrapper are kept (short by nature).
    card = '<div class="userinfo"><p>Senior Member</p><p>Joined: Feb 2017</p><p>9,420</p></div>'
    html = f"""<html><head><title>Sync stopped working</title></head><body><div class="thread">
    <h1>Sync stopped working</h1><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>{card}<p>{PARAGRAPHS[2]}</p>
    <div class="sidebar-section"><h3>What the council decided</h3></div><p>{PARAGRAPHS[3]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS) and "What the council decided" in text
    assert "Senior Member" not in text and "9,420" not in text
    assert "Senior Member" in extract(html, params=Params(furniture_line_chars=0))["text"]


def test_short_furniture_lines_are_dropped_from_a_region_without_a_headline():
    # A phpBB-like thread whose <title> is shown only as a linked heading: no article is anchored, yet the
    # densest run is the thread (not spread content). The user card between the posts is furniture inside that
    # region, and its short lines go as in an article.
    card = '<dl class="postprofile"><dd>Posts: 2630</dd><dd>Joined: Feb 2017</dd><dd>Senior Member</dd></dl>'
    html = f"""<html><head><title>Sync stopped working - Example Forum</title></head><body><div class="page">
    <h2><a href="/t/1">Sync stopped working</a></h2><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>{card}
    <p>{PARAGRAPHS[2]}</p><p>{PARAGRAPHS[3]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS)
    assert "Posts: 2630" not in text and "Senior Member" not in text
    assert "Senior Member" in extract(html, params=Params(furniture_line_chars=0))["text"]


def test_framework_classes_that_hide_an_element_hide_it():
    # Webflow's form messages, Bootstrap's "hide" / "d-none" and Bulma's "is-hidden" are display:none by the
    # framework's stylesheet; "d-none d-md-block" shows the element again on wider screens, and Tailwind's
    # "hidden" is too often undone (by a breakpoint or a script) to be trusted.
    html = f"""<html><head><title>Plans</title></head><body><div class="main"><h1>Plans</h1>
    <p>{PARAGRAPHS[0]}</p><div class="w-form-done"><div>Thank you! Your submission has been received!</div></div>
    <div class="w-form-fail"><div>Oops! Something went wrong while submitting the form.</div></div>
    <p>{PARAGRAPHS[1]}</p><p class="lead hide">November 20, 9999 7:00 PM</p><p class="is-hidden">Loading plans</p>
    <p class="d-none d-md-block">{PARAGRAPHS[2]}</p><p class="hidden">{PARAGRAPHS[3]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS)
    assert "Thank you" not in text and "Oops" not in text and "9999" not in text and "Loading" not in text


def test_sign_up_and_call_to_action_boxes_are_not_the_article_text():
    # A newsletter form and a call-to-action box inside the story's region ("newsletter-box", "cta-box"): not
    # furniture by name, but not the story's text either (the byline verdict of the class-name judge).
    signup = '<div class="newsletter-box"><p>Join 800,000 readers who get our weekly health digest.</p></div>'
    cta = '<div class="cta-box"><p>Ready to plan your renovation? Talk to one of our advisers today.</p></div>'
    first, second = ("".join(f"<p>{p}</p>" for p in half) for half in (PARAGRAPHS[:2], PARAGRAPHS[2:]))
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1>{first}{signup}{second}{cta}</div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS)
    assert "800,000 readers" not in text and "Talk to one of our advisers" not in text
    text = extract(html, params=Params(drop_bylines=False))["text"]
    assert "800,000 readers" in text and "Talk to one of our advisers" in text


def test_repeated_loading_placeholders_are_dropped():
    # Slots a script fills on load ("Loading paragraph...") stand several times on the page; a sentence cut short
    # with an ellipsis stands once and stays.
    slots = "<p>Loading paragraph...</p><p>Loading image…</p>"
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1><p>{PARAGRAPHS[0]}</p>{slots}<p>{PARAGRAPHS[1]}</p>{slots}
    <p>{PARAGRAPHS[2]}</p><p>So frustrating…</p><p>{PARAGRAPHS[3]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS[:4])
    assert "Loading" not in text and "So frustrating…" in text
    assert extract(html, params=Params(placeholder_words=0))["text"].count("Loading paragraph...") == 2


def test_closed_faq_answers_and_inactive_tabs_are_text_where_the_selection_takes_them():
    # A FAQ under the text, its answers closed (display:none until a click), and a tab set whose inactive tab is
    # hidden: the references keep both. Other hidden elements stay hidden.
    faq = "".join(
        f'<div class="faq-item"><h3>Question {i}?</h3><div class="faq__answer" style="display: none;"><p>{p}</p>'
        "</div></div>"
        for i, p in enumerate(COMMENTS[:3])
    )
    tabs = (
        f'<div class="tabs"><section role="tabpanel"><p>{PARAGRAPHS[2]}</p></section>'
        f'<section role="tabpanel" hidden><p>{PARAGRAPHS[3]}</p></section></div>'
    )
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>{tabs}
    <h2>Frequently asked questions</h2>{faq}<div style="display:none"><p>Never shown: a script's template.</p></div>
    </div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS) and all(c in text for c in COMMENTS[:3])
    assert "Never shown" not in text
    off = extract(html, params=Params(panels=False))["text"]
    assert PARAGRAPHS[3] not in off and COMMENTS[0] not in off


def test_hidden_panels_do_not_steer_the_region():
    # A long hidden tab in a sidebar is worth nothing to the scan: it cannot pull the region away from the story.
    panel = "".join(f"<p>{c}</p>" for c in COMMENTS * 3)
    html = f"""<html><head><title>Council approves budget</title></head><body>
    <div class="sidebar"><div class="tab-pane" hidden>{panel}</div></div>
    <div class="story"><h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div>
    </body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS) and COMMENTS[0] not in text


def test_one_huge_line_does_not_raise_the_bar_above_the_paragraphs():
    # A tutorial whose terminal transcript is one 3,000-character <pre>: counted in full, the peak density behind
    # the per-line cost is so high that no paragraph around it clears the bar, and the text is the listing alone.
    listing = "<pre>" + " ".join(f"INFO step {i} finished in {i % 7} ms" for i in range(110)) + "</pre>"
    html = f"""<html><head><title>Run the tutorial</title></head><body><div class="doc">
    <h1>Run the tutorial</h1><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p><h2>Start</h2>{listing}
    <p>{PARAGRAPHS[2]}</p><h2>Install</h2><p>{PARAGRAPHS[3]}</p><p>{COMMENTS[0]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(p in text for p in PARAGRAPHS) and COMMENTS[0] in text and "INFO step 109" in text
    off = extract(html, params=Params(peak_line_cap=0))["text"]
    assert PARAGRAPHS[0] not in off or PARAGRAPHS[3] not in off


def test_a_discussion_drops_its_vote_counters_and_repeated_member_titles():
    # A forum thread or Q&A page says so in its metadata (schema.org DiscussionForumPosting, QAPage): there, a line
    # with no letter ("12", "#3": a vote score, a post number) and a short line under several posts (a member's
    # title, "Regular Contributor"; "10 posts", its count read as any count) are not the text. Without that
    # metadata (a news story's numbered list) they stay.
    def post(i: int, text: str) -> str:
        return (
            f'<div class="post"><div class="meta"><div>user{i}</div><div class="rank">Regular Contributor</div>'
            f'<div class="votes">{i + 10}</div><div class="num">#{i + 1}</div><div>{i * 7 + 3} posts</div></div>'
            f'<div class="body"><p>{text}</p>'
            f"</div></div>"
        )

    posts = "".join(post(i, text) for i, text in enumerate([PARAGRAPHS[0], *REPLIES]))
    body = f"""<body><nav><ul>{NAV}</ul></nav><h1>Sync stopped working</h1><div class="thread">{posts}</div></body>"""
    json_ld = '<script type="application/ld+json">{"@type": "DiscussionForumPosting"}</script>'
    head = f"<html><head><title>Sync stopped working | Example Forums</title>{json_ld}</head>"
    text = extract(head + body)["text"]
    assert all(reply in text for reply in [PARAGRAPHS[0], *REPLIES])
    lines = text.split("\n")
    assert "Regular Contributor" not in lines and "11" not in lines and "#2" not in lines and "10 posts" not in lines
    assert prepare(head.replace("DiscussionForumPosting", "QAPage") + body).discussion
    plain = extract(head.replace(json_ld, "") + body)["text"].split("\n")
    assert "Regular Contributor" in plain and "11" in plain and "10 posts" in plain
    off = extract(head + body, params=Params(counter_chars=0, badge_repeats=0))["text"].split("\n")
    assert "Regular Contributor" in off and "11" in off


def test_a_hero_banner_holding_the_headline_is_the_page_s_opening():
    # A service page opens with a "hero banner" holding its <h1> and intro paragraphs; "banner" is a furniture word
    # (cookie and promotion banners), so the opening was dropped. The banner's own parts ("page-hero-banner__copy")
    # share its word; another furniture word inside it ("social-share") is still furniture.
    intro = "We help companies turn their data into an asset, from strategy to the engineering behind it."
    hero = f"""<section class="page-hero-banner"><div class="page-hero-banner__copy"><h1>Data Services</h1>
    <p>{intro}</p></div><div class="social-share"><p>Share this page on your favourite network</p></div></section>"""
    html = f"""<html><head><title>Data Services</title></head><body><nav><a href="/">Home</a></nav>{hero}
    <div class="main">{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}</div></body></html>"""
    text = extract(html)["text"]
    assert text.startswith("Data Services") and intro in text and all(p in text for p in PARAGRAPHS)
    assert "Share this page" not in text
    assert intro not in extract(html, params=Params(hero=False))["text"]
    # A banner that does not hold the headline is still furniture.
    promo = f'<div class="promo-banner"><p>{intro}</p></div>'
    other = html.replace(hero, f"<h1>Data Services</h1>{promo}")
    assert intro not in extract(other)["text"]


def test_an_accordion_s_buttons_are_its_questions_not_interface():
    # Accordions and tabs label their panels with <button aria-expanded> / <button aria-controls>: the question
    # of a FAQ, the name of a benefit. The references keep them; a plain <button> ("Add to Cart") is interface.
    items = "".join(
        f'<div class="item"><button aria-expanded="true" aria-controls="p{i}">Question number {i} about the plan'
        f'</button><div id="p{i}"><p>{p}</p></div></div>'
        for i, p in enumerate(PARAGRAPHS)
    )
    html = f"""<html><head><title>Our plan</title></head><body><nav><a href="/">Home</a></nav><div class="main">
    <h1>Our plan</h1><p>{PARAGRAPHS[0]}</p>{items}<button>Subscribe to the plan now</button>
    <p>{PARAGRAPHS[1]}</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(f"Question number {i} about the plan" in text for i in range(len(PARAGRAPHS)))
    assert all(p in text for p in PARAGRAPHS) and "Subscribe to the plan now" not in text


def test_text_and_title_encoded_twice_are_put_right():
    # UTF-8 bytes read as cp1252 and encoded again before the page was served (the page is valid UTF-8).
    mangled = "It’s a café — the ‘best’".encode().decode("cp1252")
    html = f"<html><head><title>{mangled}</title></head><body><article><h1>{mangled}</h1>"
    html += "".join(f"<p>{paragraph}</p>" for paragraph in [f"{mangled}.", *PARAGRAPHS]) + "</article></body></html>"
    result = extract(html.encode("utf-8"))
    assert result["title"] == "It’s a café — the ‘best’"
    assert "It’s a café — the ‘best’." in result["text"]
    assert "â€" not in result["text"]


def test_an_articles_forms_are_not_its_text():
    # A sign-up form inside a story's region (its labels and fine print are plain lines, not named furniture);
    # a form round the whole page (ASP.NET) or one holding the headline is not interface.
    form = """<form action="/subscribe"><div>Get the weekly digest in your inbox</div><label>Email Address</label>
    <div>By submitting your email you agree to our privacy policy.</div></form>"""
    first, second = ("".join(f"<p>{p}</p>" for p in half) for half in (PARAGRAPHS[:2], PARAGRAPHS[2:]))
    body = f"""<body><div class="story"><h1>Council approves budget</h1>{first}{form}{second}</div></body></html>"""
    html = "<html><head><title>Council approves budget</title></head>" + body
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Email Address" not in text and "By submitting" not in text
    assert "By submitting" in extract(html, params=Params(article_forms=False))["text"]
    wrapped = html.replace("<body>", '<body><form action="/page.aspx">').replace("</body>", "</form></body>")
    assert all(paragraph in extract(wrapped)["text"] for paragraph in PARAGRAPHS)


def test_author_boxes_are_not_the_article_text():
    # "About the author" boxes under the story, named "author-box", "about_author", "authorDescription": the
    # byline verdict (the bare word "author" is not one: blogs wrap whole posts in "author"-named elements).
    box = """<div class="post-author-box"><h3>About the Author</h3>
    <p>Jane Doe has covered the city council for the Example since 2015 and writes the weekly newsletter.</p></div>"""
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="story">
    <h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}{box}</div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Jane Doe" not in text and "About the Author" not in text
    assert "Jane Doe" in extract(html.replace("post-author-box", "post-author"))["text"]


def test_noscript_notices_are_not_text_but_a_crawler_view_is():
    # A browser running scripts never shows <noscript>: a notice asking for JavaScript is no line of the page,
    # but a forum's whole thread served there for crawlers (Discourse) is the page's only copy of its text.
    notice = "<noscript><p>You need to enable JavaScript to run this app.</p></noscript>"
    story = "".join(f"<p>{p}</p>" for p in PARAGRAPHS)
    html = f"<html><head><title>Council approves budget</title></head><body>{notice}<h1>Council approves budget</h1>"
    text = extract(html + story + "</body></html>")["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS) and "enable JavaScript" not in text
    assert extract(f"<html><body>{notice}</body></html>")["text"] == ""
    thread = f'<noscript><div id="main-outlet"><h1>Council approves budget</h1>{story * 2}</div></noscript>'
    text = extract(f"<html><body>{notice}{thread}</body></html>")["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS) and "enable JavaScript" not in text


def test_a_repeated_run_of_short_lines_is_dropped():
    # A slider clones its slides for the endless scroll: four short lines (two cards) stand twice. Each line alone
    # is too short for the repeated-block rule; the run of four repeats line for line and goes.
    slides = "".join(
        f"<h3>{name}</h3><p>{claim}</p>"
        for name, claim in [("Save Time", "A meal in seconds."), ("Easy", "Just scoop, shake, go.")]
    )
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="main">
    <h1>Council approves budget</h1>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS[:2])}
    <div class="slider">{slides}{slides}</div>{"".join(f"<p>{p}</p>" for p in PARAGRAPHS[2:])}</div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert text.count("Just scoop, shake, go.") == 1
    assert extract(html, params=Params(repeat_run=0))["text"].count("Just scoop, shake, go.") == 2


def test_short_lines_of_whole_card_links_are_a_listing_s_text():
    # A job board whose cards are each one <a> around title, company and place: the long titles count as text,
    # and the short lines of the same cards are names, kept when written once on the page (a badge on every
    # card, "Full-Time", is not one). Not on a product's page: its feature links are no cards.
    jobs = [
        ("Senior Software Engineer for the payments platform team", "Sticker Mule", "New York, NY"),
        ("Staff Product Designer working on our mobile and web apps", "Basalt Works", "Lisbon, Portugal"),
        ("Backend Developer to build data pipelines with Python and Go", "Cinder Labs", "Berlin, Germany"),
        ("Customer Support Specialist for our enterprise customers", "Dunmore", "Toronto, Canada"),
        ("Frontend Engineer with React and TypeScript experience wanted", "Ember Health", "Austin, TX"),
        ("Data Analyst to own dashboards and experiment reporting", "Fjordline", "Oslo, Norway"),
    ]
    card = '<li><a href="/jobs/{0}"><div>{1}</div><div>{2}</div><div>{3}</div><div>Full-Time</div></a></li>'
    cards = "".join(card.format(i, *job) for i, job in enumerate(jobs))
    html = f"""<html><head><title>Remote jobs | Example</title></head><body><nav><ul>{NAV}</ul></nav>
    <main><h1>Remote jobs</h1><ul class="jobs">{cards}</ul></main>
    <footer><p>© 2024 Example. All rights reserved.</p></footer></body></html>"""
    lines = extract(html)["text"].split("\n")
    assert jobs[0][0] in lines and "Sticker Mule" in lines and "Oslo, Norway" in lines
    assert "Full-Time" not in lines
    without = extract(html, params=Params(card_names=False))["text"].split("\n")
    assert jobs[0][0] in without and "Sticker Mule" not in without


def test_forms_are_interface_on_any_page_not_spread_and_on_a_discussion():
    # A page that anchors no article (its title matches no heading) but whose text is one region: its <form>s
    # (a contact box, a reply form) are interface as an article's are. On a discussion (by metadata) the thread's
    # reply form ("Your Answer", "Post as a guest") goes whatever the selection made of the page.
    form = """<form action="/answer"><h2>Your Answer</h2><div>Post as a guest</div><label>Email Address</label>
    <div>By clicking Post Your Answer, you agree to our terms of service.</div></form>"""
    first, second = ("".join(f"<p>{p}</p>" for p in half) for half in (PARAGRAPHS[:2], PARAGRAPHS[2:]))
    body = f"""<body><nav><ul>{NAV}</ul></nav><div class="main">{first}{form}{second}</div></body></html>"""
    html = "<html><head><title>Example Q&amp;A</title></head>" + body
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS) and "Post as a guest" not in text
    assert "Post as a guest" in extract(html, params=Params(article_forms=False))["text"]
    # A discussion taken as spread content (its reply form would stay there) still loses it.
    json_ld = '<script type="application/ld+json">{"@type": "QAPage"}</script>'
    discussion = html.replace("</title>", "</title>" + json_ld)
    spread = Params(min_line_words=30)  # every selection reads as too few words per line: spread content
    assert "Post as a guest" in extract(html, params=spread)["text"]
    assert "Post as a guest" not in extract(discussion, params=spread)["text"]


def test_widget_labels_and_reading_times_are_not_text():
    # "Advertisement" over an ad slot, a share row's "Share this:", a "Related articles" label, "5 min read":
    # each a line of its own inside the story's region, never its text; a sentence holding the words stays.
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="main">
    <h1>Council approves budget</h1><div>5 min read</div><p>{PARAGRAPHS[0]}</p><div>ADVERTISEMENT</div>
    <p>{PARAGRAPHS[1]}</p><div>Advertisement</div><p>{PARAGRAPHS[2]}</p>
    <p>Share this advertisement with your friends if you liked it.</p><p>{PARAGRAPHS[3]}</p>
    <div>Share this:</div><h3>Related articles</h3></div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert "Share this advertisement with your friends if you liked it." in text
    for label in ("5 min read", "ADVERTISEMENT", "\nAdvertisement", "Share this:", "Related articles"):
        assert label not in text
    kept = extract(html, params=Params(drop_labels=False))["text"]
    assert "ADVERTISEMENT" in kept and "5 min read" in kept


def test_a_line_repeating_the_line_just_before_it_is_dropped():
    # A layout's desktop and mobile copies of one card ("Save 15%" twice); a table's repeated cells and a chart's
    # letterless values stay.
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="main">
    <h1>Council approves budget</h1><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>
    <div class="card"><p class="desktop">Save 15% on the annual plan</p>
    <p class="mobile">Save 15% on the annual plan</p></div>
    <p>{PARAGRAPHS[2]}</p><p>60%</p><p>60%</p><p>{PARAGRAPHS[3]}</p>
    <table><tr><td>Yes</td><td>Yes</td></tr></table></div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert text.count("Save 15% on the annual plan") == 1
    assert text.count("60%") == 2 and text.count("Yes") == 2
    kept = extract(html, params=Params(adjacent_repeats=False))["text"]
    assert kept.count("Save 15% on the annual plan") == 2


@pytest.mark.parametrize(
    ("switch", "lines", "sentence"),
    [
        # "Written by …", "Reviewed by …" without a byline class; a sentence that starts the same way stays.
        ("byline_lines", ["Written by Jane Doe", "Medically reviewed by: Dr. John Roe, MD"], "Written by hand in 1802"),
        # A date's label and the date on one line; a sentence that opens with "Published" stays.
        ("dated_labels", ["Updated October 23, 2025", "Published on: February 14, 2025"], "Published in 1802"),
    ],
)
def test_byline_and_dated_label_lines_are_dropped_by_their_words(switch: str, lines: list[str], sentence: str) -> None:
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="main">
    <h1>Council approves budget</h1>{"".join(f"<div>{line}</div>" for line in lines)}
    {"".join(f"<p>{p}</p>" for p in PARAGRAPHS)}
    <p>{sentence}, the original charter is kept in the city archive for visitors to read.</p></div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    assert not any(line in text for line in lines)
    assert sentence in text
    assert lines[0] in extract(html, params=Params(**{switch: False}))["text"]


def test_teaser_list_and_feedback_widget_labels_are_not_text():
    # "You may also like", "Up Next", "Was this page helpful?" on lines of their own after the story.
    html = f"""<html><head><title>Council approves budget</title></head><body><div class="main">
    <h1>Council approves budget</h1><p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p><p>{PARAGRAPHS[2]}</p>
    <p>{PARAGRAPHS[3]}</p><div>Was this page helpful?</div><h3>You May Also Like</h3><div>Up Next</div>
    </div></body></html>"""
    text = extract(html)["text"]
    assert all(paragraph in text for paragraph in PARAGRAPHS)
    for label in ("Was this page helpful?", "You May Also Like", "Up Next"):
        assert label not in text
    assert "You May Also Like" in extract(html, params=Params(drop_labels=False))["text"]
