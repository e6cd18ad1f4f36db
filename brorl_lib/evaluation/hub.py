"""The Hugging Face hub, asked once before anything loads, so that nothing waits on a network that is not there.

Without an answer from the hub, huggingface_hub, transformers and datasets retry each request with
back-off for minutes before they fail (or fall back to their local caches). So the evaluation first asks
the hub's endpoint (``HF_ENDPOINT``, default https://huggingface.co, through huggingface_hub's own HTTP
client and its proxy settings) for one answer within ``PROBE_TIMEOUT_S``:

* ``offline()``: True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set or the endpoint does
  not answer; it then switches this process to offline mode (``go_offline``), in which the three libraries
  read their local caches only and fail at once.
* ``check_model(model, revision, offline)``: a model given as a hub id must be in the local cache when
  offline, and known to the hub (with that revision) when online; otherwise ``ValueError`` naming
  ``--model`` (or ``--revision``) and what to do.
"""

from __future__ import annotations

import os
from pathlib import Path

PROBE_TIMEOUT_S = 5.0  # seconds to wait for the hub's first answer; our choice


def go_offline() -> None:
    """Offline mode for this process (and the processes it starts): hub requests fail at once."""
    import huggingface_hub.constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        import datasets.config
    except ImportError:
        return
    datasets.config.HF_HUB_OFFLINE = True


def endpoint_answers(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the hub's endpoint answers one HTTP request (any status) within ``timeout_s`` seconds."""
    import httpx
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=timeout_s)
    except (httpx.HTTPError, OSError):
        return False
    return True


def offline(timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when hub requests are off (``HF_HUB_OFFLINE``) or the hub does not answer; offline mode is then on."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or not endpoint_answers(timeout_s):
        go_offline()
        return True
    return False


def _cached(model: str, revision: str | None) -> bool:
    from huggingface_hub import constants, try_to_load_from_cache

    found = try_to_load_from_cache(model, "config.json", cache_dir=constants.HF_HUB_CACHE, revision=revision)
    return isinstance(found, str)


def check_model_name(model: str) -> None:
    """``model`` is an existing path or has the form of a hub id, ``owner/name`` (asks nothing of the hub)."""
    if not Path(model).exists() and model.count("/") != 1:
        raise ValueError(f"--model {model!r}: no such folder, and not a hub id of the form owner/name")


def check_model(model: str, revision: str | None, is_offline: bool) -> None:
    """``model`` can be loaded: a local folder, or a hub id ``owner/name`` that is in the local cache
    (offline) or that the hub knows at ``revision`` (online). Raises ``ValueError`` naming the flag."""
    check_model_name(model)
    if Path(model).exists():
        return
    what = f"--model {model!r}" + (f" (--revision {revision!r})" if revision else "")
    from huggingface_hub import constants

    if is_offline:
        if _cached(model, revision):
            return
        raise ValueError(
            f"{what}: no such folder, and not in the local Hugging Face cache ({constants.HF_HUB_CACHE}), while the "
            f"hub ({constants.ENDPOINT}) cannot be reached or HF_HUB_OFFLINE is set: pass a local folder, or "
            f"download the model where there is network (`hf download {model}`) into this cache"
        )
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        HfApi().model_info(model, revision=revision, timeout=PROBE_TIMEOUT_S)
    except GatedRepoError:
        raise ValueError(
            f"{what}: the model is gated: accept its terms on the hub and log in (`hf auth login`)"
        ) from None
    except RevisionNotFoundError:
        raise ValueError(f"{what}: the hub has no revision {revision!r} of this model") from None
    except RepositoryNotFoundError:
        raise ValueError(
            f"{what}: no such folder, and the hub knows no such model (or it is private: log in with `hf auth login`)"
        ) from None
    except Exception:  # noqa: BLE001 - the hub stopped answering: offline from here on
        go_offline()
        check_model(model, revision, True)
