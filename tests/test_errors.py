"""Every public error is a ``CoveyError`` that keeps its builtin base, and the package's face names them all."""

from __future__ import annotations

import subprocess
import sys

import pytest

import covey
from covey.errors import CoveyError

BUILTIN_BASE = {
    "InvalidSpec": ValueError,
    "InvalidSchema": ValueError,
    "SchemaMismatch": ValueError,
    "PlanError": ValueError,
    "ModelsFileError": ValueError,
    "UnservableModel": ValueError,
    "SweepInputError": ValueError,
    "WorkspaceError": ValueError,
    "BadPart": ValueError,
    "UnknownStrategy": LookupError,
    "UnknownJob": LookupError,
    "JobTimeout": TimeoutError,
    "StoreUnavailable": ConnectionError,
    "LedgerError": Exception,
    "JobRefused": Exception,
}


@pytest.mark.parametrize("name", sorted(BUILTIN_BASE))
def test_a_public_error_is_a_covey_error_and_keeps_its_builtin_base(name):
    error = getattr(covey, name)
    assert issubclass(error, CoveyError) and issubclass(error, BUILTIN_BASE[name])


def test_every_error_the_package_exports_is_listed_here():
    exported = {
        n for n in covey.__all__ if isinstance(getattr(covey, n), type) and issubclass(getattr(covey, n), BaseException)
    }
    assert exported == {*BUILTIN_BASE, "CoveyError"}


def test_importing_the_package_and_its_errors_pulls_in_no_celery():
    probe = "import sys, covey; from covey import CoveyError, InvalidSpec, LedgerError; print('celery' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"


def test_importing_the_package_leaves_the_broker_transport_for_a_gevent_worker_to_patch_first():
    # kombu's Redis transport takes the standard library's select when imported; `covey
    # worker --pool gevent` imports the package before it patches (covey.cli).
    probe = "import sys, covey; from covey import JobSpec; print('kombu.transport.redis' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "False\n"
