"""The offline CDN: import-map URLs answered from the packages' npm tarballs.

`https://cdn.jsdelivr.net/npm/<pkg>@<ver>/<path>` -> member `package/<path>` of that package's
tarball. Tarballs are filled once by set-up (`npm pack`, integrity checked) into the cache, or
taken from --npm-dir / SHOWCASE_NPM_DIR. Looking a URL up never touches the network.
"""

import base64
import hashlib
import mimetypes
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from showcase.errors import InfraError
from showcase.paths import cache_dir
from showcase.task import NpmPackage

CDN_PREFIX = "https://cdn.jsdelivr.net/npm/"
_URL = re.compile(r"^https://cdn\.jsdelivr\.net/npm/((?:@[^/@]+/)?[^/@]+)@([^/]+)/(.*)$")


def integrity_of(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def default_npm_dir() -> Path:
    return Path(os.environ.get("SHOWCASE_NPM_DIR") or cache_dir() / "npm")


def ensure_npm_cache(packages: list[NpmPackage], npm_dir: Path | None = None, fetch: bool = True) -> Path:
    """Make sure every tarball is in npm_dir with its published integrity; fetch missing ones with npm.

    A tarball whose integrity differs is never used: it is an infrastructure error (exit 3).
    """
    npm_dir = Path(npm_dir or default_npm_dir())
    npm_dir.mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        path = npm_dir / pkg.tarball
        if not path.is_file():
            if not fetch:
                raise InfraError(f"npm tarball {pkg.tarball} missing in {npm_dir}; run scripts/setup.sh or pass --npm-dir")
            _npm_pack(pkg, npm_dir)
        got = integrity_of(path)
        if got != pkg.integrity:
            raise InfraError(f"{path}: integrity {got} differs from the published {pkg.integrity}")
    return npm_dir


def _npm_pack(pkg: NpmPackage, npm_dir: Path) -> None:
    if not shutil.which("npm"):
        raise InfraError(f"npm tarball {pkg.tarball} missing in {npm_dir} and npm is not installed to fetch it")
    with tempfile.TemporaryDirectory(dir=npm_dir) as tmp:
        try:
            subprocess.run(
                ["npm", "pack", f"{pkg.name}@{pkg.version}", "--pack-destination", tmp],
                check=True, capture_output=True, timeout=300,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            raise InfraError(f"npm pack {pkg.name}@{pkg.version} failed: {exc}") from exc
        # Land atomically: a half-written tarball must never look cached.
        os.replace(Path(tmp) / pkg.tarball, npm_dir / pkg.tarball)


class OfflineCdn:
    """Answers CDN URLs of the known packages from their tarballs (members read lazily, then kept)."""

    def __init__(self, packages: list[NpmPackage], npm_dir: Path | None = None):
        self.npm_dir = ensure_npm_cache(packages, npm_dir)
        self._tarballs = {(p.name, p.version): self.npm_dir / p.tarball for p in packages}
        self._members: dict[tuple[str, str], dict[str, bytes]] = {}

    def _load(self, key: tuple[str, str]) -> dict[str, bytes]:
        if key not in self._members:
            files: dict[str, bytes] = {}
            with tarfile.open(self._tarballs[key], "r:gz") as tar:
                for member in tar:
                    if member.isfile():
                        f = tar.extractfile(member)
                        if f is not None:
                            # npm tarballs nest everything under one top folder, normally 'package/'.
                            files[member.name.split("/", 1)[-1]] = f.read()
            self._members[key] = files
        return self._members[key]

    def lookup(self, url: str) -> tuple[bytes, str] | None:
        """Body and content type for a CDN URL of a cached package, else None."""
        m = _URL.match(url.split("?", 1)[0].split("#", 1)[0])
        if not m or (m.group(1), m.group(2)) not in self._tarballs:
            return None
        body = self._load((m.group(1), m.group(2))).get(m.group(3))
        if body is None:
            return None
        ctype = mimetypes.guess_type(m.group(3))[0] or "application/octet-stream"
        if m.group(3).endswith((".js", ".mjs")):
            ctype = "text/javascript"
        return body, ctype
