"""A report as data: sections of text, tables, figures and commands, written as Markdown and as one HTML file.

    fabricbench study --out run/        -> run/report.md, run/report.html (this module writes both)
    fabricbench qualify --spec s.toml --out q/

    doc = Document("fabricbench study", subtitle="host, date")
    s = doc.section("The machine", intro="What was measured, where.")
    s.table(["op", "busbw (GB/s)"], rows, status_col=None)
    s.figure("busbw.png", "busbw against size, per fabric")
    s.code("fabricbench study --gpus 0-3")
    md_path, html_path = doc.write("run/")

The HTML is self-contained: figures are embedded as data: URIs and the style sheet is inline, so the file
opens anywhere with no network and can be mailed or attached to a CI run as is. The Markdown references
copies of the figures in `<stem>_figures/` beside it, so it renders on GitHub and in editors. Both come
from the same blocks, so they never disagree.
"""

from __future__ import annotations

import base64
import html
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from fabricbench.errors import UsageError
from fabricbench.files import OutputError
from fabricbench.outputs import Folder, folder
from fabricbench.reporting.analysis import fmt
from fabricbench.results.status import Severity, Status

# Cells whose text is one of these get a colour in HTML (and keep their text in both formats): every
# status and every severity (results/status.py; a new one without a colour fails at import), and two
# words of other tables ("failed" checks, relate's "predicted-only" fabrics).
_STATUS_CLASS = {Status.OK: "ok", Status.PASS: "ok", Status.FAIL: "bad", Status.WRONG: "bad", Status.FLAGGED: "warn",
                 Status.OOM: "warn", Status.TIMEOUT: "bad", Status.WAIVED: "muted", Status.ERROR: "bad",
                 Status.INTERRUPTED: "warn", Status.SKIPPED: "muted", Status.RUNNING: "muted"}
_SEVERITY_CLASS = {Severity.PASS: "ok", Severity.INFO: "muted", Severity.WARNING: "warn", Severity.UNKNOWN: "warn",
                   Severity.CRITICAL: "bad"}
assert set(_STATUS_CLASS) == set(Status) and set(_SEVERITY_CLASS) == set(Severity)
STATUS_CLASSES = {**{s.value: c for s, c in _STATUS_CLASS.items()}, **{s.value: c for s, c in _SEVERITY_CLASS.items()},
                  "failed": "bad", "predicted-only": "muted"}

PROSE_CHARS = 24  # a cell longer than this wraps (words, reasons); shorter ones (figures, names) never do

