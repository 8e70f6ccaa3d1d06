"""One command's work against the cluster, the same way for every command that reads or writes it: the
kubeconfig checked before anything is sent, one connection under the command's permission table, closed after,
and every failure one line on stderr with what to do next. An API server that cannot be reached (or a kubeconfig
that cannot work) is input unusable, exit 3; one that answered no exits ``refused_code``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fabricguard.console import fail
from fabricguard.exitcodes import EXIT_INPUT
from fabricguard.kube import Kube, KubeError, unreachable
from fabricguard.kubeconfig import kubeconfig_problem
from fabricguard.rbac import Permissions

T = TypeVar("T")


def run_on_cluster(kubeconfig: str | None, context: str | None, permissions: Permissions,
                   work: Callable[[Kube], Awaitable[T]], *, kubeconfig_hint: str, needs: str,
                   refused_code: int = EXIT_INPUT) -> T:
    """``await work(kube)`` on a connection checked against ``permissions``; ``needs`` names, in the hint of a
    refusal, the permissions the command needs."""
    problem = kubeconfig_problem(kubeconfig, context)
    if problem:
        fail(problem, hint=kubeconfig_hint)

    async def go() -> T:
        kube = await Kube.connect(kubeconfig, context, permissions=permissions)
        try:
            return await work(kube)
        finally:
            await kube.close()

    try:
        return asyncio.run(go())
    except KubeError as exc:
        if unreachable(exc):
            fail(f"cannot reach the cluster: {exc}", hint="check --kubeconfig/--context and that the API server "
                 "answers", code=EXIT_INPUT)
        fail(f"the API server refused: {exc}", hint=needs, code=refused_code)
