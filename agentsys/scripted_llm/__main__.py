"""python -m agentsys.scripted_llm --port P [--demo [--seconds S] | --script FILE]"""

import argparse
import json
import signal
import sys
import threading

from agentsys.scripted_llm.server import ScriptedLLM


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsys.scripted_llm")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--demo", action="store_true", help="answer with the demo research brain")
    mode.add_argument("--script", help="a JSON script file")
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.0,
        help="about how long a demo research loop lasts (0: as fast as it can)",
    )
    args = parser.parse_args()
    script = None
    if args.script:
        with open(args.script) as handle:
            script = json.load(handle)
    llm = ScriptedLLM(script, demo=args.demo, demo_seconds=max(0.0, args.seconds))
    base = llm.serve_in_thread(port=args.port, host=args.host)
    # Said by name: on the console of `make run` it sits among OpenCode's and the web's lines.
    print(f"demo model (scripted LLM) listening on {base}/v1", flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    llm.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
