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
