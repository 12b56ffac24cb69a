"""The clip recorder against real Chromium (llvmpipe) and real ffmpeg/ffprobe.

Pages are in tests/pages/clip_*.html. Clips are short and small to keep the whole file ~1-2 min.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from showcase.clip import ClipResult, record_clip_file
from showcase.clip.encode import probe as probe_clip
from showcase.errors import InfraError, UserError

PAGES = Path(__file__).resolve().parent / "pages"
SHOWCASE = [sys.executable, "-m", "showcase.cli"]

pytestmark = pytest.mark.browser


def probe(path: Path) -> dict:
    return probe_clip(path)


def frame_hashes(path: Path) -> list[str]:
    """MD5 of every decoded frame (ffmpeg -f framemd5)."""
    out = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "framemd5", "-"],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return [line.rsplit(",", 1)[1].strip() for line in out.stdout.splitlines() if line and not line.startswith("#")]


def gray_frames(path: Path) -> "np.ndarray":
    """Every decoded frame as 8-bit gray (frames, height, width)."""
    info = probe(path)
    raw = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "gray", "-"],
        capture_output=True, timeout=60, check=True,
    ).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, info["height"], info["width"]).astype(np.int16)


def test_virtual_clip_is_h264_of_the_asked_shape_and_the_same_every_time(tmp_path):
    a = record_clip_file(PAGES / "clip_spin.html", tmp_path / "a.mp4", seconds=1.2, fps=15, size=(320, 240))
    b = record_clip_file(PAGES / "clip_spin.html", tmp_path / "b.mp4", seconds=1.2, fps=15, size=(320, 240))

    info = probe(tmp_path / "a.mp4")
    assert info["codec_name"] == "h264" and info["pix_fmt"] == "yuv420p"
    assert (info["width"], info["height"]) == (320, 240)
    assert info["r_frame_rate"] == "15/1" and int(info["nb_frames"]) == 18
    assert info["duration"] == pytest.approx(1.2, abs=0.01)
    data = (tmp_path / "a.mp4").read_bytes()
    assert data.index(b"moov") < data.index(b"mdat"), "faststart puts the index first"
    assert (tmp_path / "a.mp4").stat().st_mode & 0o777 == 0o644, "readable like every other run file"

    assert a.mode == "virtual" and a.frames == a.rendered_frames == 18 and a.note is None and a.page_errors == []
    # The page's own clock advanced exactly 1/15 s per frame, from 1/15 s to 1.2 s.
    assert a.frame_times_ms[0] == pytest.approx(1000 / 15) and a.frame_times_ms[-1] == pytest.approx(1200)
    assert a.frame_step.min_ms == pytest.approx(1000 / 15, abs=1e-6)
    assert a.frame_step.max_ms == pytest.approx(1000 / 15, abs=1e-6)
    assert "llvmpipe" in a.renderer

    assert b.frame_times_ms == a.frame_times_ms
    hashes_a, hashes_b = frame_hashes(tmp_path / "a.mp4"), frame_hashes(tmp_path / "b.mp4")
    assert len(set(hashes_a)) == 18, "camera and cubes move every frame: every frame differs"
    assert hashes_a == hashes_b, "same page, same clip, frame for frame (seeded Math.random, virtual clock)"
    assert not list(tmp_path.glob("*.part")), "no temp file left behind"


def test_page_that_freezes_after_3s_still_gives_a_clip_with_a_note(tmp_path):
    out = tmp_path / "freeze.mp4"
    r = record_clip_file(PAGES / "clip_freeze.html", out, seconds=5, fps=10, size=(320, 240), frame_timeout_s=6)
    assert r.frames == 50 and r.rendered_frames == 30
    assert r.note and "stopped rendering at 3.0 s" in r.note and "last frame repeats" in r.note
    info = probe(out)
    assert int(info["nb_frames"]) == 50 and info["duration"] == pytest.approx(5.0, abs=0.01)
    # H.264 refines a repeated picture, so compare pixels, not hashes: the camera orbit changes
    # each frame by a lot until 3 s, then the same picture stays (changes only by coding noise).
    frames = gray_frames(out)
    change = np.abs(np.diff(frames, axis=0)).mean(axis=(1, 2))
    assert change[:29].min() > 3 * max(change[29:].max(), 0.5), change.round(2).tolist()
    assert np.abs(frames[29:] - frames[29]).mean() < 1.0


def test_page_that_blocks_while_loading_gives_a_clip_of_what_it_shows(tmp_path, monkeypatch):
    import showcase.clip.record as record

    monkeypatch.setattr(record, "NAV_TIMEOUT_S", 5.0)  # the bound itself, shortened to keep the test quick
    out = tmp_path / "blocked.mp4"
    r = record_clip_file(PAGES / "clip_block_load.html", out, seconds=1, fps=5, size=(160, 120))
    assert r.frames == 5 and r.rendered_frames == 0
    assert r.note == "the page blocked its main thread while loading (stopped after 5 s)"
    frames = gray_frames(out)
    assert len(frames) == 5 and frames.mean() > 50, "the red page it showed, not a black frame"


def test_page_that_reloads_itself_goes_on_with_a_fresh_clock(tmp_path):
    # A screenshot or step in flight during the reload never answers; the recorder must not take
    # that for a hang.
    r = record_clip_file(PAGES / "clip_reload.html", tmp_path / "r.mp4", seconds=2, fps=10, size=(160, 120))
    assert r.note is None and r.frames == r.rendered_frames == 20
    assert r.distinct_frames >= 12, "black until the reload, then a new colour every frame"
    assert r.frame_step.min_ms == pytest.approx(100) and r.frame_step.max_ms == pytest.approx(100)


def test_errors_in_the_frame_loop_are_reported_and_the_clip_is_whole(tmp_path):
    r = record_clip_file(PAGES / "clip_error.html", tmp_path / "e.mp4", seconds=1, fps=10, size=(160, 120))
    assert r.frames == r.rendered_frames == 10
    assert r.page_errors and "boom in the frame loop" in r.page_errors[0]
    assert "(x5)" in r.page_errors[0], "thrown at 0.6 .. 1.0 s of page time: five frames"
    assert len(set(frame_hashes(tmp_path / "e.mp4"))) == 10, "the loop keeps running after each error"


def test_page_that_busy_waits_on_its_clock_is_not_taken_for_hung(tmp_path):
    r = record_clip_file(PAGES / "clip_busywait.html", tmp_path / "b.mp4", seconds=1, fps=10, size=(160, 120))
    assert r.frames == r.rendered_frames == 10 and r.distinct_frames == 10
    assert r.note and "busy-waited on its clock" in r.note
    # Each frame spun 20 ms of page time past its 100 ms step, and the next step still lands on k/fps.
    assert r.frame_times_ms[0] == pytest.approx(120, abs=0.01)
    assert r.frame_step.min_ms == pytest.approx(100, abs=0.01) and r.frame_step.max_ms == pytest.approx(100, abs=0.01)


def test_realtime_clip_records_the_screencast(tmp_path):
    out = tmp_path / "rt.mp4"
    r = record_clip_file(PAGES / "clip_spin.html", out, seconds=2, fps=10, size=(320, 240), realtime=True)
    assert r.mode == "realtime" and r.frames == 20 and r.random_seed is None
    info = probe(out)
    assert (info["width"], info["height"], info["r_frame_rate"]) == (320, 240, "10/1")
    assert info["duration"] == pytest.approx(2.0, abs=0.01)
    assert len(set(frame_hashes(out))) >= 3, "the page animates in real time too"
    # Capture times are real: they only grow, and stay within the clip.
    assert r.frame_times_ms == sorted(r.frame_times_ms) and r.frame_times_ms[-1] <= 2000


def test_realtime_clip_of_a_page_that_freezes_ends_on_time_and_says_so(tmp_path):
    r = record_clip_file(PAGES / "clip_freeze.html", tmp_path / "rtf.mp4", seconds=5, fps=5, size=(160, 120), realtime=True)
    assert r.frames == 25 and probe(tmp_path / "rtf.mp4")["duration"] == pytest.approx(5.0, abs=0.01)
    assert r.note and "main thread was blocked when the recording ended" in r.note
    assert "the picture did not change after" in r.note


def test_no_webgl_is_an_infra_error_and_an_existing_clip_is_kept(tmp_path):
    out = tmp_path / "keep.mp4"
    out.write_bytes(b"an older clip")
    with pytest.raises(InfraError, match="no WebGL"):
        record_clip_file(PAGES / "clip_spin.html", out, seconds=1, fps=5, size=(160, 120),
                         browser_args=["--disable-gpu", "--disable-software-rasterizer"])
    assert out.read_bytes() == b"an older clip"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.mp4"]


def test_bad_settings_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        record_clip_file(tmp_path / "missing.html", tmp_path / "x.mp4")
    page = PAGES / "clip_spin.html"
    with pytest.raises(UserError, match="even"):
        record_clip_file(page, tmp_path / "x.mp4", size=(321, 240))
    with pytest.raises(UserError, match="--fps"):
        record_clip_file(page, tmp_path / "x.mp4", fps=0)
    with pytest.raises(UserError, match="is a folder"):
        record_clip_file(page, tmp_path)
    assert not (tmp_path / "x.mp4").exists()


def test_ffmpeg_failure_is_an_infra_error_and_leaves_no_file(tmp_path):
    import asyncio

    from showcase.clip.encode import Mp4Writer

    async def go():
        writer = Mp4Writer(tmp_path / "bad.mp4", 10, (160, 120))
        await writer.start()
        try:
            for _ in range(3):
                await writer.write(b"this is not a PNG")
            await writer.close()
        except InfraError as exc:
            return str(exc)

    message = asyncio.run(go())
    assert message and message.startswith("ffmpeg")
    assert list(tmp_path.iterdir()) == []


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SHOWCASE, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_cli_json_and_exit_codes(tmp_path):
    out = tmp_path / "cli.mp4"
    p = run_cli("clip", str(PAGES / "clip_spin.html"), "-o", str(out), "--seconds", "1", "--fps", "5",
                "--size", "160x120", "--json")
    assert p.returncode == 0, p.stderr
    result = ClipResult.model_validate_json(p.stdout)
    assert result.frames == 5 and result.size == (160, 120) and Path(result.path) == out
    assert probe(out)["nb_frames"] == "5"

    p = run_cli("clip", str(tmp_path / "nope.html"), "-o", str(out))
    # (the console may wrap a long line; the words are what a user reads)
    assert p.returncode == 2 and p.stderr.split() == f"error: {tmp_path / 'nope.html'}: no such file".split()
    p = run_cli("clip", str(PAGES / "clip_spin.html"), "--size", "big")
    assert p.returncode == 2 and "--size must look like 1280x720" in p.stderr

    p = run_cli("clip", str(PAGES / "clip_spin.html"), "-o", str(out),
                env={**os.environ, "SHOWCASE_CHROMIUM": str(tmp_path / "no-chromium")})
    assert p.returncode == 3 and "Chromium not found" in p.stderr
    p = run_cli("clip", str(PAGES / "clip_spin.html"), "-o", str(out),
                env={**os.environ, "PATH": str(tmp_path)})
    assert p.returncode == 3 and "ffmpeg not found" in p.stderr

    p = run_cli("schema", "clip")
    assert p.returncode == 0 and "frame_times_ms" in json.loads(p.stdout)["properties"]
