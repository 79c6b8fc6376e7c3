"""Thin wrapper: the benchmark lives in ``rayfl.benchmarks.flute_workload`` (`rayfl bench`)."""

import sys

from rayfl.benchmarks.flute_workload import main

if __name__ == "__main__":
    main(sys.argv[1:])