# Responsive: on a wide screen tables are tables; below 760 px each row becomes a card of "header: value"
# lines, so that nothing is wider than a phone, and figures and code shrink or wrap to the page.
_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0;color:#1d2733;
background:#f6f7f9;line-height:1.45;overflow-wrap:break-word}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px;background:#fff;min-height:100vh}
h1{font-size:1.9em;margin:.2em 0 .1em}.subtitle{color:#5a6572;margin:0 0 1.2em}
h2{font-size:1.35em;border-bottom:2px solid #e3e7ec;padding-bottom:.2em;margin-top:2em}
nav ol{columns:2;color:#33506e;padding-left:1.4em}nav a{color:#1f5fa8;text-decoration:none}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em;max-width:100%}
th,td{border:1px solid #d9dee4;padding:4px 9px;text-align:right}
td{white-space:nowrap}td.prose{white-space:normal;text-align:left;min-width:12em}
th{background:#eef1f5;text-align:center}td:first-child,th:first-child{text-align:left}
tr:nth-child(even) td{background:#fafbfc}
td.ok{background:#e3f5e6!important;color:#17632a;font-weight:600}
td.bad{background:#fde4e4!important;color:#9c1c1c;font-weight:600}
td.warn{background:#fff3d6!important;color:#7a5200;font-weight:600}
td.muted{color:#6b7580;font-style:italic}
figure{margin:1em 0 1.6em}figure img{max-width:100%;height:auto;border:1px solid #e3e7ec}
figcaption,.caption{color:#4d5863;font-size:.9em;margin-top:.3em}
pre{background:#1f2630;color:#e8edf2;padding:10px 14px;border-radius:4px;font-size:.88em;white-space:pre-wrap;
overflow-wrap:anywhere}
code{overflow-wrap:anywhere}
.intro{color:#2c3a48}ul{margin:.3em 0 1em}
@media (max-width:760px){
main{padding:14px 12px 40px}h1{font-size:1.5em}nav ol{columns:1}
table,tbody,tr,td{display:block}thead{display:none}
table{border:0;font-size:.95em}
tr{border:1px solid #d9dee4;border-radius:4px;margin:0 0 .6em;padding:2px 0}
td,td:first-child{border:0;border-bottom:1px solid #eef1f5;text-align:right;white-space:normal;
overflow-wrap:anywhere;padding:3px 8px 3px 45%;position:relative;min-height:1.6em}
td.prose{min-width:0;text-align:left}
td::before{content:attr(data-label);position:absolute;left:8px;width:calc(45% - 14px);text-align:left;
font-weight:600;color:#4d5863;white-space:normal;overflow-wrap:anywhere}
td:first-child{font-weight:600;background:#eef1f5!important}
}
"""

@dataclass
class _Block:
    kind: str  # "text", "bullets", "code", "table", "figure"
    data: dict[str, Any]


@dataclass
class Section:
    title: str
    intro: str | None = None
    blocks: list[_Block] = field(default_factory=list)

    def text(self, paragraph: str) -> "Section":
        self.blocks.append(_Block("text", {"text": paragraph}))
        return self

    def bullets(self, items: Sequence[str]) -> "Section":
        self.blocks.append(_Block("bullets", {"items": [str(i) for i in items]}))
        return self

    def code(self, text: str) -> "Section":
        self.blocks.append(_Block("code", {"text": text}))
        return self

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str | None = None,
              status_col: int | None = None) -> "Section":
        """Cells are formatted once here (floats to 4 significant digits, thousands separated from 1,000, never
        an exponent), so both formats agree."""
        assert status_col is None or 0 <= status_col < len(headers)
        cells = [[_cell(v) for v in row] for row in rows]
        for row in cells:
            assert len(row) == len(headers), f"row of {len(row)} cells under {len(headers)} headers"
        self.blocks.append(_Block("table", {"headers": [str(h) for h in headers], "rows": cells,
                                            "caption": caption, "status_col": status_col}))
        return self

    def figure(self, png: str | os.PathLike | bytes, caption: str) -> "Section":
        """A PNG file (or its bytes); a missing file is a bug in the caller, so it fails now, not at write."""
        data = png if isinstance(png, bytes) else Path(png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", "figures are PNG"
        self.blocks.append(_Block("figure", {"png": data, "caption": caption}))
        return self


class Document:
    def __init__(self, title: str, *, subtitle: str | None = None) -> None:
        self.title, self.subtitle = title, subtitle
        self.sections: list[Section] = []

    def section(self, title: str, *, intro: str | None = None) -> Section:
        s = Section(title, intro)
        self.sections.append(s)
        return s

    def write(self, out_dir: str | os.PathLike, *, stem: str = "report") -> tuple[Path, Path]:
        out = Path(out_dir)
        # one folder descriptor, no link followed in it (outputs.py): a report.md or figures folder that
        # someone made a link is refused, never written through
        with folder(out, what="report folder") as d:
            fig_dir = out / f"{stem}_figures"
            old = d.lstat(fig_dir.name)
            if old is not None and stat.S_ISLNK(old.st_mode):
                raise UsageError(f"report folder {fig_dir}: is a symbolic link, and fabricbench writes only "
                                 f"through paths it made; remove the link")
            if old is not None:  # a rebuilt report must not keep figures of an earlier one
                shutil.rmtree(fig_dir.name, dir_fd=d.fd)
            md_path, html_path = out / f"{stem}.md", out / f"{stem}.html"
            # a folder where the report goes, or a full disk, is one line, never a traceback
            figs = _Figures(d, fig_dir.name)
            d.write_atomic(md_path.name, self.markdown(fig_dir, save=figs.save))
            d.write_atomic(html_path.name, self.html())
        return md_path, html_path

    # -- Markdown -----------------------------------------------------------------------------------
    def markdown(self, fig_dir: Path | None = None, *, save: Any = None) -> str:
        """The document as markdown; each figure is saved by `save(name, png)` in `fig_dir` (not at all
        without it): Document.write passes one that writes through its folder's descriptor."""
        m = _md_inline
        lines = [f"# {m(self.title)}", ""]
        if self.subtitle:
            lines += [f"_{m(self.subtitle)}_", ""]
        n_fig = 0
        for s in self.sections:
            lines += [f"## {m(s.title)}", ""]
            if s.intro:
                lines += [m(s.intro), ""]
            for b in s.blocks:
                if b.kind == "text":
                    lines += [m(b.data["text"]), ""]
                elif b.kind == "bullets":
                    lines += [f"- {m(i)}" for i in b.data["items"]] + [""]
                elif b.kind == "code":
                    text = b.data["text"].rstrip("\n")
                    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", text)), default=0))
                    lines += [fence, text, fence, ""]  # a fence longer than any run of backticks inside
                elif b.kind == "table":
                    lines += _md_table(b.data)
                elif b.kind == "figure":
                    n_fig += 1
                    if fig_dir is not None and save is not None:
                        name = f"fig{n_fig:02d}.png"
                        save(name, b.data["png"])
                        lines += [f"![{_md_escape(b.data['caption'])}]({fig_dir.name}/{name})", ""]
                    lines += [f"*Figure {n_fig}: {m(b.data['caption'])}*", ""]
        return "\n".join(lines).rstrip() + "\n"

    # -- HTML ---------------------------------------------------------------------------------------
    def html(self) -> str:
        e = html.escape
        parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                 '<meta name="viewport" content="width=device-width, initial-scale=1">',
                 f"<title>{e(self.title)}</title><style>{_CSS}</style></head><body><main>",
                 f"<h1>{e(self.title)}</h1>"]
        if self.subtitle:
            parts.append(f'<p class="subtitle">{e(self.subtitle)}</p>')
        if len(self.sections) > 2:
            parts.append("<nav><ol>" + "".join(f'<li><a href="#{_anchor(s.title, i)}">{e(s.title)}</a></li>'
                                               for i, s in enumerate(self.sections)) + "</ol></nav>")
        n_fig = 0
        for i, s in enumerate(self.sections):
            parts.append(f'<section id="{_anchor(s.title, i)}"><h2>{e(s.title)}</h2>')
            if s.intro:
                parts.append(f'<p class="intro">{e(s.intro)}</p>')
            for b in s.blocks:
                if b.kind == "text":
                    parts.append(f"<p>{_inline(b.data['text'])}</p>")
                elif b.kind == "bullets":
                    parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.data["items"]) + "</ul>")
                elif b.kind == "code":
                    parts.append(f"<pre><code>{e(b.data['text'].rstrip())}</code></pre>")
                elif b.kind == "table":
                    parts.append(_html_table(b.data))
                elif b.kind == "figure":
                    n_fig += 1
                    uri = "data:image/png;base64," + base64.b64encode(b.data["png"]).decode("ascii")
                    parts.append(f'<figure><img src="{uri}" alt="{e(b.data["caption"])}">'
                                 f"<figcaption>Figure {n_fig}: {e(b.data['caption'])}</figcaption></figure>")
            parts.append("</section>")
        parts.append("</main></body></html>")
        return "\n".join(parts) + "\n"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v != v:  # NaN
            return "-"
        if v == 0:
            return "0"
        if 1e-3 <= abs(v) < 1e3:
            return f"{v:.4g}"
        return fmt(v)  # 1,233 and 0.000123: thousands separated, never an exponent
    return str(v)


class _Figures:
    """The report's figures folder, made at the first figure, below the report's folder descriptor."""

    def __init__(self, d: Folder, name: str) -> None:
        self.d, self.name = d, name

    def save(self, name: str, png: bytes) -> None:
        with self.d.folder(self.name) as figs, figs.open(name, "wb") as fh:
            try:
                fh.write(png)
            except OSError as e:
                raise OutputError(f"{self.d.path / self.name / name}: write failed ({e.strerror})") from None


def _md_inline(text: str) -> str:
    """Text as one markdown paragraph that stays text: a name from a spec or a file (one holding a newline,
    a leading `#` or `<script>`) must not start a heading or a block quote, nor become raw HTML, which a
    markdown viewer renders (the HTML report, JUnit and Prometheus escape the same names their own way).
    Markdown's own marks (**, `) stay: the report's own text uses them."""
    text = " ".join(str(text).splitlines()).replace("<", "&lt;").replace(">", "&gt;")
    return "\\" + text if text.startswith(("#", "=")) else text


def _md_escape(text: str) -> str:
    return _md_inline(text).replace("|", "\\|")


def _md_table(t: dict[str, Any]) -> list[str]:
    lines = []
    if t["caption"]:
        lines += [f"**{_md_inline(t['caption'])}**", ""]
    lines.append("| " + " | ".join(_md_escape(h) for h in t["headers"]) + " |")
    lines.append("|" + "|".join(":--" if i == 0 else "--:" for i in range(len(t["headers"]))) + "|")
    lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in t["rows"]]
    return lines + [""]


def _html_table(t: dict[str, Any]) -> str:
    e = html.escape
    out = []
    if t["caption"]:
        out.append(f'<p class="caption"><b>{e(t["caption"])}</b></p>')
    out.append("<table><thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in t["headers"]) + "</tr></thead><tbody>")
    sc = t["status_col"]
    for row in t["rows"]:
        cells = []
        for i, (h, c) in enumerate(zip(t["headers"], row)):
            # data-label: on a phone each row is a card, every cell labelled with its header (CSS above)
            cls = STATUS_CLASSES.get(c.strip().lower()) if i == sc else ("prose" if len(c) > PROSE_CHARS else None)
            label = f' data-label="{e(h)}"'
            cells.append(f'<td class="{cls}"{label}>{e(c)}</td>' if cls else f"<td{label}>{e(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


_CODE_SPAN = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    """The two Markdown inline forms reports use (`code`, **bold**), escaped first so nothing else passes."""
    s = html.escape(text)
    s = _CODE_SPAN.sub(r"<code>\1</code>", s)
    return _BOLD.sub(r"<b>\1</b>", s)


def _anchor(title: str, i: int) -> str:
    return f"s{i}-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
