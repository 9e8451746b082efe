"""pytest plugin of the triage-farm agent: records what a tt-xla test really did.

Load it with `PYTHONPATH=agent/scripts pytest -p triage_pytest_plugin ...`. For the call phase of
every test it adds two JUnit properties (item.user_properties, so they land in --junitxml):

  triage_stage  the content of ._bringup_stage.txt in the current directory (written by tt-xla when
                ENABLE_BRINGUP_STAGE_LOGGING=1; read here before the teardown deletes it)
  triage_error  on failure only: "<ExceptionType>: <first line of the message>"

Unlike the runner's error_message property, neither echoes the YAML entry's old values.
"""
import os

import pytest

STAGE_FILE = "._bringup_stage.txt"


def _stage():
    try:
        with open(os.path.join(os.getcwd(), STAGE_FILE), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _error(excinfo):
    value = excinfo.value
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    name = type(value).__name__
    return f"{name}: {lines[0]}" if lines else name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    if call.when == "call":
        stage = _stage()
        if stage:
            item.user_properties.append(("triage_stage", stage))
        excinfo = call.excinfo
        if excinfo is not None and not excinfo.errisinstance(
            (pytest.skip.Exception, pytest.xfail.Exception)
        ):
            item.user_properties.append(("triage_error", _error(excinfo)))
    yield
