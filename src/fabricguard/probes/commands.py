"""CLI of the probes: ``fabricguard probe collective|storage|host`` and the main job, ``fabricguard validate``.

Nothing here imports torch: the collective probe imports it inside its rank processes only, so
``fabricguard --help`` stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from fabricguard.console import EXIT_INPUT, console, err_console, fail, paragraph, print_json, say, verdict_line
from fabricguard.options import JSON_ALIAS, OUT_ALIAS, Format, format_option, output_path, profile_option, wants_json
from fabricguard.userfiles import SourceError

if TYPE_CHECKING:
    from fabricguard.profile import PlatformProfile, Pool

probe_app = typer.Typer(no_args_is_help=True, help="Probes that prove the transport, the storage path and the node.")


def _profile_and_pool(
    profile: str | None, pool: str | None, *, local_default: bool = True
) -> tuple[PlatformProfile | None, Pool | None]:
    from fabricguard.profile import UnknownPoolError, embedded_profile
    from fabricguard.profile.commands import profile_or_exit

    prof = profile_or_exit(profile) if profile else (embedded_profile("local") if local_default else None)
    if prof is None:
        return None, None
    try:
        return prof, prof.pool(pool)
    except UnknownPoolError as e:
        fail(str(e), hint="pass --pool NAME")


def _output_dir(path: Path | None) -> Path | None:
    """-o/--output as a writable folder (created when absent); a file, a FIFO or no permission exit 3."""
    if path is None:
        return None
    from fabricguard.userfiles import output_dir

    try:
        return output_dir(path)
    except SourceError as exc:
        fail(f"-o/--output {exc}")


def _sizes(b: str, e: str, f: float) -> list[int]:
    from fabricguard.probes.bw import parse_size, size_list

    try:
        return size_list(parse_size(b), parse_size(e), f)
    except ValueError as err:
        fail(str(err), hint="e.g. -b 1M -e 64M -f 2")


@probe_app.command("collective")
def collective_cmd(
    local_ranks: int = typer.Option(None, "--local-ranks", min=1,
                                    help="Spawn N ranks here (default: torchrun env, else 2)."),
    minbytes: str = typer.Option("1M", "-b", "--minbytes", help="Smallest message size (nccl-tests -b)."),
    maxbytes: str = typer.Option("64M", "-e", "--maxbytes", help="Largest message size (nccl-tests -e)."),
    stepfactor: float = typer.Option(2.0, "-f", "--stepfactor", help="Size multiplier (nccl-tests -f)."),
    warmup: int = typer.Option(5, "-w", "--warmup-iters", help="Warm-up iterations per size."),
    iters: int = typer.Option(20, "-n", "--iters", help="Timed iterations per size."),
    collectives: str = typer.Option(
        "all_reduce", "-c", "--collectives", help="Comma list: all_reduce,all_gather,reduce_scatter."
    ),
    dtype: str = typer.Option("float", "-d", "--datatype", help="float, half, bfloat16 or double."),
    backend: str = typer.Option("auto", "--backend", help="auto (NCCL with CUDA, else gloo), nccl or gloo."),
    check: bool = typer.Option(True, "--check/--no-check", help="Verify every result (count wrong elements)."),
    output: Path = typer.Option(
        None, "--output", "-o", help="Directory for per-rank NCCL logs (default: a new temp dir)."
    ),
    out: Path = OUT_ALIAS,
    profile: str = profile_option(help="Platform profile to judge against ('local': the embedded one)."),
    pool: str = typer.Option(None, "--pool", help="Pool of the profile (default: its defaultPool)."),
    force_net: bool = typer.Option(
        None, "--force-net/--no-force-net", help="Set NCCL_NET to the pool's net (default: on for fabric pools)."
    ),
    timeout: float = typer.Option(600, "--timeout", help="Seconds before spawned ranks are stopped."),
    rails: bool = typer.Option(False, "--rails", help="Then time each rail alone (local rank k of every node: "
                               "GPU k and its NIC) at the largest size, and name each rail's NIC per node."),
    local_world: int = typer.Option(0, "--local-world", min=0, help="Ranks per node for --rails (default: the "
                                    "launcher's LOCAL_WORLD_SIZE; with --local-ranks it splits them into nodes)."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Time collectives like nccl-tests, classify the transport from NCCL's own logs and judge it."""
    log_dir = _output_dir(output_path(output, out))
    as_json = wants_json(fmt, as_json)
    from fabricguard.probes.bw import Row, TableStream, expectation_for
    from fabricguard.probes.collective import CollectiveConfig, run_probe
    from fabricguard.probes.result import Status, exit_code

    _prof, p = _profile_and_pool(profile, pool, local_default=False)
    expect = expectation_for(p) if p is not None else None
    net = None
    if p is not None and (p.fabric.has_fabric if force_net is None else force_net):
        net = p.fabric.effective_nccl_net
    cfg = CollectiveConfig(
        collectives=[c.strip() for c in collectives.split(",") if c.strip()],
        sizes=_sizes(minbytes, maxbytes, stepfactor),
        warmup=warmup,
        iters=iters,
        dtype=dtype,
        backend=backend,
        check=check,
        log_dir=str(log_dir) if log_dir else "",
        nccl_net=net,
        rails=rails,
        local_world=local_world,
    )
    try:
        cfg.validate()
    except ValueError as e:
        fail(str(e))
    stream = TableStream()

    def on_row(row: Row) -> None:  # rows print as they finish, like nccl-tests
        for line in stream.add(row):
            console.print(line, markup=False, highlight=False, soft_wrap=True)

    if not as_json:
        say(f"# fabricguard collective probe: {local_ranks or 'launcher'} ranks, backend {backend}")
        if net:
            say(f"# NCCL_NET={net} forced (pool {p.name if p else ''}): a missing fabric fails loudly")
    res = run_probe(cfg, local_ranks=local_ranks, expect=expect, timeout_s=timeout,
                    on_row=None if as_json else on_row)
    wrong = sum(r.wrong for r in res.rows)
    verdict = res.judgement.status if res.judgement else (Status.failed if res.failed or wrong else Status.passed)
    if as_json:
        print_json({"verdict": str(verdict), **res.to_dict()}, "CollectiveProbe")
    else:
        for line in stream.close():
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        kept = "read and removed (-o/--output DIR keeps them)" if res.log_dir_removed else "kept"
        say(f"# {res.backend}, {res.world_size} ranks; logs in {res.log_dir} {kept}")
        console.print(f"# transport: {res.transport} ({res.transport_why})", markup=False)
        for r in res.rails:  # --rails: each rail alone, its NIC per node
            nics = ", ".join(f"{m.get('node')} {m.get('nic') or '?'}" for m in r.get("members") or ())
            console.print(f"# rail {r['rail']}: {r['busbw_gbps']:.2f} GB/s busbw alone ({nics})", markup=False)
        if res.failed:
            say(("failed:", "bold red"), f" {res.error}", err=True)
        if res.judgement:
            for c in res.judgement.checks:
                console.print(f"# {c.name}: {c.status}: {c.detail}", markup=False)
            console.print(f"# verdict: {res.judgement.status}", markup=False)
    raise typer.Exit(exit_code(verdict))


