#!/usr/bin/env python3
"""The table of scripts/compare.sh: kvlm against llama.cpp, from the JSON both benches wrote.

    python3 scripts/compare_table.py RESULTS_DIR

RESULTS_DIR holds one pair of files per interleaved round i (1, 2, ...):
  llama_<i>.json   llama-bench -o json output(s) of that round, concatenated: arrays of objects
                   with n_prompt, n_gen, n_depth, n_threads, avg_ts (tokens/s)
  kvlm_<i>.json    kvlm bench --json of that round: prefill_tps_128/512, decode_tps_b1_ctx128/900,
                   bandwidth_gbs, decode_bandwidth_gbs_ctx128/900 (the bandwidth measured right
                   next to each decode window, when the kvlm build reports it), threads, weights
Prints one row per measurement both engines made: each engine's median [range] over the rounds,
and the median [range] of the per-round ratios kvlm / llama.cpp (a ratio is taken within a
round, so both sides saw the same machine state), with the bandwidth kvlm measured: next to the
decode window for decode rows, over the whole run otherwise.
Exit 1 with a message naming the file and field on malformed input.
"""
import json
import os
import re
import statistics
import sys

# (label, kvlm key, llama-bench (n_prompt, n_gen, n_depth), kvlm's bandwidth key next to it)
ROWS = [
    ("prefill 128 tokens", "prefill_tps_128", (128, 0, 0), None),
    ("prefill 512 tokens", "prefill_tps_512", (512, 0, 0), None),
    ("decode, 128 cached", "decode_tps_b1_ctx128", (0, None, 128), "decode_bandwidth_gbs_ctx128"),
    ("decode, 900 cached", "decode_tps_b1_ctx900", (0, None, 900), "decode_bandwidth_gbs_ctx900"),
]


class InputError(Exception):
    pass


def read_json_documents(path):
    """One or more JSON documents written one after the other (llama-bench run twice)."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    decoder, docs, pos = json.JSONDecoder(), [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            break
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not JSON at line {e.lineno} column {e.colno}: {e.msg}")
        docs.append(doc)
    if not docs:
        raise InputError(f"{path}: empty (expected JSON)")
    return docs


def number(obj, key, path):
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: field '{key}' must be a number, found {json.dumps(value)}")
    return value


def read_llama(path):
    """{(n_prompt, n_gen, n_depth): avg_ts} and the thread count of a round's llama-bench runs."""
    results, threads = {}, set()
    for doc in read_json_documents(path):
        if not isinstance(doc, list):
            raise InputError(f"{path}: expected llama-bench's JSON array of tests, found "
                             f"{type(doc).__name__}")
        for test in doc:
            if not isinstance(test, dict):
                raise InputError(f"{path}: a test is not a JSON object")
            key = tuple(int(number(test, k, path)) for k in ("n_prompt", "n_gen", "n_depth"))
            results[key] = number(test, "avg_ts", path)
            threads.add(int(number(test, "n_threads", path)))
    return results, threads


def read_kvlm(path):
    docs = read_json_documents(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(f"{path}: expected one kvlm bench --json object")
    return docs[0]


def llama_value(results, want):
    n_prompt, n_gen, n_depth = want
    for (p, g, d), ts in results.items():
        if p == n_prompt and d == n_depth and (g == n_gen if n_gen is not None else g > 0):
            return ts
    return None


def fmt(values, digits, unit=""):
    """median [min-max] of a round's values ("-" for none)."""
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}{unit}"
    return (f"{med:.{digits}f}{unit} [{min(values):.{digits}f}{unit}-"
            f"{max(values):.{digits}f}{unit}]")


def table(results_dir):
    rounds = sorted(int(m.group(1)) for f in os.listdir(results_dir)
                    if (m := re.fullmatch(r"kvlm_(\d+)\.json", f)))
    if not rounds:
        raise InputError(f"{results_dir}: no kvlm_<i>.json files (run scripts/compare.sh)")
    per_row = {label: {"kvlm": [], "llama": [], "ratio": [], "bw": []} for label, *_ in ROWS}
    threads, weights = set(), set()
    for i in rounds:
        kvlm_path = os.path.join(results_dir, f"kvlm_{i}.json")
        llama_path = os.path.join(results_dir, f"llama_{i}.json")
        kvlm = read_kvlm(kvlm_path)
        llama, llama_threads = read_llama(llama_path)
        bandwidth = number(kvlm, "bandwidth_gbs", kvlm_path)
        threads.add(int(number(kvlm, "threads", kvlm_path)))
        threads |= llama_threads
        weights.add(str(kvlm.get("weights", "?")))
        for label, key, want, bw_key in ROWS:
            k = number(kvlm, key, kvlm_path) if key in kvlm else None
            bw = number(kvlm, bw_key, kvlm_path) if bw_key in kvlm else bandwidth
            ll = llama_value(llama, want)
            row = per_row[label]
            if k is not None:
                row["kvlm"].append(k)
            if ll is not None:
                row["llama"].append(ll)
            if k is not None and ll is not None and ll > 0:
                row["ratio"].append(k / ll)
                row["bw"].append(bw)
    lines = [f"kvlm ({'/'.join(sorted(weights))} weights) against llama.cpp: {len(rounds)} "
             f"interleaved round(s), threads {'/'.join(str(t) for t in sorted(threads))}; "
             "median [range], tokens/s",
             "",
             "| | kvlm | llama.cpp | kvlm / llama.cpp | bandwidth, GB/s |",
             "| --- | --- | --- | --- | --- |"]
    for label, *_ in ROWS:
        row = per_row[label]
        if not row["kvlm"] and not row["llama"]:
            continue
        lines.append(f"| {label} | {fmt(row['kvlm'], 1)} | {fmt(row['llama'], 1)} | "
                     f"{fmt(row['ratio'], 2, 'x')} | {fmt(row['bw'], 1)} |")
    if len(threads) > 1:
        lines.append("")
        lines.append("warning: the engines ran with different thread counts: ratios compare "
                     "unlike runs")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    try:
        print(table(argv[1]))
    except InputError as e:
        print(f"compare_table: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
