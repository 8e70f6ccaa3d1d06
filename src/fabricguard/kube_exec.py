"""The Kubernetes exec stream (``pods/<name>/exec`` over a websocket), read frame by frame (pure).

Read from the Kubernetes source: ``apimachinery/pkg/util/remotecommand/constants.go`` (the subprotocols, the
stream numbers, ``NonZeroExitCode`` and the ``ExitCode`` cause), ``pkg/kubelet/cri/streaming/remotecommand``
(``websocket.go``: every binary message is one stream byte then the data; an empty message on the lowest
writable stream says the stream is open; ``v4WriteStatusFunc``: the error stream carries the command's
``metav1.Status`` as JSON, written once, then the connection closes) and ``exec.go`` (a non-zero exit is a
``Failure`` with reason ``NonZeroExitCode`` and a cause ``{"reason": "ExitCode", "message": "<code>"}``; any other
failure, a container that is not running among them, is a ``Failure`` with its message).

``v5.channel.k8s.io`` (Kubernetes 1.30+, the API server's websocket translator) adds only the client's CLOSE
signal (stream 255) for stdin; without stdin the two read the same. Both are offered, v5 first; the legacy
unversioned protocols (whose error stream is plain text) are not.

:class:`ExecStream` collects one command's output within caps (a tenant's container writes what it likes:
stdout stops at ``max_bytes``, stderr keeps its tail) and says what the status means: :meth:`outcome`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
SUBPROTOCOLS = (V5, V4)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_STATUS = 64 << 10  # a Status is a few hundred bytes; a longer error stream is not one
STDERR_TAIL = 4096


class ExecProtocolError(ValueError):
    """The server spoke something other than the exec stream (a text message, an unknown stream, a bad
    status)."""


@dataclass
class ExecStream:
    """One exec's streams as they arrive: stdout up to ``max_bytes``, stderr's tail, the status."""

    max_bytes: int
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    status_raw: bytearray = field(default_factory=bytearray)
    status: dict[str, object] | None = None
    over: bool = False  # stdout passed max_bytes: reading stopped there

    def feed(self, message: bytes) -> bool:
        """Take one binary message; True when the exec is over (its status came, or stdout passed the cap)."""
        if not message:
            raise ExecProtocolError("an empty message (no stream byte)")
        stream, data = message[0], message[1:]
        if stream == STDOUT:
            room = self.max_bytes - len(self.stdout)
            self.stdout += data[:max(room, 0)]
            if len(data) > room:
                self.over = True
                return True
        elif stream == STDERR:
            self.stderr += data
            del self.stderr[:-STDERR_TAIL]
        elif stream == ERROR:
            self.status_raw += data
            if len(self.status_raw) > MAX_STATUS:
                raise ExecProtocolError(f"the error stream passed {MAX_STATUS} bytes without a status")
            if not data:
                return False  # the "stream open" notice when neither stdout nor stderr was asked for
            try:
                doc = json.loads(bytes(self.status_raw))
            except ValueError:
                return False  # a status split over messages: wait for the rest (or the close says it is cut)
            if not isinstance(doc, dict) or "status" not in doc:
                raise ExecProtocolError(f"the error stream holds no Status: {bytes(self.status_raw[:120])!r}")
            self.status = doc
            return True
        elif stream in (STDIN, RESIZE, CLOSE):
            raise ExecProtocolError(f"the server wrote on stream {stream}, which only a client writes")
        else:
            raise ExecProtocolError(f"a message on unknown stream {stream}")
        return False

    def stderr_text(self, limit: int = 300) -> str:
        return bytes(self.stderr[-limit:]).decode("utf-8", "replace").strip()

    def outcome(self) -> tuple[int | None, str]:
        """``(exit code, what the status says)``: ``(0, "")`` on Success; the exit code of ``NonZeroExitCode``;
        ``(None, message)`` for any other failure (the command did not run: no such container, ...)."""
        st = self.status or {}
        if st.get("status") == "Success":
            return 0, ""
        message = str(st.get("message") or "") or "the command failed (no message)"
        if st.get("reason") == "NonZeroExitCode":
            details = st.get("details")
            causes = details.get("causes") if isinstance(details, dict) else None
            for cause in causes if isinstance(causes, list) else ():
                if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
                    try:
                        return int(str(cause.get("message"))), message
                    except ValueError:
                        break
        return None, message
