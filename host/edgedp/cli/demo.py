"""edgedp demo: the main job end to end on the emulated board."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from importlib import resources

import click
import numpy as np

from ..device.client import Device, open_device
from ..device.errors import DeviceError
from ..device.protocol import Caps, MechConfig, shown
from ..mech.lattice import to_epsilon, to_micro
from .common import handle_errors, target_option
from .keys import resolve_key
from .output import StopRequest
from .params import DAILY_CAP, EPSILON
from .state import budget_dict


def bundled_sample() -> tuple[np.ndarray, np.ndarray]:
    """Softmax outputs of a digits classifier (64 held-out images) and their true labels."""
    with resources.files("edgedp").joinpath("data/digits_sample.npz").open("rb") as f:
        with np.load(f) as z:
            return z["probs"].astype(np.float64), z["labels"].astype(int)


@dataclass
class Answered:
    """What demo's charged answers were so far, for its summary when the link fails after a signal
    (the device's spend can no longer be read then: the count times the ε each was charged)."""
    epsilon: float
    queries: int
    queries_planned: int
    images: int = 0
    images_planned: int = 0  # 0: the on-device model part has not begun
    correct: int = 0  # private labels of the images that were the true label

    def summary(self) -> str:
        if not self.images_planned:
            return (f"{self.queries} of {self.queries_planned} queries (the device charged "
                    f"{self.queries * self.epsilon:g} epsilon for them)")
        return (f"the queries and {self.images} of {self.images_planned} images (private labels correct on "
                f"{self.correct}; the device charged {self.images * self.epsilon:g} epsilon for the images)")


@click.command()
@target_option
@click.option("--epsilon", "-e", type=EPSILON, default=1.0, show_default=True, help="Per-query epsilon.")
@click.option("--daily-cap", type=DAILY_CAP, default=12.0, show_default=True, help="Daily epsilon cap for the demo.")
@click.option("--rows", type=click.IntRange(1, 64), default=16, show_default=True)
@click.option("--images", type=click.IntRange(0, 599), default=100, show_default=True,
              help="Digits test images sent to the on-device model (INFER), 0 to skip.")
@handle_errors
def demo(target: str | None, epsilon: float, daily_cap: float, rows: int, images: int) -> None:
    """Build, boot the firmware in QEMU, stream real model outputs, show raw vs private and the budget.

    Then send digits images to the model compiled into the image (INFER) and count the private
    labels' accuracy. Ctrl-C (or SIGTERM) stops after the answer in flight: the rows so far, the
    budget spent, exit 130 (143)."""
    probs, labels = bundled_sample()
    probs, labels = probs[:rows], labels[:rows]
    click.echo("starting the device (QEMU netduinoplus2, test image) ...")
    stop = StopRequest()
    done = ""
    so_far = Answered(epsilon, 0, len(probs))
    # (the device is closed before the handlers are put back: a first signal only stops the queries)
    with contextlib.ExitStack() as deferred, open_device(target) as dev:
        info = dev.info()
        click.echo(f"device: {shown(info.board)}, firmware {shown(info.firmware_version)}, {info.build} build, "
                   f"entropy {info.entropy}, store {info.store}")
        key = resolve_key(dev, None)
        dev.configure(key, MechConfig(to_micro(epsilon)), Caps(to_micro(daily_cap)))
        dev.reset_budget(key)
        click.echo(f"config: epsilon {epsilon} per query, daily cap {daily_cap}, range [0, 1], "
                   f"L1 sensitivity 2 (authenticated CONFIG)\n")
        click.echo("each row: one external query in TOPK:2 mode (noisy ranking, clamped values), "
                   f"costing epsilon {epsilon}")
        click.echo(f"{'#':>3} {'true':>4} | {'raw top-2 (probability)':>24} | {'private top-2 (noisy value)':>28} | "
                   f"{'budget left':>11}")
        click.echo("-" * 82)
        agree = 0
        deferred.enter_context(stop.deferring_signals())
        # (an error after a first signal: the rows answered are on stdout; what they were charged follows)
        deferred.enter_context(stop.summary_on_error(so_far.summary))
        for i, (x, y) in enumerate(zip(probs, labels)):
            if stop:
                break
            order = np.argsort(-x, kind="stable")[:2]
            raw = "  ".join(f"{j} ({x[j]:.2f})" for j in order)
            try:
                r = dev.query(x, "topk:2")
            except DeviceError as exc:
                click.echo(f"{i:>3} {y:>4} | {raw:>24} | {'refused: ' + exc.code:>28} | {'0':>11}")
                local_label = dev.local(x).label
                click.echo(f"\nexternal output refused ({exc.code}); the on-device local path still "
                           f"answers: label {local_label} (never leaves the device, costs nothing)")
                break
            so_far.queries += 1
            agree += int(r.label == int(order[0]))
            assert r.indices is not None and r.values is not None  # a topk answer has both
            priv = "  ".join(f"{j} ({v:.2f})" for j, v in zip(r.indices, r.values))
            click.echo(f"{i:>3} {y:>4} | {raw:>24} | {priv:>28} | {r.remaining:>11.2f}")
        b = budget_dict(dev.state(key).budget)  # the key is at hand: authenticated, not BUDGET
        click.echo(f"\nprivate top-1 agreed with the raw prediction on {agree}/{so_far.queries} answered queries.")
        click.echo("At epsilon = 1 noise of scale 2/epsilon on a probability vector mostly hides the answer: "
                   "see `edgedp tradeoff` for what each setting costs, and the teacher-ensemble alternative.")
        click.echo(f"budget: {b['date']}: spent {b['daily_spent']:.2f} of {b['daily_cap']:.2f} epsilon; "
                   f"lifetime spent {b['lifetime_spent']:.2f}; store at boot: {b['store']}")
        done = f"{so_far.queries} of {len(probs)} queries (spent {b['daily_spent']:.2f} epsilon today)"
        if images > 0 and not stop:
            done = on_device(dev, key, images, stop, so_far)
    stop.end(done)


def on_device(dev: Device, key: bytes, images: int, stop: StopRequest, so_far: Answered) -> str:
    """The product path: images in, the model runs on the device, only private labels come out.
    Stops before the next image once ``stop`` is set; returns what was done (for its summary) and
    counts the images answered in ``so_far``."""
    epsilon = so_far.epsilon
    try:
        from ..bench.icount import tick_unit
        from ..model.digits import split
        from ..model.image import UnknownModel, target_model
    except ImportError as exc:
        click.echo(f"\n(on-device model part skipped: it needs scikit-learn, pip install edgedp[analysis]: {exc})")
        return "the queries (the on-device model part was skipped)"

    try:
        model = target_model(dev.target)
    except UnknownModel as exc:
        model, why = None, str(exc)
    else:
        why = "the image was built without a model"
    if model is None:
        click.echo(f"\n(on-device model part skipped: {why})")
        return "the queries (the on-device model part was skipped)"
    s = split()
    X, y = s.X_test[:images].astype(np.float32), s.y_test[:images]
    dev.configure(key, MechConfig(to_micro(epsilon)), Caps(to_micro(epsilon * len(X))))
    dev.reset_budget(key)
    click.echo(f"\non-device model {model.name!r} ({model.head} head, {len(model.nets)} net(s), range "
               f"[{model.lo:g}, {model.hi:g}], sensitivity {model.sensitivity:g}): {len(X)} held-out digits "
               f"images in, LABEL mode at epsilon {epsilon}; the raw output never leaves the device")
    ticks: list[int] = []
    so_far.images_planned = len(X)
    for i, (x, label) in enumerate(zip(X, y)):
        if stop:
            break
        r, t = dev.infer(x, "label")
        so_far.images += 1
        so_far.correct += int(r.label == label)
        ticks.append(t)
        if i < 8:
            click.echo(f"  image {i}: true {label}, private label {r.label}")
    if stop:
        n = len(ticks)
        spent = to_epsilon(dev.state(key).budget.daily_spent)
        click.echo(f"  private labels correct on {so_far.correct}/{n} images sent")
        return f"the queries and {n} of {len(X)} images (spent {spent:.2f} epsilon on the images)"
    unit = tick_unit(dev.info(), dev.target.name if dev.target else "")
    instructions = unit.instructions(float(np.mean(ticks)))
    cost = (f"{instructions:,.0f} instructions" if instructions is not None
            else f"{np.mean(ticks):,.0f} ticks ({unit.describe()})")
    click.echo(f"  private labels correct on {so_far.correct}/{len(X)} images ({so_far.correct / len(X):.1%}); "
               f"the same model without noise scores {model_accuracy(model, X, y):.1%}; "
               f"inference {cost} per image")
    return "every query and image"


def model_accuracy(model, X: np.ndarray, y: np.ndarray) -> float:
    from ..model.reference import first_argmax, run

    return float(np.mean(first_argmax(run(model, X)) == y))
