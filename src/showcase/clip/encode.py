"""ffmpeg as a pipe: image frames in (PNG or JPEG, one after another), an H.264 mp4 out, atomically.

The command lines are built with ffmpeg-python; the encoder runs as an asyncio subprocess so
every write to it is bounded (ffmpeg-python's own runners block).
"""

import asyncio
import concurrent.futures
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import ffmpeg

from showcase.errors import InfraError

CLOSE_TIMEOUT_S = 120.0  # encoding the tail of a 15 s clip takes a few seconds; a stuck ffmpeg must not hang us
WRITE_TIMEOUT_S = 60.0
# Frames waiting for ffmpeg, in bytes: the recorder goes on to the next frame while ffmpeg encodes
# this one (a 720p PNG is 0.1-0.5 MB), and a writer never holds more than this in memory.
BACKLOG_BYTES = 16 * 1024 * 1024
PIPE_BYTES = 1024 * 1024  # Linux's default cap for an unprivileged F_SETPIPE_SZ
# x264 preset: superfast spends about 2/3 of veryfast's CPU per 720p frame here, at the same CRF
# (files about 1.7x larger); the encoder shares the cores with software GL.
X264_PRESET = "superfast"


def ffmpeg_path() -> str:
    path = shutil.which("ffmpeg")
    if not path:
        raise InfraError("ffmpeg not found; install it with `apt-get install ffmpeg` (scripts/setup.sh does)")
    return path


def ffmpeg_version() -> str:
    """e.g. 'ffmpeg version 5.1.9-0+deb12u1', for the record of how a clip was made."""
    import subprocess

    try:
        out = subprocess.run([ffmpeg_path(), "-version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InfraError(f"ffmpeg not usable: {exc}") from exc
    first = (out.stdout or out.stderr).strip().splitlines()
    return " ".join(first[0].split()[:3]) if first else "ffmpeg (unknown version)"


class Mp4Writer:
    """Frames are written as they come; close() finishes the file and moves it onto `out`.

    The mp4 appears at `out` only when complete (temp file in the same folder, then os.replace),
    so a crash or a failed encode never leaves a half-written clip where a clip is expected.
    """

    def __init__(self, out: Path, fps: int, size: tuple[int, int], image_format: str = "png"):
        self.out = Path(out)
        self.image_format = image_format  # "png" or "jpeg": every frame in the same one
        self.fps = fps
        self.size = size
        self.frames = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._tmp: Path | None = None
        self._log = None

    async def start(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.out.stem}.", suffix=".mp4.part", dir=self.out.parent)
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; ffmpeg keeps the mode, and a clip is meant to be served like every run file
        os.close(fd)
        self._tmp = Path(tmp)
        self._log = tempfile.TemporaryFile()  # ffmpeg's stderr, read back only on failure (a pipe could fill and block it)
        w, h = self.size
        # The input codec is named: probing a pipe of tiny first frames (a blank page) can fail.
        stream = ffmpeg.input("pipe:", f="image2pipe", vcodec={"png": "png", "jpeg": "mjpeg"}[self.image_format],
                              framerate=self.fps)
        # The screencast may hand frames of another size; scaling to the asked size is a no-op otherwise.
        stream = stream.filter("scale", w, h, flags="bicubic").filter("format", "yuv420p")
        stream = stream.output(str(self._tmp), vcodec="libx264", preset=X264_PRESET, crf=18, pix_fmt="yuv420p",
                               r=self.fps, movflags="+faststart", f="mp4")
        # Global options first: ffmpeg-python puts them after the output, where ffmpeg may ignore them.
        args = [ffmpeg_path(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *stream.get_args()]
        self._proc = await asyncio.create_subprocess_exec(
            *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=self._log,
        )
        stdin = self._proc.stdin
        try:
            fcntl.fcntl(stdin.get_extra_info("pipe").fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except (OSError, AttributeError):
            pass  # a smaller pipe only means the backlog sits in our buffer instead
        stdin.transport.set_write_buffer_limits(high=BACKLOG_BYTES)

    async def write(self, frame: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(frame)
            await asyncio.wait_for(self._proc.stdin.drain(), WRITE_TIMEOUT_S)
        except (TimeoutError, BrokenPipeError, ConnectionResetError) as exc:
            if not isinstance(exc, TimeoutError):  # ffmpeg quit: let it finish writing why
                try:
                    await asyncio.wait_for(self._proc.wait(), 10)
                except TimeoutError:
                    pass
            msg = self._error_text() or type(exc).__name__
            await self.abort()
            raise InfraError(f"ffmpeg stopped taking frames: {msg}") from exc
        self.frames += 1

    async def close(self) -> Path:
        assert self._proc is not None and self._proc.stdin is not None and self._tmp is not None
        self._proc.stdin.close()
        try:
            rc = await asyncio.wait_for(self._proc.wait(), CLOSE_TIMEOUT_S)
        except TimeoutError:
            await self.abort()
            raise InfraError(f"ffmpeg did not finish within {CLOSE_TIMEOUT_S:.0f} s") from None
        if rc != 0 or self.frames == 0:
            msg = self._error_text()
            await self.abort()
            raise InfraError(f"ffmpeg failed (exit {rc}): {msg or 'no frames'}")
        os.replace(self._tmp, self.out)
        self._tmp = None
        self._close_log()
        return self.out

    async def abort(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            try:
                await asyncio.wait_for(self._proc.wait(), 10)
            except TimeoutError:
                pass
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _error_text(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        lines = self._log.read().decode(errors="replace").strip().splitlines()
        return lines[0] if lines else ""  # the first error is the cause; the rest follow from it


PROBE_TIMEOUT_S = 60.0


def probe(path: Path, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """ffprobe's view of a clip: the video stream's codec, pix_fmt, size, rate, frame count, and
    the container's duration (s). The wait is bounded; ffmpeg-python's probe itself is not."""
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="showcase-ffprobe")
    try:
        data = pool.submit(ffmpeg.probe, str(path), select_streams="v:0").result(timeout_s)
    except concurrent.futures.TimeoutError:
        raise InfraError(f"ffprobe did not answer within {timeout_s:.0f} s for {path}") from None
    except ffmpeg.Error as exc:
        why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
        raise InfraError(f"ffprobe could not read {path}: {why[0] if why else exc}") from None
    finally:
        pool.shutdown(wait=False)
    stream = data["streams"][0]
    keys = ("codec_name", "pix_fmt", "width", "height", "r_frame_rate", "nb_frames")
    return {**{k: stream.get(k) for k in keys}, "duration": float(data["format"]["duration"])}
