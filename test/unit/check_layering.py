#!/usr/bin/env python3
"""The layers of transport/ and the paths of plugin/, checked from their
sources (standard library only).

transport/: each file belongs to a layer, and a file may include a header,
or use a function or table defined in another file, only of its own layer
or one below; a backend never reaches another backend.  No file tests
which backend a connection is (ops == &tp_*_ops): that is what the ops are
for.  Files of one layer must not use each other in a cycle.  A backend's
knowledge stays in its files: outside them no file names its kind
(TP_BACKEND_IB ...), one of its shm_/tcp_/ib_ functions, types or fields,
or a request's backend part (the registry and the enum excepted).

plugin/ (when given): a comm's path is chosen once (path.h), so only the
inner path's files (inner_*.c, path_inner.c) call the inner plugin or say
via_inner, and no file tests which path it is on (== &path_*) but path.c,
which picks them; only path_local.c names a transport kind.  plugin/config/ includes nothing from outside itself,
and nothing outside it includes its private headers; nothing in plugin/
includes symmem-info's header (plugin/info/).

Prints each breach and exits 1; a new transport file must be given its
layer here.  --planted plants one breach of each rule in a copy of the
tree and exits 1 unless every one is caught.

    check_layering.py TRANSPORT_DIR [PLUGIN_DIR]
    check_layering.py --planted TRANSPORT_DIR PLUGIN_DIR
"""
import os
import re
import shutil
import sys
import tempfile

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
    errors += backend_knowledge(names, layers, code)
    return errors


# Fields of a backend's request part (shm.h's struct shm_req, tcp.h's
# tcp_req, ib.h's ib_req) distinctive enough to spot by name: a file
# outside the backend that touches one knows how it moves bytes (ask
# through an op: req_note, req_describe, req_close_wait).
BACKEND_FIELDS = {
    'shm': {'by_helper', 'stage_end', 'shadow', 'landed_seen', 'out_started'},
    'tcp': {'staged', 'hdr_done'},
    'ib': {'lkey', 'rkey', 'raddr', 'wrs', 'last_posted'},
}
MEMBER = re.compile(r'(?:->|\.)\s*([A-Za-z_]\w*)')
# A backend's ops table named outside the registry.
BACKEND_NAME = re.compile(r'\btp_(shm|tcp|ib)_ops\b')
# A backend's kind, and its functions, types and fields (shm_*, tcp_*,
# ib_*), members included; `sock_tcp_listen` is no backend's.
BACKEND_KIND = re.compile(r'\bTP_BACKEND_(SHM|TCP|IB)\b')
BACKEND_IDENT = re.compile(r'(?<![\w])(shm|tcp|ib)_\w+')
# The request's backend part, and the setup messages' (wire.h): opaque
# to everyone but the backend that types it.
PART = re.compile(r'(?:->|\.)\s*part\b|\bTP_REQ_PART\b')
# Where a backend's name may stand outside it: the registry (backend.c,
# the one file that enumerates the backends), the enum's definition and
# the ibverbs options of the public surface (transport.h), and the
# headers that define the parts (comm.h, wire.h).
KIND_OK = {'backend.c', 'backend.h', 'transport.h'}
IDENT_OK = {'backend.c', 'backend.h', 'transport.h'}
PART_OK = {'comm.h', 'wire.h'}
# Not a backend's: the listener's TCP socket serves every kind between
# hosts.
GENERIC = {'tcp_fd'}


def breach(errors, name, text, m, what):
    line = text.count('\n', 0, m.start()) + 1
    errors.append('%s:%d: %s' % (name, line, what))


