"""How every run file lands on disk: whole files atomically, logs one fsynced line at a time.

A reader (or a `kill -9` at any moment) sees either the old file or the new one, never half;
a JSON-lines log loses at most the line being written, never an earlier one.
"""

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel


def _json_text(data: BaseModel | Any, indent: int | None) -> str:
    if isinstance(data, BaseModel):
        return data.model_dump_json(indent=indent)
    return json.dumps(data, indent=indent, ensure_ascii=False)


def _fsync_dir(directory: Path) -> None:
    # The rename itself is only durable once the directory entry is on disk.
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write `data` to `path` via a temp file in the same folder, fsync, os.replace, fsync folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be read and served
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path | str, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path | str, model: BaseModel | Any, indent: int = 2) -> None:
    """Write a pydantic model (or plain JSON data) as pretty JSON, atomically."""
    write_text_atomic(path, _json_text(model, indent) + "\n")


def append_jsonl(path: Path | str, model: BaseModel | Any) -> None:
    """Append one JSON line and fsync it.

    One os.write on an O_APPEND descriptor per line: concurrent appenders (threads or
    processes) never interleave inside a line on a local file system.
    """
    line = _json_text(model, None)
    if "\n" in line:  # cannot happen with compact JSON; guards the one-line-per-record promise
        raise ValueError("a JSON line must not contain a newline")
    data = (line + "\n").encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):  # a full disk; say so rather than leave a silent half line
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def scan_jsonl(path: Path | str) -> tuple[list[dict], int]:
    """Every JSON object of a JSON-lines file, and how many non-empty lines were not one.

    A line is torn only when its writer was killed mid-write; after a restart, later appends
    may follow it on the same line (see `terminate_torn_line`), so any undecodable line is
    skipped rather than taking the whole file down. A missing file has no rows.
    """
    path = Path(path)
    if not path.exists():
        return [], 0
    rows, bad = [], 0
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def read_jsonl(path: Path | str) -> list[dict]:
    """The JSON objects of a JSON-lines file, torn and foreign lines skipped (see `scan_jsonl`)."""
    return scan_jsonl(path)[0]


def terminate_torn_line(path: Path | str) -> bool:
    """If `path` ends without a newline (a writer was killed mid-line), end that line.

    Returns True when it had to. Later appends then start on a fresh line.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return False
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return True
