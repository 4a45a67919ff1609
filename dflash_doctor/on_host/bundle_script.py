"""Gather a host's facts in ONE remote execution: the answers a gathering will ask for.

Stdlib only, imports nothing from dflash_doctor, and runs with Python 3.8+: the SSH
transport ships this file to the host (`/usr/bin/python3 -I -S -c SOURCE CONFIG`, the
interpreter chosen and checked by `transport/prefetch.py`, never one the host's users
provide) and reads one bounded JSON bundle from its stdout. `transport/prefetch.py` then
answers the gatherer's reads, listings, links and commands from it; anything this script
did not foresee falls back to a real transport call, so the bundle is an optimisation that
can only be incomplete, never wrong.

It walks the same steps as `gather.py`, over the same paths (`root` prefixes them on a
recorded host tree): the server process candidates (pgrep, or /proc on a recorded tree)
with their cmdline, status, environment and stdout/stderr targets; the launch file; the
drafter and target config.json (directory, or the Hugging Face hub cache); the sglang
dist-info beside the server's Python; the log (whole when small, else the output of the
shipped log filter run here); nvidia-smi. Commands print what the SSH transport's own call
would get: started directly (this script already runs under the login shell, with its
environment), through that shell only where one cannot be started, so that the failure is
worded alike.

Secrets stay on the host: of the process environment only the names leave it, and the
values of the names the config allows (model locations, SGLang settings whose names do
not look secret); a withheld value reads as a bare NAME with no `=`.
"""

from __future__ import annotations

import _thread
import binascii
import contextlib
import json
import os
import posixpath
import re
import shlex
import stat
import sys
import time
import zlib

# Not `typing.TYPE_CHECKING`: importing typing would cost every host a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERSION = 1
# errno values that the SFTP server reports as "no such file" / "permission denied"
# (OpenSSH sftp-server errno_to_portable); any other error is left to a real call.
NO_FILE = (2, 20, 9, 40)  # ENOENT, ENOTDIR, EBADF, ELOOP
DENIED = (1, 13, 14)  # EPERM, EACCES, EFAULT


def _error(e: OSError) -> str | None:
    if e.errno in NO_FILE:
        return "nofile"
    if e.errno in DENIED:
        return "denied"
    return None


def load_module(name: str, source: str) -> Any:
    """A shipped stdlib module the config carries (host_exec_rules, server_address, ...):
    the doctor's own text, never a file of the host."""
    import types

    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses and the like look their module up
    exec(compile(source, name + ".py", "exec"), module.__dict__)
    return module


def redactor(rule: dict[str, Any]) -> Any:
    """redact.redact_argv, from its rule as data (prefetch_plan.argv_redaction): the launch
    words as the doctor holds them, secret values replaced by the mark."""

    def compiled(p: list[Any]) -> Any:
        return re.compile(p[0], re.IGNORECASE if p[1] else 0)

    hidden = rule["hidden"]
    assign, flag = compiled(rule["assign"]), compiled(rule["flag"])
    reference, secret = compiled(rule["reference"]), compiled(rule["secret_name"])
    # The replacement as a template (`\g<1>` keeps group 1): no closure over loop names.
    mark = hidden.replace("\\", "\\\\")
    shapes = [(compiled(s), ("\\g<1>" if s[2] else "") + mark + s[3]) for s in rule["shapes"]]
    not_secret, max_name = set(rule["not_secret"]), int(rule["max_name"])

    def is_secret(name: str) -> bool:
        name = name.strip("-'\" \t=:").lower()
        return name not in not_secret and bool(secret.search(name[:max_name]))

    def shaped(text: str) -> str:
        for pattern, replacement in shapes:
            text = pattern.sub(replacement, text)
        return text

    def redact(argv: list[str]) -> list[str]:
        out, hide_next = [], False
        for arg in argv:
            if hide_next:
                out.append(arg if reference.fullmatch(arg) else hidden)
                hide_next = False
                continue
            m = assign.fullmatch(arg)
            if m and is_secret(m.group(1)) and not reference.fullmatch(m.group(2)):
                out.append(m.group(1) + hidden)
                continue
            hide_next = bool(flag.fullmatch(arg)) and is_secret(arg)
            out.append(shaped(arg))
        return out

    return redact


