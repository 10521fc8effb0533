"""What makes torchrun find the AM's rendezvous (`--rdzv-backend tony`, core/executor/torchrun_rendezvous.py)
in an elastic job's command, whatever Python the command runs: no torch here (the executor imports it)."""

from __future__ import annotations

from pathlib import Path

from tony_airflow.core import protocol

PLUGIN_DIR = ".tony-torchrun"  # in the container's working directory
DIST_INFO = "tony_airflow_torchrun-0.dist-info"
HANDLER = "tony_airflow.core.executor.torchrun_rendezvous:handler_creator"


def plugin_dir(where: Path) -> Path:
    """A directory that, first on the command's PYTHONPATH, registers the backend with torchrun: an installed
    distribution's metadata whose `torchrun.handlers` entry point names the handler (torch looks them up when
    its rendezvous package is imported), and this package itself beside it, so the handler is the same code
    as the executor's and the AM's whatever the command's own Python has installed."""
    import tony_airflow

    root = where / PLUGIN_DIR
    info = root / DIST_INFO
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tony-airflow-torchrun\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[torchrun.handlers]\n{protocol.RENDEZVOUS_BACKEND} = {HANDLER}\n")
    package = root / "tony_airflow"
    if not package.is_symlink() and not package.exists():
        package.symlink_to(Path(tony_airflow.__file__).parent, target_is_directory=True)
    return root