def backend_knowledge(names, layers, code):
    """A backend's kind, names, request fields or part used outside it."""
    errors = []
    for name in names:
        rank, backend = layers[name]
        text = code[name]
        for m in MEMBER.finditer(text):
            for owner, fields in BACKEND_FIELDS.items():
                if m.group(1) in fields and owner != backend:
                    breach(errors, name, text, m, 'reads %s, a %s request field, outside '
                           'the %s backend; ask through an op' % (m.group(1), owner, owner))
        if backend is None and name not in PART_OK:
            for m in PART.finditer(text):
                breach(errors, name, text, m, 'reads a backend\'s part outside the '
                       'backend; ask through an op')
        for m in BACKEND_KIND.finditer(text):
            owner = m.group(1).lower()
            if owner != backend and name not in KIND_OK:
                breach(errors, name, text, m, 'names TP_BACKEND_%s outside the %s backend '
                       'and the registry; ask the registry (backend.h) or an op' %
                       (m.group(1), owner))
        for m in BACKEND_IDENT.finditer(text):
            owner = m.group(1)
            if owner != backend and name not in IDENT_OK and m.group(0) not in GENERIC:
                breach(errors, name, text, m, 'names %s, the %s backend\'s, outside it; '
                       'ask through an op' % (m.group(0), owner))
        if rank == REGISTRY:
            continue
        for m in BACKEND_NAME.finditer(text):
            if m.group(1) != backend:
                breach(errors, name, text, m, 'names tp_%s_ops outside the %s backend and '
                       'the registry' % (m.group(1), m.group(1)))
    return errors


# plugin/: the files that are the inner path, and the config module's
# private headers.
INNER_PATH = re.compile(r'^(inner_\w+|path_inner)\.[ch]$')
PATH_TEST = re.compile(r'[!=]=\s*&\s*path_\w+\b')
CONFIG_PRIVATE = {'config_internal.h', 'config_parse.h', 'config_vars.h'}


def sources(root):
    """(name, path) of every .c and .h under root, subfolders included."""
    out = []
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if f.endswith(('.c', '.h')):
                out.append((os.path.relpath(os.path.join(dirpath, f), root),
                            os.path.join(dirpath, f)))
    return out


def check_plugin(root):
    """Breaches of plugin/'s dispatch and folders."""
    errors, raw, code = [], {}, {}
    for rel, path in sources(root):
        with open(path, encoding='utf-8') as f:
            raw[rel] = f.read()
        code[rel] = strip(raw[rel])
    # The inner plugin's calls: what inner_*.c define.
    inner_api = set()
    for rel in code:
        if '/' not in rel and INNER_PATH.match(rel) and rel.endswith('.c') and rel != 'path_inner.c':
            inner_api.update(m.group(1) for m in FUNC_DEF.finditer(code[rel])
                             if m.group(1) not in KEYWORDS)
    for rel in sorted(code):
        folder, name = os.path.split(rel)
        for header in INCLUDE.findall(raw[rel]):
            if folder == 'config' and not os.path.exists(os.path.join(root, 'config', header)):
                errors.append('%s includes %s: the config module includes nothing from '
                              'outside plugin/config/' % (rel, header))
            if folder != 'config' and header in CONFIG_PRIVATE:
                errors.append('%s includes %s, private to plugin/config/ (config.h is its '
                              'header)' % (rel, header))
            if folder != 'info' and header == 'info.h':
                errors.append('%s includes info.h: symmem-info is a tool of its own' % rel)
        # NCCL_SYMMEM_BACKEND becomes the kind transport is told to use
        # in path_local.c, the plugin's one word on backends.
        if rel != 'path_local.c':
            for m in BACKEND_KIND.finditer(code[rel]):
                breach(errors, rel, code[rel], m, 'names TP_BACKEND_%s: only path_local.c '
                       'turns the configuration into a transport kind' % m.group(1))
        if folder or INNER_PATH.match(name):
            continue
        tags = re.sub(r'\b(struct|union|enum)\s+\w+', r'\1', code[rel])
        for m in IDENT.finditer(tags):
            ident = m.group(1)
            if ident == 'via_inner' or ident in inner_api:
                line = tags.count('\n', 0, m.start()) + 1
                errors.append('%s:%d: %s belongs to the inner path (path_inner.c); '
                              'dispatch through the comm\'s path instead' % (rel, line, ident))
        if name != 'path.c':
            for m in PATH_TEST.finditer(code[rel]):
                line = code[rel].count('\n', 0, m.start()) + 1
                errors.append('%s:%d: tests which path it is on; add a path op instead' %
                              (rel, line))
    return errors


def check(transport, plugin):
    return main(transport) + (check_plugin(plugin) if plugin else [])


