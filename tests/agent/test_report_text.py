"""A container report's text fields stay under what the control plane takes: the agent keeps the
tail of a longer one (a refused report would be resent every heartbeat, and the host lost)."""

from __future__ import annotations

from cardhour.core.hosts import MAX_REPORT_TEXT, clamped


def test_a_long_text_field_keeps_its_last_characters() -> None:
    report = {"workload": "ch-x-1", "logs": "x" * (MAX_REPORT_TEXT + 10) + "the last line"}
    report |= {"ports": {"22": 2222}, "exit_code": 1}
    out = clamped(report)
    assert len(out["logs"]) == MAX_REPORT_TEXT and out["logs"].endswith("the last line")
    assert (out["workload"], out["ports"], out["exit_code"]) == ("ch-x-1", {"22": 2222}, 1)
    assert clamped({"error": "short"}) == {"error": "short"}
