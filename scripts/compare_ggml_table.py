#!/usr/bin/env python3
"""The table of scripts/compare_ggml.sh: kvlm against ggml's examples/gpt-2, from what both wrote.

    python3 scripts/compare_ggml_table.py RESULTS_DIR

RESULTS_DIR holds, per weight type T (f32, f16, q8_0) and interleaved round i (1, 2, ...):
  kvlm_<T>_<i>.json            kvlm bench --json of that round
  ggml_<T>_<i>_<case>.log      ggml's runs of that round, one after the other, each as
                               compare_ggml.sh appends it: a line "### run: COMMAND", a line
                               "### bandwidth before: {kvlm_compare_helper bandwidth JSON}", the
                               program's own output (stdout and stderr), a line
                               "### bandwidth after: {...}"
  with case prefill128, prefill512 (gpt-2-backend -n 1: the prompt is one batch, its
  "predict time" is that prefill), decode128, decode900 (gpt-2-batched -np 1: "n_decoded" steps
  in "predict time", the prompt's prefill excluded) and batch8 (gpt-2-batched -np 8: n_decoded
  counts the 8 sequences' tokens).
Within a round each engine's best run (kvlm bench: its best window) counts. Prints per type
one row per measurement: each engine's median [range] over the rounds, the median [range] of
the per-round ratios kvlm / ggml, and the bandwidth read next to each engine's counted run
(kvlm: beside its decode window; ggml: the mean of the readings before and after the run).
Exit 1 with a message naming the file and field on malformed input.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_table import InputError, fmt, number, read_kvlm  # noqa: E402

# (label, kvlm key, ggml log case, kvlm's bandwidth key next to its window)
ROWS = [
    ("prefill 128 tokens", "prefill_tps_128", "prefill128", None),
    ("prefill 512 tokens", "prefill_tps_512", "prefill512", None),
    ("decode, 128 cached", "decode_tps_b1_ctx128", "decode128", "decode_bandwidth_gbs_ctx128"),
    ("decode, 900 cached", "decode_tps_b1_ctx900", "decode900", "decode_bandwidth_gbs_ctx900"),
    ("decode, 8 sequences (sum)", "decode_tps_b8", "batch8", "decode_bandwidth_gbs_b8"),
]
FTYPES = {0: "F32", 1: "F16", 7: "Q8_0", 24: "BF16"}  # the ggml file header's ftype % 1000


def bandwidth_line(line, path, run):
    try:
        value = json.loads(line.split(":", 1)[1])
    except (json.JSONDecodeError, IndexError):
        raise InputError(f"{path}: run {run}: bandwidth line is not JSON: {line.strip()!r}")
    if not isinstance(value, dict):
        raise InputError(f"{path}: run {run}: bandwidth line is not a JSON object")
    return number(value, "bandwidth_gbs", f"{path}: run {run}")


def parse_run(text, path, run, prefill):
    """(tokens per second, bandwidth GB/s, ggml type name) of one run's output."""
    before = after = None
    for line in text.splitlines():
        if line.startswith("### bandwidth before:"):
            before = bandwidth_line(line, path, run)
        elif line.startswith("### bandwidth after:"):
            after = bandwidth_line(line, path, run)
        elif line.startswith("### failed:"):
            raise InputError(f"{path}: run {run}: the program failed ({line[4:].strip()})")
    if before is None or after is None:
        raise InputError(f"{path}: run {run}: missing a '### bandwidth before/after' line")
    predict = re.search(r"predict time =\s*([0-9.]+) ms", text)
    if not predict:
        raise InputError(f"{path}: run {run}: no 'predict time = ... ms' line (did it finish?)")
    count_re = (r"number of tokens in prompt = (\d+)" if prefill else r"n_decoded =\s*(\d+)")
    count = re.search(count_re, text)
    if not count:
        field = "number of tokens in prompt" if prefill else "n_decoded"
        raise InputError(f"{path}: run {run}: no '{field}' line")
    ms = float(predict.group(1))
    if ms <= 0:
        raise InputError(f"{path}: run {run}: predict time {ms} ms")
    ftype = re.search(r"ftype\s*=\s*(\d+)", text)
    type_name = FTYPES.get(int(ftype.group(1)) % 1000, "?") if ftype else "?"
    return int(count.group(1)) / (ms / 1000), (before + after) / 2, type_name


