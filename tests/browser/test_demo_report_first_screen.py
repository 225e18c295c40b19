"""The demo report in a real browser (issue 34, "the buyer's answer first"): rendered as GitHub renders
Markdown (a ~1000 px column), on a 1280 x 800 screen, the verdict — which chip, $ per million tokens, the
price it used — must be on the first screen, before any detail.

The report is the demo's own (``--quick`` without the slow steps: migration and projection, ~15-30 s).
Screenshots (first screen and full page) go to ``reports/browser/`` with the page heights printed, so a report
growing back above its answer shows up. Needs Playwright and the system Chromium (never downloads one).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "reports" / "browser"
CHROMIUM = Path(os.environ.get("TPU_WORKBENCH_CHROMIUM", "/usr/bin/chromium"))
SCREEN = {"width": 1280, "height": 800}
CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; font-size: 16px; line-height: 1.5;
       max-width: 980px; margin: 0 auto; padding: 32px 45px; }
table { border-collapse: collapse; display: block; overflow: auto; }
td, th { border: 1px solid #d0d7de; padding: 6px 13px; }
img { max-width: 100%; }
h1 { font-size: 2em; } h2 { font-size: 1.5em; }
"""

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
)
markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is not installed")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


def render(report: Path) -> Path:
    """README.md -> README.html beside it (images resolve relative to the report folder)."""
    md = markdown_it.MarkdownIt("commonmark").enable("table")
    html = report.with_suffix(".html")
    html.write_text(
        f"<!doctype html><meta charset='utf-8'><style>{CSS}</style><body>{md.render(report.read_text())}</body>",
        encoding="utf-8",
    )
    return html


def first_screen(html: Path, name: str) -> dict:
    """Open the page on a 1280 x 800 screen: where the verdict's heading and table end, the page's height,
    and the screenshots written."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport=SCREEN)
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            heading = page.locator("h2", has_text="The answer").first
            out = {
                "height": page.evaluate("document.documentElement.scrollHeight"),
                "heading_top": heading.bounding_box()["y"] if heading.count() else None,
                "table_bottom": None,
                "first_row": "",
            }
            if heading.count():
                table = page.locator("h2:has-text('The answer') + table").first
                box = table.bounding_box()
                out["table_bottom"] = box["y"] + box["height"]
                out["first_row"] = table.locator("tbody tr").first.inner_text()
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name}-first-screen.png"))
            page.screenshot(
                path=str(SHOTS / f"{name}-full.png"), full_page=True, timeout=180_000
            )  # ~22,000 px
            return out
        finally:
            browser.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    from tpu_workbench.bench.demo import Settings, run_demo

    out = tmp_path_factory.mktemp("demo")
    run_demo(Settings(out=out, quick=True, samples=("cuda_ddp",), skip=frozenset({"losses", "benchmark"})))
    return out / "README.md"


@pytest.mark.slow
def test_the_verdict_is_on_the_first_screen(report):
    seen = first_screen(render(report), "demo-report")
    print(f"demo report: page {seen['height']} px tall; verdict table ends at {seen['table_bottom']} px")
    assert seen["heading_top"] is not None, "no 'The answer' section"
    assert seen["table_bottom"] <= SCREEN["height"], f"the verdict ends below the first screen: {seen}"
    assert "$" in seen["first_row"] and "per M" in seen["first_row"]  # a chip, a price per million tokens
    assert any(kind in seen["first_row"] for kind in ("owner-tco", "committed", "list"))  # its price kind
    assert "20" in seen["first_row"]  # the price's date (20xx)
