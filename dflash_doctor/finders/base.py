"""What every finder shares: one bad input becomes one missing fact with one clear line."""

from __future__ import annotations

import csv
from collections.abc import Callable
from typing import TypeVar

from pydantic import ValidationError

from dflash_doctor.errors import (
    DoctorError,
    FactError,
    OutOfReach,
    ServerChoice,
    validation_line,
)
from dflash_doctor.facts.models import Fact
from dflash_doctor.transport.base import Transport

T = TypeVar("T")
MAX_HOST_FILE_BYTES = 1 << 20


def attempt(host: str, where: str, fn: Callable[[], T]) -> Fact[T]:
    """Run one gathering step; any bad input becomes a missing fact with one clear line."""
    try:
        return Fact[T].of(fn(), source=where)
    except ServerChoice:
        raise  # the user's choice to make, not a fact to go without (errors.ServerChoice)
    except FactError as e:
        return Fact[T].missing(f"{host}:{where}: {e}", source=where)
    except OutOfReach as e:
        return Fact[T].missing(str(e), source=where, out_of_reach=True)
    except DoctorError as e:
        return Fact[T].missing(str(e), source=where)
    except ValidationError as e:
        return Fact[T].missing(f"{host}:{where}: {validation_line(e)}", source=where)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError, csv.Error) as e:
        # Hostile data reaching a corner no parser foresaw: still one line, never a traceback.
        text = str(e).splitlines()[0][:160] if str(e) else ""
        return Fact[T].missing(
            f"{host}:{where}: cannot parse ({type(e).__name__}{': ' + text if text else ''})",
            source=where,
        )


def host_file_reader(t: Transport) -> Callable[[str], bytes]:
    """Reads a file the launch names (`--config`, a sourced env file, `EnvironmentFile=`)
    through the transport; never executed."""

    def read(path: str) -> bytes:
        try:
            return t.read_file(path, max_bytes=MAX_HOST_FILE_BYTES)
        except DoctorError as e:
            raise FactError(f"cannot read {path}: {e}") from None

    return read