# One breach of each rule: (folder, file, text appended, what the report says).
PLANTS = [
    ('transport', 'comm.c', '\nint planted_shm(void) { return tp_shm_ops.mem_kinds; }\n',
     'uses tp_shm_ops'),
    ('transport', 'tcp.c', '\nstatic int planted(const struct tp_comm *c)\n'
     '{ return c->ops == &tp_shm_ops; }\n', 'tests which backend'),
    ('transport', 'comm.c', '\nstatic int planted(const struct tp_req *r)\n'
     '{ return r->by_helper; }\n', 'reads by_helper, a shm request field'),
    ('transport', 'connect.c', '\nstatic int planted(const struct tp_req *r)\n'
     '{ return r->wrs != 0; }\n', 'reads wrs, a ib request field'),
    ('transport', 'connect.c', '\nstatic int planted(int kind)\n'
     '{ return kind == TP_BACKEND_IB; }\n', 'names TP_BACKEND_IB outside the ib backend'),
    ('transport', 'listen.c', '\nstatic void planted(void *held) { ib_held_put(held); }\n',
     'names ib_held_put, the ib backend\'s'),
    ('transport', 'comm.c', '\nstatic int planted(const struct tp_req *r)\n'
     '{ return shm_req_of(r)->direct; }\n', 'names shm_req_of, the shm backend\'s'),
    ('transport', 'trace.c', '\nstatic int planted(const struct tp_req *r)\n'
     '{ return r->part[0]; }\n', 'reads a backend\'s part'),
    ('transport', 'tcp.c', '\nstatic int planted(int kind)\n'
     '{ return kind == TP_BACKEND_SHM; }\n', 'names TP_BACKEND_SHM outside the shm backend'),
    ('plugin', 'net.c', '\nstatic int planted(int kind) { return kind == TP_BACKEND_TCP; }\n',
     'only path_local.c turns the configuration'),
    ('transport', 'tcp.c', '\nstatic int planted(const struct tp_req *r)\n'
     '{ return r->shadow != 0; }\n', 'reads shadow, a shm request field'),
    ('plugin', 'net.c', '\nstatic int planted(int via_inner) { return via_inner; }\n',
     'via_inner belongs to the inner path'),
    ('plugin', 'net.c', '\nstatic void planted(void *c) { inner_close(c); }\n',
     'inner_close belongs to the inner path'),
    ('plugin', 'net.c', '\nstatic int planted(const struct net_comm *c)\n'
     '{ return c->path == &path_inner; }\n', 'tests which path'),
    ('plugin', 'tuner.c', '\n#include "config_vars.h"\n', 'private to plugin/config/'),
    ('plugin', 'config/config.c', '\n#include "log.h"\n', 'includes nothing from outside'),
    ('plugin', 'monitor.c', '\n#include "info.h"\n', 'symmem-info is a tool of its own'),
]


def planted(transport, plugin):
    """1 unless every plant is reported, and the clean tree passes."""
    missed = check(transport, plugin)
    for e in missed:
        print('clean tree: %s' % e)
    for folder, name, text, says in PLANTS:
        with tempfile.TemporaryDirectory() as tmp:
            trees = {'transport': os.path.join(tmp, 'transport'),
                     'plugin': os.path.join(tmp, 'plugin')}
            shutil.copytree(transport, trees['transport'])
            shutil.copytree(plugin, trees['plugin'])
            with open(os.path.join(trees[folder], name), 'a', encoding='utf-8') as f:
                f.write(text)
            found = check(trees['transport'], trees['plugin'])
        if any(says in e for e in found):
            print('caught: %s/%s (%s)' % (folder, name, says))
        else:
            print('MISSED: %s/%s (%s): %s' % (folder, name, says, found))
            missed.append(name)
    return 1 if missed else 0


if __name__ == '__main__':
    args = sys.argv[1:]
    if args[:1] == ['--planted'] and len(args) == 3:
        sys.exit(planted(args[1], args[2]))
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    found = check(args[0], args[1] if len(args) == 2 else None)
    for e in found:
        print(e)
    print('%d breach(es) of the layers' % len(found) if found else 'layers hold')
    sys.exit(1 if found else 0)
