"""``groupcoord timeline TRACE --group G --out FILE.png|.html``: one group over time.

The group's inputs are replayed through a fresh core (the trace records inputs, and the
coordinator's state is what the replay says it was), and after every event the group's
state, generation, leader, members and their assignments are sampled. The picture:

* a band of the group's state (Empty, PreparingRebalance, CompletingRebalance, Stable),
* one lane per member (in order of appearance): a bar while it is in the group, labelled
  with its partitions (``a0,2 b1``: partitions 0 and 2 of topic-a, 1 of topic-b; ``-``: none)
  each time the group becomes Stable in a generation and whenever they change, so a member
  given the same partitions again is labelled again; the leader's bar outlined,
* markers: joins, leaves, session expiries, fenced requests; dashed lines at each
  generation; red lines where a coordinator instance took over (failover); a hatched state
  band while the coordinator holds no such group (before its first join, after its deletion,
  while no coordinator instance holds it).

PNG is drawn with matplotlib (Agg); HTML is a self-contained page with an SVG and
tooltips. Both come from the same ``Timeline`` model.
"""

from __future__ import annotations

import html
import textwrap
from pathlib import Path

import attrs

from groupcoord.adapters.replay.engine import starts_instance
from groupcoord.adapters.traces.records import decode_event
from groupcoord.adapters.traces.stopping import written
from groupcoord.core import events as ev
from groupcoord.core.classic.subscription import ConsumerProtocolError, decode_assignment
from groupcoord.core.commands import HeartbeatTimer, JoinGroupResponse, LeaveGroupResponse, Respond
from groupcoord.core.coordinator import Coordinator
from groupcoord.core.errors import Error

STATE_COLORS = {"Empty": "#c8c8c8", "PreparingRebalance": "#f4a259", "CompletingRebalance": "#f6d55c",
                "Stable": "#5bb381", "Dead": "#333333", "absent": "#ffffff"}
ABSENT_LABEL = "no group: not created yet, deleted, or no coordinator holds it (failover)"
ASSIGNMENT_HELP = "a0,2 b1: partitions 0,2 of topic-a and 1 of topic-b (- none), at each Stable generation"


@attrs.define
class Span:
    start: int
    end: int
    label: str = ""


@attrs.define
class Lane:
    member_id: str
    name: str
    spans: list = attrs.Factory(list)  # in the group
    assignments: list = attrs.Factory(list)  # (ts, label)
    leader_spans: list = attrs.Factory(list)
    marks: list = attrs.Factory(list)  # (ts, kind, text)


@attrs.define
class Timeline:
    group_id: str
    start: int
    end: int
    states: list = attrs.Factory(list)  # Span(label=state)
    generations: list = attrs.Factory(list)  # (ts, generation)
    failovers: list = attrs.Factory(list)  # ts
    lanes: list = attrs.Factory(list)
    rebalances: int = 0


