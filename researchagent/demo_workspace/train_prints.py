"""The same small CPU training as train.py (fits y = 3x + 2 by SGD), but it only PRINTS its
metrics, as most training code does: `step 10 | loss 2.3100 | lr 0.05` lines on stdout, no
agent_metrics.jsonl. AgentSys reads them from the run's output (agentsys.metric_sources.stdout).
Try: python train_prints.py --lr=0.05 --steps=200
"""

import argparse
import random
import time


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
    print(f"Loading {len(data)} samples", flush=True)  # not a metric: no known word, no = or :
    for step in range(1, args.steps + 1):
        x, y = rng.choice(data)
        err = (w * x + b) - y
        w -= args.lr * 2 * err * x
        b -= args.lr * 2 * err
        if step % 10 == 0:
            loss = sum(((w * x + b) - y) ** 2 for x, y in data) / len(data)
            print(f"step {step} | loss {loss:.4f} | lr {args.lr}", flush=True)
        time.sleep(args.sleep)
    print(f"done: w={w:.3f} b={b:.3f}")


if __name__ == "__main__":
    main()
