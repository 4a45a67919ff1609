"""SSH transport on paramiko: the only module that imports it (with known_hosts.py).

Addressing follows OpenSSH: `user@host:port` (or `[v6addr]:port`), else an alias resolved
through `~/.ssh/config` (HostName, User, Port, IdentityFile, ProxyJump, UserKnownHostsFile)
with paramiko's own SSHConfig. Host keys are checked against known_hosts: an unknown key is
refused unless `accept_new_host_key` (then it is recorded), a changed key always is.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import logging
import os
import select
import shlex
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import paramiko

from dflash_doctor.errors import (
    FileMissing,
    HostUnreachable,
    PermissionDenied,
    TimedOut,
    TransportError,
)
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    MAX_OUTPUT_BYTES,
    NO_SUCH_FILE,
    PERMISSION_DENIED,
    CommandResult,
    FileId,
    HostKind,
    HostReach,
    LineSplitter,
    StderrLines,
    bounded_on_host,
)
from dflash_doctor.transport.commands import HostCommands, safe_error
from dflash_doctor.transport.known_hosts import KnownHosts, PatternClient
from dflash_doctor.transport.ssh_options import SSHOptions, parse_target

# paramiko logs a traceback for a garbage SSH banner; with no handler of its own Python's
# last-resort handler would print it on stderr. Every failure reaches the user as one line.
logging.getLogger("paramiko").addHandler(logging.NullHandler())


# The host-side file helper (standard library, Python 3.8+), shipped as text per change.
SAFE_FILES = "on_host/safe_files.py"
# What `remove` answers in place of an identity.
_NO_ID = dict.fromkeys(("dev", "ino", "uid", "gid", "mode", "size"), 0)


@dataclass(frozen=True)
class Resolved:
    alias: str
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    proxy_jump: str | None
    known_hosts: str
    # Every other file OpenSSH would consult (the further UserKnownHostsFile words and the
    # GlobalKnownHostsFile ones): read, never written; a changed key in any is refused.
    other_known_hosts: tuple[str, ...] = ()


def _expand(path: str) -> str:
    return os.path.expanduser(path)


def resolve(target_text: str, options: SSHOptions) -> Resolved:
    target = parse_target(target_text)
    cfg_path = _expand(options.ssh_config or "~/.ssh/config")
    looked: dict[str, Any] = {}
    if os.path.exists(cfg_path):
        try:
            looked = dict(paramiko.SSHConfig.from_path(cfg_path).lookup(target.host))
        except (OSError, paramiko.SSHException, ValueError) as e:
            raise TransportError(f"{cfg_path}: cannot read SSH config: {e}") from None
    port = target.port or options.port or int(looked.get("port", 22))
    user = target.user or options.user or looked.get("user") or getpass.getuser()
    identities = tuple(_expand(p) for p in options.identity_files) + tuple(
        _expand(p) for p in looked.get("identityfile", [])
    )
    user_words = _words(looked.get("userknownhostsfile")) or ["~/.ssh/known_hosts"]
    global_words = _words(looked.get("globalknownhostsfile")) or list(GLOBAL_KNOWN_HOSTS)
    known = _expand(options.known_hosts or user_words[0])
    others = [] if options.known_hosts else user_words[1:]
    other_known = tuple(dict.fromkeys(_expand(w) for w in [*others, *global_words] if w != "none"))
    jump = options.proxy_jump or looked.get("proxyjump")
    if jump in ("none", ""):
        jump = None
    return Resolved(
        alias=target.host,
        hostname=looked.get("hostname", target.host),
        port=port,
        user=user,
        identity_files=identities,
        proxy_jump=jump,
        known_hosts=known,
        other_known_hosts=tuple(p for p in other_known if p != known),
    )


GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


def _words(value: object) -> list[str]:
    """An ssh_config value that may hold several paths (a string or a list of them)."""
    if isinstance(value, list | tuple):
        return [w for v in value for w in str(v).split()]
    return str(value).split() if value else []


class UnknownHostKey(paramiko.SSHException):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(hostname)
        self.hostname = hostname
        self.key = key


_RECORD_LOCK = threading.Lock()


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    def __init__(self, accept_new: bool, known_hosts: str) -> None:
        self.accept_new = accept_new
        self.known_hosts = known_hosts

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.accept_new:
            raise UnknownHostKey(hostname, key)
        directory = os.path.dirname(self.known_hosts)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        # Many connections to one new host at once record its key once: under a lock (this
        # process) and flock (other processes), the file is re-read before appending.
        with _RECORD_LOCK, open(self.known_hosts, "a", encoding="utf-8") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            recorded = KnownHosts()
            try:
                recorded.load(self.known_hosts)
            except Exception:  # unreadable lines: treat as no entry, append ours
                recorded = KnownHosts()
            have = recorded.lookup(hostname)
            if have is not None and key.get_name() in have:
                if have[key.get_name()] != key:
                    raise paramiko.BadHostKeyException(hostname, key, have[key.get_name()])
            else:
                line = paramiko.hostkeys.HostKeyEntry([hostname], key).to_line()
                if line:
                    f.write(line)
        client.get_host_keys().add(hostname, key.get_name(), key)


def _load_known_hosts(client: paramiko.SSHClient, r: Resolved) -> None:
    """The user's known_hosts (recorded into when a new key is accepted), then the other files
    OpenSSH would consult; one unreadable file is one clear error naming it."""
    if os.path.exists(r.known_hosts):
        try:
            client.load_host_keys(r.known_hosts)
        except TransportError:
            raise
        except (OSError, paramiko.SSHException) as e:
            raise TransportError(f"{r.known_hosts}: cannot read known_hosts: {e}") from None
        except Exception as e:  # InvalidHostKey, UnicodeDecodeError, binascii
            raise TransportError(
                f"{r.known_hosts}: cannot read known_hosts: {type(e).__name__}"
            ) from None
    for other in r.other_known_hosts:
        # Consulted like OpenSSH does; keys there are checked first and never rewritten.
        if not os.path.isfile(other):
            continue
        try:
            client.load_system_host_keys(other)
        except TransportError:
            raise
        except Exception as e:
            raise TransportError(f"{other}: cannot read known_hosts: {type(e).__name__}") from None


def _fingerprint(key: paramiko.PKey) -> str:
    import base64
    import hashlib

    digest = hashlib.sha256(key.asbytes()).digest()
    return f"{key.get_name()} SHA256:{base64.b64encode(digest).decode().rstrip('=')}"


def _exec_request(chan: paramiko.Channel, command: str) -> None:
    """Start `command` on an open channel without waiting a round trip for the server's
    reply: paramiko's `exec_command` waits for it, yet a refusal closes the channel anyway
    (paramiko Channel._request_failed), which the reader sees as a command with no exit
    status. One round trip less per command (20 ms of a 20 ms-away host's check)."""
    transport = chan.get_transport()
    send = getattr(transport, "_send_user_message", None)
    if send is None or not hasattr(chan, "remote_chanid"):
        chan.exec_command(command)  # another paramiko: its own, waiting way
        return
    m = paramiko.Message()
    m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("exec")
    m.add_boolean(True)
    m.add_string(command)
    send(m)


class _QuickAckSocket(socket.socket):
    """A TCP socket that acknowledges what it received at once.

    sshd leaves Nagle on for a session without a terminal, so a small reply (the
    confirmation of the first channel) waits until the server's previous packet (its
    host-keys notice after authentication) is acknowledged, and Linux delays that ACK by
    up to 40 ms: measured here as 44 ms of every connection, with OpenSSH's own client too.
    TCP_QUICKACK after each read sends the pending ACK now (it is not sticky in Linux)."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        with contextlib.suppress(OSError):
            self.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        return data


QUICKACK: int = getattr(socket, "TCP_QUICKACK", -1)


def _quick_ack(sock: socket.socket) -> socket.socket:
    if QUICKACK < 0:  # not Linux: the plain socket
        return sock
    timeout = sock.gettimeout()
    quick = _QuickAckSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    quick.settimeout(timeout)
    return quick


class SSHTransport(HostCommands):
    """One SSH connection to one host; commands, SFTP file access, streaming output."""

    remote = True
    bundles = True
    kind: HostKind = "ssh"
    # A machine: its /proc shows the processes of the containers its engine runs.
    reach = HostReach(containers=True)

    def __init__(self, host: str, target: str, options: SSHOptions) -> None:
        self.host = host
        self.options = options
        self.resolved = resolve(target, options)
        self._jump: SSHTransport | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self.client = self._connect()

    # -- connection -----------------------------------------------------------------------

    def _where(self) -> str:
        r = self.resolved
        return f"{self.host} ({r.user}@{r.hostname}:{r.port})"

    def _sock(self) -> socket.socket | paramiko.Channel:
        r = self.resolved
        if not r.proxy_jump:
            try:
                sock = socket.create_connection(
                    (r.hostname, r.port), timeout=self.options.connect_timeout
                )
            except TimeoutError:
                raise HostUnreachable(
                    f"{self._where()}: connection timed out after {self.options.connect_timeout:g}s"
                ) from None
            except OSError as e:
                reason = e.strerror or str(e)
                raise HostUnreachable(f"{self._where()}: cannot connect: {reason}") from None
            # Small request/reply exchanges (SFTP, channel opens) stall on Nagle + delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return _quick_ack(sock)
        first, _, rest = r.proxy_jump.partition(",")
        if self._jump is not None:  # a retry (after a passphrase prompt) needs a new channel
            self._jump.close()
        opts = SSHOptions(
            known_hosts=self.options.known_hosts,
            ssh_config=self.options.ssh_config,
            accept_new_host_key=self.options.accept_new_host_key,
            connect_timeout=self.options.connect_timeout,
            command_timeout=self.options.command_timeout,
            interactive=self.options.interactive,
            identity_files=self.options.identity_files,
            proxy_jump=rest or None,
        )
        self._jump = SSHTransport(f"{self.host} via {first}", first, opts)
        transport = self._jump.client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (r.hostname, r.port),
                ("127.0.0.1", 0),
                timeout=self.options.connect_timeout,
            )
        except (paramiko.SSHException, OSError) as e:
            raise HostUnreachable(
                f"{self._where()}: jump host {first} cannot reach it: {e}"
            ) from None

    def _connect(self) -> paramiko.SSHClient:
        r = self.resolved
        client = PatternClient()  # OpenSSH's host patterns, bounded reads (known_hosts.py)
        _load_known_hosts(client, r)
        client.set_missing_host_key_policy(
            _HostKeyPolicy(self.options.accept_new_host_key, r.known_hosts)
        )
        passphrase: str | None = None
        for attempt in range(2):
            try:
                client.connect(
                    r.hostname,
                    port=r.port,
                    username=r.user,
                    key_filename=list(r.identity_files) or None,  # type: ignore[arg-type]
                    passphrase=passphrase,
                    timeout=self.options.connect_timeout,
                    banner_timeout=self.options.connect_timeout,
                    auth_timeout=self.options.connect_timeout,
                    allow_agent=True,
                    look_for_keys=not r.identity_files,
                    sock=self._sock(),
                )
                return client
            except UnknownHostKey as e:
                client.close()
                raise HostUnreachable(
                    f"{self._where()}: unknown host key {_fingerprint(e.key)}; verify it, then "
                    f"re-run with --accept-new-host-key to record it in {r.known_hosts}"
                ) from None
            except paramiko.BadHostKeyException as e:
                client.close()
                raise HostUnreachable(
                    f"{self._where()}: HOST KEY CHANGED (now {_fingerprint(e.key)}, "
                    f"{r.known_hosts} has {_fingerprint(e.expected_key)}); refusing to connect"
                ) from None
            except paramiko.PasswordRequiredException:
                client.close()
                if attempt == 0 and self.options.interactive:
                    passphrase = getpass.getpass(f"Passphrase for the key of {self.host}: ")
                    continue
                raise HostUnreachable(
                    f"{self._where()}: the key is encrypted; add it to ssh-agent or run "
                    "interactively to type its passphrase"
                ) from None
            except paramiko.AuthenticationException as e:
                client.close()
                raise HostUnreachable(f"{self._where()}: authentication failed: {e}") from None
            except TimeoutError:
                client.close()
                raise HostUnreachable(
                    f"{self._where()}: connection timed out after {self.options.connect_timeout:g}s"
                ) from None
            except (paramiko.SSHException, OSError, EOFError) as e:
                client.close()
                reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
                raise HostUnreachable(f"{self._where()}: cannot connect: {reason}") from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._sftp is not None:
            self._sftp.close()
        self.client.close()
        if self._jump is not None:
            self._jump.close()

    # -- commands -------------------------------------------------------------------------

    def _active(self) -> paramiko.Transport:
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise HostUnreachable(f"{self.host}: connection closed")
        return transport

    def _open_channel(
        self, argv: list[str], timeout: float, stdin: bytes = b""
    ) -> paramiko.Channel:
        transport = self._active()
        try:
            chan = transport.open_session(timeout=timeout)
            chan.settimeout(timeout)
            # One argv, quoted for the remote shell: nothing from a host is interpolated raw.
            _exec_request(chan, shlex.join(bounded_on_host(argv, timeout)))
            # No terminal is asked for (sshd gives the command a session of its own, without
            # one), and its stdin ends here (after `stdin`, the data of a file write):
            # what it runs reads EOF, never waits on us.
            if stdin:
                chan.sendall(stdin)
            chan.shutdown_write()
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise HostUnreachable(f"{self.host}: cannot run {argv[0]}: {e}") from None
        return chan

    def _pump(
        self, chan: paramiko.Channel, argv: list[str], deadline: float, timeout: float
    ) -> Iterator[tuple[bytes, bytes]]:
        """Yield (stdout, stderr) pieces until the command exits or the deadline passes."""
        while True:
            got = False
            if chan.recv_ready():
                yield chan.recv(CHUNK_BYTES), b""
                got = True
            if chan.recv_stderr_ready():
                yield b"", chan.recv_stderr(CHUNK_BYTES)
                got = True
            if got:
                continue
            left = deadline - time.monotonic()
            if chan.eof_received or chan.closed:
                # Output is complete; the exit status follows on its own message.
                if not chan.status_event.wait(max(left, 0)):
                    chan.close()
                    raise TimedOut(f"{self.host}: {argv[0]} timed out after {timeout:g}s")
                return
            if left <= 0:
                chan.close()
                raise TimedOut(f"{self.host}: {argv[0]} timed out after {timeout:g}s")
            try:
                select.select([chan], [], [], min(left, 1.0))
            except (OSError, ValueError):
                return

    def _exec(
        self, argv: list[str], timeout: float, status: list[int], stdin: bytes = b""
    ) -> Iterator[tuple[bytes, bytes]]:
        """(stdout, stderr) pieces of one command; its exit status is appended to `status`."""
        deadline = time.monotonic() + timeout
        chan = self._open_channel(argv, timeout, stdin)
        try:
            yield from self._pump(chan, argv, deadline, timeout)
            status.append(chan.recv_exit_status() if chan.exit_status_ready() else -1)
        except (TimeoutError, OSError, EOFError, paramiko.SSHException) as e:
            raise TransportError(
                f"{self.host}: {argv[0]} failed: {e or type(e).__name__}"
            ) from None
        finally:
            chan.close()

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        out, err = bytearray(), bytearray()
        status: list[int] = []
        lines = LineSplitter(on_stderr) if on_stderr is not None else None
        for o, e in self._exec(argv, timeout, status):
            out += o
            err += e
            if lines is not None and e:
                lines.feed(e)
            if len(out) + len(err) > MAX_OUTPUT_BYTES:
                raise TransportError(f"{self.host}: {argv[0]} printed more than 256 MiB")
        if lines is not None:
            lines.close()
        return CommandResult(status[0], bytes(out), bytes(err))

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        """Stream a command's stdout; raise TransportError when it exits non-zero."""
        err = bytearray()
        status: list[int] = []
        for o, e in self._exec(argv, timeout, status):
            if o:
                yield o
            if len(err) < 65536:
                err += e
        if status[0] != 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(f"{self.host}: {lines[-1] if lines else argv[0] + ' failed'}")

    # -- files ----------------------------------------------------------------------------

    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            transport = self._active()
            try:
                self._sftp = paramiko.SFTPClient.from_transport(transport)
            except (paramiko.SSHException, OSError, EOFError) as e:
                raise HostUnreachable(f"{self.host}: SFTP unavailable: {e}") from None
            if self._sftp is None:
                raise HostUnreachable(f"{self.host}: SFTP unavailable")
            channel = self._sftp.get_channel()
            if channel is not None:
                channel.settimeout(self.options.command_timeout)
        return self._sftp

    def _file_error(self, path: str, e: BaseException) -> TransportError:
        if isinstance(e, FileNotFoundError) or getattr(e, "errno", None) == 2:
            return FileMissing(f"{self.host}:{path}: {NO_SUCH_FILE}")
        if isinstance(e, PermissionError) or getattr(e, "errno", None) == 13:
            return PermissionDenied(f"{self.host}:{path}: {PERMISSION_DENIED}")
        if isinstance(e, socket.timeout | TimeoutError):
            return TimedOut(f"{self.host}:{path}: timed out")
        return TransportError(f"{self.host}:{path}: {e or type(e).__name__}")

    def file_size(self, path: str) -> int:
        try:
            st = self.sftp().stat(path)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None
        if st.st_mode is not None and not stat.S_ISREG(st.st_mode):
            raise TransportError(f"{self.host}:{path}: not a regular file")
        return st.st_size or 0

    def file_mode(self, path: str) -> int:
        try:
            st = self.sftp().stat(path)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None
        return stat.S_IMODE(st.st_mode or 0o644)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        try:
            sftp = self.sftp()
            st = sftp.stat(path)
            if st.st_mode is not None and not stat.S_ISREG(st.st_mode):
                # /proc files report size 0: read them, but never a FIFO or device.
                raise TransportError(f"{self.host}:{path}: not a regular file")
            if st.st_size is not None and st.st_size > max_bytes:
                raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
            with sftp.open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except TransportError:
            raise
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None
        if len(data) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return bytes(data)

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        try:
            f = self.sftp().open(path, "rb")
            f.prefetch()
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None
        return self._chunks(f, path, chunk_bytes)

    def _chunks(self, f: paramiko.SFTPFile, path: str, chunk_bytes: int) -> Iterator[bytes]:
        with f:
            while True:
                try:
                    chunk = f.read(chunk_bytes)
                except (OSError, EOFError, paramiko.SSHException) as e:
                    raise self._file_error(path, e) from None
                if not chunk:
                    return
                yield bytes(chunk)

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(self.sftp().listdir(path))
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None

    def readlink(self, path: str) -> str:
        try:
            target = self.sftp().readlink(path)
        except (OSError, EOFError, paramiko.SSHException) as e:
            raise self._file_error(path, e) from None
        if target is None:
            raise TransportError(f"{self.host}:{path}: not a link")
        return target

    def _safe(self, path: str, request: dict[str, object], data: bytes = b"") -> FileId:
        """One on_host/safe_files.py change, run on the host under its root-owned system
        python3 (prefetch.guard_script), the data on stdin: the directory is opened and
        the file made there through descriptors, never by path over SFTP (which follows
        links and chmods by name)."""
        from dflash_doctor.shipped import script_source
        from dflash_doctor.transport.prefetch import guard_script

        text = json.dumps({**request, "path": path}, separators=(",", ":"))
        argv = ["sh", "-c", guard_script(), "sh", script_source(SAFE_FILES), text]
        out, err = bytearray(), bytearray()
        status: list[int] = []
        for o, e in self._exec(argv, self.options.command_timeout, status, data):
            out += o
            err += e[: 65536 - len(err)]
            if len(out) > 65536:
                raise TransportError(f"{self.host}:{path}: the file helper said too much")
        try:
            answer = json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            lines = err.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(
                f"{self.host}:{path}: cannot change the file: {lines[-1] if lines else status}"
            ) from None
        if not isinstance(answer, dict) or "ok" not in answer:
            got = answer if isinstance(answer, dict) else {}
            raise safe_error(self.host, path, str(got.get("kind")), str(got.get("error")))
        try:
            return FileId.of(answer["ok"] or dict(_NO_ID))
        except (ValueError, AttributeError):
            raise TransportError(f"{self.host}:{path}: the file helper answered badly") from None

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId:
        """Write atomically through descriptors on the host (see `_safe`)."""
        request: dict[str, object] = {"op": "replace", "mode": mode, "owner": owner}
        if expect is not None:
            request["expect"] = expect.expected()
        return self._safe(path, request, data)

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        """Make a new file on the host, refused where the name exists."""
        return self._safe(path, {"op": "create", "mode": mode, "owner": owner}, data)

    def file_id(self, path: str) -> FileId:
        """What is at `path` on the host, not following a link."""
        return self._safe(path, {"op": "id"})

    def remove_file(self, path: str) -> None:
        """Remove one name on the host."""
        self._safe(path, {"op": "remove"})

    def private_dir(self, path: str) -> None:
        """A directory on the host only the login user can write."""
        self._safe(path, {"op": "private_dir"})