def _partitions_label(assignment: bytes) -> str:
    if not assignment:
        return "-"  # a Stable member given no partitions
    try:
        parts = decode_assignment(assignment).partitions
    except ConsumerProtocolError:
        return "?"
    by_topic: dict[str, list[int]] = {}
    for topic, p in parts:
        by_topic.setdefault(topic, []).append(p)
    return " ".join(f"{t.rsplit('-', 1)[-1]}{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"


def build_timeline(records, group_id: str, config, in_order: bool = False) -> Timeline:
    """The model, from a group's records (sorted by seq) in group scope, or (``in_order``)
    from every record of one coordinator's recording in written order (instance scope: the
    other groups' and group-less inputs run through the same core; the picture spans the
    group's own records)."""
    records = list(records) if in_order else sorted(records, key=lambda r: r["seq"])
    own = [r for r in records if r["group_id"] == group_id]
    if not own:
        raise ValueError(f"no records of group {group_id!r}")
    tl = Timeline(group_id, own[0]["ts_ms"], own[-1]["ts_ms"])
    coordinator = None
    lanes: dict[str, Lane] = {}
    present: dict[str, int] = {}
    leader_since: dict[str, int] = {}
    labelled: dict[str, tuple[int, bytes]] = {}  # member -> the (generation, assignment) last labelled
    state, state_since, generation = "absent", tl.start, 0
    requests = {}

    def lane(mid: str, name: str | None = None) -> Lane:
        if mid not in lanes:
            # a restarted consumer joins under a new member id: tell its lanes apart
            suffix = mid.rsplit("-", 1)[-1][-4:] if name and name != mid else ""
            lanes[mid] = Lane(mid, f"{name} #{suffix}" if suffix else (name or mid))
        return lanes[mid]

    for r in records:
        if r["dir"] != "in":
            continue
        data = r["data"] if isinstance(r["data"], str) else None
        if data is None:
            import json

            data = json.dumps(r["data"])
        event = decode_event(r["type"], data)
        now = event.now_ms
        if isinstance(event, ev.LoadPartition):
            if starts_instance(coordinator, event.partition):
                if coordinator is not None and tl.start <= now <= tl.end:
                    tl.failovers.append(now)
                coordinator = Coordinator(config)
        if coordinator is None:
            continue
        if isinstance(event, ev.Request) and getattr(event, "group_id", None) == group_id:
            requests[event.request_id] = event  # this group's: the answers marked in its lanes
        commands = coordinator.handle(event)
        for c in commands:
            if type(c) is Respond:
                req = requests.pop(c.request_id, None)
                resp = c.response
                if req is None:
                    continue
                if isinstance(req, ev.JoinGroup) and isinstance(resp, JoinGroupResponse) and resp.member_id:
                    name = req.group_instance_id or req.client_id
                    lane(resp.member_id, name)
                    if resp.error_code is Error.FENCED_INSTANCE_ID:
                        lane(resp.member_id).marks.append((now, "fenced", "fenced instance"))
                elif isinstance(resp, LeaveGroupResponse):
                    for m in resp.members:
                        if m.error_code is Error.NONE and m.member_id in lanes:
                            lanes[m.member_id].marks.append((now, "leave", "left the group"))
                elif getattr(resp, "error_code", None) in (Error.UNKNOWN_MEMBER_ID, Error.FENCED_INSTANCE_ID) and \
                        req is not None and getattr(req, "member_id", "") in lanes:
                    lanes[req.member_id].marks.append((now, "fenced", f"{type(req).__name__}: {resp.error_code.name}"))
        if isinstance(event, ev.TimerFired) and type(event.key) is HeartbeatTimer and event.key.group_id == group_id:
            mid = event.key.member_id
            group = coordinator.group(group_id)
            # only a member this timer removed: stale timers of members gone already still fire
            if mid in present and (group is None or mid not in group.members):
                lanes[mid].marks.append((now, "expired", "session expired"))
        group = coordinator.group(group_id)
        new_state = group.state.value if group is not None else "absent"
        if new_state != state:
            if now > state_since or tl.states:
                tl.states.append(Span(state_since, now, state))
            state, state_since = new_state, now
        if group is not None and group.generation_id != generation:
            if group.generation_id > generation:
                tl.rebalances += group.generation_id - generation
            generation = group.generation_id
            tl.generations.append((now, generation))
        members = dict(group.members) if group is not None else {}
        for mid, m in members.items():
            ln = lane(mid, m.group_instance_id or m.client_id)
            if mid not in present:
                present[mid] = now
                if not isinstance(event, ev.LoadPartition):  # not a member restored by a load
                    ln.marks.append((now, "join", "joined"))
            # only Stable: in CompletingRebalance members still hold the previous generation's
            # assignment (or none yet); labelling per generation shows an unchanged one again
            if state == "Stable" and labelled.get(mid) != (generation, m.assignment):
                labelled[mid] = (generation, m.assignment)
                ln.assignments.append((now, _partitions_label(m.assignment)))
        for mid in [m for m in present if m not in members]:
            lanes[mid].spans.append(Span(present.pop(mid), now))
            labelled.pop(mid, None)
        leader = group.leader_id if group is not None else None
        for mid in [m for m in leader_since if m != leader]:
            lanes[mid].leader_spans.append(Span(leader_since.pop(mid), now))
        if leader is not None and leader not in leader_since:
            leader_since[leader] = now
    end = max(tl.end, state_since)
    tl.end = end
    tl.states.append(Span(state_since, end, state))
    for mid, since in present.items():
        lanes[mid].spans.append(Span(since, end))
    for mid, since in leader_since.items():
        lanes[mid].leader_spans.append(Span(since, end))
    tl.lanes = list(lanes.values())
    return tl


def load_timeline(trace: str, group_id: str) -> Timeline:
    """The group's timeline from the one recording of ``trace`` that holds it: a group-scoped
    recording (the group's records), or one file of an instance-scoped recording (a shared
    coordinator's, replayed whole in written order). TraceError when no recording, or more
    than one, holds the group (then naming them: pass one of them)."""
    from groupcoord.adapters.traces import trace_files as trace_io

    holding = []  # (recording, files)
    known: list[str] = []
    for rec in trace_io.recordings(trace):
        if rec.scope == "group":
            ids = trace_io.group_ids(rec.name, files=rec.files)
            if group_id in ids:
                holding.append((rec, rec.files))
            known += ids[:5]
            continue
        for f in rec.files:
            ids = trace_io.group_ids(f, files=[f])
            if group_id in ids:
                holding.append((rec, [f]))
            known += ids[:5]
    if not holding:
        raise trace_io.TraceError(f"{trace}: no records of group {group_id!r} (groups include "
                                  f"{sorted(set(known))[:5]})")
    if len(holding) > 1:
        names = ", ".join(str(fs[0]) if rec.scope == "instance" else rec.name for rec, fs in holding[:5])
        raise trace_io.TraceError(f"{trace}: group {group_id!r} is in {len(holding)} recordings; draw it from one "
                                  f"of them: {names}")
    rec, files = holding[0]
    config = trace_io.coordinator_config(rec.meta)
    if rec.scope == "group":
        records = [r for f in files for r in trace_io.read_records(f, group_id=group_id)]
        return build_timeline(records, group_id, config)
    return build_timeline(trace_io.read_records(files[0]), group_id, config, in_order=True)


OUT_FORMATS = {".png": "png", ".html": "html", ".htm": "html"}


def out_format(out: str) -> str:
    """The format, png or html, from the file name (checked before the trace is read)."""
    fmt = OUT_FORMATS.get(Path(out).suffix.lower())
    if fmt is None:
        raise ValueError(f"expected FILE.png or FILE.html, got {out!r}")
    return fmt


def render_timeline(trace: str, group_id: str, out: str) -> Path:
    fmt = out_format(out)
    tl = load_timeline(trace, group_id)
    path = Path(out)
    with written(path) as tmp:  # whole or not at all
        if fmt == "png":
            render_png(tl, tmp)
        else:
            tmp.write_text(render_html(tl))
    return path


# ------------------------------------------------------------------ PNG

MARK_STYLE = {"join": ("^", "#1f77b4"), "leave": ("v", "#555555"), "expired": ("X", "#d62728"),
              "fenced": ("s", "#9467bd")}
ABSENT_STYLE = {"facecolor": "#ffffff", "edgecolor": "#aaaaaa", "hatch": "///", "linewidth": 0.6}


def _counts(tl: Timeline) -> str:
    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 else "s")

    return f"{n(len(tl.lanes), 'member')}, {n(tl.rebalances, 'rebalance')}, {n(len(tl.failovers), 'failover')}"


