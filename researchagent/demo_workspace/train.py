"""A small CPU training script: fits y = 3x + 2 by SGD and logs W&B-style metrics.

Each step appends {"_step": N, "loss": L, "lr": LR} to agent_metrics.jsonl in the run
directory (AGENTSYS_RUN_DIR, or the current directory), which AgentSys tails live.
Try: python train.py --lr=0.05 --steps=200
"""

import argparse
import json
import os
import random
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.01, help="seconds per step")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    data = [(x, 3 * x + 2 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(256))]
    w, b = 0.0, 0.0
    metrics = Path(os.environ.get("AGENTSYS_RUN_DIR", ".")) / "agent_metrics.jsonl"
    with metrics.open("a") as out:
        for step in range(1, args.steps + 1):
            x, y = rng.choice(data)
            err = (w * x + b) - y
            w -= args.lr * 2 * err * x
            b -= args.lr * 2 * err
            if step % 10 == 0:
                loss = sum(((w * x + b) - y) ** 2 for x, y in data) / len(data)
                out.write(json.dumps({"_step": step, "loss": loss, "lr": args.lr}) + "\n")
                out.flush()
                print(f"step {step} loss {loss:.4f}", flush=True)
            time.sleep(args.sleep)
    print(f"done: w={w:.3f} b={b:.3f}")


if __name__ == "__main__":
    main()
