"""train.py's twin that logs the way most training code does: with TensorBoard only.

Fits y = 3x + 2 by SGD like train.py (same arguments, same loss curve) and writes `loss` and
`lr` scalars every 10 steps, and its hyperparameters, with tensorboardX's SummaryWriter into
runs/ under its working directory; no agent_metrics.jsonl. AgentSys reads the event files.
Try: python train_tensorboard.py --lr=0.05 --steps=200
"""

import argparse
import random
import time

from tensorboardX import SummaryWriter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.01, help="seconds per step")
    parser.add_argument("--logdir", default="runs/sgd", help="where the event files go")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    data = [(x, 3 * x + 2 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(256))]
    w, b = 0.0, 0.0
    # flush_secs=1: the event file reaches the disk within a second, so the charts stay live.
    with SummaryWriter(args.logdir, flush_secs=1) as writer:
        # tensorboardX writes hparams as a sub-run (a folder of its own under the logdir).
        writer.add_hparams({"lr": args.lr, "steps": args.steps, "seed": args.seed}, {})
        for step in range(1, args.steps + 1):
            x, y = rng.choice(data)
            err = (w * x + b) - y
            w -= args.lr * 2 * err * x
            b -= args.lr * 2 * err
            if step % 10 == 0:
                loss = sum(((w * x + b) - y) ** 2 for x, y in data) / len(data)
                writer.add_scalar("loss", loss, step)
                writer.add_scalar("lr", args.lr, step)
                print(f"step {step} loss {loss:.4f}", flush=True)
            time.sleep(args.sleep)
    print(f"done: w={w:.3f} b={b:.3f}")


if __name__ == "__main__":
    main()
