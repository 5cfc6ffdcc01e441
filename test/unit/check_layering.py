#!/usr/bin/env python3
"""The layers of transport/, checked from its sources (standard library only).

Each file belongs to a layer, and a file may include a header, or use a
function or table defined in another file, only of its own layer or one
below; a backend never reaches another backend.  No file tests which
backend a connection is (ops == &tp_*_ops): that is what the ops are for.
Files of one layer must not use each other in a cycle.  Prints each
breach and exits 1; a new file must be given its layer here.

    check_layering.py TRANSPORT_DIR
"""
import os
import re
import sys

# (layer name, rank, backend or None); a backend's layer holds only its files.
UTIL, CORE, BACKEND, REGISTRY, SETUP = 0, 1, 2, 3, 4
LAYERS = {
    # helpers of any connection: sockets, proofs, the handle, addresses
    'transport.h': UTIL, 'sock.h': UTIL, 'wire.h': UTIL, 'gid.h': UTIL,
    'sock.c': UTIL, 'auth.c': UTIL, 'handle.c': UTIL, 'hostid.c': UTIL,
    'namelist.c': UTIL, 'gid_net.c': UTIL,
    # the connection every backend builds on
    'comm.h': CORE, 'helper.h': CORE,
    'comm.c': CORE, 'trace.c': CORE, 'region.c': CORE, 'helper.c': CORE,
    # the registry, the only file that names every backend
    'backend.h': REGISTRY, 'backend.c': REGISTRY,
    # connection setup
    'listen.h': SETUP, 'connect.c': SETUP, 'listen.c': SETUP, 'candidate.c': SETUP,
    'room.c': SETUP,
}
BACKENDS = {'shm': re.compile(r'^shm(_\w+)?\.[ch]$'),
            'tcp': re.compile(r'^tcp(_\w+)?\.[ch]$'),
            'ib': re.compile(r'^(ib(_\w+)?|rdma)\.[ch]$')}


def layer_of(name):
    """(rank, backend) of a file, or None when it has no layer yet."""
    if name in LAYERS:
        return LAYERS[name], None
    for backend, pattern in BACKENDS.items():
        if pattern.match(name):
            return BACKEND, backend
    return None


def strip(text):
    """The code alone: no comments, strings, characters or directives."""
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return re.sub(r'^[ \t]*#[^\n]*(\\\n[^\n]*)*', '', text, flags=re.M)


KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof', 'do', 'else'}
FUNC_DEF = re.compile(r'^(?!static\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{',
                      re.M)
DATA_DEF = re.compile(r'^(?!static\b)(?:const\s+)?struct\s+\w+\s+([A-Za-z_]\w*)\s*=', re.M)
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
# An identifier, not a member's name after '.' or '->'.
IDENT = re.compile(r'(?<![\w.>])([A-Za-z_]\w*)')
OPS_TEST = re.compile(r'\bops\s*[!=]=|[!=]=\s*&\s*tp_\w+_ops\b')


def allowed(src, dst):
    """Whether a file of layer `src` may reach one of layer `dst`."""
    (srank, sback), (drank, dback) = src, dst
    if drank > srank:
        return False
    return not (srank == drank == BACKEND and sback != dback)


def cycles(edges, nodes):
    """Strongly connected groups of more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main(root):
    names = sorted(f for f in os.listdir(root) if f.endswith(('.c', '.h')))
    errors = []
    layers, raw, code = {}, {}, {}
    for name in names:
        layers[name] = layer_of(name)
        if layers[name] is None:
            errors.append('%s: no layer (give it one in check_layering.py)' % name)
        with open(os.path.join(root, name), encoding='utf-8') as f:
            raw[name] = f.read()
        code[name] = strip(raw[name])
    if errors:
        return errors

    # Who defines which global function or table.
    owner = {}
    for name in names:
        if name.endswith('.c'):
            for m in FUNC_DEF.finditer(code[name]):
                if m.group(1) not in KEYWORDS:
                    owner[m.group(1)] = name
            for m in DATA_DEF.finditer(code[name]):
                owner[m.group(1)] = name

    edges = {}
    for name in names:
        uses = set()
        for header in INCLUDE.findall(raw[name]):
            if header in layers:
                uses.add((header, 'includes'))
        # A header declares; the files that include it are the users.
        tags = re.sub(r'\b(struct|union|enum)\s+\w+', r'\1', code[name])
        idents = set() if name.endswith('.h') else set(IDENT.findall(tags))
        for ident in idents:
            if ident in owner and owner[ident] != name:
                uses.add((owner[ident], 'uses %s from' % ident))
        for other, how in sorted(uses):
            edges.setdefault(name, set()).add(other)
            if not allowed(layers[name], layers[other]):
                errors.append('%s %s %s: a lower layer (or another backend) must not '
                              'reach it' % (name, how, other))
        for m in OPS_TEST.finditer(code[name]):
            line = code[name].count('\n', 0, m.start()) + 1
            errors.append('%s:%d: tests which backend a connection is; add an op '
                          'instead' % (name, line))
    for group in cycles(edges, names):
        errors.append('cycle: %s use each other' % ', '.join(group))
    return errors


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    found = main(sys.argv[1])
    for e in found:
        print(e)
    print('%d breach(es) of the transport layers' % len(found) if found else
          'transport layers hold')
    sys.exit(1 if found else 0)
