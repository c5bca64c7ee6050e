"""The HTML report in a real browser: headless chromium (the system's, driven by selenium) at a phone's
420 px and a desktop's 1280 px; nothing may be wider than the page: not the document, no table, figure,
image or code block. Skips, saying what is missing, where chromium, its driver or selenium is not
installed (`.ci/run` installs them).

    FABRICBENCH_SCREENSHOTS=docs/img python3 -m pytest -q tests/unit/test_report_browser.py   (docs/study.md's pictures)
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
from pathlib import Path

import pytest

from fabricbench.reporting.document import Document
from roots import DATA

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
DRIVER = shutil.which("chromedriver")
SELENIUM = importlib.util.find_spec("selenium") is not None
LACK = ", ".join(what for what, ok in (("chromium", CHROMIUM), ("chromedriver", DRIVER), ("selenium", SELENIUM))
                 if not ok)
pytestmark = pytest.mark.skipif(bool(LACK), reason=f"no {LACK} installed (apt-get install chromium "
                                                   f"chromium-driver; pip install selenium)")

WIDTHS = (420, 1280)

# Every element that must fit, with what each is measured by: its own scroll width against its box, and its
# right edge against the viewport.
OVERFLOW_JS = """
const vw = document.documentElement.clientWidth;
const out = [];
if (document.documentElement.scrollWidth > vw) out.push(`document ${document.documentElement.scrollWidth} > ${vw}`);
for (const el of document.querySelectorAll('table, figure, img, pre, tr, td, th, p, li, nav, h1, h2')) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) continue;   // hidden (the header row of a table shown as cards)
  const name = el.tagName.toLowerCase() + ':' + (el.textContent || el.alt || '').trim().slice(0, 40);
  if (el.scrollWidth > el.clientWidth + 1) out.push(`${name} scrolls ${el.scrollWidth} > ${el.clientWidth}`);
  if (r.right > vw + 1 || r.left < -1) out.push(`${name} spans ${Math.round(r.left)}..${Math.round(r.right)} of ${vw}`);
}
return out;
"""


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--hide-scrollbars"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    yield driver
    driver.quit()


def _png(width_in: float, height_in: float) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width_in, height_in))
    ax.loglog([8, 1 << 20, 1 << 30], [0.01, 100, 2000], marker="o")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def report_like(tmp_path: Path) -> Path:
    """A report with what reports hold at their widest: a 12-column table of figures and long names, a
    reason column, a 1,600 px figure, a long command and an unbroken path."""
    doc = Document("fabricbench study: tiny-mistral on 2 CPU ranks (gloo)", subtitle="host, 2026-12-04 05:00 UTC")
    s = doc.section("In short", intro="What the run says, in one screen.")
    s.bullets(["DDP is 1.27× slower on shaped:200mbit than on default (busbw 5.21× slower)",
               "results: /very/long/path/without/any/break/" + "x" * 80 + "/results.jsonl"])
    headers = ["strategy", "fabric", "busbw slower", "comm/step", "T_comm (ms)", "e", "step obs (ms)",
               "step pred (ms)", "step slower obs", "step slower pred", "residual", "flags"]
    rows = [[st, fab, 5.21, "148.3M", 1233.4, 0.42, 2157.63, 2190.0, 1.27, 1.29, "+2%",
             "sizes above the sweep (extrapolated), dtype bfloat16 priced as float16"]
            for st in ("ddp", "zero1", "zero2", "zero3", "fsdp") for fab in ("default", "shaped:200mbit")]
    s.table(headers, rows, caption="observed and predicted, per strategy and fabric", status_col=None)
    t = doc.section("The machine")
    t.table(["check", "status", "measured", "threshold", "note"],
            [["allreduce_bw_8_gpus", "pass", 412.5, ">= 400", ""],
             ["nvlink_wiring", "fail", "-", "NV18", "GPU3-GPU5 is SYS: the NVSwitch tray is not seen by GPU 3"]],
            status_col=1)
    t.figure(_png(14.5, 4.0), "busbw against message size, per fabric (log axes)")
    t.code("fabricbench study --out run/ --device cpu --nprocs 2 --fabrics default,shaped:1gbit,shaped:200mbit "
           "--strategies ddp,zero1,zero2,zero3,fsdp --model tiny-mistral --steps 6")
    _, html_path = doc.write(tmp_path)
    return html_path


def fleet_report(tmp_path: Path) -> Path:
    """The report `qualify --fleet` writes, from recorded results (test_qualify_spec's three nodes)."""
    from fabricbench.qualifying.api import fleet
    from fabricbench.qualifying.config import FleetConfig
    from test_qualify_spec import _scaled_nodes

    fleet(FleetConfig(inputs=_scaled_nodes(tmp_path, [1.0, 0.97, 0.5]), out=tmp_path / "fleet"))
    return tmp_path / "fleet" / "report.html"


def study_report(tmp_path: Path) -> Path:
    """The CPU lab's study report (docs/study.md's picture), rebuilt here from its recorded results."""
    from fabricbench.studying.report import write_report

    study = tmp_path / "study"
    shutil.copytree(DATA / "study/cpu-lab", study,
                    ignore=shutil.ignore_patterns("report*"))
    _, html_path = write_report(study)
    return Path(html_path)


@pytest.mark.parametrize("which", ["report", "fleet", "study"])
def test_report_fits_a_phone_and_a_desktop(browser, tmp_path, which):
    page = {"report": report_like, "fleet": fleet_report, "study": study_report}[which](tmp_path)
    shots = os.environ.get("FABRICBENCH_SCREENSHOTS")
    for width in WIDTHS:
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 800})
        browser.get(page.as_uri())
        assert browser.execute_script("return document.documentElement.clientWidth") == width
        problems = browser.execute_script(OVERFLOW_JS)
        assert problems == [], f"{which} at {width} px: " + "; ".join(problems[:12])
        # every table cell still shows its text (nothing hidden to make it fit)
        texts = browser.execute_script("return [...document.querySelectorAll('td')].map(td => td.innerText)")
        assert "1,233" in texts or which != "report"
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": width, "height": 1400, "deviceScaleFactor": 1,
                                     "mobile": width < 800})
            browser.save_screenshot(str(Path(shots) / f"{which}-{width}px.png"))
