#!/usr/bin/env python3
"""CI test of the benchmarks' result handling (standard library only):
step-time statistics, the loss checks, the rows files, nccl_bench -j's
lines into sweep rows, compare.py end to end, and the plots' data."""
import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import rows  # noqa: E402
import stats  # noqa: E402

SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)  # the plots import plot_common

# The line test/nccl/test_bench_json.c holds nccl_bench -j to.
BENCH_LINE = ('{"op":"all_reduce","ranks":4,"bytes":1048576,"dtype":"float",'
              '"redop":"sum","native_us":41.250,"native_busbw":38.1234,'
              '"plugin_us":55.500,"plugin_busbw":28.3333,"errors":0,'
              '"nccl_version":"2.28.9","route":"env-plugin","iters":20,"graph":0,'
              '"registered":0,"cumem_bufs":0,"hosts":0,"plugin_env":["NCCL_PASS_SM=1"]}')
# A line of 8 bytes in nccl_bench -j's form (made-up times).
SMALL_LINE = ('{"op":"sendrecv","ranks":2,"bytes":8,"dtype":"float","redop":"sum",'
              '"native_us":9.700,"native_busbw":8.24742e-07,"plugin_us":19.400,'
              '"plugin_busbw":4.12371e-07,"errors":0,"nccl_version":"2.28.9",'
              '"route":"env-plugin","iters":20,"graph":0,"registered":0,"cumem_bufs":0,'
              '"hosts":0,"plugin_env":[]}')