def render_png(tl: Timeline, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = timeline_figure(tl)
    fig.savefig(path, format="png")  # not from the name: it may be a temporary's
    plt.close(fig)


def timeline_figure(tl: Timeline):
    """The PNG's figure, laid out: no two of its texts overlap (``_declutter``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = tl.start
    sec = lambda t: (t - t0) / 1000.0  # noqa: E731
    n = len(tl.lanes)
    fig, ax = plt.subplots(figsize=(15, 1.6 + 0.55 * (n + 1)), dpi=110)
    top = n + 0.9
    labels = []  # the assignment labels, placed after the marks
    for s in tl.states:
        if s.label == "absent":
            ax.barh(top, sec(s.end) - sec(s.start), left=sec(s.start), height=0.7, **ABSENT_STYLE)
        else:
            ax.barh(top, sec(s.end) - sec(s.start), left=sec(s.start), height=0.7,
                    color=STATE_COLORS.get(s.label, "#ffffff"), edgecolor="none")
    for i, lane in enumerate(tl.lanes):
        y = n - 1 - i
        for s in lane.spans:
            ax.barh(y, max(0.05, sec(s.end) - sec(s.start)), left=sec(s.start), height=0.5, color="#cfe3f5",
                    edgecolor="#7fa8c9")
        for s in lane.leader_spans:
            ax.barh(y, max(0.05, sec(s.end) - sec(s.start)), left=sec(s.start), height=0.5, color="none",
                    edgecolor="#1b4f72", linewidth=2.0)
        for ts, label in reversed(_spaced(lane.assignments, (tl.end - tl.start) * 0.06)):  # the later kept
            labels.append(([y], ax.text(sec(ts) + 0.2, y, label, va="center", fontsize=7, color="#123")))
        for ts, kind, text in lane.marks:
            marker, color = MARK_STYLE.get(kind, ("o", "black"))
            ax.plot([sec(ts)], [y + 0.32], marker=marker, color=color, markersize=6, linestyle="none")
    marks = []  # the generation and failover labels: first to be placed, each on one of its rows
    for ts, gen in tl.generations:
        ax.axvline(sec(ts), color="#888888", linestyle="--", linewidth=0.7)
        marks.append(([top + 0.45, top + 0.75], ax.text(sec(ts), top + 0.45, f"g{gen}", fontsize=7, ha="center",
                                                         color="#444")))
    for ts in tl.failovers:
        ax.axvline(sec(ts), color="#d62728", linewidth=1.6)
        marks.append(([-0.9, -0.6], ax.text(sec(ts), -0.9, "failover", fontsize=7, ha="center", color="#d62728")))
    ax.set_yticks([top] + [n - 1 - i for i in range(n)])
    ax.set_yticklabels(["group state"] + [_short_name(lane.name) for lane in tl.lanes], fontsize=8)
    ax.set_ylim(-1.2, top + 1.05)
    ax.set_xlim(0, max(1.0, sec(tl.end)) * 1.02)
    ax.set_xlabel("seconds since the first record")
    ax.set_title(f"{tl.group_id}: {_counts(tl)}", fontsize=11)
    ax.legend(handles=legend_handles(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)
    fig.tight_layout()
    _declutter(fig, ax, marks + labels)
    return fig


def _declutter(fig, ax, movable: list) -> None:
    """No two texts of ``fig`` overlap: each of ``movable`` (``([y, ...], text)``, in order of
    preference) takes the first of its rows where it overlaps no text already there and stays
    inside the plot, else is hidden (the HTML timeline has every label as a tooltip). The
    other texts (titles, ticks, the legend) are fixed."""
    fig.canvas.draw()  # the layout's final positions and sizes
    renderer = fig.canvas.get_renderer()
    moved = {id(text) for _rows, text in movable}
    placed = [t.get_window_extent(renderer) for t in fig.findobj(lambda a: hasattr(a, "get_text"))
              if id(t) not in moved and t.get_visible() and str(t.get_text()).strip()]
    inside = ax.get_window_extent(renderer)
    for rows, text in movable:
        for y in rows:
            text.set_y(y)
            box = text.get_window_extent(renderer).padded(1.0)
            if box.x0 >= inside.x0 and box.x1 <= inside.x1 and not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
        else:
            text.set_visible(False)


def legend_handles() -> list:
    """The PNG legend: states, the band while no group is held, marks, lines
    and what the assignment labels say."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    handles = [Patch(color=STATE_COLORS[s], label=s) for s in ("Empty", "PreparingRebalance",
                                                              "CompletingRebalance", "Stable")]
    handles += [Patch(**ABSENT_STYLE, label=textwrap.fill(ABSENT_LABEL, 34))]
    handles += [plt.Line2D([], [], marker=m, color=c, linestyle="none", label=k) for k, (m, c) in MARK_STYLE.items()]
    handles += [Patch(facecolor="none", edgecolor="#1b4f72", linewidth=2, label="leader"),
                plt.Line2D([], [], color="#888888", linestyle="--", linewidth=0.7, label="new generation (gN)"),
                plt.Line2D([], [], color="#d62728", linewidth=1.6, label="coordinator failover"),
                plt.Line2D([], [], linestyle="none", label=textwrap.fill(ASSIGNMENT_HELP, 34))]
    return handles


