"""Reading run folders for summaries: which runs a folder holds, and which of their files can be trusted.

A run folder is one with a ``history.jsonl``, a ``results.json`` or a ``failed.json`` (a sweep job
that failed: :mod:`her_rl.folder.failures`). Its setting is the overrides on the first line of
``history.jsonl`` (else those of ``failed.json``) that define an experiment (her_rl/config/saved.py),
with values unescaped as Hydra's grammar reads them; its status is done (a valid ``results.json``),
running (a live process holds its lock) or failed, and ``error`` is the reason its last attempt
failed. A folder whose results.json is not a JSON object of numbers, whose history line or
failed.json is not JSON, or whose config.yaml is not a mapping is a :class:`BadRun` naming each
damaged file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from her_rl.config import saved
from her_rl.folder.failures import FAILED, read as read_failure
from her_rl.folder.parse import YAML_MAX_CHARS, json_value, yaml_value
from her_rl.folder.rundir import RunLock

TEXT_MAX = YAML_MAX_CHARS  # bytes of results.json, config.yaml or history.jsonl's first line: her-rl's are a few kB
# results.json keys the summary uses, with the types a real run writes (None: not evaluated / not solved).
NUMBER_KEYS = ("eval_success_rate", "eval_return", "solved_at_env_steps", "wall_time_s", "env_steps")


@dataclass
class Run:
    folder: Path
    setting: tuple[str, ...]
    seed: int | None
    status: str  # done | running | failed
    results: dict[str, Any] = field(default_factory=dict)
    goal_env: bool = True
    error: str | None = None  # why its last attempt failed (failed.json)
    config: tuple[str, ...] | None = None  # its resolved config's experiment keys (config.yaml), as key=value

    @property
    def group(self) -> tuple:
        """What puts runs in one summary row: the resolved config (``her-run n=15`` and ``her-run algo=her_dqn
        env=bitflip n=15`` are one experiment), or the setting where no config.yaml was written."""
        return ("config", *self.config) if self.config is not None else ("setting", *self.setting)


class BadRun(ValueError):
    """A run folder whose files cannot be trusted; the message says which file and what is wrong."""


def _live(folder: Path) -> bool:
    return RunLock.live_holder(folder) is not None


def _read_text(path: Path, first_line: bool = False) -> str:
    """The file's text (``first_line``: its first line), refused past TEXT_MAX bytes without reading more."""
    if path.is_symlink() or not path.is_file():  # a FIFO would block the read; a link may lead anywhere
        raise BadRun(f"{path.name} is not a regular file")
    try:
        with open(path, "rb") as f:
            data = f.readline(TEXT_MAX + 1) if first_line else f.read(TEXT_MAX + 1)
        if len(data) > TEXT_MAX:  # a file of gigabytes would be read into memory, and take minutes
            raise BadRun(f"{path.name}{' line 1' if first_line else ''} is larger than any her-rl writes "
                         f"(more than {TEXT_MAX:,} bytes)")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise BadRun(f"{path.name} cannot be read ({why})") from None