def script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(SCRIPTS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Stats(unittest.TestCase):
    def test_percentiles(self):
        v = [float(x) for x in range(10, 0, -1)]
        self.assertEqual(stats.median(v), 5.5)
        self.assertAlmostEqual(stats.percentile(v, 90), 9.1)
        self.assertEqual(stats.percentile([7.0], 90), 7.0)
        with self.assertRaises(ValueError):
            stats.median([])

    def test_losses_that_track(self):
        native = [10.0, 9.0, 8.0]
        self.assertEqual(stats.loss_problems("plugin", native, [10.0, 9.0005, 8.0]), [])

    def test_first_loss(self):
        bad = stats.loss_problems("plugin", [10.0, 9.0], [10.00002, 9.0])
        self.assertEqual(len(bad), 1)
        self.assertIn("first loss", bad[0])

    def test_curve(self):
        bad = stats.loss_problems("pass_sm", [10.0, 9.0, 8.0, 7.0], [10.0, 9.0, 8.0, 7.01])
        self.assertEqual(len(bad), 1)
        self.assertIn("loss at step 3", bad[0])
        self.assertTrue(bad[0].startswith("pass_sm: "))

    def test_not_finite(self):
        bad = stats.loss_problems("plugin", [10.0, 9.0], [10.0, float("nan")])
        self.assertIn("step 1", bad[0])
        self.assertIn("not a finite number", bad[0])
        self.assertTrue(stats.finite_problems("native", [float("inf")]))
        self.assertTrue(stats.finite_problems("native", []))

    def test_lengths(self):
        self.assertIn("2 losses against native's 3",
                      stats.loss_problems("plugin", [1.0, 1.0, 1.0], [1.0, 1.0])[0])


class Rows(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "e2e.json")

    def tearDown(self):
        self.dir.cleanup()

    def test_merge_replaces_by_key(self):
        old = [{"workload": "tp", "gpus": 8, "native_ms": 1},
               {"workload": "ddp", "gpus": 4, "native_ms": 2}]
        new = [{"workload": "tp", "gpus": 8, "native_ms": 3},
               {"workload": "tp", "gpus": 4, "native_ms": 4}]
        got = rows.merge(old, new)
        self.assertEqual([(r["workload"], r["gpus"], r["native_ms"]) for r in got],
                         [("ddp", 4, 2), ("tp", 4, 4), ("tp", 8, 3)])

    def test_sweep_key(self):
        a = {"op": "alltoall", "gpus": 2, "bytes": 8, "ratio": 1}
        b = dict(a, bytes=16)
        self.assertEqual(len(rows.merge([a], [b, dict(a, ratio=2)])), 2)

    def test_file(self):
        self.assertEqual(rows.load(self.path), [])
        rows.merge_into(self.path, [{"workload": "ddp", "gpus": 2, "native_ms": 1.5}])
        rows.merge_into(self.path, [{"workload": "moe", "gpus": 2, "native_ms": 2.5}])
        with open(self.path) as f:
            text = f.read()
        # One row a line, between the brackets.
        self.assertEqual(text.count("\n"), 4)
        self.assertEqual([r["workload"] for r in rows.load(self.path)], ["ddp", "moe"])
        self.assertEqual(os.listdir(self.dir.name), ["e2e.json"])

    def test_not_a_list(self):
        with open(self.path, "w") as f:
            f.write('{"workload": "ddp"}')
        with self.assertRaises(ValueError):
            rows.load(self.path)

    def test_sweep_rows(self):
        lines = [BENCH_LINE + "\n", "\n",
                 BENCH_LINE.replace('"errors":0', '"errors":5'),
                 BENCH_LINE.replace('"bytes":1048576', '"bytes":0'),
                 BENCH_LINE.replace('"native_us":41.250,"native_busbw":38.1234',
                                    '"native_us":null,"native_busbw":null'),
                 "not json"]
        got, problems = rows.sweep_rows(lines, "abc1234", "2026-12-01")
        self.assertEqual(got, [{
            "op": "all_reduce", "gpus": 4, "bytes": 1048576, "native_busbw": 38.1234,
            "plugin_busbw": 28.3333, "native_us": 41.25, "plugin_us": 55.5,
            "ratio": round(41.25 / 55.5, 4), "nccl_version": "2.28.9",
            "commit": "abc1234", "date": "2026-12-01"}])
        self.assertEqual(len(problems), 3)
        self.assertIn("5 wrong element(s)", problems[0])
        self.assertIn("not run in both phases", problems[1])
        self.assertIn("not JSON", problems[2])

    def test_table(self):
        self.assertEqual(rows.table([]), "not yet run\n")
        t = rows.table([{"workload": "ddp", "gpus": 1, "posed": True, "native_ms": 10.0,
                         "native_p90_ms": 12.0, "plugin_ms": 15.0, "plugin_p90_ms": 16.0,
                         "nccl_version": "2.28.9", "commit": "c", "date": "d"},
                        {"op": "alltoall", "gpus": 4, "bytes": 8, "native_busbw": 1.0,
                         "plugin_busbw": 0.5, "ratio": 0.5}]).splitlines()
        self.assertEqual(t[2], "| ddp | 1, posed: times meaningless | 10.0 (12.0) | 15.0 (16.0) "
                               "| - | 1.500 | - | 2.28.9 | c | d |")
        self.assertEqual(t[3], "")
        self.assertEqual(t[6], "| alltoall | 4 | 8 | 1.00 | 0.50 | 0.500 | - | - | - |")

    def test_small_sizes(self):
        # The ratio of a few bytes' times, not of bandwidths rounded to nothing.
        (r,), problems = rows.sweep_rows([SMALL_LINE], "c", "d")
        self.assertEqual(problems, [])
        self.assertEqual(r["ratio"], 0.5)
        self.assertEqual(r["native_busbw"], 8.24742e-07)
        old = SMALL_LINE.replace("8.24742e-07", "0.0000").replace("4.12371e-07", "0.0000")
        self.assertEqual(rows.sweep_rows([old], "c", "d")[0][0]["ratio"], 0.5)

    def test_sweep_cli(self):
        jsonl = os.path.join(self.dir.name, "b.jsonl")
        with open(jsonl, "w") as f:
            f.write(BENCH_LINE + "\n")
        with contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(rows.main(["sweep", self.path, jsonl, "--commit", "c0"]), 0)
        self.assertEqual(rows.load(self.path)[0]["commit"], "c0")


def run(mode, losses, step_ms, **extra):
    r = {"workload": "ddp", "mode": mode, "gpus": 2, "ranks": 2, "posed": False,
         "nccl_version": "2.28.9", "config": {"layers": 2}, "losses": losses,
         "step_ms": step_ms, "replicas_agree": True}
    r.update(extra)
    return r


class Compare(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rows = os.path.join(self.dir.name, "e2e.json")

    def tearDown(self):
        self.dir.cleanup()

    def call(self, runs):
        args = [self.rows, "--commit", "c1", "--date", "2026-12-01"]
        for mode, r in runs.items():
            path = os.path.join(self.dir.name, mode + ".json")
            with open(path, "w") as f:
                json.dump(r, f)
            args.append(f"{mode}={path}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = compare.main(args)
        return rc, out.getvalue()

    def good(self):
        losses = [10.0, 9.5, 9.0]
        return {"native": run("native", losses, [10.0, 12.0, 11.0]),
                "plugin": run("plugin", [10.0, 9.5001, 9.0], [20.0, 21.0, 22.0]),
                "pass_sm": run("pass_sm", losses, [30.0, 30.0, 40.0])}

    def test_row(self):
        rc, out = self.call(self.good())
        self.assertEqual(rc, 0, out)
        (r,) = rows.load(self.rows)
        self.assertEqual(r, {"workload": "ddp", "gpus": 2, "nccl_version": "2.28.9",
                             "commit": "c1", "date": "2026-12-01", "steps": 3,
                             "native_ms": 11.0, "native_p90_ms": 11.8,
                             "plugin_ms": 21.0, "plugin_p90_ms": 21.8,
                             "pass_sm_ms": 30.0, "pass_sm_p90_ms": 38.0})

    def test_posed(self):
        runs = self.good()
        for r in runs.values():
            r.update(posed=True, gpus=1)
        self.assertEqual(self.call(runs)[0], 0)
        self.assertIs(rows.load(self.rows)[0]["posed"], True)

    def test_first_loss_fails(self):
        runs = self.good()
        runs["plugin"]["losses"][0] = 10.001
        rc, out = self.call(runs)
        self.assertEqual(rc, 1)
        self.assertIn("FAILED: ddp on 2 GPU(s): plugin: first loss", out)
        self.assertEqual(rows.load(self.rows), [])

    def test_replicas_fail(self):
        runs = self.good()
        runs["pass_sm"]["replicas_agree"] = False
        rc, out = self.call(runs)
        self.assertEqual(rc, 1)
        self.assertIn("pass_sm: the ranks' copies", out)

    def test_missing_and_failed(self):
        runs = self.good()
        del runs["pass_sm"]
        runs["plugin"] = {"workload": "ddp", "mode": "plugin", "error": "RuntimeError: NCCL"}
        rc, out = self.call(runs)
        self.assertEqual(rc, 1)
        self.assertIn("plugin: failed: RuntimeError: NCCL", out)
        self.assertIn("pass_sm: not given", out)

    def test_different_models(self):
        runs = self.good()
        runs["plugin"]["config"] = {"layers": 12}
        rc, out = self.call(runs)
        self.assertEqual(rc, 1)
        self.assertIn("not of one workload", out)


class Plots(unittest.TestCase):
    def test_e2e_panels(self):
        p = script("plot_e2e").panels([
            {"workload": "moe", "gpus": 4, "native_ms": 3, "native_p90_ms": 4},
            {"workload": "ddp", "gpus": 4, "native_ms": 1, "plugin_ms": 2},
            {"workload": "tp", "gpus": 1, "posed": True, "native_ms": 5},
            {"op": "all_reduce", "gpus": 4, "bytes": 8}])
        self.assertEqual([t for t, _ in p], ["1 GPU, 2 processes posed as hosts: timings meaningless",
                                             "4 GPUs"])
        self.assertEqual([w for w, _ in p[1][1]], ["ddp", "moe"])
        self.assertEqual(p[1][1][1][1]["native"], (3, 4))
        self.assertEqual(p[1][1][0][1]["pass_sm"], (None, None))

    def test_sweep_series(self):
        s = script("plot_sweep")
        data = s.series([
            {"op": "alltoall", "gpus": 4, "bytes": 64, "ratio": 0.5},
            {"op": "alltoall", "gpus": 4, "bytes": 8, "ratio": 0.25},
            {"op": "alltoall", "gpus": 2, "bytes": 8, "ratio": None},
            {"workload": "ddp", "gpus": 2}])
        self.assertEqual(data, {"alltoall": {4: [(8, 0.25), (64, 0.5)]}})
        self.assertEqual(s.size_label(1 << 30), "1 GiB")
        self.assertEqual(s.size_label(3 << 19), "1.5 MiB")


if __name__ == "__main__":
    unittest.main()
