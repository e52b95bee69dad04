"""normalise_failure / summarise_failure: noise out, meaning kept, size bounded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sdlc.verify import failure_signature, normalise_failure, summarise_failure

PYTEST_RUN = """\
\x1b[31m============================= FAILURES =============================\x1b[0m
___________________________ test_total ___________________________
tmp_path = PosixPath('{tmp}/pytest-of-{user}/pytest-{n}/test_total0')

    def test_total(tmp_path):
>       assert total([1, 2]) == {expected}
E       AssertionError: assert 3 == {expected}

tests/test_cart.py:12: AssertionError
object at {addr} in worker pid {pid} started {stamp}
scratch file {tmp}/{tmpname}/data.json
=========================== short test summary info ===========================
FAILED tests/test_cart.py::test_total - AssertionError: assert 3 == {expected}
========================= 1 failed, 4 passed in {secs}s =========================   \n\n
"""


def run_text(expected: int = 4, **noise: str) -> str:
    values = {
        "tmp": "/tmp",
        "user": "alice",
        "n": "7",
        "addr": "0x7f3a2b1c4d50",
        "pid": "4242",
        "stamp": "2026-02-03T10:11:12.345Z",
        "tmpname": "tmpa1b2c3d4",
        "secs": "0.12",
    }
    values.update(noise)
    return PYTEST_RUN.format(expected=expected, **values)


def test_noise_is_replaced_and_meaning_is_kept() -> None:
    text = normalise_failure(run_text())
    assert "\x1b[" not in text
    assert "0x7f3a2b1c4d50" not in text and "0x<ADDR>" in text
    assert "4242" not in text and "pid <PID>" in text
    assert "2026-02-03" not in text and "<TIMESTAMP>" in text
    assert "0.12s" not in text and "in <DURATION>" in text
    assert "pytest-of-alice" not in text and "pytest-7" not in text
    assert "tmpa1b2c3d4" not in text
    assert "tests/test_cart.py:12: AssertionError" in text
    assert "E       AssertionError: assert 3 == 4" in text
    assert all(line == line.rstrip() for line in text.splitlines())
    assert not text.endswith("\n")


def test_same_failure_with_different_noise_has_the_same_signature() -> None:
    first = normalise_failure(run_text())
    second = normalise_failure(
        run_text(
            tmp="/private/var/folders/x1/abc123/T",
            user="bob",
            n="12",
            addr="0x55d0c0ffee00",
            pid="99",
            stamp="2027-11-30 23:59:01+01:00",
            tmpname="tmp_zz9y8x7",
            secs="13.70",
        )
    )
    assert first == second
    assert failure_signature(first) == failure_signature(second)


def test_different_assertion_has_a_different_signature() -> None:
    assert failure_signature(normalise_failure(run_text(4))) != failure_signature(
        normalise_failure(run_text(5))
    )


def test_common_timing_forms() -> None:
    samples = {
        "Ran 3 tests in 0.003s": "Ran 3 tests in <DURATION>",
        "took 0.003 seconds": "took <DURATION>",
        "✓ renders (12ms)": "✓ renders (<DURATION>)",
        "ok  pkg/cart  1.204s": "ok  pkg/cart  <DURATION>",
        "elapsed 12 ms at 09:15:02": "elapsed <DURATION> at <TIME>",
        "build 2 min ago": "build <DURATION> ago",
    }
    for raw, expected in samples.items():
        assert normalise_failure(raw) == expected


def test_pids_addresses_dates_seeds_and_uuids() -> None:
    samples = {
        "python[31337]: crashed": "python[<PID>]: crashed",
        "Process 1234 exited": "Process <PID> exited",
        "pid=77 done": "pid=<PID> done",
        "<Foo object at 0x10a2b3c4d>": "<Foo object at 0x<ADDR>>",
        "Using --randomly-seed=123456": "Using --randomly-seed=<SEED>",
        "run 3f2a9c1e-8b7d-4e6f-a1b2-c3d4e5f60718 failed": "run <UUID> failed",
        "Mon Jan 2 2026 broke": "<DATE> broke",
        "log 2026/01/02 x": "log <DATE> x",
    }
    for raw, expected in samples.items():
        assert normalise_failure(raw) == expected


def test_meaningful_numbers_and_paths_survive() -> None:
    text = "src/app.py:120: assert 0x1F == 31\nhome/u/tmp/notes.txt missing\nexpected 250 items"
    assert normalise_failure(text) == text


def test_carriage_returns_and_blank_runs() -> None:
    assert normalise_failure("a\r\nb\rc\n\n\n\nd   \n\n") == "a\nb\nc\n\nd"


def test_empty_text_has_no_signature() -> None:
    assert normalise_failure("") == ""
    assert failure_signature("") == ""


def test_summary_collapses_repeated_lines() -> None:
    text = "start\n" + "retrying connection\n" * 50 + "end\n"
    assert summarise_failure(text) == (
        "start\nretrying connection\n[previous line repeated 49 more times]\nend"
    )


def test_summary_keeps_head_and_tail_when_long() -> None:
    lines = [f"line {i:04d} " + "x" * 40 for i in range(1000)]
    summary = summarise_failure("\n".join(lines), limit=4000)
    assert len(summary) <= 4000
    assert summary.startswith("line 0000 ")
    assert summary.endswith(lines[-1])
    assert "lines omitted" in summary


def test_short_summary_is_the_cleaned_text() -> None:
    assert summarise_failure("\x1b[1mE  assert 1 == 2\x1b[0m   \n") == "E  assert 1 == 2"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=3000), limit=st.integers(min_value=0, max_value=600))
def test_summary_never_exceeds_the_limit(text: str, limit: int) -> None:
    assert len(summarise_failure(text, limit=limit)) <= limit


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=500))
def test_normalising_is_idempotent(text: str) -> None:
    once = normalise_failure(text)
    assert normalise_failure(once) == once
