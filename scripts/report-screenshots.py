"""Screenshots of a report page in headless Chromium (rlscale.testing.chromium) for the docs: the header with
its navigation and the summary, and the first ranking table with its notes. Each is checked before it is
written, as tests/integration/test_report_browser.py checks the page: a link to every section, no placeholder
in a caption or the summary, ranking notes of at most three lines per row.

    python scripts/report-screenshots.py docs/examples/smollm2-loo docs/images

RESULTS (a results folder) gets its report written to a temporary copy (``rlscale report --html``, fitting
it first if its fits.json is older than its runs), so the folder itself is left as it is. Writes
OUT/report-summary.png and OUT/report-ranking.png (PNG of 256 colours, 1400 CSS pixels wide, at most 760
high).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from rlscale.report.ranking import MAX_NOTE_LINES
from rlscale.testing.chromium import Chromium

WIDTH, MAX_HEIGHT = 1400, 760
COLORS = 256
PLACEHOLDER = re.compile(r"(^|\s)[-\u2014](;|,|$)|\+--|\bNone\b|\bnan\b|undefined|\{\{")

# Where each screenshot is (page pixels) and what the page shows there.
LAYOUT = """JSON.stringify({
  nav: [...document.querySelectorAll("nav a")].map(a => a.getAttribute("href")),
  sections: [...document.querySelectorAll("main > section")].map(s => s.id),
  text: [...document.querySelectorAll("p.note, p.flag, h4, table[data-table=summary] td")].map(e => e.innerText),
  noteLines: [...document.querySelectorAll("table[data-table=ranking] td.notes")].map(td =>
    [...td.querySelectorAll(".note-line")].reduce((n, line) =>
      n + Math.round(line.getBoundingClientRect().height / parseFloat(getComputedStyle(line).lineHeight)), 0)),
  summary: document.querySelector("#summary table").getBoundingClientRect().bottom + window.scrollY,
  ranking: (() => { const r = document.querySelector("#ranking").getBoundingClientRect(),
                          t = document.querySelector("#ranking table").getBoundingClientRect();
                    return [r.top + window.scrollY, t.bottom + window.scrollY]; })(),
})"""


def check(layout: dict) -> None:
    """Refuse a page that the docs should not show."""
    if sorted(layout["nav"]) != sorted(f"#{s}" for s in layout["sections"]):
        raise SystemExit(f"navigation {layout['nav']} does not link every section {layout['sections']}")
    bad = [text for text in layout["text"] if PLACEHOLDER.search(text)]
    if bad:
        raise SystemExit(f"placeholders on the page: {bad[:3]}")
    if max(layout["noteLines"], default=0) > MAX_NOTE_LINES:
        raise SystemExit(f"ranking notes of {max(layout['noteLines'])} lines")


def small(path: Path) -> Path:
    """The PNG at ``path`` rewritten with a palette of COLORS colours (octree: the run swatches keep their
    colour; the file shrinks about threefold)."""
    with Image.open(path) as image:
        image.convert("RGB").quantize(COLORS, method=Image.Quantize.FASTOCTREE).save(path, optimize=True)
    return path


def main(results: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / results.name
        shutil.copytree(results, copy)
        subprocess.run([sys.executable, "-m", "rlscale.cli", "report", "--html", str(copy)], check=True,
                       stdout=subprocess.DEVNULL)
        browser = Chromium(Path(tmp) / "profile")
        try:
            session = browser.open((copy / "report.html").as_uri(), WIDTH, MAX_HEIGHT)
            layout = json.loads(browser.evaluate(session, LAYOUT))
            check(layout)
            top, bottom = layout["ranking"]
            shots = {"report-summary.png": (0, min(layout["summary"] + 16, MAX_HEIGHT)),
                     "report-ranking.png": (top, min(bottom + 8 - top, MAX_HEIGHT))}
            for name, (y, height) in shots.items():
                path = small(browser.screenshot(session, out / name, {"x": 0, "y": y, "width": WIDTH,
                                                                       "height": height}))
                print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        finally:
            browser.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
