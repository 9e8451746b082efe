"""pytest plugin of the triage-farm agent: records what a tt-xla test really did.

Load it with `PYTHONPATH=agent/scripts pytest -p triage_pytest_plugin ...`. For the call phase of
every test it adds two JUnit properties (item.user_properties, so they land in --junitxml):

  triage_stage  the content of ._bringup_stage.txt in the current directory (written by tt-xla when
                ENABLE_BRINGUP_STAGE_LOGGING=1; read here before the teardown deletes it)
  triage_error  on failure only: "<ExceptionType>: <first line of the message>"

Unlike the runner's error_message property, neither echoes the YAML entry's old values.

With TRIAGE_JUNIT_PARTIAL=<path> in the environment it also writes, after every test, the JUnit
file of the tests finished so far to <path> (atomically, through <path>.tmp). pytest writes its
--junitxml file only when the session ends, so a process that dies (a crash on the device) leaves
none; the partial file keeps the finished tests' outcomes, and only the test that crashed and
those after it need another run. Written with pytest's own JUnit writer; if that writer is not
there (another pytest version), no partial file is written and nothing else changes.
"""
import os

import pytest

STAGE_FILE = "._bringup_stage.txt"
PARTIAL_ENV = "TRIAGE_JUNIT_PARTIAL"
_config = None


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


def pytest_configure(config):
    global _config
    _config = config


def pytest_runtest_logfinish(nodeid, location):
    path = os.environ.get(PARTIAL_ENV)
    if not path or _config is None:
        return
    try:
        from _pytest import junitxml

        xml = _config.stash.get(junitxml.xml_key, None)
        if xml is None:
            return
        tmp = path + ".tmp"
        final = xml.logfile
        xml.logfile = tmp
        try:
            xml.pytest_sessionfinish()  # writes the finished tests' testcases to xml.logfile
        finally:
            xml.logfile = final
        os.replace(tmp, path)
    except Exception:  # a partial file is a help, never a reason to fail the run
        pass
