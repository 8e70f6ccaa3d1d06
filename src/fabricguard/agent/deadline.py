"""Checks that can block for ever run where they can be abandoned: one daemon thread per run, never joined.

A read below ``--root`` (a hung Lustre or NFS mount, a FIFO that appeared after the ``stat``), or a wedged
NVML call, can block in the kernel for ever; Python cannot interrupt it. ``asyncio.to_thread`` would not do:
its executor's threads are joined when the event loop closes and at interpreter exit, so ``agent --once``
would never exit and SIGTERM would not stop the loop. :class:`CheckRun` runs the check groups one by one on
a daemon thread of its own, records which group it is in and what each finished group found; when the
deadline passes, the caller takes what finished, a failed check naming the group that did not, and a
failed "not run" for each group after it. The thread is left behind (a daemon thread does not keep the
process alive), and the agent starts no second one while it is still stuck, so hung threads never pile up.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable

from fabricguard.probes.host import CheckGroup
from fabricguard.probes.result import Check, Status


class CheckRun:
    """One run of the check groups that ``plan`` returns (``plan`` itself may block: it loads NVML)."""

    def __init__(self, plan: Callable[[], list[CheckGroup]], first: str) -> None:
        self.plan = plan
        self.current: str | None = first  # the group running now (``first`` while ``plan`` runs)
        self.pending: list[str] = []  # the groups after the current one
        self.checks: list[Check] = []  # what the finished groups found
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fabricguard-checks", daemon=True)
        self._future: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        try:
            groups = self.plan()
            self.pending = [name for name, _ in groups]
            for name, run in groups:
                self.current = name
                self.pending.pop(0)
                self.checks.extend(run())
            self.current = None
        except BaseException as exc:  # handed to the caller: a failed check, never a dead thread unnoticed
            self.error = exc
        finally:
            self.finished.set()
            if self._loop is not None and self._future is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
                    self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    async def wait(self, timeout: float) -> bool:
        """Start and wait up to ``timeout`` seconds; True when every group finished in time."""
        self._loop = asyncio.get_running_loop()
        self._future = self._loop.create_future()
        self._thread.start()
        try:
            await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except TimeoutError:
            return self.finished.is_set()
        return True

    def abandoned(self, timeout: float) -> list[Check]:
        """What this run found, when it did not finish within ``timeout``: each finished group's checks, the
        group that hung as failed, and every group after it as failed (not run)."""
        hung = self.current or "agent.run"
        out = list(self.checks)
        out.append(Check(hung, Status.failed,
                         f"did not finish within --check-timeout {timeout:g} s and was abandoned (a read below "
                         "--root or an NVML call that does not return); nothing it would check is proven",
                         {"error": True, "deadline": True}))
        out += [Check(name, Status.failed, f"not run: {hung} before it did not finish", {"error": True})
                for name in self.pending]
        return out

    def still_hung(self) -> list[Check]:
        """The result of a run that starts while this earlier one is still stuck (no second thread is started)."""
        age = time.monotonic() - self.started
        hung = self.current or "agent.run"
        return [Check(hung, Status.failed,
                      f"still has not finished {age:.0f} s after it started (an earlier run); no check runs until "
                      "it returns, and the node's fabric is unproven meanwhile", {"error": True, "deadline": True})]
