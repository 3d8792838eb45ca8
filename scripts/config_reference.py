"""Write docs/configuration.md, the reference of every her-run config key, from the code.

What a key may be comes from ``her_rl/config/checks.py`` (the rule the CLI checks), its default from the
composed config (``her_rl.config.compose.compose``), and its meaning from the YAML comment on its line in
``her_rl/conf`` (``key: value  # meaning``, continued on comment lines indented deeper than the key) or,
for ``algo.*``, from the field of the algorithm's class (``setting``'s meaning, ``her_rl.config.registry``),
and for the push/drag ``env.kwargs``, from ``her_rl/envs/table_settings.py``.
So the page cannot drift from the code: change a comment or a rule and regenerate.

    python scripts/config_reference.py           # rewrite docs/configuration.md
    python scripts/config_reference.py --check   # exit 1 when the committed page is out of date
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "her_rl" / "conf"
PAGE = ROOT / "docs" / "configuration.md"
COMMAND = "python scripts/config_reference.py"

_KEY = re.compile(r"^(?P<indent>\s*)(?P<dash>-\s+)?(?:(?:optional|override)\s+)?(?P<key>[\w/]+)\s*:(?P<rest>.*)$")


def _split_comment(rest: str) -> tuple[str, str]:
    """(value, comment) of what follows ``key:``; a ``#`` inside quotes is part of the value."""
    quote = None
    for i, ch in enumerate(rest):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i + 1:].strip()
    return rest.strip(), ""


