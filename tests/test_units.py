"""The one byte formatter every command and the explain story print with."""

from __future__ import annotations

import pytest

from tilesim.units import KiB, MiB, fmt_bytes


@pytest.mark.parametrize(
    "n, text",
    [
        (0, "0 B"),
        (512, "512 B"),
        (65_536, "65.5 KB"),
        (68_157_440, "68.2 MB"),
        (269_484_032, "269 MB"),
        (999_600, "1000 KB"),  # whole from 100 of a unit on: no 1e+03
        (85.9e9, "85.9 GB"),
        (2.04e12, "2.04 TB"),
        (-3e6, "-3 MB"),
    ],
)
def test_fmt_bytes_is_decimal_three_digits(n, text):
    assert fmt_bytes(n) == text


def test_binary_units():
    assert (KiB, MiB) == (1024, 1024 * 1024)
