"""Frozen values (core/frozen.py): the faster ``__init__`` behaves as attrs' own, and ``evolve``
and the field copier set every field. The core's values are built by it everywhere, but at
import time, so these tests apply it to classes of their own."""

from __future__ import annotations

import pytest


def test_frozen_keeps_attrs_behaviour_with_its_own_init():
    import attrs

    from groupcoord.core.frozen import evolve, frozen

    @frozen
    class Point:
        x: int
        y: int = 2
        label: str | None = None

    p = Point(1)
    assert (p.x, p.y, p.label) == (1, 2, None)
    assert Point(1, 3, "a") == Point(x=1, y=3, label="a") and hash(Point(1)) == hash(Point(1))
    assert repr(Point(1, 3)) == "Point(x=1, y=3, label=None)"
    assert Point.__init__.__qualname__.endswith("Point.__init__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.x = 5
    with pytest.raises(TypeError):
        Point()
    assert evolve(p, y=9) == Point(1, 9) and evolve(p) == p

    @frozen(kw_only=True)
    class Named:
        a: int
        b: int = 0

    assert Named(a=1) == Named(a=1, b=0)
    with pytest.raises(TypeError):
        Named(1)

    @frozen(kw_only=True)
    class NamedWithFactory:  # attrs' own __init__, keyword-only too
        a: int
        items: list = attrs.Factory(list)

    assert NamedWithFactory(a=1).items == []
    with pytest.raises(TypeError):
        NamedWithFactory(1)

    @frozen
    class FieldNamed:
        a: int = attrs.field(kw_only=True, default=3)

    assert FieldNamed().a == 3 and FieldNamed(a=4).a == 4
    with pytest.raises(TypeError):
        FieldNamed(4)

    @frozen
    class Empty:
        pass

    assert Empty() == Empty()

    @frozen()
    class Called:
        a: int

    assert Called(a=5).a == 5


def test_frozen_keeps_attrs_init_where_it_does_more_than_assign():
    import attrs

    from groupcoord.core.frozen import evolve, frozen

    @frozen
    class Checked:
        n: int = attrs.field(validator=attrs.validators.instance_of(int))

    with pytest.raises(TypeError):
        Checked("x")

    @frozen
    class Converted:
        n: int = attrs.field(converter=int)

    assert Converted("4").n == 4

    @frozen
    class WithFactory:
        items: list = attrs.Factory(list)
        other: int = 0

    first, second = WithFactory(), WithFactory()
    assert first.items == [] and first.items is not second.items
    assert evolve(first, other=1) == WithFactory([], 1)


def test_frozen_init_takes_the_names_and_fields_attrs_init_takes():
    """Type checkers read ``frozen`` as attrs.frozen (core/frozen.py): the faster ``__init__``
    takes what attrs' does, a private field by its alias and no field attrs leaves out."""
    import inspect

    import attrs

    from groupcoord.core.frozen import frozen

    @frozen
    class Private:
        _a: int
        b: int = 0

    assert Private(a=1, b=2) == Private(1, 2) and Private(a=1)._a == 1
    assert list(inspect.signature(Private.__init__).parameters) == ["self", "a", "b"]
    assert "_set__a" in Private.__init__.__code__.co_names  # the faster init, not attrs'

    @frozen
    class Derived:
        a: int
        b: int = attrs.field(init=False, default=7)

    assert Derived(1).b == 7
    with pytest.raises(TypeError):
        Derived(1, 2)
    assert "_set_a" not in Derived.__init__.__code__.co_names  # attrs' own init


def test_evolve_goes_through_init_or_attrs_evolve():
    import attrs

    from groupcoord.core.frozen import evolve, field_reader, frozen

    @frozen
    class One:
        a: int

    @attrs.frozen
    class Private:  # __init__ takes a=
        _a: int
        b: int = 0

    @attrs.frozen
    class NoInit:
        a: int
        b: int = attrs.field(init=False, default=7)

    @frozen
    class Two:
        a: int
        b: int

    assert field_reader(One) is None and field_reader(Private) is None and field_reader(NoInit) is None
    names, values = field_reader(Two)
    assert names == ("a", "b") and values(Two(1, 2)) == (1, 2)
    assert field_reader(Two) is field_reader(Two)  # cached
    assert evolve(One(1), a=2) == One(2)
    assert evolve(Private(1), b=5) == Private(1, 5)
    assert evolve(NoInit(1), a=3) == NoInit(3) and evolve(NoInit(1), a=3).b == 7
    assert evolve(Two(1, 2), b=3) == Two(1, 3)
    # by position where the init allows it; by name where a field is keyword-only
    @frozen
    class Converted:
        n: int = attrs.field(converter=int)
        m: int = 0

    @frozen(kw_only=True)
    class Named:
        a: int
        b: int = 0

    assert evolve(Converted(1), n="5") == Converted(5) and evolve(Named(a=1), b=2) == Named(a=1, b=2)
    for value in (Two(1, 2), Named(a=1)):
        with pytest.raises(TypeError, match="c"):
            evolve(value, c=3)


def test_field_copier_sets_every_field():
    from groupcoord.core.frozen import field_copier, frozen

    @frozen
    class Three:
        a: int
        b: str
        c: tuple = ()

    class Twin:
        __slots__ = ("a", "b", "c")

    twin = Twin()
    field_copier(Three)(twin, Three(1, "x", (2,)))
    assert (twin.a, twin.b, twin.c) == (1, "x", (2,))
