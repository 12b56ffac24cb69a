"""The chosen page, playable inside the report with no network: a copy of it beside the report
holding only the library files it imports, taken from the offline npm cache the check answers from.

A sandboxed frame opened from file:// may load no other file at all (Chromium: "Not allowed to
load local resource"), and no page from file:// may load module scripts from files. So the
library files travel inside the copy, each as a script that registers its text, and a small
loader first in the page turns the texts into data: modules and writes the import map that
points the page's specifiers at them. The same copy works from a static web host.

The page is the agent's and hostile: the copy starts with a Content-Security-Policy that allows
no request at all beyond its own folder's scripts (a later meta can only narrow it), and the
report shows it in a sandboxed frame (scripts only: no same-origin, no top navigation, no
popups, no forms, no dialogs), created only when the reader asks for it.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from showcase.browser.cdn import CDN_PREFIX
from showcase.errors import InfraError
from showcase.io import write_text_atomic

if TYPE_CHECKING:
    from showcase.task import Task

MAX_PAGE_BYTES = 8 << 20  # the watcher keeps bigger pages too, but the report copies at most this
MAX_FILES = 400  # three's examples import a few dozen files at most
MAX_SPECS = 5000  # specifiers looked at in all: a page names a handful

PLAY_CSP = (
    "default-src 'none'; script-src 'self' file: 'unsafe-inline' 'unsafe-eval' data: blob:; "
    "style-src 'unsafe-inline' data: blob:; img-src data: blob:; media-src data: blob:; font-src data:; "
    "worker-src data: blob:; connect-src data: blob:; base-uri 'none'; form-action 'none'"
)

_IMPORTMAP_TAG = re.compile(r"<script\b[^>]{0,500}?\btype\s*+=\s*+[\"']?importmap\b[^>]{0,500}+>", re.I)
MAX_MAPS = 8  # a page has one import map; more are not looked at
# A specifier follows `from`, a bare `import` or `import(`. Possessive quantifiers and no nested
# repeats: the page is the agent's, and scanning it must stay linear whatever it holds.
_SPEC = re.compile(r"""\b((?:from|import)\s*+(?:\(\s*+)?)(["'])([^"'\n]{1,500}+)\2""")

_LOADER = """(() => {
  const texts = window.__showcaseModules || {};
  const map = JSON.parse(document.getElementById("showcase-play-map").textContent);
  const urls = {}, imports = {};
  for (const [spec, url] of Object.entries(map)) {
    if (!(url in texts)) continue;
    imports[spec] = urls[url] ??= "data:text/javascript;charset=utf-8," + encodeURIComponent(texts[url]);
  }
  const s = document.createElement("script");
  s.type = "importmap";
  s.textContent = JSON.stringify({imports});
  document.currentScript.after(s);
})();"""


@dataclass
class Play:
    """What the report links: the playable copy and what it took."""

    page: Path  # the copy of the chosen page
    files: list[str] = field(default_factory=list)  # CDN URLs shipped beside it
    missing: list[str] = field(default_factory=list)  # imports the cache does not hold (the page will show an error)


def _import_maps(html: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of the page's first import-map elements."""
    out, lower = [], None
    for m in _IMPORTMAP_TAG.finditer(html):
        lower = lower or html.lower()
        close = lower.find("</script", m.end()) if len(out) < MAX_MAPS else -1
        if close < 0:
            break
        end = html.find(">", close)
        out.append((m.start(), len(html) if end < 0 else end + 1, html[m.end():close]))
    return out


def _page_import_map(maps: list[tuple[int, int, str]], fallback: dict[str, str]) -> dict[str, str]:
    for _, _, text in maps:
        try:
            imports = json.loads(text).get("imports")
        except (ValueError, AttributeError):
            continue
        if isinstance(imports, dict):
            return {str(k): v for k, v in imports.items() if isinstance(v, str)}
    return dict(fallback)


def _resolve(spec: str, base: str | None, imports: dict[str, str]) -> str | None:
    if spec.startswith(("./", "../", "/")):
        return urljoin(base, spec) if base else None
    if spec.startswith(("https://", "http://")):
        return spec
    if spec in imports:
        return imports[spec]
    prefixes = [k for k in imports if k.endswith("/") and spec.startswith(k)]
    if prefixes:
        k = max(prefixes, key=len)
        return imports[k] + spec[len(k):]
    return None


def _js(text: str) -> str:
    """A JS string literal that is safe inside <script>: no '<' can end or restart the element."""
    return json.dumps(text).replace("<", "\\u003c")


def write_play(page_file: Path, play_dir: Path, task: Task | None = None) -> Play:
    """Write play_dir/game.html and the library files it imports. InfraError when the npm cache
    is not there (no fetching here: a report never goes to the network).

    task: the run's task, whose import map a page without one of its own uses and whose packages
    the offline cache holds; None (a task this machine does not know): only the page's own map,
    and nothing from the cache."""
    fallback_map = task.import_map if task is not None else {}
    cdn = None  # opened at the first library file: a page that imports nothing needs no cache
    if page_file.stat().st_size > MAX_PAGE_BYTES:
        raise InfraError(f"{page_file.name} is over {MAX_PAGE_BYTES:,} bytes: not copied for playing")
    html = page_file.read_bytes().decode("utf-8", errors="replace")
    maps = _import_maps(html)
    imports = _page_import_map(maps, fallback_map)

    specs: dict[str, str] = {}  # every specifier seen -> the URL it names
    texts: dict[str, str] = {}  # shipped URL -> its text, relative imports made absolute
    missing: list[str] = []
    todo = deque(itertools.islice(((m.group(3), None) for m in _SPEC.finditer(html)), MAX_SPECS))
    looked = 0
    while todo and len(texts) < MAX_FILES and looked < MAX_SPECS:
        spec, base = todo.popleft()
        looked += 1
        url = _resolve(spec, base, imports)
        if url is None:
            continue
        if not spec.startswith(("./", "../", "/")):
            specs[spec] = url
        specs[url] = url
        if url in texts or url in missing:
            continue
        if cdn is None and task is not None and url.startswith(CDN_PREFIX):
            from showcase.browser.cdn import ensure_npm_cache
            from showcase.check.runner import offline_cdn  # the check's own, unpacked once per process

            ensure_npm_cache(task.npm, fetch=False)
            cdn = offline_cdn(None, task)
        found = cdn.lookup(url) if cdn is not None and url.startswith(CDN_PREFIX) else None
        if found is None:
            missing.append(url)
            continue
        text = found[0].decode("utf-8", errors="replace")
        found_specs = [m.group(3) for m in _SPEC.finditer(text)]
        # A data: module has no folder to resolve "./x.js" against: name it by its full URL instead.
        text = _SPEC.sub(lambda m: m.group(1) + m.group(2) + (
            urljoin(url, m.group(3)) if m.group(3).startswith(("./", "../", "/")) else m.group(3)) + m.group(2), text)
        texts[url] = text
        todo += [(s, url) for s in found_specs]

    if play_dir.is_symlink() or (play_dir.exists() and not play_dir.is_dir()):
        raise InfraError(f"{play_dir} is not a folder of ours: not written")
    if play_dir.exists():
        shutil.rmtree(play_dir)  # a version chosen earlier may have used other files
    scripts = [
        f"<script>(window.__showcaseModules ||= {{}})[{_js(url)}] = {_js(text)};</script>" for url, text in texts.items()
    ]
    body, cut = [], 0  # the page's own maps go: the loader's map names the same specifiers
    for start, end, _ in maps:
        body.append(html[cut:start])
        cut = end
    body = "".join(body) + html[cut:]
    map_json = json.dumps(specs).replace("<", "\\u003c")  # JSON too: no '<' inside the element
    head = (
        "<!doctype html>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{PLAY_CSP}">\n'
        + "\n".join(scripts)
        + f'\n<script type="application/json" id="showcase-play-map">{map_json}</script>\n<script>{_LOADER}</script>\n'
    )
    page = play_dir / "game.html"
    write_text_atomic(page, head + body)
    return Play(page=page, files=list(texts), missing=missing)
