"""Execute one notebook with papermill, its kernel reached over local IPC sockets instead of TCP.

``python -m brorl_lib.pipeline.execute INPUT OUTPUT [--parameters FILE.yaml] [--cwd DIR] [--log-output]``

Over IPC no port is opened and ipykernel prints no "Kernel is running over TCP without encryption" warning
into the log. The sockets live in a private temporary folder of each run (removed after it), never in the
notebook's folder, so runs side by side cannot meet. The pipeline runs this in a child process (so a
timeout can kill the whole group); papermill's own progress bar (cell timings) is off, so a log holds cell
outputs only.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import yaml
from traitlets.config import Config

KERNEL = "python3"


def kernel_config(socket_folder: Path) -> Config:
    """jupyter_client settings for the kernel: IPC transport, its sockets ``socket_folder``/kernel-<n>."""
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = str(Path(socket_folder).resolve() / "kernel")  # absolute: the kernel runs in cwd
    return config


def execute(
    notebook: Path, output: Path, parameters: dict | None = None, cwd: Path | None = None, log_output: bool = False
) -> None:
    """Run ``notebook`` top to bottom with ``parameters`` injected; write the executed copy to ``output``."""
    import papermill

    with tempfile.TemporaryDirectory(prefix="brorl-kernel-") as sockets:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters or {},
            kernel_name=KERNEL,
            cwd=str(cwd) if cwd else None,
            log_output=log_output,
            progress_bar=False,
            config=kernel_config(Path(sockets)),
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib.pipeline.execute", description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("output", type=Path)
    ap.add_argument("--parameters", type=Path, help="YAML file of parameter values")
    ap.add_argument("--cwd", type=Path, help="working folder of the kernel")
    ap.add_argument("--log-output", action="store_true", help="stream cell outputs to the log")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parameters = yaml.safe_load(args.parameters.read_text()) if args.parameters else {}
    execute(args.notebook, args.output, parameters, args.cwd, args.log_output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
