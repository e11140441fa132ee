#!/usr/bin/env python3
"""Send an HLO module to `tessera serve` and read the answer.

Standard library only. With JAX installed, it lowers a small JAX function
to HLO text; with `--hlo FILE` it sends that file instead (no JAX needed).

    tessera serve --addr 127.0.0.1:8080 &
    python3 tessera_client.py --url http://127.0.0.1:8080 --target tpu
    python3 tessera_client.py --hlo testdata/xla-cpu/entry_layout_colmajor/before_layout.hlo
"""

import argparse
import json
import sys
import urllib.error
import urllib.request


class TesseraError(Exception):
    """An error answer: HTTP status, `error.kind` and `error.message`."""

    def __init__(self, status, kind, message, error):
        super().__init__(f"{status} {kind}: {message}")
        self.status, self.kind, self.error = status, kind, error


def layout_assignment(url, hlo_text, target="cpu", semantic=False, expand_relayouts=False, timeout=120):
    """POST /v1/layout-assignment; returns the answer: module, report, timings
    (and semantic_check when `semantic`)."""
    body = json.dumps({
        "module": hlo_text,
        "target": target,
        "options": {"verify": "semantic" if semantic else True, "expand_relayouts": expand_relayouts},
    }).encode("utf-8")
    request = urllib.request.Request(
        f"{url}/v1/layout-assignment",
        data=body,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        error = json.load(e).get("error", {})
        raise TesseraError(e.code, error.get("kind"), error.get("message"), error) from None


def lower_with_jax():
    """HLO text of a small JAX function, as a compiler pipeline would send it."""
    import jax
    import jax.numpy as jnp

    def f(x, w):
        return jnp.tanh(x @ w).T

    x = jnp.zeros((8, 128), jnp.float32)
    w = jnp.zeros((128, 256), jnp.float32)
    return jax.jit(f).lower(x, w).as_text(dialect="hlo")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--hlo", help="an HLO text file to send instead of lowering a JAX function")
    p.add_argument("--target", default="cpu")
    p.add_argument("--semantic", action="store_true", help="ask for the semantic check")
    p.add_argument("--expand-relayouts", action="store_true")
    args = p.parse_args()

    text = open(args.hlo, encoding="utf-8").read() if args.hlo else lower_with_jax()
    try:
        answer = layout_assignment(args.url, text, args.target, args.semantic, args.expand_relayouts)
    except TesseraError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

    module, report = answer["module"], answer["report"]
    stats = report["stats"]
    print(module.splitlines()[0])
    print(f"{report['module']} on {report['target']}: {stats['instructions']} instructions, "
          f"{stats['copies']} copies, {stats['bitcasts']} bitcasts, {stats['bytes_moved']} bytes moved")
    for copy in report.get("layout_assignment", {}).get("copies", []):
        print(f"  copy %{copy['name']} {copy['from']} -> {copy['to']} ({copy['bytes']} bytes): {copy['why']}")
    check = answer.get("semantic_check")
    if check:
        print(f"semantic check: {check['result']}" + (f" ({check['message']})" if "message" in check else ""))
    print(f"total {answer['timings']['total']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