def _spaced(labels: list, gap: float) -> list:
    """Assignment labels far enough apart to be read: of labels closer than ``gap`` (ms) to
    the next one, only the later is kept (the HTML page has them all as tooltips)."""
    out = []
    for i, (ts, label) in enumerate(labels):
        if i + 1 < len(labels) and labels[i + 1][0] - ts < gap:
            continue
        out.append((ts, label))
    return out


def _short_name(name: str, n: int = 32) -> str:
    return name if len(name) <= n else "..." + name[-(n - 3):]


# ------------------------------------------------------------------ HTML (SVG)


def _hatch(pattern_id: str) -> str:
    """The SVG pattern of the "no group" band (one id per <svg>: ids are page-wide)."""
    return (f'<defs><pattern id="{pattern_id}" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#bbb" stroke-width="1.5"/></pattern></defs>')


def render_html(tl: Timeline) -> str:
    t0, width, left, lane_h = tl.start, 1300, 210, 34
    span = max(1, tl.end - t0)
    x = lambda t: left + (t - t0) / span * (width - left - 20)  # noqa: E731
    n = len(tl.lanes)
    height = 90 + lane_h * (n + 1) + 40
    e = html.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">', _hatch("absent")]
    y_state = 50
    parts.append(f'<text x="8" y="{y_state + 15}">group state</text>')
    for s in tl.states:
        absent = s.label == "absent"
        paint = 'fill="url(#absent)" stroke="#aaa"' if absent else f'fill="{STATE_COLORS.get(s.label, "#fff")}"'
        parts.append(f'<rect x="{x(s.start):.1f}" y="{y_state}" width="{max(1.0, x(s.end) - x(s.start)):.1f}" '
                     f'height="22" {paint}><title>'
                     f'{e(ABSENT_LABEL if absent else s.label)}: '
                     f'{(s.start - t0) / 1000:.1f}s - {(s.end - t0) / 1000:.1f}s</title></rect>')
    for ts, gen in tl.generations:
        parts.append(f'<line x1="{x(ts):.1f}" y1="{y_state - 8}" x2="{x(ts):.1f}" y2="{height - 30}" '
                     f'stroke="#999" stroke-dasharray="4,3"/><text x="{x(ts):.1f}" y="{y_state - 12}" '
                     f'text-anchor="middle" fill="#444">g{gen}</text>')
    for ts in tl.failovers:
        parts.append(f'<line x1="{x(ts):.1f}" y1="{y_state - 8}" x2="{x(ts):.1f}" y2="{height - 30}" '
                     f'stroke="#d62728" stroke-width="2"><title>coordinator failover at '
                     f'{(ts - t0) / 1000:.1f}s</title></line>')
    for i, lane in enumerate(tl.lanes):
        y = 90 + i * lane_h
        parts.append(f'<text x="8" y="{y + 15}"><title>{e(lane.member_id)}</title>{e(_short_name(lane.name))}</text>')
        for s in lane.spans:
            parts.append(f'<rect x="{x(s.start):.1f}" y="{y}" width="{max(1.0, x(s.end) - x(s.start)):.1f}" '
                         f'height="20" fill="#cfe3f5" stroke="#7fa8c9"><title>{e(lane.member_id)} in the group '
                         f'{(s.start - t0) / 1000:.1f}s - {(s.end - t0) / 1000:.1f}s</title></rect>')
        for s in lane.leader_spans:
            parts.append(f'<rect x="{x(s.start):.1f}" y="{y}" width="{max(1.0, x(s.end) - x(s.start)):.1f}" '
                         f'height="20" fill="none" stroke="#1b4f72" stroke-width="2"><title>leader</title></rect>')
        for ts, label in lane.assignments:
            parts.append(f'<text x="{x(ts) + 3:.1f}" y="{y + 14}" font-size="9">{e(label)}'
                         f'<title>assignment at {(ts - t0) / 1000:.1f}s: {e(label)}</title></text>')
        for ts, kind, text in lane.marks:
            color = MARK_STYLE.get(kind, ("o", "black"))[1]
            parts.append(f'<circle cx="{x(ts):.1f}" cy="{y - 2}" r="4" fill="{color}"><title>{e(text)} at '
                         f'{(ts - t0) / 1000:.1f}s</title></circle>')
    parts.append(f'<text x="{left}" y="{height - 10}" fill="#444">0s</text><text x="{width - 20}" '
                 f'y="{height - 10}" text-anchor="end" fill="#444">{span / 1000:.1f}s</text>')
    parts.append("</svg>")
    legend = " ".join(f'<span style="background:{c};padding:2px 6px;margin-right:6px">{s}</span>'
                      for s, c in STATE_COLORS.items() if s not in ("absent", "Dead"))
    legend += (f' <svg width="22" height="14">{_hatch("absent-key")}<rect width="22" height="14" '
               f'fill="url(#absent-key)" stroke="#aaa"/></svg> {ABSENT_LABEL}')
    marks = " ".join(f'<span style="color:{c}">&#9679; {k}</span>' for k, (_, c) in MARK_STYLE.items())
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{e(tl.group_id)} timeline</title></head>"
            f"<body style='font-family:sans-serif'><h2>{e(tl.group_id)}: {_counts(tl)}</h2><p>{legend} {marks} "
            f"<span>dashed: generations; red: coordinator failover; dark outline: leader; labels {e(ASSIGNMENT_HELP)}. "
            f"Hover for details.</span></p>"
            f"{''.join(parts)}</body></html>\n")
