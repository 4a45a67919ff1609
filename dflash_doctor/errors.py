"""Errors that carry one clear line for the user (no tracebacks for bad input)."""


class DoctorError(Exception):
    """Base of every error that is reported to the user as one line."""

    def __str__(self) -> str:
        # A message may quote a host's or a file's text (a launch line, a YAML error's
        # context): secrets in it never reach the user.
        from dflash_doctor.redact import redact_message

        return redact_message(super().__str__())


class FactError(DoctorError):
    """A fact could not be read or parsed; the message names what and why."""


class TransportError(DoctorError):
    """A host could not be reached, or a command or file on it failed."""


class HostUnreachable(TransportError):
    """The host could not be connected to at all (exit code 3 semantics)."""


# The kinds of transport failure, told apart by type (never by matching message text).
class FileMissing(TransportError):
    """No such file or directory on the host."""


class PermissionDenied(TransportError):
    """The host refused the read, write or command for lack of permission."""


class FileExists(TransportError):
    """A file made exclusively (a backup, a lock) already has its name on the host."""


class UnsafeFile(TransportError):
    """A write was refused: a link or another file stood where the doctor's own was
    expected, or the file changed since it was read (on_host/safe_files.py)."""


class TimedOut(TransportError):
    """A command or read on the host ran past its time limit."""


class Refused(TransportError):
    """This kind of host cannot answer the question at all (a recorded tree has no running
    processes, offline has no GPUs, a recorded tree is never relaunched); the message says why."""


class OutOfReach(Refused):
    """This kind of host never has the answer (offline: no process table, GPUs or log): the
    checks that need it do not apply here, rather than failing to judge (report.py)."""


class UsageError(DoctorError):
    """The command line or an input file given by the user is wrong (exit code 2)."""


class ServerChoice(UsageError):
    """Which server to look at is the user's choice: several SGLang servers match, or the
    one named (`--pid`, `--port`, an inventory `pid:`) is not running. Exit 2 with the list;
    never a missing fact that lets the run go on and skip every check."""


def one_line(text: str, limit: int = 2000) -> str:
    """A message as one line: newlines (from host paths or values) shown as `\\n`, bounded."""
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def validation_line(error: object) -> str:
    """The first problem of a pydantic ValidationError, as `field.path: message`."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error).splitlines()[0]
    first = errors()[0]
    loc = ".".join(str(x) for x in first["loc"])
    return f"{loc}: {first['msg']}" if loc else str(first["msg"])
