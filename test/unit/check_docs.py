#!/usr/bin/env python3
"""The pages a user reads name only what exists (standard library only).

README.md, docs/*.md and bench/results/*.md may name a script
(scripts/x.sh, or x.py alone), a mode of scripts/gpu_check.sh, a variable
of the plugin's (NCCL_SYMMEM_*, checked against plugin/config/config_vars.h),
or a file or folder of the repository (bench/..., plugin/..., a relative
link) only if it exists in the source tree.  A PyTorch call their code
shows (torch.x, dist.x, backend.x) must be one a script of the
repository (scripts/*.py, bench/**/*.py) makes, so that a recipe is what
a tested script runs.

Commands of earlier trees are kept only in an archive list: a section
whose heading starts with "Archive" (up to the next heading of its level
or above).  Each item of it names the commit that ran it (7-40 hex
digits), which must be a commit of the repository, and the scripts it
names must exist at that commit (checked where git and the history are
there).  A line that says `git show <commit>:...` names history on
purpose and is skipped.

The README's performance table must agree with the results page it cites
(bench/results/matrix.md): each ratio is that page's figure for the same
size, GPU count and op, to two decimals; each GB/s figure the README
quotes must appear in a results page linked from the same paragraph; and
"below about N MiB" must be the smallest size of the table from which
every collective of the first GPU count is at 0.95 or more.

Prints each breach and exits 1.  --planted copies the pages, plants one
breach of each kind and exits 1 unless every one is caught.

    check_docs.py SRC_ROOT
    check_docs.py --planted SRC_ROOT
"""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from decimal import Decimal, ROUND_HALF_UP

SKIP_DIRS = {'.git', 'subprojects'}
HASH = re.compile(r'\b[0-9a-f]{7,40}\b')
GIT_SHOW = re.compile(r'git show [0-9a-f]{7,40}[:^~]')
SCRIPT = re.compile(r'(?<![\w/.$-])((?:[\w.-]+/)*[\w-]+\.(?:sh|py))(?![\w/-])')
VAR = re.compile(r'\bNCCL_SYMMEM_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_]*\*)')
LINK = re.compile(r'\]\(([^)\s#]+)(?:#[^)]*)?\)')
CODE_SPAN = re.compile(r'`([^`]+)`')
MODE = re.compile(r'gpu_check\.sh\s+([a-z][\w-]*)')
TORCH_CALL = re.compile(r'\b(?:torch|dist|backend)(?:\.\w+)*\.(\w+)')
OUTPUT = re.compile(r'(?:>|\btee|--json|--out|-o)\s*$')
HEADING = re.compile(r'^(#+)\s+(.*)')
LIST_ITEM = re.compile(r'^\s*(?:[-*]|\d+\.)\s')


def pages(root):
    out = [os.path.join(root, 'README.md')]
    out += sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
    out += sorted(glob.glob(os.path.join(root, 'bench', 'results', '*.md')))
    return [p for p in out if os.path.isfile(p)]


class Tree:
    def __init__(self, root, gitroot=None):
        self.root = root
        self.gitroot = gitroot or root
        self.basenames = set()
        self.topdirs = set()
        for name in os.listdir(root):
            full = os.path.join(root, name)
            if (os.path.isdir(full) and not name.startswith(('.', 'build'))
                    and name not in SKIP_DIRS):
                self.topdirs.add(name)
        for d, dirs, files in os.walk(root):
            rel = os.path.relpath(d, root)
            top = rel.split(os.sep)[0]
            if rel != '.' and top not in self.topdirs:
                dirs[:] = []
                continue
            self.basenames.update(files)
        cfg = os.path.join(root, 'plugin', 'config')
        self.vars = set(re.findall(r'X\((NCCL_\w+),', read(os.path.join(cfg, 'config_vars.h'))))
        # and those the plugin writes for itself (CONFIG_*_SET)
        for h in glob.glob(os.path.join(cfg, '*.h')):
            self.vars.update(re.findall(r'#define CONFIG_\w+ "(NCCL_SYMMEM_\w+)"', read(h)))
        self.modes = modes_of(read(os.path.join(root, 'scripts', 'gpu_check.sh')))
        # what the repository's PyTorch scripts call: ".name"
        self.torch_attrs = set()
        for py in (glob.glob(os.path.join(root, 'scripts', '*.py')) +
                   glob.glob(os.path.join(root, 'bench', '**', '*.py'), recursive=True)):
            self.torch_attrs.update(re.findall(r'\.(\w+)', read(py)))
        self.git = git(self.gitroot, 'rev-parse', '--show-toplevel') is not None
        self.path = re.compile(r'(?<![\w./-])((?:%s)/[\w./-]*[\w/])' %
                               '|'.join(sorted(self.topdirs)))

    def commit(self, h):
        return git(self.gitroot, 'cat-file', '-t', h) == 'commit'

    def at(self, h, path):
        return git(self.gitroot, 'cat-file', '-e', '%s:%s' % (h, path)) is not None

    def modes_at(self, h):
        return modes_of(git(self.gitroot, 'show', '%s:scripts/gpu_check.sh' % h) or '')


