"""lib.checked's rules: the names a refusal prints, and the edges of the value rules."""
import pytest
from beartype.door import is_bearable
from beartype.roar import BeartypeException
from beartype import beartype

from lib.checked import NonNegativeInt, TokenId, each, is_a_token_id


def test_each_names_its_check_in_a_refusal():
    @beartype
    def takes(seeds: each(NonNegativeInt)) -> None:
        pass

    takes([1, 2])
    with pytest.raises(BeartypeException, match="every_item_matches"):
        takes([1, -1])


def test_a_token_id_is_an_int_a_long_holds_whatever_it_is_given():
    assert is_a_token_id(0) and is_a_token_id(2**63 - 1)
    for value in (-1, 2**63, 10**400, True, 1.0, "3", None):
        assert not is_a_token_id(value), value
    assert not is_bearable(10**400, TokenId)


def _annotated_in(module):
    """The functions, methods and classes a module defines, whose annotations beartype reads."""
    import inspect

    for value in vars(module).values():
        if getattr(value, "__module__", None) != module.__name__:
            continue
        yield value
        if inspect.isclass(value):
            yield from (v for v in vars(value).values() if inspect.isfunction(v))


def test_every_annotation_in_a_checked_module_names_something_the_module_has():
    """A field or parameter annotated with a name the module forgot to import is never
    checked (the annotations are strings until resolved), and nothing says so."""
    import importlib
    import typing

    from lib.checked import CHECKED_MODULES

    unresolved = []
    for name in CHECKED_MODULES:
        module = importlib.import_module(name)
        for value in _annotated_in(module):
            try:
                typing.get_type_hints(value)
            except NameError as error:
                unresolved.append(f"{name}.{value.__qualname__}: {error}")
    assert not unresolved, unresolved