def _pack(data: bytes) -> str:
    return binascii.b2a_base64(zlib.compress(data, 6), newline=False).decode("ascii")


class Bundle:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.limits = cfg["limits"]
        self.root = cfg.get("root") or "/"
        self.budget = int(self.limits["total"])
        self.files: dict[str, dict[str, Any]] = {}
        self.dirs: dict[str, Any] = {}
        self.links: dict[str, Any] = {}
        self.runs: list[dict[str, Any]] = []
        self.streams: list[dict[str, Any]] = []
        self.architectures: list[str] = []
        self._modules: dict[str, Any] = {}
        self._rules: Any = None
        # `_thread`, not `threading`: built in, so a recorded tree's bundle imports nothing.
        self.lock = _thread.allocate_lock()
        self.pending: list[Any] = []
        # Python -> the sglang versions of the dist-infos beside it (gather asks the
        # interpreter itself unless there is exactly one).
        self.dist_versions: dict[str, set[str]] = {}
        # What the finders read (finders/plan.py), as data: the same hub caches, site
        # directories and process files, never a copy kept here.
        reads = cfg.get("reads") or {}
        self.hub: dict[str, Any] = reads.get("hub") or {}
        self.site: dict[str, Any] = reads.get("site") or {}
        self.process: dict[str, Any] = reads.get("process") or {}
        self.python_word = re.compile(self.process.get("python_word") or "(?!)")

    def module(self, name: str) -> Any:
        """Compiled on first use: a recorded tree's bundle runs no interpreter and needs none."""
        if name not in self._modules:
            self._modules[name] = load_module(name, self.cfg["modules"][name])
        return self._modules[name]

    # -- paths and budget -----------------------------------------------------------------

    def path(self, host_path: str) -> str:
        """Where a host path is read from: the same join as HostSpec.path."""
        if self.root in ("", "/"):
            return host_path
        return posixpath.join(self.root, host_path.lstrip("/"))

    def _spend(self, n: int) -> bool:
        if n > self.budget:
            return False
        self.budget -= n
        return True

    # -- the transport's primitives, recorded ---------------------------------------------

    def stat(self, host_path: str) -> dict[str, Any] | None:
        """os.stat of a host path, recorded; None when it failed."""
        p = self.path(host_path)
        entry = self.files.get(p)
        if entry is not None:
            return entry if "err" not in entry else None
        try:
            st = os.stat(p)
        except OSError as e:
            kind = _error(e)
            if kind:
                self.files[p] = {"err": kind}
            return None
        entry = {"mode": st.st_mode, "size": st.st_size}
        self.files[p] = entry
        return entry

    def read(self, host_path: str, limit: int) -> bytes | None:
        """The bytes of a regular file (at most `limit`), recorded; None when unreadable."""
        p = self.path(host_path)
        entry = self.stat(host_path)
        if entry is None or not stat.S_ISREG(entry["mode"]):
            return None
        if "data" in entry:
            raw: bytes = entry["raw"]
            return raw
        if entry["size"] > limit:
            return None  # the gatherer's own read decides "too large" from the size
        data = self._read_regular(p, entry, limit)
        if data is None or len(data) > limit:
            return None  # unreadable, or a /proc file larger than it said: a real read
        packed = _pack(data)
        if not self._spend(len(packed)):
            return None
        entry["data"] = packed
        entry["raw"] = data
        return data

    def _read_regular(self, p: str, entry: dict[str, Any], limit: int) -> bytes | None:
        """At most limit + 1 bytes; never blocks on a FIFO swapped in after the stat."""
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as e:
            kind = _error(e)
            if kind:
                entry["read_err"] = kind  # stat worked, open did not: as over SFTP
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            chunks, left = [], limit + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def listdir(self, host_path: str) -> list[str] | None:
        p = self.path(host_path)
        if p in self.dirs:
            got = self.dirs[p]
            return got if isinstance(got, list) else None
        try:
            names = sorted(os.listdir(p))
        except OSError as e:
            kind = _error(e)
            if kind:
                self.dirs[p] = {"err": kind}
            return None
        if len(names) > self.limits["dir_entries"] or not self._spend(
            sum(len(n) + 4 for n in names)
        ):
            return names  # used here, but too many to carry: a real listing answers
        self.dirs[p] = names
        return names

    def readlink(self, host_path: str) -> str | None:
        p = self.path(host_path)
        try:
            target = os.readlink(p)
        except OSError as e:
            kind = _error(e)
            if kind:
                self.links[p] = {"err": kind}
            return None
        self.links[p] = target
        return target

    def run(self, argv: list[str], timeout: float) -> tuple[int, bytes] | None:
        """Run argv as the SSH transport would, with the answer it would get; recorded."""
        key = tuple(argv)
        with self.lock:
            for done in self.runs:  # asked twice (host_exec's `id -u`): one answer
                if tuple(done["argv"]) == key:
                    return done["rc"], done["raw"]
        began = time.monotonic()
        # Started directly: the transport's login shell, `sh` and `timeout` wrappers (three
        # processes a command, issue 28) change nothing a command prints, since this
        # process already runs under that shell with its environment; the deadline ends
        # the command's whole session here instead of `timeout` there. One that cannot be
        # started (missing, not executable) goes through the shell, which words the
        # failure as the transport's answer would.
        try:
            got = self._spawn(argv, timeout)
        except OSError:
            got = self._through_shell(argv, timeout)
        if got is None:
            return None
        rc, out, err = got
        if len(out) + len(err) > self.limits["command_output"]:
            return None
        packed = (_pack(out), _pack(err))
        with self.lock:
            if not self._spend(len(packed[0]) + len(packed[1])):
                return None
            done = {"argv": argv, "rc": rc, "out": packed[0], "err": packed[1]}
            done["seconds"] = round(time.monotonic() - began, 4)  # where a host's time goes
            self.runs.append({**done, "raw": out})
        return rc, out

    def _through_shell(self, argv: list[str], timeout: float) -> tuple[int, bytes, bytes] | None:
        """argv through the login shell and the bounded wrapper, as sshd runs the
        transport's command (`$SHELL -c COMMAND`, argv[0] the shell's base name)."""
        shell = os.environ.get("SHELL") or "/bin/sh"
        command = argv
        bounded = self.cfg.get("bounded_script")
        if bounded:  # wrapped as the SSH transport wraps it (transport/base.bounded_on_host)
            limit = int(timeout) + int(self.cfg.get("host_grace", 2))
            command = ["sh", "-c", bounded, "sh", str(limit), *argv]
        quoted = " ".join(shlex.quote(a) for a in command)
        try:
            return self._spawn([posixpath.basename(shell), "-c", quoted], timeout, shell)
        except OSError:
            return None

    @staticmethod
    def _spawn(
        argv: list[str], timeout: float, executable: str | None = None
    ) -> tuple[int, bytes, bytes] | None:
        """(status, stdout, stderr) of argv in a session of its own (no terminal to read or
        push into: TIOCSTI), ended with all its processes at the deadline (then None).
        OSError when it cannot be started."""
        import signal
        import subprocess  # only a live host runs commands: a recorded tree starts faster

        proc = subprocess.Popen(
            argv,
            executable=executable,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
        return proc.returncode, out, err

    def background(self, argv: list[str], timeout: float) -> None:
        """`run` in a thread: the host's slow answers (nvidia-smi, the interpreters) overlap;
        `wait` joins them before the bundle is printed."""
        import threading

        worker = threading.Thread(target=self.run, args=(argv, timeout), daemon=True)
        worker.start()
        self.pending.append(worker)

    def in_process(self, argv: list[str], answer: Any, request: str) -> None:
        """Our own stdlib script (`python3 -c SOURCE REQUEST`), answered by this process in a
        thread instead: the doctor's user either way, and the same output under any
        Python; the host is spared starting another interpreter."""
        import threading

        def work() -> None:
            try:
                out = (answer(json.loads(request)) + "\n").encode()
            except Exception:  # a real call then answers
                return
            packed = (_pack(out), _pack(b""))
            with self.lock:
                if self._spend(len(packed[0]) + len(packed[1])):
                    self.runs.append({"argv": argv, "rc": 0, "out": packed[0], "err": packed[1]})

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        self.pending.append(worker)

    def wait(self) -> None:
        for worker in self.pending:
            worker.join()
        self.pending = []

    def stream(self, script: str, source: str, args: list[str], timeout: float) -> None:
        """Run a shipped script with this interpreter; recorded as `python -c SOURCE ARGS`."""
        import subprocess

        argv = [sys.executable, "-I", "-S", "-c", source, *args]
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # no terminal to read or push into (TIOCSTI)
                capture_output=True,
                timeout=timeout,
            )
        except (OSError, subprocess.SubprocessError):
            return
        if len(proc.stdout) > self.limits["stream_output"]:
            return
        out = _pack(proc.stdout)
        err = _pack(proc.stderr[-65536:])
        if self._spend(len(out) + len(err)):
            self.streams.append(
                {
                    "script": script,
                    "args": list(args),
                    "rc": proc.returncode,
                    "out": out,
                    "err": err,
                }
            )

    # -- what gathering asks, step by step -----------------------------------------------

    def own_pids(self) -> set[int]:
        """This script and the shells above it: gone (with their cmdline) once it ends."""
        pids = set()
        pid = os.getpid()
        for _ in range(4):
            pids.add(pid)
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    pid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                break
            if pid <= 1:
                break
        return pids

    def candidates(self) -> list[int]:
        cfg = self.cfg
        if cfg.get("pid") is not None:
            return [int(cfg["pid"])]
        if cfg.get("pgrep"):
            got = self.run(cfg["pgrep"], 10)
            if got is not None and got[0] in (0, 1):
                return [int(x) for x in got[1].split() if x.isdigit()]
        entries = self.listdir("/proc") or []
        return [int(e) for e in entries if e.isdigit()]

    def launcher_index(self, argv: list[str]) -> int | None:
        for i, arg in enumerate(argv):
            if arg.endswith(tuple(self.cfg["launchers"])):
                return i + 1
            if arg.endswith("sglang") and i + 1 < len(argv) and argv[i + 1] == "serve":
                return i + 2
        return None

    def model_refs(self, argv: list[str]) -> list[str]:
        """Values of the model flags (and of their argparse abbreviations) in an argv."""
        flags = self.cfg["model_flags"]
        refs = []
        for i, arg in enumerate(argv):
            name, eq, value = arg.partition("=")
            if len(name) < 7 or not any(f.startswith(name) for f in flags):
                continue
            if eq:
                refs.append(value)
            elif i + 1 < len(argv):
                refs.append(argv[i + 1])
        return refs

    def environ(self, pid: int, limit: int) -> dict[str, str]:
        """The process environment with only allowed values; kept as the answer to its read."""
        p = self.path(f"/proc/{pid}/environ")
        entry = self.stat(f"/proc/{pid}/environ")
        if entry is None:
            return {}
        data = self._read_regular(p, entry, limit)
        if data is None or len(data) > limit:
            return {}
        keep = set(self.cfg["env_values"])
        prefixes = tuple(self.cfg["env_value_prefixes"])
        secret = re.compile(self.cfg["secret_name"], re.IGNORECASE)
        env, shown = {}, []
        for item in data.split(b"\0"):
            if not item:
                continue
            key, eq, value = item.partition(b"=")
            name = key.decode("utf-8", "replace")
            allowed = name in keep or (name.startswith(prefixes) and not secret.search(name))
            if eq and allowed:
                env[name] = value.decode("utf-8", "replace")
                shown.append(item)
            else:
                shown.append(key)
        text = b"\0".join(shown) + (b"\0" if shown else b"")
        packed = _pack(text)
        if self._spend(len(packed)):
            entry["data"] = packed
            entry["raw"] = text
            entry["redacted"] = True
        return env

    def hub_dirs(self, env: dict[str, str]) -> list[str]:
        """finders/models.hub_dirs, from the same table (plan.HUB)."""
        hub = self.hub
        dirs = [env[key] for key in hub["cache_env"] if key in env]
        for home in (env.get(hub["home_env"]), self.cfg.get("hf_home")):
            if home:
                dirs.append(posixpath.join(home, hub["home_cache"]))
        user = env.get(hub["user_env"], hub["user_default"])
        dirs.append(posixpath.join(user, hub["user_cache"]))
        return list(dict.fromkeys(dirs))

    def _config_file(self, path: str) -> None:
        data = self.read(path, self.limits["config"])
        # finders/drafter_files.py reads these beside a drafter's config.json (bounded there
        # too); read beside every model's: the bundle does not know which one is the drafter.
        folder = posixpath.dirname(path) or "."
        for name, limit in self.cfg.get("model_side_files", []):
            self.read(posixpath.join(folder, name), min(int(limit), self.limits["config"]))
        try:
            archs = json.loads(data)["architectures"] if data is not None else []
        except (ValueError, KeyError, TypeError):
            return
        if isinstance(archs, list):
            self.architectures += [a for a in archs if isinstance(a, str)]

    def config(self, model: str, hubs: list[str]) -> None:
        """The reads of finders/models.config_path and the config.json it leads to."""
        if model.endswith(".json"):
            self._config_file(model)
            return
        local = posixpath.join(model, "config.json")
        hub = self.hub
        if not re.match(hub["repo_id"], model) or model.startswith((".", "/")):
            self._config_file(local)
            return
        entry = self.stat(local)
        if entry is not None and stat.S_ISREG(entry["mode"]):
            self._config_file(local)
            return
        org, name = model.split("/", 1)
        for cache in hubs:
            repo = posixpath.join(cache, hub["repo_dir"].format(org=org, name=name))
            snapshots = self.listdir(posixpath.join(repo, hub["snapshot_dir"]))
            if snapshots is None:
                continue
            ref = self.read(posixpath.join(repo, hub["ref"]), int(hub["ref_bytes"]))
            rev = ref.decode("ascii", "replace").strip() if ref is not None else None
            if rev not in snapshots:
                rev = snapshots[-1] if snapshots else None
            if rev:
                self._config_file(posixpath.join(repo, hub["snapshot_dir"], rev, "config.json"))
                return

    def dist_info(self, python: str) -> None:
        """The listings of finders/version.dist_infos, plus the files found there.

        Every site directory is listed, as gather does: two sglang dist-infos are ambiguous."""
        plan = self.site
        lib = posixpath.join(posixpath.dirname(posixpath.dirname(python)), plan["lib"])
        versions = self.dist_versions.setdefault(python, set())
        listed = [d for d in self.listdir(lib) or [] if d.startswith(plan["python_prefix"])]
        for py in listed[: int(plan["max_pythons"])]:
            for sub in plan["subdirs"]:
                site = posixpath.join(lib, py, sub)
                for entry in self.listdir(site) or []:
                    m = re.fullmatch(plan["sglang_dist_info"], entry)
                    if m is None:
                        continue
                    versions.add(m.group(1))
                    self.read(posixpath.join(site, entry, "METADATA"), self.limits["file"])
                    for rel in self.cfg.get("site_files", []):
                        self.read(posixpath.join(site, rel), self.limits["source"])
                    self.model_sources(site)

    def model_sources(self, site: str) -> None:
        """The installed model modules of the served architectures, and the sglang model
        modules they import (one level: base classes), as gather.capture_hook reads them."""
        package = self.cfg.get("models_package", "sglang.srt.models")
        todo = [
            m for arch in self.architectures for m in self.cfg.get("arch_modules", {}).get(arch, [])
        ]
        done: set[str] = set()
        for depth in (0, 1):
            follow: list[str] = []
            for module in todo:
                if module in done or len(done) >= self.limits["source_files"]:
                    continue
                done.add(module)
                path = posixpath.join(site, *package.split("."), *module.split(".")) + ".py"
                text = self.read(path, self.limits["source"])
                if text is not None and depth == 0:
                    prefix = ("from " + package + ".").encode()
                    for line in text.splitlines():
                        if line.startswith(prefix):
                            follow.append(line[len(prefix) :].split()[0].decode("ascii", "replace"))
            todo = follow

    def log(self, path: str) -> bool:
        """Read the log, or filter it here when large; True when filtered."""
        entry = self.stat(path)
        if entry is None or not stat.S_ISREG(entry["mode"]):
            return False
        filt = self.cfg["log_filter"]
        if entry["size"] < filt["min_bytes"]:
            self.read(path, filt["min_bytes"])
            return False
        self.stream(filt["script"], filt["source"], [self.path(path)], filt["timeout"])
        return True

    def gather(self) -> None:
        cfg = self.cfg
        if cfg.get("nvidia_smi"):
            self.background(cfg["nvidia_smi"], 20)  # often the slowest answer: started first
        mine = self.own_pids() if not cfg.get("recorded") else set()
        servers: list[tuple[int, list[str], int, dict[str, str]]] = []
        envs: list[dict[str, str]] = [{}]
        pythons: list[str] = []
        refs: list[str] = list(cfg.get("models", []))
        proc_files = self.process["files"]
        for pid in self.candidates()[: self.limits["processes"]]:
            if pid in mine:
                self.files[self.path(f"/proc/{pid}/cmdline")] = {"err": "nofile"}
                continue
            cmdline = self.read(f"/proc/{pid}/cmdline", proc_files["cmdline"])
            if cmdline is None or b"sglang" not in cmdline:
                continue
            argv = [a.decode("utf-8", "replace") for a in cmdline.split(b"\0")]
            if argv and argv[-1] == "":
                argv.pop()  # as facts/launch.parse_cmdline reads it
            # The rest the finders read of a server process (its owner in `status`, its
            # container or unit in `cgroup`), in the plan's order.
            for name, limit in proc_files.items():
                if name != "cmdline":
                    self.read(f"/proc/{pid}/{name}", limit)
            env = self.environ(pid, self.process["environ"])
            envs.append(env)
            start = self.launcher_index(argv)
            if start is None:
                continue
            servers.append((pid, argv, start, env))
            for fd in self.process["log_fds"]:
                self.readlink(f"/proc/{pid}/fd/{fd}")
            pythons += [a for a in argv[: max(start - 1, 0)] if self.python_word.search(a)][:1]
            refs += self.model_refs(argv[start:])
        if servers:
            self.read("/proc/1/cgroup", self.limits["file"])  # this machine's own container
        # finders/vllm.py looks only where no SGLang server is found.
        vllm = None if servers else self.vllm_reads(mine, envs, pythons, refs)
        words = self.launch_file_words()
        refs += self.model_refs(words)
        pythons += [w for w in words if self.python_word.search(w)]
        hubs = []
        for env in envs:
            hubs += [h for h in self.hub_dirs(env) if h not in hubs]
        for model in dict.fromkeys(r for r in refs if r):
            self.config(model, hubs)
        for python in dict.fromkeys(p for p in [cfg.get("python"), *pythons] if p):
            if python.startswith("/"):
                self.dist_info(python)
        self.ask_servers(servers, vllm)
        self.wait()

    def ask_servers(self, servers: list[Any], vllm: Any) -> None:
        """The log, the commands, and what gathering asks the one server found."""
        cfg = self.cfg
        log = self.server_log(servers[0][0] if servers else vllm[0] if vllm else None)
        streamed = self.log(log) if log else False
        for argv in cfg.get("commands", []):
            self.run(argv, 10)
        if cfg.get("gpu_capture"):
            self.read(cfg["gpu_capture"], self.limits["file"])
        # One server, or the one the doctor names: what gather.find_server settles on.
        server = servers[0] if len(servers) == 1 else None
        if streamed and cfg.get("log_filter_python"):
            self.ask_log_filter_python(None if cfg.get("recorded") else server)
        if server is not None and not cfg.get("recorded"):
            self.ask_server(*server)
        if vllm is not None and not cfg.get("recorded"):
            self.ask_vllm(vllm[0], vllm[1][vllm[2] :])

    # -- a vLLM server (finders/vllm.py), where no SGLang server runs ---------------------

    def vllm_start(self, argv: list[str]) -> Any:
        """facts/vllm_launch.vllm_args_start: after `vllm serve`, or the API server module."""
        spec = self.cfg["vllm"]
        for i, arg in enumerate(argv):
            if posixpath.basename(arg) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
                return i + 2
            if arg == spec["module"] or arg.endswith(spec["module_file"]):
                return i + 1
        return None

    def vllm_reads(self, mine: Any, envs: list[Any], pythons: list[str], refs: list[str]) -> Any:
        """The one vLLM server's reads (its environment, log fds, site and model files: added
        to `envs`, `pythons`, `refs`); None where none is found."""
        if not self.cfg.get("vllm"):
            return None
        vllm = self.vllm_server(mine)
        if vllm is None:
            return None
        pid, argv, start, env = vllm
        envs.append(env)
        for fd in self.process["log_fds"]:
            self.readlink(f"/proc/{pid}/fd/{fd}")
        pythons.extend(self.vllm_bins(argv, start))
        refs.extend(self.vllm_models(argv[start:]))
        return vllm

    def vllm_server(self, mine: Any) -> Any:
        """finders/vllm.find_vllm's reads: its pgrep, each candidate's command line, and the
        one vLLM server's environment (the pid given, else the only one)."""
        spec = self.cfg["vllm"]
        if self.cfg.get("recorded"):
            # A recorded tree's processes are its /proc (finders/pids.process_ids).
            pids = [int(e) for e in self.listdir("/proc") or [] if e.isdigit()]
        else:
            got = self.run(spec["pgrep"], 10)
            if got is None or got[0] not in (0, 1):
                return None
            pids = [int(x) for x in got[1].split() if x.isdigit()]
        found = []
        for pid in pids[: self.limits["processes"]]:
            if pid in mine:
                self.files[self.path(f"/proc/{pid}/cmdline")] = {"err": "nofile"}
                continue
            cmdline = self.read(f"/proc/{pid}/cmdline", spec["cmdline_bytes"])
            if cmdline is None:
                continue
            argv = [a.decode("utf-8", "replace") for a in cmdline.rstrip(b"\0").split(b"\0")]
            start = self.vllm_start(argv)
            if start is not None:
                found.append((pid, argv, start))
        if self.cfg.get("pid") is not None:
            found = [s for s in found if s[0] == int(self.cfg["pid"])]
        if len(found) != 1:
            return None
        pid, argv, start = found[0]
        return pid, argv, start, self.environ(pid, self.process["environ"])

    def vllm_bins(self, argv: list[str], start: int) -> list[str]:
        """The launch's Python and its `vllm` script, by path (finders/vllm._bin_dirs)."""
        words = [self.python_in(argv[: max(start - 1, 0)])]
        if start >= 2 and argv[start - 1] == "serve":
            words.append(argv[start - 2])
        return [w for w in words if w and w.startswith("/")]

    def vllm_models(self, args: list[str]) -> list[str]:
        """The target (`--model`, else the positional) and the draft (`--spec-model`, the
        `--speculative-config` JSON's or dotted `model`) a vLLM launch names."""
        refs = [args[0]] if args and not args[0].startswith("-") else []
        for i, arg in enumerate(args):
            name, eq, value = arg.partition("=")
            if not eq:
                value = args[i + 1] if i + 1 < len(args) else ""
            name = name.split(".", 1)[0].replace("_", "-") + name[len(name.split(".", 1)[0]) :]
            if name in ("--model", "--spec-model", "--speculative-config.model"):
                refs.append(value)
            elif name in ("--speculative-config", "-sc"):
                try:
                    config = json.loads(value)
                except (ValueError, RecursionError):
                    continue
                if isinstance(config, dict) and isinstance(config.get("model"), str):
                    refs.append(config["model"])
        return refs

    def ask_vllm(self, pid: int, args: list[str]) -> None:
        """The live vLLM server's /version and /metrics, at the address finders/vllm.py asks
        (none on a Unix socket)."""
        http, spec = self.cfg.get("server_http"), self.cfg["vllm"]
        where = self.module("server_address")
        if not http or where.unix_socket(args):
            return
        address = where.server_address(args, None, spec["port"])
        request = where.http_request(address, pid, spec["ops"], spec["timeout"])
        self.in_process([*http["head"], request], self.module("server_http").answer, request)

    def python_in(self, words: list[str]) -> str | None:
        """The first interpreter word (facts/launch.PYTHON_WORD, from the plan)."""
        return next((w for w in words if self.python_word.search(w)), None)

    def launch_file_words(self) -> list[str]:
        """The declared launch file's words (read and kept as an answer); none without one."""
        if not self.cfg.get("launch_file"):
            return []
        text = self.read(self.cfg["launch_file"], self.limits["file"])
        if text is None:
            return []
        # Any shell, unit or compose spelling: split on quotes, `=` and blanks.
        return re.split(r"[\s\"'=\\]+", text.decode("utf-8", "replace"))

    def server_log(self, pid: int | None) -> str | None:
        """The declared log, else the server's stdout or stderr when that is a file."""
        log: str | None = self.cfg.get("log_path")
        if not log and pid is not None:
            for fd in self.process["log_fds"]:
                target = self.links.get(self.path(f"/proc/{pid}/fd/{fd}"))
                if isinstance(target, str) and target.startswith("/") and target[:5] != "/dev/":
                    log = target
                    break
        return log

    # -- what gathering then asks the host's interpreters --------------------------------

    def rules(self) -> Any:
        """host_exec_rules over this host: the same questions, answered and recorded here."""
        if self._rules is None:
            rules = self.module("host_exec_rules")
            bundle = self

            class Questions(rules.HostQuestions):  # type: ignore[misc,name-defined]
                def run(self, argv: list[str], timeout: float) -> tuple[int, bytes]:
                    got = bundle.run(argv, timeout)
                    if got is None:
                        raise rules.Refused(f"{argv[0]}: no answer")
                    return got

                def status(self, pid: int) -> str:
                    data = bundle.read(f"/proc/{pid}/status", bundle.limits["file"])
                    if data is None:
                        raise rules.Refused(f"/proc/{pid}/status: unreadable")
                    return data.decode("ascii", "replace")

            self._rules = rules.Rules(Questions())
        return self._rules

    def prefix(self, python: str | None, pid: int | None, env: dict[str, str] | None) -> Any:
        """The argv that starts `python` as host_exec would, or None where it must not run."""
        rules = self.module("host_exec_rules")
        try:
            return self.rules().prefix(python, pid, env)
        except (rules.Refused, ValueError, OSError):
            return None

    def ask_log_filter_python(self, server: Any) -> None:
        """The system Python gather would vet for the shipped log filter (its questions)."""
        rules = self.module("host_exec_rules")
        with contextlib.suppress(rules.Refused, ValueError, OSError):
            self.rules().system_python(server[0] if server else None)

    def ask_server(self, pid: int, argv: list[str], start: int, env: dict[str, str]) -> None:
        """SGLang's own parse of the launch (the server's Python, as its owner, only where
        host_exec's rules allow it) and the live server's HTTP answers: as gather asks them."""
        cfg = self.cfg
        native = cfg.get("native")
        parsed_by = None
        if native:
            head = argv[: max(start - 1, 0)]
            python = self.python_in(head) or cfg.get("python")
            passed = {k: env[k] for k in native["env_keys"] if k in env}
            prefix = self.prefix(python, pid, passed)
            if prefix is not None:
                # As gathering asks it: of the launch words with secret values hidden.
                rule = native.get("redact")
                server_argv = (redactor(rule)(argv) if rule else argv)[start:]
                self.background([*prefix, "-c", native["source"], json.dumps(server_argv)], 120)
                parsed_by = python
        query = cfg.get("version_query")
        python = cfg.get("python") or self.python_in(argv[: start - 1])
        # The parse's answer carries the installed version of that interpreter: gathering
        # asks the query only of another one (gather._asker), so the bundle does too.
        asked = python != parsed_by
        if query and python and asked and len(self.dist_versions.get(python, ())) != 1:
            # gather._version_by_running: no single sglang dist-info beside the Python.
            passed = {k: env[k] for k in native["env_keys"] if k in env} if native else {}
            prefix = self.prefix(python, pid, passed)
            if prefix is not None:
                self.background([*prefix, "-c", query], 30)
        http = cfg.get("server_http")
        if http:
            where = self.module("server_address")
            address = where.server_address(argv, http.get("health_url"))
            request = where.http_request(address, pid, http["ops"], http["timeout"])
            self.in_process([*http["head"], request], self.module("server_http").answer, request)

    def answer(self, started: float) -> dict[str, Any]:
        files = {}
        for p, e in self.files.items():
            files[p] = {k: v for k, v in e.items() if k != "raw"}
        runs = [{k: v for k, v in r.items() if k != "raw"} for r in self.runs]
        return {
            "version": VERSION,
            "python": sys.executable,
            "files": files,
            "dirs": self.dirs,
            "links": self.links,
            "runs": runs,
            "streams": self.streams,
            "seconds": round(time.monotonic() - started, 4),
        }


def main(argv: list[str]) -> int:
    started = time.monotonic()
    cfg = json.loads(argv[1])
    bundle = Bundle(cfg)
    bundle.gather()
    sys.stdout.write(json.dumps(bundle.answer(started), separators=(",", ":")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
