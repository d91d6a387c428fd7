"""The plain engine on a recording larger than one share (``observed.shares``): the groups are
checked a share at a time, with the same verdicts, counts and errors as all at once."""

from __future__ import annotations

import attrs
import pytest

from groupcoord.adapters.bench.verify import simulated
from groupcoord.adapters.verify import observed
from groupcoord.adapters.verify.from_core import observe
from groupcoord.adapters.verify.run import verify_plain
from groupcoord.adapters.verify.search import DIVERGES, Settings

# groups seen only in one DescribeGroups about all three (each its own unit, in different shares)
ONLY_DESCRIBED = ["described-1", "described-2", "described-3"]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """The simulator's groups, one JoinGroup answer changed, then a DescribeGroups of three
    groups nobody joined and a ListGroups (about no group: counted, not checked)."""
    tmp = tmp_path_factory.mktemp("shares")
    _count, _moved, config = simulated(30, tmp / "sim", seed=5)
    pairs = observed.read(tmp / "sim")
    joined = next(o for o in pairs if o.api == "JoinGroup" and o.response.get("error_code") == 0)
    pairs = [attrs.evolve(o, response={**o.response, "generation_id": o.response["generation_id"] + 7})
             if o is joined else o for o in pairs]
    end_ms = max(o.recv_us for o in pairs) // 1000 + 1000
    extra = observe([(end_ms, 999_999, "DescribeGroups", 5,
                      {"groups": ONLY_DESCRIBED, "include_authorized_operations": False}, "admin"),
                     (end_ms + 1, 999_999, "ListGroups", 4, {"states_filter": []}, "admin")], config)
    extra = [attrs.evolve(o, index=len(pairs) + n) for n, o in enumerate(extra, start=1)]
    d = observed.dump(pairs + extra, tmp / "trace").parent
    return d, config, joined


def test_checked_in_shares_the_verdicts_are_those_of_all_at_once(recording):
    d, config, joined = recording
    whole, unchecked = verify_plain(str(d), Settings(config))
    size = (d / "observed.jsonl").stat().st_size
    shares = [len(s.units) for s in observed.shares(d, size // 5)]
    assert len(shares) >= 5 and sum(shares) == len(whole) and sum(1 for n in shares if n) >= 4, shares
    in_shares, unchecked_in_shares = verify_plain(str(d), Settings(config), share_bytes=size // 5)
    assert [attrs.asdict(v) for v in in_shares] == [attrs.asdict(v) for v in whole]
    assert unchecked_in_shares == unchecked == {"ListGroups (not about one group)": 1}
    verdicts = {v.group_id: v for v in whole}
    assert all(verdicts[g].pairs == 1 for g in ONLY_DESCRIBED)  # the one pair, split by group
    planted = verdicts[joined.request["group_id"]]
    assert planted.verdict == DIVERGES, planted  # (where depends on what the search can explain first)
    assert sum(v.verdict == DIVERGES for v in whole) == 1


def test_a_bad_line_is_the_same_one_line_error_in_shares(recording, tmp_path):
    d, config, _joined = recording
    lines = (d / "observed.jsonl").read_text().splitlines(keepends=True)
    lines[len(lines) // 2] = '{"api": "Heartbeat"}\n'
    (tmp_path / "observed.jsonl").write_text("".join(lines))
    errors = []
    for share_bytes in (1 << 40, len(lines[0]) * 50):
        with pytest.raises(observed.TraceError) as e:
            verify_plain(str(tmp_path), Settings(config), share_bytes=share_bytes)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and f"record {len(lines) // 2 + 1}:" in errors[0], errors
