"""Thin wrapper: the benchmark lives in ``rayfl.benchmarks.round_time`` (`rayfl bench`)."""

import sys

from rayfl.benchmarks.round_time import main

if __name__ == "__main__":
    main(sys.argv[1:])
