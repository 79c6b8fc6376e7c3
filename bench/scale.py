"""Thin wrapper: the benchmark lives in ``rayfl.benchmarks.scale`` (`rayfl bench`)."""

import sys

from rayfl.benchmarks.scale import main

if __name__ == "__main__":
    main(sys.argv[1:])
