"""`choirctl status` stays within its start-up budget: it reads the answer as JSON, and the
client loads the operator models (and pydantic) only with the first typed answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_status_command_and_the_client_load_no_pydantic():
    probe = (
        "import sys, choir.ctl.app, choir.ctl.status, choir.ctl.remote, choir.client\n"
        "print(sorted(m for m in sys.modules if m == 'pydantic' or m.endswith('.answers')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_typed_answer_loads_its_models_on_first_use():
    probe = (
        "import sys\n"
        "from choir.client import a\n"
        "a.StatusAnswer\n"
        "print('choir.protocol.operator.answers' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True"
