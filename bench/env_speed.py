"""Thin wrapper: the benchmark lives in ``rayfl.benchmarks.env_speed`` (`rayfl bench`)."""

import sys

from rayfl.benchmarks.env_speed import main

if __name__ == "__main__":
    main(sys.argv[1:])