def read_ggml(path, prefill):
    """The best run of one log: (tokens per second, its bandwidth, ggml type)."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    runs = re.split(r"^### run: .*\n", text, flags=re.M)[1:]
    if not runs:
        raise InputError(f"{path}: no '### run:' line (write it with scripts/compare_ggml.sh)")
    results = [parse_run(r, path, k + 1, prefill) for k, r in enumerate(runs)]
    return max(results, key=lambda r: r[0])


def table_for(results_dir, weights, rounds):
    rows = {label: {"kvlm": [], "ggml": [], "ratio": [], "kbw": [], "gbw": []}
            for label, *_ in ROWS}
    threads, kvlm_types, ggml_types = set(), set(), set()
    for i in rounds:
        kvlm_path = os.path.join(results_dir, f"kvlm_{weights}_{i}.json")
        kvlm = read_kvlm(kvlm_path)
        threads.add(int(number(kvlm, "threads", kvlm_path)))
        kvlm_types.add(str(kvlm.get("weights", "?")))
        run_bandwidth = number(kvlm, "bandwidth_gbs", kvlm_path)
        for label, key, case, bw_key in ROWS:
            path = os.path.join(results_dir, f"ggml_{weights}_{i}_{case}.log")
            ggml = read_ggml(path, case.startswith("prefill")) if os.path.exists(path) else None
            k = number(kvlm, key, kvlm_path) if key in kvlm else None
            row = rows[label]
            if k is not None:
                row["kvlm"].append(k)
                row["kbw"].append(number(kvlm, bw_key, kvlm_path) if bw_key in kvlm
                                  else run_bandwidth)
            if ggml is not None:
                row["ggml"].append(ggml[0])
                row["gbw"].append(ggml[1])
                ggml_types.add(ggml[2])
            if k is not None and ggml is not None and ggml[0] > 0:
                row["ratio"].append(k / ggml[0])
    lines = [f"{weights}: kvlm ({'/'.join(sorted(kvlm_types))} weights) against ggml "
             f"({'/'.join(sorted(ggml_types))}), {len(rounds)} interleaved round(s), threads "
             f"{'/'.join(str(t) for t in sorted(threads))}; median [range], tokens/s",
             "",
             "| | kvlm | ggml | kvlm / ggml | bandwidth beside kvlm, GB/s | beside ggml, GB/s |",
             "| --- | --- | --- | --- | --- | --- |"]
    for label, *_ in ROWS:
        row = rows[label]
        if not row["kvlm"] and not row["ggml"]:
            continue
        lines.append(f"| {label} | {fmt(row['kvlm'], 1)} | {fmt(row['ggml'], 1)} | "
                     f"{fmt(row['ratio'], 2, 'x')} | {fmt(row['kbw'], 1)} | "
                     f"{fmt(row['gbw'], 1)} |")
    if len(kvlm_types) == 1 and len(ggml_types) == 1 and kvlm_types != ggml_types:
        lines.append("")
        lines.append("warning: the engines ran different weight types")
    return "\n".join(lines)


def table(results_dir):
    try:
        names = os.listdir(results_dir)
    except OSError as e:
        raise InputError(f"{results_dir}: cannot list: {e.strerror}")
    found = {}
    for name in names:
        if m := re.fullmatch(r"kvlm_([a-z0-9_]+)_(\d+)\.json", name):
            found.setdefault(m.group(1), []).append(int(m.group(2)))
    if not found:
        raise InputError(f"{results_dir}: no kvlm_<type>_<i>.json files "
                         "(run scripts/compare_ggml.sh)")
    order = ["f32", "f16", "bf16", "q8_0"]
    weights = sorted(found, key=lambda w: (order.index(w) if w in order else len(order), w))
    return "\n\n".join(table_for(results_dir, w, sorted(found[w])) for w in weights)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    try:
        print(table(argv[1]))
    except InputError as e:
        print(f"compare_ggml_table: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