def _json(path: Path, text: str, what: str) -> Any:
    if not text.strip():
        raise BadRun(f"{what} is empty")
    try:
        return json_value(text)
    except json.JSONDecodeError as exc:
        raise BadRun(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:
        raise BadRun(f"{what} is not readable JSON ({exc})") from None


def _overrides(folder: Path) -> list[str]:
    history = folder / "history.jsonl"
    if not history.exists():
        return []
    lines = _read_text(history, first_line=True).splitlines()
    first = _json(history, lines[0] if lines else "", "history.jsonl line 1")
    overrides = first.get("overrides", []) if isinstance(first, dict) else None
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise BadRun("history.jsonl line 1 is not an object with a list of overrides")
    return overrides


def _unescaped(override: str) -> str:
    """``env.id=mod\\:A-v0`` (a sweep job's override, escaped by Hydra) -> ``env.id=mod:A-v0``, as a
    single run records it, so both land in one setting."""
    if "\\" not in override:
        return override

    try:
        parsed = OverridesParser.create().parse_override(override)
    except Exception:  # noqa: BLE001  (not Hydra's grammar: kept as written)
        return override
    value = parsed.value()
    return f"{parsed.get_key_element()}={value}" if isinstance(value, str) and not parsed.is_sweep_override() else override


def _newer(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_mtime_ns > b.stat().st_mtime_ns
    except OSError:
        return True


def _results(path: Path) -> dict[str, Any]:
    results = _json(path, _read_text(path), "results.json")
    if not isinstance(results, dict):
        raise BadRun(f"results.json holds a JSON {type(results).__name__}, not an object")
    for key in NUMBER_KEYS:
        value = results.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
            raise BadRun(f"results.json: {key} is {value!r}, not a number")
    if not isinstance(results.get("solved", False), bool):
        raise BadRun(f"results.json: solved is {results['solved']!r}, not true/false")
    if results.get("seed") is not None and (isinstance(results["seed"], bool) or not isinstance(results["seed"], int)):
        raise BadRun(f"results.json: seed is {results['seed']!r}, not an integer")
    return results


def _flat(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [entry for key, value in node.items() for entry in _flat(value, f"{prefix}{key}.")]
    return [f"{prefix[:-1]}={json.dumps(node, sort_keys=True, default=str)}"]


def _check_config(folder: Path) -> tuple[str, ...] | None:
    """The experiment keys of the run's resolved config (bookkeeping and seed left out), or None."""
    path = folder / "config.yaml"
    if not path.exists():
        return None
    try:
        config = yaml_value(_read_text(path))
    except yaml.YAMLError:
        raise BadRun("config.yaml is not valid YAML") from None
    except ValueError as exc:
        raise BadRun(f"config.yaml cannot be read: {exc}") from None
    if config is None:
        raise BadRun("config.yaml is empty")
    if not isinstance(config, dict):
        raise BadRun(f"config.yaml holds a {type(config).__name__}, not a mapping of keys")
    return tuple(sorted(entry for entry in _flat(config) if saved.is_setting(entry)))


def read_run(folder: Path) -> Run:
    """The run in ``folder``; :class:`BadRun` (naming every damaged file) when it cannot be trusted."""
    problems, overrides, results = [], [], None
    try:
        overrides = _overrides(folder)
    except BadRun as exc:
        problems.append(str(exc))
    results_file = folder / "results.json"
    if results_file.exists():
        try:
            results = _results(results_file)
        except BadRun as exc:
            problems.append(str(exc))
    config = None
    try:
        config = _check_config(folder)
    except BadRun as exc:
        problems.append(str(exc))
    failure = None
    if (folder / FAILED).exists():
        try:
            failure = read_failure(folder / FAILED)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise BadRun("; ".join(problems))
    if failure is not None and not (folder / "history.jsonl").exists():  # failed before its first history line
        listed = failure.get("overrides")
        overrides = [o for o in listed if isinstance(o, str)] if isinstance(listed, list) else []
    overrides = [_unescaped(o) for o in overrides]
    error = failure["error"] if failure is not None and (results is None or _newer(folder / FAILED, results_file)) else None
    seed = next((o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "seed"), None)
    seed = int(seed) if seed is not None and seed.lstrip("-").isdigit() else None
    setting = tuple(sorted(o for o in overrides if saved.is_setting(o)))
    if results is not None:
        return Run(folder, setting, results.get("seed", seed), "done", results, "eval_success_rate" in results, error,
                   config)
    return Run(folder, setting, seed, "running" if _live(folder) else "failed", error=error, config=config)


def read_runs(root: Path) -> tuple[list[Run], list[tuple[Path, str]]]:
    """Every run folder below ``root`` (a folder with a history.jsonl, results.json or failed.json),
    sorted, and the folders left out with what is wrong in each."""
    folders = {p.parent for pattern in ("history.jsonl", "results.json", FAILED) for p in root.rglob(pattern)}
    runs, bad = [], []
    for folder in sorted(folders):
        try:
            runs.append(read_run(folder))
        except BadRun as exc:
            bad.append((folder, str(exc)))
    return runs, bad


def find_runs(root: Path) -> list[Run]:
    """The readable runs below ``root`` (see :func:`read_runs` for the ones left out)."""
    return read_runs(root)[0]
