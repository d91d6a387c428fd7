"""What a simulation reports: the summary of its groups' statistics, in total and per strategy
(``summarize``) and its text (``format_summary``).
"""

from __future__ import annotations


def summarize(per_group: list[dict]) -> dict:
    keys = ("inputs", "outputs", "rebalances", "not_stable_ms", "partitions_moved", "failovers", "fenced",
            "incidents", "delayed_assignments")
    total = {k: sum(g[k] for g in per_group) for k in keys}
    by_strategy: dict[str, dict] = {}
    for g in per_group:
        s = by_strategy.setdefault(g["strategy"], {"groups": 0, **{k: 0 for k in keys}})
        s["groups"] += 1
        for k in keys:
            s[k] += g[k]
    duration = sum(g["duration_ms"] for g in per_group) or 1
    total["not_stable_share"] = round(total["not_stable_ms"] / duration, 4)
    for s in by_strategy.values():
        s["rebalances_per_group"] = round(s["rebalances"] / s["groups"], 2)
        s["partitions_moved_per_group"] = round(s["partitions_moved"] / s["groups"], 2)
        s["not_stable_s_per_group"] = round(s["not_stable_ms"] / s["groups"] / 1000, 2)
    storms = sorted(per_group, key=lambda g: (-g["rebalances"], g["group_id"]))[:5]
    return {"totals": total, "by_strategy": dict(sorted(by_strategy.items())),
            "busiest_groups": [{"group_id": g["group_id"], "rebalances": g["rebalances"],
                                "strategy": g["strategy"]} for g in storms]}


def format_summary(summary: dict) -> str:
    t = summary["totals"]
    lines = [f"simulated {summary['groups']:,} groups in {summary['seconds']}s: {t['inputs']:,} events, "
             f"{summary['records']:,} trace records in {summary['files']} files -> {summary['trace']}",
             f"rebalances {t['rebalances']:,}; not Stable {t['not_stable_ms'] / 1000:,.0f}s "
             f"({t['not_stable_share']:.1%} of group time); partitions moved {t['partitions_moved']:,}; "
             f"failovers {t['failovers']:,}; incidents {t['incidents']:,}",
             f"{'strategy':<20}{'groups':>8}{'rebal/grp':>11}{'moved/grp':>11}{'notStable s/grp':>17}"]
    for name, s in summary["by_strategy"].items():
        lines.append(f"{name:<20}{s['groups']:>8}{s['rebalances_per_group']:>11}{s['partitions_moved_per_group']:>11}"
                     f"{s['not_stable_s_per_group']:>17}")
    return "\n".join(lines)