def yaml_keys(text: str) -> dict[str, tuple[str, str]]:
    """Dotted key -> (value as written, comment) of every ``key: value  # comment`` line.

    Nesting follows indentation. Entries of the top-level ``defaults:`` list (``- algo: her_dqn``,
    ``- optional tuned: ...``) are keyed by their group name. A comment-only line indented deeper
    than the last commented key continues that key's comment.
    """
    out: dict[str, tuple[str, str]] = {}
    stack: list[tuple[int, str]] = []  # (indent, key) of the open mappings
    last: tuple[str, int] | None = None  # (dotted key, indent) of the last key with a comment
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("#"):
            if last is not None and indent > last[1]:
                value, comment = out[last[0]]
                out[last[0]] = (value, f"{comment} {stripped.lstrip('#').strip()}".strip())
            else:
                last = None
            continue
        match = _KEY.match(line)
        if match is None:  # a list item without a key, a scalar continuation
            last = None
            continue
        key, (value, comment) = match["key"], _split_comment(match["rest"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if match["dash"]:
            if not stack or stack[-1][1] != "defaults" or "/" in key:
                last = None
                continue
            dotted = key  # a defaults-list entry names a config group of the top level
        else:
            dotted = ".".join([k for _, k in stack] + [key])
            stack.append((indent, key))
        out[dotted] = (value, comment)
        last = (dotted, indent) if comment else None
    return out


def header_comment(text: str) -> str:
    """The comment lines at the top of a YAML file, joined, up to the first indented line (an example
    command); ``# @package`` lines are left out."""
    lines = []
    for line in text.splitlines():
        body = line[1:] if line.startswith("#") else None
        if body is None or body.startswith("  "):
            break
        if not body.strip().startswith("@package"):
            lines.append(body.strip())
    text = " ".join(lines).strip()
    return text[:-1] + "." if text.endswith(":") else text


# ---- formatting -------------------------------------------------------------------------------

def show(value: Any) -> str:
    """A value as one writes it on the command line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def code(value: Any) -> str:
    return f"`{show(value)}`".replace("|", "\\|")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + [""]


# ---- the page ---------------------------------------------------------------------------------

def _compose(overrides: list[str]) -> dict[str, Any]:
    return _composed(tuple(overrides))


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple[str, ...]) -> dict[str, Any]:  # read-only: callers never change it
    from omegaconf import OmegaConf

    from her_rl.config.compose import compose

    return OmegaConf.to_container(compose(list(overrides)), resolve=False)


def _walk(rules: dict[str, Any], prefix: str = ""):
    for key, rule in rules.items():
        if isinstance(rule, dict):
            yield from _walk(rule, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", rule


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(values, dict) or part not in values:
            return "(unset)"
        values = values[part]
    return values


def _names(folder: str) -> list[str]:
    return sorted(p.stem for p in (CONF / folder).glob("*.yaml"))


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _top_section(defaults: dict[str, Any]) -> list[str]:
    from her_rl.config.registry import ALGOS, ENVS
    from her_rl.config.checks import TOP

    keys = yaml_keys(_read(CONF / "config.yaml"))
    groups = {
        "algo": ("one of " + ", ".join(sorted(ALGOS)), defaults["algo"]["name"]),
        "env": ("one of " + ", ".join(ENVS), defaults["env"]["name"]),
        "tuned": ("one of " + ", ".join(_names("tuned")) + "; `~tuned`: none", keys.get("tuned", ("",))[0]),
        "experiment": ("one of " + ", ".join(_names("experiment")), keys.get("experiment", ("null",))[0]),
    }
    rows = [[f"`{k}`", code(default), cell(allowed), cell(keys.get(k, ("", ""))[1])]
            for k, (allowed, default) in groups.items()]
    rows += [[f"`{k}`", code(_lookup(defaults, k)), cell(rule.allowed), cell(keys.get(k, ("", ""))[1])]
             for k, rule in _walk(TOP)]
    return ["## Top-level keys {#top}", "",
            "`her_rl/conf/config.yaml`. `algo`, `env`, `tuned` and `experiment` pick a file of their "
            "folder in `her_rl/conf/`; the other keys are values.", "",
            *table(["key", "default", "allowed", "meaning"], rows)]


def summary_line(cls: type) -> str:
    """The first paragraph of the docstring of the module that defines ``cls``."""
    doc = sys.modules[cls.__module__].__doc__ or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def as_comment(doc: str) -> str:
    """A field's meaning in the page's comment style: no capital for a plain word, no final period."""
    doc = doc[:-1] if doc.endswith(".") else doc
    return doc[0].lower() + doc[1:] if doc[:2].istitle() and doc[:2].isalpha() else doc


def _algo_sections() -> list[str]:
    from her_rl.config import registry as store
    from her_rl.config.registry import ALGOS, resolve_target
    from her_rl.config.checks import algo_rules

    lines = ["## Algorithms: `algo.*` {#algo}", "",
             "Each algorithm's keys are the fields of its class (`algo._target_`): the defaults below are the "
             "class's own, before a [tuned file](#tuned) for the chosen env is applied. A key the class does "
             "not take is refused, naming the ones it does.", ""]
    for name in ALGOS:
        meanings, rules = store.meanings(name), algo_rules(name)
        values = _compose([f"algo={name}", "~tuned"])["algo"]
        rows = [[f"`{k}`", code(values.get(k, "(unset)")),
                 cell(rules[k].allowed if k in rules else "not range-checked"), cell(as_comment(meaning))]
                for k, meaning in meanings.items()]
        lines += [f"### `algo={name}` {{#algo-{name}}}", "", cell(summary_line(resolve_target(name, None))), "",
                  *table(["key", "default", "allowed", "meaning"], rows)]
    return lines


def _env_sections() -> list[str]:
    from her_rl.config.registry import ENVS
    from her_rl.config.checks import ENV_GROUP, ENV_KWARG_CHECKERS, ENV_KWARGS

    from her_rl.envs.table_settings import DRAG_MEANINGS, MEANINGS

    texts = {name: _read(CONF / "env" / f"{name}.yaml") for name in ENVS}
    keys = {name: yaml_keys(text) for name, text in texts.items()}
    for name, words in (("push", MEANINGS), ("drag", DRAG_MEANINGS)):  # settings taken from the code
        keys[name].update({f"kwargs.{k}": ("", v) for k, v in words.items()})
    values = {name: _compose([f"env={name}"])["env"] for name in ENVS}

    def meaning(key: str) -> str:  # the generic env file first, then the first env that explains it
        for name in ["gym", *ENVS]:
            comment = keys[name].get(key, ("", ""))[1]
            if comment:
                return comment
        return ""

    lines = ["## Environments: `env.*` {#env}", "",
             "Each `her_rl/conf/env/NAME.yaml` sets these keys; `env=gym env.id=ID` takes any registered "
             "gymnasium id.", "",
             *table(["key", "allowed", "meaning"],
                    [[f"`env.{k}`", cell(rule.allowed), cell(meaning(k))] for k, rule in ENV_GROUP.items()]),
             "Per env:", ""]
    group_keys = [k for k in ENV_GROUP if k not in ("name", "kwargs")]
    rows = [[f"`{name}`"] + [code(values[name].get(k)) if k in values[name] else "" for k in group_keys]
            for name in ENVS]
    lines += table(["env", *[f"`{k}`" for k in group_keys]], rows)
    for name in ENVS:
        kwargs = values[name].get("kwargs") or {}
        if not kwargs:
            continue
        env_id = values[name]["id"]
        rules = ENV_KWARGS.get(env_id, {})
        checked = "checked with the other settings (`her_rl/envs/table_settings.py`)" \
            if env_id in ENV_KWARG_CHECKERS else "not range-checked"
        rows = [[f"`env.kwargs.{k}`", code(v), cell(rules[k].allowed if k in rules else checked),
                 cell(keys[name].get(f"kwargs.{k}", ("", ""))[1])] for k, v in kwargs.items()]
        lines += [f"### `env={name}` {{#env-{name}}}", "", cell(header_comment(texts[name])), "",
                  *table(["key", "default", "allowed", "meaning"], rows)]
    return lines


def _tuned_section() -> list[str]:
    from her_rl.config.registry import ALGOS, ENVS
    from her_rl.envs.families import SETTINGS

    lines = ["## Tuned files: `tuned` {#tuned}", "",
             "`her_rl/conf/tuned/NAME.yaml` sets algorithm keys over the algorithm's defaults; keys given on "
             "the command line still win. A file named `ALGO_ENV` applies by itself to that pair; the others "
             "are picked with `tuned=NAME`, and `~tuned` applies none.", ""]
    for name in _names("tuned"):
        pair = next(((a, e) for a in ALGOS for e in ENVS if name == f"{a}_{e}"), None)
        algo = pair[0] if pair else max((a for a in ALGOS if name.startswith(a + "_")), key=len)
        kind = next((pattern for k, pattern in SETTINGS if name == f"{algo}_{k}"), None)
        applies = []
        if pair is not None:
            base = _compose([f"algo={algo}", f"env={pair[1]}", "~tuned"])["algo"]
            tuned = _compose([f"algo={algo}", f"env={pair[1]}"])["algo"]
            applies.append(f"Applies by itself to `algo={algo} env={pair[1]}`.")
        else:
            base = _compose([f"algo={algo}", "~tuned"])["algo"]
            tuned = _compose([f"algo={algo}", f"tuned={name}"])["algo"]
        if kind is not None:
            also = "Also applies" if applies else "Applies"
            applies.append(f"{also} by itself, with `algo={algo}` or no `algo=`, to the envs whose id the pattern "
                           f"`{kind}` matches at its start: by `env=gym env.id=ID`, or by an env group that has no "
                           "file of its own for that algo.")
        applies = " ".join(applies) or f"Opt-in: `algo={algo} tuned={name}`."
        rows = [[f"`algo.{k}`", code(base.get(k)), code(v)] for k, v in tuned.items() if base.get(k) != v]
        lines += [f"### `{name}`", "", applies, "", *table(["key", "algorithm default", "this file"], rows)]
    return lines


def _experiment_section() -> list[str]:
    rows = [[f"`experiment={name}`", cell(header_comment(_read(CONF / "experiment" / f"{name}.yaml")))]
            for name in _names("experiment")]
    return ["## Named experiments: `experiment` {#experiment}", "",
            "Whole sweeps in `her_rl/conf/experiment/` ([Sweeps](sweeps.md)).", "",
            *table(["experiment", "what it runs"], rows)]


def render() -> str:
    defaults = _compose([])
    lines = [
        "# Configuration",
        "",
        f"<!-- Generated by `{COMMAND}` from her_rl/config/checks.py, the algorithm classes, "
        "her_rl/envs/table_settings.py and her_rl/conf; edit those, then rerun it. -->",
        "",
        "Every key `her-run` accepts, with its default, what the checks allow and what it means. Give any of "
        "them on the command line as `key=value` (`her-run n=30 algo.lr=0.002 env.kwargs.step_size=0.04`); "
        "a value outside its rule stops the run with one line naming the key. Hydra's own keys "
        "(`hydra.run.dir`, `hydra.sweep.dir`, `hydra/launcher=...`) are in [Usage](usage.md) and "
        "[Sweeps](sweeps.md).",
        "",
        "This page is generated from the code: the rules from `her_rl/config/checks.py`, the defaults from the "
        "composed config (an algorithm's are its class's fields), the meanings from the algorithm classes' "
        "fields, from `her_rl/envs/table_settings.py` (push, drag) and from the comments "
        "in `her_rl/conf/**/*.yaml`.",
        "",
        *_top_section(defaults),
        *_algo_sections(),
        *_env_sections(),
        *_tuned_section(),
        *_experiment_section(),
    ]
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs from the generated text")
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