@probe_app.command("storage")
def storage_cmd(
    path: Path = typer.Option(..., "--path", help="Directory to test (the probe works in its own subdirectory)."),
    ranks: int = typer.Option(2, "--ranks", help="Writer processes sharing one directory."),
    size: str = typer.Option("256M", "--size", help="Checkpoint bytes per rank."),
    block: str = typer.Option("4M", "--block-size", help="Write/read block size."),
    small_files: int = typer.Option(1000, "--small-files", help="Small files per rank for create/stat/unlink."),
    engine: str = typer.Option("auto", "--engine", help="auto (fio when installed), fio or builtin."),
    profile: str = profile_option(help="Profile: a pool with Lustre storage expects lustre."),
    pool: str = typer.Option(None, "--pool"),
    expect_fstype: str = typer.Option(None, "--expect-fstype", help="Filesystem type the path must be on."),
    keep: bool = typer.Option(False, "--keep", help="Leave the files for inspection."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Check the path's filesystem and Lustre health, then measure checkpoint and small-file workloads."""
    as_json = wants_json(fmt, as_json)
    from fabricguard.probes.bw import parse_size
    from fabricguard.probes.result import exit_code
    from fabricguard.probes.storage import StorageConfig, StorageRefused, probe_storage

    prof, p = _profile_and_pool(profile, pool, local_default=False)
    if expect_fstype is None and prof is not None and p is not None and prof.spec.storage.lustre and p.lustre:
        expect_fstype = "lustre"
    if engine not in ("auto", "fio", "builtin"):
        fail("--engine must be auto, fio or builtin")
    try:
        cfg = StorageConfig(
            path=str(path),
            ranks=ranks,
            file_size=parse_size(size),
            block_size=parse_size(block),
            small_files=small_files,
            engine=engine,
            expect_fstype=expect_fstype,
            keep=keep,
        )
        if p is not None:
            cfg.baseline_write_mbps = p.baseline.storageWriteMBps
            cfg.baseline_read_mbps = p.baseline.storageReadMBps
            cfg.floor_fraction = p.baseline.floorFraction
        rep = probe_storage(cfg)
    except StorageRefused as e:
        fail(f"refusing to run: {e}", code=EXIT_INPUT)
    except ValueError as e:
        fail(str(e))
    if as_json:
        print_json({"verdict": str(rep.status), **rep.to_dict()}, "StorageProbe")
    else:
        from fabricguard.probes.report import print_checks

        verdict_line(str(rep.status), f"probe storage {path}", f"engine {rep.engine}")
        print_checks([("", str(c.status), c.name, c.detail) for c in rep.checks])
        m = rep.metrics
        for ph in ("write", "read"):
            if ph in m:
                say(f"  {ph:<7} {m[ph]['MBps']:10.1f} MB/s  latency ms {m[ph].get('latency_ms')}")
        for ph in ("create", "stat", "unlink"):
            if ph in m:
                say(f"  {ph:<7} {m[ph]['ops_per_s']:10.0f} /s    latency ms {m[ph].get('latency_ms')}")
        paragraph(f"engine {rep.engine}; worked in {rep.workdir}"
                  + (f"; left {rep.left_behind}" if rep.left_behind else ", removed"), first="", indent="  ")
    raise typer.Exit(exit_code(rep.status))


@probe_app.command("host")
def host_cmd(
    profile: str = profile_option(help="Profile (default: the embedded local profile, also named 'local')."),
    pool: str = typer.Option(None, "--pool", help="One pool (default: every pool of the profile)."),
    root: Path = typer.Option(Path("/"), "--root", help="Read /sys, /proc and libraries below this root."),
    nvml_json: Path = typer.Option(None, "--nvml-json", help="Recorded NVML data instead of live NVML."),
    fmt: Format = format_option(),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Readiness of this node for each pool: RDMA ports, modules, libraries, GPUs, the Lustre mount."""
    from fabricguard.probes.host import load_gpus, probe_host
    from fabricguard.probes.result import exit_code, worst

    as_json = wants_json(fmt, as_json)
    prof, _ = _profile_and_pool(profile, pool)
    assert prof is not None
    pools = [prof.pool(pool)] if pool else prof.spec.pools
    try:
        gpus = load_gpus(nvml_json)
    except SourceError as exc:
        fail(f"--nvml-json {exc}", hint="pass NVML data recorded by bench/device/gpu_check.py")
    local = profile is None or profile == "local"
    reports = [probe_host(prof, p, root=root, gpu_data=gpus, require_gpus=not local) for p in pools]
    verdict = worst([r.status for r in reports])
    if as_json:
        print_json({"verdict": str(verdict), "profile": prof.metadata.name, "pools": [r.to_dict() for r in reports]},
                   "HostProbe")
    else:
        from fabricguard.probes.report import print_checks

        verdict_line(str(verdict), "probe host", f"profile {prof.metadata.name}",
                     ", ".join(f"pool {r.pool} {r.status}" for r in reports))
        for r in reports:
            console.print()
            paragraph(f"pool {r.pool} ({r.fabric}): {r.verdict}", first="", indent="  ", style="bold")
            print_checks([("", str(c.status), c.name, c.detail) for c in r.checks])
    raise typer.Exit(exit_code(verdict))


def validate_cmd(
    profile: str = profile_option(help="Platform profile (default: --local, the embedded 'local' profile)."),
    pool: str = typer.Option(None, "--pool", help="Pool to validate (default: the profile's defaultPool)."),
    local: bool = typer.Option(True, "--local/--no-local", help="Without --profile: validate this machine."),
    output: Path = typer.Option(None, "--output", "-o", help="Report directory (default: a new temp dir)."),
    out: Path = OUT_ALIAS,
    minbytes: str = typer.Option("1M", "-b", "--minbytes"),
    maxbytes: str = typer.Option("64M", "-e", "--maxbytes"),
    stepfactor: float = typer.Option(4.0, "-f", "--stepfactor"),
    warmup: int = typer.Option(2, "-w", "--warmup-iters"),
    iters: int = typer.Option(5, "-n", "--iters"),
    local_ranks: int = typer.Option(None, "--local-ranks", min=1, help="Collective ranks to spawn (local mode: 2)."),
    force_net: bool = typer.Option(None, "--force-net/--no-force-net"),
    storage_path: Path = typer.Option(
        None, "--storage-path", help="Default: the pool's Lustre mount, else a temp dir."
    ),
    storage_size: str = typer.Option("32M", "--storage-size", help="Checkpoint bytes per storage rank."),
    nvml_json: Path = typer.Option(None, "--nvml-json", help="Recorded NVML data instead of live NVML."),
    gpu_ceilings: Path = typer.Option(None, "--gpu-ceilings", help="JSON of GPU ceilings to compare with."),
    skip: str = typer.Option("", "--skip", help="Comma list of probes to skip: host,collective,storage,gpu."),
    fmt: Format = format_option(choices="table or json (the report JSON on stdout)"),
    as_json: bool = JSON_ALIAS,
) -> None:
    """Validate a pool (or, by default, this machine): host, collective, storage and GPU probes, one report.

    Exit code 0 pass, 1 degraded, 2 failed, 3 unusable input (including --skip of every probe).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from fabricguard.probes.bw import parse_size
    from fabricguard.probes.gpu import load_ceilings
    from fabricguard.probes.host import read_nvml_json
    from fabricguard.probes.report import print_summary
    from fabricguard.probes.result import Status, exit_code
    from fabricguard.probes.validate import LOCAL_NOTE, PROBES, ValidateOptions, default_out_dir, run_validate
    from fabricguard.userfiles import input_dir

    if profile is None and not local:
        fail("nothing to validate", hint="pass --profile FILE --pool NAME, or leave --local on")
    prof, p = _profile_and_pool(profile, pool)
    assert prof is not None and p is not None
    is_local = profile is None or profile == "local"
    skipped = {s.strip() for s in skip.split(",") if s.strip()}
    unknown = skipped - {"host", "collective", "storage", "gpu"}
    if unknown:
        fail(f"--skip: unknown probe(s) {sorted(unknown)}", hint=f"choose from {', '.join(PROBES)}")
    if skipped >= set(PROBES):
        fail("--skip names every probe: nothing would be validated", hint="leave at least one probe to run")
    as_json = wants_json(fmt, as_json)
    try:
        if nvml_json is not None and "host" not in skipped:
            read_nvml_json(nvml_json)
        if gpu_ceilings is not None and "gpu" not in skipped:
            load_ceilings(gpu_ceilings)
        if storage_path is not None and "storage" not in skipped:
            input_dir(storage_path)  # a path the user named; the pool's own mount missing is a failed check
    except SourceError as exc:
        fail(str(exc))
    opts = ValidateOptions(
        profile=prof,
        pool=p,
        local=is_local,
        out_dir=_output_dir(output_path(output, out)) or default_out_dir(),
        sizes=_sizes(minbytes, maxbytes, stepfactor),
        warmup=warmup,
        iters=iters,
        local_ranks=local_ranks if local_ranks is not None else (2 if is_local else None),
        backend="gloo" if is_local else "auto",
        force_net=force_net,
        storage_path=str(storage_path) if storage_path else None,
        storage_size=parse_size(storage_size),
        nvml_json=nvml_json,
        gpu_ceilings=gpu_ceilings,
        skip=skipped,
    )
    if is_local and not as_json:
        say((LOCAL_NOTE, "dim"), err=True)
    steps = ["host", "collective", "storage", "gpu", "report"]
    with Progress(
        TextColumn("{task.description:<22}"), BarColumn(), TimeElapsedColumn(), console=err_console, transient=True
    ) as prog:
        task = prog.add_task("validate", total=len(steps))

        def step(name: str) -> None:
            prog.update(task, completed=steps.index(name), description=f"probe: {name}")

        try:
            report = run_validate(opts, step)
        except SourceError as exc:  # the report folder filled up or went away while the probes ran
            fail(f"-o/--output {exc}")
        prog.update(task, completed=len(steps))
    st = Status(report["verdict"])
    if as_json:
        print_json(report, "ValidationReport")
    else:
        print_summary(report, f"{opts.out_dir / 'report.html'} and {opts.out_dir / 'report.json'}")
        coll = report.get("collective") or {}
        if coll.get("rows"):
            from fabricguard.probes.bw import Row, render_table

            console.print()
            console.print(render_table([Row(**r) for r in coll["rows"]]), markup=False, soft_wrap=True)
    if st is Status.skipped:
        fail(
            f"nothing was validated: every check of {', '.join(sorted(set(PROBES) - skipped))} was skipped",
            hint="run on a node where the probes apply, or skip fewer probes",
        )
    raise typer.Exit(exit_code(st))


def register(app: typer.Typer) -> None:
    """Add ``probe`` (collective, storage, host) and ``validate`` to the root app."""
    app.add_typer(probe_app, name="probe")
    app.command("validate")(validate_cmd)
