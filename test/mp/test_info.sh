#!/bin/sh
# symmem-info as CI runs it, without a GPU: the report and its JSON (the
# no-GPU answer, the files, the variables and where they came from, the
# env plugin's part), a malformed variable (exit 2 and the plugin's own
# error text), and --selftest on its host-memory and TCP paths, which
# must pass, and fail when one byte is flipped on the sender.
# CUDA_VISIBLE_DEVICES= hides any GPU, so the answers are the same on a
# GPU host.  $1: symmem-info, $2: the net plugin, $3: bench_pingpong,
# $4: docs/env.md, $5: the directory of the fake CUDA driver
# (test/fakedriver/), with which --selftest runs its GPU pair too; $6 and
# $7: those of NCCL 2.21 and of an NCCL before it as their binaries name
# the plugin tables (fakenccl/), for the ABIs each would take.
info="$1"
lib="$2"
pingpong="$3"
env_md="$4"
fake_driver="$5"
nccl_2_21="$6"
nccl_2_19="$7"
builddir=$(dirname "$lib")
tmp=$(mktemp -d /tmp/symmem-info-test-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/tap.sh"

if ! command -v python3 >/dev/null; then
	echo "1..0 # SKIP no python3 to read the JSON"
	exit 0
fi
export CUDA_VISIBLE_DEVICES=
unset NCCL_ENV_PLUGIN NCCL_NET_PLUGIN NCCL_NET NCCL_P2P_DISABLE NCCL_SHM_DISABLE
unset NCCL_SYMMEM_BACKEND NCCL_SYMMEM_COPY_TIMEOUT SYMMEM_INFO_TEST_CORRUPT

# json FILE EXPRESSION: the Python expression over the parsed file (d;
# var(name) is one of its variables) is true.
json() {
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
def var(name, key="variables"):
    return [v for v in d[key] if v["name"] == name][0]
def path(name):
    return [p for p in d["selftest"]["paths"] if p["path"] == name][0]
def documented(section):
    rows, inside = [], False
    for line in open(sys.argv[3]):
        if line.startswith("## "):
            inside = line.strip() == "## " + section
        elif inside and line.startswith("| `"):
            rows.append(line.split("`")[1])
    return rows
sys.exit(0 if eval(sys.argv[2]) else 1)' "$@"
}

# run NAME ARGS...: the tool's output in $tmp/NAME, its exit status in $rc.
run() {
	out="$tmp/$1"
	shift
	"$info" "$@" >"$out" 2>"$out.err"
	rc=$?
}

echo "1..35"

run text
[ $rc = 1 ]; check $? "no GPU: exit status 1 (got $rc)"
grep -Eq "^  why: (no CUDA driver|the CUDA driver shows no GPU)" "$tmp/text"
check $? "no GPU: the verdict says why"
grep -q "^  - name: NCCL_SYMMEM_COPY_TIMEOUT" "$tmp/text" && grep -A1 "name: NCCL_SYMMEM_COPY_TIMEOUT" "$tmp/text" | grep -q "value: 60"
check $? "the text lists the plugin's variables with their values"

run json --json
[ $rc = 1 ] && json "$tmp/json" 'd["verdict"]["exit_status"] == 1 and d["verdict"]["usable"] is False'
check $? "--json parses, exit status 1 in it as out of it"
json "$tmp/json" 'd["files"]["net_plugin"]["path"] == "'"$(realpath "$lib")"'" and "ncclNetPlugin_v11" in d["files"]["net_tables"] and "ncclTunerPlugin_v5" in d["files"]["tuner_tables"] and "ncclTunerPlugin_v2" in d["files"]["tuner_tables"]'
check $? "--json: the net plugin beside the tool, its net and tuner tables"
json "$tmp/json" '"ncclEnvPlugin_v1" in d["files"]["env_tables"] and d["files"]["env_plugin"]["path"].endswith("/libnccl-env-symmem.so")'
check $? "--json: the env plugin beside it and its env tables"
json "$tmp/json" 'd["files"]["net_plugin"]["build"] == d["build"] and d["files"]["copy_helper"]["build"] == d["build"] and "(" in d["build"]'
check $? "--json: the library and copy helper are this build (version and commit)"
json "$tmp/json" 'd["gpu"]["driver"]["loaded"] is False and d["gpu"]["gpus"] == [] and d["gpu"]["gpu_count"] == 0'
check $? "--json: no driver, no GPU"
json "$tmp/json" 'var("NCCL_SYMMEM_COPY_TIMEOUT") == {"name": "NCCL_SYMMEM_COPY_TIMEOUT", "value": "60", "origin": "default", "meaning": "seconds a copy may take before its connection fails", "error": None}'
check $? "--json: a variable's value, origin, meaning and no error"
json "$tmp/json" 'len(d["variables"]) > 40 and all("no description" not in v["meaning"] for v in d["variables"] + d["nccl_variables"])'
check $? "--json: every variable has a meaning"
json "$tmp/json" '[v["name"] for v in d["variables"]] == documented("The plugin'"'"'s configuration") and sorted(v["name"] for v in d["nccl_variables"]) == sorted(documented("NCCL'"'"'s variables the plugin reads or sets"))' "$env_md"
check $? "--json: the variables are those docs/env.md lists"
json "$tmp/json" 'd["verdict"]["nccl_runs_plugin"] is False and var("NCCL_P2P_DISABLE", "nccl_variables")["origin"] == "unset"'
check $? "--json: without NCCL_ENV_PLUGIN or NCCL_NET_PLUGIN NCCL does not run the plugin"

# Which table of each kind an NCCL takes, from the names its binary holds:
# NCCL 2.21 takes net v8 and tuner v2 and has no env plugins; an older one
# takes no net table at all, which the verdict says.
LD_LIBRARY_PATH="$nccl_2_21" run nccl221 --json
json "$tmp/nccl221" '(n := d["gpu"]["nccl"])["version"] == "2.21.5" and n["net_abi"] == "v8 (it looks for v8, v7, v6, v5)" and n["tuner_abi"] == "v2 (it looks for v2)" and n["env_abi"] == "none: this NCCL loads no env plugin"'
check $? "NCCL 2.21: net v8, tuner v2, no env plugin"
json "$tmp/nccl221" 'not any("never loads the plugin" in n for n in d["verdict"]["notes"])'
check $? "NCCL 2.21: no note that it never loads the plugin"
LD_LIBRARY_PATH="$nccl_2_19" run nccl219 --json
json "$tmp/nccl219" 'd["gpu"]["nccl"]["net_abi"] == "none: it looks for v7, v6, v5, v4, the plugin has v12, v11, v10, v9, v8" and any("looks for no net table this plugin exports" in n for n in d["verdict"]["notes"])'
check $? "an NCCL before 2.21: no net table taken, and the verdict says so"

NCCL_SYMMEM_BACKEND=tcp NCCL_SYMMEM_COPY_HELPER_PATH="$(printf '/tmp/a"b\\c\001d')" run set --json
json "$tmp/set" 'var("NCCL_SYMMEM_BACKEND")["origin"] == "user" and var("NCCL_SYMMEM_BACKEND")["meaning"] == "TCP for every connection, one host too"'
check $? "--json: a variable the user set, and its meaning at that value"
json "$tmp/set" 'var("NCCL_SYMMEM_COPY_HELPER_PATH")["value"] == "/tmp/a\"b\\c\x01d"'
check $? "--json: quotes, backslashes and control bytes escaped"
# UTF-8 kept, and what strict decoders refuse replaced: a surrogate, an
# overlong form and a code point past U+10FFFF (the bytes read as UTF-8
# here whatever the locale).
NCCL_SYMMEM_COPY_HELPER_PATH="$(printf '/tmp/\303\251\342\202\254\360\237\230\200-\355\240\200-\340\200\257-\364\220\200\200')" run utf8 --json
json "$tmp/utf8" '[v["value"] for v in json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))["variables"] if v["name"] == "NCCL_SYMMEM_COPY_HELPER_PATH"] == ["/tmp/\u00e9\u20ac\U0001f600-" + "\ufffd" * 3 + "-" + "\ufffd" * 3 + "-" + "\ufffd" * 4]'
check $? "--json: valid UTF-8 even where a value is not"

NCCL_ENV_PLUGIN=symmem LD_LIBRARY_PATH="$builddir" run env --json
json "$tmp/env" 'd["files"]["env_plugin_in_use"] and var("NCCL_P2P_DISABLE", "nccl_variables") == {"name": "NCCL_P2P_DISABLE", "value": "1", "origin": "env plugin", "meaning": var("NCCL_P2P_DISABLE", "nccl_variables")["meaning"]}'
check $? "NCCL_ENV_PLUGIN=symmem: the env plugin's variables, with their origin"
json "$tmp/env" 'd["files"]["nccl_opens_it"] and d["verdict"]["nccl_runs_plugin"] and d["files"]["net_plugin"]["path"] == "'"$(realpath "$lib")"'"'
check $? "NCCL_ENV_PLUGIN=symmem: NCCL would open the net plugin beside the env plugin"
NCCL_NET_PLUGIN="$lib" NCCL_NET=IB run ib --json
json "$tmp/ib" 'd["files"]["nccl_opens_it"] and not d["verdict"]["nccl_runs_plugin"] and "NCCL_NET=IB" in d["verdict"]["nccl_runs_plugin_why"]'
check $? "NCCL_NET=IB: NCCL opens the plugin but runs another net"

NCCL_SYMMEM_COPY_TIMEOUT=abc run bad
want="NCCL_SYMMEM_COPY_TIMEOUT='abc' is not a decimal number (accepted: seconds, a decimal number > 0 and <= 86400, e.g. 10 or 0.5)"
[ $rc = 2 ] && grep -qF "$want" "$tmp/bad"
check $? "a malformed variable: exit status 2 and the error text (got $rc)"
NCCL_SYMMEM_COPY_TIMEOUT=abc run badj --json
[ $rc = 2 ] && json "$tmp/badj" 'd["config_error"] == var("NCCL_SYMMEM_COPY_TIMEOUT")["error"] == sys.argv[3] and d["verdict"]["exit_status"] == 2' "$want"
check $? "--json: the malformed variable's error, at config_error and at the variable"
# The plugin's own init WARN, through its net table (bench_pingpong's
# harness prints it with HARNESS_VERBOSE).
NCCL_SYMMEM_COPY_TIMEOUT=abc HARNESS_VERBOSE=1 SYMMEM_PLUGIN="$lib" "$pingpong" 8 1 >/dev/null 2>"$tmp/warn"
grep -qF "NET/symmem: $want" "$tmp/warn" && grep -qF "NET/symmem: $want" "$tmp/bad"
check $? "the tool's error text is the one the plugin's init WARNs"

run usage --bogus
[ $rc = 2 ] && grep -q "^usage: symmem-info" "$tmp/usage.err"
check $? "an unknown argument: usage and exit status 2"

run test --selftest --json
[ $rc = 0 ] && json "$tmp/test" 'path("host")["result"] == "passed" and path("tcp")["result"] == "passed" and d["exit_status"] == 0 and d["selftest"]["failed"] == 0'
check $? "--selftest: the host-memory and TCP paths pass (got $rc)"
json "$tmp/test" 'path("gpu")["result"] == "skipped" and path("gpu")["why"] and path("tcp")["latency_us"] > 0 and path("tcp")["gbps_a_to_b"] > 0 and path("tcp")["gbps_b_to_a"] > 0'
check $? "--selftest: the GPU path skipped with the reason; latency and bandwidth given"
SYMMEM_INFO_TEST_CORRUPT=tcp run bad_tcp --selftest --json
[ $rc = 1 ] && json "$tmp/bad_tcp" 'path("host")["result"] == "passed" and path("tcp")["result"] == "failed" and "arrived as" in path("tcp")["why"] and d["exit_status"] == 1'
check $? "--selftest: one byte flipped on the TCP path's sender fails that path (got $rc)"
SYMMEM_INFO_TEST_CORRUPT=host run bad_host --selftest
[ $rc = 1 ] && grep -q "result: failed" "$tmp/bad_host" && grep -q "arrived as" "$tmp/bad_host"
check $? "--selftest: one byte flipped on the host path's sender fails that path (got $rc)"
# The GPU pair on a driver without GPU (one device, two processes, the
# copy helpers): it runs, and a flipped byte fails it.
[ -e "$fake_driver/libcuda.so.1" ] || echo "test_info.sh: no $fake_driver/libcuda.so.1 (build it)" >&2
CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH="$fake_driver" run fake --selftest --json
[ $rc = 0 ] && json "$tmp/fake" 'path("gpu0-gpu0")["result"] == "passed" and d["selftest"]["skipped"] == 0 and d["selftest"]["failed"] == 0'
check $? "--selftest on a driver without GPU: its GPU pair passes (got $rc)"
SYMMEM_INFO_TEST_CORRUPT=gpu0-gpu0 CUDA_VISIBLE_DEVICES=0 LD_LIBRARY_PATH="$fake_driver" \
	run fake_bad --selftest --json
[ $rc = 1 ] && json "$tmp/fake_bad" 'path("gpu0-gpu0")["result"] == "failed" and "arrived as" in path("gpu0-gpu0")["why"]'
check $? "--selftest: one byte flipped on the GPU pair's sender fails that path (got $rc)"
NCCL_SYMMEM_COPY_TIMEOUT=abc run bad_test --selftest
[ $rc = 2 ] && grep -qF "$want" "$tmp/bad_test"
check $? "--selftest with a malformed variable: exit status 2 and the error text (got $rc)"

# With an inner net plugin the plugin sets no NCCL_NET_GDR_LEVEL, and the
# report says what GPU buffers the job then gets (NCCL's own rule).
NCCL_SYMMEM_INNER_NET=libnccl-net.so NCCL_P2P_DISABLE=1 run inner --json
json "$tmp/inner" '"NCCL'"'"'s own GPU-NIC distance rule" in d["rdma"]["inner_gpu_buffers"] and "shared-memory ring" in d["rdma"]["inner_gpu_buffers"]'
check $? "--json: with an inner plugin, NCCL's GPU-NIC rule and what it gives (got $rc)"
NCCL_SYMMEM_INNER_NET=libnccl-net.so NCCL_NET_GDR_LEVEL=PXB run inner_lvl --json
json "$tmp/inner_lvl" '"NCCL_NET_GDR_LEVEL=PXB (yours)" in d["rdma"]["inner_gpu_buffers"]'
check $? "--json: with an inner plugin, the user's NCCL_NET_GDR_LEVEL named (got $rc)"

# A net plugin that prints on load (the tool opens NCCL_NET_PLUGIN in a
# child): its print must not land inside the JSON report.
printf '#include <stdio.h>\n__attribute__((constructor)) static void noisy(void) { puts("hello from a noisy plugin"); fflush(stdout); }\n' >"$tmp/noisy.c"
if cc -shared -fPIC -o "$tmp/libnoisy.so" "$tmp/noisy.c" 2>/dev/null; then
	NCCL_NET_PLUGIN="$tmp/libnoisy.so" run noisy --json
	json "$tmp/noisy" 'True' && ! grep -q "noisy plugin" "$tmp/noisy"
	check $? "--json stays JSON when a plugin it opens prints on load (got $rc)"
else
	echo "ok 28 # SKIP no C compiler for the noisy plugin"
fi
exit $fail
