"""TokenWindows' argument checks (issue 18 item 14's rule, applied to
TokenWindows): a wrong type or value names the argument and what it must
be, instead of nanobind's signature dump."""
import numpy as np
import pytest

import pinwheel


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "tokens.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    return path


@pytest.mark.parametrize("kwargs, error, message", [
    ({"seq_len": 2.5}, TypeError, "TokenWindows: seq_len must be an int in 1..2**63-1"),
    ({"seq_len": 0}, pinwheel.InvalidArgumentError, "TokenWindows: seq_len = 0"),
    ({"token_bytes": "2"}, TypeError, "TokenWindows: token_bytes must be an int"),
    ({"windows": -1}, pinwheel.InvalidArgumentError, "TokenWindows: windows = -1"),
    ({"seed": -1}, pinwheel.InvalidArgumentError, "TokenWindows: seed = -1"),
    ({"seed": 2**64}, pinwheel.InvalidArgumentError, "TokenWindows: seed = 18446744073709551616"),
    ({"window": "yes"}, TypeError, "TokenWindows: window must be a bool, got 'yes' (str)"),
    ({"signed_tokens": 1}, TypeError, "TokenWindows: signed_tokens must be a bool"),
])
def test_a_wrong_argument_is_named(token_file, kwargs, error, message):
    args = {"seq_len": 16, **kwargs}
    seq_len = args.pop("seq_len")
    with pytest.raises(error) as info:
        pinwheel.TokenWindows(token_file, seq_len, **args)
    assert message.replace("2**63-1", str(2**63 - 1)) in str(info.value) or message in str(
        info.value)


def test_a_path_that_is_not_one_is_named():
    with pytest.raises(TypeError, match="TokenWindows: path must be a str or os.PathLike"):
        pinwheel.TokenWindows(5, 16)


def test_numpy_integers_and_bools_are_accepted(token_file):
    ds = pinwheel.TokenWindows(token_file, np.int32(16), windows=np.int64(10),
                               window=np.bool_(True))
    assert len(ds) == 10
