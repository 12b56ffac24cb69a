"""The world's title: what the page calls itself (<title>, else its first <h1>)."""

import re
from html.parser import HTMLParser

MAX_TITLE_CHARS = 200


class _TitleParser(HTMLParser):
    """Collects the text of the first <title> and of the first <h1> (nested tags included)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)  # decodes &amp; &#x27; &eacute; ... in text
        self.title: list[str] | None = None
        self.h1: list[str] | None = None
        self._in: str | None = None
        self._skip = 0  # inside <script>/<style> within an <h1>: not visible text

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style") and self._in:
            self._skip += 1
        elif tag == "title" and self.title is None and self._in is None:
            self._in, self.title = "title", []
        elif tag == "h1" and self.h1 is None and self._in is None:
            self._in, self.h1 = "h1", []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        elif tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._skip or self._in is None:
            return
        (self.title if self._in == "title" else self.h1).append(data)


def _clean(parts: list[str] | None) -> str | None:
    if parts is None:
        return None
    text = re.sub(r"\s+", " ", "".join(parts)).strip()
    return text[:MAX_TITLE_CHARS] or None


def world_title(html: bytes | str) -> str | None:
    """The <title> text, else the first <h1>'s text, whitespace collapsed; None if neither has text."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", errors="replace")
    parser = _TitleParser()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # html.parser is lenient; a page it still chokes on simply has no title
        pass
    return _clean(parser.title) or _clean(parser.h1)
