"""The report pages, opened in real Chromium: no outside request, no console error, the clip
plays, images load, sorting works, links resolve. Run folders are written by tests/runfolder.py
with a real PNG and a real H.264 clip."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from runfolder import HOSTILE, make_clip, make_run
from showcase.browser.launch import launch_browser
from showcase.errors import UserError
from showcase.report import write_comparison, write_run_report
from showcase.report.load import load_run

STEP_S = 30.0  # bound on every single browser call (the machine is shared: generous)


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


# ---- one run -----------------------------------------------------------------------------------


async def test_run_report_in_chromium(tmp_path, clip):
    run = make_run(tmp_path, "run one", clip_source=clip, world_title=HOSTILE, n_versions=5, failed_versions=(2,), agent_shots=2)
    report = write_run_report(run)
    elsewhere = write_run_report(run, tmp_path / "published" / "one.html")
    assert report == run / "report.html" and elsewhere.is_file()

    async with launch_browser() as browser:
        for path in (report, elsewhere):
            v = await visit(browser, path, tmp_path)
            page = v.page
            imgs = await images_loaded(page)
            # the screenshot, the agent's two shot.sh screenshots, and the same two as the
            # thumbnails of the versions current when they were taken
            assert len(imgs) == 5 and all(w > 0 for _, w in imgs), imgs
            t, width = await video_advances(page, "#clip")
            assert t > 0.3 and width == 320
            await assert_clean(v)

        # what a person reads (on the last page visited: the copy outside the run folder)
        text = await page.inner_text("body")
        assert "The agent ran 92.3 minutes" in text
        assert "Browser check 10.0 out of 10" in text
        assert await page.inner_text("#world-title") == HOSTILE  # shown as text, never run
        assert await page.locator("#items tbody tr").count() == 11
        assert "2 s at 30 fps" in await page.inner_text("#clip-caption")
        facts = await page.inner_text("#timeline-facts")
        fn_first = json.loads((run / "gate-stats.json").read_text())["finish_now_first_s"]
        assert f"first sent at {fn_first / 60:.1f} min" in facts and "ended at 92.3 min (done)" in facts
        # the version that counts is highlighted, the one that failed says so
        assert await page.get_attribute("#v5", "class") == "version chosen"
        assert "did not load cleanly" in await page.inner_text("#v2")
        assert "THREE is not defined" in await page.inner_text("#v2")
        # each version links to its kept HTML file
        hrefs = await page.eval_on_selector_all("#versions a", "as => as.map(a => a.href)")
        assert len(hrefs) == 5 and all(local_path(h).is_file() and local_path(h).parent.name == "versions" for h in hrefs)
        # tokens over time: one step path per panel, with the finish-now mark
        assert await page.locator("svg[aria-label='tokens over time'] path").count() == 2
        assert await page.locator("svg[aria-label='tokens over time'] line.mark-finish").count() == 2
        assert "requests" in await page.inner_text("body")


async def test_killed_run_gets_a_page_that_says_so(tmp_path, clip):
    run = make_run(tmp_path, "killed", clip_source=clip, finalized=False, n_versions=4)
    (run / "gate-stats.json").write_text('{"requests": 12, "errors": 0, "blo')  # cut mid-write
    report = write_run_report(run)
    async with launch_browser() as browser:
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


async def test_comparison_sorts_links_and_plays(tmp_path, clip):
    runs = [
        make_run(tmp_path / "runs", "alpha", clip_source=clip, model="m-beta", points={"5": 0.0}),  # 9
        make_run(tmp_path / "runs", "bravo", clip_source=clip, model="m-alpha", finalized=False),  # no score
        make_run(tmp_path / "runs", "charlie", clip_source=clip, model="m-gamma", points={"5": 0.5, "9": 0, "10": 0}),  # 7.5
        make_run(tmp_path / "runs", "delta", clip_source=clip, model="m-delta", points={}, requests=30, minutes=120.0),  # 10
    ]
    out = write_comparison(runs, tmp_path / "site" / "compare.html")
    async with launch_browser() as browser:
        v = await visit(browser, out, tmp_path)
        page = v.page

        async def order() -> list[str]:
            return await asyncio.wait_for(page.eval_on_selector_all("#runs tbody tr", "rs => rs.map(r => r.dataset.run)"), STEP_S)

        assert await order() == ["alpha", "bravo", "charlie", "delta"]
        await asyncio.wait_for(page.click("#runs th:has-text('score')"), STEP_S)
        assert await order() == ["charlie", "alpha", "delta", "bravo"]  # ascending, unscored last
        await asyncio.wait_for(page.click("#runs th:has-text('score')"), STEP_S)
        assert await order() == ["delta", "alpha", "charlie", "bravo"]  # descending, unscored still last
        await asyncio.wait_for(page.click("#runs th:has-text('model')"), STEP_S)
        assert await order() == ["bravo", "alpha", "delta", "charlie"]  # m-alpha, m-beta, m-delta, m-gamma
        await asyncio.wait_for(page.click("#runs th:has-text('tokens')"), STEP_S)
        assert (await order())[-1] == "delta"  # 30 requests: the most tokens

        imgs = await images_loaded(page)
        assert len(imgs) == 3 and all(w > 0 for _, w in imgs), imgs  # the unfinished run has no screenshot
        assert await page.locator(".gallery video").count() == 3
        for i in (1, 2, 3):
            t, _ = await video_advances(page, f".gallery .card:nth-child({[1, 3, 4][i - 1]}) video")
            assert t > 0.3

        # delta ran under other limits? no: same contract terms; only the models differ on purpose
        assert await page.locator("#contract-warning").count() == 0
        assert "model" in await page.inner_text("#contract-diff")

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
    assert "contract.json does not match its model" in html and "contract.json not recorded" in html
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
    assert "the agent's own screenshot at" in view.versions[0].thumb_note
    html = write_run_report(run).read_text()
    assert html.count('class="thumb borrowed"') == 2 and 'id="agent-shots"' in html
