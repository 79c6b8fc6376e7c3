"""Draw one client's channel gain and availability over a moving-world run (issue 48).

    python examples/mobile_star_world.py examples/mobile_star.yaml \
        docs/figures/mobile_star_world_client0.png [--client C] [overrides...]

The series are the run's own (``rayfl.star.world_plot``): ``rayfl run`` draws
the same figure as ``plots/world_client0.png`` when ``output.plots`` is on.
"""

from __future__ import annotations

import argparse

from rayfl.config import load_config
from rayfl.star.world_plot import plot_client_world


def main(argv: list[str] | None = None) -> None:
    """Parse the flags; draw the figure."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("config", help="a run config whose world moves")
    p.add_argument("out", help="the PNG to write")
    p.add_argument("--client", type=int, default=0, help="the client drawn")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides")
    args = p.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    print(plot_client_world(cfg, args.out, client=args.client))


if __name__ == "__main__":
    main()
