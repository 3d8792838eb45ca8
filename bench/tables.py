"""The markdown tables of the benchmarks: cells, the table itself (whole or streamed a line at a
time), the ratio table (per-run rows, medians per side, ours / peer) and the to-target table
(per-run rows, then per group how many reached the target and the medians to it)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from bench.stats import ratio, side_medians, to_target

ALIGN = {"l": "---", "c": ":---:", "r": "---:"}


def fmt(value: float | None, digits: int = 0) -> str:
    """``1,234`` (``digits`` decimals); ``-`` for None (unknown, or only a bound is known)."""
    return "-" if value is None else f"{value:,.{digits}f}"


def line(cells: Iterable[Any]) -> str:
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def head(header: Sequence[str], align: str) -> str:
    """The header line and the alignment line (one letter a column: l, c or r)."""
    return line(header) + "\n|" + "|".join(ALIGN[a] for a in align) + "|"


def markdown(header: Sequence[str], align: str, body: Iterable[Sequence[Any]]) -> str:
    return "\n".join([head(header, align), *map(line, body)])


def _capped(row: Any, key: str, digits: int) -> str:
    text = f"{getattr(row, key):,.{digits}f}"
    return text if row.solved else f">{text} (cap)"


def ratio_table(rows: Sequence[Any], ours: str = "ours", peer: str = "sb3") -> str:
    """Rows (``side``, ``seed``, ``solved``, ``env_steps``, ``wall_s``: see :class:`bench.Row`):
    one line per run, the censored medians per side, then the ``ours`` / ``peer`` ratios of them."""
    body = [[r.side, r.seed, "yes" if r.solved else "no", _capped(r, "env_steps", 0), _capped(r, "wall_s", 1)]
            for r in rows]
    meds = {side: side_medians(rows, side) for side in dict.fromkeys(r.side for r in rows)}
    for side, med in meds.items():
        mine = [r for r in rows if r.side == side]
        body.append([f"**{side} median**", "", f"{sum(r.solved for r in mine)}/{len(mine)}",
                     med["env_steps"].fmt(0), med["wall_s"].fmt(1)])
    table = markdown(["side", "seed", "solved", "env steps to success", "wall s to success"], "lrcrr", body)
    if ours not in meds or peer not in meds:
        return table
    quotients = [ratio(meds[ours][key], meds[peer][key]) for key in ("env_steps", "wall_s")]
    table += "\n" + line([f"**{ours} / {peer}**", "", "", *(f"{q.fmt(2)}x" for q in quotients)])
    if any(q.bound or q.value is None for q in quotients):
        table += ("\n\n`>x (cap)`: not solved within its cap, the value is what it used (a lower bound); "
                  "a ratio marked `<` or `>` is a bound, `n/a` means both sides are bounds.")
    return table


def target_table(rows: Sequence[dict[str, Any]], header: Sequence[str], align: str,
                 cells: Callable[[dict[str, Any]], list[Any]], group: Callable[[dict[str, Any]], tuple[str, str]]) -> str:
    """``cells(row)`` for every run, then one line per ``group(row)`` (its first two cells): how
    many reached the target, and the exact medians to it (``-``: only a bound is known)."""
    body = [cells(r) for r in rows]
    for key in dict.fromkeys(map(group, rows)):
        mine = [r for r in rows if group(r) == key]
        hit, steps, wall = to_target(mine)
        body.append([*key, f"{hit}/{len(mine)} reached", f"{fmt(steps)} (median)", f"{fmt(wall, 1)} (median)",
                     *[""] * (len(header) - 5)])
    return markdown(header, align, body)
