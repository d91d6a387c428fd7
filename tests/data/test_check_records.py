"""``batches.check_records``, the log's fast walk over a produced batch's records, judges every
batch as ``read_records`` does: the same FormatError message (or none), and offsets 0, 1, 2, ...
exactly when ``read_records`` reads them so."""

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.adapters.storage import batches as fmt

payload = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=300))
records = st.lists(st.tuples(payload, payload), min_size=1, max_size=150)
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))), max_size=3)


def judged_by_read_records(body: bytes, count: int) -> tuple[str | None, bool]:
    try:
        read = fmt.read_records(body, count, 0, 0)
    except fmt.FormatError as e:
        return str(e), False
    return None, [r.offset for r in read] == list(range(count))


def judged_by_check_records(body: bytes, count: int) -> tuple[str | None, bool]:
    problem, sequential = fmt.check_records(body, 0, count)
    return problem, sequential if problem is None else False


@settings(max_examples=150, deadline=None)
@given(records, st.data())
def test_same_verdict_as_read_records_on_whole_and_damaged_batches(pairs, data):
    with_headers = data.draw(st.booleans())
    batch = fmt.encode_batch(pairs, 1_000, headers=[data.draw(headers) for _ in pairs] if with_headers else None)
    body = batch[fmt.HEADER_SIZE:]
    assert judged_by_check_records(body, len(pairs)) == (None, True)
    damaged = bytearray(body)
    for _ in range(data.draw(st.integers(0, 3))):  # bytes overwritten (offset deltas, lengths, ...)
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(damaged)))
    if data.draw(st.booleans()):
        damaged = damaged[:cut]  # truncated
    count = data.draw(st.sampled_from([len(pairs), max(len(pairs) - 1, 0), len(pairs) + 1]))
    assert judged_by_check_records(bytes(damaged), count) == judged_by_read_records(bytes(damaged), count)


def test_a_wrong_offset_delta_in_a_well_formed_batch_is_found_past_the_one_byte_varints():
    batch = bytearray(fmt.encode_batch([(None, b"v")] * 100, 1_000))
    body = bytes(batch[fmt.HEADER_SIZE:])
    # record 70's offset delta is a two-byte varint (zigzag 140); make it 71 (zigzag 142)
    records = fmt.read_records(body, 100, 0, 0)
    assert records[70].offset == 70
    p = 0
    for _ in range(70):
        length, p = fmt.read_varint(body, p)
        p += length
    _length, q = fmt.read_varint(body, p)
    q += 1  # attributes
    _ts, q = fmt.read_varint(body, q)
    assert body[q:q + 2] == bytes([0x8C, 0x01])
    changed = body[:q] + bytes([0x8E, 0x01]) + body[q + 2:]
    assert fmt.check_records(changed, 0, 100) == (None, False)
    assert judged_by_read_records(changed, 100) == (None, False)
