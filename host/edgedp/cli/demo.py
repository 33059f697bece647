"""edgedp demo: the main job end to end on the emulated board."""
from __future__ import annotations

from importlib import resources

import click
import numpy as np

from ..client import open_device
from ..errors import DeviceError
from .common import handle_errors, target_option
from .device import budget_dict, resolve_key


def bundled_sample() -> tuple[np.ndarray, np.ndarray]:
    """Softmax outputs of a digits classifier (64 held-out images) and their true labels."""
    with resources.files("edgedp").joinpath("data/digits_sample.npz").open("rb") as f:
        with np.load(f) as z:
            return z["probs"].astype(np.float64), z["labels"].astype(int)


@click.command()
@target_option
@click.option("--epsilon", "-e", type=float, default=1.0, show_default=True, help="Per-query epsilon.")
@click.option("--daily-cap", type=float, default=12.0, show_default=True, help="Daily epsilon cap for the demo.")
@click.option("--rows", type=int, default=16, show_default=True)
@handle_errors
def demo(target: str | None, epsilon: float, daily_cap: float, rows: int) -> None:
    """Build, boot the firmware in QEMU, stream real model outputs, show raw vs private and the budget."""
    probs, labels = bundled_sample()
    probs, labels = probs[:rows], labels[:rows]
    click.echo("starting the device (QEMU netduinoplus2, test image) ...")
    with open_device(target) as dev:
        info = dev.info()
        click.echo(f"device: {info.board}, firmware {info.firmware_version}, {info.build} build, "
                   f"entropy {info.entropy}, store {info.store}")
        key = resolve_key(dev, None)
        dev.configure(key, epsilon, daily_cap)
        dev.reset_budget(key)
        b = dev.budget()
        click.echo(f"config: epsilon {epsilon} per query, daily cap {daily_cap}, range [0, 1], "
                   f"L1 sensitivity 2 (authenticated CONFIG)\n")
        click.echo(f"{'#':>3} {'true':>4} | {'raw top-1':>12} | {'private top-1 (full)':>22} | "
                   f"{'private label':>13} | {'budget left':>11}")
        click.echo("-" * 80)
        agree = answered = 0
        for i, (x, y) in enumerate(zip(probs, labels)):
            raw = f"{int(np.argmax(x))} ({x.max():.2f})"
            try:
                full = dev.query(x, "full")
                lab = dev.query(x, "label")
            except DeviceError as exc:
                click.echo(f"{i:>3} {y:>4} | {raw:>12} | {'refused: ' + exc.code:>22} | {'-':>13} | {'0':>11}")
                local_label, _ = dev.local(x)
                click.echo(f"\nexternal output refused ({exc.code}); the on-device local path still "
                           f"answers: label {local_label} (never leaves the device, costs nothing)")
                break
            answered += 1
            agree += int(lab.label == int(np.argmax(x)))
            priv = f"{full.label} ({full.values.max():.2f})"
            click.echo(f"{i:>3} {y:>4} | {raw:>12} | {priv:>22} | {lab.label:>13} | "
                       f"{lab.remaining * 1e-6:>11.2f}")
        b = budget_dict(dev.budget())
    click.echo(f"\nprivate label agreed with the raw prediction on {agree}/{answered} answered queries.")
    click.echo("At epsilon = 1 noise of scale 2/epsilon on a probability vector mostly hides the answer: "
               "see `edgedp tradeoff` for what each setting costs, and the teacher-ensemble alternative.")
    click.echo(f"budget: day {b['day']}: spent {b['daily_spent']:.2f} of {b['daily_cap']:.2f} epsilon; "
               f"lifetime spent {b['lifetime_spent']:.2f}; store {b['store']}")
