"""The CLI's config file: the server URL and API key that `signup` and `login` saved.

Location: `$CARDHOUR_CONFIG`, else `~/.cardhour/config.json`. Written with mode 0600 because it
holds a secret. A missing file is an empty config; an unreadable or malformed one is an error
naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from cardhour.core.errors import InvalidInput


@dataclass(frozen=True)
class Config:
    url: str | None = None
    api_key: str | None = None


def config_path() -> Path:
    override = os.environ.get("CARDHOUR_CONFIG")
    return Path(override).expanduser() if override else Path.home() / ".cardhour" / "config.json"


def load() -> Config:
    path = config_path()
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return Config()
    except OSError as exc:
        raise InvalidInput(f"cannot read config file {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise InvalidInput(f"config file {path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidInput(f"config file {path} must hold a JSON object")
    url, key = raw.get("url"), raw.get("api_key")
    return Config(url if isinstance(url, str) else None, key if isinstance(key, str) else None)


def save(config: Config) -> Path:
    """Write the config (replacing the file) readable by its owner only; return its path."""
    path = config_path()
    text = json.dumps({"url": config.url, "api_key": config.api_key}, indent=2) + "\n"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text)
    except OSError as exc:
        raise InvalidInput(f"cannot write config file {path}: {exc.strerror}") from exc
    return path
