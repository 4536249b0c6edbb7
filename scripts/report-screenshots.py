"""Screenshots of a report page in headless Chromium (rlscale.testing.chromium) for the docs: the header with
its navigation and the summary, and the first ranking table with its notes. Each is checked before it is
written, as tests/integration/test_report_browser.py checks the page: a link to every section, no placeholder
in a caption or the summary, ranking notes of at most three lines per row.

    python scripts/report-screenshots.py docs/examples/smollm2-loo docs/images

RESULTS (a results folder) gets its report written to a temporary copy of the same name (``rlscale report
--html``, fitting it first if its fits.json is older than its runs), so the folder itself is left as it is. Writes
OUT/report-summary.png and OUT/report-ranking.png (PNG of 256 colours, 1400 CSS pixels wide, at most 760
high).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from rlscale.testing.chromium import READABILITY, Chromium, readability_problems

WIDTH, MAX_HEIGHT = 1400, 760
COLORS = 256
# Where each screenshot is (page pixels), and what the page shows (rlscale.testing.chromium.READABILITY).
LAYOUT = """JSON.stringify({""" + READABILITY + """
  summaryBottom: document.querySelector("#summary table").getBoundingClientRect().bottom + window.scrollY,
  ranking: (() => { const r = document.querySelector("#ranking").getBoundingClientRect(),
                          t = document.querySelector("#ranking table").getBoundingClientRect();
                    return [r.top + window.scrollY, t.bottom + window.scrollY]; })(),
})"""


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
        subprocess.run([sys.executable, "-m", "rlscale.cli", "report", "--html", results.name], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))})
        browser = Chromium(Path(tmp) / "profile")
        try:
            tab = browser.open((copy / "report.html").as_uri(), WIDTH, MAX_HEIGHT)
            layout = json.loads(browser.evaluate(tab, LAYOUT))
            problems = readability_problems(layout)
            if problems:
                raise SystemExit("not a page for the docs: " + "; ".join(problems))
            top, bottom = layout["ranking"]
            shots = {"report-summary.png": (0, min(layout["summaryBottom"] + 16, MAX_HEIGHT)),
                     "report-ranking.png": (top, min(bottom + 8 - top, MAX_HEIGHT))}
            for name, (y, height) in shots.items():
                path = small(browser.screenshot(tab, out / name, {"x": 0, "y": y, "width": WIDTH,
                                                                       "height": height}))
                print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        finally:
            browser.close()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
