"""python -m server.bench NAME [options]: run one benchmark (each prints a table).

python -m server.bench NAME --help lists its options; the other benchmarks run as modules of
their own (python -m server.bench.chat, .http_stages, .load). docs/performance.md has each
command with its results."""

import importlib
import sys

BENCHES = ("decode", "prefill", "stress", "wkv", "gemv", "ttft", "pulse", "host", "sample", "large",
           "upload", "streams", "first", "gemm", "launch", "score", "memory")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    usage = f"usage: python -m server.bench {{{'|'.join(BENCHES)}}} [options]\n\n{__doc__}"
    if argv and argv[0] in ("-h", "--help"):
        print(usage)
        return
    if not argv or argv[0] not in BENCHES:
        what = f"unknown benchmark {argv[0]!r}\n" if argv else ""
        sys.exit(f"{what}{usage}")
    from server.logger import setup_logging

    setup_logging(verbose=True)  # as the server logs: INFO (loguru's default sink writes a
    # DEBUG line a pulse, host time on a request's way to its first token a server spares)
    module = importlib.import_module(f"server.bench.{argv[0]}")
    sys.argv = [f"server.bench {argv[0]}", *argv[1:]]
    if argv[0] == "wkv":  # reads sys.argv itself
        module.main()
    else:
        module.main(argv[1:])


if __name__ == "__main__":
    main()
