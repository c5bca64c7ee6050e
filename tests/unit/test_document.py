"""The report Document: one source, two formats that agree; the HTML is self-contained."""

import base64
import io
from html.parser import HTMLParser

import pytest

from fabricbench.reporting.document import Document


def _png() -> bytes:
    plt = pytest.importorskip("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([1, 2, 3], [3, 1, 2])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs, self.links, self.scripts, self.tds = [], [], 0, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag in ("link", "script"):
            self.scripts += 1
        if tag == "td":
            self.tds.append(a.get("class"))


def test_write_markdown_and_selfcontained_html(tmp_path):
    png = _png()
    doc = Document("fabricbench study", subtitle="host x, 2026-12-02")
    s = doc.section("The machine", intro="One GPU <b>not bold</b>.")
    s.table(["check", "value", "verdict"], [["busbw", 123.456789, "pass"], ["p2p", None, "fail"],
                                            ["pair", 2.5e-7, "waived"]], status_col=2, caption="Checks")
    s.figure(png, "busbw | size")
    s.code("fabricbench study --gpus 0")
    doc.section("Advice").bullets(["pin to `0-3`", "**DDP** fits"])
    doc.section("Empty")
    md, html_path = doc.write(tmp_path)
    text = md.read_text()
    assert "| busbw | 123.5 | pass |" in text
    assert "| p2p | - | fail |" in text and "0.000000250" in text and "e-07" not in text  # for people: never an exponent
    assert (tmp_path / "report_figures" / "fig01.png").read_bytes() == png
    assert "](report_figures/fig01.png)" in text and "busbw \\| size" in text
    page = html_path.read_text()
    tags = _Tags()
    tags.feed(page)
    assert len(tags.imgs) == 1 and tags.imgs[0].startswith("data:image/png;base64,")
    assert base64.b64decode(tags.imgs[0].split(",", 1)[1]) == png
    assert tags.scripts == 0 and "http" not in page.replace("http-equiv", "")
    assert tags.tds.count("ok") == 1 and tags.tds.count("bad") == 1 and tags.tds.count("muted") == 1
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<code>0-3</code>" in page and "<b>DDP</b>" in page


def test_rewrite_drops_old_figures(tmp_path):
    doc = Document("r")
    doc.section("a").figure(_png(), "one")
    doc.section("b").figure(_png(), "two")
    doc.write(tmp_path)
    assert len(list((tmp_path / "report_figures").iterdir())) == 2
    Document("r").write(tmp_path)
    assert not (tmp_path / "report_figures").exists()


def test_bad_blocks_are_bugs():
    s = Document("r").section("x")
    with pytest.raises(AssertionError):
        s.table(["a", "b"], [[1]])
    with pytest.raises(AssertionError):
        s.figure(b"GIF89a....", "not a png")
