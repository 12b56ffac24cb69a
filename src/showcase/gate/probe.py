"""Before a run: is the upstream there, and does it serve the model we were told to use?"""

import ssl
from pathlib import Path

import httpx

from showcase.gate.transport import connection_refused


def _models_url(upstream: str) -> str:
    base = upstream.rstrip("/")
    return f"{base}/models" if base.endswith("/v1") else f"{base}/v1/models"


async def probe_upstream(upstream: str, model: str, api_key: str | None, timeout_s: float,
                         ca_file: Path | None = None) -> str | None:
    """None when the upstream answers /v1/models and lists `model`; else a one-line reason.

    `ca_file`: the CA that signed an HTTPS upstream's certificate, as the gate is given it.
    """
    url = _models_url(upstream)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    verify = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
    try:
        async with httpx.AsyncClient(timeout=timeout_s, trust_env=False, verify=verify) as client:
            response = await client.get(url, headers=headers)
    except httpx.ConnectError as exc:
        if connection_refused(exc):
            return f"upstream {upstream} refused the connection ({exc})"
        return f"cannot connect to upstream {upstream}: {exc}"
    except httpx.TimeoutException:
        return f"upstream {upstream} did not answer {url} within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        return f"upstream {upstream}: {exc.__class__.__name__} {exc}".strip()
    if response.status_code in (401, 403):
        return f"upstream {upstream} refused the key: {url} answered {response.status_code}"
    if response.status_code >= 400:
        return f"upstream {upstream}: {url} answered {response.status_code}: {response.text[:200]}"
    try:
        data = response.json()
        names = [str(entry.get("id")) for entry in data.get("data", []) if isinstance(entry, dict)]
    except (ValueError, AttributeError):
        return f"upstream {upstream}: {url} is not an OpenAI-compatible model list"
    if model not in names:
        listed = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
        return f"upstream {upstream} has no model {model!r} in /v1/models (it lists: {listed or 'nothing'})"
    return None
