"""What an engine's output is shown as (pure: no engine)."""

from __future__ import annotations

from cardhour.runtime.engine_cli import build_failure

PIP = (
    "ERROR: Could not find a version that satisfies the requirement no-such-package==1.0\n"
    "ERROR: No matching distribution found for no-such-package==1.0\n"
    'Error: building at STEP "RUN python3 -m pip install …": while running runtime: exit status 1\n'
)


def test_a_failed_build_says_the_steps_own_error_then_the_engines() -> None:
    assert build_failure(PIP) == (
        "ERROR: No matching distribution found for no-such-package==1.0 "
        '(building at STEP "RUN python3 -m pip install …": while running runtime: exit status 1)'
    )


def test_a_failed_build_without_a_step_error_says_the_engines_last_line() -> None:
    assert build_failure("STEP 1/2: FROM x\nError: x: image not known\n") == "x: image not known"
    assert build_failure("") == "no output"
    assert len(build_failure("ERROR: " + "y" * 2000)) == 600
