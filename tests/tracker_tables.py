"""Reading back a completions table as TensorBoard shows it: the markdown rendered by TensorBoard's own renderer
(``tensorboard.plugin_util``, what its text plugin serves), its cells as the text a reader sees."""
from __future__ import annotations

from html.parser import HTMLParser
from typing import List, Tuple


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows: List[List[str]] = []
        self.cell: List[str] = []
        self.inside = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.inside, self.cell = True, []
        elif tag == "br" and self.inside:
            self.cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.inside = False
            self.rows[-1].append("".join(self.cell))

    def handle_data(self, data):
        if self.inside:
            self.cell.append(data)


def read_markdown_table(markdown: str) -> Tuple[List[str], List[List[str]]]:
    """(header, rows) of the one table in ``markdown`` as TensorBoard renders it."""
    from tensorboard.plugin_util import markdown_to_safe_html

    page = markdown_to_safe_html(markdown)
    assert page.count("<table>") == 1, page
    cells = _Cells()
    cells.feed(page)
    return cells.rows[0], cells.rows[1:]
