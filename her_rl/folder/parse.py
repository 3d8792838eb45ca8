"""Reading the JSON and YAML a run folder holds, as data from anywhere: a folder may come from another
machine or another user, so its files are parsed with limits. Nesting past Python's recursion limit
(JSON nested 100,000 deep) is a ValueError like any other malformed text, and YAML is refused when it
is larger than any config her-rl writes or uses anchors and aliases (her-rl never writes them; a few
nested aliases expand to billions of nodes when the config is walked).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

YAML_MAX_CHARS = 1_000_000  # a run's config.yaml is a few kB
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # C where available: her-summary reads many folders


def json_value(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep to read a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def yaml_checked(text: str) -> str:
    """``text`` if it is YAML within the limits (size, no anchors or aliases, nesting), else ValueError;
    yaml.YAMLError when it is not YAML. Linear in the text: its events are read, never built."""
    if len(text) > YAML_MAX_CHARS:
        raise ValueError(f"{len(text):,} characters, more than any her-rl config ({YAML_MAX_CHARS:,})")
    try:
        if any(isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None
               for event in yaml.parse(text, Loader=_LOADER)):
            raise ValueError("it uses YAML anchors or aliases, which her-rl never writes")
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    return text


def yaml_value(text: str) -> Any:
    """The plain value of a YAML text within the limits (the safe loader: no tags, no objects)."""
    checked = yaml_checked(text)
    try:
        return yaml.load(checked, Loader=_LOADER)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
