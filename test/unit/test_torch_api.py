#!/usr/bin/env python3
"""scripts/torch_registered.py on a PyTorch without the NCCL allocator API
exits 2 with one line naming what is missing, before it starts any
process group (standard library only: stand-in `torch` packages, no GPU).

    test_torch_api.py SRC_ROOT"""
import os
import subprocess
import sys
import tempfile

# What each stand-in lacks, and the words the script must use for it.
CASES = {
    "no use_mem_pool": ("class MemPool: pass\n", "class ProcessGroupNCCL: pass\n",
                        "torch.cuda.use_mem_pool"),
    "no mem_allocator": ("class MemPool: pass\ndef use_mem_pool(pool): pass\n",
                         "class ProcessGroupNCCL: pass\n",
                         "ProcessGroupNCCL.mem_allocator"),
    "no NCCL": ("class MemPool: pass\ndef use_mem_pool(pool): pass\n", "",
                "no NCCL process group"),
}

DIST = """def is_available(): return True
def is_nccl_available(): return {nccl}
def init_process_group(*a, **k): raise SystemExit("init_process_group called")
"""


def run(root, cuda, dist, nccl):
    with tempfile.TemporaryDirectory() as tmp:
        pkg = os.path.join(tmp, "torch")
        os.makedirs(os.path.join(pkg, "distributed"))
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write('__version__ = "2.6.0+standin"\nfrom . import cuda, distributed\n')
        with open(os.path.join(pkg, "cuda.py"), "w") as f:
            f.write(cuda)
        with open(os.path.join(pkg, "distributed", "__init__.py"), "w") as f:
            f.write(DIST.format(nccl=nccl) + dist)
        env = dict(os.environ, PYTHONPATH=tmp, PYTHONDONTWRITEBYTECODE="1",
                   RANK="0", WORLD_SIZE="2")
        return subprocess.run([sys.executable, os.path.join(root, "scripts", "torch_registered.py")],
                              capture_output=True, text=True, env=env, timeout=60)


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    print("1..%d" % len(CASES))
    failed = 0
    for n, (name, (cuda, dist, words)) in enumerate(CASES.items(), 1):
        r = run(argv[1], cuda, dist, "bool(%r)" % dist)
        ok = r.returncode == 2 and words in r.stderr and "2.7" in r.stderr and not r.stdout
        print("%s %d - %s" % ("ok" if ok else "not ok", n, name))
        if not ok:
            print("# exit %d, stdout %r, stderr %r" % (r.returncode, r.stdout, r.stderr))
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
