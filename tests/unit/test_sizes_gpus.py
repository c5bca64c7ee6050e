"""Size sweeps and GPU lists: parsing, expansion and every malformed input."""

import pytest

from fabricbench.errors import UsageError
from fabricbench.gpus import check_visible, parse_gpus
from fabricbench.sizes import SizeSweep, format_size, parse_size


@pytest.mark.parametrize("text,value", [("8", 8), ("1K", 1024), ("1M", 1 << 20), ("8G", 8 << 30),
                                        ("64k", 65536), ("1.5K", 1536), ("2GiB", 2 << 30), ("16B", 16)])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1X", "-1", "0", "1.3"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError):
        parse_size(text)


def test_range_doubles_by_default():
    assert SizeSweep.parse("8-64").expand() == [8, 16, 32, 64]
    full = SizeSweep.parse("8-8G").expand()
    assert full[0] == 8 and full[-1] == 8 << 30 and len(full) == 31


def test_range_with_factor_and_list():
    assert SizeSweep.parse("1M-1G:x4").expand() == [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]
    assert SizeSweep.parse("64K,1M,64K").expand() == [65536, 1 << 20]  # duplicates dropped, order kept
    assert SizeSweep.parse("1M-1G:x4").spec == "1M-1G:x4"


@pytest.mark.parametrize("text,msg", [("1G-1M", "descends"), ("8-1K:x1", "factor"), ("8-1K:y", "factor"),
                                      ("", "empty"), ("0-1K", "zero")])
def test_bad_sweeps(text, msg):
    with pytest.raises(UsageError, match=msg):
        SizeSweep.parse(text)


def test_format_size_roundtrip():
    for v in [8, 1024, 1536, 1 << 20, 8 << 30, 1000]:
        assert parse_size(format_size(v)) == v


@pytest.mark.parametrize("text,gpus", [("0-7", tuple(range(8))), ("0,2,5", (0, 2, 5)), ("0-3,6", (0, 1, 2, 3, 6)),
                                       ("5,1", (5, 1)), (" 3 ", (3,))])
def test_parse_gpus(text, gpus):
    assert parse_gpus(text) == gpus


@pytest.mark.parametrize("text,msg", [("", "empty"), ("0,0", "more than once"), ("0-3,2", "more than once"),
                                      ("a", "cannot read"), ("3-1", "descends"), ("0,,1", "cannot read")])
def test_parse_gpus_rejects(text, msg):
    with pytest.raises(UsageError, match=msg):
        parse_gpus(text)


def test_check_visible_shows_arithmetic():
    with pytest.raises(UsageError, match=r"--gpus 0-9 names 10 GPU\(s\) up to 9 but 8 are visible \(0-7\)"):
        check_visible(tuple(range(10)), 8, "0-9")
    with pytest.raises(UsageError, match="no CUDA GPU is visible.*engine=.torch., backend=.gloo."):
        check_visible((0,), 0)
    check_visible((0, 7), 8)
