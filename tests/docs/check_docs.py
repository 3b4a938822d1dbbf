#!/usr/bin/env python3
"""The docs against the binary: what a reader copies from README.md, docs/*.md and deploy/ must
be what `kronos` accepts and exposes.

  1. --help and the parser: every flag a command's --help lists is one of its long options in
     src/cli/cmd_<command>.c and is accepted by the running binary (not "unrecognized"), and
     every long option is listed in --help.
  2. Commands in the docs: every flag of a `kronos COMMAND ...` line in a code block of
     README.md, docs/*.md and deploy/README.md (the README's usage block included) is in that
     command's --help; so are the flags of docs/api.md's `kronos serve` table; every command
     that loads a model takes --allow-nonfinite-weights (README: "Every command that loads a
     model also takes").
  3. Config keys: every key of docs/api.md's configuration table (and of a profile) is known
     to `kronos serve --config FILE --check-config` (a wrong value of it is refused naming the
     value, never as an unknown key), and every key of deploy/kronos-serve.json is documented.
  4. Metrics: a `kronos serve` on the demo model with int8 weights (so the f32 drift shadow
     runs) and a time-of-day profile exposes on /metrics every series docs/api.md's metrics
     table names and every series deploy/prometheus-alerts.yml and deploy/README.md's queries
     use, with the labels (and label values) they select on; and docs/api.md documents every
     series /metrics exposes.
  5. docs/c-api.md names only identifiers the public headers (include/) declare.
  6. Every test the docs cite by name (test_*, as a file, an executable or a function) exists
     under tests/ or python/tests/.

Usage: check_docs.py KRONOS_BINARY SOURCE_DIR
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILURES = []
DOC_COMMANDS = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL: " + msg)


def run(kronos, *args, timeout=60, env=None):
    return subprocess.run([kronos, *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def read(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- 1. --help and the parser

def commands(kronos):
    out = run(kronos, "--help").stdout
    return re.findall(r"^  ([a-z][a-z-]+) ", out.split("commands:", 1)[1], re.M)


def help_flags(text):
    """The flags of the option list of a --help text (lines starting with the flag)."""
    return set(re.findall(r"^ +(?:-h, )?--([a-z0-9][a-z0-9-]*)", text, re.M))


def source_flags(src, cmd):
    text = read(src, f"src/cli/cmd_{cmd.replace('-', '_')}.c")
    flags = set(re.findall(r'\{\s*"([a-z0-9-]+)",\s*(?:no|required|optional)_argument', text))
    # An option table (src/common/options.h): { "name", KEY, KR_CLI_TYPE, ... }.
    flags |= set(re.findall(r'\{\s*"([a-z0-9-]+)",\s*[^,{}]+,\s*KR_CLI_[A-Z]+', text))
    # The forecast flags several commands share (src/cli/forecast_flags.h): an entry
    # KR_CLI_OPT_MODEL(help) is { "model", ... } there.
    shared = read(src, "src/cli/forecast_flags.h")
    entries = dict(re.findall(r'#define (KR_CLI_OPT_[A-Z_]+)\b[^{]*\{[\s\\]*"([a-z0-9-]+)"', shared))
    for macro in re.findall(r"\b(KR_CLI_OPT_[A-Z_]+)\b", text):
        flags.add(entries[macro])
    if cmd == "finetune":
        # Every config key is a flag too: kronos finetune builds those options from the
        # library's key table (src/finetune/config.c), one "flag" string per key.
        table = read(src, "src/finetune/config.c")
        flags |= set(re.findall(r'OFF\(\w+\),\s*"([a-z0-9-]+)"', table))
    return flags


def check_help_and_parser(kronos, src, helps):
    for cmd, text in helps.items():
        listed, parsed = help_flags(text), source_flags(src, cmd)
        for f in sorted(listed - parsed):
            fail(f"kronos {cmd} --help lists --{f}, which src/cli/cmd_{cmd}.c does not parse")
        for f in sorted(parsed - listed):
            fail(f"kronos {cmd} parses --{f}, which its --help does not list")
        # The binary itself: the flag, then two unknown ones. A flag taking a value swallows
        # the first, the second is refused; a switch leaves the first to be refused. Either
        # way the command stops at parsing (exit 2) and never names the flag as unknown.
        for f in sorted(listed - {"help"}):
            r = run(kronos, cmd, f"--{f}", "--zz-no-such-flag", "--zz-no-such-flag")
            if re.search(rf"(unrecognized|unknown) option '--{re.escape(f)}'", r.stderr) or \
                    f"option '--{f}' is ambiguous" in r.stderr:
                fail(f"kronos {cmd} --{f}: refused by the binary: {r.stderr.strip()[:200]}")
            elif r.returncode != 2:
                fail(f"kronos {cmd} --{f} --zz-no-such-flag ...: exit {r.returncode}, not 2")


# ---------------------------------------------------------------- 2. commands in the docs

def code_blocks(text):
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S)


def doc_invocations(text, names):
    """(command, flags, line) of each `kronos COMMAND ...` in the code blocks of a document.
    Continuation lines (a trailing backslash, or indented lines of a usage block) belong to
    the command above them; a shell `&&`, `|`, `;` or comment ends a command."""
    found = []
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    for block in code_blocks(text):
        usage = block.lstrip().startswith("kronos ") and "[--" in block
        lines, cur = [], ""
        for line in block.split("\n"):
            if cur and (cur.endswith("\\") or (usage and line.startswith(" "))):
                cur = cur.rstrip("\\") + " " + line.strip()
                continue
            lines.append(cur)
            cur = line
        lines.append(cur)
        for line in lines:
            for m in re.finditer(rf"(?:^|[\s/])kronos ({alt})(?=\s|$)", line):
                rest = line[m.end():]
                if not usage:
                    rest = re.split(r"&&|\s\|\s|;|\s#", rest)[0]
                flags = set(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", rest))
                found.append((m.group(1), flags, line.strip()))
    DOC_COMMANDS.append(len(found))
    return found


def check_doc_commands(src, helps):
    docs = ["README.md", "deploy/README.md"] + sorted(
        os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "docs", "*.md")))
    for rel in docs:
        for cmd, flags, line in doc_invocations(read(src, rel), helps):
            for f in sorted(flags - help_flags(helps[cmd])):
                fail(f"{rel}: `kronos {cmd} ... --{f}`: not a flag of kronos {cmd} "
                     f"({line[:120]})")
    if sum(DOC_COMMANDS) < 30:
        fail(f"only {sum(DOC_COMMANDS)} `kronos COMMAND` lines found in the docs' code blocks")
    api = read(src, "docs/api.md")
    table = api.split("| flag | default | meaning |", 1)[1].split("\n\n", 1)[0]
    for f in sorted(set(re.findall(r"^\| `--([a-z][a-z0-9-]*)", table, re.M)) |
                    set(re.findall(r", `--([a-z][a-z0-9-]*)", table))):
        if f not in help_flags(helps["serve"]):
            fail(f"docs/api.md: the serve table's --{f} is not a flag of kronos serve")
    readme = read(src, "README.md")
    # README's usage block lists every flag of these commands' --help (it used to miss
    # analyze's sampling flags, quantize's --tokenizer/--threads, bench's --model/--data).
    usage = next(b for b in code_blocks(readme) if b.startswith("kronos forecast --input"))
    in_usage = {}
    for cmd, flags, _ in doc_invocations("```\n" + usage + "```\n", helps):
        in_usage.setdefault(cmd, set()).update(flags)
    for cmd in ("forecast", "analyze", "quantize", "gen-random", "bench"):
        for f in sorted(help_flags(helps[cmd]) - {"help", "allow-nonfinite-weights"} -
                        in_usage.get(cmd, set())):
            fail(f"README usage block: kronos {cmd} lacks --{f}, which its --help lists")
    assert "Every command that loads a model also\ntakes `--allow-nonfinite-weights`" in readme
    for cmd in ("forecast", "quantize", "eval-quant", "analyze", "serve", "bench"):
        if "allow-nonfinite-weights" not in help_flags(helps[cmd]):
            fail(f"README: kronos {cmd} loads a model but takes no --allow-nonfinite-weights")


# ---------------------------------------------------------------- 3. config keys

def documented_config_keys(api):
    section = api.split("## Configuration file", 1)[1].split("### The tuner", 1)[0]
    table = section.split("| key | default | meaning |", 1)[1].split("\n\n", 1)[0]
    keys = set()
    for row in table.split("\n")[2:]:
        keys |= set(re.findall(r"`([a-z_0-9]+)`", row.split("|")[1]))
    profile = re.search(r"A profile may set every\s+scheduler key: (.*?); keys it does not",
                        section, re.S)
    prof_keys = set(re.findall(r"`([a-z_0-9]+)`", profile.group(1))) if profile else set()
    if not prof_keys:
        fail("docs/api.md: no list of profile keys found")
    return keys, prof_keys


def check_config_keys(kronos, src, tmp):
    keys, prof_keys = documented_config_keys(read(src, "docs/api.md"))
    path = os.path.join(tmp, "key.json")

    def refused_as_unknown(doc):
        with open(path, "w") as f:
            json.dump(doc, f)
        r = run(kronos, "serve", "--config", path, "--check-config")
        return "unknown key" in r.stderr or "unknown profile key" in r.stderr, r

    # A value of no key's type: each key refuses it naming its own rule, not as unknown.
    bad = {"__not": "a value"}
    for k in sorted(keys):
        unknown, r = refused_as_unknown({k: bad})
        if unknown or r.returncode != 2:
            fail(f"docs/api.md config key '{k}': exit {r.returncode}: {r.stderr.strip()[:160]}")
    for k in sorted(prof_keys):
        unknown, r = refused_as_unknown(
            {"profiles": [{"name": "p", "from": "09:00", "to": "10:00", k: bad}]})
        if unknown or r.returncode != 2:
            fail(f"docs/api.md profile key '{k}': exit {r.returncode}: {r.stderr.strip()[:160]}")
    shipped = json.loads(read(src, "deploy/kronos-serve.json"))
    for k in sorted(set(shipped) - keys):
        fail(f"deploy/kronos-serve.json: key '{k}' is not in docs/api.md's config table")
    for p in shipped.get("profiles", []):
        for k in sorted(set(p) - prof_keys - {"name", "from", "to"}):
            fail(f"deploy/kronos-serve.json: profile key '{k}' is not in docs/api.md's list")


# ---------------------------------------------------------------- 4. metrics

METRIC = r"(?:kronos|process)_[a-z0-9_]+"


def exposition(text):
    """{name: [labels dict, ...]} of a Prometheus text document (histograms under the base
    name, with their _bucket/_sum/_count samples)."""
    types = dict(re.findall(rf"^# TYPE ({METRIC}) (\w+)$", text, re.M))
    series = {n: [] for n in types}
    for name, labels in re.findall(rf"^({METRIC})(?:\{{(.*?)\}})? ", text, re.M):
        base = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                base = name[:-len(suf)]
        series.setdefault(base, []).append(dict(re.findall(r'(\w+)="([^"]*)"', labels)))
    return types, series


def serve_metrics(kronos, tmp):
    cfg = os.path.join(tmp, "serve.json")
    with open(cfg, "w") as f:
        json.dump({"profiles": [{"name": "day", "from": "00:00", "to": "23:59",
                                 "batch_wait_ms": 10}]}, f)
    env = dict(os.environ, KRONOS_DB=os.path.join(tmp, "store.db"))
    err_path = os.path.join(tmp, "serve.err")
    with open(err_path, "w") as err:
        proc = subprocess.Popen([kronos, "serve", "--port", "0", "--quant", "int8", "--config",
                                 cfg, "--threads", "1"], stdout=subprocess.DEVNULL,
                                stderr=err, env=env)
    try:
        url = None
        deadline = time.time() + 120
        while not url and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
            with open(err_path) as f:
                m = re.search(r"listening on (http://\S+)", f.read())
            url = m and m.group(1)
        if not url:
            with open(err_path) as f:
                sys.exit(f"kronos serve did not start: {f.read()}")
        # Requests first: kronos_http_requests_total{route,code} appears with the answers.
        with urllib.request.urlopen(url + "/health", timeout=30) as r:
            r.read()
        try:
            urllib.request.urlopen(urllib.request.Request(url + "/v1/forecast", data=b"{}"),
                                   timeout=30)
        except urllib.error.HTTPError as e:  # 400: no candles
            e.read()
        # A request is counted when the server has finished with it, which can be a moment
        # after the client read its answer (under a sanitizer build and a busy machine, after
        # the next request): scrape until the forecast's answer is in, for 30 s at most.
        deadline = time.time() + 30
        while True:
            with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
                text = r.read().decode()
            # The duration histograms are registered for every route at start, so only
            # the request counter says the forecast's answer has been counted.
            if 'kronos_http_requests_total{route="/v1/forecast"' in text \
                    or time.time() > deadline:
                return text
            time.sleep(0.1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def selectors(expr):
    """(metric, {label: (op, value)}) of each series selector in a PromQL expression."""
    out = []
    for name, body in re.findall(rf"({METRIC})(?:\{{([^}}]*)\}})?", expr):
        matchers = {k: (op, v) for k, op, v in
                    re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', body or "")}
        out.append((name, matchers))
    return out


def check_metrics(kronos, src, tmp):
    types, series = exposition(serve_metrics(kronos, tmp))

    def base(name):
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[:-len(suf)]) == "histogram":
                return name[:-len(suf)]
        return name

    api = read(src, "docs/api.md")
    table = api.split("## Metrics (`GET /metrics`)", 1)[1]
    table = table.split("| series | type | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for row in table.split("\n")[2:]:
        for name, labels in re.findall(rf"`({METRIC})(?:\{{([a-z_,]+)\}})?`", row.split("|")[1]):
            documented[name] = set(labels.split(",")) if labels else set()
    for name, labels in sorted(documented.items()):
        if name not in series:
            fail(f"docs/api.md documents {name}, which /metrics does not expose")
            continue
        seen = set().union(*series[name]) - {"le"} if series[name] else set()
        if labels != seen:
            fail(f"docs/api.md: {name}{{{','.join(sorted(labels))}}}, /metrics has labels "
                 f"{sorted(seen)}")
    for name in sorted(set(series) - set(documented)):
        fail(f"/metrics exposes {name}, which docs/api.md's metrics table does not document")

    exprs = re.findall(r"expr: (\|\n(?:\s{10,}.*\n)+|.*)", read(src, "deploy/prometheus-alerts.yml"))
    promql = "\n".join(b for b in code_blocks(read(src, "deploy/README.md"))
                       if "rate(" in b or "histogram_quantile" in b)
    for where, text in (("deploy/prometheus-alerts.yml", "\n".join(exprs)),
                        ("deploy/README.md", promql)):
        for name, matchers in selectors(text):
            b = base(name)
            if b not in series:
                fail(f"{where}: {name} is not exposed by /metrics")
                continue
            if name != b and name[len(b):] not in ("_bucket", "_sum", "_count"):
                fail(f"{where}: {name}: no such sample")
            for label, (op, value) in matchers.items():
                if label == "job":  # added by Prometheus at scrape
                    continue
                values = {s.get(label) for s in series[b]} - {None}
                if not values:
                    fail(f"{where}: {name}{{{label}...}}: /metrics has no label '{label}'")
                elif op == "=" and value not in values:
                    fail(f"{where}: {name}{{{label}=\"{value}\"}}: /metrics has only "
                         f"{sorted(values)}")


# ---------------------------------------------------------------- 5. the C API page

def check_c_api(src):
    decl = ""
    for path in glob.glob(os.path.join(src, "include", "**", "*.h"), recursive=True):
        with open(path, encoding="utf-8") as f:
            decl += f.read()
    declared = set(re.findall(r"\b(?:kr|KR|KRONOS)_[A-Za-z0-9_]*[A-Za-z0-9]\b", decl))
    page = read(src, "docs/c-api.md")
    for ident in sorted(set(re.findall(r"\b(?:kr|KR|KRONOS)_[A-Za-z0-9_]*[A-Za-z0-9]\b", page))):
        if ident not in declared and ident != "KRONOS_HOME":  # an environment variable
            fail(f"docs/c-api.md names {ident}, which no public header declares")


# ---------------------------------------------------------------- 6. tests cited by name

def check_cited_tests(src):
    files = glob.glob(os.path.join(src, "tests", "**", "*"), recursive=True) + \
        glob.glob(os.path.join(src, "python", "tests", "*.py"))
    names, text = set(), ""
    for path in files:
        if os.path.isfile(path):
            names.add(os.path.basename(path))
            with open(path, encoding="utf-8", errors="replace") as f:
                text += f.read()
    docs = ["README.md", "deploy/README.md"] + sorted(
        os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "docs", "*.md")))
    for rel in docs:
        for cited in sorted(set(re.findall(r"\btest_[a-z0-9_]+(?:\.py|\.c|\.sh)?\*?",
                                           read(src, rel)))):
            stem = cited.rstrip("*")
            if cited.endswith("*"):
                found = any(n.startswith(stem) for n in names)
            else:
                found = stem in names or f"{stem}.c" in names or \
                    re.search(rf"\b{re.escape(stem)}\b", text) is not None
            if not found:
                fail(f"{rel} cites {cited}, which is no test under tests/ or python/tests/")


def main():
    kronos, src = sys.argv[1], sys.argv[2]
    helps = {c: run(kronos, c, "--help").stdout for c in commands(kronos)}
    if len(helps) < 9 or not all(helps.values()):
        sys.exit(f"kronos --help lists {sorted(helps)}; some --help printed nothing")
    with tempfile.TemporaryDirectory() as tmp:
        checks = [("--help and the parser", lambda: check_help_and_parser(kronos, src, helps)),
                  ("commands in the docs", lambda: check_doc_commands(src, helps)),
                  ("config keys", lambda: check_config_keys(kronos, src, tmp)),
                  ("metrics", lambda: check_metrics(kronos, src, tmp)),
                  ("C API page", lambda: check_c_api(src)),
                  ("tests cited by name", lambda: check_cited_tests(src))]
        for name, check in checks:
            before = len(FAILURES)
            check()
            print(f"{name}: {'ok' if len(FAILURES) == before else 'FAILED'}")
    if FAILURES:
        sys.exit(f"{len(FAILURES)} disagreement(s) between the docs and kronos")
    print("docs and kronos agree")


if __name__ == "__main__":
    main()
