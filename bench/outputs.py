"""Outputs benchmark: the 20,000-page bench site crawled by eclaw writing ``s3://…jsonl.gz`` to a local
moto S3 server vs writing a local ``.jsonl``, alternated runs; the pages/s ratio (goal ≥ 0.90).

    python -m bench.outputs [--pages 20000] [--repeats 3]

The crawl is bench/run.py's eclaw contender (pinned to one CPU, 64 requests at once); moto runs in
this process on another CPU. Each run's output is read back and must hold every page's item
exactly once, else the run does not count. Results go to bench/results/outputs.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.run import CACHE, RESULTS, check_complete, command
from bench.site import generate, serve, taskset
from tests.outputs.servers import CREDENTIALS, moto_server, s3_client


def run_once(base: str, pages: int, target: str, local: Path, endpoint: str) -> float:
    argv = command("eclaw", base, local)
    argv[argv.index(str(local))] = target  # the -o value
    env = {**os.environ, **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    started = time.perf_counter()
    process = subprocess.run([*taskset(1), *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{target} failed (exit {process.returncode}):\n{process.stderr.decode()[-2000:]}")
    if target.startswith("s3://"):
        body = s3_client(endpoint).get_object(Bucket="bench", Key="items.jsonl.gz")["Body"].read()  # type: ignore[attr-defined]
        local.write_bytes(gzip.decompress(body))
    check_complete(target, local, pages)
    return pages / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    site = generate(args.pages, CACHE)
    rates: dict[str, list[float]] = {"local .jsonl": [], "s3 .jsonl.gz": []}
    with moto_server() as endpoint, serve(site) as (base, _):
        client: Any = s3_client(endpoint)
        client.create_bucket(Bucket="bench")
        local = CACHE / "out-outputs.jsonl"
        for repeat in range(args.repeats):
            for name, target in (("local .jsonl", str(local)), ("s3 .jsonl.gz", "s3://bench/items.jsonl.gz")):
                local.unlink(missing_ok=True)
                rate = run_once(base, args.pages, target, local, endpoint)
                rates[name].append(rate)
                print(f"  [{repeat + 1}/{args.repeats}] {name:<13} {rate:8.0f} pages/s", flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    ratio = medians["s3 .jsonl.gz"] / medians["local .jsonl"]
    print(f"median pages/s: {medians}; s3/local ratio {ratio:.3f} (goal >= 0.90)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = {"pages": args.pages, "repeats": args.repeats, "runs": rates, "medians": medians, "ratio": ratio}
    (RESULTS / "outputs.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
