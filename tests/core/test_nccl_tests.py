"""`core.nccl_tests`: parsing all_reduce_perf output (current and pre-`root` formats) and the
bandwidth gate on the large-message busbw.

The fixtures under tests/fixtures/nccl are written in nccl-tests' output format (column layout of
its 2.13 release and of the older one without `root`), with bandwidths of the size FACTS.md
reports (about 478 GB/s for 8 × H100 SXM with NVLS, about 370 GB/s across two nodes of 8 × NDR):
they were not captured on hardware here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.core.parsers import nccl_tests

FIXTURES = Path(__file__).parents[1] / "fixtures" / "nccl"


def load(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_one_healthy_h100_node() -> None:
    result = nccl_tests.parse(load("all_reduce_1x8_h100_sxm.txt"))
    assert len(result.rows) == 31  # 8 B to 8 GiB by factors of 2
    assert (result.rows[0].size, result.rows[-1].size) == (8, 8 << 30)
    assert result.rows[-1].oop_busbw == 477.53 and result.rows[-1].ip_busbw == 478.49
    assert result.avg_busbw == 161.8724 and result.out_of_bounds == 0
    assert (result.ranks, result.hosts) == (8, ("gpu-bj1-07",))
    assert result.large_busbw == pytest.approx(
        (474.79 + 475.75 + 476.12 + 477.08 + 477.06 + 478.02 + 477.53 + 478.49) / 8, abs=0.5
    )
    outcome = nccl_tests.gate(result, 235)
    assert outcome.passed and outcome.reason.startswith("large-message busbw 47")
    assert outcome.avg_busbw == 161.8724  # reported, not gated: it averages tiny messages in


def test_a_degraded_node_fails_and_says_why() -> None:
    result = nccl_tests.parse(load("all_reduce_1x8_h100_degraded.txt"))
    outcome = nccl_tests.gate(result, 235)
    assert not outcome.passed
    assert outcome.large_busbw is not None and 170 < outcome.large_busbw < 185
    assert "below the 235 GB/s threshold" in outcome.reason


def test_two_nodes_across_the_fabric() -> None:
    result = nccl_tests.parse(load("all_reduce_2x8_h100_ib_ndr.txt"))
    assert (result.ranks, result.hosts) == (16, ("gpu-bj1-07", "gpu-bj1-08"))
    assert nccl_tests.gate(result, 300).passed
    assert not nccl_tests.gate(result, 380).passed


def test_the_older_format_without_root_and_without_validation() -> None:
    result = nccl_tests.parse(load("all_reduce_1x8_old_format_no_validation.txt"))
    assert len(result.rows) == 31 and all(r.wrong is None for r in result.rows)
    assert nccl_tests.gate(result, 235).passed


def test_wrong_values_fail_whatever_the_bandwidth() -> None:
    text = load("all_reduce_1x8_h100_sxm.txt")
    last = text.splitlines()[-5]
    broken = text.replace(last, last[:-1] + "3")  # 3 wrong values in place at 8 GiB
    outcome = nccl_tests.gate(nccl_tests.parse(broken), 235)
    assert not outcome.passed and outcome.reason == "3 wrong values: data errors"


def test_a_run_without_large_messages_cannot_pass() -> None:
    small = "\n".join(
        line
        for line in load("all_reduce_1x8_h100_sxm.txt").splitlines()
        if line.startswith("#") or int(line.split()[0]) < (1 << 30)
    )
    outcome = nccl_tests.gate(nccl_tests.parse(small), 235)
    assert not outcome.passed and "run with -e 8G" in outcome.reason


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# nThread 1 nGpus 8\n# Using devices\n",
        "NCCL WARN NET/IB : Got completion with error 12\nTest NCCL failure common.cu:1279\n",
    ],
)
def test_a_crashed_run_is_an_error_not_a_slow_result(text: str) -> None:
    with pytest.raises(InvalidInput, match="no nccl-tests result rows"):
        nccl_tests.parse(text)


def test_shapes_seen_in_public_captures_read_the_same() -> None:
    plain = load("all_reduce_1x8_h100_sxm.txt")
    expected = nccl_tests.parse(plain)
    lines = plain.splitlines()
    # launcher prefixes: `mpirun --tag-output` and `srun --label`
    for prefix in ("[1,0]<stdout>:", " 0: "):
        tagged = nccl_tests.parse("\n".join(prefix + line for line in lines))
        assert tagged == expected
    # pre-`Group` rank lines of older releases
    old_ranks = nccl_tests.parse(plain.replace("Group  0 ", ""))
    assert old_ranks.ranks == expected.ranks == 8
    # older releases print the max error where `#wrong` is now: the footer says if values were
    # wrong, and the bandwidths read the same
    rows = []
    for line in lines:
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit():
            fields[8], fields[12] = "2e-07", "0e+00"
            line = "  ".join(fields)
        rows.append(line)
    old = nccl_tests.parse("\n".join(rows))
    assert old.large_busbw == expected.large_busbw and all(r.wrong is None for r in old.rows)
    assert nccl_tests.gate(old, 235).passed
    bad = "\n".join(rows).replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED")
    assert not nccl_tests.gate(nccl_tests.parse(bad), 235).passed


def test_an_unvalidated_run_passes_but_says_so() -> None:
    text = "\n".join(
        line
        for line in load("all_reduce_1x8_h100_sxm.txt").splitlines()
        if "Out of bounds" not in line
    )
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit():
            fields[8] = fields[12] = "N/A"
            line = "  ".join(fields)
        rows.append(line)
    outcome = nccl_tests.gate(nccl_tests.parse("\n".join(rows)), 235)
    assert outcome.passed and outcome.reason.endswith("(values not validated: run without -c 0)")
