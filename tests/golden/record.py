"""Record the golden files: ``tests/golden/data/<case>.json``, one per case.

Run from the repository root, on the commit whose behaviour is the reference::

    PYTHONPATH=$PWD python -m tests.golden.record            # every case
    PYTHONPATH=$PWD python -m tests.golden.record star_all   # some cases

The files hold each column as a JSON list; Python's ``json`` writes floats with
``repr``, so float64 values (NaN and infinities included) read back exactly.
The first recording was made on commit ``c3e6a43`` (main after the refactor
plan was merged), one Ray session with ``num_cpus=2``. A package that changes
behaviour on purpose re-records the files it changes in a separate commit and
says which columns changed and why.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from tests.golden.cases import ENV_CASES, RUN_CASES, env_case, run_case

DATA = Path(__file__).with_name("data")


def start_ray() -> None:
    """Start the local 2-CPU Ray session every recording and check uses."""
    import ray

    from rayfl.cluster.session import _init_with_retries

    if not ray.is_initialized():
        _init_with_retries(
            ray.init,
            address="local",
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
        )


def record(name: str, output_dir: str) -> dict:
    """Return the record of one case (run case or env case)."""
    if name in RUN_CASES:
        return run_case(name, output_dir)
    return env_case(name)


def main(argv: list[str] | None = None) -> None:
    """Record the named cases (all by default) into ``tests/golden/data``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [*RUN_CASES, *ENV_CASES]
    parser.add_argument("cases", nargs="*", help=f"case names: {', '.join(names)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(names))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; allowed: {', '.join(names)}")
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    start_ray()
    DATA.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases or names:
            doc = record(name, tmp)
            (DATA / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
            print(f"recorded {name}")
    import ray

    ray.shutdown()


if __name__ == "__main__":
    main()
