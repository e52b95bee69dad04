"""A CLI agent for the `command` provider that works on a small real project in its worktree:
`project_agent.py LOG BEHAVIOUR PHASE` (run in the story's workspace).

Every call appends `PHASE` to LOG. Refine and review approve; research and plan answer with a
line. Implement/rework, by BEHAVIOUR:
  honest-py    adds src/calc/mul.py and tests/test_mul.py
  break-py     breaks `add` in src/calc/__init__.py (a - b), nothing else
  honest-js    adds mul.js and test/mul.test.js
  break-js     breaks add.js
  honest-deps  as honest-py, and adds a line to requirements.txt (a setup input)
  break-deps   writes "broken" into requirements.txt (the setup then fails)
  note         adds notes.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

PY_MUL = "def mul(a, b):\n    return a * b\n"
PY_MUL_TEST = "from calc.mul import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
JS_MUL = "module.exports = (a, b) => a * b;\n"
JS_MUL_TEST = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const isNumber = require('is-number');\nconst mul = require('../mul.js');\n"
    "test('mul', () => { assert.ok(isNumber(mul(3, 4))); assert.strictEqual(mul(3, 4), 12); });\n"
)


def implement(behaviour: str) -> None:
    here = Path.cwd()
    if behaviour in ("honest-py", "honest-deps"):
        (here / "src" / "calc" / "mul.py").write_text(PY_MUL)
        (here / "tests" / "test_mul.py").write_text(PY_MUL_TEST)
        if behaviour == "honest-deps":
            with open(here / "requirements.txt", "a") as handle:
                handle.write("# mul needs nothing new\n")
    elif behaviour == "break-py":
        init = here / "src" / "calc" / "__init__.py"
        init.write_text(init.read_text().replace("a + b", "a - b"))
    elif behaviour == "honest-js":
        (here / "mul.js").write_text(JS_MUL)
        (here / "test" / "mul.test.js").write_text(JS_MUL_TEST)
    elif behaviour == "note":
        (here / "notes.txt").write_text("a note\n")
    elif behaviour == "break-deps":
        (here / "requirements.txt").write_text("broken\n")
    elif behaviour == "break-js":
        add = here / "add.js"
        add.write_text(add.read_text().replace("a + b", "a - b"))
    else:
        raise SystemExit(f"unknown behaviour {behaviour}")


def main() -> int:
    log, behaviour, phase = sys.argv[1:4]
    with open(log, "a") as handle:
        handle.write(phase + "\n")
    if phase in ("refine", "review"):
        print("Clear and small.\n\nDECISION: APPROVED")
    elif phase in ("implement", "rework"):
        implement(behaviour)
        print("Implemented.")
    else:
        print(f"## {phase}\n\nAdd the function with a test.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
