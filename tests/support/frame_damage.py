"""A request frame damaged as a fuzzing test draws it: cut short, with bytes after its end, or
one byte changed (the fast paths' tests: each reads a damaged frame as the general path does,
or leaves it to that path)."""

from __future__ import annotations

from hypothesis import strategies as st


def damaged(frame: bytes, data: st.DataObject) -> bytes:
    out = bytearray(frame)
    how = data.draw(st.sampled_from(["cut", "extra", "flip"]))
    if how == "cut":
        out = out[:data.draw(st.integers(0, len(out) - 1))]
    elif how == "extra":
        out += data.draw(st.binary(min_size=1, max_size=3))
    else:
        at = data.draw(st.integers(0, len(out) - 1))
        out[at] = data.draw(st.integers(0, 255))
    return bytes(out)