def modes_of(script):
    """The modes gpu_check.sh takes: its usage line's [a|b|...] and case list."""
    modes = set()
    for m in re.finditer(r'Usage: \S*gpu_check\.sh \[([\w|-]+)\]', script):
        modes.update(m.group(1).split('|'))
    m = re.search(r'case \$MODE in\n(.*?)\)', script, re.S)
    if m:
        modes.update(w.strip() for w in m.group(1).split('|'))
    return modes


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def git(root, *args):
    try:
        r = subprocess.run(['git', '-C', root] + list(args), capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def placeholder(tok):
    return any(c in tok for c in '<>*$') or 'NAME' in tok or '...' in tok


def exists(tree, page, tok):
    tok = tok.rstrip('.')
    if os.path.exists(os.path.join(tree.root, tok)):
        return True
    # a program built there: its folder's meson.build names it
    build = os.path.join(tree.root, os.path.dirname(tok), 'meson.build')
    if os.path.isfile(build) and re.search(r'\b%s\b' % re.escape(os.path.basename(tok)),
                                           read(build)):
        return True
    return os.path.exists(os.path.join(os.path.dirname(page), tok))


def check_line(tree, page, line, code, where, out):
    """Names in one line that must exist at HEAD."""
    for m in SCRIPT.finditer(line):
        tok = m.group(1)
        if placeholder(tok):
            continue
        if '/' in tok:
            if not exists(tree, page, tok):
                out.append('%s: script %s does not exist' % (where, tok))
        elif tok not in tree.basenames:
            out.append('%s: script %s does not exist' % (where, tok))
    for m in tree.path.finditer(line):
        tok = m.group(1)
        if placeholder(tok) or SCRIPT.fullmatch(tok) or line[m.end():m.end() + 1] in '*{<$':
            continue
        if OUTPUT.search(line[:m.start()]):
            continue	# a file the command writes
        if '.' not in tok.rsplit('/', 1)[-1] and not any(tok in c for c in code):
            continue	# "plugin/native" in prose is no path
        if not exists(tree, page, tok):
            out.append('%s: path %s does not exist' % (where, tok))
    for m in LINK.finditer(line):
        tok = m.group(1)
        if re.match(r'[a-z]+:', tok) or placeholder(tok):
            continue
        if not os.path.exists(os.path.join(os.path.dirname(page), tok)):
            out.append('%s: link %s leads nowhere' % (where, tok))
    for m in VAR.finditer(line):
        if m.group(0) not in tree.vars:
            out.append('%s: variable %s is not the plugin\'s (plugin/config/config_vars.h)'
                       % (where, m.group(0)))
    for span in code:
        for m in MODE.finditer(span):
            if m.group(1) not in tree.modes:
                out.append('%s: gpu_check.sh has no mode %s' % (where, m.group(1)))
        for m in TORCH_CALL.finditer(span):
            if m.group(0) in tree.basenames:
                continue	# transport/backend.c
            if m.group(1) not in tree.torch_attrs:
                out.append('%s: no script of the repository calls %s' % (where, m.group(0)))


def check_archive_item(tree, item, where, out):
    hashes = [h for h in HASH.findall(' '.join(item)) if not h.isdigit()]
    if not hashes:
        out.append('%s: archive item names no commit' % where)
        return
    if not tree.git:
        return
    commits = [h for h in hashes if tree.commit(h)]
    if not commits:
        out.append('%s: archive item\'s %s is no commit of this repository' %
                   (where, hashes[0]))
        return
    for line in item:
        for m in MODE.finditer(line):
            if not any(m.group(1) in tree.modes_at(h) for h in commits):
                out.append('%s: gpu_check.sh had no mode %s at %s either' %
                           (where, m.group(1), commits[0]))
        for m in SCRIPT.finditer(line):
            tok = m.group(1)
            if '/' in tok and not placeholder(tok) and \
                    not any(tree.at(h, tok) for h in commits):
                out.append('%s: %s is not in commit %s either' % (where, tok, commits[0]))


def check_page(tree, page, out):
    rel = os.path.relpath(page, tree.root)
    fenced = False
    archive = 0		# the archive heading's level, 0 outside one
    item, item_at = [], None
    lines = read(page).split('\n')
    for n, line in enumerate(lines, 1):
        where = '%s:%d' % (rel, n)
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        h = HEADING.match(line) if not fenced else None
        if h:
            level = len(h.group(1))
            if archive and level <= archive:
                archive = 0
            if h.group(2).startswith('Archive'):
                archive = level
                continue
        if archive:
            if LIST_ITEM.match(line) or h:
                if item:
                    check_archive_item(tree, item, item_at, out)
                item, item_at = ([line], where) if LIST_ITEM.match(line) else ([], None)
            elif item:
                item.append(line)
            continue
        if GIT_SHOW.search(line):
            continue
        block = fenced or line.startswith('    ') and not LIST_ITEM.match(line)
        code = [line] if block else CODE_SPAN.findall(line)
        check_line(tree, page, line, code, where, out)
    if item:
        check_archive_item(tree, item, item_at, out)


SIZE = re.compile(r'^(\d+) ([KMG]iB)')
UNIT = {'KiB': 1 << 10, 'MiB': 1 << 20, 'GiB': 1 << 30}


def size_of(text):
    m = SIZE.match(text.strip())
    return int(m.group(1)) * UNIT[m.group(2)] if m else None


def op_of(text):
    t = text.strip().lower().replace('send/recv', 'sendrecv')
    return re.sub(r',\s*\d+ gpus?$', '', t).strip()


def tables(text):
    """Each markdown table as (header cells, rows of cells)."""
    out, cur = [], None
    for line in text.split('\n'):
        if line.startswith('|'):
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if cur is None:
                cur = (cells, [])
                out.append(cur)
            elif not all(re.fullmatch(r':?-+:?', c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return out


def results_figures(text):
    """{(size, gpus, op): [figures]} from the results page's size tables."""
    fig = {}
    for head, rows in tables(text):
        if head[0] != 'size':
            continue
        size = None
        for cells in rows:
            size = size_of(cells[0]) or size
            gpus = None
            for i, h in enumerate(head):
                if h == 'GPUs' and i < len(cells):
                    gpus = int(cells[i])
            for i, h in enumerate(head[1:], 1):
                if h == 'GPUs' or i >= len(cells) or not cells[i]:
                    continue
                g = re.search(r'(\d+) GPUs?', h)
                fig.setdefault((size, gpus or (g and int(g.group(1))), op_of(h)),
                               []).append(cells[i].strip('*'))
    return fig


def two(x):
    return Decimal(x).quantize(Decimal('0.01'), rounding=ROUND_HALF_UP)


def check_readme_figures(root, out):
    readme = read(os.path.join(root, 'README.md'))
    table = next((t for t in tables(readme) if t[0][0] == 'size'), None)
    if table is None:
        out.append('README.md: no performance table')
        return
    before = readme[:readme.find('| size |')].rstrip()
    cites = LINK.findall(before.rsplit('\n\n', 1)[-1])
    m = re.search(r'(\d+) x H\d+', before.rsplit('\n\n', 1)[-1])
    if not cites or m is None:
        out.append('README.md: the performance table cites no results page and GPU count')
        return
    page = os.path.normpath(os.path.join(root, cites[-1]))
    fig = results_figures(read(page))
    head, rows = table
    for cells in rows:
        size = size_of(cells[0])
        g = re.search(r'(\d+) x H\d+', cells[0])
        gpus = int(g.group(1)) if g else int(m.group(1))
        for h, cell in zip(head[1:], cells[1:]):
            if not cell:
                continue
            have = fig.get((size, gpus, op_of(h)), [])
            if not any(two(v) == two(cell) for v in have):
                out.append('README.md: %s %s (%d GPUs) is %s, %s says %s' %
                           (cells[0], h, gpus, cell, os.path.relpath(page, root),
                            ', '.join(have) or 'nothing'))
    # "below about N MiB": where every collective of the table reaches 0.95
    ncoll = [i for i, h in enumerate(head) if op_of(h) in
             ('all_reduce', 'all_gather', 'reduce_scatter', 'broadcast')]
    cross = None
    for cells in rows:
        if re.search(r'\d+ x H\d+', cells[0]):
            continue
        if all(cells[i] and Decimal(cells[i]) >= Decimal('0.95') for i in ncoll):
            cross = size_of(cells[0])
            break
    for b in re.finditer(r'below about (\d+ [KMG]iB)', readme, re.I):
        if size_of(b.group(1)) != cross:
            out.append('README.md: "below about %s", but the table reaches 0.95 at %s' %
                       (b.group(1), cross and '%d MiB' % (cross >> 20)))
    # every GB/s figure is in a results page its paragraph links to
    for para in readme.split('\n\n'):
        for g in re.finditer(r'\b(\d{2,4}) GB/s', para):
            linked = [os.path.normpath(os.path.join(root, l)) for l in LINK.findall(para)
                      if 'bench/results/' in l]
            if not linked:
                out.append('README.md: %s GB/s cites no bench/results page' % g.group(1))
                continue
            pat = re.compile(r'\b%s(?:\.\d)?(?:-\d+)? GB/s' % g.group(1))
            if not any(pat.search(read(p)) for p in linked if os.path.isfile(p)):
                out.append('README.md: %s GB/s is not in %s' %
                           (g.group(1), ', '.join(os.path.relpath(p, root) for p in linked)))


def run(root, gitroot=None):
    tree = Tree(root, gitroot)
    out = []
    for page in pages(root):
        check_page(tree, page, out)
    check_readme_figures(root, out)
    return out


PLANTS = {
    'script': ('docs/planted.md', 'Run `sh scripts/no_such_script.sh` first.\n'),
    'bare script': ('docs/planted.md', 'Then no_such_tool.py.\n'),
    'mode': ('docs/planted.md', '    bash scripts/gpu_check.sh no-such-mode\n'),
    'torch call': ('docs/planted.md', '    pool = torch.cuda.NoSuchPool(backend.mem_allocator)\n'),
    'variable': ('docs/planted.md', 'Set NCCL_SYMMEM_NO_SUCH_VAR=1.\n'),
    'path': ('bench/results/planted.md', 'See plugin/no_such_file.c.\n'),
    'link': ('bench/results/planted.md', 'See [it](no-such-page.md).\n'),
    'archive without commit': ('bench/results/planted.md',
                               '## Archive\n\n- `bash scripts/gone.sh`\n'),
    'archive commit': ('bench/results/planted.md',
                       '## Archive\n\n- A1, at deadbee: `bash scripts/gone.sh`\n'),
    'archive script': ('bench/results/planted.md',
                       '## Archive\n\n- A1, at 0ab92a9: `bash scripts/never_was.sh`\n'),
    'README ratio': ('README.md', ('| 1 GiB | 1.01 |', '| 1 GiB | 1.11 |')),
    'README crossover': ('README.md', ('below about 512 MiB', 'below about 64 MiB')),
    'README GB/s': ('README.md', ('386 GB/s', '391 GB/s')),
}


def planted(root):
    missed = 0
    if run(root):
        print('planted: the tree itself has breaches; fix them first')
        return 1
    for name, (rel, text) in PLANTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, 'src')
            shutil.copytree(root, copy, ignore=shutil.ignore_patterns('.git', 'build*'))
            path = os.path.join(copy, rel)
            if isinstance(text, tuple):
                body = read(path)
                if text[0] not in body:
                    print('planted %s: %r is not in %s' % (name, text[0], rel))
                    missed += 1
                    continue
                body = body.replace(text[0], text[1], 1)
            else:
                body = (read(path) if os.path.exists(path) else '# Planted\n\n') + text
            with open(path, 'w') as f:
                f.write(body)
            found = run(copy, root)	# the history stays the tree's
            print('planted %s: %s' % (name, found[0] if found else 'MISSED'))
            missed += not found
    return 1 if missed else 0


def main(argv):
    if len(argv) == 3 and argv[1] == '--planted':
        return planted(argv[2])
    if len(argv) != 2:
        print(__doc__)
        return 2
    out = run(argv[1])
    for line in out:
        print(line)
    print('%d breach%s' % (len(out), '' if len(out) == 1 else 'es'))
    return 1 if out else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
