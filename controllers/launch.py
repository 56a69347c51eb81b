"""Start the fabric controller as its own process: ``python -m controllers.launch``.

os-ken dropped its ``osken-manager`` CLI in 4.0; this does the same with its Python API
(``os_ken.cfg.CONF`` then ``AppManager.run_apps``). Listens for OpenFlow on loopback only.
"""
import argparse
import logging
import os
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fabric", required=True, help="fabric JSON written by the harness")
    ap.add_argument("--ofp-port", type=int, required=True)
    ap.add_argument("--log", default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(filename=args.log, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ["INTERLEAVE_FABRIC"] = args.fabric
    import warnings
    warnings.filterwarnings("ignore", module="eventlet")
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager
    cfg.CONF(args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(args.ofp_port)],
             project="os_ken")
    AppManager.run_apps(["controllers.fabric_app"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
